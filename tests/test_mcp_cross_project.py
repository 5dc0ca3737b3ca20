"""Cross-project mail over MCP: a server killed between the two commits, and two stores syncing two projects.

Real ``gitmail serve`` processes on loopback, the official MCP client, real
hubs (bare repositories with the record checker as their ``pre-receive``).
"""

from __future__ import annotations

import os
import textwrap

import pytest

from gitmail import Mail, Store
from gitmail.mail import relay
from gitmail.mail.facade import SendOptions
from gitmail.model.records import Message, Relay, inbox_path, message_path, relay_path
from gitmail.storage import nodes
from gitmail.storage.fsck import check_archive
from gitmail.sync.hookinstall import install_hub
from gitmail.sync.remotes import add_remote
from gitmail.sync.syncer import sync_project

from .conftest import git
from .mcp_harness import ROOT, ServerProcess, call, run

pytestmark = pytest.mark.slow

FRONT, BACK = "/data/team/frontend", "/data/team/backend"

# Loaded by the server's interpreter at start (sitecustomize): the process ends itself, as a kill -9 would,
# right after the sender's commit and before the other project's copy is written.
CRASH = textwrap.dedent("""
    import os
    if os.environ.get("GITMAIL_TEST_CRASH_MARK"):
        import gitmail.mail.relay as _relay

        def _die(source, message_id):
            with open(os.environ["GITMAIL_TEST_CRASH_MARK"], "w") as mark:
                mark.write(message_id)
            os._exit(137)

        _relay.FAULT_HOOK = _die
""")


async def _team(client) -> dict[str, str]:
    """Alice in the frontend, Bob in the backend (contacts_only), contact approved across, a product of both."""
    tokens = {}
    for key, name in ((FRONT, "Alice"), (BACK, "Bob")):
        await call(client, "ensure_project", human_key=key)
        tokens[name] = (await call(client, "register_agent", project_key=key, program="p", model="m",
                                   name=name))["registration_token"]
        await call(client, "products_link", product_key="team", project_key=key)
    await call(client, "set_contact_policy", project_key=BACK, agent_name="Bob", policy="contacts_only")
    await call(client, "request_contact", project_key=FRONT, from_agent="Alice", to_agent="Bob", to_project=BACK,
               reason="the api")
    await call(client, "respond_contact", project_key=BACK, to_agent="Bob", from_agent=f"Alice@{FRONT}",
               accept=True)
    return tokens


def test_a_server_killed_between_the_two_commits_completes_the_copy_at_its_next_start(tmp_path):
    home, faults, mark = str(tmp_path / "home"), tmp_path / "faults", str(tmp_path / "crashed-at")
    faults.mkdir()
    (faults / "sitecustomize.py").write_text(CRASH)
    env = {"PYTHONPATH": os.pathsep.join([str(faults), ROOT]), "GITMAIL_TEST_CRASH_MARK": mark}
    server = ServerProcess(home, env=env, extra_args=("--tools", "all"))
    tokens: dict[str, str] = {}
    try:
        async def until_the_crash():
            async with server.client() as client:
                tokens.update(await _team(client))
                await client.call_tool("send_message", {
                    "project_key": FRONT, "sender_name": "Alice", "to": [f"Bob@{BACK}"], "subject": "schema v3",
                    "body_md": "the new schema", "idempotency_key": "schema-v3"}, raise_on_error=False)

        with pytest.raises(Exception):  # noqa: B017 - the server dies mid-call; the client reports it its own way
            run(until_the_crash())
        assert server.proc.wait(30) == 137
    finally:
        server.stop()
    with open(mark, encoding="utf-8") as handle:
        mid = handle.read()
    store = Store(home, background=False)
    back = store.resolve(BACK)
    owed = store.archive(FRONT).snapshot().load(relay_path(back, mid), Relay)
    assert store.archive(FRONT).snapshot().load(message_path(mid), Message) is not None  # the send happened
    assert owed is not None and owed.delivered_at is None
    assert not store.archive(BACK).snapshot().exists(message_path(mid))  # its copy is still owed
    del store

    server = ServerProcess(home, extra_args=("--tools", "all"))  # no fault: its start completes what is owed
    try:
        async def after():
            async with server.client() as client:
                return await call(client, "fetch_inbox", project_key=BACK, agent_name="Bob",
                                  agent_token=tokens["Bob"])

        inbox = run(after())
        assert [m["id"] for m in inbox if m["subject"] == "schema v3"] == [mid]
    finally:
        server.stop()
    store = Store(home, background=False)
    b = store.archive(BACK).snapshot()
    assert b.exists(message_path(mid)) and b.exists(inbox_path("Bob", mid))
    assert store.archive(FRONT).snapshot().load(relay_path(back, mid), Relay).delivered_at is not None
    assert check_archive(store.archive(FRONT)) == [] and check_archive(store.archive(BACK)) == []
    # a retry of the interrupted call finds the message, and doubles nothing
    again = Mail(store).send_message(FRONT, "Alice", [f"Bob@{BACK}"], "schema v3", "the new schema",
                                     options=SendOptions(idempotency_key="schema-v3"))
    assert again["created"] is False and [d["payload"]["id"] for d in again["deliveries"]] == [mid, mid]
    log = git("--git-dir", store.paths(back).archive, "log", "--format=%s", "--", message_path(mid))
    assert len(log.strip().splitlines()) == 1 and "schema v3" in log


