"""The overdue-acknowledgement scan on an interval, for a long-running server.

``gitmail serve`` with ``GITMAIL_ACK_TTL_ENABLED=1`` owns one
:class:`AckScanner`: every ``scan_interval_seconds`` it scans each project
(:func:`gitmail.mail.overdue.scan`). The timer only decides *when*; what is
overdue and what was escalated is read from the archive each time, so a
restart loses nothing and repeats nothing.
"""

from __future__ import annotations

import logging
import threading

from gitmail.coord.context import Context
from gitmail.model.errors import GitmailError
from gitmail.storage.background import Periodic

from . import overdue
from .acksettings import AckSettings

_log = logging.getLogger("gitmail.acks")


class AckScanner(Periodic):
    """Scans every project of the store on an interval, in a daemon thread; :meth:`scan_now` runs one round."""

    def __init__(self, ctx: Context, settings: AckSettings):
        super().__init__("gitmail-acks", settings.scan_interval_seconds, log=_log,
                         failure="overdue-acknowledgement scan failed")
        self.ctx = ctx
        self.settings = settings
        self.rounds = 0
        self._lock = threading.Lock()

    def run_round(self) -> list[overdue.OverdueScan]:
        return self.scan_now()

    def scan_now(self) -> list[overdue.OverdueScan]:
        """One round over every project now; one report per project (a failing project is logged and skipped)."""
        reports = []
        with self._lock:
            for slug in self.ctx.store.slugs():
                try:
                    report = overdue.scan(self.ctx, slug, self.settings)
                except GitmailError as exc:
                    _log.warning("overdue-acknowledgement scan of %s failed: [%s] %s", slug, exc.code, exc.message)
                    continue
                if report.overdue and not self.settings.escalation_enabled:
                    _log.info("%s: %d acknowledgement(s) overdue", slug, len(report.overdue))
                reports.append(report)
            self.rounds += 1
        return reports
