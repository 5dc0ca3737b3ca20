"""Reads sized for a context window: ``catch_up`` and the ``read_messages`` cursor.

Both read an agent's inbox in the order this machine first saw the messages,
using the sequence numbers of the index (``gitmail.index``): a message pulled
from a teammate today is new even if it was written yesterday. The cursor is
a number the caller keeps; the server stores no per-reader position and reads
change no read state. See :mod:`gitmail.server.pages` for the byte budgets.
"""

from __future__ import annotations

import time
from typing import Annotated

from fastmcp import Context, FastMCP
from fastmcp.tools.base import ToolResult
from pydantic import Field

from gitmail.index import indexer_for
from gitmail.model.errors import CURSOR_AHEAD, GitmailError
from gitmail.model.records import Message, message_path

from . import pages
from .params import AgentName, AgentToken, ProjectKey
from .results import READ, tool
from .runtime import Runtime


def register(mcp: FastMCP, rt: Runtime) -> None:
    def agent_of(project_key: str, agent_name: str) -> str:
        """The registered spelling of the agent's name (NOT_FOUND if unknown)."""
        return rt.mail.whois(project_key=project_key, agent_name=agent_name, include_recent_commits=False)["name"]

    def with_bodies(project_key: str, rows: list[dict]) -> list[pages.Entry]:
        snap = rt.store.archive(project_key).snapshot()
        entries = []
        for row in rows:
            record = snap.load(message_path(row["id"]), Message)
            message = dict(row, body_md=record.body if record is not None else "")
            entries.append(pages.Entry(row["seq"], message))
        return entries

    @tool(mcp, READ)
    def catch_up(
        ctx: Context,
        project_key: ProjectKey,
        agent_name: AgentName,
        limit: Annotated[int, Field(ge=1, le=pages.CATCH_UP_MAX, description=(
            f"How many of the newest messages to show (default {pages.CATCH_UP_DEFAULT}, at most "
            f"{pages.CATCH_UP_MAX})."))] = pages.CATCH_UP_DEFAULT,
        agent_token: AgentToken = None,
    ) -> ToolResult:
        """Start or resume work: your newest inbox messages with short previews, and a cursor.

        Shows the newest messages (8 by default, at most 12) in ascending order.
        Each preview holds at most 2,000 UTF-8 bytes of the body and all previews
        together at most 8,000, the newest first; a cut preview carries the exact
        read_messages arguments (full_read) that return the whole message. Save
        next_after and continue with read_messages(after=next_after). Changes no
        read state. Text-only result.
        """
        rt.act_as(ctx, project_key, agent_name, agent_token)
        agent = agent_of(project_key, agent_name)
        index = indexer_for(rt.store).project(project_key)
        high = index.high_watermark()
        rows, older = index.newest_arrivals(agent, limit)
        doc = pages.catch_up_doc(project_key, agent, with_bodies(project_key, rows), high, older)
        return ToolResult(content=pages.dumps(doc))

    @tool(mcp, READ)
    def read_messages(
        ctx: Context,
        project_key: ProjectKey,
        agent_name: AgentName,
        after: Annotated[int, Field(ge=0, description=(
            "Your saved cursor (exclusive): next_after from catch_up or the previous page. 0 reads from the "
            "oldest message; prefer catch_up when you have no cursor."))] = 0,
        limit: Annotated[int, Field(ge=1, le=pages.READ_MAX_LIMIT, description=(
            f"At most this many messages (default {pages.READ_DEFAULT_LIMIT}, at most "
            f"{pages.READ_MAX_LIMIT})."))] = pages.READ_DEFAULT_LIMIT,
        max_output_bytes: Annotated[int, Field(ge=pages.BUDGET_MIN, le=pages.BUDGET_MAX, description=(
            "Byte budget for the whole serialized tool result, JSON escaping included (default "
            f"{pages.BUDGET_DEFAULT}, {pages.BUDGET_MIN}-{pages.BUDGET_MAX})."))] = pages.BUDGET_DEFAULT,
        wait_seconds: Annotated[float, Field(ge=0, le=pages.WAIT_MAX, description=(
            f"If nothing is new, wait up to this many seconds (at most {pages.WAIT_MAX}) and return as soon "
            "as a message arrives. A timed-out wait returns an empty page."))] = 0,
        agent_token: AgentToken = None,
    ) -> ToolResult:
        """Read your inbox after a cursor: whole messages, oldest first, within a byte budget.

        Returns {messages, has_more, next_after, high_watermark}. Process the page,
        save next_after, and call again while has_more is true. Bodies are never
        cut: if the first message alone exceeds the budget the page is empty, the
        cursor stays, and `recovery` says how to read it. A cursor beyond
        high_watermark fails with CURSOR_AHEAD. Changes no read state (use
        mark_message_read / acknowledge_message). Text-only result.
        """
        rt.act_as(ctx, project_key, agent_name, agent_token)
        agent = agent_of(project_key, agent_name)
        index = indexer_for(rt.store).project(project_key)
        high = index.high_watermark()
        if after > high:
            raise GitmailError(CURSOR_AHEAD, f"cursor after={after} is beyond this machine's high watermark "
                               f"{high}; the cursor belongs to another machine or an index that was rebuilt: "
                               "call catch_up for a fresh cursor", {"after": after, "high_watermark": high})
        rows = index.messages_after(agent, after, limit + 1)
        deadline = time.monotonic() + wait_seconds
        while not rows and time.monotonic() < deadline:
            index.wait(deadline - time.monotonic(), after_seq=high)
            high = index.high_watermark()
            rows = index.messages_after(agent, after, limit + 1)
        text = pages.cursor_page(project_key, agent, after, with_bodies(project_key, rows[:limit]),
                                 len(rows) > limit, high, max_output_bytes)
        return ToolResult(content=text)
