"""What every domain operation takes: the store, its clock and recent activity.

Every entry point of the coordination and mail layers is
``operation(ctx, project_key, ...)`` with this :class:`Context` first, so
they all read time from one clock (``ctx.clock``, the store's) and record
activity one way: an operation that acts as an agent (a write as it, or a read
of its own mail or journal) calls ``ctx.touch(project_key, name)`` with the
registered spelling once it has succeeded. Operations that act on an agent
without being it (retiring it, say) or read the project as a whole record
nothing.

Activity timestamps (when an agent last did anything, reads included) change
on every call, so they are kept in memory here and never committed: putting
them in the repository would turn every inbox poll into a commit.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from gitmail.model.clock import HLC, HybridClock
from gitmail.storage.engine import Archive
from gitmail.storage.store import Store


class Activity:
    """Last-seen timestamps per (project slug, agent name), in memory only."""

    def __init__(self) -> None:
        self._seen: dict[tuple[str, str], str] = {}
        self._lock = threading.Lock()

    def touch(self, slug: str, name: str, ts: str) -> str:
        with self._lock:
            key = (slug, name.lower())
            if ts > self._seen.get(key, ""):
                self._seen[key] = ts
            return self._seen[key]

    def last(self, slug: str, name: str) -> str | None:
        with self._lock:
            return self._seen.get((slug, name.lower()))

    def forget(self, slug: str, name: str | None = None) -> None:
        with self._lock:
            for key in [k for k in self._seen if k[0] == slug and (name is None or k[1] == name.lower())]:
                del self._seen[key]


@dataclass
class Context:
    """The shared state :class:`gitmail.mail.facade.Mail` hands to each domain operation."""

    store: Store
    activity: Activity = field(default_factory=Activity)

    def archive(self, project_key: str) -> Archive:
        """The archive of an existing project (NOT_FOUND otherwise)."""
        return self.store.archive(project_key)

    def slug(self, project_key: str) -> str:
        return self.store.resolve(project_key)

    @property
    def clock(self) -> HybridClock:
        """The store's clock: every timestamp, clock value and ID an operation writes comes from it."""
        return self.store.clock

    def tick(self) -> HLC:
        return self.store.clock.tick()

    def touch(self, project_key: str, name: str) -> str:
        """Record that ``name`` acted in the project just now (in memory only)."""
        return self.activity.touch(self.slug(project_key), name, self.clock.now_ts())
