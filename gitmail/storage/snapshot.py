"""Consistent read-only views of an archive at one commit.

A :class:`Snapshot` reads files and directory listings straight from git's
object database (no work tree, no ``.git/index``). During a group commit each
transaction sees the snapshot overlaid with the edits of the transactions
queued before it, so validation always sees the state it will commit onto.

Parsed records are remembered by blob id and path (a blob never changes), so
the profiles and project record that every call consults are parsed once, not
on every call; each caller gets its own copy to change.

Callers name records by the paths of the newest layout
(:mod:`gitmail.model.records`); a snapshot of an archive still at an older
layout reads each one where that layout keeps it, and the engine writes
there (:meth:`Snapshot.place`), so callers never ask which layout they read.
"""

from __future__ import annotations

import copy
import heapq
from collections.abc import Iterator
from typing import TypeVar, cast

import pygit2

from gitmail.model.errors import LAYOUT_UNSUPPORTED, NOT_FETCHED, GitmailError
from gitmail.model.ids import is_id
from gitmail.model.records import LAYOUT, LAYOUTS, PROJECT_PATH, Record, layout_of, path_layout, placed

from .boundary import read_pin
from .handles import tree_entry
from .rawdiff import NO_ID, diff_trees
from .treediff import pruned_delta

R = TypeVar("R", bound=Record)
_Edit = TypeVar("_Edit", bytes | None, bytes)  # an edit by content (None: gone), or by the id of a blob held already

_PARSED_MAX = 4096
_parsed: dict[tuple[type, str, bytes], Record] = {}
_layouts: dict[bytes, int] = {}  # project.yaml blob id -> the layout it declares


def blob_data(repo: pygit2.Repository, oid: str | pygit2.Oid) -> bytes:
    """The content of the blob ``oid`` (a TypeError if it names another kind of object)."""
    obj = repo[oid]
    if not isinstance(obj, pygit2.Blob):
        raise TypeError(f"{oid} is a {obj.type_str}, not a blob")
    return obj.data


def _file_at(tree: pygit2.Tree | None, path: str) -> pygit2.Object | None:
    """The entry at ``path`` in ``tree``, or None if there is no tree, no such path, or a folder there."""
    if tree is None:
        return None
    obj = tree_entry(tree, path)
    return None if isinstance(obj, pygit2.Tree) else obj


def blob_in(tree: pygit2.Tree | None, path: str) -> pygit2.Blob | None:
    """The blob at ``path`` in ``tree``, or None if there is no tree, no such path, or a folder there."""
    obj = _file_at(tree, path)
    return obj if isinstance(obj, pygit2.Blob) else None


def entry_id(tree: pygit2.Tree | None, path: str) -> pygit2.Oid | None:
    """The id of the entry at ``path`` in ``tree`` unless a folder is there: a file's blob, or a gitlink's commit."""
    obj = _file_at(tree, path)
    return obj.id if obj is not None else None


def tree_changes(old: pygit2.Tree | None, new: pygit2.Tree | None) -> dict[str, pygit2.Oid | None]:
    """Files that differ from tree ``old`` to tree ``new``: path -> new blob id, or None if deleted."""
    return {path: oid for path, (oid, _) in tree_delta(old, new).items()}


