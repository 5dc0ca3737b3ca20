"""What an agent is offered and told: tool profiles, their sizes, and the answers to calls that guess.

Each test runs a real ``gitmail serve`` and reads it as a client does: the
sizes are the bytes of the HTTP response to a session-less ``tools/list``;
the calls go through the official MCP client (and, where the wire matters,
the 1.x client in its own venv, :mod:`tests.mcp1`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from typing import Any

import httpx2 as httpx
import pytest

from . import mcp1
from .mcp_harness import ROOT, ServerProcess, call, child_env, fail, read_json, run
from .test_http_guards import store_state
from .test_seed_surface import DOCUMENTED

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]  # real gitmail serve processes, four at once

CORE = {"macro_start_session", "send_message", "reply_message", "fetch_inbox", "acknowledge_message", "catch_up",
        "read_messages", "search_messages", "file_reservation_paths", "release_file_reservations"}
BUDGETS = {"core": 12_000, "default": 40_000, "all": 100_000}
# Ceilings below a budget, where a listing stands now (docs/decisions.md, "What a tool listing leaves out"): a tool
# or a field added to the default listing has to find its room there first. They only come down.
HELD = {"default": 39_850}
OUTSIDE_DEFAULT = {"spawn_agent", "update_agent", "set_card", "agent_position", "ensure_product", "products_link",
                   "sync_project", "list_remotes", "sync_status", "take_seat", "journal", "acquire_build_slot",
                   "scan_overdue_acks", "read_compact", "upload_file", "list_files", "describe_file", "download_file",
                   "create_channel", "list_channels", "post_channel", "read_channel", "search_channel",
                   "org_context", "new_session", "write_memory"}


def listed(server: ServerProcess) -> tuple[int, list[dict[str, Any]]]:
    """The bytes of a session-less ``tools/list`` answer, and its tools."""
    response = httpx.post(server.url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, timeout=60,
                          headers={"accept": "application/json, text/event-stream"})
    assert response.status_code == 200, response.text
    return len(response.content), response.json()["result"]["tools"]


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    """One server per profile measured, each on its own store."""
    started = {}
    try:
        for profile in ("core", "default", "all", "core,hierarchy"):
            home = str(tmp_path_factory.mktemp("home"))
            started[profile] = ServerProcess(home, extra_args=("--tools", profile))
        yield started
    finally:
        for server in started.values():
            server.stop()


def test_each_profile_lists_its_tools_within_its_budget(servers):
    sizes, names = {}, {}
    for profile, server in servers.items():
        sizes[profile], tools = listed(server)
        names[profile] = {tool["name"] for tool in tools}
    assert names["core"] == CORE
    assert DOCUMENTED | {"catch_up", "read_messages"} <= names["default"]
    assert not names["default"] & OUTSIDE_DEFAULT
    assert names["default"] | OUTSIDE_DEFAULT <= names["all"] and len(names["all"]) == 87
    assert names["core,hierarchy"] == CORE | {"spawn_agent", "update_agent", "set_card", "org_context",
                                              "write_memory", "agent_position"}
    sends = {profile: next(t for t in listed(servers[profile])[1] if t["name"] == "send_message")
             for profile in ("default", "all")}
    assert "attachment_ids" not in sends["default"]["inputSchema"]["properties"]  # listed with the files family
    inboxes = {profile: next(t for t in listed(servers[profile])[1] if t["name"] == "fetch_inbox")
               for profile in ("default", "core,hierarchy")}
    assert inboxes["default"]["annotations"]["readOnlyHint"] is True
    assert "agent_id" not in inboxes["default"]["inputSchema"]["properties"]
    assert inboxes["core,hierarchy"]["annotations"]["readOnlyHint"] is False  # a new agent_id makes its identity
    assert "agent_id" in inboxes["core,hierarchy"]["inputSchema"]["properties"]
    assert sends["all"]["inputSchema"]["properties"]["attachment_ids"]["maxItems"] == 20
    for profile, budget in BUDGETS.items():
        assert sizes[profile] <= min(HELD.get(profile, budget), budget), (profile, sizes[profile])


def test_arguments_taken_only_for_older_calls_are_not_listed(servers):
    _, tools = listed(servers["all"])
    by_name = {tool["name"]: tool["inputSchema"] for tool in tools}
    for name in ("summarize_thread", "summarize_recent", "macro_prepare_thread"):
        assert not {"llm_mode", "llm_model"} & set(by_name[name]["properties"]), name  # summaries are extracted
    assert by_name["fetch_inbox"]["properties"]["since_ts"]["type"] == ["string", "integer", "number"]

    async def summarized() -> dict[str, Any]:
        async with servers["all"].client() as client:
            project = f"/work/surface/{uuid.uuid4().hex[:8]}"
            await call(client, "ensure_project", human_key=project)
            await call(client, "register_agent", project_key=project, program="p", model="m", name="Ada")
            sent = await call(client, "send_message", project_key=project, sender_name="Ada", to=["Ada"],
                              subject="Plan", body_md="- TODO: the plan")
            return await call(client, "summarize_thread", project_key=project, llm_mode=True, llm_model="m",
                              thread_id=sent["deliveries"][0]["payload"]["thread_id"])

    answer = run(summarized())  # still taken, and the answer says no model ran
    assert answer["mode"] == "extractive" and "no language model" in answer["note"]


def test_each_tools_access_rule_is_served_once_by_a_resource_not_repeated_in_the_listing(servers):
    from .test_access import published_rules

    every = published_rules()

    async def rules(server: ServerProcess) -> dict[str, str]:
        async with server.client() as client:
            return await read_json(client, "resource://tooling/access")

    for profile in ("core", "core,hierarchy"):
        tools = listed(servers[profile])[1]
        assert not any("gitmail/access" in (tool.get("_meta") or {}) for tool in tools)
        served = run(rules(servers[profile]))
        assert served == {tool["name"]: every[tool["name"]] for tool in tools}


def test_seat_and_acting_as_are_listed_only_with_the_tools_that_make_them_useful(servers):
    def arguments(profile: str, tool: str) -> set[str]:
        return {t["name"]: set(t["inputSchema"]["properties"]) for t in listed(servers[profile])[1]}[tool]

    for profile in ("core", "default"):
        assert not {"seat", "acting_as", "registration_token"} & arguments(profile, "send_message")
    assert "acting_as" in arguments("core,hierarchy", "fetch_inbox")
    assert "seat" not in arguments("core,hierarchy", "fetch_inbox")
    assert {"seat", "acting_as"} <= arguments("all", "send_message")
    assert "registration_token" not in arguments("all", "send_message")

    project = f"/work/surface/{uuid.uuid4().hex[:8]}"

    async def scenario():
        async with servers["default"].client() as client:
            await call(client, "ensure_project", human_key=project)
            await call(client, "register_agent", project_key=project, program="p", model="m", name="Ada")
            seat = await fail(client, "mark_message_read", project_key=project, agent_name="Ada",
                              message_id="x", seat="token")
            below = await fail(client, "fetch_inbox", project_key=project, agent_name="Ada", acting_as="Kid")
            return seat, below

    seat, below = run(scenario())
    assert seat["code"] == "TOOL_NOT_SERVED" and seat["data"]["family"] == "coordination", seat
    assert below["code"] == "TOOL_NOT_SERVED" and below["data"]["family"] == "hierarchy", below
    assert "--tools default,hierarchy" in below["message"]


def test_a_tool_outside_the_profile_names_the_profile_that_has_it_and_runs_nothing(servers):
    server = servers["core"]
    before = store_state(server.home)

    async def scenario():
        async with server.client() as client:
            return (await fail(client, "take_seat", project_key="/work/x", agent_name="Ada"),
                    await fail(client, "whois", project_key="/work/x", agent_name="Ada"),
                    await fail(client, "ensure_project", human_key="/work/surface/never"))

    seat, whois, ensure = run(scenario())
    assert seat["code"] == "TOOL_NOT_SERVED"
    assert seat["data"] == {"tool": "take_seat", "family": "coordination", "profile": "core",
                            "served_by": "coordination"}
    assert "--tools core,coordination" in seat["message"] and "GITMAIL_TOOLS=core,coordination" in seat["message"]
    assert whois["data"]["served_by"] == "default" and ensure["data"]["served_by"] == "default"
    assert store_state(server.home) == before


RENAMED = {"create_agent": "register_agent", "check_my_messages": "fetch_inbox",
           "claim_paths": "file_reservation_paths", "release_claims": "release_file_reservations",
           "renew_claims": "renew_file_reservations", "summarize_threads": "summarize_thread"}


def test_unknown_and_older_names_get_the_error_body_naming_what_to_call(servers):
    server = servers["default"]
    project = f"/work/surface/{uuid.uuid4().hex[:8]}"

    async def scenario():
        async with server.client() as client:
            await call(client, "ensure_project", human_key=project)
            await call(client, "register_agent", project_key=project, program="p", model="m", name="Ada")
            before = store_state(server.home)
            typo = await fail(client, "fetch_inbx", project_key=project, agent_name="Ada")
            nothing = await fail(client, "make_coffee")
            older = {name: await fail(client, name, project_key=project) for name in RENAMED}
            sender = await fail(client, "send_message", project_key=project, from_agent="Ada", to=["Ada"],
                                subject="s", body_md="b")
            replying = await fail(client, "send_message", project_key=project, sender_name="Ada", to=["Ada"],
                                  subject="s", body_md="b", reply_to_message_id="m1")
            return before, store_state(server.home), typo, nothing, older, sender, replying

    before, after, typo, nothing, older, sender, replying = run(scenario())
    assert after == before
    assert typo["code"] == "UNKNOWN_TOOL" and typo["data"]["nearest"][0] == "fetch_inbox", typo
    assert "did you mean fetch_inbox" in typo["message"]
    assert nothing["code"] == "UNKNOWN_TOOL" and nothing["data"] == {"tool": "make_coffee", "nearest": []}
    for name, use in RENAMED.items():
        assert older[name]["code"] == "UNKNOWN_TOOL" and older[name]["data"] == {"tool": name, "use": use}
        assert f"call {use} instead" in older[name]["message"]
    assert sender["code"] == "INVALID_ARGUMENT"
    assert sender["data"] == {"argument": "from_agent", "use": "sender_name", "tool": "send_message"}
    assert replying["data"] == {"argument": "reply_to_message_id", "use": "message_id", "tool": "reply_message"}
    assert "call reply_message with message_id" in replying["message"]


def test_registration_token_and_mentions_still_reach_the_agent(servers):
    server = servers["default"]
    project = f"/work/surface/{uuid.uuid4().hex[:8]}"

    async def scenario():
        async with server.client() as first:
            await call(first, "ensure_project", human_key=project)
            tokens = {name: (await call(first, "register_agent", project_key=project, program="p", model="m",
                                        name=name))["registration_token"] for name in ("Dad", "Kid")}
            await call(first, "set_contact_policy", project_key=project, agent_name="Kid", policy="open")
        async with server.client() as second:  # a new session: only the tokens prove the agents
            sent = await call(second, "send_message", project_key=project, sender_name="Dad", to=["@Kid"],
                              subject="hello", body_md="hi", registration_token=tokens["Dad"])
            inbox = await call(second, "fetch_inbox", project_key=project, agent_name="Kid",
                               registration_token=tokens["Kid"])
            clash = await fail(second, "fetch_inbox", project_key=project, agent_name="Kid",
                               agent_token=tokens["Kid"], registration_token=tokens["Dad"])
            return sent, inbox, clash

    sent, inbox, clash = run(scenario())
    assert sent["deliveries"][0]["payload"]["to"] == ["Kid"]
    assert [m["subject"] for m in inbox] == ["hello"]
    assert clash["code"] == "INVALID_ARGUMENT" and clash["data"] == {"argument": "registration_token"}


MCP1_UNKNOWN = """
import asyncio, json, sys
from mcp import ClientSession
from mcp.client.streamable_http import streamablehttp_client

