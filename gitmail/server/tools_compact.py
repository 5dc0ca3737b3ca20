"""The compact cursor read: ``read_compact``, for agents that read a lot of mail.

It reads the same feed, after the same cursor and under the same byte-budget
rules as ``read_messages`` (:mod:`gitmail.server.tools_reads`), and answers
in compact form (:func:`gitmail.server.pages.compact_page`): the reader
named once, each author once under an alias, short keys, whole bodies. With
``channel`` it reads that channel's posts by their sequence numbers instead
(:mod:`gitmail.server.tools_channels`), under the same budget rules.
"""

from __future__ import annotations

from fastmcp import Context
from fastmcp.tools.base import ToolResult

from gitmail.model.limits import FEED_DEFAULT_LIMIT

from . import pages
from .params import AgentName, AgentToken, ChannelArgument, Cursor, FeedLimit, PageBudget, ProjectKey
from .registry import ITSELF, Toolbox
from .results import READ
from .runtime import Runtime

tools = Toolbox("compact")


@tools.tool(READ, access=ITSELF)
def read_compact(
    rt: Runtime,
    ctx: Context,
    project_key: ProjectKey,
    agent_name: AgentName,
    after: Cursor = 0,
    limit: FeedLimit = FEED_DEFAULT_LIMIT,
    max_output_bytes: PageBudget = pages.BUDGET_DEFAULT,
    channel: ChannelArgument = None,
    agent_token: AgentToken = None,
) -> ToolResult:
    """read_messages in fewer bytes: each author named once under an alias (authors), short keys, whole bodies."""
    # Synchronous (it never waits for mail): the access check, the read and the page are made in one worker
    # thread, so a large page neither costs a second hop to a thread nor holds the event loop while it is made.
    if channel is not None:
        posts = rt.mail.read_channel(project_key, agent_name, channel, after=after, limit=limit)
        return ToolResult(content=pages.compact_page(
            project_key, posts.reader, after, pages.post_entries(posts.posts), posts.has_more, posts.high_watermark,
            max_output_bytes, channel=posts.channel))
    found = rt.mail.read_arrivals(project_key, agent_name, after=after, limit=limit)
    text = pages.compact_page(project_key, found.agent, after, pages.arrival_entries(found), found.has_more,
                              found.high_watermark, max_output_bytes)
    return ToolResult(content=text)
