"""What changed between two commits, as far as derived state cares.

Derived state follows the repository by tree diffs: the records added,
changed or deleted between the commit the index reflects (its watermark) and
the tip. Unchanged subtrees (whole day shards, other agents' folders) are
skipped by their tree id, so catching up after one commit touches a handful
of entries whatever the archive's size.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import pygit2

from gitmail.records import classify

ROLES = ("message", "inbox", "outbox", "receipt", "agent", "reservation")


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


def _worth_entering(path: str) -> bool:
    """Whether the folder at ``path`` can hold records derived state keeps."""
    parts = path.split("/")
    if parts[0] not in ("messages", "agents", "reservations"):
        return False
    return not (parts[0] == "agents" and len(parts) >= 3 and parts[2] not in ("inbox", "outbox", "receipts"))


def _compare(old: pygit2.Tree | None, new: pygit2.Tree | None, prefix: str) -> Iterator[RecordChange]:
    before = {entry.name: entry for entry in old} if old is not None else {}
    after = {entry.name: entry for entry in new} if new is not None else {}
    for name in sorted(before.keys() | after.keys()):
        a, b = before.get(name), after.get(name)
        if a is not None and b is not None and a.id == b.id:
            continue  # the same blob or the same whole subtree: nothing inside changed
        path = prefix + name
        a_tree = a is not None and a.type_str == "tree"
        b_tree = b is not None and b.type_str == "tree"
        if (a_tree or b_tree) and _worth_entering(path):
            yield from _compare(a if a_tree else None, b if b_tree else None, path + "/")  # type: ignore[arg-type]
        a_blob, b_blob = a is not None and not a_tree, b is not None and not b_tree
        if a_blob or b_blob:
            role = relevant_role(path)
            if role is not None:
                yield RecordChange(path, role, str(b.id) if b_blob else None)  # type: ignore[union-attr]


def diff(repo: pygit2.Repository, old: str | None, new: str | None) -> Iterator[RecordChange]:
    """Record changes turning the tree of ``old`` into the tree of ``new``.

    Walks both trees together and skips every subtree whose id is unchanged,
    so the cost follows the size of the folders a commit touched (a day
    shard or two), not the size of the archive. (libgit2's tree diff visits
    every entry of both trees.)
    """
    return _compare(_tree(repo, old), _tree(repo, new), "")


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
