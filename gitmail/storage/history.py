"""Questions answered from git history: who committed what, and when.

Every write is a commit whose author is the acting agent, so ``git log`` is
the audit trail. These helpers walk it newest first and stop early.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any

import pygit2

from gitmail.model.clock import format_ts
from gitmail.model.records import layout_forms, role_of

from .engine import Archive
from .handles import tree_has
from .treeedit import changed_files

MAX_WALK = 5000


def _commits(archive: Archive) -> Iterator[pygit2.Commit]:
    tip = archive.tip()
    if tip is None:
        return
    order = pygit2.enums.SortMode.TOPOLOGICAL | pygit2.enums.SortMode.TIME
    for i, commit in enumerate(archive.repo.walk(pygit2.Oid(hex=tip), order)):
        if i >= MAX_WALK:
            return
        yield commit


def _when(commit: pygit2.Commit) -> str:
    return format_ts(dt.datetime.fromtimestamp(commit.author.time, tz=dt.UTC))


def journal_owner(path: str) -> str | None:
    """The agent whose journal the file at ``path`` belongs to (None: not a journal entry)."""
    return path.split("/", 2)[1] if role_of(path) == "journal" else None


def _journals(archive: Archive, commit: pygit2.Commit) -> list[str]:
    """The agents whose journal ``commit`` wrote to (compared with its first parent)."""
    old = commit.parents[0].tree_id.raw if commit.parents else None
    owners = {journal_owner(path) for path, _, _ in changed_files(archive.repo, old, commit.tree_id.raw)}
    return sorted(owner for owner in owners if owner is not None)


def commits_by(archive: Archive, author: str, limit: int) -> list[dict[str, Any]]:
    """The latest ``limit`` commits whose author is ``author``, with the agents whose journal each wrote to."""
    found: list[dict[str, Any]] = []
    if limit <= 0:
        return found
    for commit in _commits(archive):
        if commit.author.name == author:
            found.append({"hexsha": str(commit.id), "summary": commit.message.split("\n", 1)[0],
                          "authored_ts": _when(commit), "journals": _journals(archive, commit)})
            if len(found) >= limit:
                break
    return found


def authors_since(archive: Archive, since_epoch: float) -> dict[str, str]:
    """Lower-cased author name -> time of their latest commit, for commits since ``since_epoch``."""
    seen: dict[str, str] = {}
    for commit in _commits(archive):
        if commit.author.time < since_epoch:
            break
        seen.setdefault(commit.author.name.lower(), _when(commit))
    return seen


def adding_commits(archive: Archive, paths: list[str], max_commits: int = 2000) -> dict[str, dict[str, Any]]:
    """For each path, the commit that added it: ``{commit, summary, author, committed_ts}``.

    Walks history newest first until every path is placed (or ``max_commits``);
    a path is added by the commit that has it while its first parent does not.
    A record counts as present at any layout's path (:func:`layout_forms`), so
    the commit that moved it to a newer layout did not add it.
    """
    pending, found = set(paths), {}
    forms = {path: layout_forms(path) for path in paths}
    for i, commit in enumerate(_commits(archive)):
        if not pending or i >= max_commits:
            break
        parent = commit.parents[0].tree if commit.parents else None
        for path in list(pending):
            if not any(tree_has(commit.tree, form) for form in forms[path]):
                pending.discard(path)  # not on this line of history
                continue
            if parent is None or not any(tree_has(parent, form) for form in forms[path]):
                found[path] = {"commit": str(commit.id), "summary": commit.message.split("\n", 1)[0],
                               "author": commit.author.name, "committed_ts": _when(commit)}
                pending.discard(path)
    return found
