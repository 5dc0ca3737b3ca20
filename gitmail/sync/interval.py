"""Syncing every project that has remotes on an interval, for a long-running server.

``gitmail serve --sync-interval S`` owns one :class:`IntervalSyncer`. Each
round is :func:`gitmail.sync.syncer.sync_project` for every project with a
remote, one round at a time. Each remote is synced on its own, its state
kept by :mod:`gitmail.sync.status` (where ``health_check``, the sync
resource and ``gitmail remote list`` read it), and every failure is logged.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from gitmail.model.errors import GitmailError
from gitmail.storage.store import Store

from .remotes import projects_with_remotes
from .syncer import sync_project

_log = logging.getLogger("gitmail.sync")


class IntervalSyncer:
    """Syncs every project that has remotes, every ``interval`` seconds, in a daemon thread.

    A server owns one for its lifetime (``start()`` / ``stop()``) and can ask
    for an immediate round with :meth:`sync_now`. A failure never stops the
    loop; the next round simply tries again.
    """

    def __init__(self, store: Store, interval: float = 60.0):
        self.store = store
        self.interval = interval
        self.rounds = 0
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def start(self) -> IntervalSyncer:
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._loop, name="gitmail-sync", daemon=True)
            self._thread.start()
        return self

    def stop(self, timeout: float = 30.0) -> None:
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(timeout)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.sync_now()
            except Exception:  # noqa: BLE001 - a bug in one round must not end the syncing
                _log.exception("sync round failed")

    def sync_now(self, project: str | None = None) -> list[dict[str, Any]]:
        """One round now (one project, or all with remotes); one report per project."""
        reports: list[dict[str, Any]] = []
        with self._lock:  # one round at a time; a second caller waits and then runs its own
            for slug in [self.store.resolve(project)] if project else projects_with_remotes(self.store):
                try:
                    reports.append(sync_project(self.store, slug).to_dict())
                except GitmailError as exc:
                    _log.warning("sync of %s failed: [%s] %s", slug, exc.code, exc.message)
                    reports.append({"project": slug, "exit_code": 2, "error": exc.to_dict()})
            self.rounds += 1
        return reports
