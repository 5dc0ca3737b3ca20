"""Wall-clock timestamps and the hybrid logical clock.

Timestamps in records are UTC ISO-8601 strings with millisecond precision
(``2026-12-01T05:39:01.123Z``): readable, sortable as text, and free of time
zone surprises when machines in different zones share an archive.

Every mutable record carries a hybrid logical clock value ``HLC``: wall time in
milliseconds, a counter that orders events within one millisecond, and the node
(machine) that made the change. Comparing two values is a total order, so every
machine settles "last writer wins" the same way.

A store reads the time only through its :class:`HybridClock`: timestamps,
clock values, record IDs and commit times all come from the clock's wall-time
source. Passing another source (``Store(home, wall=...)``) moves all of them
together, which is how tests let hours pass without waiting.
"""

from __future__ import annotations

import datetime as dt
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from .ids import IdMinter

UTC = dt.UTC
WallTime = Callable[[], float]  # seconds since the epoch, as time.time gives them
_TS_RE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?(Z|[+-]\d{2}:\d{2})$")


def format_ts(value: dt.datetime) -> str:
    """Render an aware datetime as ``YYYY-MM-DDTHH:MM:SS.mmmZ``."""
    if value.tzinfo is not UTC:
        value = value.astimezone(UTC)
    # isoformat is done in C; strftime cost a tenth of an import's time
    return value.isoformat(timespec="milliseconds")[:-6] + "Z"


def parse_ts(text: str) -> dt.datetime:
    """Parse an ISO-8601 timestamp with a zone (``Z`` or an offset).

    Raises ``ValueError`` for anything else, so callers can name the field.
    """
    if not isinstance(text, str) or not _TS_RE.match(text):
        raise ValueError(f"not an ISO-8601 timestamp with a time zone: {text!r}")
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


@dataclass(frozen=True, order=True)
class HLC:
    """One hybrid logical clock reading; ordering is (wall, counter, node)."""

    wall_ms: int
    counter: int
    node: str

    _RE = re.compile(r"^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z)/(\d+)/([A-Za-z0-9_.-]{1,64})$")

    def __str__(self) -> str:
        stamp = format_ts(dt.datetime.fromtimestamp(self.wall_ms / 1000, tz=UTC))
        return f"{stamp}/{self.counter:04d}/{self.node}"

    @classmethod
    def parse(cls, text: str) -> HLC:
        match = cls._RE.match(text) if isinstance(text, str) else None
        if not match:
            raise ValueError(f"not a clock value (expected TIMESTAMP/COUNTER/NODE): {text!r}")
        wall = parse_ts(match.group(1))
        return cls(int(round(wall.timestamp() * 1000)), int(match.group(2)), match.group(3))


class HybridClock:
    """A node's clock: wall time, hybrid logical clock readings and new IDs; safe to share between threads.

    ``wall`` is where the wall time comes from (default :func:`time.time`).
    """

    def __init__(self, node: str, *, wall: WallTime = time.time):
        self.node = node
        self.wall = wall
        self._lock = threading.Lock()
        self._last = HLC(0, 0, node)
        self._ids = IdMinter()

    def time(self) -> float:
        """Seconds since the epoch."""
        return self.wall()

    def now(self) -> dt.datetime:
        return dt.datetime.fromtimestamp(self.wall(), tz=UTC)

    def now_ts(self) -> str:
        return format_ts(self.now())

    def new_id(self) -> str:
        """A new record ID for the current time (see :mod:`gitmail.model.ids`)."""
        return self._ids.mint(int(self.wall() * 1000))

    def tick(self) -> HLC:
        """A reading later than every reading made or observed so far."""
        wall = int(self.wall() * 1000)
        with self._lock:
            if wall > self._last.wall_ms:
                self._last = HLC(wall, 0, self.node)
            else:
                self._last = HLC(self._last.wall_ms, self._last.counter + 1, self.node)
            return self._last

    def observe(self, seen: HLC) -> None:
        """Move past a reading seen on another node, so our next tick is later."""
        with self._lock:
            if (seen.wall_ms, seen.counter) > (self._last.wall_ms, self._last.counter):
                self._last = HLC(seen.wall_ms, seen.counter, self.node)
