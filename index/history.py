"""The derived history: which commits changed which files, kept beside the metadata.

``git log -- <path>`` answers "what happened to this message, this profile,
this reservation", but it walks the whole history on every call, which grows
with the archive. This table holds the same answer: one row per file a
commit changed (its path, the blob before and after, the commit's author,
time and first line), filled commit by commit as the archive moves, so a
history page is one indexed query.

A commit is compared with its first parent. A merge commit adds only the
files whose merged content is in none of its parents (a resolution); what the
other side brought in is recorded by that side's own commits, which the walk
visits too. A record a migration moved to the newest layout with its content
unchanged is no row (a history asks for every path the record has had, see
:func:`gitmail.model.records.layout_forms`); one that moved and changed is
one row at its new path. Catching up walks the commits that are new since the last one it
recorded (its own watermark, ``history_tip``); when history was rewritten
under it, the table starts afresh.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from typing import Any

import pygit2

from gitmail.model.records import layout_forms, layout_moves
from gitmail.storage.handles import tree_entry
from gitmail.storage.history import journal_owner
from gitmail.storage.treeedit import changed_files

from .changes import is_ancestor
from .meta import Meta, failure_of

_SCHEMA = """
CREATE TABLE IF NOT EXISTS history (
    row INTEGER PRIMARY KEY AUTOINCREMENT,
    path TEXT NOT NULL,
    commit_id TEXT NOT NULL,
    author TEXT NOT NULL,
    email TEXT NOT NULL,
    time INTEGER NOT NULL,
    summary TEXT NOT NULL,
    old_blob TEXT,
    new_blob TEXT
);
CREATE INDEX IF NOT EXISTS history_path ON history (path, row);
CREATE INDEX IF NOT EXISTS history_author ON history (author, row);
"""
_STATE = "history_tip"
_BATCH = 500  # commits per SQLite transaction during a long first walk
MAX_ROWS = 200


def _changed(repo: pygit2.Repository, old: bytes | None,
             new: bytes | None) -> Iterator[tuple[str, bytes | None, bytes | None]]:
    """``(path, old blob, new blob)`` of every file whose content differs, entering only subtrees that changed."""
    for path, a, b in changed_files(repo, old, new):
        a_blob, b_blob = (a[1] if a is not None else None), (b[1] if b is not None else None)
        if a_blob != b_blob:  # a change of mode alone leaves the content as it was
            yield path, a_blob, b_blob


def _blob_at(repo: pygit2.Repository, commit: pygit2.Commit, path: str) -> bytes | None:
    """The blob of the record at ``path`` in ``commit``, wherever its layout keeps it."""
    for form in layout_forms(path):
        entry = tree_entry(commit.tree, form)
        if entry is not None:
            return bytes(entry.id.raw)
    return None


Known = Callable[[str], "list[tuple[str, bytes | None, bytes | None]] | None"]
"""What a commit changed, if known without comparing trees (see Archive.changes_of)."""


def commit_rows(repo: pygit2.Repository, commit: pygit2.Commit, known: Known | None = None) -> list[tuple[Any, ...]]:
    """The history rows of one commit: each file it changed against its first parent.

    ``known`` answers for commits whose changes were recorded when they
    were made; the others are compared with their first parent.
    """
    parents = commit.parents
    old = parents[0].tree_id.raw if parents else None
    author = commit.author
    summary = commit.message.split("\n", 1)[0][:200]
    rows = []
    recorded = known(str(commit.id)) if known is not None and len(parents) <= 1 else None
    changes = list(recorded if recorded is not None else _changed(repo, old, commit.tree_id.raw))
    moves = layout_moves([path for path, _, b in changes if b is None], [path for path, a, _ in changes if a is None])
    if moves:
        before = {path: a for path, a, _ in changes}
        left = set(moves.values())
        changes = [(path, before[moves[path]] if path in moves else a, b) for path, a, b in changes
                   if path not in left and not (path in moves and before[moves[path]] == b)]
    for path, a, b in changes:
        if len(parents) > 1 and any(_blob_at(repo, other, path) == b for other in parents[1:]):
            continue  # brought in by the merged side, whose own commits are recorded
        rows.append((path, str(commit.id), author.name, author.email, author.time, summary,
                     a.hex() if a else None, b.hex() if b else None))
    return rows


class History:
    """The history table of one project's metadata store."""

    def __init__(self, meta: Meta):
        self.meta = meta

    def _ensure(self) -> None:
        """Create the table if this file lacks it (a new file, or one made before it existed)."""
        self.meta.db.executescript(_SCHEMA)

    def tip(self) -> str | None:
        return self.meta.get_state(_STATE) or None

    def catch_up(self, repo: pygit2.Repository, target: str | None, *, recorded: Known | None = None) -> int:
        """Record every commit up to ``target`` not recorded yet; returns how many were added (see commit_rows)."""
        self._ensure()
        known = self.tip()
        if target is None or known == target:
            return 0
        fresh = not (known and known in repo and is_ancestor(repo, known, target))
        order = pygit2.enums.SortMode.TOPOLOGICAL | pygit2.enums.SortMode.REVERSE
        walker = repo.walk(pygit2.Oid(hex=target), order)
        if not fresh:
            assert known is not None
            walker.hide(pygit2.Oid(hex=known))
        added, batch, start = 0, [], known
        first = True
        for commit in walker:
            batch.extend(commit_rows(repo, commit, recorded))
            added += 1
            if added % _BATCH == 0:
                start = self._store(start, str(commit.id), batch, clear=fresh and first)
                if start is None:
                    return added  # another process records the same history
                batch, first = [], False
        self._store(start, target, batch, clear=fresh and first)
        return added

    def _store(self, expected: str | None, new: str, rows: list[tuple[Any, ...]], *, clear: bool) -> str | None:
        db = self.meta.db
        try:
            db.execute("BEGIN IMMEDIATE")
            try:
                current = db.execute("SELECT value FROM state WHERE key = ?", (_STATE,)).fetchone()
                if (current[0] if current and current[0] else None) != expected:
                    db.execute("ROLLBACK")
                    return None
                if clear:
                    db.execute("DELETE FROM history")
                db.executemany("INSERT INTO history (path, commit_id, author, email, time, summary, old_blob, "
                               "new_blob) VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows)
                db.execute("INSERT OR REPLACE INTO state VALUES (?, ?)", (_STATE, new))
                db.execute("COMMIT")
                return new
            except BaseException:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise
        except sqlite3.DatabaseError as exc:
            raise failure_of(exc) from exc

    def of_paths(self, paths: list[str], limit: int = MAX_ROWS) -> list[dict[str, Any]]:
        """The latest ``limit`` commits that changed any of ``paths``, newest first, each with its files among them.

        A commit has one row per file it changed, all together, so rows are
        read in chunks until ``limit`` commits are complete: a limit on rows
        would cut a commit that changed many files (a broadcast's copies) and
        count its files as commits.
        """
        self._ensure()
        if not paths:
            return []
        marks = ",".join("?" * len(paths))
        commits: dict[str, dict[str, Any]] = {}
        below, chunk = None, 8 * limit
        while True:
            rows = self.meta.read(
                f"SELECT row, path, commit_id, author, email, time, summary, old_blob, new_blob FROM history "
                f"WHERE path IN ({marks})" + ("" if below is None else " AND row < ?") + " ORDER BY row DESC LIMIT ?",
                [*paths, *([] if below is None else [below]), chunk])
            for row, path, commit_id, author, email, when, summary, old_blob, new_blob in rows:
                if commit_id not in commits and len(commits) >= limit:
                    return list(commits.values())
                entry = commits.setdefault(commit_id, {"commit": commit_id, "author": author, "email": email,
                                                       "time": when, "summary": summary, "files": []})
                entry["files"].append({"path": path, "old_blob": old_blob, "new_blob": new_blob})
                below = row
            if len(rows) < chunk:
                return list(commits.values())

    def by_author(self, author: str, limit: int) -> list[dict[str, Any]]:
        """The latest ``limit`` commits whose author is ``author``, newest first.

        Each has ``commit``, ``summary``, ``time`` and ``journals``: the agents
        whose journal it wrote to (whose text its summary may quote). An
        indexed read that stops once it has read every file of ``limit``
        commits (a commit has one row per file it changed), where ``git log
        --author`` walks the history until it finds them, or to its start
        for an agent that has been quiet a long time.
        """
        self._ensure()
        found: dict[str, dict[str, Any]] = {}
        below, full = None, False
        while not full:
            chunk = 8 * limit
            rows = self.meta.read(
                "SELECT row, commit_id, summary, time, path FROM history WHERE author = ?"
                + ("" if below is None else " AND row < ?") + " ORDER BY row DESC LIMIT ?",
                [author, *([] if below is None else [below]), chunk])
            for row, commit_id, summary, when, path in rows:
                if commit_id not in found:
                    full = len(found) >= limit  # a commit's rows are together: the last one found is complete
                    if full:
                        break
                    found[commit_id] = {"commit": commit_id, "summary": summary, "time": when, "journals": []}
                owner = journal_owner(path)
                if owner is not None and owner not in found[commit_id]["journals"]:
                    found[commit_id]["journals"].append(owner)
                below = row
            if len(rows) < chunk:
                break
        return list(found.values())
