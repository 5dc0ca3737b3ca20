"""gitmail's git integration with real git: the merge driver, hub checks, the watcher."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import pytest

from gitmail.index import indexer_for
from gitmail.model.ids import new_id
from gitmail.model.records import Agent, Reservation, inbox_path, message_path, reservation_path
from gitmail.sync.hookinstall import GITATTRIBUTES, install_hub
from gitmail.sync.remotes import add_remote
from gitmail.sync.syncer import sync_project
from gitmail.sync.watch import Watcher, ref_folders

from .conftest import git_run
from .sync_helpers import PROJECT, Machine, person_key, signed_clone, tree_files

GITMAIL = [sys.executable, "-m", "gitmail"]


def _hub(tmp_path) -> str:
    hub = str(tmp_path / "hub.git")
    assert git_run("init", "-q", "--bare", "--initial-branch=main", hub).returncode == 0
    return hub


def _pair(tmp_path, hub: str) -> tuple[Machine, Machine]:
    a, b = Machine(str(tmp_path / "m"), "node-a"), Machine(str(tmp_path / "m"), "node-b")
    a.create_project()
    for machine in (a, b):
        add_remote(machine.store, PROJECT, "hub", "file://" + hub)
        sync_project(machine.store, PROJECT)
    return a, b


def _hand_message(subject: str, word: str) -> tuple[str, bytes]:
    message_id = new_id()
    text = (f"---\nid: {message_id}\nthread_id: {message_id}\nfrom: BlueLake\nsubject: {subject}\n"
            f"created: 2026-12-01T10:00:00.000Z\nto:\n- GreenCastle\n---\nWritten by hand about {word}.\n")
    return message_id, text.encode()


def _write(root: str, path: str, data: bytes) -> None:
    full = os.path.join(root, path)
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, "wb") as handle:
        handle.write(data)


@pytest.mark.slow  # gitmail and git processes
def test_plain_git_pull_with_the_driver_builds_the_sync_tree(tmp_path):
    hub = _hub(tmp_path)
    install_hub(hub)  # pushes below also pass the hub's checks
    a, b = _pair(tmp_path, hub)
    first = a.send("BlueLake", ["GreenCastle"], "kickoff")
    held = a.reserve("BlueLake", "docs/**")
    for machine in (a, b):
        sync_project(machine.store, PROJECT)
    assert a.archive.snapshot().read(".gitattributes") == GITATTRIBUTES

    # Both sides change the same files while apart.
    a.send("BlueLake", ["GreenCastle"], "a only")
    a.ack("GreenCastle", first, when="2026-12-01T10:00:09.000Z")
    a.edit_profile("BlueLake", task_description="from a")
    a.release("BlueLake", held)
    b.send("GreenCastle", ["BlueLake"], "b only")
    b.ack("GreenCastle", first, when="2026-12-01T10:00:02.000Z")
    b.edit_profile("BlueLake", contact_policy="open")
    renewed = b.archive.snapshot().load(reservation_path(held), Reservation)
    renewed.expires_ts, renewed.hlc = "2099-12-31T00:00:00.000Z", b.store.clock.tick()
    b.write("renew", "BlueLake", lambda snap: [renewed])
    sync_project(b.store, PROJECT)

    # A human clone of a's archive pulls from the hub with plain git.
    clone = str(tmp_path / "clone")
    assert git_run("clone", "-q", a.archive.git_dir, clone).returncode == 0
    installed = subprocess.run([*GITMAIL, "hooks", "install", "--repo", clone], capture_output=True, text=True)
    assert installed.returncode == 0, installed.stderr
    pulled = git_run("pull", "-q", "--no-rebase", "--no-edit", "file://" + hub, "main", cwd=clone)
    assert pulled.returncode == 0, pulled.stdout + pulled.stderr
    pulled_tree = git_run("rev-parse", "HEAD^{tree}", cwd=clone).stdout.strip()

    sync_project(a.store, PROJECT)
    archive = a.archive
    assert str(archive.repo[archive.tip()].peel(2).id) == pulled_tree
    files = tree_files(a.store)
    profile = Agent.from_bytes(files["agents/BlueLake/profile.yaml"], "agents/BlueLake/profile.yaml")
    assert (profile.task_description, profile.contact_policy) == ("from a", "open")
    assert b"2026-12-01T10:00:02.000Z" in files[f"agents/GreenCastle/receipts/{message_path(first)[9:-3]}.yaml"]


@pytest.mark.slow  # gitmail and git processes
def test_hub_refuses_damaging_pushes_and_names_the_file(tmp_path):
    hub = _hub(tmp_path)
    result = subprocess.run([*GITMAIL, "hooks", "install", "--hub", hub], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    a, _ = _pair(tmp_path, hub)
    kept = a.send("BlueLake", ["GreenCastle"], "keep me")
    key = person_key(a.archive, str(tmp_path / "person"))
    sync_project(a.store, PROJECT)
    clone = str(tmp_path / "human")
    signed_clone(hub, clone, key)
    before = git_run("rev-parse", "main", cwd=hub).stdout

    def attempt(edit, expected: str) -> None:
        edit()
        assert git_run("add", "-A", cwd=clone).returncode == 0
        assert git_run("commit", "-q", "-m", "by hand", cwd=clone).returncode == 0
        pushed = git_run("push", "origin", "main", cwd=clone)
        assert pushed.returncode != 0
        assert expected in pushed.stderr, pushed.stderr
        assert git_run("rev-parse", "main", cwd=hub).stdout == before  # the hub is unchanged
        git_run("reset", "-q", "--hard", "origin/main", cwd=clone)

    bad_id = new_id()
    attempt(lambda: _write(clone, message_path(bad_id), b"---\nid: nope\n---\nbody\n"),
            f"refused {message_path(bad_id)}: ")
    attempt(lambda: _write(clone, message_path(kept), b"---\nrewritten\n---\n"), "is immutable and this changes it")
    attempt(lambda: os.unlink(os.path.join(clone, message_path(kept))), "deleted without a tombstone")
    attempt(lambda: _write(clone, "notes.txt", b"hello\n"), "not a path where gitmail keeps records")

    # A well-formed message written by hand is accepted.
    good_id, data = _hand_message("Hand written", "otters")
    _write(clone, message_path(good_id), data)
    _write(clone, inbox_path("GreenCastle", good_id), data)
    git_run("add", "-A", cwd=clone)
    git_run("commit", "-q", "-m", "a message by hand", cwd=clone)
    pushed = git_run("push", "origin", "main", cwd=clone)
    assert pushed.returncode == 0, pushed.stderr
    sync_project(a.store, PROJECT)
    assert message_path(good_id) in tree_files(a.store)


def test_watcher_wakes_the_index_for_a_human_push(tmp_path):
    machine = Machine(str(tmp_path / "m"), "node-w")
    machine.create_project()
    store, archive = machine.store, machine.archive
    indexer = indexer_for(store)
    index = indexer.project(PROJECT)
    index.catch_up()
    woke = threading.Event()
    seen: list[str] = []

    def on_change(slug: str) -> None:
        index.catch_up()
        seen.append(slug)
        woke.set()

    clone = str(tmp_path / "clone")
    signed_clone(archive.git_dir, clone, person_key(archive, str(tmp_path / "person")))
    message_id, data = _hand_message("Zebrafish sighting", "zebrafish")
    _write(clone, message_path(message_id), data)
    _write(clone, inbox_path("GreenCastle", message_id), data)
    git_run("add", "-A", cwd=clone)
    git_run("commit", "-q", "-m", "note by hand", cwd=clone)
    with Watcher(store, on_change):
        assert git_run("push", "-q", "origin", "main", cwd=clone).returncode == 0
        assert woke.wait(60), "the watcher never saw the push"  # how soon it does: benchmarks/bench_sync.py
        hits = index.search("zebrafish")
    indexer.close()
    assert seen[0] == store.resolve(PROJECT)
    assert [hit["id"] for hit in hits] == [message_id]


def test_watcher_follows_refs_in_folders_made_after_it_started_and_not_the_object_store(tmp_path):
    machine = Machine(str(tmp_path / "m"), "node-n")
    machine.create_project()
    git_dir = machine.archive.git_dir
    folders = ref_folders(git_dir)
    assert folders[0] == git_dir and os.path.join(git_dir, "refs", "heads") in folders
    assert not [folder for folder in folders if folder.startswith(os.path.join(git_dir, "objects"))]
    hub_ref = os.path.join(git_dir, "refs", "remotes", "hub", "main")
    tip = machine.archive.tip()
    # A commit that main never points to: only the new ref moves to it.
    other = git_run("--git-dir", git_dir, "commit-tree", f"{tip}^{{tree}}", "-p", tip, "-m", "elsewhere").stdout.strip()
    wanted: list[str] = []
    seen = threading.Event()

    def on_change(slug: str) -> None:  # the callback's view: the ref already where it was moved
        with open(hub_ref) as handle:
            if wanted and handle.read().strip() == wanted[-1]:
                seen.set()

    with Watcher(machine.store, on_change):
        for target in (tip, other):  # into folders that did not exist when watching began, then once more
            seen.clear()
            wanted.append(target)
            assert git_run("--git-dir", git_dir, "update-ref", "refs/remotes/hub/main", target).returncode == 0
            assert seen.wait(60), f"the watcher never called back after the ref moved to {target}"
    assert os.path.join(git_dir, "refs", "remotes", "hub") in ref_folders(git_dir)


@pytest.mark.slow  # a gitmail watch process
def test_watch_command_catches_up_after_an_outside_change(tmp_path):
    machine = Machine(str(tmp_path / "m"), "node-cli")
    machine.create_project()
    env = dict(os.environ, GITMAIL_HOME=machine.store.home)
    proc = subprocess.Popen([*GITMAIL, "watch"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout.readline().startswith("watching 1 project(s)")
        other = Machine(str(tmp_path / "m"), "node-cli")  # another process's store on the same home
        other.send("BlueLake", ["GreenCastle"], "from elsewhere")
        line = proc.stdout.readline()
        assert line.startswith(machine.store.resolve(PROJECT)) and "caught up to" in line
        assert line.split()[4][:12] == other.archive.tip()[:12]
    finally:
        proc.terminate()
        proc.communicate(timeout=10)
    assert proc.returncode == 0


@pytest.mark.slow  # a process per command
def test_sync_and_remote_commands(tmp_path):
    hub = _hub(tmp_path)
    a = Machine(str(tmp_path / "m"), "node-c1")
    a.create_project()
    a.send("BlueLake", ["GreenCastle"], "over the cli")
    env = dict(os.environ, GITMAIL_HOME=a.store.home)

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*GITMAIL, *args], capture_output=True, text=True, env=env)

    assert run("remote", "add", PROJECT, "hub", "file://" + hub).returncode == 0
    listed = run("remote", "list", PROJECT)
    assert listed.stdout.strip() == f"hub\tfile://{hub}\tnever"
    synced = run("sync", PROJECT, "--json")
    assert synced.returncode == 0, synced.stderr
    import json

    report = json.loads(synced.stdout)
    assert report[0]["exit_code"] == 0
    assert report[0]["results"][0]["pushed"] and report[0]["results"][0]["messages_out"] == 1
    missing = run("sync", PROJECT, "--remote", "nope")
    assert missing.returncode == 2 and "NOT_FOUND" in missing.stderr
    assert git_run("rev-parse", "main", cwd=hub).stdout.strip() == a.archive.tip()