def _hubs(tmp_path) -> dict[str, str]:
    hubs = {}
    for key in (FRONT, BACK):
        hub = str(tmp_path / f"{key.rsplit('/', 1)[1]}-hub.git")
        git("init", "-q", "--bare", "--initial-branch=main", hub)
        install_hub(hub)
        hubs[key] = hub
    return hubs


def test_two_projects_synced_between_two_stores_through_checked_hubs(server, tmp_path, monkeypatch):
    hubs = _hubs(tmp_path)

    async def first():
        async with server.client() as client:
            tokens = await _team(client)
            sent = await call(client, "send_message", project_key=FRONT, sender_name="Alice", to=[f"Bob@{BACK}"],
                              subject="deploy window", body_md="friday at noon")
            for key in (FRONT, BACK):
                add_remote(Store(server.home, background=False), key, "hub", hubs[key])
                synced = await call(client, "sync_project", project_key=key)
                assert synced["status"] == "ok", synced
            return tokens, sent["deliveries"][0]["payload"]["id"]

    tokens, first_id = run(first())

    # The other machine takes both projects in, and Bob answers there; that machine stops between the commits.
    other = Store(str(tmp_path / "other"), background=False)
    here = Store(server.home, background=False)  # Bob works from the other machine: the server hands it over
    nodes.handover(here.archive(BACK), agent="Bob", to=other.node, hlc=here.clock.tick())
    assert sync_project(here, BACK).exit_code == 0
    for key in (FRONT, BACK):
        add_remote(other, key, "hub", hubs[key])
        sync_project(other, key)
    mail = Mail(other)
    assert [p["human_key"] for p in mail.ensure_product("team")["projects"]] == [BACK, FRONT]
    assert other.archive(BACK).snapshot().exists(inbox_path("Bob", first_id))

    class Stopped(Exception):
        pass

    def stop(source: str, message_id: str) -> None:
        raise Stopped(message_id)

    monkeypatch.setattr(relay, "FAULT_HOOK", stop)
    with pytest.raises(Stopped) as stopped:
        mail.reply_message(BACK, first_id, "Bob", "noon works")
    monkeypatch.setattr(relay, "FAULT_HOOK", None)
    answer = str(stopped.value)
    assert not other.archive(FRONT).snapshot().exists(message_path(answer))
    # Its next sync pushes the backend (the owed relay travels with it), then completes the copy here too.
    report = sync_project(other, BACK, catch_up_index=False)
    assert report.results[0].error is None and [r["message_id"] for r in report.relayed] == [answer]
    assert other.archive(FRONT).snapshot().exists(inbox_path("Alice", answer))

    async def second():
        async with server.client() as client:
            back = await call(client, "sync_project", project_key=BACK, agent_name="Bob", agent_token=tokens["Bob"])
            front = await call(client, "sync_project", project_key=FRONT, agent_name="Alice",
                               agent_token=tokens["Alice"])
            return back, front

    back_sync, front_sync = run(second())
    # the server took the relay in and wrote the frontend's copy (its sync completes what is owed)
    assert [r["message_id"] for r in back_sync.get("relayed", [])] == [answer]
    assert front_sync["results"][0]["conflicts"] == []

    # Both machines wrote the frontend's copy on their own: the same bytes at the same path, so the merge
    # finds nothing to settle, the checked hubs take it, and nothing is owed any more.
    assert mail.complete_relays() == []
    for key in (FRONT, BACK):
        result = sync_project(other, key).results[0]
        assert result.error is None and result.conflicts == [], result

    async def third():
        async with server.client() as client:
            for key in (FRONT, BACK):
                await call(client, "sync_project", project_key=key, agent_name="Alice" if key == FRONT else "Bob",
                           agent_token=tokens["Alice" if key == FRONT else "Bob"])
            await call(client, "whois", project_key=FRONT, agent_name="Alice")
            inbox = await call(client, "fetch_inbox_product", product_key="team", agent_name="Alice",
                               agent_token=tokens["Alice"])
            hits = await call(client, "search_messages_product", product_key="team", query="noon",
                              agent_name="Alice", agent_token=tokens["Alice"])
            return inbox, hits

    inbox, hits = run(third())
    assert [(m["id"], m["project"]) for m in inbox["messages"] if m["id"] == answer] == [(answer, FRONT)]
    assert answer in [h["id"] for h in hits["results"]]
    assert {h["project"] for h in hits["results"]} == {FRONT}  # Alice proved only the frontend here
    assert [p["project"] for p in hits["not_read"]] == [BACK]
    for key in (FRONT, BACK):
        hub = hubs[key]
        files = git("--git-dir", hub, "ls-tree", "-r", "--name-only", "main").split()
        assert message_path(answer) in files and message_path(first_id) in files
        assert not any(f.startswith("conflicts/") for f in files)
    server_store = Store(server.home, background=False)
    for store in (server_store, other):
        for key in (FRONT, BACK):
            assert check_archive(store.archive(key)) == [], (store.home, key)
        relayed = store.archive(BACK).snapshot().load(relay_path(store.resolve(FRONT), answer), Relay)
        assert relayed.delivered_at is not None