def tree_delta(old: pygit2.Tree | None, new: pygit2.Tree | None, *,
               git_dir: str | None = None) -> dict[str, tuple[pygit2.Oid | None, int]]:
    """As :func:`tree_changes`, with each entry's git file mode: path -> (new id or None, mode).

    The mode is the new entry's, or for a deleted one the mode it had (a
    gitlink's id names a commit, not a blob). Read from the diff itself:
    looking each path up in a tree again would decode every folder on the
    way, once per file. With ``git_dir`` (the repository both trees are in)
    git compares two trees (:mod:`.rawdiff`): a few milliseconds more to
    start, about twice as fast over many changes (91k: 0.47 s against
    1.05 s), so the doors that take in whole ranges (a sync's checks and
    merges) ask for it. A tree against nothing is libgit2's still: there is
    nothing to compare, and reading git's listing of every file costs more
    (478k files: 2.8 s against 2.0 s). Otherwise two trees are compared
    folder by folder, descending only where ids differ (:mod:`.treediff`):
    libgit2's diff walks every file of both trees.
    """
    if git_dir is not None and old is not None and new is not None:
        listed = diff_trees(git_dir, str(old.id) if old is not None else None,
                            str(new.id) if new is not None else None)
        if listed is not None:
            return {change.path: ((None, change.old_mode) if change.new_id == NO_ID
                                  else (pygit2.Oid(hex=change.new_id), change.new_mode)) for change in listed}
    if old is not None and new is not None:
        return pruned_delta(old, new)
    if old is None:
        if new is None:
            return {}
        diff = new.diff_to_tree(swap=True)
    else:
        diff = old.diff_to_tree()
    out: dict[str, tuple[pygit2.Oid | None, int]] = {}
    for delta in diff.deltas:
        if delta.status == pygit2.GIT_DELTA_DELETED:
            out[delta.old_file.path] = (None, delta.old_file.mode)
        else:
            out[delta.new_file.path] = (delta.new_file.id, delta.new_file.mode)
    return out


def tree_layout(tree: pygit2.Tree | None) -> int:
    """The layout of the archive whose tip has tree ``tree`` (see :func:`gitmail.model.records.layout_of`)."""
    blob = blob_in(tree, PROJECT_PATH)
    if blob is None:
        return LAYOUT
    found = _layouts.get(blob.id.raw)
    if found is None:
        found = layout_of(blob.data)
        if len(_layouts) >= _PARSED_MAX:
            _layouts.clear()
        _layouts[blob.id.raw] = found
    return found


def unsupported_layout(layout: int) -> GitmailError:
    return GitmailError(LAYOUT_UNSUPPORTED, f"this archive is at layout {layout}, newer than this version of gitmail "
                        f"knows (up to {LAYOUT}); upgrade gitmail on this machine to read or write it",
                        {"layout": layout, "known": list(LAYOUTS)})


