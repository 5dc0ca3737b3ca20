"""Channels: named streams of posts inside a project, beside direct mail (a team's ``#deploys``).

Any member of the project (a registered agent that is active) creates a
channel, lists them, posts to one and reads one; nobody is invited or
subscribed, and reading changes nothing. A channel is a definition
(``channels/<name>/channel.yaml``) and its posts, one immutable file each,
filed by day like messages (``channels/<name>/posts/YYYY/MM/DD/...``).

Reads go by the channel's *sequence*: its posts numbered 1, 2, 3... in the
order this machine took them in, as an inbox's are (see :mod:`gitmail.index`):
a number never moves, so a post that arrives late by sync is numbered after
the cursor of whoever read past the others, and nothing is skipped. A reader keeps the last number it processed
(``next_after``) and asks for what follows; :func:`catch_up` hands out the
newest few and a cursor that skips the rest.

Creation takes an optional idempotency key (:mod:`.idempotency`): a retry of
the same request answers the channel it made with ``created: false``, the
same key for another request is ``IDEMPOTENCY_CONFLICT``. Creating a channel
that exists without a key is ``ALREADY_EXISTS``. Every refusal leaves the
repository as it was.
"""

from __future__ import annotations

from dataclasses import field
from typing import Any

from gitmail.coord import acting
from gitmail.coord.context import Context
from gitmail.coord.lookup import require_agent
from gitmail.index import ProjectIndex, indexer_for
from gitmail.model.errors import ALREADY_EXISTS, CURSOR_AHEAD, GitmailError, invalid, not_found
from gitmail.model.limits import CATCH_UP_DEFAULT, CATCH_UP_MAX, FEED_DEFAULT_LIMIT, FEED_MAX_LIMIT
from gitmail.model.names import OVERSEER, check_channel_name
from gitmail.model.records import (
    MAX_POST_BYTES,
    MAX_SHORT,
    Channel,
    ChannelPost,
    IdempotencyKey,
    channel_path,
    post_path,
)
from gitmail.model.results import OMIT_NONE, Result, renamed, result
from gitmail.storage.engine import Change
from gitmail.storage.snapshot import Snapshot

from . import idempotency


@result
class ChannelView(Result):
    """A channel as callers see it: its name, what it is for, who made it and when, and how many posts it holds."""

    name: str
    purpose: str | None = field(default=None, metadata=OMIT_NONE)
    created_by: str
    created_ts: str
    posts: int


@result
class ChannelCreated(Result):
    """The channel a create made (``created: true``) or an identical retry found (``created: false``)."""

    project: str
    channel: ChannelView
    created: bool


@result
class ChannelList(Result):
    """Every channel of the project, by name."""

    project: str
    channels: list[ChannelView]


@result
class ChannelPostView(Result):
    """One post: its number in the channel, its ID, author, time and whole body.

    ``machine`` is the author's provenance where known: the node its agent
    is bound to, whose key signed the post (the who-may-write rule refuses a
    post signed by any other).
    """

    seq: int
    id: str
    sender: str = field(metadata=renamed("from"))
    machine: str | None = field(default=None, metadata=OMIT_NONE)
    created_ts: str
    body_md: str


@result
class Posted(Result):
    """A post written: the channel, the post's ID and time, and its number in the channel as of the write."""

    project: str
    channel: str
    id: str
    seq: int
    created_ts: str


@result
class ChannelCatchUp(Result):
    """The newest posts of a channel (oldest first), the cursor to continue from, and whether older exist."""

    project: str
    channel: str
    reader: str
    posts: list[ChannelPostView]
    next_after: int
    high_watermark: int
    older_posts: bool


@result
class ChannelPage(Result):
    """Posts after a cursor, oldest first, whether more wait beyond them, and the cursor to pass next."""

    project: str
    channel: str
    reader: str
    after: int
    posts: list[ChannelPostView]
    has_more: bool
    next_after: int
    high_watermark: int


