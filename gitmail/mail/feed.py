"""An agent's feed: its inbox in the order this machine first saw each message.

The index numbers every record file the first time this machine sees it
(:mod:`gitmail.index`), so a message pulled from a teammate today comes after
everything already here, even if it was written yesterday. A reader keeps a
cursor (the last sequence number it processed) and asks for what came after
it; nothing is stored per reader and reading changes no read state.

- :func:`catch_up` shows the newest few arrivals, oldest first, and hands
  out a cursor that skips everything older (older mail stays searchable).
- :func:`read_messages` returns the arrivals after a cursor, oldest first,
  and can wait a bounded time for the next one (a long poll), holding the
  calling thread while it waits.
- :func:`watch` is for a waiter that holds no thread (the MCP server's long
  polls, :mod:`gitmail.server.longpoll`): it hears of every move of the
  project's feed and reads again with ``wait_seconds=0``.

A cursor beyond this machine's high watermark belongs to another machine or
to an index that was rebuilt: it is refused (``CURSOR_AHEAD``) rather than
silently skipping messages. Both return whole messages (``body_md`` read from
the archive; :func:`read_arrivals` hands a page over as the index's rows and
their bodies, for a reader that shapes each message itself); sizing them for
a reader (previews, byte budgets) is the caller's part, as
:mod:`gitmail.server.pages` does for MCP.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gitmail.coord.context import Context
from gitmail.coord.lookup import require_agent
from gitmail.index import ProjectIndex, indexer_for
from gitmail.model.errors import CURSOR_AHEAD, GitmailError, invalid
from gitmail.model.limits import (
    CATCH_UP_DEFAULT,
    CATCH_UP_MAX,
    FEED_DEFAULT_LIMIT,
    FEED_MAX_LIMIT,
    FEED_MAX_WAIT,
)
from gitmail.model.results import Result, result

from .delivery import MessageHeader


@result
class FeedMessage(MessageHeader):
    """A message of an agent's feed, whole: its header, when this machine first saw it, in which box, its body."""

    seq: int
    box: str
    body_md: str

    @classmethod
    def of(cls, row: Mapping[str, Any], body: str) -> FeedMessage:
        """The feed entry for a row of the index's arrivals and the message's body.

        The row may be one the index shares with other readers: the entry
        takes its own copies of the row's lists.
        """
        attachments = copy.deepcopy(row["attachments"]) if row["attachments"] else []
        return cls(id=row["id"], thread_id=row["thread_id"], subject=row["subject"], sender=row["from"],
                   to=list(row["to"]), cc=list(row["cc"]), created_ts=row["created_ts"], importance=row["importance"],
                   ack_required=row["ack_required"], topic=row["topic"], reply_to=row["reply_to"],
                   attachments=attachments, seq=row["seq"], box=row["box"], body_md=body)


@result
class CatchUp(Result):
    """The newest arrivals of an agent's feed, oldest first, the cursor to continue from, and whether older exist."""

    project: str
    agent: str
    messages: list[FeedMessage]
    next_after: int
    high_watermark: int
    older_messages: bool


@result
class FeedPage(Result):
    """Arrivals after a cursor, oldest first, whether more wait beyond them, and the cursor to pass next."""

    project: str
    agent: str
    after: int
    messages: list[FeedMessage]
    has_more: bool
    next_after: int
    high_watermark: int


class FeedWatch:
    """Calls a listener, from whichever thread moved it, each time a project's feed may have moved; until closed.

    The feed moves when the project's index takes in a new tip: at once for
    this process's own commits, and for outside ones (a push, another
    process) when the watcher reports them or when someone looks
    (:meth:`look`, which is how a waiter notices what nobody announced).
    """

    def __init__(self, index: ProjectIndex, listener: Callable[[], None]):
        self._index = index
        self._stop = index.subscribe(listener)

    def look(self) -> None:
        """Take in the archive's tip now if it moved (the listener hears of it)."""
        self._index.high_watermark()

    def close(self) -> None:
        self._stop()


def watch(ctx: Context, project_key: str, listener: Callable[[], None]) -> FeedWatch:
    """Have ``listener`` called each time the feed of ``project_key`` may have moved (see :class:`FeedWatch`)."""
    return FeedWatch(indexer_for(ctx.store).project(project_key), listener)


def inbox_mark(ctx: Context, project_key: str, agent_name: str) -> int:
    """The sequence number of the newest arrival in the agent's inbox (0: none yet): it moves when mail arrives."""
    agent = require_agent(ctx.archive(project_key).snapshot(), agent_name).name
    rows, _ = indexer_for(ctx.store).project(project_key).newest_arrivals(agent, 1)
    return int(rows[-1]["seq"]) if rows else 0


def thread_mark(ctx: Context, project_key: str, thread_id: str) -> tuple[int, str]:
    """How many messages the thread has and the last one's ID: it moves when a message joins the thread."""
    rows = indexer_for(ctx.store).project(project_key).thread(thread_id, include_bodies=False)
    return len(rows), (str(rows[-1]["id"]) if rows else "")


