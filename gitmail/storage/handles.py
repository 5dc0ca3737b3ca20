"""Repository handles that let go of their files as soon as they are dropped.

A pygit2 ``Repository`` refers to itself through its ``branches``,
``references``, ``remotes`` and ``submodules`` helpers, so dropping the last
reference to one does not free it: it waits for Python's cyclic garbage
collector, which may not look at long-lived objects for minutes. Until then
its object database keeps every pack it has looked into open and mapped,
including packs that a consolidation has since deleted, whose disk space and
memory are then not given back. A server that renews its handles after each
consolidation would pile up dead handles (and file descriptors) faster than
the collector frees them.

In the handles :func:`open_repository` gives, those helpers are made afresh
on each use instead of being kept, so the handle is freed, and its packs
released, the moment nothing uses it any more.

libgit2's own limits on pack files are process-wide and generous (every
pack open at once, up to 8 GiB of them mapped): a busy archive has dozens of
small packs between consolidations, and the pages of every one that was read
would count against the process. The first handle opened here sets tighter
limits (:data:`PACK_FILES_OPEN`, :data:`PACK_BYTES_MAPPED`); libgit2 closes
and unmaps the least recently used packs beyond them and reopens one when it
is needed again. It also sets the budget of libgit2's object cache
(:data:`OBJECT_CACHE_BYTES`, shared by every handle of the process): its
default, 256 MiB, is reached by a server that runs for days, and a write
only ever rereads the few small trees on its paths, which a few MiB hold.

Last, it caps the C library's malloc arenas at :data:`MALLOC_ARENAS`. glibc
gives each thread that allocates at the same moment as another an arena of
its own, up to eight per core; libgit2, zlib and SQLite allocate from every
thread of a server's pool, and memory freed in one arena is neither reused
by another nor given back while anything above it is in use, so the
server's resident size crept up with uptime although its heap did not.
It also fixes glibc's thresholds for large blocks (:data:`MMAP_FROM`,
:data:`TRIM_FROM`): by default glibc raises them each time a large block is
freed, up to 32 MiB (and 64 MiB of free memory kept at the top of the heap),
so after one large page of results or pack had come and gone, later large
buffers came from the heap and the memory they left stayed resident.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import secrets
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import pygit2
from pygit2.branches import Branches
from pygit2.references import References
from pygit2.remotes import RemoteCollection
from pygit2.submodules import SubmoduleCollection

_HELPERS = ("branches", "references", "remotes", "submodules")
PACK_FILES_OPEN = 48  # pack files kept open at once, in the whole process (consolidation keeps ~32)
PACK_BYTES_MAPPED = 32 << 20  # bytes of pack files mapped at once, in the whole process...
PACK_WINDOW = 8 << 20  # ...in windows of at most this size
OBJECT_CACHE_BYTES = 16 << 20  # libgit2's cache of parsed commits and trees, all handles of the process together
MALLOC_ARENAS = 2  # glibc malloc arenas for the whole process (its default: eight per core)
MMAP_FROM = 256 << 10  # blocks from this size get a mapping of their own, given back when freed...
TRIM_FROM = 1 << 20  # ...and free memory above this at the top of the heap is given back
_M_ARENA_MAX, _M_MMAP_THRESHOLD, _M_TRIM_THRESHOLD = -8, -3, -1  # mallopt's parameter numbers (malloc.h)
_limited = False


class _MadeOnUse:
    """A helper built on each access (a plain, non-data descriptor, so nothing is stored)."""

    def __init__(self, factory: Callable[[Any], Any]):
        self.factory = factory

    def __get__(self, handle: Any, owner: type | None = None) -> Any:
        return self if handle is None else self.factory(handle)


class _Handle(pygit2.Repository):
    branches = _MadeOnUse(Branches)
    references = _MadeOnUse(References)
    remotes = _MadeOnUse(RemoteCollection)
    submodules = _MadeOnUse(SubmoduleCollection)

    def _common_init(self) -> None:
        super()._common_init()
        for name in _HELPERS:  # pygit2 keeps them on the instance: drop them to break the cycle
            self.__dict__.pop(name, None)


def _tune_malloc() -> None:
    """Cap glibc's malloc arenas and fix its large-block thresholds (nothing happens on another C library)."""
    name = ctypes.util.find_library("c")
    if name is None:
        return
    libc = ctypes.CDLL(name)
    if hasattr(libc, "mallopt") and hasattr(libc, "gnu_get_libc_version"):
        libc.mallopt(_M_ARENA_MAX, MALLOC_ARENAS)  # arenas made before stay
        libc.mallopt(_M_MMAP_THRESHOLD, MMAP_FROM)
        libc.mallopt(_M_TRIM_THRESHOLD, TRIM_FROM)


