"""Channel tools: ``create_channel``, ``list_channels``, ``post_channel``, ``read_channel``, ``search_channel``.

A channel is a named stream any member of the project reads and writes
(:mod:`gitmail.mail.channels`, through the facade). The tools are a family of
their own, outside the default profile, so agents that only use direct mail
pay nothing for them in their context; serving the family also lists the
``channel`` argument of ``catch_up`` and ``read_compact``, which read a
channel by the same rules as the inbox.

``post_channel`` is named apart from ``send_message``: a post has no
recipients, subject or thread, and is read by everyone in the channel.
``read_channel`` is the full read (whole posts as structured results, no
byte budget), and can wait a bounded time for a new post as ``read_messages``
waits for mail (:mod:`gitmail.server.longpoll`); ``read_compact`` with
``channel`` is the budgeted one. ``search_channel`` finds literal text in
posts by the same cursor, looking at a bounded number of posts per call.
"""

from __future__ import annotations

import functools
from typing import Annotated

import anyio
from fastmcp import Context, FastMCP
from pydantic import Field

from gitmail.mail.channels import SEARCH_DEFAULT_LIMIT, SEARCH_MAX_LIMIT
from gitmail.mail.facade import ChannelCreated, ChannelList, ChannelPage, ChannelSearch, Posted
from gitmail.model.limits import FEED_DEFAULT_LIMIT, FEED_MAX_LIMIT, FEED_MAX_WAIT

from .params import AgentName, AgentToken, Cursor, FeedLimit, ProjectKey, Seat
from .registry import ITSELF, Toolbox
from .resources import number, resource
from .results import READ, WRITE
from .runtime import Runtime

tools = Toolbox("channels")

ChannelName = Annotated[str, Field(max_length=65, description="Channel name, such as deploys or #deploys.")]


@tools.tool(WRITE, access=ITSELF)
def create_channel(
    rt: Runtime,
    ctx: Context,
    project_key: ProjectKey,
    agent_name: AgentName,
    channel: ChannelName,
    purpose: Annotated[str | None, Field(max_length=512, description="One line: what the channel is for.")] = None,
    idempotency_key: Annotated[str | None, Field(max_length=128, description=(
        "Retry key: the same request again answers created=false."))] = None,
    seat: Seat = None,
    agent_token: AgentToken = None,
) -> ChannelCreated:
    """Make a channel every agent of the project can read and post to."""
    return rt.mail.create_channel(project_key, agent_name, channel, purpose=purpose, idempotency_key=idempotency_key,
                                  seat=seat)


@tools.tool(READ, access=ITSELF)
def list_channels(
    rt: Runtime,
    ctx: Context,
    project_key: ProjectKey,
    agent_name: AgentName,
    agent_token: AgentToken = None,
) -> ChannelList:
    """The project's channels, with their post counts."""
    return rt.mail.list_channels(project_key, agent_name)


@tools.tool(WRITE, access=ITSELF)
def post_channel(
    rt: Runtime,
    ctx: Context,
    project_key: ProjectKey,
    agent_name: AgentName,
    channel: ChannelName,
    body_md: Annotated[str, Field(description="Markdown, at most 64 KiB.")],
    seat: Seat = None,
    agent_token: AgentToken = None,
) -> Posted:
    """Post to a channel; answers the post's sequence number there."""
    return rt.mail.post_channel(project_key, agent_name, channel, body_md, seat=seat)


@tools.tool(READ, access=ITSELF)
async def read_channel(
    rt: Runtime,
    ctx: Context,
    project_key: ProjectKey,
    agent_name: AgentName,
    channel: ChannelName,
    after: Cursor = 0,
    limit: FeedLimit = FEED_DEFAULT_LIMIT,
    wait_seconds: Annotated[float, Field(ge=0, le=FEED_MAX_WAIT, description="Wait for a new post.")] = 0,
    agent_token: AgentToken = None,
) -> ChannelPage:
    """Whole posts after a cursor, oldest first; repeat with next_after while has_more."""
    read = functools.partial(rt.mail.read_channel, project_key, agent_name, channel, after=after, limit=limit)
    found = await anyio.to_thread.run_sync(read)
    if not found.posts and wait_seconds > 0:  # waits on the event loop, holding no worker thread
        found = await rt.long_polls.wait(rt.mail, project_key, found.reader, read, wait_seconds)
    return found


@tools.tool(READ, access=ITSELF)
def search_channel(
    rt: Runtime,
    ctx: Context,
    project_key: ProjectKey,
    agent_name: AgentName,
    channel: ChannelName,
    query: Annotated[str, Field(max_length=1000, description="Literal text, any case.")],
    after: Cursor = 0,
    limit: Annotated[int, Field(ge=1, le=SEARCH_MAX_LIMIT)] = SEARCH_DEFAULT_LIMIT,
    agent_token: AgentToken = None,
) -> ChannelSearch:
    """Posts holding a text after a cursor; 100 looked at per call, so repeat with next_after while has_more."""
    return rt.mail.search_channel(project_key, agent_name, channel, query, after=after, limit=limit)


def register_resources(mcp: FastMCP, rt: Runtime) -> None:
    """``resource://channel/{name}``: a channel read as read_channel reads it, which members subscribe to."""
    member = rt.access.member("agent_name", "agent_token", project="project")

    @resource(mcp, "resource://channel/{name}{?project,after,limit,agent_name,agent_token}", access=member)
    def channel(name: str, project: str = "", after: str | None = None, limit: str | None = None,
                agent_name: str | None = None, agent_token: str | None = None) -> ChannelPage:
        """A channel's posts after a cursor (its sequence numbers), oldest first, as read_channel reads them; any
        member reads every channel, so any member may subscribe to one and hear of each new post."""
        reader = rt.access.viewer(None, project, agent_name)
        return rt.mail.read_channel(project, reader, name, after=number(after, 0, "after", 0, 2**62),
                                    limit=number(limit, FEED_DEFAULT_LIMIT, "limit", 1, FEED_MAX_LIMIT))
