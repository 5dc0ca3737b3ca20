"""The server's local wake-up state: webhook targets and secrets, delivered wake-ups, where each project was seen.

None of it is in any archive, so none of it syncs or lands in git history:
a webhook's URL and signing secret belong to this server (another machine's
server cannot deliver to a loopback URL here, nor should it hold the
secret). It lives in one SQLite file, ``$GITMAIL_HOME/wake/state.sqlite``,
in a folder only the server's user may enter, written with owner-only
permissions. Deleting it forgets every webhook (agents publish their card
again) and which wake-ups were delivered.

It remembers:

- ``hooks``: per project and agent, the URL and secret ``set_card`` gave;
- ``delivered``: the ID of each wake-up taken for delivery, so neither a
  restart nor a second server on the same store delivers one again (the
  newest :data:`DELIVERED_KEPT` are kept);
- ``seen``: per project, the last commit whose wake-ups were handed on, so
  a restarted server wakes agents for what arrived while it was down.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from dataclasses import dataclass

DELIVERED_KEPT = 100_000

_SCHEMA = """
CREATE TABLE IF NOT EXISTS hooks (slug TEXT NOT NULL, agent TEXT NOT NULL, name TEXT NOT NULL, url TEXT NOT NULL,
                                  secret TEXT NOT NULL, PRIMARY KEY (slug, agent));
CREATE TABLE IF NOT EXISTS delivered (n INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE);
CREATE TABLE IF NOT EXISTS seen (slug TEXT PRIMARY KEY, tip TEXT NOT NULL);
"""


@dataclass(frozen=True)
class Hook:
    """Where one agent's wake-ups are POSTed, and the secret they are signed with."""

    slug: str
    agent: str
    url: str
    secret: str


class WakeState:
    """The state file of one store's server (see the module docs); safe to use from any thread."""

    def __init__(self, home: str):
        folder = os.path.join(home, "wake")
        os.makedirs(folder, mode=0o700, exist_ok=True)
        os.chmod(folder, 0o700)
        self.path = os.path.join(folder, "state.sqlite")
        fd = os.open(self.path, os.O_CREAT | os.O_RDWR, 0o600)
        os.close(fd)
        os.chmod(self.path, 0o600)
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._lock = threading.Lock()
        with self._lock:
            self._db.executescript(_SCHEMA)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def set_hook(self, hook: Hook) -> None:
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO hooks VALUES (?, ?, ?, ?, ?)",
                             (hook.slug, hook.agent.lower(), hook.agent, hook.url, hook.secret))

    def drop_hook(self, slug: str, agent: str) -> None:
        with self._lock:
            self._db.execute("DELETE FROM hooks WHERE slug = ? AND agent = ?", (slug, agent.lower()))

    def hook(self, slug: str, agent: str) -> Hook | None:
        with self._lock:
            row = self._db.execute("SELECT slug, name, url, secret FROM hooks WHERE slug = ? AND agent = ?",
                                   (slug, agent.lower())).fetchone()
        return Hook(*row) if row else None

    def hooked_projects(self) -> list[str]:
        """The projects some agent of which has a webhook here."""
        with self._lock:
            return [row[0] for row in self._db.execute("SELECT DISTINCT slug FROM hooks ORDER BY slug")]

    def delivered(self, event_id: str) -> bool:
        """Whether the wake-up was taken for delivery already (see :meth:`claim`)."""
        with self._lock:
            return self._db.execute("SELECT 1 FROM delivered WHERE id = ?", (event_id,)).fetchone() is not None

    def claim(self, event_id: str) -> bool:
        """Take a wake-up for delivery: True for the first claim of its ID, in this process or any other on the store.

        Claimed before the first attempt, so two servers on one store never
        both deliver it, and neither does a restart, even of a delivery that
        was dropped (at most once). The newest :data:`DELIVERED_KEPT` IDs are kept.
        """
        with self._lock:
            cursor = self._db.execute("INSERT OR IGNORE INTO delivered (id) VALUES (?)", (event_id,))
            if cursor.rowcount != 1:
                return False
            if cursor.lastrowid and cursor.lastrowid % 1000 == 0:
                self._db.execute("DELETE FROM delivered WHERE n <= ?", (cursor.lastrowid - DELIVERED_KEPT,))
            return True

    def seen(self, slug: str) -> str | None:
        with self._lock:
            row = self._db.execute("SELECT tip FROM seen WHERE slug = ?", (slug,)).fetchone()
        return str(row[0]) if row else None

    def remember_seen(self, slug: str, tip: str) -> None:
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO seen VALUES (?, ?)", (slug, tip))
