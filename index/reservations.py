"""The reservations in force at a commit, kept without rescanning the history.

Checking a new reservation for conflicts needs every active reservation of
the project, and released and expired records stay in the archive for audit,
so reading every reservation file grows with the whole history. A
:class:`ActiveReservations` keeps, in memory, the unreleased and unexpired
records as of one commit. Moving to another commit applies the git diff of
the ``reservations/`` subtree between the two (a handful of files per
commit, whatever else the commits hold), and a snapshot's queued
group-commit edits are applied on top, so a transaction sees exactly the
state it commits onto.

A process starts from the metadata store (:mod:`.meta`), whose reservation
table follows the archive like the rest of the index (the project's index
catches the store up first): it loads the open reservations as of the
store's watermark and diffs on from there, so a short process (the commit
guard's hook, a CLI command) never rescans the history. Only when the store
is missing or damaged is the subtree read in full.
"""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pygit2

from gitmail.model.clock import format_ts, parse_ts
from gitmail.model.records import LAYOUT, RESERVATIONS, Reservation, placed, reservation_path
from gitmail.storage.handles import tree_entry
from gitmail.storage.snapshot import Snapshot, blob_data, tree_delta

from .meta import Meta, MetaCorrupt
from .parse import record_from_fields


@dataclass(frozen=True)
class Entry:
    """One unreleased reservation with its expiry as a POSIX time."""

    record: Reservation
    expires: float

    def active_at(self, at: float) -> bool:
        return self.record.released_ts is None and at < self.expires


def _entry(path: str, data: bytes | None, horizon: float) -> Entry | None:
    if data is None:
        return None
    record = Reservation.from_bytes(data, path)
    if record.released_ts is not None:
        return None
    expires = parse_ts(record.expires_ts).timestamp()
    return Entry(record, expires) if expires > horizon else None


def record_entry(fields: dict[str, Any]) -> tuple[str, Entry] | None:
    """An entry from the metadata store's copy of a record (None if the copy is not a valid reservation)."""
    record = record_from_fields(Reservation, fields)
    if record is None:
        return None
    return reservation_path(record.id), Entry(record, parse_ts(record.expires_ts).timestamp())


def _subtree(repo: pygit2.Repository, commit: str | None) -> pygit2.Tree | None:
    if commit is None:
        return None
    sub = tree_entry(repo[commit].peel(pygit2.Tree), RESERVATIONS)
    return sub if isinstance(sub, pygit2.Tree) else None


def _scan(repo: pygit2.Repository, tree: pygit2.Tree, prefix: str, horizon: float,
          out: list[tuple[str, Entry | None]]) -> None:
    for item in tree:
        path = f"{prefix}/{item.name}"
        obj = repo[item.id]
        if isinstance(obj, pygit2.Tree):
            _scan(repo, obj, path, horizon, out)
        elif isinstance(obj, pygit2.Blob):
            entry = _entry(path, obj.data, horizon)
            if entry is not None:
                out.append((placed(path, LAYOUT), entry))


Shelves = Mapping[str, Mapping[str, Entry]]  # agent (lower case) -> path -> entry


@dataclass(frozen=True)
class Held:
    """The open reservations at one commit, by holder, with the exclusive ones also kept apart.

    Never changed once made: :meth:`edited` makes a new one that shares every
    holder's shelf it did not touch, so moving by a commit's few changed files
    costs the holders it touches, not every reservation in force, and a
    reader keeps the one it was handed while the set moves on. Entries may
    have expired since they were shelved: readers test :meth:`Entry.active_at`.
    """

    shelves: Shelves
    exclusive: Shelves

    @classmethod
    def of(cls, entries: Iterable[tuple[str, Entry | None]]) -> Held:
        """The set holding ``entries`` (path, entry), as loaded or scanned; nothing is pruned by time here."""
        return EMPTY.edited(entries, horizon=float("-inf"))

    def entries(self) -> Iterator[Entry]:
        """Every entry, holder by holder."""
        for shelf in self.shelves.values():
            yield from shelf.values()

    def held_by(self, agent: str) -> Iterator[Entry]:
        """The entries of one holder."""
        yield from self.shelves.get(agent.lower(), {}).values()

    def blocking(self, agent: str) -> Iterator[Entry]:
        """The exclusive entries of every holder but ``agent``: what ``agent``'s new reservations must not overlap."""
        me = agent.lower()
        for holder, shelf in self.exclusive.items():
            if holder != me:
                yield from shelf.values()

    def edited(self, changes: Iterable[tuple[str, Entry | None]], *, horizon: float) -> Held:
        """This set with each path's entry replaced (None: removed).

        A shelf it copies drops what expired by ``horizon`` on the way.
        """
        shelves, exclusive = _Shelving(self.shelves, horizon), _Shelving(self.exclusive, horizon)
        for path, entry in changes:
            shelves.drop(path)
            exclusive.drop(path)
            if entry is not None:
                shelves.put(path, entry)
                if entry.record.exclusive:
                    exclusive.put(path, entry)
        return Held(shelves.done(), exclusive.done())