def _whole(value: object, field: str, low: int, high: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise invalid(f"{field} must be a whole number from {low} to {high}; got {value!r}", field=field)
    return value


def _open(ctx: Context, project_key: str, agent_name: str) -> tuple[str, ProjectIndex]:
    """The agent's registered name and the project's index; the read counts as the agent's activity."""
    agent = require_agent(ctx.archive(project_key).snapshot(), agent_name).name
    ctx.touch(project_key, agent)
    return agent, indexer_for(ctx.store).project(project_key)


def _with_bodies(index: ProjectIndex, rows: list[dict[str, Any]]) -> list[FeedMessage]:
    """Each row (the index's: ``blob`` names its file) as a whole feed message."""
    return [FeedMessage.of(row, body) for row, body in zip(rows, index.bodies(rows), strict=True)]


def catch_up(ctx: Context, project_key: str, agent_name: str, *, limit: int = CATCH_UP_DEFAULT) -> CatchUp:
    """The newest ``limit`` arrivals (oldest first), the cursor to continue from, and whether older exist.

    The cursor (``next_after``) is the high watermark when the call started,
    or the newest shown message if that arrived meanwhile: everything up to it
    is shown or deliberately left behind.
    """
    _whole(limit, "limit", 1, CATCH_UP_MAX)
    agent, index = _open(ctx, project_key, agent_name)
    high = index.high_watermark()
    rows, older = index.newest_arrivals(agent, limit)
    messages = _with_bodies(index, rows)
    return CatchUp(project=project_key, agent=agent, messages=messages,
                   next_after=max([high] + [m.seq for m in messages]), high_watermark=high, older_messages=older)


def read_messages(ctx: Context, project_key: str, agent_name: str, *, after: int = 0,
                  limit: int = FEED_DEFAULT_LIMIT, wait_seconds: float = 0) -> FeedPage:
    """Up to ``limit`` arrivals after the cursor ``after``, oldest first; wait up to ``wait_seconds`` for one.

    ``has_more`` says whether arrivals beyond this page exist; ``next_after``
    is the cursor to pass next: the last message returned, or, when nothing
    more is there, the high watermark (so the next read skips other agents'
    records). A wait that times out returns an empty page.
    """
    page = read_arrivals(ctx, project_key, agent_name, after=after, limit=limit, wait_seconds=wait_seconds)
    messages = [FeedMessage.of(row, body) for row, body in zip(page.rows, page.bodies, strict=True)]
    return FeedPage(project=project_key, agent=page.agent, after=after, messages=messages, has_more=page.has_more,
                    next_after=page.next_after, high_watermark=page.high_watermark)


@dataclass(frozen=True, slots=True)
class Arrivals:
    """A feed page as the index holds it, for readers that shape each message themselves (compact pages).

    ``rows`` are the index's rows of the page's messages (shared with other
    readers of the same tip: look, never change), ``bodies`` their bodies in
    the same order; the rest as in :class:`FeedPage`. It skips building a
    result object per message, which was most of a 200-message page's cost.
    """

    agent: str
    rows: Sequence[Mapping[str, Any]]
    bodies: list[str]
    has_more: bool
    next_after: int
    high_watermark: int


def read_arrivals(ctx: Context, project_key: str, agent_name: str, *, after: int = 0,
                  limit: int = FEED_DEFAULT_LIMIT, wait_seconds: float = 0) -> Arrivals:
    """What :func:`read_messages` reads, as the index's rows and their bodies (see :class:`Arrivals`)."""
    _whole(after, "after", 0, 2**63 - 1)
    _whole(limit, "limit", 1, FEED_MAX_LIMIT)
    if (not isinstance(wait_seconds, (int, float)) or isinstance(wait_seconds, bool)
            or not 0 <= wait_seconds <= FEED_MAX_WAIT):
        raise invalid(f"wait_seconds must be a number of seconds from 0 to {FEED_MAX_WAIT}", field="wait_seconds")
    agent, index = _open(ctx, project_key, agent_name)
    high = index.high_watermark()
    if after > high:
        raise GitmailError(CURSOR_AHEAD, f"cursor after={after} is beyond this machine's high watermark "
                           f"{high}; the cursor belongs to another machine or an index that was rebuilt: "
                           "call catch_up for a fresh cursor", {"after": after, "high_watermark": high})
    rows = index.messages_after(agent, after, limit + 1, shared=True)
    deadline = time.monotonic() + wait_seconds
    while not rows and time.monotonic() < deadline:
        index.wait(deadline - time.monotonic(), after_seq=high)
        high = index.high_watermark()
        rows = index.messages_after(agent, after, limit + 1, shared=True)
    page = rows[:limit]
    has_more = len(rows) > limit
    next_after = page[-1]["seq"] if page else after
    if not has_more:
        next_after = max(next_after, high)
    return Arrivals(agent=agent, rows=page, bodies=index.bodies(page), has_more=has_more, next_after=next_after,
                    high_watermark=high)
