"""Archive layouts: which one a tree is at, moving an archive to the newest, and changes read across layouts.

Where each record sits is :mod:`gitmail.model.records`' to say; this module
applies it to whole trees. :func:`migrate` moves an archive to the newest
layout in one commit on top of ``main``: every dated record moves into its
fan-out folders with its blob unchanged, and ``project.yaml`` says the new
layout. Only trees are new (and the project record), so a sync carries the
move as trees alone. The move is a pure function of the tree, so two
machines that migrate the same commit build the same tree, and moving a day
folder again (after a write raced the first attempt) costs nothing.

:func:`changed_records` compares two trees that may be at different layouts
(a commit and its migration, a merge base from before a migration and a tip
from after): a record that moved with the same content is no change, one
that moved and changed is a change at its new path. The record checker, the
merge and the sync's counts read changes through it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import pygit2

from gitmail.model.errors import CORRUPT_RECORD, RETRY_EXHAUSTED, GitmailError
from gitmail.model.records import (
    LAYOUT,
    LAYOUTS,
    PROJECT_PATH,
    Project,
    dated_name,
    fan_out,
    holds_day_folders,
    is_day_folder,
    path_layout,
    placed,
)

from .engine import SYSTEM_AUTHOR, Archive, Change
from .objects import BLOB, COMMIT, MODE_BLOB, MODE_TREE, TREE, PackBuffer, Signature, Tree, encode_commit
from .snapshot import blob_in, entry_id, tree_delta, tree_layout, unsupported_layout
from .treeedit import read_tree

MAX_ATTEMPTS = 16  # writers that move main while a migration is built: each retry only redoes what they changed

Entry = tuple[int, bytes]  # (mode, raw object id)


@dataclass(frozen=True)
class Migration:
    """What a migration did to one archive: nothing (``commit`` None) when it was at the newest layout already."""

    layout_before: int
    layout: int
    commit: str | None
    moved: int  # files moved, each with its content unchanged

    def to_dict(self) -> dict[str, object]:
        return {"layout_before": self.layout_before, "layout": self.layout, "commit": self.commit,
                "moved": self.moved, "migrated": self.commit is not None}


def migrate(archive: Archive) -> Migration:
    """Move ``archive`` to the newest layout in one commit on ``main`` (see the module docs); idempotent."""
    mover: _Mover | None = None
    for _ in range(MAX_ATTEMPTS):
        tip = archive.tip()
        repo = archive.repo
        commit = repo[tip].peel(pygit2.Commit) if tip is not None else None
        before = tree_layout(commit.tree) if commit is not None else LAYOUT
        if before == LAYOUT or commit is None:
            return Migration(before, before, None, 0)
        if before not in LAYOUTS:
            raise unsupported_layout(before)
        if archive.publication(tip):  # this machine's first commit here: its key's record goes first
            archive.transact(lambda snap: Change("Publish this machine's key",
                                                 edits=dict(archive.publication(snap.commit))))
            continue
        pack = PackBuffer()
        mover = _Mover(repo, pack, mover.memo if mover is not None else {})
        project = _project_at_newest(blob_in(commit.tree, PROJECT_PATH))
        root, moved = mover.tree(commit.tree_id.raw, "", {PROJECT_PATH: (MODE_BLOB, pack.add(BLOB, project))})
        when = int(archive.wall())
        signature = Signature(SYSTEM_AUTHOR, f"{SYSTEM_AUTHOR}@{archive.node}", when)
        message = (f"Move the archive to layout {LAYOUT}: the records of each day under two folders named by the "
                   f"end of their IDs\n\n{moved} files moved, none changed (gitmail migrate).\n")
        new = pack.add(COMMIT, encode_commit(root, [commit.id.raw], signature, signature, message,
                                                    sign=archive.signer)).hex()
        pack.write(os.path.join(archive.git_dir, "objects", "pack"), durable=archive.durable)
        if archive.advance(tip, new):
            return Migration(before, LAYOUT, new, moved)
    raise GitmailError(RETRY_EXHAUSTED, f"other writers kept moving main during {MAX_ATTEMPTS} attempts to migrate "
                       "the archive; nothing was changed, run the migration again", {"attempts": MAX_ATTEMPTS})


def _project_at_newest(blob: pygit2.Blob | None) -> bytes:
    """``project.yaml`` saying the newest layout, every other field as it was."""
    if blob is None:
        raise GitmailError(CORRUPT_RECORD, f"{PROJECT_PATH}: missing, so this is not a gitmail archive to migrate",
                           {"path": PROJECT_PATH})
    project = Project.from_bytes(blob.data, PROJECT_PATH)
    project.layout = LAYOUT
    return project.to_bytes()


class _Mover:
    """Rebuilds trees with every day folder fanned out; each day folder's result is remembered by its tree id."""

    def __init__(self, repo: pygit2.Repository, pack: PackBuffer, memo: dict[bytes, tuple[bytes, int]]):
        self.repo = repo
        self.pack = pack
        self.memo = memo

    def tree(self, oid: bytes, path: str, replace: dict[str, Entry] | None = None) -> tuple[bytes, int]:
        """The tree ``oid`` at ``path`` with its day folders fanned out (and ``replace`` set), and files moved."""
        if is_day_folder(path):
            return self.day(oid, path)
        entries = read_tree(self.repo, oid, remember=False)
        changed = dict(replace or {})
        moved = 0
        for name, (mode, child) in entries.entries().items():
            below = f"{path}/{name}" if path else name
            if mode != MODE_TREE or not (holds_day_folders(below) or is_day_folder(below)):
                continue
            new, count = self.tree(child, below)
            moved += count
            if new != child:
                changed[name] = (MODE_TREE, new)
        if not changed:
            return oid, moved
        out = entries.copy()
        for name, (mode, child) in changed.items():
            out.set(name, mode, child)
        return self.pack.add(TREE, out.encode()), moved

    def day(self, oid: bytes, path: str) -> tuple[bytes, int]:
        """The day folder ``oid`` with each file (or escalation folder) moved under its two fan-out folders."""
        done = self.memo.get(oid)
        if done is not None:
            return done
        out = Tree()
        buckets: dict[str, dict[str, Tree]] = {}
        moved = 0
        for name, (mode, child) in read_tree(self.repo, oid, remember=False).entries().items():
            key = dated_name(name)
            if key is None:
                out.set(name, mode, child)  # not a record of layout 1 (or already fanned out): left as it is
                continue
            first, second = fan_out(key).split("/")
            buckets.setdefault(first, {}).setdefault(second, Tree()).set(name, mode, child)
            moved += len(read_tree(self.repo, child, remember=False)) if mode == MODE_TREE else 1
        for first, inner in buckets.items():
            if out.get(first) is not None:
                raise GitmailError(CORRUPT_RECORD, f"{path}/{first}: not a path where gitmail keeps records, and in "
                                   "the way of the new layout; remove it (gitmail fsck lists it) and migrate again",
                                   {"path": f"{path}/{first}"})
            level = Tree({second: (MODE_TREE, self.pack.add(TREE, leaves.encode()))
                          for second, leaves in inner.items()})
            out.set(first, MODE_TREE, self.pack.add(TREE, level.encode()))
        result = (self.pack.add(TREE, out.encode()) if moved else oid, moved)
        self.memo[oid] = result
        return result


