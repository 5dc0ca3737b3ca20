"""Wake channels: agents woken by a signed webhook or a server-sent event stream when what they wait for resolves.

An agent's capability card (``set_card``) names how it is woken:
``brief`` (the default: it reads at its next look), ``sse`` (its host keeps
``GET /wake/<project slug>/<agent>`` open and hears each wake-up as an event)
or ``webhook`` (the server POSTs each wake-up, signed, to the URL the agent
gave; see :mod:`.webhooks`). What wakes an agent is :mod:`gitmail.mail.wakeups`'
list (a reply, an acknowledgement, an approved contact), found in the records
each new tip of a project brings: this server's own commits at once, and
those a sync, a push or another process brings when the project's index
takes them in (the watcher reports them, and every :data:`LOOK_AGAIN`
seconds the server looks at the tip of each project it wakes agents of).
A wake-up is handed on after the commit that made it, once, and never carries
a body.

The stream's checks are the file endpoint's (:mod:`.filehttp`): the
server's bearer token when it has one, then the agent's registration token
in ``X-Agent-Token``; the ``Host`` / ``Origin`` rules stand in front of it.
A stream is refused with ``WAKE_CHANNEL_MISMATCH`` unless the agent's card
asks for ``sse``, and with ``TOO_MANY_SUBSCRIPTIONS`` past
:data:`~gitmail.model.limits.WAKE_STREAMS_MAX` open streams. Each event is
``id: <wake-up ID>``, ``event: wake`` and the wake-up's JSON; a comment line
opens the stream (so a host knows it is listening) and keeps it alive. A
host that reconnects with ``Last-Event-ID`` first gets the wake-ups it
missed meanwhile, of the last :data:`STREAM_BACKLOG` handed on for the agent.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import logging
import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

import anyio
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from gitmail.mail.facade import CardSet, Mail, WakeEvent
from gitmail.model.errors import TOO_MANY_SUBSCRIPTIONS, WAKE_CHANNEL_MISMATCH, GitmailError, invalid
from gitmail.model.limits import WAKE_STREAMS_MAX
from gitmail.model.results import OMIT_NONE, result, wire
from gitmail.storage.store import Store

from .filehttp import TOKEN_HEADER, FileEndpoint
from .wakestate import Hook, WakeState
from .webhooks import Deliverer, Delivery, allowed_hosts, check_target, new_secret

WAKE_HTTP_PATH = "/wake"
LOOK_AGAIN = 1.0  # seconds: how often each woken-for project's tip is compared with the last one seen
KEEP_ALIVE = 15.0  # seconds between the comment lines that keep an idle stream open
STREAM_BACKLOG = 64  # wake-ups one stream may have waiting before the oldest are dropped

_log = logging.getLogger("gitmail.server")


@result
class CardPublished(CardSet):
    """``set_card``'s answer: the card's new version and, for a webhook, its target and (this once) its secret."""

    webhook_url: str | None = field(default=None, metadata=OMIT_NONE)
    webhook_secret: str | None = field(default=None, metadata=OMIT_NONE)


@dataclass
class _Stream:
    loop: asyncio.AbstractEventLoop
    events: asyncio.Queue[WakeEvent]


@dataclass
class Wakes:
    """The wake-ups of one server: the projects it watches, its webhooks and its open streams."""

    store: Store
    mail: Mail
    state: WakeState
    deliverer: Deliverer
    allowed: frozenset[str] = frozenset()
    max_streams: int = WAKE_STREAMS_MAX
    _tips: dict[str, str | None] = field(default_factory=dict)
    _watches: dict[str, Any] = field(default_factory=dict)  # project: its FeedWatch (None while being made)
    _streams: dict[tuple[str, str], list[_Stream]] = field(default_factory=dict)
    _recent: dict[tuple[str, str], collections.deque[WakeEvent]] = field(default_factory=dict)  # for reconnects
    _dirty: set[str] = field(default_factory=set)
    _moved: threading.Condition = field(default_factory=lambda: threading.Condition(threading.RLock()))
    _thread: threading.Thread | None = None
    _stopping: bool = False

    @classmethod
    def serving(cls, store: Store, mail: Mail) -> Wakes:
        """The wake-ups of a server on ``store``, its settings from the environment (see :mod:`.webhooks`)."""
        state = WakeState(store.home)
        return cls(store, mail, state, Deliverer(state, retry_s=Deliverer.retry_from_env()), allowed_hosts())

    def start(self) -> Wakes:
        """Start delivering and watching the projects that have webhooks here."""
        self.deliverer.start()
        for slug in self.state.hooked_projects():
            try:
                self.watch(slug)
            except GitmailError as exc:  # the project was deleted here: its webhooks wait for nothing
                _log.warning("not watching %s for wake-ups: %s", slug, exc.message)
        self._thread = threading.Thread(target=self._run, name="gitmail-wakes", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        with self._moved:
            self._stopping = True
            self._moved.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self.deliverer.stop()
        for watch in list(self._watches.values()):
            if watch is not None:
                watch.close()
        self.state.close()

    # -- set_card's local half ---------------------------------------------------------
    def check_target(self, url: object) -> str:
        """``url`` if this server may POST wake-ups there (WAKE_TARGET_REFUSED otherwise)."""
        return check_target(url, self.allowed)

    def publish(self, project_key: str, card: CardSet, url: str | None) -> CardPublished:
        """Keep (or forget) the agent's webhook after its card was published; the answer has the secret once."""
        slug = self.store.resolve(project_key)
        secret = None
        if url is not None:
            secret = new_secret()
            self.state.set_hook(Hook(slug, card.agent, url, secret))
        else:
            self.state.drop_hook(slug, card.agent)
        self.watch(slug)
        return CardPublished(**{**dict(wire(card)), "webhook_url": url, "webhook_secret": secret})

    # -- finding wake-ups --------------------------------------------------------------
    def watch(self, slug: str) -> None:
        """Follow ``slug``'s tip from where it was last seen (or from now, the first time)."""
        with self._moved:
            if slug in self._watches:
                return
            self._watches[slug] = None
        try:
            tip = self.state.seen(slug) or self.mail.tip(slug)
            watch = self.mail.watch_feed(slug, lambda: self._poke(slug))
        except Exception:
            with self._moved:
                self._watches.pop(slug, None)  # the next set_card or stream tries again
            raise
        with self._moved:
            self._tips[slug] = tip
            self._watches[slug] = watch
            self._dirty.add(slug)
            self._moved.notify_all()

    def _poke(self, slug: str) -> None:
        with self._moved:
            self._dirty.add(slug)
            self._moved.notify_all()

    def _run(self) -> None:
        """Hand on the wake-ups of each project that moved; look at every watched tip now and then."""
        while True:
            with self._moved:
                if not self._dirty and not self._stopping:
                    self._moved.wait(LOOK_AGAIN)
                if self._stopping:
                    return
                dirty, self._dirty = self._dirty or set(self._tips), set()
            for slug in sorted(dirty):
                try:
                    self._hand_on(slug)
                except Exception:  # noqa: BLE001 - one project's failure must not stop the others' wake-ups
                    _log.exception("finding the wake-ups of %s failed; it is no longer watched", slug)
                    self._forget(slug)

    def _forget(self, slug: str) -> None:
        """Stop watching ``slug`` (a set_card or a stream there watches it again)."""
        with self._moved:
            self._tips.pop(slug, None)
            watch = self._watches.pop(slug, None)
        if watch is not None:
            watch.close()

    def _hand_on(self, slug: str) -> None:
        since, tip = self._tips.get(slug), self.mail.tip(slug)
        if tip is None or tip == since:
            return
        events = self.mail.wake_events(slug, since, tip)
        if events:
            channels = {name.lower(): channel for name, channel in self.mail.wake_channels(slug).items()}
            for event in events:
                self._wake(slug, event, channels.get(event.agent.lower()))
        self._tips[slug] = tip
        self.state.remember_seen(slug, tip)

    def _wake(self, slug: str, event: WakeEvent, channel: str | None) -> None:
        body = json.dumps(dict(wire(event)), separators=(",", ":")).encode()
        if channel == "webhook":
            hook = self.state.hook(slug, event.agent)
            if hook is not None:
                self.deliverer.submit(Delivery(event.id, body, hook))
        elif channel == "sse":
            key = (slug, event.agent.lower())
            with self._moved:  # kept and handed on at once: a stream that opens meanwhile gets it exactly once
                self._recent.setdefault(key, collections.deque(maxlen=STREAM_BACKLOG)).append(event)
                streams = list(self._streams.get(key, ()))
            for stream in streams:
                with contextlib.suppress(RuntimeError):  # its loop has closed: the stream is ending
                    stream.loop.call_soon_threadsafe(_offer, stream.events, event)

    # -- streams -----------------------------------------------------------------------
    def check_room(self) -> None:
        """TOO_MANY_SUBSCRIPTIONS when the server already holds as many streams as it allows."""
        with self._moved:
            if sum(len(held) for held in self._streams.values()) >= self.max_streams:
                raise GitmailError(TOO_MANY_SUBSCRIPTIONS, f"this server already holds {self.max_streams} wake "
                                   "streams, the most it allows: use a webhook, or read instead, or try again later",
                                   {"limit": self.max_streams, "scope": "server"})

    @contextlib.contextmanager
    def stream(self, slug: str, agent: str, after: str | None = None) -> Iterator[asyncio.Queue[WakeEvent]]:
        """Hold one open stream of ``agent`` for as long as the block runs (TOO_MANY_SUBSCRIPTIONS past the cap).

        ``after`` is the ``Last-Event-ID`` of a stream that reconnects: the
        wake-ups since that one, of the last :data:`STREAM_BACKLOG` this
        server handed on, come first.
        """
        one = _Stream(asyncio.get_running_loop(), asyncio.Queue(STREAM_BACKLOG))
        key = (slug, agent.lower())
        with self._moved:
            self.check_room()
            self._streams.setdefault(key, []).append(one)
            recent = [event.id for event in self._recent.get(key, ())]
            if after in recent:
                for event in list(self._recent[key])[recent.index(after) + 1:]:
                    one.events.put_nowait(event)
        try:
            yield one.events
        finally:
            with self._moved:
                held = self._streams.get(key, [])
                if one in held:
                    held.remove(one)
                if not held:
                    self._streams.pop(key, None)


