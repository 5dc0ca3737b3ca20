"""What a sync reports for people to look at, on every machine it reaches, exactly once.

Identity clashes (one name registered on two machines apart), overlapping
exclusive reservations granted apart, and conflicts; through the mail
domain and, for the losing agent, through a real MCP server.
"""

from __future__ import annotations

import pytest

from gitmail import Store
from gitmail.mail.facade import Mail
from gitmail.model.records import Message, message_path
from gitmail.storage import nodes
from gitmail.storage.fsck import check_archive
from gitmail.sync.remotes import add_remote
from gitmail.sync.syncer import sync_project

from .conftest import git_run
from .mcp_harness import call, fail, run
from .sync_helpers import PROJECT, Machine, tree_files


def _hub(tmp_path) -> str:
    hub = str(tmp_path / "hub.git")
    assert git_run("init", "-q", "--bare", "--initial-branch=main", hub).returncode == 0
    return hub


def _mail(tmp_path, name: str) -> Mail:
    home = tmp_path / name
    home.mkdir()
    (home / "node").write_text(name + "\n")
    return Mail(Store(str(home), background=False, durable=False))


def _join(mails: list[Mail], hub: str) -> None:
    mails[0].ensure_project(PROJECT)
    for mail in mails:
        add_remote(mail.store, PROJECT, "hub", "file://" + hub)
        sync_project(mail.store, PROJECT)


@pytest.mark.slow  # a real gitmail serve process
def test_an_identity_clash_is_reported_and_the_loser_told_how_to_go_on(server, tmp_path):
    hub = _hub(tmp_path)
    first = _mail(tmp_path, "laptop")
    second = Mail(Store(server.home, background=False))  # the machine whose server the losing agent talks to
    _join([first, second], hub)
    kept = first.register_agent(PROJECT, "claude-code", "opus", name="Nova")  # earlier: keeps the name

    async def register():
        async with server.client() as client:
            mine = await call(client, "register_agent", project_key=PROJECT, program="codex", model="gpt",
                              name="Nova")
            await call(client, "fetch_inbox", project_key=PROJECT, agent_name="Nova")  # bound session: fine
            return mine

    mine = run(register())
    assert mine["id"] != kept["id"]

    reports = [sync_project(mail.store, PROJECT) for mail in (first, second, first)]
    clashes = [[c for r in report.results for c in r.conflicts if c["kind"] == "identity"] for report in reports]
    assert [len(found) for found in clashes] == [0, 1, 1]  # once on each machine, when it arrives there
    for found in clashes[1:]:
        (clash,) = found
        assert clash["agent"] == "Nova" and clash["kept"]["id"] == kept["id"] and clash["parked"]["id"] == mine["id"]
        assert clash["kept"]["node"] == "laptop"
    assert reports[1].exit_code == 1
    assert any("identity clash: agent Nova" in line and "must register under another name" in line
               for line in reports[1].lines())
    assert sync_project(second.store, PROJECT).results[0].conflicts == []  # not reported twice
    assert tree_files(first.store) == tree_files(second.store)
    assert first.verify_agent_token(PROJECT, "Nova", kept["registration_token"])

    async def afterwards():
        async with server.client() as client:
            by_token = await fail(client, "fetch_inbox", project_key=PROJECT, agent_name="Nova",
                                  agent_token=mine["registration_token"])
            again = await call(client, "register_agent", project_key=PROJECT, program="codex", model="gpt",
                               name="Nova-2")
            inbox = await call(client, "fetch_inbox", project_key=PROJECT, agent_name="Nova-2")
            return by_token, again, inbox

    by_token, again, inbox = run(afterwards())
    assert by_token["code"] == "IDENTITY_CLASH"
    assert "register_agent with a new name" in by_token["message"] and "laptop" in by_token["message"]
    assert by_token["data"]["kept_id"] == kept["id"] and by_token["data"]["parked_id"] == mine["id"]
    assert again["name"] == "Nova-2" and inbox is not None  # the way on works

    # A session that registered a name keeps acting as that registration only: when a sync hands the name
    # to an earlier registration from another machine, the session gets the same error, never the other agent.
    earlier = first.register_agent(PROJECT, "claude-code", "opus", name="Vega")

    async def bound_session():
        async with server.client() as client:
            await call(client, "register_agent", project_key=PROJECT, program="codex", model="gpt", name="Vega")
            before = await call(client, "fetch_inbox", project_key=PROJECT, agent_name="Vega")
            for mail in (first, second):
                sync_project(mail.store, PROJECT)
            after = await fail(client, "fetch_inbox", project_key=PROJECT, agent_name="Vega")
            return before, after

    before, after = run(bound_session())
    assert before is not None
    assert after["code"] == "IDENTITY_CLASH" and after["data"]["kept_id"] == earlier["id"]


