"""Reads sized for a context window: ``catch_up`` and the ``read_messages`` cursor.

Both read an agent's feed (its inbox in the order this machine first saw the
messages, :mod:`gitmail.mail.feed`, through the facade): a message pulled
from a teammate today is new even if it was written yesterday. The cursor is
a number the caller keeps; the server stores no per-reader position and reads
change no read state. What is added here is the sizing for a context window:
previews and byte budgets (:mod:`gitmail.server.pages`); and a read that
waits does so on the event loop, holding no worker thread
(:mod:`gitmail.server.longpoll`).
"""

from __future__ import annotations

import functools
from typing import Annotated

import anyio
from fastmcp import Context
from fastmcp.tools.base import ToolResult
from pydantic import Field

from gitmail.mail.facade import Arrivals
from gitmail.model.limits import CATCH_UP_DEFAULT, CATCH_UP_MAX, FEED_DEFAULT_LIMIT, FEED_MAX_WAIT

from . import pages
from .params import AgentName, AgentToken, ChannelArgument, Cursor, FeedLimit, PageBudget, ProjectKey
from .registry import ITSELF, Toolbox
from .results import READ
from .runtime import Runtime

tools = Toolbox("messages")


@tools.tool(READ, access=ITSELF)
def catch_up(
    rt: Runtime,
    ctx: Context,
    project_key: ProjectKey,
    agent_name: AgentName,
    limit: Annotated[int, Field(ge=1, le=CATCH_UP_MAX)] = CATCH_UP_DEFAULT,
    channel: ChannelArgument = None,
    agent_token: AgentToken = None,
) -> ToolResult:
    """Start or resume work: newest messages as previews, and a cursor for read_messages."""
    if channel is not None:
        posts = rt.mail.catch_up_channel(project_key, agent_name, channel, limit=limit)
        doc = pages.catch_up_doc(project_key, posts.reader, pages.post_entries(posts.posts), posts.high_watermark,
                                 posts.older_posts, posts.next_after, channel=posts.channel)
        return ToolResult(content=pages.dumps(doc))
    found = rt.mail.catch_up(project_key, agent_name, limit=limit)
    doc = pages.catch_up_doc(project_key, found.agent, pages.feed_entries(found.messages), found.high_watermark,
                             found.older_messages, found.next_after)
    return ToolResult(content=pages.dumps(doc))


@tools.tool(READ, access=ITSELF)
async def read_messages(
    rt: Runtime,
    ctx: Context,
    project_key: ProjectKey,
    agent_name: AgentName,
    after: Cursor = 0,
    limit: FeedLimit = FEED_DEFAULT_LIMIT,
    max_output_bytes: PageBudget = pages.BUDGET_DEFAULT,
    wait_seconds: Annotated[float, Field(ge=0, le=FEED_MAX_WAIT, description=(
        "Wait for new mail."))] = 0,
    agent_token: AgentToken = None,
) -> ToolResult:
    """Read your inbox after a cursor, oldest first; repeat with next_after while has_more."""
    read = functools.partial(rt.mail.read_arrivals, project_key, agent_name, after=after, limit=limit)

    def page_of(found: Arrivals) -> str:
        return pages.cursor_page(project_key, found.agent, after, pages.arrival_entries(found), found.has_more,
                                 found.high_watermark, max_output_bytes)

    def first() -> tuple[Arrivals, str | None]:  # the page is made in the read's thread, off the event loop
        found = read()
        return found, None if not found.rows and wait_seconds > 0 else page_of(found)

    found, text = await anyio.to_thread.run_sync(first)
    if text is None:
        found = await rt.long_polls.wait(rt.mail, project_key, found.agent, read, wait_seconds)
        text = await anyio.to_thread.run_sync(page_of, found)
    return ToolResult(content=text)