Delta = dict[str, tuple[pygit2.Oid | None, int]]  # path -> (new id or None: gone, git file mode)


class Comparisons:
    """The tree pairs one operation compared, each compared once: handed from step to step, never kept after.

    A sync compares the same trees in several steps (the fetch door's
    record checks and the merge both read what a fetched tip adds over the
    merge base; the reservation findings and the index's catch-up both read
    what entered ``main``); each step asks this value, and only the first
    ask of a pair runs the diff. Pairs are named by tree ids, so a commit
    and another with the same tree share theirs. ``computed`` counts the
    diffs run, for a caller (or a test) to see that none ran twice.

    A pair of a large sync lists every file it brought, so pairs go as soon
    as no later step reads them: a step that reads a pair last takes it
    (:meth:`take`), one whose comparison nobody reads again does not keep it
    (``keep=False``), and the sync drops what its merge was the last to read
    (:meth:`retain`).
    """

    def __init__(self, git_dir: str | None) -> None:
        self.git_dir = git_dir  # let git compare (see :func:`~.snapshot.tree_delta`); None: libgit2
        self.computed = 0
        self._pairs: dict[tuple[bytes | None, bytes | None], Delta] = {}

    @staticmethod
    def _key(base: pygit2.Tree | None, new: pygit2.Tree | None) -> tuple[bytes | None, bytes | None]:
        return (base.id.raw if base is not None else None, new.id.raw if new is not None else None)

    def files(self, base: pygit2.Tree | None, new: pygit2.Tree | None, *, keep: bool = True) -> Delta:
        """The files that differ from ``base`` to ``new`` (as :func:`~.snapshot.tree_delta`); read-only.

        ``keep``: keep the pair for later steps (False: no later step reads it).
        """
        key = self._key(base, new)
        found = self._pairs.get(key)
        if found is None:
            found = tree_delta(base, new, git_dir=self.git_dir)
            self.computed += 1
            if keep:
                self._pairs[key] = found
        return found

    def learn(self, base: pygit2.Tree | None, new: pygit2.Tree | None, files: Delta) -> None:
        """Take ``files`` as what differs from ``base`` to ``new``: a step that made ``new`` knows it already."""
        self._pairs.setdefault(self._key(base, new), files)

    def learn_commit(self, repo: pygit2.Repository, commit: str,
                     recorded: list[tuple[str, bytes | None, bytes | None]] | None) -> None:
        """Learn what ``commit`` changed over its first parent from the engine's record of it (None: nothing known).

        The engine writes every file as a plain file; a file that goes is
        listed with the mode it had.
        """
        made = repo[commit].peel(pygit2.Commit)
        if recorded is None or not made.parents:
            return
        before = made.parents[0].tree
        self.learn(before, made.tree, {
            path: (pygit2.Oid(raw=after), MODE_BLOB) if after is not None else (None, before[path].filemode)
            for path, _, after in recorded})

    def known(self, base: pygit2.Tree | None, new: pygit2.Tree | None) -> Delta | None:
        """The files that differ from ``base`` to ``new`` if a step compared them already, else None."""
        return self._pairs.get(self._key(base, new))

    def take(self, base: pygit2.Tree | None, new: pygit2.Tree | None) -> Delta | None:
        """As :meth:`known`, for the last step that reads the pair: it is not kept after."""
        return self._pairs.pop(self._key(base, new), None)

    def retain(self, base: pygit2.Tree | None, new: pygit2.Tree | None) -> None:
        """Drop every pair but ``base`` to ``new``: the steps still to come read only that one."""
        key = self._key(base, new)
        self._pairs = {key: self._pairs[key]} if key in self._pairs else {}

    def held(self) -> int:
        """How many files the kept pairs list, all pairs together (what this value costs in memory)."""
        return sum(len(files) for files in self._pairs.values())


