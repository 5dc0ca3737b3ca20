"""Every remote on its own: a dead remote stops nothing, each remote's state is kept and shown.

Real stores, a real bare hub, the real git binary; the CLI runs as a
subprocess and the MCP surface through a real server.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys

import pytest

from gitmail import Store
from gitmail.index import indexer_for
from gitmail.model.records import Message, message_path
from gitmail.sync.interval import IntervalSyncer
from gitmail.sync.remotes import add_remote
from gitmail.sync.status import remote_states
from gitmail.sync.syncer import sync_project

from .conftest import git_run
from .mcp_harness import call, fail, read_json, run
from .sync_helpers import PROJECT, Machine

GITMAIL = [sys.executable, "-m", "gitmail"]


def _hub(tmp_path, name: str = "hub.git") -> str:
    hub = str(tmp_path / name)
    assert git_run("init", "-q", "--bare", "--initial-branch=main", hub).returncode == 0
    return hub


def _closed_port_url() -> str:
    """A git URL nothing listens on: connecting fails at once."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"git://127.0.0.1:{port}/nobody.git"


def _cli(home: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, GITMAIL_HOME=home)
    return subprocess.run([*GITMAIL, *args], capture_output=True, text=True, env=env)


@pytest.mark.slow  # a process per command
def test_a_dead_remote_stops_no_other_and_each_keeps_its_state(tmp_path):
    hub = _hub(tmp_path)
    a = Machine(str(tmp_path / "m"), "node-a")
    a.create_project()
    add_remote(a.store, PROJECT, "aaa-offline", _closed_port_url())  # synced first, by name
    add_remote(a.store, PROJECT, "hub", "file://" + hub)
    sent = a.send("BlueLake", ["GreenCastle"], "still leaves")

    report = sync_project(a.store, PROJECT)
    assert report.exit_code == 2 and report.to_dict()["status"] == "failed"
    offline, through = report.results
    assert offline.remote == "aaa-offline" and offline.error["code"] == "SYNC_FAILED"
    assert "git fetch from 'aaa-offline' failed" in offline.error["message"]
    assert through.error is None and through.pushed_to == "main" and through.messages_out == 1
    assert git_run("rev-parse", "main", cwd=hub).stdout.strip() == a.archive.tip()
    assert any(line.startswith(f"{report.project} <-> aaa-offline: FAILED [SYNC_FAILED]") for line in report.lines())

    states = {state.remote: state for state in remote_states(a.store, PROJECT)}
    assert states["aaa-offline"].state == "failing" and states["aaa-offline"].last_success is None
    assert states["aaa-offline"].last_error["code"] == "SYNC_FAILED"
    assert states["aaa-offline"].last_attempt <= states["aaa-offline"].last_error["at"]
    assert states["hub"].state == "ok" and states["hub"].last_error is None
    assert (states["hub"].ahead, states["hub"].behind) == (0, 0)
    assert states["hub"].last_result["records_out"] >= 1

    # The CLI reports the same, per remote, with exit status 2; `remote list` shows the states.
    synced = _cli(a.store.home, "sync", PROJECT, "--json")
    assert synced.returncode == 2
    (data,) = json.loads(synced.stdout)
    assert [r["remote"] for r in data["results"]] == ["aaa-offline", "hub"]
    assert [r["exit_code"] for r in data["results"]] == [2, 0]
    listed = _cli(a.store.home, "remote", "list", PROJECT)
    assert listed.returncode == 0
    rows = dict(line.split("\t", 1) for line in listed.stdout.splitlines())
    assert rows["aaa-offline"].split("\t")[1] == "failing" and "last error [SYNC_FAILED]" in rows["aaa-offline"]
    assert rows["hub"].split("\t")[1] == "ok" and "ahead 0 behind 0" in rows["hub"]
    every = json.loads(_cli(a.store.home, "remote", "list", "--json").stdout)
    assert {(row["project"], row["remote"]) for row in every} == {(report.project, "aaa-offline"),
                                                                  (report.project, "hub")}
    assert sent


def test_ahead_and_behind_follow_the_last_fetch(tmp_path):
    hub = _hub(tmp_path)
    a, b = Machine(str(tmp_path / "m"), "node-a"), Machine(str(tmp_path / "m"), "node-b")
    a.create_project()
    for machine in (a, b):
        add_remote(machine.store, PROJECT, "hub", "file://" + hub)
        sync_project(machine.store, PROJECT)
    a.send("BlueLake", ["GreenCastle"], "one")
    a.send("BlueLake", ["GreenCastle"], "two")
    (state,) = remote_states(a.store, PROJECT)
    assert (state.ahead, state.behind) == (2, 0)
    sync_project(a.store, PROJECT)
    b.send("GreenCastle", ["BlueLake"], "three")
    git_run("--git-dir", b.archive.git_dir, "fetch", "-q", "hub", "+refs/heads/main:refs/remotes/hub/main")
    (state,) = remote_states(b.store, PROJECT)
    assert (state.ahead, state.behind) == (1, 2)


