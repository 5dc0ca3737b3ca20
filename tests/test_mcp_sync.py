"""Sync on demand over MCP: a server pulls a teammate's mail and pushes its own."""

from __future__ import annotations

import pytest

from gitmail import Mail, Store
from gitmail.storage import nodes
from gitmail.sync.remotes import add_remote
from gitmail.sync.syncer import sync_project

from .conftest import git
from .mcp_harness import call, fail, run
from .test_mcp_mail import pair

pytestmark = pytest.mark.slow  # a real gitmail serve process

PROJECT = "/work/projects/mcp-sync"


def test_sync_tool_exchanges_mail_with_a_hub(server, tmp_path):
    hub = str(tmp_path / "hub.git")
    git("init", "-q", "--bare", "-b", "main", hub)

    async def setup():
        async with server.client() as client:
            blue, green = await pair(client, PROJECT)
            await call(client, "send_message", project_key=PROJECT, sender_name="BlueLake", to=["GreenCastle"],
                       subject="from the server machine", body_md="hello hub", sender_token=blue["registration_token"])
            return blue, green

    blue, green = run(setup())
    here = Store(server.home, background=False)
    add_remote(here, PROJECT, "hub", hub)
    other = Store(str(tmp_path / "other-home"), background=False)
    # GreenCastle works from the teammate's machine: the server's node, where it was registered, hands it over.
    nodes.handover(here.archive(PROJECT), agent="GreenCastle", to=other.node, hlc=here.clock.tick())

    async def first_sync():
        async with server.client() as client:
            remotes = await call(client, "list_remotes", project_key=PROJECT, agent_name="BlueLake",
                                   registration_token=blue["registration_token"])
            synced = await call(client, "sync_project", project_key=PROJECT, agent_name="BlueLake",
                                   agent_token=blue["registration_token"])
            unknown = await fail(client, "sync_project", project_key=PROJECT, remote="nowhere")
            return remotes, synced, unknown

    remotes, synced, unknown = run(first_sync())
    assert remotes["remotes"] == {"hub": hub}
    assert synced["exit_code"] == 0 and synced["status"] == "ok"
    (result,) = synced["results"]
    assert result["remote"] == "hub" and result["messages_out"] >= 1 and result["conflicts"] == []
    assert unknown["code"] == "NOT_FOUND" and "remote" in unknown["message"]
    assert "from the server machine" in git("--git-dir", hub, "grep", "-h", "subject:", "main", "--", "messages")

    # A teammate on another machine pulls, writes, and pushes back through the hub.
    add_remote(other, PROJECT, "hub", hub)
    sync_project(other, PROJECT, "hub")
    Mail(other).send_message(PROJECT, "GreenCastle", ["BlueLake"], "from the other machine", "hello back")
    sync_project(other, PROJECT, "hub")

    async def second_sync():
        async with server.client() as client:
            synced = await call(client, "sync_project", project_key=PROJECT, remote="hub", agent_name="BlueLake",
                                   agent_token=blue["registration_token"])
            inbox = await call(client, "fetch_inbox", project_key=PROJECT, agent_name="BlueLake",
                               agent_token=blue["registration_token"])
            return synced, inbox

    synced, inbox = run(second_sync())
    assert synced["results"][0]["messages_in"] >= 1
    subjects = [message["subject"] for message in (inbox["messages"] if isinstance(inbox, dict) else inbox)]
    assert "from the other machine" in subjects