def _offer(events: asyncio.Queue[WakeEvent], event: WakeEvent) -> None:
    """Queue ``event`` for a stream, dropping the oldest waiting one when the stream has fallen behind."""
    if events.full():
        events.get_nowait()
    events.put_nowait(event)


class WakeEndpoint(FileEndpoint):
    """``GET /wake/<project slug>/<agent>``: the agent's wake-ups as server-sent events, behind the file checks."""

    def __init__(self, store: Store, mail: Mail, token: str | None, wakes: Wakes):
        super().__init__(store, mail, token)
        self.wakes = wakes

    def routes(self) -> list[Route]:
        return [Route(WAKE_HTTP_PATH + "/{project}/{agent}", self.listen, methods=["GET"])]

    async def listen(self, request: Request) -> Response:
        """Check the caller as the agent, then stream its wake-ups until it hangs up."""
        async def handle() -> Response:
            project, agent = request.path_params["project"], request.path_params["agent"]
            token = request.headers.get(TOKEN_HEADER)
            if not token:
                raise invalid("a wake stream needs the agent's proof: its registration_token in the X-Agent-Token "
                              "header", field="X-Agent-Token")

            def check() -> str:
                self.access.require_agent(None, project, agent, token, argument="X-Agent-Token header")
                slug = self.wakes.store.resolve(project)
                channel = {n.lower(): c for n, c in self.mail.wake_channels(slug).items()}.get(agent.lower())
                if channel != "sse":
                    raise GitmailError(WAKE_CHANNEL_MISMATCH, f"{agent}'s card asks to be woken by "
                                       f"{channel or 'brief'}, not by a stream: publish it with set_card "
                                       "wake_channel='sse' first", {"agent": agent, "wake_channel": channel or "brief"})
                self.wakes.check_room()
                self.wakes.watch(slug)
                return slug

            slug = await anyio.to_thread.run_sync(check)
            after = request.headers.get("last-event-id")
            return StreamingResponse(self._events(slug, agent, after), media_type="text/event-stream",
                                     headers={"cache-control": "no-store", "x-accel-buffering": "no"})
        return await self._run(request, handle)

    async def _events(self, slug: str, agent: str, after: str | None) -> AsyncIterator[str]:
        with self.wakes.stream(slug, agent, after) as events:
            yield ": listening\n\n"
            while True:
                try:
                    event = await asyncio.wait_for(events.get(), KEEP_ALIVE)
                except TimeoutError:
                    yield ": keep-alive\n\n"
                    continue
                data = json.dumps(dict(wire(event)), separators=(",", ":"))
                yield f"id: {event.id}\nevent: wake\ndata: {data}\n\n"