def test_overlapping_reservations_granted_apart_are_reported_and_notified_once(tmp_path):
    hub = _hub(tmp_path)
    a, b = _mail(tmp_path, "node-a"), _mail(tmp_path, "node-b")
    _join([a, b], hub)
    for name in ("BlueLake", "GreenCastle"):
        a.register_agent(PROJECT, "test", "model", name=name)
    nodes.handover(a.store.archive(PROJECT), agent="GreenCastle", to="node-b", hlc=a.store.clock.tick())
    for mail in (a, b):
        sync_project(mail.store, PROJECT)
    held_a = a.file_reservation_paths(PROJECT, "BlueLake", ["src/api/*.py"], ttl_seconds=3600)
    held_b = b.file_reservation_paths(PROJECT, "GreenCastle", ["src/api/handlers.py"], ttl_seconds=3600)
    assert held_a["granted"] and held_b["granted"]  # apart, each machine granted its own

    reports = [sync_project(mail.store, PROJECT) for mail in (a, b, a, b)]
    found = [report.results[0].overlaps for report in reports]
    assert [len(items) for items in found] == [0, 1, 1, 0]  # once on each machine
    pair = found[1][0]
    assert {r["agent"] for r in pair["reservations"]} == {"BlueLake", "GreenCastle"}
    assert found[2][0]["notice"] == pair["notice"]
    assert reports[1].exit_code == 1
    assert any("overlapping reservations: BlueLake holds 'src/api/*.py' and GreenCastle holds "
               "'src/api/handlers.py'" in line for line in reports[1].lines())
    files = tree_files(a.store)
    assert files == tree_files(b.store)
    notices = [path for path in files if path.startswith("messages/")
               and Message.from_bytes(files[path], path).subject.startswith("Overlapping reservations")]
    assert notices == [message_path(pair["notice"])]  # one notice, though both machines found the overlap
    for mail, holder in ((a, "BlueLake"), (b, "GreenCastle")):
        inbox = mail.fetch_inbox(PROJECT, holder, limit=10)
        assert [m["subject"] for m in inbox if m["id"] == pair["notice"]], holder
        assert check_archive(mail.store.archive(PROJECT), run_git=False) == []


def test_a_conflict_is_reported_once_on_every_machine_that_receives_it(tmp_path):
    hub = _hub(tmp_path)
    machines = [Machine(str(tmp_path / "m"), f"node-{name}") for name in "abc"]
    machines[0].create_project()
    for machine in machines:
        add_remote(machine.store, PROJECT, "hub", "file://" + hub)
        sync_project(machine.store, PROJECT)
    a, b, c = machines
    clash = a.store.clock.new_id()  # one new message written by hand on two machines, differently
    for machine, word in ((a, "ink"), (b, "pencil")):
        data = Message(id=clash, thread_id=clash, sender="BlueLake", subject="by hand", to=["GreenCastle"],
                       created_ts="2026-12-01T10:00:00.000Z", body=f"written in {word}\n").to_bytes()
        machine.write("by hand", None, lambda snap, data=data: [(message_path(clash), data)])
    seen = {machine.name: 0 for machine in machines}
    for machine in (a, b, a, c, a, b, c):
        for result in sync_project(machine.store, PROJECT).results:
            for conflict in result.conflicts:
                assert conflict["path"] == message_path(clash) and conflict["kind"] == "record"
                seen[machine.name] += 1
    assert seen == {"node-a": 1, "node-b": 1, "node-c": 1}