@pytest.mark.slow  # a process per command
def test_exit_status_one_when_a_sync_leaves_something_to_look_at(tmp_path):
    hub = _hub(tmp_path)
    a, b = Machine(str(tmp_path / "m"), "node-a"), Machine(str(tmp_path / "m"), "node-b")
    a.create_project()
    for machine in (a, b):
        add_remote(machine.store, PROJECT, "hub", "file://" + hub)
        sync_project(machine.store, PROJECT)
    clash = a.store.clock.new_id()  # one new message written by hand on both machines, differently
    for machine, word in ((a, "ink"), (b, "pencil")):
        data = Message(id=clash, thread_id=clash, sender="BlueLake", subject="by hand", to=["GreenCastle"],
                       created_ts="2026-12-01T10:00:00.000Z", body=f"written in {word}\n").to_bytes()
        machine.write("by hand", None, lambda snap, data=data: [(message_path(clash), data)])
    assert _cli(a.store.home, "sync", PROJECT, "--quiet").returncode == 0
    synced = _cli(b.store.home, "sync", PROJECT)
    assert synced.returncode == 1, synced.stderr
    assert "conflict: " in synced.stdout and "other version is kept in conflicts/" in synced.stdout
    (state,) = remote_states(b.store, PROJECT)
    assert state.state == "attention" and state.last_result["conflicts"] == 1


def test_sync_returns_once_search_has_taken_the_messages_in(tmp_path):
    hub = _hub(tmp_path)
    a, b = Machine(str(tmp_path / "m"), "node-a"), Machine(str(tmp_path / "m"), "node-b")
    a.create_project()
    for machine in (a, b):
        add_remote(machine.store, PROJECT, "hub", "file://" + hub)
        sync_project(machine.store, PROJECT)
    index = indexer_for(b.store).project(PROJECT)
    index.catch_up()
    for i in range(30):
        a.send("BlueLake", ["GreenCastle"], f"quokka report {i}")
    sync_project(a.store, PROJECT, catch_up_index=False)
    report = sync_project(b.store, PROJECT)
    assert report.index["caught_up"] is True and report.index["tip"] == b.archive.tip()
    assert "search_behind" not in report.index
    # Nothing more to wait for: the search answers from what the sync put in.
    assert index.meta.pending_count() == 0
    assert len(index.search("quokka", limit=50)) == 30
    indexer_for(b.store).close()


def test_the_interval_syncer_logs_failures_and_keeps_syncing_the_rest(tmp_path, caplog):
    hub = _hub(tmp_path)
    a = Machine(str(tmp_path / "m"), "node-a")
    a.create_project()
    add_remote(a.store, PROJECT, "aaa-offline", _closed_port_url())
    add_remote(a.store, PROJECT, "hub", "file://" + hub)
    a.send("BlueLake", ["GreenCastle"], "through the interval syncer")
    syncer = IntervalSyncer(a.store, interval=3600)
    with caplog.at_level(logging.WARNING, logger="gitmail.sync"):
        (report,) = syncer.sync_now()
    assert report["exit_code"] == 2
    assert [r["remote"] for r in report["results"] if r["error"] is None] == ["hub"]
    assert git_run("rev-parse", "main", cwd=hub).stdout.strip() == a.archive.tip()
    assert any("aaa-offline" in record.getMessage() and "SYNC_FAILED" in record.getMessage()
               for record in caplog.records)


@pytest.mark.slow  # a real gitmail serve process
def test_sync_state_over_mcp(server, tmp_path):
    hub = _hub(tmp_path)
    store = Store(server.home, background=False)
    project = "/work/projects/state-over-mcp"

    async def setup():
        async with server.client() as client:
            await call(client, "ensure_project", human_key=project)
            return await call(client, "register_agent", project_key=project, program="p", model="m", name="Watcher")

    watcher = run(setup())
    proof = {"agent_name": "Watcher", "agent_token": watcher["registration_token"]}
    add_remote(store, project, "aaa-offline", _closed_port_url())
    add_remote(store, project, "hub", "file://" + hub)

    async def scenario():
        async with server.client() as client:
            refused = await fail(client, "sync_status", project_key=project)  # project-wide: needs a member
            before = await call(client, "sync_status", project_key=project, **proof)
            synced = await call(client, "sync_project", project_key=project, **proof)
            after = await call(client, "sync_status", project_key=project, **proof)
            health = await call(client, "health_check")
            resource = await read_json(client, f"resource://sync?project={project}")  # the session proved Watcher
            return refused, before, synced, after, health, resource

    refused, before, synced, after, health, resource = run(scenario())
    assert refused["code"] == "UNAUTHORIZED"
    assert [r["state"] for r in before["remotes"]] == ["never", "never"]
    assert synced["exit_code"] == 2 and synced["status"] == "failed"
    assert [bool(r["error"]) for r in synced["results"]] == [True, False]
    states = {r["remote"]: r for r in after["remotes"]}
    assert states["aaa-offline"]["state"] == "failing" and states["hub"]["state"] == "ok"
    assert states["hub"]["last_success"] and states["aaa-offline"]["last_error"]["code"] == "SYNC_FAILED"
    mine = [r for r in health["sync"]["remotes"] if r["project"] == store.resolve(project)]
    assert {r["remote"]: r["state"] for r in mine} == {"aaa-offline": "failing", "hub": "ok"}
    assert health["sync"]["status"] == "failing"
    # Anyone may call health_check: it names no URL and quotes no error text, only the code and time.
    failing = next(r for r in mine if r["remote"] == "aaa-offline")
    assert "url" not in failing and set(failing["last_error"]) == {"code", "at"}
    assert resource["remotes"] == after["remotes"] and resource["project"] == store.resolve(project)
