"""Acting identities by name (``agent_id``) against a real `gitmail serve`: made on first use, reused after."""

from __future__ import annotations

import subprocess

import pytest

from gitmail import Store

from .mcp_harness import call, fail, run
from .test_mcp_hierarchy import Archive, fresh_project, lead_and_peer

SHARES_SERVER = True  # each test makes a project of its own

pytestmark = pytest.mark.slow  # a real gitmail serve process


def subjects(archive: Archive, count: int) -> list[str]:
    """The subject lines of the archive's last ``count`` commits, newest first."""
    git_dir = Store(archive.home, background=False).archive(archive.project).git_dir
    return subprocess.run(["git", "--git-dir", git_dir, "log", f"-{count}", "--format=%s"], capture_output=True,
                          text=True, check=True).stdout.splitlines()


def test_an_agent_id_is_made_below_the_caller_on_first_use_and_reused_after(server):
    project = fresh_project()
    archive = Archive(server.home, project)

    async def scenario():
        async with server.client() as lead:
            tokens = await lead_and_peer(lead, project)
            first = await call(lead, "send_message", project_key=project, sender_name="Lead", agent_id="fix-login",
                               to=["Peer"], subject="starting", body_md="on the login bug")
            made = subjects(archive, 2)
            again = await call(lead, "send_message", project_key=project, sender_name="Lead", agent_id="fix-login",
                               to=["Peer"], subject="done", body_md="fixed")
            sends_only = subjects(archive, 1)
            inbox = await call(lead, "fetch_inbox", project_key=project, agent_name="Peer",
                               agent_token=tokens["Peer"])
            position = await call(lead, "agent_position", project_key=project, agent_name="Lead")
            own = await call(lead, "fetch_inbox", project_key=project, agent_name="Lead", agent_id="fix-login")
            return first, made, again, sends_only, inbox, position, own

    first, made, again, sends_only, inbox, position, own = run(scenario())
    assert first["deliveries"][0]["payload"]["from"] == "fix-login"
    assert made[1] == "Lead made its acting identity fix-login" and made[0].startswith("fix-login sent")
    assert again["deliveries"][0]["payload"]["from"] == "fix-login" and sends_only[0].startswith("fix-login sent")
    assert [m["from"] for m in inbox] == ["fix-login", "fix-login"]
    children = position["children"]
    assert [c["name"] for c in children] == ["fix-login"] and children[0]["scopes"] == ["manager@*"]
    assert own == []  # read as the acting identity: its own (empty) inbox


def test_an_agent_id_another_agent_holds_is_refused_with_a_code_and_nothing_written(server):
    project = fresh_project()
    archive = Archive(server.home, project)

    async def scenario():
        async with server.client() as lead:
            tokens = await lead_and_peer(lead, project)
            await call(lead, "send_message", project_key=project, sender_name="Lead", agent_id="fix-login",
                       to=["Lead"], subject="s", body_md="b")
            viewer = await call(lead, "spawn_agent", project_key=project, agent_name="Lead", name="Watcher",
                                scope=["viewer@*"])
            before = archive.tip()
            send = {"project_key": project, "to": ["Lead"], "subject": "s", "body_md": "b"}
            refusals = {
                "another's identity": await fail(lead, "send_message", sender_name="Peer", agent_id="fix-login",
                                                 sender_token=tokens["Peer"], **send),
                "another agent": await fail(lead, "send_message", sender_name="Lead", agent_id="Peer", **send),
                "both": await fail(lead, "send_message", sender_name="Lead", agent_id="x", acting_as="Watcher",
                                   **send),
                "not a name": await fail(lead, "send_message", sender_name="Lead", agent_id="no spaces", **send),
                "not a manager": await fail(lead, "send_message", sender_name="Watcher", agent_id="sub-task",
                                            sender_token=viewer["registration_token"], **send),
            }
            return before, archive.tip(), refusals

    before, after, refusals = run(scenario())
    assert after == before
    assert {what: body["code"] for what, body in refusals.items()} == {
        "another's identity": "AGENT_ID_TAKEN", "another agent": "AGENT_ID_TAKEN", "both": "INVALID_ARGUMENT",
        "not a name": "INVALID_ARGUMENT", "not a manager": "SCOPE_DENIED"}
    assert refusals["another's identity"]["data"] == {"agent_id": "fix-login", "agent": "Peer"}