def _view(record: Channel, posts: int) -> ChannelView:
    return ChannelView(name=record.name, purpose=record.purpose, created_by=record.created_by,
                       created_ts=record.created_ts, posts=posts)


def _post_views(ctx: Context, project_key: str, name: str, index: ProjectIndex,
                rows: list[dict[str, Any]]) -> list[ChannelPostView]:
    """The index's rows of posts as views, each body read from the archive (parsed once, shared by readers)."""
    snap = ctx.archive(project_key).snapshot()
    machines = _machines(index)
    views = []
    for row in rows:
        record = snap.peek(post_path(name, row["id"]), ChannelPost)  # only its body is read
        views.append(ChannelPostView(seq=row["seq"], id=row["id"], sender=row["from"],
                                     machine=machines.get(row["from"]), created_ts=row["created_ts"],
                                     body_md=record.body if record is not None else ""))
    return views


def _machines(index: ProjectIndex) -> dict[str, str | None]:
    """The node each agent of the project is bound to (None: written before agents were bound)."""
    return {agent.name: agent.node for agent in index.agents()}


def _purpose(purpose: object) -> str | None:
    if purpose is None or purpose == "":
        return None
    if not isinstance(purpose, str) or len(purpose) > MAX_SHORT or "\n" in purpose or "\r" in purpose:
        raise invalid(f"purpose must be one line of at most {MAX_SHORT} characters", field="purpose")
    return purpose


def require_channel(snap: Snapshot, name: str) -> Channel:
    """The definition of channel ``name`` (already checked); NOT_FOUND naming what to do otherwise."""
    record = snap.load(channel_path(name), Channel)
    if record is None:
        raise not_found(f"no channel named {name!r} in this project; list them with list_channels, or make it "
                        "with create_channel", field="channel", channel=name)
    return record


def create(ctx: Context, project_key: str, agent_name: str, name: object, *, purpose: object = None,
           idempotency_key: str | None = None, seat: str | None = None) -> ChannelCreated:
    """Make channel ``name`` as ``agent_name``; with a key, a retry answers the first call's channel unchanged."""
    channel = check_channel_name(name)
    about = _purpose(purpose)
    keyed = idempotency.keyed("create_channel", idempotency_key, {"channel": channel, "purpose": about})
    archive = ctx.archive(project_key)

    def fn(snap: Snapshot) -> Change:
        creator = acting.require_actor(snap, agent_name, seat, at=ctx.clock.now())
        if keyed is not None:
            earlier = keyed.earlier(snap, creator.name, ctx.clock.now())
            if earlier is not None and earlier.channel is not None:
                return Change("", result=require_channel(snap, earlier.channel))
        existing = snap.load(channel_path(channel), Channel)
        if existing is not None:
            raise GitmailError(ALREADY_EXISTS, f"channel {channel!r} already exists (made by {existing.created_by}); "
                               "post to it, or pick another name", {"channel": channel})
        record = Channel(id=ctx.clock.new_id(), name=channel, created_by=creator.name,
                         created_ts=ctx.clock.now_ts(), purpose=about)
        change = Change(f"channel {channel} created by {creator.name}", author=creator.name).put_record(record)
        if keyed is not None:
            change.put_record(IdempotencyKey(key_hash=keyed.key_hash, agent=creator.name, operation=keyed.operation,
                                             request_hash=keyed.request_hash, created_at=record.created_ts,
                                             channel=channel))
        change.result = record
        return change

    done = archive.transact(fn)
    ctx.touch(project_key, agent_name)
    record = done.result
    assert isinstance(record, Channel)
    posts = _index(ctx, project_key).channel_posts(record.name, 0, 1)[1]
    return ChannelCreated(project=project_key, channel=_view(record, posts), created=done.commit is not None)


def _index(ctx: Context, project_key: str) -> ProjectIndex:
    return indexer_for(ctx.store).project(project_key)


def list_channels(ctx: Context, project_key: str, agent_name: str) -> ChannelList:
    """Every channel of the project, by name, with its post count; the caller must be a member."""
    require_agent(ctx.archive(project_key).snapshot(), agent_name, active=True)
    ctx.touch(project_key, agent_name)
    return overview(ctx, project_key)


