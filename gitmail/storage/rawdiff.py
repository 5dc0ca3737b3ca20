"""git's raw diff output (``--raw -z``), read in one place for every reader that lets git compare trees.

Comparing two large trees is what git does fastest: ``git diff-tree -r``
lists a window join's few hundred thousand changed files in a fraction of
the time libgit2's tree diff takes and pygit2 then spends building an
object per change. The readers that need many changes at once (the record
checks and merges of a sync, the index's catch-up over a wide range, the
who-may-write rule over a long history, the names packing gives to new
objects) run git and read its answer here.

A change is ``:<old mode> <new mode> <old id> <new id> <status>`` then its
path, each a NUL-terminated field; ``git log --raw`` puts its ``--format``
lines between the commits' changes, which are yielded as their text.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from typing import NamedTuple

NO_ID = "0" * 40  # git's id for "no object": the old side of an addition, the new side of a deletion
EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"  # git knows this tree in every repository


class RawChange(NamedTuple):
    """One file (or, with ``-t``, folder) that differs: its path, both modes and both ids (:data:`NO_ID`: absent)."""

    path: str
    old_mode: int
    new_mode: int
    old_id: str
    new_id: str


def read_raw(output: bytes) -> Iterator[RawChange | str]:
    """Each change in git's ``--raw -z`` ``output``, in order; any other field (a ``--format`` line) as its text."""
    fields = output.split(b"\0")
    at, end = 0, len(fields) - 1  # the output ends with a NUL: the last field is empty
    while at < end:
        field = fields[at].lstrip(b"\n")
        if field.startswith(b":"):
            old_mode, new_mode, old_id, new_id, _ = field[1:].split(b" ", 4)
            yield RawChange(fields[at + 1].decode("utf-8", "surrogateescape"), int(old_mode, 8), int(new_mode, 8),
                            old_id.decode(), new_id.decode())
            at += 2
            continue
        if field:
            yield field.decode("utf-8", "surrogateescape")
        at += 1


def diff_trees(git_dir: str, old: str | None, new: str | None) -> list[RawChange] | None:
    """The files that differ from tree (or commit) ``old`` to ``new`` (None: the empty tree), by git; None if git fails.

    A caller that gets None compares the trees itself: git cannot read
    every repository libgit2 can (an object only in a pre-receive's
    quarantine that this process added by hand, say).
    """
    proc = subprocess.run(["git", "--git-dir", git_dir, "diff-tree", "-r", "-z", "--no-renames", "--no-abbrev",
                           old or EMPTY_TREE, new or EMPTY_TREE], capture_output=True, check=False)
    if proc.returncode != 0:
        return None
    return [change for change in read_raw(proc.stdout) if isinstance(change, RawChange)]
