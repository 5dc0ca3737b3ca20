"""Waiting reads that hold no worker thread, within a cap per agent and per server.

FastMCP runs a synchronous tool in a worker thread from anyio's pool (40
threads unless told otherwise), which every tool call and the web view
share. A ``read_messages`` that waited for mail in one of them held it for up
to 25 seconds, so 40 waiting readers left no thread for anything else, not
even ``health_check``. Here a read that finds nothing gives its thread back
while it waits: it awaits an event on the server's loop that the project's
index sets whenever it moves (this process's own commits at once; outside
ones when the watcher reports them), looks again every
:data:`LOOK_AGAIN` seconds for a change nobody announced, and each time reads
again in a worker thread for a moment.

A wait still costs a request and a task, so their number is capped: at most
``GITMAIL_MAX_WAITS_PER_AGENT`` waiting reads per agent and
``GITMAIL_MAX_WAITS`` on the server. A read past either cap is refused at
once with ``TOO_MANY_WAITS`` saying what to do; a read that finds mail, or
does not wait, never counts.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

import anyio

from gitmail.mail.facade import Arrivals, ChannelPage, Mail
from gitmail.model.errors import TOO_MANY_WAITS, GitmailError, invalid
from gitmail.model.limits import FEED_MAX_WAITS, FEED_MAX_WAITS_PER_AGENT

PER_AGENT_ENV = "GITMAIL_MAX_WAITS_PER_AGENT"
PER_SERVER_ENV = "GITMAIL_MAX_WAITS"
LOOK_AGAIN = 1.0  # seconds: how often a waiting read looks for a change nobody announced

Page = TypeVar("Page", Arrivals, ChannelPage)  # an inbox page (the index's rows) or a channel's (its posts)


def _setting(env: Mapping[str, str], name: str, default: int) -> int:
    value = env.get(name, "").strip()
    if not value:
        return default
    if not value.isdigit() or int(value) < 1:
        raise invalid(f"{name} must be a whole number of waiting reads, at least 1; got {value!r}", field=name)
    return int(value)


@dataclass
class LongPolls:
    """The waiting reads of one server: how many there are, and the caps they are held to."""

    per_agent: int = FEED_MAX_WAITS_PER_AGENT
    per_server: int = FEED_MAX_WAITS
    _waiting: Counter[tuple[str, str]] = field(default_factory=Counter)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> LongPolls:
        """The caps ``GITMAIL_MAX_WAITS_PER_AGENT`` and ``GITMAIL_MAX_WAITS`` set (INVALID_ARGUMENT if unusable)."""
        env = os.environ if env is None else env
        return cls(_setting(env, PER_AGENT_ENV, FEED_MAX_WAITS_PER_AGENT),
                   _setting(env, PER_SERVER_ENV, FEED_MAX_WAITS))

    def state(self) -> dict[str, int]:
        """How many reads wait now, and the caps (for ``health_check``)."""
        with self._lock:
            waiting = sum(self._waiting.values())
        return {"waiting": waiting, "max_waiting": self.per_server, "max_waiting_per_agent": self.per_agent}

    @contextlib.contextmanager
    def _slot(self, project: str, agent: str) -> Iterator[None]:
        """One waiting read of ``agent``, counted while it waits; TOO_MANY_WAITS past a cap."""
        key = (project, agent.lower())
        with self._lock:
            if self._waiting[key] >= self.per_agent:
                raise GitmailError(
                    TOO_MANY_WAITS,
                    f"{agent} already has {self._waiting[key]} reads waiting on this server, the most one agent "
                    f"may ({PER_AGENT_ENV}); let one of them return before starting another, or read without "
                    "waiting (wait_seconds=0)",
                    {"limit": self.per_agent, "scope": "agent", "setting": PER_AGENT_ENV})
            total = sum(self._waiting.values())
            if total >= self.per_server:
                raise GitmailError(
                    TOO_MANY_WAITS,
                    f"this server already holds {total} waiting reads, the most it allows ({PER_SERVER_ENV}); "
                    "read without waiting (wait_seconds=0), or wait a moment and call again; the operator may "
                    f"raise {PER_SERVER_ENV}",
                    {"limit": self.per_server, "scope": "server", "setting": PER_SERVER_ENV})
            self._waiting[key] += 1
        try:
            yield
        finally:
            with self._lock:
                self._waiting[key] -= 1
                if not self._waiting[key]:
                    del self._waiting[key]

    async def wait(self, mail: Mail, project_key: str, agent: str, read: Callable[[], Page],
                   seconds: float) -> Page:
        """Call ``read`` (a read that does not wait) until it finds messages (or posts) or ``seconds`` have passed.

        The caller has read once and found nothing; the page returned is
        the last read's (empty when the time ran out). A channel's posts
        move the same project feed as mail, so one watch serves both.
        """
        loop = asyncio.get_running_loop()
        moved = asyncio.Event()

        def wake() -> None:  # from the thread that moved the index
            with contextlib.suppress(RuntimeError):  # the loop is closed: the server is stopping
                loop.call_soon_threadsafe(moved.set)

        with self._slot(mail.store.resolve(project_key), agent):
            watch = await anyio.to_thread.run_sync(mail.watch_feed, project_key, wake)
            try:
                deadline = loop.time() + seconds
                while True:
                    moved.clear()  # a move from here on is seen by the next wait, not lost
                    found = await anyio.to_thread.run_sync(read)
                    remaining = deadline - loop.time()
                    if _holds_any(found) or remaining <= 0:
                        return found
                    while not moved.is_set() and remaining > 0:
                        with contextlib.suppress(TimeoutError):
                            await asyncio.wait_for(moved.wait(), min(LOOK_AGAIN, remaining))
                        if not moved.is_set():
                            await anyio.to_thread.run_sync(watch.look)
                        remaining = deadline - loop.time()
            finally:
                watch.close()


def _holds_any(page: Arrivals | ChannelPage) -> bool:
    """Whether a page read found anything: an inbox's messages or a channel's posts."""
    return bool(page.rows if isinstance(page, Arrivals) else page.posts)