def open_repository(path: str) -> pygit2.Repository:
    """Open the repository at ``path``; freed (files closed) as soon as the last reference goes."""
    global _limited
    if not _limited:
        pygit2.settings.mwindow_file_limit = PACK_FILES_OPEN
        pygit2.settings.mwindow_mapped_limit = PACK_BYTES_MAPPED
        pygit2.settings.mwindow_size = PACK_WINDOW
        pygit2.settings.cache_max_size(OBJECT_CACHE_BYTES)
        _tune_malloc()
        _limited = True
    return _Handle(path)


# -- looking up a path in a tree, a reference by name -------------------------
# pygit2 (1.21 and earlier) keeps one reference to the path it is given by
# ``tree[path]``, ``path in tree`` and ``tree / path``, and to the name given
# to ``repo.references[name]`` (its argument conversion takes a reference it
# never gives back). A string handed to one of them is never freed: a server
# looking up a few fresh paths per request grew by half a kilobyte a message,
# for good. The functions below give that reference back after each lookup,
# once a probe has shown that the installed pygit2 keeps it (a fixed pygit2
# is used as it is).

_keeps: dict[str, bool] = {}  # per kind of lookup, whether this pygit2 keeps its argument; probed on first use
_py_decref = ctypes.pythonapi.Py_DecRef
_py_decref.argtypes = [ctypes.py_object]
_py_decref.restype = None
_T = TypeVar("_T")


def _looked_up(kind: str, look: Callable[[str], _T], text: str) -> _T | None:
    """``look(text)`` (None if it raises KeyError), giving back the reference pygit2 keeps to ``text``.

    The first lookup of each ``kind`` is preceded by a probe with a string
    nothing else can be holding, which tells whether this pygit2 keeps it.
    """
    if type(text) is not str:
        raise TypeError(f"a path or reference name is text, not {type(text).__name__}")
    keeps = _keeps.get(kind)
    if keeps is None:
        probe = "".join(["refs/gitmail-probe/", secrets.token_hex(8)])
        before = sys.getrefcount(probe)
        try:
            look(probe)
        except KeyError:
            pass
        keeps = _keeps[kind] = sys.getrefcount(probe) > before
    try:
        return look(text)
    except KeyError:
        return None
    finally:
        if keeps:
            _py_decref(text)


def tree_entry(tree: pygit2.Tree, path: str) -> pygit2.Object | None:
    """The object at ``path`` (``a/b/c``) inside ``tree``, or None; ``tree[path]`` without its leak."""
    return _looked_up("path", tree.__getitem__, path)


def tree_has(tree: pygit2.Tree, path: str) -> bool:
    """Whether anything is at ``path`` inside ``tree``; ``path in tree`` without its leak."""
    return tree_entry(tree, path) is not None


def reference(repo: pygit2.Repository, name: str) -> pygit2.Reference | None:
    """The reference ``name`` (``refs/heads/main``), or None; ``repo.references[name]`` without its leak."""
    return _looked_up("name", repo.lookup_reference, name)
