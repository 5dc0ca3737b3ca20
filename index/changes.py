"""What changed between two commits, as far as derived state cares.

Derived state follows the repository by tree diffs: the records added,
changed or deleted between the commit the index reflects (its watermark) and
the tip. Unchanged subtrees (whole day shards, other agents' folders) are
skipped by their tree id, so catching up after one commit touches a handful
of entries whatever the archive's size.

A record that a migration moved to the newest layout leaves its old path and
arrives at its new one in the same diff: it comes out as one change at the
new path that names the old one (``moved_from``), so derived state renames
what it holds and keeps the record's sequence number; with its content
unchanged, nothing else happens to it.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import pygit2

from gitmail.model.records import (
    AGENTS,
    CHANNELS,
    INBOX,
    MESSAGES,
    OUTBOX,
    RECEIPTS,
    RESERVATIONS,
    classify,
    layout_moves,
)
from gitmail.storage.boundary import is_partial, read_pin, shallow_commits, window_entries
from gitmail.storage.engine import Archive
from gitmail.storage.layout import Comparisons
from gitmail.storage.objects import MODE_TREE, Tree
from gitmail.storage.rawdiff import NO_ID, diff_trees
from gitmail.storage.treeedit import read_tree

ROLES = ("message", "inbox", "outbox", "receipt", "agent", "reservation", "channel", "post")


@dataclass(frozen=True)
class RecordChange:
    """One record file that appeared, changed or disappeared."""

    path: str
    role: str
    blob: str | None  # None: the file is gone
    moved_from: str | None = None  # the older layout's path the record left in the same change


def fold_moves(changes: Iterable[RecordChange]) -> list[RecordChange]:
    """``changes`` with each record that moved between layouts as one change at its new path (see the module docs)."""
    changes = list(changes)
    moves = layout_moves([c.path for c in changes if c.blob is None], [c.path for c in changes if c.blob is not None])
    if not moves:
        return changes
    left = set(moves.values())
    return [RecordChange(c.path, c.role, c.blob, moves[c.path]) if c.path in moves else c
            for c in changes if c.path not in left]


def _root(repo: pygit2.Repository, commit: str | None) -> bytes | None:
    return repo[commit].peel(pygit2.Tree).id.raw if commit else None


def relevant_role(path: str) -> str | None:
    kind = classify(path)
    return kind[0] if kind is not None and kind[0] in ROLES else None


def _worth_entering(path: str) -> bool:
    """Whether the folder at ``path`` can hold records derived state keeps."""
    parts = path.split("/")
    if parts[0] not in (MESSAGES, AGENTS, RESERVATIONS, CHANNELS):
        return False
    return not (parts[0] == AGENTS and len(parts) >= 3 and parts[2] not in (INBOX, OUTBOX, RECEIPTS))


class _TooWide(Exception):
    """A tree walk visited more folders than :data:`WALK_TREES`: git compares the rest faster."""


def _compare(repo: pygit2.Repository, old: bytes | None, new: bytes | None, prefix: str,
             trees: Trees | None, budget: list[int]) -> Iterator[RecordChange]:
    budget[0] -= 1
    if budget[0] < 0:
        raise _TooWide
    empty: dict[str, tuple[int, bytes]] = {}
    before = _tree(repo, old, trees, remember=False).entries() if old is not None else empty
    after = _tree(repo, new, trees, remember=True).entries() if new is not None else empty
    # Entries present on one side only, or with another id or mode: a day
    # folder of thousands differs by a few entries, found without visiting
    # the rest in Python.
    for name in sorted({name for name, _ in before.items() ^ after.items()}):
        a, b = before.get(name), after.get(name)
        path = prefix + name
        a_tree = a[1] if a is not None and a[0] == MODE_TREE else None
        b_tree = b[1] if b is not None and b[0] == MODE_TREE else None
        if (a_tree or b_tree) and _worth_entering(path):
            yield from _compare(repo, a_tree, b_tree, path + "/", trees, budget)
        a_blob = a[1] if a is not None and a_tree is None else None
        b_blob = b[1] if b is not None and b_tree is None else None
        if a_blob or b_blob:
            role = relevant_role(path)
            if role is not None:
                yield RecordChange(path, role, b_blob.hex() if b_blob else None)


class Trees:
    """The decoded trees one diff visited on its new side: the old side of the next diff from there.

    A catch-up's new side is the next one's old side. The engine's cache
    keeps only the newest versions of a folder, and a busy day folder of
    tens of thousands of entries takes some 50 ms to decode again; handing
    the visited trees from one diff to the next spares that.
    """

    def __init__(self) -> None:
        self.previous: dict[bytes, Tree] = {}
        self.current: dict[bytes, Tree] = {}

    def turn(self) -> None:
        """Start a new diff: what the last one visited is now the old side."""
        if self.current:
            self.previous, self.current = self.current, {}


def _tree(repo: pygit2.Repository, oid: bytes, trees: Trees | None, *, remember: bool) -> Tree:
    found = trees.previous.get(oid) if trees is not None else None
    if found is None:
        found = read_tree(repo, oid, remember=remember)  # an old side read once is not cached
    if trees is not None and remember:
        trees.current[oid] = found
    return found


def diff(repo: pygit2.Repository, old: str | None, new: str | None, *,
         trees: Trees | None = None) -> list[RecordChange]:
    """Record changes turning the tree of ``old`` into the tree of ``new``.

    Walks both trees together and skips every subtree whose id is unchanged,
    so the cost follows the folders a commit touched (a day shard or two),
    not the size of the archive. Trees are read through the engine's cache
    of decoded trees, where the ones this process just committed already are,
    or from ``trees``, where the last diff left them. (libgit2's tree diff
    visits every entry of both trees.) A change wider than WALK_TREES
    folders (a sync's arrival of thousands of messages) is left to ``git
    diff-tree``, which compares the same way in C: past that width its
    start-up costs less than decoding the folders in Python.
    """
    if trees is not None:
        trees.turn()
    root_old, root_new = _root(repo, old), _root(repo, new)
    try:
        return fold_moves(list(_compare(repo, root_old, root_new, "", trees, [WALK_TREES])))
    except _TooWide:
        wide = _wide_diff(repo, root_old, root_new)
    if wide is None:  # not something git reads here (libgit2 does): walk it all
        return fold_moves(list(_compare(repo, root_old, root_new, "", trees, [sys.maxsize])))
    return wide


WALK_TREES = 256  # folders a diff decodes in Python before it asks git
def _wide_diff(repo: pygit2.Repository, old: bytes | None, new: bytes | None) -> list[RecordChange] | None:
    """What :func:`diff` says, from one ``git diff-tree -r`` (same folders skipped, same records kept)."""
    listed = diff_trees(repo.path, old.hex() if old is not None else None, new.hex() if new is not None else None)
    if listed is None:
        return None
    return _records((change.path, None if change.new_id == NO_ID else change.new_id) for change in listed)


def _records(files: Iterable[tuple[str, str | None]]) -> list[RecordChange]:
    """The record changes among ``(path, new blob or None)`` that git listed: what the tree walk keeps, in its order.

    A file counts if every folder on its way is one the walk enters and its
    path names a role derived state keeps.
    """
    found = []
    for path, blob in files:
        folder = path.rpartition("/")[0]
        role = relevant_role(path) if not folder or _worth_entering(folder) else None
        if role is not None:
            found.append((path.replace("/", "\0"), RecordChange(path, role, blob)))
    # A folder's entries by name, depth first: the tree walk's order. A path with each "/" as NUL (which
    # sorts before any character a name holds) orders as its list of names does, in one string a path.
    found.sort(key=lambda item: item[0])
    return fold_moves(change for _, change in found)


def recorded_changes(archive: Archive, repo: pygit2.Repository, old: str, new: str) -> list[RecordChange] | None:
    """What :func:`diff` would say, from what the engine recorded of each commit from ``old`` to ``new``.

    Only for a line of commits this process made (no merges, at most
    :data:`_SHORT_WALK` of them); None otherwise, and the trees are compared.
    """
    line: list[list[tuple[str, bytes | None, bytes | None]]] = []
    commit = new
    while commit != old:
        recorded = archive.changes_of(commit)
        if recorded is None or len(line) >= _SHORT_WALK:
            return None
        line.append(recorded)
        parents = repo[commit].peel(pygit2.Commit).parent_ids
        if len(parents) != 1:
            return None
        commit = str(parents[0])
    net: dict[str, tuple[bytes | None, bytes | None]] = {}
    for recorded in reversed(line):  # oldest first: the first blob before, the last blob after
        for path, before, after in recorded:
            net[path] = (net.get(path, (before, None))[0], after)
    changes = []
    for path, (before, after) in sorted(net.items()):
        role = relevant_role(path) if before != after else None
        if role is not None:
            changes.append(RecordChange(path, role, after.hex() if after else None))
    return fold_moves(changes)


def compared_changes(compared: Comparisons | None, repo: pygit2.Repository, old: str,
                     new: str) -> list[RecordChange] | None:
    """What :func:`diff` would say, from the files another step compared already (None: none did).

    A sync knows what entered ``main`` (its merge's record, or its
    findings' comparison), the very pair its catch-up needs; comparing it
    again would double the cost of the widest diff of the sync. The
    catch-up is the last step to read it: the pair goes from ``compared``.
    """
    if compared is None:
        return None
    listed = compared.take(repo[old].peel(pygit2.Tree), repo[new].peel(pygit2.Tree))  # no step reads it after
    if listed is None:
        return None
    return _records((path, None if blob is None else str(blob)) for path, (blob, _) in listed.items())


def listing(repo: pygit2.Repository, commit: str | None) -> list[RecordChange]:
    """Every record at ``commit``, as if all were just added: what ``diff(repo, None, commit)`` gives.

    In an archive that joined with a window (:mod:`gitmail.storage.boundary`)
    only the window is listed (see :func:`_window_listing`); a reindex after
    ``gitmail deepen`` takes in the rest.

    A full listing visits every tree of the archive (an archive of 10k
    messages has over 100k, a day folder per agent and box); decoding them
    one by one in Python was half the time a reindex spent outside the search
    index. ``git ls-tree -r`` lists every file in one pass in C; the same
    folders are skipped and the same records kept, in the same order
    (``tests/test_index_changes.py`` holds the two to one answer).
    """
    if commit is None:
        return []
    if is_partial(repo):
        return _window_listing(repo, commit)
    proc = subprocess.run(["git", "--git-dir", repo.path, "ls-tree", "-r", "-z", "--full-tree", commit],
                          capture_output=True, check=False)
    if proc.returncode != 0:  # not a commit git can read here (libgit2 says why)
        return diff(repo, None, commit)
    entries = (entry.partition(b"\t") for entry in proc.stdout.split(b"\0") if entry)
    return _records((raw.decode("utf-8", "surrogateescape"), head.rsplit(b" ", 1)[1].decode())
                    for head, _, raw in entries)


def _window_listing(repo: pygit2.Repository, commit: str) -> list[RecordChange]:
    """:func:`listing` in an archive that joined with a window: the window's records and those its history changed.

    Only the window's folders are walked (older days only where they differ
    from the boundary the history starts from), so listing costs what the
    window holds, not what the archive ever held; a record whose file was
    not fetched is left out.
    """
    pin = read_pin(repo.path)
    first = None if pin is None or pin.since == "all" else pin.since
    boundaries = [repo[hexsha].peel(pygit2.Tree) for hexsha in sorted(shallow_commits(repo.path))
                  if pygit2.Oid(hex=hexsha) in repo]
    tree = repo[commit].peel(pygit2.Tree)
    found = _records((path, str(oid)) for path, oid in window_entries(repo, tree, first, boundaries))
    odb = repo.odb  # looked up once: a handle's odb is a new object each time it is asked for
    return [change for change in found if change.blob is None or pygit2.Oid(hex=change.blob) in odb]


def is_ancestor(repo: pygit2.Repository, old: str, new: str) -> bool:
    """Whether ``old`` is ``new`` or one of its ancestors (False if ``old`` is unknown).

    Catching up asks this after every commit, and ``old`` is then usually a
    few commits down ``new``'s first-parent line: that walk answers at once,
    where libgit2's general search takes milliseconds on a long history.
    """
    if old == new:
        return True
    try:
        commit = repo[new].peel(pygit2.Commit)
        merges = False
        for _ in range(_SHORT_WALK):
            parents = commit.parent_ids
            if any(str(parent) == old for parent in parents):
                return True
            if not parents:
                return merges and repo.descendant_of(new, old)
            merges = merges or len(parents) > 1
            commit = repo[parents[0]].peel(pygit2.Commit)
        return repo.descendant_of(new, old)
    except (KeyError, ValueError, pygit2.GitError):
        return False


_SHORT_WALK = 64  # first parents followed before asking libgit2