def changed_records(base: pygit2.Tree | None, new: pygit2.Tree | None, *, named_at: int | None = None,
                    git_dir: str | None = None, compared: Comparisons | None = None,
                    keep: bool = True) -> dict[str, pygit2.Oid | None]:
    """Records that differ from tree ``base`` to tree ``new``: path -> blob in ``new`` (None: gone).

    Each path is where the record sits at layout ``named_at`` (default:
    ``new``'s layout). When the two trees are at different layouts, a record
    is compared with itself wherever each tree keeps it, so one that moved
    with the same content is no change, and one that moved and changed is a
    change at its new path. A file that sits against its tree's layout (a
    layout-1 path in a layout-2 tree) is listed at its own path, for the
    record checker to refuse. ``git_dir``: let git compare the trees (see
    :func:`~.snapshot.tree_delta`); ``compared``: take the files that differ
    from it, which compares each pair once (its own ``git_dir`` applies);
    ``keep``: whether ``compared`` keeps the pair for later steps.
    """
    delta = record_delta(base, new, named_at=named_at, git_dir=git_dir, compared=compared, keep=keep)
    return {path: blob for path, (blob, _) in delta.items()}


def record_delta(base: pygit2.Tree | None, new: pygit2.Tree | None, *, named_at: int | None = None,
                 git_dir: str | None = None, compared: Comparisons | None = None, keep: bool = True) -> Delta:
    """As :func:`changed_records`, with each entry's git file mode (see :func:`~.snapshot.tree_delta`)."""
    raw = compared.files(base, new, keep=keep) if compared is not None else tree_delta(base, new, git_dir=git_dir)
    before, after = tree_layout(base), tree_layout(new)
    at = after if named_at is None else named_at
    if before == after == at:
        return raw
    out: dict[str, tuple[pygit2.Oid | None, int]] = {}
    seen: set[str] = set()
    for path, (blob, mode) in raw.items():
        layout = path_layout(path)
        if layout is None or layout != (after if blob is not None else before):
            out[path] = (blob, mode)  # a path every layout shares, or a file placed against its tree's layout
            continue
        record = placed(path, LAYOUT)
        if record in seen:
            continue
        seen.add(record)
        old, now = entry_id(base, placed(record, before)), entry_id(new, placed(record, after))
        if old != now:
            side = placed(record, after if now is not None else before)  # the entry the diff holds for it
            out[placed(record, at)] = (now, raw.get(side, (now, MODE_BLOB))[1])
    return out

