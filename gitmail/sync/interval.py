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
from gitmail.storage.background import Periodic
from gitmail.storage.store import Store

from .remotes import projects_with_remotes
from .syncer import sync_project

_log = logging.getLogger("gitmail.sync")


class IntervalSyncer(Periodic):
    """Syncs every project that has remotes, every ``interval`` seconds, in a daemon thread.

    A server owns one for its lifetime (``start()`` / ``stop()``) and can ask
    for an immediate round with :meth:`sync_now`. A failure never stops the
    loop; the next round simply tries again.
    """

    def __init__(self, store: Store, interval: float = 60.0):
        super().__init__("gitmail-sync", interval, log=_log, failure="sync round failed")
        self.store = store
        self.rounds = 0
        self._lock = threading.Lock()

    def run_round(self) -> list[dict[str, Any]]:
        return self.sync_now()

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