class _Shelving:
    """A copy-on-write edit of one holder -> shelf mapping: a shelf is copied the first time it changes."""

    def __init__(self, base: Shelves, horizon: float):
        self.out: dict[str, Mapping[str, Entry]] = dict(base)
        self.copies: dict[str, dict[str, Entry]] = {}
        self.horizon = horizon

    def _shelf(self, holder: str) -> dict[str, Entry]:
        shelf = self.copies.get(holder)
        if shelf is None:
            shelf = {p: e for p, e in self.out.get(holder, {}).items() if e.expires > self.horizon}
            self.copies[holder] = self.out[holder] = shelf
        return shelf

    def drop(self, path: str) -> None:
        for holder in [h for h, shelf in self.out.items() if path in shelf]:
            self._shelf(holder).pop(path, None)  # the copy may have dropped it as expired

    def put(self, path: str, entry: Entry) -> None:
        self._shelf(entry.record.agent.lower())[path] = entry

    def done(self) -> Shelves:
        for holder, shelf in self.copies.items():
            if not shelf:
                del self.out[holder]
        return self.out


EMPTY = Held({}, {})


class ActiveReservations:
    """One project's open reservations at the last commit asked about; safe to share between threads."""

    def __init__(self, meta: Meta):
        self.meta = meta
        self._lock = threading.Lock()
        self.loaded = False  # whether the set was started (from the metadata store, or empty)
        self._commit: str | None = None
        self._tree_id: str | None = None
        self._held = EMPTY

    def at(self, snapshot: Snapshot, now: float) -> Held:
        """Every unreleased reservation ``snapshot`` sees (its queued edits included), by path in the newest layout.

        ``now`` (POSIX seconds, from the caller's clock) only lets shelves
        that are copied anyway drop what expired before it; callers test
        :meth:`Entry.active_at` for the instant they care about.
        """
        horizon = now - 1.0
        with self._lock:
            if not self.loaded:
                self._load(snapshot.repo, horizon)
            if self._commit != snapshot.commit:
                self._advance(snapshot.repo, snapshot.commit, horizon)
            held = self._held
        pending = snapshot.pending_edits(RESERVATIONS)
        if not pending:
            return held
        return held.edited(((placed(path, LAYOUT), _entry(path, data, horizon)) for path, data in pending.items()),
                           horizon=horizon)

    def _load(self, repo: pygit2.Repository, horizon: float) -> None:
        """Start from the metadata store's open reservations at its watermark (call with the lock held)."""
        try:
            watermark, rows = self.meta.open_reservations(format_ts(dt.datetime.fromtimestamp(horizon, dt.UTC)))
        except MetaCorrupt:
            watermark, rows = None, []  # the store is rebuilt elsewhere; here a full read of the subtree serves
        if watermark is not None and watermark in repo:
            tree = _subtree(repo, watermark)
            self._commit, self._tree_id = watermark, str(tree.id) if tree is not None else None
            self._held = Held.of(entry for fields in rows if (entry := record_entry(fields)) is not None)
        self.loaded = True

    def _advance(self, repo: pygit2.Repository, commit: str | None, horizon: float) -> None:
        """Move to ``commit`` by the diff of the reservations subtree (call with the lock held)."""
        tree = _subtree(repo, commit)
        tree_id = str(tree.id) if tree is not None else None
        if tree_id == self._tree_id:
            self._commit = commit
            return
        old_tree = None
        if tree is not None and self._tree_id is not None:
            try:
                old_tree = repo[self._tree_id].peel(pygit2.Tree)
            except (KeyError, ValueError):  # the tree we had is gone (history rewritten and pruned)
                old_tree = None
        held = EMPTY
        if tree is not None and old_tree is None:
            scanned: list[tuple[str, Entry | None]] = []
            _scan(repo, tree, RESERVATIONS, horizon, scanned)
            held = Held.of(scanned)
        elif tree is not None and old_tree is not None:
            held = self._held.edited(_changes(old_tree, tree, repo, horizon), horizon=horizon)
        self._commit, self._tree_id, self._held = commit, tree_id, held


def _changes(old_tree: pygit2.Tree, tree: pygit2.Tree, repo: pygit2.Repository,
             horizon: float) -> Iterator[tuple[str, Entry | None]]:
    """Each path the diff between two reservations subtrees touches, with its new entry (None: gone or closed)."""
    delta = tree_delta(old_tree, tree)
    # Deletions first: a reservation a migration moved leaves one path and arrives at another.
    for name in sorted(delta, key=lambda name: delta[name][0] is not None):
        path, blob = f"{RESERVATIONS}/{name}", delta[name][0]
        yield placed(path, LAYOUT), None if blob is None else _entry(path, blob_data(repo, blob), horizon)
