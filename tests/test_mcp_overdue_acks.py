"""Overdue acknowledgements through MCP: two machines escalate the same one, and a sync leaves one claim.

Each machine is a store of its own served by a real server on loopback (in
this process, so the test's clock is theirs) and reached with the official
client; the machines sync through a bare hub whose hooks check every push.
"""

from __future__ import annotations

import pytest

from gitmail import Store
from gitmail.mail.acksettings import AckSettings
from gitmail.mail.facade import Mail
from gitmail.storage.fsck import check_archive
from gitmail.sync.hookinstall import install_hub
from gitmail.sync.remotes import add_remote
from gitmail.sync.syncer import sync_project

from .conftest import git
from .inprocess_server import InProcessServer
from .mcp_harness import ServerProcess, call, read_json, run

pytestmark = pytest.mark.slow  # two uvicorn servers, git pushes through a hub's hooks

PROJECT = "/data/projects/acks"
CLAIMS = AckSettings(enabled=True, ttl_seconds=1800, escalation_enabled=True, escalation_mode="claim",
                     claim_holder="Ops", claim_exclusive=True)


def _files(store: Store, folder: str) -> list[str]:
    return [path for path in store.archive(PROJECT).snapshot().walk() if path.startswith(folder + "/")]


def test_two_machines_escalating_the_same_overdue_ack_leave_one_claim_after_sync(tmp_path, wall):
    hub = str(tmp_path / "hub.git")
    git("init", "-q", "--bare", "--initial-branch=main", hub)
    install_hub(hub)
    stores = [Store(str(tmp_path / name), background=False, durable=False, wall=wall)
              for name in ("laptop", "desktop")]
    with InProcessServer(stores[0], mail=Mail(stores[0], ack=CLAIMS)) as one, \
            InProcessServer(stores[1], mail=Mail(stores[1], ack=CLAIMS)) as two:

        async def scenario():
            async with one.client() as a, two.client() as b:
                await call(a, "ensure_project", human_key=PROJECT)
                tokens = {}
                for name in ("Alice", "Bob", "Ops"):
                    registered = await call(a, "register_agent", project_key=PROJECT, program="p", model="m",
                                            name=name)
                    tokens[name] = registered["registration_token"]
                    await call(a, "set_contact_policy", project_key=PROJECT, agent_name=name, policy="open")
                sent = await call(a, "send_message", project_key=PROJECT, sender_name="Alice", to=["Bob"],
                                  subject="Freeze the schema", body_md="Acknowledge, please.", ack_required=True)
                message_id = sent["deliveries"][0]["payload"]["id"]
                for store in stores:
                    add_remote(store, PROJECT, "hub", "file://" + hub)
                alice = {"agent_name": "Alice", "agent_token": tokens["Alice"]}
                assert (await call(a, "sync_project", project_key=PROJECT, **alice))["exit_code"] == 0
                # the new machine's first sync is its operator's (`gitmail sync`): no agent is known there yet
                assert sync_project(stores[1], PROJECT).exit_code == 0

                early = await call(b, "scan_overdue_acks", project_key=PROJECT, **alice)
                assert early["overdue"] == [] and early["escalated"] == []
                wall.advance(1801)  # Bob never acknowledges

                scans = [await call(client, "scan_overdue_acks", project_key=PROJECT, **alice) for client in (a, b)]
                for scan in scans:
                    assert [(o["message_id"], o["agent"]) for o in scan["overdue"]] == [(message_id, "Bob")]
                    (escalation,) = scan["escalated"]
                    assert (escalation["mode"], escalation["holder"]) == ("claim", "Ops")
                # apart, each machine filed its claim and its notice: under the same IDs
                assert {s["escalated"][0]["claim_id"] for s in scans} == {scans[0]["escalated"][0]["claim_id"]}
                assert len({s["escalated"][0]["notice_id"] for s in scans}) == 1
                assert len({s["escalated"][0]["node"] for s in scans}) == 2

                for client in (a, b, a):
                    assert (await call(client, "sync_project", project_key=PROJECT, **alice))["exit_code"] == 0

                ops = {"agent_name": "Ops", "agent_token": tokens["Ops"]}
                outcome = []
                for client in (a, b):
                    claims = await call(client, "list_file_reservations", project_key=PROJECT, agent_name="Ops")
                    inbox = await call(client, "fetch_inbox", project_key=PROJECT, **ops)
                    again = await call(client, "scan_overdue_acks", project_key=PROJECT, **alice)
                    outcome.append((claims, inbox, again))
                return message_id, scans[0]["escalated"][0], outcome

        message_id, escalation, outcome = run(scenario())

    for claims, inbox, again in outcome:
        (claim,) = claims["file_reservations"]
        assert claim["id"] == escalation["claim_id"] and claim["exclusive"] is True
        messages = inbox["messages"] if isinstance(inbox, dict) else inbox
        assert [m["id"] for m in messages] == [escalation["notice_id"]]
        assert again["escalated"] == [] and again["overdue"][0]["escalated"] is True
    tips = {store.archive(PROJECT).tip() for store in stores}
    assert tips == {git("--git-dir", hub, "rev-parse", "main").strip()}
    for store in stores:
        assert len(_files(store, "escalations")) == 1 and _files(store, "conflicts") == []
        assert check_archive(store.archive(PROJECT)) == []
    assert message_id in _files(stores[0], "escalations")[0]


def test_serve_takes_its_settings_from_the_environment_and_refuses_a_bad_one(tmp_path):
    with pytest.raises(RuntimeError) as info:
        ServerProcess(str(tmp_path / "bad"), env={"GITMAIL_ACK_ESCALATION_MODE": "page"})
    assert "GITMAIL_ACK_ESCALATION_MODE" in str(info.value)
    server = ServerProcess(str(tmp_path / "good"), extra_args=("--tools", "all"),
                           env={"GITMAIL_ACK_TTL_SECONDS": "900", "GITMAIL_ACK_ESCALATION_ENABLED": "1"})
    try:
        async def environment():
            async with server.client() as client:
                return await read_json(client, "resource://config/environment")

        shown = run(environment())["ack_overdue"]
    finally:
        server.stop()
    assert (shown["ttl_seconds"], shown["escalation_enabled"], shown["escalation_mode"]) == (900, True, "log")
