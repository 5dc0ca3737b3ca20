"""New mail pushed to agents: resource subscriptions on inboxes, threads and channels, notified after each change.

An agent that would poll its inbox subscribes to it instead. Two wires
carry the same subscriptions:

- a client of the handshake era (protocol 2025-*, and every 1.x client)
  sends ``resources/subscribe`` / ``resources/unsubscribe`` in its session
  and hears ``notifications/resources/updated`` on the session's stream
  (over Streamable HTTP its standing GET stream; over stdio the pipe);
- a client of the 2026-07-28 era opens a ``subscriptions/listen`` stream
  naming the URIs, and hears the same notification on that stream.

A subscription is allowed exactly when reading its URI is: the server
reads the resource as the caller before it subscribes (so the proof is the
one a read needs: the session's own agent, or ``agent_token`` in the URI),
and a refused read refuses the subscription with the read's error. The URI
must name its project (``?project=``): a subscription outlives the request
that proved it.

What counts as a change: for ``resource://inbox/{agent}``, a message
arriving in that inbox; for ``resource://thread/{id}``, a message added to
that thread; for ``resource://channel/{name}``, a post taken into that
channel (any member reads every channel, so any member may subscribe to one).
The server hears of a change when the project's index takes in a new tip: at
once for its own commits, and for anyone else's (a push, another process, a
sync) when the file watcher reports it or, at the
latest, at the next look it takes every :data:`LOOK_AGAIN` seconds while a
project has subscribers. Each change is notified once to each subscriber,
after the commit that made it.

A fresh session (``new_session``) forgets the proofs its subscriptions were
admitted under, so they pause: nothing is delivered on them until the
session subscribes to each again, which checks it as a read once more (with
the session's new proof, or the token the URI carries). A listen stream is
its own request, proved when it opened, and lasts until it closes.

Subscriptions are capped: :data:`~gitmail.model.limits.SUBSCRIPTIONS_PER_SESSION`
per session (or listen stream) and :data:`~gitmail.model.limits.SUBSCRIPTIONS_MAX`
on the server; past either, ``TOO_MANY_SUBSCRIPTIONS``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import anyio
from mcp.server.context import ServerRequestContext
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ResourceUpdated
from mcp_types import (
    EmptyResult,
    ReadResourceRequestParams,
    SubscribeRequestParams,
    SubscriptionsListenRequestParams,
    SubscriptionsListenResult,
    UnsubscribeRequestParams,
)

from gitmail.mail.facade import Mail
from gitmail.model.errors import INVALID_ARGUMENT, TOO_MANY_SUBSCRIPTIONS, GitmailError
from gitmail.model.limits import SUBSCRIPTIONS_MAX, SUBSCRIPTIONS_PER_SESSION

from .resources import ResourceFailure

_log = logging.getLogger("gitmail.server")

LOOK_AGAIN = 1.0  # seconds: how often a project with subscribers is looked at for changes nobody announced
SUBSCRIBABLE = {"inbox": "resource://inbox/{agent}?project=…", "thread": "resource://thread/{thread_id}?project=…",
                "channel": "resource://channel/{name}?project=…"}

Read = Callable[[ServerRequestContext[Any, Any], ReadResourceRequestParams], Any]


@dataclass(frozen=True)
class Target:
    """What a subscribed URI watches: an agent's inbox, a thread or a channel, in one project."""

    uri: str
    kind: str
    name: str
    project: str


def target(uri: str) -> Target:
    """The inbox, thread or channel ``uri`` names; INVALID_ARGUMENT for any other URI or one without ``?project=``."""
    parts = urlsplit(uri)
    kind, name = parts.netloc, unquote(parts.path.strip("/"))
    if parts.scheme != "resource" or kind not in SUBSCRIBABLE or not name or "/" in name:
        raise GitmailError(INVALID_ARGUMENT, f"{uri!r} cannot be subscribed to: subscribe to an inbox, a thread "
                           f"or a channel ({', '.join(SUBSCRIBABLE.values())})",
                           {"uri": uri, "subscribable": list(SUBSCRIBABLE)})
    project = (parse_qs(parts.query).get("project") or [""])[0]
    if not project:
        raise GitmailError(INVALID_ARGUMENT, f"add ?project=<project key> to {uri!r}: a subscription names its "
                           "project, since it outlives the request that proved it", {"uri": uri,
                                                                                     "parameter": "project"})
    return Target(uri, kind, name, project)


def _connection(ctx: ServerRequestContext[Any, Any]) -> Any:
    """The MCP session a request belongs to: its connection (each request gets its own session object)."""
    return getattr(ctx.session, "_connection", ctx.session)