class Snapshot:
    def __init__(self, repo: pygit2.Repository, commit: str | None, pending: dict[str, bytes | None] | None = None):
        self.repo = repo
        self.commit = commit
        self._tree = repo[commit].peel(pygit2.Tree) if commit else None
        self._pending = pending if pending is not None else {}
        self._layout: int | None = None

    @property
    def layout(self) -> int:
        """The archive's layout at this snapshot (queued edits of ``project.yaml`` included)."""
        if self._layout is None:
            if PROJECT_PATH in self._pending:
                self._layout = layout_of(self._pending[PROJECT_PATH])
            else:
                self._layout = tree_layout(self._tree)
        return self._layout

    def _at(self, path: str) -> str:
        """Where the record named by ``path`` (a newest-layout path) sits in this archive.

        In an archive at a layout this version does not know, only the paths
        every layout shares (``project.yaml``, profiles) can be read.
        """
        layout = self.layout
        if layout == LAYOUT:
            return path
        if layout not in LAYOUTS:
            if path_layout(path) is not None:
                raise unsupported_layout(layout)
            return path
        return placed(path, layout)

    def place(self, edits: dict[str, _Edit]) -> dict[str, _Edit]:
        """``edits`` named by newest-layout paths, at the paths this archive keeps them (what the engine writes).

        Nothing is written into an archive at a layout this version does not know.
        """
        if self.layout == LAYOUT:
            return edits
        if self.layout not in LAYOUTS and edits:
            raise unsupported_layout(self.layout)
        return {self._at(path): data for path, data in edits.items()}

    def _entry(self, path: str) -> pygit2.Object | None:
        if self._tree is None:
            return None
        return tree_entry(self._tree, path) if path else self._tree

    def _blob(self, path: str) -> pygit2.Blob | None:
        """The committed file at ``path`` (pending edits excluded), or None if there is none."""
        obj = self._entry(path)
        return obj if isinstance(obj, pygit2.Blob) else None

    def _data(self, obj: pygit2.Blob, path: str) -> bytes:
        """The bytes of ``obj``; ``NOT_FETCHED`` when this machine joined with a window that left them on the hub."""
        try:
            return obj.data
        except KeyError:  # pygit2's NotFoundError: named by the tree, never fetched here
            pin = read_pin(self.repo.path)
            since = pin.since if pin is not None else "?"
            raise GitmailError(NOT_FETCHED, f"{path} is older than the history this machine joined with (from "
                               f"{since}); `gitmail deepen PROJECT --since DAY` (or `--since all`) fetches it from "
                               "the hub", {"path": path, "since": since}) from None

    def read(self, path: str) -> bytes | None:
        """The bytes of the file at ``path``, or None if there is none."""
        path = self._at(path)
        if path in self._pending:
            return self._pending[path]
        obj = self._blob(path)
        return None if obj is None else self._data(obj, path)

    def read_regular(self, path: str) -> bytes | None:
        """The bytes of the plain file at ``path``: None for a symlink, a submodule, a folder or nothing."""
        path = self._at(path)
        if path in self._pending:
            return self._pending[path]
        obj = self._blob(path)
        if obj is None or obj.filemode not in (pygit2.GIT_FILEMODE_BLOB, pygit2.GIT_FILEMODE_BLOB_EXECUTABLE):
            return None
        return self._data(obj, path)

    def blob_id(self, path: str) -> str | None:
        """The blob id at ``path`` in the committed tree (pending edits excluded)."""
        obj = self._blob(self._at(path))
        return None if obj is None else str(obj.id)

    def exists(self, path: str) -> bool:
        """Whether a file (not a folder) is at ``path``."""
        path = self._at(path)
        if path in self._pending:
            return self._pending[path] is not None
        return self._blob(path) is not None

    def load(self, path: str, record_type: type[R]) -> R | None:
        """Parse the record at ``path``; None if absent, CORRUPT_RECORD if unparsable. The caller's own copy."""
        record = self.peek(path, record_type)
        return None if record is None else copy.deepcopy(record)

    def peek(self, path: str, record_type: type[R]) -> R | None:
        """:meth:`load` without the copy: the parsed record shared with every reader, which must not change it.

        For reads of many records that only look (a page of message bodies);
        anything that edits a record, or hands it on to code that might,
        takes :meth:`load`'s copy.
        """
        path = self._at(path)
        if path in self._pending:
            data = self._pending[path]
            return None if data is None else record_type.from_bytes(data, path)
        obj = self._blob(path)
        if obj is None:
            return None
        key = (record_type, path, obj.id.raw)
        record = _parsed.get(key)
        if record is None:
            record = record_type.from_bytes(self._data(obj, path), path)
            if len(_parsed) >= _PARSED_MAX:
                _parsed.clear()
            _parsed[key] = record
        return cast(R, record)  # cached under its record_type, so it is an R

    def listdir(self, path: str) -> list[str]:
        """Sorted names (files and folders) directly inside the folder ``path``."""
        path = path.strip("/")
        names: set[str] = set()
        obj = self._entry(path)
        if isinstance(obj, pygit2.Tree):
            names.update(entry.name for entry in obj if entry.name is not None)
        prefix = path + "/" if path else ""
        for pending_path, data in self._pending.items():
            if not pending_path.startswith(prefix):
                continue
            rest = pending_path[len(prefix) :]
            first, _, deeper = rest.partition("/")
            if deeper:
                if data is not None:
                    names.add(first)
            elif data is None:
                names.discard(first)
            else:
                names.add(first)
        return sorted(names)

    def pending_edits(self, folder: str = "") -> dict[str, bytes | None]:
        """Edits queued ahead of this transaction in the same group commit, under ``folder``.

        Maps path to bytes (None for a deletion). Derived caches keyed by
        ``commit`` apply these on top to see exactly what this snapshot sees.
        """
        prefix = folder.strip("/") + "/" if folder.strip("/") else ""
        return {path: data for path, data in self._pending.items() if path.startswith(prefix)}

    def day_files(self, folder: str, since: str | None = None) -> Iterator[tuple[str, str]]:
        """``(id, path)`` of the records in a day-sharded ``folder``, newest first.

        IDs sort by time, so walking the newest days first and each day's
        records from the last gives newest first, and a caller that wants the
        newest few stops early. With ``since`` (a timestamp), days before
        its day are not visited. Files not named by an ID are skipped. A day
        folder holds its files (layout 1) or the fan-out folders above them
        (layout 2); either is read.
        """
        floor = since[:10].replace("-", "/") if since else None
        for year in reversed(self.listdir(folder)):
            if floor and year < floor[:4]:
                return
            for month in reversed(self.listdir(f"{folder}/{year}")):
                if floor and f"{year}/{month}" < floor[:7]:
                    return
                for day in reversed(self.listdir(f"{folder}/{year}/{month}")):
                    shard = f"{year}/{month}/{day}"
                    if floor and shard < floor:
                        return
                    yield from self._day(f"{folder}/{shard}")

    def _day(self, day: str) -> Iterator[tuple[str, str]]:
        """``(id, path)`` of the files named by an ID in one day folder, newest first, whatever its layout."""
        direct: list[tuple[str, str]] = []
        fanned: list[list[tuple[str, str]]] = []
        for name in reversed(self.listdir(day)):
            stem = name.rsplit(".", 1)[0]
            if is_id(stem):
                direct.append((stem, f"{day}/{name}"))
                continue
            for inner in self.listdir(f"{day}/{name}"):
                found = [(leaf.rsplit(".", 1)[0], f"{day}/{name}/{inner}/{leaf}")
                         for leaf in reversed(self.listdir(f"{day}/{name}/{inner}"))]
                fanned.append([item for item in found if is_id(item[0])])
        if not fanned:
            yield from direct
            return
        yield from heapq.merge(direct, *fanned, key=lambda item: item[0], reverse=True)

    def day_shards_until(self, folder: str, until: str) -> Iterator[str]:
        """The day folders (``YYYY/MM/DD``) of a day-sharded ``folder`` up to ``until``'s day, oldest first.

        The other end of :meth:`day_files`: later days are not visited, so
        finding the oldest records costs what they are, not what the folder
        holds.
        """
        ceiling = until[:10].replace("-", "/")
        for year in self.listdir(folder):
            if year > ceiling[:4]:
                return
            for month in self.listdir(f"{folder}/{year}"):
                if f"{year}/{month}" > ceiling[:7]:
                    return
                for day in self.listdir(f"{folder}/{year}/{month}"):
                    shard = f"{year}/{month}/{day}"
                    if shard > ceiling:
                        return
                    yield shard

    def entries(self, path: str = "") -> Iterator[tuple[str, int]]:
        """Every entry under the folder ``path`` at the commit that is not a folder, with its git file mode.

        Depth first and sorted, as :meth:`walk`, but of the committed tree
        alone (pending edits excluded), and with what :meth:`walk` cannot
        see: a submodule link (mode 160000) is listed, not taken for an
        empty folder, and a symbolic or executable file shows its mode.
        """
        path = path.strip("/")
        tree = self._entry(path)
        if isinstance(tree, pygit2.Tree):
            yield from _tree_entries(tree, path + "/" if path else "")

    def walk(self, path: str = "") -> Iterator[str]:
        """Every file path under the folder ``path``, depth first, sorted."""
        path = path.strip("/")
        for name in self.listdir(path):
            child = f"{path}/{name}" if path else name
            if self.exists(child):
                yield child
            else:
                yield from self.walk(child)


def _tree_entries(tree: pygit2.Tree, prefix: str) -> Iterator[tuple[str, int]]:
    for entry in sorted(tree, key=lambda item: item.name or ""):
        if isinstance(entry, pygit2.Tree):
            yield from _tree_entries(entry, f"{prefix}{entry.name}/")
        else:
            yield f"{prefix}{entry.name}", int(entry.filemode)


def records_in(snap: Snapshot, folder: str, kind: type[R]) -> list[R]:
    """Every record of ``kind`` in ``folder`` at the snapshot, by file name (those that do not parse are fsck's)."""
    out = []
    for name in sorted(snap.listdir(folder)):
        if name.endswith(".yaml"):
            try:
                record = snap.load(f"{folder}/{name}", kind)
            except GitmailError:
                continue
            if record is not None:
                out.append(record)
    return out