async def main():
    async with streamablehttp_client(sys.argv[1]) as streams:
        async with ClientSession(streams[0], streams[1]) as session:
            await session.initialize()
            result = await session.call_tool("check_my_messages", {"project_key": "/x", "agent_name": "A"})
            print(json.dumps({"is_error": result.isError, "text": result.content[0].text,
                              "structured": result.structuredContent}))

asyncio.run(main())
"""


@pytest.mark.timeout(600)
def test_the_mcp1_client_reads_an_unknown_tool_as_an_error_result_with_the_body(servers):
    python = mcp1.ensure()
    env = child_env(servers["default"].home)
    env.pop("PYTHONPATH", None)
    proc = subprocess.run([python, "-c", MCP1_UNKNOWN, servers["default"].url], capture_output=True, text=True,
                          env=env, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    seen = json.loads(proc.stdout)
    assert seen["is_error"] is True
    assert json.loads(seen["text"]) == seen["structured"]
    assert seen["structured"]["code"] == "UNKNOWN_TOOL" and seen["structured"]["data"]["use"] == "fetch_inbox"


def test_serve_refuses_an_unknown_profile_and_takes_one_from_the_environment(tmp_path):
    refused = subprocess.run([sys.executable, "-m", "gitmail", "--home", str(tmp_path / "a"), "serve", "--tools",
                              "core,everything"], capture_output=True, text=True, env=child_env(str(tmp_path / "a")),
                             cwd=ROOT, timeout=120)
    assert refused.returncode != 0
    assert "'everything'" in refused.stderr and "core, default, all" in refused.stderr, refused.stderr
    assert not os.path.exists(tmp_path / "a" / "projects")
    server = ServerProcess(str(tmp_path / "b"), env={"GITMAIL_TOOLS": "core"})
    try:
        assert {tool["name"] for tool in listed(server)[1]} == CORE
    finally:
        server.stop()