def overview(ctx: Context, project_key: str) -> ChannelList:
    """Every channel with its post count, for the overseer (no agent reads it, so nobody's activity is touched)."""
    rows = _index(ctx, project_key).channels()
    views = [ChannelView(name=row["name"], purpose=row.get("purpose"), created_by=row["created_by"],
                         created_ts=row["created"], posts=row["posts"]) for row in rows]
    return ChannelList(project=project_key, channels=views)


def _body(body_md: object) -> str:
    if not isinstance(body_md, str) or not body_md.strip():
        raise invalid("body_md must be non-empty Markdown text", field="body_md")
    size = len(body_md.encode("utf-8"))
    if size > MAX_POST_BYTES:
        raise invalid(f"body_md is {size} bytes; a post holds at most {MAX_POST_BYTES} (UTF-8): split it into "
                      "several posts, or send the long text as a message and post its id", field="body_md",
                      limit=MAX_POST_BYTES, size=size)
    return body_md


def post(ctx: Context, project_key: str, agent_name: str, channel: object, body_md: object, *,
         seat: str | None = None) -> Posted:
    """Write a post to ``channel`` as ``agent_name``, who must be a member; one commit, in the author's name."""
    name = check_channel_name(channel)
    body = _body(body_md)
    archive = ctx.archive(project_key)

    def fn(snap: Snapshot) -> Change:
        author = acting.require_actor(snap, agent_name, seat, at=ctx.clock.now())
        require_channel(snap, name)
        record = ChannelPost(id=ctx.clock.new_id(), channel=name, sender=author.name, created_ts=ctx.clock.now_ts(),
                             body=body)
        record.validate()
        change = Change(f"post to #{name} by {author.name}", author=author.name).put_record(record)
        change.result = record
        return change

    record = archive.transact(fn).result
    ctx.touch(project_key, agent_name)
    assert isinstance(record, ChannelPost)
    seq = _index(ctx, project_key).post_number(name, record.id)
    return Posted(project=project_key, channel=name, id=record.id, seq=seq, created_ts=record.created_ts)


def _open(ctx: Context, project_key: str, agent_name: str, channel: object) -> tuple[str, str, ProjectIndex]:
    """The reader's name and the channel's, both checked (a member, a channel that exists), and the index."""
    name = check_channel_name(channel)
    snap = ctx.archive(project_key).snapshot()
    reader = require_agent(snap, agent_name, active=True).name
    require_channel(snap, name)
    ctx.touch(project_key, reader)
    return reader, name, _index(ctx, project_key)


def channel_mark(ctx: Context, project_key: str, channel: object) -> int:
    """The channel's newest sequence number on this machine (0: no post yet): it moves when a post is taken in."""
    name = check_channel_name(channel)
    require_channel(ctx.archive(project_key).snapshot(), name)
    return _index(ctx, project_key).channel_posts(name, 0, 1)[1]


