"""Applying path edits to a git tree, rewriting only the trees on the way.

Editing ``messages/2026/12/01/<id>.md`` reads and rewrites the root, the
``messages`` tree and the three date trees; every other tree is reused by id.
Decoded trees are cached by id (trees are immutable), and so are the trees a
committed change wrote, so the next commit finds the hot day folder already
decoded.
The cache is bounded by the entries it holds, not only by the number of
trees: a busy day folder of tens of thousands of entries would otherwise keep
hundreds of its past versions in memory. Of each folder, the version a commit
writes and the one it superseded are kept (the index's catch-up compares the
two); older ones are dropped at once, since the next commit starts from the
newest.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterator

import pygit2

from gitmail.model.errors import invalid

from .objects import BLOB, MODE_BLOB, MODE_TREE, TREE, PackBuffer, Tree

_CACHE_SIZE = 8192  # trees at most (a busy day writes into thousands of fan-out folders)...
_CACHE_ENTRIES = 60_000  # ...holding this many entries in all (about 20 MB decoded)
_cache: OrderedDict[bytes, Tree] = OrderedDict()
_cache_entries = 0
_superseded: dict[bytes, bytes] = {}  # a written tree -> the version of its folder it replaced
_cache_lock = threading.Lock()


def read_tree(repo: pygit2.Repository, oid: bytes, *, remember: bool = True) -> Tree:
    """The decoded tree ``oid``; shared, so callers must not change it (``copy`` first).

    ``remember=False`` leaves the cache as it was (for a tree read once, such
    as an old version a diff starts from).
    """
    with _cache_lock:
        entries = _cache.get(oid)
        if entries is not None:
            _cache.move_to_end(oid)
            return entries
    kind, data = repo.odb.read(pygit2.Oid(raw=oid))
    if int(kind) != TREE:
        raise ValueError(f"object {oid.hex()} is not a tree")
    entries = Tree.decode(data)
    if remember:
        _remember(oid, entries)
    return entries


Entry = tuple[int, bytes]  # (mode, raw object id)


def changed_files(repo: pygit2.Repository, old: bytes | None, new: bytes | None,
                  prefix: str = "") -> Iterator[tuple[str, Entry | None, Entry | None]]:
    """Files that differ from tree ``old`` to tree ``new``: (path, old entry, new entry), None where absent.

    Both trees are walked together and every subtree with the same id on
    both sides is skipped, so the cost follows the folders that changed. A
    file whose mode alone changed is listed too. Neither version is kept in
    the tree cache (an old version is read once).
    """
    empty: dict[str, Entry] = {}
    before = read_tree(repo, old, remember=False).entries() if old is not None else empty
    after = read_tree(repo, new, remember=False).entries() if new is not None else empty
    for name in sorted({name for name, _ in before.items() ^ after.items()}):
        a, b = before.get(name), after.get(name)
        a_tree = a[1] if a is not None and a[0] == MODE_TREE else None
        b_tree = b[1] if b is not None and b[0] == MODE_TREE else None
        if a_tree is not None or b_tree is not None:
            yield from changed_files(repo, a_tree, b_tree, f"{prefix}{name}/")
        a_file = a if a is not None and a_tree is None else None
        b_file = b if b is not None and b_tree is None else None
        if a_file is not None or b_file is not None:
            yield f"{prefix}{name}", a_file, b_file


def _remember(oid: bytes, entries: Tree, *, replaces: bytes | None = None) -> None:
    """Cache ``entries`` as tree ``oid``, written in place of the folder version ``replaces``.

    The version that ``replaces`` itself replaced is dropped.
    """
    global _cache_entries
    with _cache_lock:
        if replaces is not None and replaces != oid:
            older = _superseded.pop(replaces, None)
            dropped = _cache.pop(older, None) if older is not None else None
            if dropped is not None:
                _cache_entries -= len(dropped)
            _superseded[oid] = replaces
        previous = _cache.get(oid)
        if previous is not None:
            _cache_entries -= len(previous)
        _cache[oid] = entries
        _cache_entries += len(entries)
        _cache.move_to_end(oid)
        while len(_cache) > 1 and (len(_cache) > _CACHE_SIZE or _cache_entries > _CACHE_ENTRIES):
            gone, tree = _cache.popitem(last=False)
            _cache_entries -= len(tree)
            _superseded.pop(gone, None)
        while len(_superseded) > _CACHE_SIZE:  # links whose trees are long gone
            _superseded.pop(next(iter(_superseded)))


def check_path(path: str) -> str:
    """Refuse paths that could escape the archive or confuse git."""
    parts = path.split("/") if isinstance(path, str) else [""]
    if not path or any(part in ("", ".", "..", ".git") or "\0" in part or "\\" in part for part in parts):
        raise invalid(f"{path!r} is not a safe path inside the archive", field="path")
    return path


class _Node:
    __slots__ = ("oid", "base", "start", "entries", "children")

    def __init__(self, oid: bytes | None):
        self.oid = oid  # None while dirty (or for a new, empty tree)
        self.base = oid  # the version the edits since the last flush started from
        self.start = oid  # the version this editor started from
        self.entries: Tree | None = None if oid else Tree()
        self.children: dict[str, _Node] = {}


class TreeEditor:
    """Accumulates edits on top of a base tree; ``flush`` writes the new trees."""

    def __init__(self, repo: pygit2.Repository, root: bytes | None, pack: PackBuffer):
        self.repo = repo
        self.pack = pack
        self.root = _Node(root)
        self._changes: dict[str, tuple[bytes | None, bytes | None]] = {}  # path -> (blob before, blob after)

    def _entries(self, node: _Node) -> Tree:
        if node.entries is None:
            assert node.oid is not None  # a node without entries is an unread committed tree
            node.entries = read_tree(self.repo, node.oid).copy()
        return node.entries

    def set(self, path: str, data: bytes | None) -> None:
        """Put ``data`` at ``path`` (None deletes it); folders appear and vanish as needed."""
        self._put(path, data, None)

    def link(self, path: str, blob: bytes) -> None:
        """Put the file the repository already holds as ``blob`` (its raw id) at ``path``, without reading it.

        What a merge does with the files it takes from the other side as
        they are: reading and packing them again would cost as much as
        writing them anew.
        """
        self._put(path, None, blob)

    def _put(self, path: str, data: bytes | None, blob: bytes | None) -> None:
        """Put ``blob``, or ``data``, at ``path``; neither deletes it."""
        deleting = data is None and blob is None
        parts = check_path(path).split("/")
        node = self.root
        for depth, name in enumerate(parts[:-1]):
            entries = self._entries(node)
            child = node.children.get(name)
            if child is None:
                existing = entries.get(name)
                if existing is not None and existing[0] != MODE_TREE:
                    raise invalid(f"{'/'.join(parts[: depth + 1])} is a file, so {path} cannot be created",
                                  field="path")
                if existing is None and deleting:
                    return  # deleting under a folder that does not exist
                child = _Node(existing[1] if existing else None)
                node.children[name] = child
            node.oid = None
            node = child
        entries = self._entries(node)
        leaf = parts[-1]
        current = entries.get(leaf)
        if deleting:
            if leaf in node.children:
                raise invalid(f"{path} is a folder, not a file", field="path")
            entries.pop(leaf)
            new = None
        else:
            if leaf in node.children or (current is not None and current[0] == MODE_TREE):
                raise invalid(f"{path} is a folder, so a file cannot be written there", field="path")
            new = blob if blob is not None else self.pack.add(BLOB, data or b"")
            entries.set(leaf, MODE_BLOB, new)
        node.oid = None
        old = current[1] if current is not None and current[0] != MODE_TREE else None
        first = self._changes.get(path, (old, None))[0]
        self._changes[path] = (first, new)

    def take_changes(self) -> list[tuple[str, bytes | None, bytes | None]]:
        """The files changed since the last call, as ``(path, blob before, blob after)`` in path order.

        What the engine records per commit, so that derived state learns
        what a commit changed without comparing its trees.
        """
        changes, self._changes = self._changes, {}
        return sorted((path, old, new) for path, (old, new) in changes.items() if old != new)

    def flush(self) -> bytes:
        """Write every changed tree into the pack and return the root tree id."""
        oid = self._flush(self.root)
        return oid if oid is not None else self.pack.add(TREE, b"")

    def _flush(self, node: _Node) -> bytes | None:
        if node.oid is not None:
            return node.oid
        entries = self._entries(node)
        for name, child in node.children.items():
            child_oid = self._flush(child)
            if child_oid is None:
                entries.pop(name)
            else:
                entries.set(name, MODE_TREE, child_oid)
        if not entries:
            return None  # git keeps no empty folders
        data = entries.encode()
        # The version this one replaces may have been written by an earlier commit of this
        # batch: then this one goes into the pack as a delta against it (a few bytes).
        delta = entries.delta_since_mark(data) if node.base is not None and node.base in self.pack else None
        node.oid = self.pack.add(TREE, data, base=node.base, delta=delta)
        entries.mark()
        node.base = node.oid
        return node.oid

    def remember(self) -> None:
        """Keep the last version written of every tree decoded, once it is committed: the next commit starts there.

        The editor is done with its trees then, so they go to the cache as
        they are (no copy); versions an earlier commit of the same chain wrote
        were superseded at once and are not kept.
        """
        pending = [self.root]
        while pending:
            node = pending.pop()
            pending.extend(node.children.values())
            if node.oid is not None and node.oid != node.start and node.entries is not None:
                _remember(node.oid, node.entries, replaces=node.start)
