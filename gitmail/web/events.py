"""Live updates: the watcher's news of new commits, handed to pages as server-sent events.

The server's watcher calls :meth:`Events.publish` with a project's slug from
its own thread whenever that archive's ``main`` moves (a write of this
server, another process, a push, a sync). Every open event stream of that
project (and every stream of all projects) gets a ``change`` event; the page
then fetches itself again and swaps in the lists that changed.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator

HEARTBEAT_SECONDS = 15.0


class Events:
    """Fan-out of project changes to the event streams open right now."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._streams: set[tuple[asyncio.AbstractEventLoop, asyncio.Queue[str | None], str | None]] = set()
        self._closed = False
        self.published = 0

    def publish(self, slug: str) -> None:
        """Tell every stream following ``slug`` (or every project) that it changed; safe from any thread."""
        with self._lock:
            streams = list(self._streams)
            self.published += 1
        for loop, queue, wanted in streams:
            if wanted is None or wanted == slug:
                try:
                    loop.call_soon_threadsafe(queue.put_nowait, slug)
                except RuntimeError:
                    pass  # that stream's loop is gone; it is dropped when its generator ends

    def close(self) -> None:
        """End every stream (the server is stopping)."""
        with self._lock:
            self._closed = True
            streams = list(self._streams)
        for loop, queue, _ in streams:
            try:
                loop.call_soon_threadsafe(queue.put_nowait, None)
            except RuntimeError:
                pass

    async def stream(self, slug: str | None) -> AsyncIterator[str]:
        """Server-sent event lines for one client, until it leaves or the server stops."""
        queue: asyncio.Queue[str | None] = asyncio.Queue()
        entry = (asyncio.get_running_loop(), queue, slug)
        with self._lock:
            if self._closed:
                return
            self._streams.add(entry)
        try:
            yield "retry: 2000\n: connected\n\n"
            while True:
                try:
                    changed = await asyncio.wait_for(queue.get(), HEARTBEAT_SECONDS)
                except TimeoutError:
                    yield ": still here\n\n"
                    continue
                if changed is None:
                    return
                yield f"event: change\ndata: {changed}\n\n"
        finally:
            with self._lock:
                self._streams.discard(entry)