def _whole(value: object, field_name: str, low: int, high: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise invalid(f"{field_name} must be a whole number from {low} to {high}; got {value!r}", field=field_name)
    return value


def catch_up(ctx: Context, project_key: str, agent_name: str, channel: object, *,
             limit: int = CATCH_UP_DEFAULT) -> ChannelCatchUp:
    """The newest ``limit`` posts of the channel (oldest first) and the cursor that continues after them."""
    _whole(limit, "limit", 1, CATCH_UP_MAX)
    reader, name, index = _open(ctx, project_key, agent_name, channel)
    rows, older, high = index.newest_posts(name, limit)
    return ChannelCatchUp(project=project_key, channel=name, reader=reader,
                          posts=_post_views(ctx, project_key, name, index, rows),
                          next_after=high, high_watermark=high, older_posts=older)


def read(ctx: Context, project_key: str, agent_name: str, channel: object, *, after: int = 0,
         limit: int = FEED_DEFAULT_LIMIT) -> ChannelPage:
    """Up to ``limit`` posts numbered after ``after``, oldest first; CURSOR_AHEAD past the channel's newest post."""
    _whole(after, "after", 0, 2**63 - 1)
    _whole(limit, "limit", 1, FEED_MAX_LIMIT)
    reader, name, index = _open(ctx, project_key, agent_name, channel)
    return _page(ctx, project_key, reader, name, index, after, limit)


def observe(ctx: Context, project_key: str, channel: object, *, after: int = 0,
            limit: int = FEED_DEFAULT_LIMIT) -> ChannelPage:
    """:func:`read` for the project's overseer, who reads every channel without being a member."""
    _whole(after, "after", 0, 2**63 - 1)
    _whole(limit, "limit", 1, FEED_MAX_LIMIT)
    name = check_channel_name(channel)
    require_channel(ctx.archive(project_key).snapshot(), name)
    return _page(ctx, project_key, OVERSEER, name, _index(ctx, project_key), after, limit)


def _page(ctx: Context, project_key: str, reader: str, name: str, index: ProjectIndex, after: int,
          limit: int) -> ChannelPage:
    rows, high = index.channel_posts(name, after, limit + 1)
    if after > high:
        raise GitmailError(CURSOR_AHEAD, f"cursor after={after} is beyond #{name}'s newest post {high} on this "
                           "machine; it belongs to a machine that has not synced here yet: call catch_up with "
                           "this channel for a fresh cursor", {"after": after, "high_watermark": high,
                                                               "channel": name})
    posts = _post_views(ctx, project_key, name, index, rows[:limit])
    has_more = len(rows) > limit
    next_after = posts[-1].seq if posts else after
    if not has_more:
        next_after = max(next_after, high)
    return ChannelPage(project=project_key, channel=name, reader=reader, after=after, posts=posts,
                       has_more=has_more, next_after=next_after, high_watermark=high)


SEARCH_EXAMINED = 100  # posts one search call looks at, matched or not: each call's cost is bounded
SEARCH_DEFAULT_LIMIT = 50
SEARCH_MAX_LIMIT = 100
MAX_QUERY_BYTES = 1000


@result
class ChannelSearch(Result):
    """Posts after a cursor whose body holds ``query``, and the cursor to continue from.

    At most :data:`SEARCH_EXAMINED` posts are looked at per call, so a page
    without matches may still say ``has_more``; the last page's cursor is
    the channel's newest post, so the next search starts past what was
    already looked at.
    """

    project: str
    channel: str
    reader: str
    query: str
    after: int
    posts: list[ChannelPostView]
    has_more: bool
    next_after: int
    high_watermark: int


def search(ctx: Context, project_key: str, agent_name: str, channel: object, query: object, *, after: int = 0,
           limit: int = SEARCH_DEFAULT_LIMIT) -> ChannelSearch:
    """The posts after ``after`` whose body holds ``query`` (literal text, any case), by the channel's sequence."""
    if not isinstance(query, str) or not 1 <= len(query.encode("utf-8")) <= MAX_QUERY_BYTES:
        raise invalid(f"query must be literal text of 1 to {MAX_QUERY_BYTES} UTF-8 bytes (not a pattern)",
                      field="query")
    _whole(after, "after", 0, 2**63 - 1)
    _whole(limit, "limit", 1, SEARCH_MAX_LIMIT)
    reader, name, index = _open(ctx, project_key, agent_name, channel)
    page = _page(ctx, project_key, reader, name, index, after, SEARCH_EXAMINED)
    wanted = query.casefold()
    found: list[ChannelPostView] = []
    for post in page.posts:
        if wanted in post.body_md.casefold():
            found.append(post)
            if len(found) == limit:
                break
    stopped_early = len(found) == limit and found[-1].seq != (page.posts[-1].seq if page.posts else after)
    next_after = found[-1].seq if stopped_early else page.next_after
    return ChannelSearch(project=project_key, channel=name, reader=reader, query=query, after=after, posts=found,
                         has_more=stopped_early or page.has_more, next_after=next_after,
                         high_watermark=page.high_watermark)
