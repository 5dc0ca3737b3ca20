"""Writing a store's history into an archive as commits in time order, batched, by their authors.

An importer hands over :class:`Entry` values (a record, or a message with its
copies, at the moment it happened, with the agent who did it) roughly in time
order. They are committed one UTC day at a time: within a day, one commit per
author and phase (profiles and other set-up first, then messages, then what
follows messages: receipts, reservations, contacts), each dated by its last
entry, so ``git log`` of the archive tells the store's story day by day and
every commit's tree is consistent (a receipt never precedes its message).
Commits are written many at a time through
:meth:`~gitmail.storage.engine.Archive.transact_many`: one pack, one
compare-and-swap of ``main`` per batch, and the index and checkout follow as
after any write.

Writing is idempotent, so an import can be run again, or resumed after it
was killed: an entry whose record is already at its path is not written
again (a message with its copies and attachments is one unit: all of it
landed in one commit or none did); a record that may change meets the one
in the archive by the merge rules a sync applies
(:func:`gitmail.sync.merge.merge_file`: a receipt keeps the earliest read
and acknowledgement, a reservation gains a release, a profile takes the
later change). Nothing is counted before its commit is in.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass, field

from gitmail.model.clock import UTC
from gitmail.storage.engine import Archive, Change
from gitmail.storage.snapshot import Snapshot
from gitmail.sync.merge import merge_file

from .report import Counts

SETUP, MESSAGES, FOLLOW_UP = 0, 1, 2  # the phases of one day, in commit order
DAY_MS = 86_400_000
MAX_PER_COMMIT = 500  # entries in one commit
MAX_PER_BATCH = 3000  # entries in one pack and compare-and-swap

# Called with ("building", batch) while a batch's commit is being built (main not moved yet) and with
# ("committed", batch) once it is in: a test's way to stop an import at a known point.
FAULT_HOOK: Callable[[str, int], None] | None = None


@dataclass
class Entry:
    """One thing that happened: a record (``files``' first path) and what comes with it."""

    when_ms: int
    phase: int
    author: str
    email: str | None
    kind: str  # what the report counts it as (messages, receipts, ...)
    line: str  # its line in the commit message
    files: dict[str, bytes]  # the record first, then its copies; written together or not at all
    shared: dict[str, bytes] = field(default_factory=dict)  # attachments: written when absent, counted apart
    mutable: bool = False  # meets a record already there by the merge rules of a sync; else that one is kept
    also: str | None = None  # another kind the report counts it as too (an agent's token)


@dataclass
class Outcome:
    kind: str
    state: str  # imported, present
    attachments: tuple[int, int] = (0, 0)  # files shared by messages: written now, found already
    also: str | None = None


class TimelineWriter:
    """Takes entries in time order and commits them day by day into one archive (or only counts, dry)."""

    def __init__(self, archive: Archive | None, *, source: str, counts: dict[str, Counts], dry_run: bool = False,
                 progress: Callable[[int], None] | None = None, max_per_commit: int | None = None,
                 max_per_batch: int | None = None):
        """``dry_run`` only counts; ``archive`` None (a dry run on a project not created yet) counts all as new."""
        self.archive = archive
        self.source = source
        self.counts = counts
        self.progress = progress
        self.max_per_commit = max_per_commit or MAX_PER_COMMIT
        self.max_per_batch = max_per_batch or MAX_PER_BATCH
        self.dry_run = dry_run or archive is None
        self.commits: set[str] = set()
        self.batches = 0
        self._day: int | None = None  # days since the epoch (UTC)
        self._today: list[Entry] = []
        self._batch: list[list[Entry]] = []
        self._batched = 0

    def add(self, entry: Entry) -> None:
        day = entry.when_ms // DAY_MS
        if self._day is not None and day > self._day:
            self._close_day()
        if self._day is None or day > self._day:
            self._day = day
        self._today.append(entry)  # one from an earlier day (a source out of order) joins the current one

    def finish(self) -> None:
        self._close_day()
        self._write_batch()

    # -- grouping -----------------------------------------------------------------
    def _close_day(self) -> None:
        groups: dict[tuple[int, str, str | None], list[Entry]] = {}
        for entry in self._today:
            groups.setdefault((entry.phase, entry.author, entry.email), []).append(entry)
        for key in sorted(groups, key=lambda k: k[0]):  # phases in order; authors by their first entry
            group = groups[key]
            for start in range(0, len(group), self.max_per_commit):
                self._batch.append(group[start:start + self.max_per_commit])
                self._batched += len(self._batch[-1])
                if self._batched >= self.max_per_batch:
                    self._write_batch()
        self._today = []

    # -- writing ------------------------------------------------------------------
    def _write_batch(self) -> None:
        if not self._batch:
            return
        self.batches += 1
        number, groups = self.batches, self._batch
        self._batch, self._batched = [], 0
        fns = [self._transaction(group, number if i == 0 else None) for i, group in enumerate(groups)]
        if self.dry_run or self.archive is None:
            snap = self.archive.snapshot() if self.archive is not None else None
            results = [fn(snap).result if snap is not None else _all_new(group) for fn, group in zip(fns, groups,
                                                                                                       strict=True)]
        else:
            committed = self.archive.transact_many(fns)
            self.commits.update(item.commit for item in committed if item.commit)
            results = [item.result for item in committed]
            if FAULT_HOOK is not None:
                FAULT_HOOK("committed", number)
        for outcomes in results:
            for outcome in outcomes:
                for kind in filter(None, (outcome.kind, outcome.also)):
                    self.counts[kind].imported += outcome.state == "imported"
                    self.counts[kind].present += outcome.state == "present"
                self.counts["attachments"].imported += outcome.attachments[0]
                self.counts["attachments"].present += outcome.attachments[1]
        if self.progress is not None:
            self.progress(sum(1 for group in groups for entry in group if entry.kind == "messages"))

    def _transaction(self, group: list[Entry], batch: int | None) -> Callable[[Snapshot], Change]:
        last = group[-1]
        kinds: dict[str, int] = {}
        for entry in group:
            kinds[entry.kind] = kinds.get(entry.kind, 0) + 1
        what = ", ".join(f"{count} {kind if count > 1 else _SINGULAR.get(kind, kind)}" for kind, count in kinds.items())
        title = f"Import {what} by {last.author} ({_day_of(last.when_ms)}) from {self.source}"
        body = "\n".join(entry.line for entry in group)

        def fn(snap: Snapshot) -> Change:
            if batch is not None and FAULT_HOOK is not None:
                FAULT_HOOK("building", batch)
            change = Change(f"{title}\n\n{body}\n", author=last.author, author_email=last.email,
                            when=last.when_ms // 1000)
            change.result = [_place(snap, change, entry) for entry in group]
            return change

        return fn


def _place(snap: Snapshot, change: Change, entry: Entry) -> Outcome:
    """Queue ``entry``'s files unless its record is there already (or merge it with the one there)."""
    first, data = next(iter(entry.files.items()))
    existing = change.edits.get(first) if first in change.edits else snap.read(first)
    if existing == data:
        return Outcome(entry.kind, "present", (0, len(entry.shared)), entry.also)  # written before, byte for byte
    if existing is not None:
        merged = merge_file(first, None, existing, data) if entry.mutable else None
        if merged is None or merged.conflict is not None or merged.content in (None, existing):
            # the same record, or one gitmail keeps (an agent's name taken by another)
            return Outcome(entry.kind, "present", (0, len(entry.shared)), entry.also)
        assert merged.content is not None
        change.put(first, merged.content)
        return Outcome(entry.kind, "imported", also=entry.also)
    change.edits.update(entry.files)  # paths made by the record classes; the engine checks each as it writes it
    added = 0
    for path, content in entry.shared.items():
        if path not in change.edits and not snap.exists(path):
            change.edits[path] = content
            added += 1
    return Outcome(entry.kind, "imported", (added, len(entry.shared) - added), entry.also)


def _all_new(group: list[Entry]) -> list[Outcome]:
    return [Outcome(entry.kind, "imported", (len(entry.shared), 0), entry.also) for entry in group]


_SINGULAR = {"projects": "project", "agents": "agent", "messages": "message", "receipts": "receipt",
             "contacts": "contact", "reservations": "reservation", "products": "product", "windows": "window",
             "summaries": "summary"}


def _day_of(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d")
