"""An agent prompted with the agent-mail tool documentation, as a script: every documented tool, its argument names.

Runs under any Python that has the official ``mcp`` package, 1.x or 2.x (it
imports nothing of gitmail), so the same session is driven by both major
versions of the client::

    python tests/seed_client.py http URL PROJECT_REPO
    python tests/seed_client.py stdio PROJECT_REPO -- COMMAND ARGS...

PROJECT_REPO is the absolute path of a git repository used as the project key
(the commit guard is installed there). It prints one JSON document: for each
step, the tool or resource, whether it failed, and what the agent reads (the
JSON of the first text block, the raw text when that is not JSON).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import uuid
from contextlib import asynccontextmanager
from typing import Any

from mcp import ClientSession, StdioServerParameters, stdio_client

try:  # mcp 2.x, and later 1.x releases
    from mcp.client.streamable_http import streamable_http_client as _http_client
except ImportError:  # earlier 1.x
    from mcp.client.streamable_http import streamablehttp_client as _http_client  # type: ignore[no-redef]


def _field(obj: Any, *names: str) -> Any:
    """An attribute under its 1.x or 2.x name."""
    for name in names:
        if hasattr(obj, name):
            return getattr(obj, name)
    return None


def _read(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


class Agent:
    """Calls tools and reads resources as a prompted agent does: by the first text block."""

    def __init__(self, session: ClientSession):
        self.session = session
        self.steps: list[dict[str, Any]] = []

    async def tool(self, label: str, tool_name: str, /, **arguments: Any) -> Any:
        result = await self.session.call_tool(tool_name, arguments)
        error = bool(_field(result, "isError", "is_error"))
        content = _field(result, "content") or []
        body = _read(content[0].text) if content else None
        self.steps.append({"step": label, "tool": tool_name, "error": error, "body": body,
                           "blocks": len(content)})
        return body

    async def resource(self, label: str, uri: str, /) -> Any:
        try:
            result = await self.session.read_resource(uri)
        except Exception as exc:  # noqa: BLE001 - a failed read is a protocol error in both versions
            self.steps.append({"step": label, "resource": uri, "error": True, "body": str(exc)})
            return None
        body = _read(_field(result, "contents")[0].text)
        self.steps.append({"step": label, "resource": uri, "error": False, "body": body})
        return body


async def scenario(agent: Agent, repo: str) -> None:
    """The documented tools, in the order an agent meets them, with the documented argument names."""
    key = repo
    other = f"/tmp/seed-surface/{uuid.uuid4().hex[:8]}"
    window = str(uuid.uuid4())
    await agent.tool("health", "health_check")
    await agent.tool("ensure", "ensure_project", human_key=key)
    blue = await agent.tool("register", "register_agent", project_key=key, program="codex-cli", model="gpt5-codex",
                            name="BlueLake", task_description="Auth refactor", window_uuid=window)
    green = await agent.tool("create", "create_agent_identity", project_key=key, program="claude-code",
                             model="opus-4.1", name_hint="GreenCastle", task_description="Navbar")
    await agent.tool("whois", "whois", project_key=key, agent_name="GreenCastle")
    await agent.tool("list_agents", "list_agents", project_key=key)
    await agent.resource("agents", f"resource://agents/{key}")
    await agent.tool("windows", "list_window_identities", project_key=key)
    await agent.tool("rename_window", "rename_window", project_key=key, window_uuid=window,
                     new_display_name="BlueLake")
    await agent.tool("policy", "set_contact_policy", project_key=key, agent_name="GreenCastle", policy="auto")
    await agent.tool("request", "request_contact", project_key=key, from_agent="BlueLake", to_agent="GreenCastle",
                     reason="API contract changes")
    await agent.tool("respond", "respond_contact", project_key=key, to_agent="GreenCastle", from_agent="BlueLake",
                     accept=True)
    await agent.tool("contacts", "list_contacts", project_key=key, agent_name="BlueLake")
    sent = await agent.tool("send", "send_message", project_key=key, sender_name="BlueLake", to=["GreenCastle"],
                            subject="Plan for /api/users", body_md="See below.\n\n- TODO: review the plan",
                            importance="high", ack_required=True, topic="plan",
                            sender_token=blue["registration_token"])
    payload = sent["deliveries"][0]["payload"]
    await agent.tool("reply", "reply_message", project_key=key, message_id=payload["id"], sender_name="GreenCastle",
                     body_md="Questions about the plan...", sender_token=green["registration_token"])
    await agent.tool("inbox", "fetch_inbox", project_key=key, agent_name="GreenCastle",
                     since_ts="2025-10-23T00:00:00+00:00", include_bodies=True)
    await agent.tool("topic", "fetch_topic", project_key=key, topic_name="plan", agent_name="GreenCastle")
    await agent.tool("read", "mark_message_read", project_key=key, agent_name="GreenCastle",
                     message_id=payload["id"])
    await agent.tool("ack", "acknowledge_message", project_key=key, agent_name="GreenCastle",
                     message_id=payload["id"])
    await agent.tool("search", "search_messages", project_key=key, query='"review the plan" OR users', limit=50)
    await agent.tool("thread", "summarize_thread", project_key=key, thread_id=payload["thread_id"],
                     include_examples=True)
    await agent.tool("threads", "summarize_thread", project_key=key, thread_id=f"{payload['thread_id']},TKT-2")
    await agent.tool("recent", "summarize_recent", project_key=key, since_hours=1, llm_mode=True, format="json")
    await agent.tool("summaries", "fetch_summary", project_key=key, since_hours=24, limit=5)
    reserved = await agent.tool("reserve", "file_reservation_paths", project_key=key, agent_name="GreenCastle",
                                paths=["app/api/*.py"], ttl_seconds=7200, exclusive=True, reason="migrations")
    await agent.tool("renew", "renew_file_reservations", project_key=key, agent_name="GreenCastle",
                     extend_seconds=600)
    await agent.tool("force", "force_release_file_reservation", project_key=key, agent_name="BlueLake",
                     file_reservation_id=reserved["granted"][0]["id"])
    await agent.tool("release", "release_file_reservations", project_key=key, agent_name="GreenCastle")
    await agent.tool("start", "macro_start_session", human_key=key, program="codex-cli", model="gpt5",
                     task_description="Docs", file_reservation_paths=["docs/*.md"], file_reservation_reason="docs")
    await agent.tool("prepare", "macro_prepare_thread", project_key=key, thread_id=payload["thread_id"],
                     program="claude-code", model="opus-4.1", agent_name="GreenCastle", llm_mode=False)
    await agent.tool("cycle", "macro_file_reservation_cycle", project_key=key, agent_name="GreenCastle",
                     paths=["app/models/*.py"], ttl_seconds=3600, exclusive=True, reason="cycle", auto_release=True)
    await agent.tool("handshake", "macro_contact_handshake", project_key=key, requester="GreenCastle",
                     target="BlueLake", reason="follow-up", auto_accept=True, welcome_subject="Hello",
                     welcome_body="Thanks for the plan.")
    await agent.tool("guard", "install_precommit_guard", project_key=key, code_repo_path=repo)
    await agent.tool("unguard", "uninstall_precommit_guard", code_repo_path=repo)
    await agent.tool("temp", "register_agent", project_key=key, program="p", model="m", name="TempWorker")
    await agent.tool("retire", "retire_agent", project_key=key, agent_name="TempWorker")
    await agent.tool("unretire", "unretire_agent", project_key=key, agent_name="TempWorker")
    await agent.tool("deregister", "deregister_agent", project_key=key, agent_name="TempWorker")
    await agent.tool("retire_inactive", "retire_inactive_agents", project_key=key, agent_name="BlueLake")
    await agent.tool("hard_delete_agent", "hard_delete_agent", project_key=key, agent_name="TempWorker",
                     confirmation="I UNDERSTAND")
    await agent.tool("expire_window", "expire_window", project_key=key, window_uuid=window)
    await agent.tool("purge", "purge_old_messages", project_key=key)
    await agent.tool("archive", "archive_project", project_key=key)
    await agent.tool("unarchive", "unarchive_project", project_key=key)
    await agent.tool("ensure_other", "ensure_project", human_key=other)
    await agent.tool("register_other", "register_agent", project_key=other, program="p", model="m", name="Leaver")
    await agent.tool("hard_delete_project", "hard_delete_project", project_key=other, confirmation="I UNDERSTAND")


@asynccontextmanager
async def connect(argv: list[str]):
    if argv[0] == "http":
        async with _http_client(argv[1]) as streams:
            async with ClientSession(streams[0], streams[1]) as session:
                yield session
        return
    command = argv[argv.index("--") + 1:]
    params = StdioServerParameters(command=command[0], args=command[1:], env=dict(os.environ))
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            yield session


async def main(argv: list[str]) -> None:
    repo = argv[2] if argv[0] == "http" else argv[1]
    async with connect(argv) as session:
        await session.initialize()
        agent = Agent(session)
        await scenario(agent, repo)
    json.dump(agent.steps, sys.stdout)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