@dataclass
class _Watched:
    """One subscribed URI: its latest mark (what it showed last), and how many subscriptions hold it."""

    target: Target
    mark: object
    holders: int = 0


@dataclass
class Push:
    """Every subscription of one server, the marks they are compared with, and the wires that carry notices."""

    mail: Mail
    per_session: int = SUBSCRIPTIONS_PER_SESSION
    total: int = SUBSCRIPTIONS_MAX
    bus: InMemorySubscriptionBus = field(default_factory=InMemorySubscriptionBus)
    _watched: dict[str, _Watched] = field(default_factory=dict)
    # id(connection): a weak reference to the session's connection (None for a listen stream), and its URIs. Weak,
    # so a session that ends without unsubscribing leaves nothing behind: its subscriptions go at the next notice.
    _sessions: dict[int, tuple[weakref.ref[Any] | None, set[str]]] = field(default_factory=dict)
    _watches: dict[str, Any] = field(default_factory=dict)  # project: FeedWatch
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _loop: asyncio.AbstractEventLoop | None = None
    _looking: asyncio.Task[None] | None = None
    _dirty: set[str] = field(default_factory=set)
    _checking: bool = False
    _paused: set[tuple[int, str]] = field(default_factory=set)  # (session key, URI): held, but not delivered

    def pause(self, ctx: Any) -> list[str]:
        """Pause every subscription of the session ``ctx`` (a tool call's context) belongs to; their URIs, sorted.

        Called by ``new_session``: a subscription is delivered only while the
        proof it was admitted under stands, and a fresh session has forgotten
        it. Subscribing again resumes one (:meth:`_admit` checks it anew).
        """
        request = getattr(ctx, "request_context", None)
        if request is None:
            return []
        key = id(_connection(request))
        with self._lock:
            held = sorted(self._sessions.get(key, (None, set()))[1])
            self._paused.update((key, uri) for uri in held)
        return held

    def install(self, server: Any) -> None:
        """Serve subscriptions on ``server`` (FastMCP's low-level server): both eras' methods."""
        read: Read = server._request_handlers["resources/read"].handler
        listen = ListenHandler(self.bus, max_subscriptions=self.total)

        async def subscribe(ctx: ServerRequestContext[Any, Any], params: SubscribeRequestParams) -> EmptyResult:
            connection = _connection(ctx)
            await self._admit(ctx, read, [str(params.uri)], key=id(connection), session=weakref.ref(connection))
            return EmptyResult()

        async def unsubscribe(ctx: ServerRequestContext[Any, Any], params: UnsubscribeRequestParams) -> EmptyResult:
            self._drop(id(_connection(ctx)), [str(params.uri)])
            return EmptyResult()

        async def listened(ctx: ServerRequestContext[Any, Any],
                           params: SubscriptionsListenRequestParams) -> SubscriptionsListenResult:
            uris = [str(u) for u in params.notifications.resource_subscriptions or ()]
            key = id(params)  # one listen stream, one holder of its URIs
            await self._admit(ctx, read, uris, key=key, session=None)
            try:
                return await listen(ctx, params)
            finally:
                self._drop(key, uris)

        server.add_request_handler("resources/subscribe", SubscribeRequestParams, subscribe)
        server.add_request_handler("resources/unsubscribe", UnsubscribeRequestParams, unsubscribe)
        server.add_request_handler("subscriptions/listen", SubscriptionsListenRequestParams, listened)

    async def _admit(self, ctx: ServerRequestContext[Any, Any], read: Read, uris: list[str], *, key: int,
                     session: weakref.ref[Any] | None) -> None:
        """Check each URI as a read by the caller, then count it (TOO_MANY_SUBSCRIPTIONS past a cap)."""
        self._loop = asyncio.get_running_loop()
        try:
            targets = [target(uri) for uri in uris]
        except GitmailError as exc:
            raise ResourceFailure(exc) from None
        for one in targets:
            await read(ctx, ReadResourceRequestParams(uri=one.uri))  # refused as the read would be
        marks = {one.uri: await anyio.to_thread.run_sync(self._mark, one) for one in targets}
        with self._lock:
            held = self._sessions.get(key, (session, set()))[1]
            new = [one for one in targets if one.uri not in held]
            in_all = sum(w.holders for w in self._watched.values())
            if len(held) + len(new) > self.per_session or in_all + len(new) > self.total:
                raise ResourceFailure(self._too_many(len(held) + len(new) > self.per_session))
            self._paused.difference_update((key, one.uri) for one in targets)  # proved again: delivered again
            for one in new:
                watched = self._watched.setdefault(one.uri, _Watched(one, marks[one.uri]))
                watched.holders += 1
                held.add(one.uri)
            self._sessions[key] = (session, held)
        for project in {one.project for one in new}:
            await anyio.to_thread.run_sync(self._watch, project)
        if self._looking is None or self._looking.done():
            self._looking = asyncio.create_task(self._look_around())

    def _too_many(self, per_session: bool) -> GitmailError:
        if per_session:
            return GitmailError(TOO_MANY_SUBSCRIPTIONS, f"this session already holds {self.per_session} "
                                "subscriptions, the most one may: unsubscribe from one first",
                                {"limit": self.per_session, "scope": "session"})
        return GitmailError(TOO_MANY_SUBSCRIPTIONS, f"this server already holds {self.total} subscriptions, the "
                            "most it allows: read instead (read_messages waits for new mail), or try again later",
                            {"limit": self.total, "scope": "server"})

    def _drop(self, key: int, uris: list[str]) -> None:
        """``key``'s subscriptions to ``uris`` end; a URI nobody holds any more is no longer watched."""
        with self._lock:
            session, held = self._sessions.get(key, (None, set()))
            for uri in uris:
                if uri not in held:
                    continue
                held.discard(uri)
                self._paused.discard((key, uri))
                watched = self._watched[uri]
                watched.holders -= 1
                if not watched.holders:
                    del self._watched[uri]
            if not held:
                self._sessions.pop(key, None)
            projects = {w.target.project for w in self._watched.values()}
            gone = [p for p in self._watches if p not in projects]
            watches = [self._watches.pop(p) for p in gone]
        for watch in watches:
            watch.close()

    def _mark(self, one: Target) -> object:
        """What ``one`` shows now, in as little as tells a change: the newest arrival, the thread's last message,
        or the channel's newest post."""
        if one.kind == "inbox":
            return self.mail.inbox_mark(one.project, one.name)
        if one.kind == "channel":
            return self.mail.channel_mark(one.project, one.name)
        return self.mail.thread_mark(one.project, one.name)

    def _watch(self, project: str) -> None:
        with self._lock:
            if project in self._watches:
                return
        watch = self.mail.watch_feed(project, lambda: self._moved(project))
        with self._lock:
            if project in self._watches:
                watch.close()
            else:
                self._watches[project] = watch

    def _moved(self, project: str) -> None:
        """The project's feed may have moved (called from the thread that moved it)."""
        loop = self._loop
        if loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop is closed: the server is stopping
                loop.call_soon_threadsafe(self._schedule, project)

    def _schedule(self, project: str) -> None:
        self._dirty.add(project)
        if not self._checking:
            self._checking = True
            asyncio.get_running_loop().create_task(self._check())

    async def _check(self) -> None:
        """Compare each watched URI of the moved projects with its mark; notify the ones that changed."""
        try:
            while self._dirty:
                projects, self._dirty = self._dirty, set()
                changed = await anyio.to_thread.run_sync(self._changed, projects)
                for uri in changed:
                    await self._notify(uri)
        finally:
            self._checking = False

    def _changed(self, projects: set[str]) -> list[str]:
        with self._lock:
            watched = [w for w in self._watched.values() if w.target.project in projects]
        changed = []
        for one in watched:
            try:
                mark = self._mark(one.target)
            except GitmailError:
                continue  # the agent or thread is gone: nothing more will arrive there
            if mark != one.mark:
                one.mark = mark
                changed.append(one.target.uri)
        return changed

    async def _notify(self, uri: str) -> None:
        await self.bus.publish(ResourceUpdated(uri=uri))
        with self._lock:
            sessions = [(key, session()) for key, (session, held) in self._sessions.items()
                        if session is not None and uri in held and (key, uri) not in self._paused]
        for key, connection in sessions:
            try:
                if connection is None:
                    raise ConnectionError("the session ended")
                await connection.send_resource_updated(uri)
            except Exception:  # noqa: BLE001 - a session that ended takes its subscriptions with it
                with self._lock:
                    held = list(self._sessions.get(key, (None, set()))[1])
                self._drop(key, held)

    async def _look_around(self) -> None:
        """While anything is subscribed, look at each watched project for changes nobody announced."""
        while True:
            await asyncio.sleep(LOOK_AGAIN)
            with self._lock:
                watches = list(self._watches.values())
            if not watches:
                return
            for watch in watches:
                with contextlib.suppress(Exception):
                    await anyio.to_thread.run_sync(watch.look)
