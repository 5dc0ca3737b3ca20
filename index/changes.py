"""What changed between two commits, as far as derived state cares.

Derived state follows the repository by tree diffs: the records added,
changed or deleted between the commit the index reflects (its watermark) and
the tip. libgit2 compares the two trees and skips every unchanged day shard
by its tree id, so catching up after one commit touches a handful of entries
whatever the archive's size.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import pygit2

from gitmail.records import classify

ROLES = ("message", "inbox", "outbox", "receipt", "agent", "reservation")
_ZERO = "0" * 40


@dataclass(frozen=True)
class RecordChange:
    """One record file that appeared, changed or disappeared."""

    path: str
    role: str
    blob: str | None  # None: the file is gone


def _tree(repo: pygit2.Repository, commit: str | None) -> pygit2.Tree | None:
    return repo[commit].peel(pygit2.Tree) if commit else None


def relevant_role(path: str) -> str | None:
    kind = classify(path)
    return kind[0] if kind is not None and kind[0] in ROLES else None


def diff(repo: pygit2.Repository, old: str | None, new: str | None) -> Iterator[RecordChange]:
    """Record changes turning the tree of ``old`` into the tree of ``new``."""
    old_tree, new_tree = _tree(repo, old), _tree(repo, new)
    if old_tree is None and new_tree is None:
        return
    if old_tree is None:
        patch = new_tree.diff_to_tree(swap=True)  # type: ignore[union-attr]
    elif new_tree is None:
        patch = old_tree.diff_to_tree()
    else:
        patch = repo.diff(old_tree, new_tree)
    for delta in patch.deltas:
        path = delta.new_file.path or delta.old_file.path
        role = relevant_role(path)
        if role is None:
            continue
        blob = str(delta.new_file.id)
        yield RecordChange(path, role, None if blob == _ZERO else blob)


def listing(repo: pygit2.Repository, commit: str | None) -> Iterator[RecordChange]:
    """Every record at ``commit``, as if all were just added."""
    return diff(repo, None, commit)


def is_ancestor(repo: pygit2.Repository, old: str, new: str) -> bool:
    """Whether ``old`` is ``new`` or one of its ancestors (False if ``old`` is unknown)."""
    if old == new:
        return True
    try:
        return repo.descendant_of(new, old)
    except (KeyError, ValueError, pygit2.GitError):
        return False
