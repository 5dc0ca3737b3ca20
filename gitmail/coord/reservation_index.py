"""The set of unreleased reservations at a commit, kept without rescanning.

Checking a new reservation for conflicts needs every active reservation of
the project. Reading all reservation files on each call grows with the whole
history (released and expired records stay in the archive for audit), so this
module keeps, per repository and in memory, the unreleased, unexpired records
as of one commit. Moving to another commit applies the git diff of the
``reservations/`` subtree between the two (a handful of files per commit),
and a snapshot's queued group-commit edits are applied on top, so a
transaction sees exactly the state it commits onto. The cache is derived:
losing it costs one full scan.

Short-lived processes (the commit guard's hook, the CLI) can also keep the
set in the project's derived folder (``reservations-active.json``), so each
run catches up by diff instead of rescanning.
"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass

import pygit2

from gitmail.model.clock import HLC, parse_ts
from gitmail.model.records import RESERVATIONS, Reservation
from gitmail.storage.snapshot import Snapshot, blob_data

FOLDER = RESERVATIONS
CACHE_FILE = "reservations-active.json"
_CACHE_VERSION = 1


@dataclass(frozen=True)
class Entry:
    """One unreleased reservation with its expiry as a POSIX time."""

    record: Reservation
    expires: float

    def active_at(self, at: float) -> bool:
        return self.record.released_ts is None and at < self.expires


@dataclass
class _State:
    commit: str | None
    tree_id: str | None
    entries: dict[str, Entry]


_lock = threading.Lock()
_states: dict[str, _State] = {}


def _entry(path: str, data: bytes | None, horizon: float) -> Entry | None:
    if data is None:
        return None
    record = Reservation.from_bytes(data, path)
    if record.released_ts is not None:
        return None
    expires = parse_ts(record.expires_ts).timestamp()
    return Entry(record, expires) if expires > horizon else None


def _subtree(repo: pygit2.Repository, commit: str | None) -> pygit2.Tree | None:
    if commit is None:
        return None
    tree = repo[commit].peel(pygit2.Tree)
    try:
        sub = tree[FOLDER]
    except KeyError:
        return None
    return sub if isinstance(sub, pygit2.Tree) else None


def _scan(repo: pygit2.Repository, tree: pygit2.Tree, prefix: str, horizon: float, out: dict[str, Entry]) -> None:
    for item in tree:
        path = f"{prefix}/{item.name}"
        obj = repo[item.id]
        if isinstance(obj, pygit2.Tree):
            _scan(repo, obj, path, horizon, out)
        elif isinstance(obj, pygit2.Blob):
            entry = _entry(path, obj.data, horizon)
            if entry is not None:
                out[path] = entry


def _advance(repo: pygit2.Repository, state: _State | None, commit: str | None, horizon: float) -> _State:
    tree = _subtree(repo, commit)
    tree_id = str(tree.id) if tree is not None else None
    if state is not None and state.tree_id == tree_id:
        return _State(commit, tree_id, state.entries)
    entries: dict[str, Entry] = {}
    if tree is None:
        return _State(commit, None, entries)
    if state is None or state.tree_id is None:
        _scan(repo, tree, FOLDER, horizon, entries)
        return _State(commit, tree_id, entries)
    try:
        old_tree = repo[state.tree_id].peel(pygit2.Tree)
    except (KeyError, ValueError):  # the cached tree is gone (history rewritten and pruned)
        _scan(repo, tree, FOLDER, horizon, entries)
        return _State(commit, tree_id, entries)
    entries = {path: e for path, e in state.entries.items() if e.expires > horizon}
    for delta in old_tree.diff_to_tree(tree).deltas:
        if delta.status == pygit2.GIT_DELTA_DELETED:
            entries.pop(f"{FOLDER}/{delta.old_file.path}", None)
            continue
        path = f"{FOLDER}/{delta.new_file.path}"
        entry = _entry(path, blob_data(repo, delta.new_file.id), horizon)
        if entry is None:
            entries.pop(path, None)
        else:
            entries[path] = entry
    return _State(commit, tree_id, entries)


def _load(cache_dir: str) -> _State | None:
    try:
        with open(os.path.join(cache_dir, CACHE_FILE), encoding="utf-8") as handle:
            raw = json.load(handle)
        if raw.get("version") != _CACHE_VERSION:
            return None
        entries = {}
        for path, fields in raw["entries"].items():
            record = Reservation(**dict(fields, hlc=HLC.parse(fields["hlc"])))
            entries[path] = Entry(record, parse_ts(record.expires_ts).timestamp())
        return _State(raw["commit"], raw["tree_id"], entries)
    except (OSError, ValueError, KeyError, TypeError):
        return None  # missing or unreadable: rebuild from the repository


def _save(cache_dir: str, state: _State) -> None:
    data = {"version": _CACHE_VERSION, "commit": state.commit, "tree_id": state.tree_id,
            "entries": {path: e.record.to_fields() for path, e in state.entries.items()}}
    try:
        os.makedirs(cache_dir, exist_ok=True)
        tmp = os.path.join(cache_dir, f"{CACHE_FILE}.{os.getpid()}.tmp")
        with open(tmp, "w", encoding="utf-8") as handle:
            json.dump(data, handle)
        os.replace(tmp, os.path.join(cache_dir, CACHE_FILE))
    except OSError:
        pass  # a derived cache that cannot be written is simply rebuilt next time


def unreleased(snapshot: Snapshot, cache_dir: str | None = None, *, now: float) -> dict[str, Entry]:
    """Path -> entry for every unreleased reservation this snapshot sees, less those expired by ``now``.

    ``now`` (POSIX seconds, from the caller's clock) only prunes what expired
    before it; callers still test :meth:`Entry.active_at` for the instant
    they care about.
    ``cache_dir`` (the project's derived folder) keeps the set between processes.
    """
    repo = snapshot.repo
    key = repo.path
    horizon = now - 1.0
    with _lock:
        state = _states.get(key)
    if state is None and cache_dir is not None:
        state = _load(cache_dir)
    if state is None or state.commit != snapshot.commit:
        state = _advance(repo, state, snapshot.commit, horizon)
        with _lock:
            _states[key] = state
        if cache_dir is not None:
            _save(cache_dir, state)
    pending = snapshot.pending_edits(FOLDER)
    if not pending:
        return state.entries
    entries = dict(state.entries)
    for path, data in pending.items():
        entry = _entry(path, data, horizon)
        if entry is None:
            entries.pop(path, None)
        else:
            entries[path] = entry
    return entries
