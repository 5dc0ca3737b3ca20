"""Keeping an archive's object store compact without blocking anyone.

Every commit the engine makes arrives as one small pack. Left alone, a busy
archive would collect thousands of them. After commits, a background run
rolls the small packs together, geometric style: packs are sorted by size and
the smallest ones whose sizes do not form a doubling progression are merged,
so each run touches only recent packs and old large packs are left alone.

The merge hands exactly the small packs' objects (streamed from their indexes,
a chunk at a time, so a merge that reaches the largest pack holds no list of
the archive's objects) to ``git pack-objects`` (named by git's diff of the new
commits), which finds deltas among them; its cost follows what is
new, not the size of the archive (``git repack --geometric`` walks the whole
history first: seconds at 100k messages). The new pack is fsynced before the
old ones are removed, so a crash never loses an object. ``gc.autoPackLimit``
is switched off in archives so that ``git gc --auto`` only tidies loose objects
(from pushes) and never escalates into a full repack.

A run holds a non-blocking ``flock`` so that only one process maintains an
archive at a time; readers and writers never wait for it.
"""

from __future__ import annotations

import fcntl
import os
import struct
import subprocess
import tempfile
from collections.abc import Callable, Iterator

import pygit2

from . import leftovers
from .background import Debounced
from .handles import open_repository
from .objects import fsync_dir
from .rawdiff import read_raw

PACK_LIMIT = 32  # consolidate once this many packs have accumulated
_FALLBACK_COMMITS = 2000  # recent commits whose objects are named when no earlier consolidation is on record
_MARK = "gitmail-rollup-tip"
_IDS_PER_CHUNK = 16_384  # object ids read from a pack index and handed to pack-objects at a time


def pack_count(git_dir: str) -> int:
    pack_dir = os.path.join(git_dir, "objects", "pack")
    try:
        return sum(1 for entry in os.scandir(pack_dir)
                   if entry.name.startswith("pack-") and entry.name.endswith(".idx"))
    except FileNotFoundError:
        return 0


def _packs(pack_dir: str) -> list[tuple[int, str]]:
    """(size, base path) of every pack that has an index and no .keep file."""
    found = []
    for entry in os.scandir(pack_dir):
        if not (entry.name.startswith("pack-") and entry.name.endswith(".idx")):
            continue
        base = entry.path[: -len(".idx")]
        if os.path.exists(base + ".keep"):
            continue
        try:
            found.append((os.stat(base + ".pack").st_size, base))
        except FileNotFoundError:
            continue
    return sorted(found)


def rollup_count(sizes: list[int]) -> int:
    """How many of the smallest of ``sizes`` (ascending) to merge so that the rest at least double from one to the next.

    Walking down from the largest, the first pair that breaks the doubling
    marks the items that must merge; larger ones join while they are smaller
    than twice what is merged so far. 0 when the sizes already double. Kept
    up after every few additions, the items number about log2 of the total,
    and each unit of size is rewritten about log2 times over its life. Packs
    here and the search index's segments are kept this way.
    """
    i = len(sizes) - 1
    while i > 0 and sizes[i] >= 2 * sizes[i - 1]:
        i -= 1
    if i == 0:
        return 0
    total = sum(sizes[: i + 1])
    j = i + 1
    while j < len(sizes) and sizes[j] < 2 * total:
        total += sizes[j]
        j += 1
    return j


def _rollup(packs: list[tuple[int, str]]) -> list[str]:
    """The packs (sorted by size) to merge so that the remaining sizes at least double from one to the next."""
    return [base for _, base in packs[: rollup_count([size for size, _ in packs])]]


def _object_ids(index_path: str) -> Iterator[bytes]:
    """The object ids listed in a version-2 pack index, raw (20 bytes each), a bounded chunk at a time.

    The packs a run merges can hold the whole archive's objects (millions at
    a million messages); reading their ids as they are handed on keeps the
    run's memory to one chunk, not one Python string per object.
    """
    with open(index_path, "rb") as handle:
        header = handle.read(8 + 256 * 4)
        if len(header) < 8 + 256 * 4 or header[:4] != b"\xfftOc" or struct.unpack(">I", header[4:8])[0] != 2:
            raise ValueError(f"{index_path}: not a version 2 pack index")
        remaining = struct.unpack(">I", header[-4:])[0]
        while remaining:
            count = min(remaining, _IDS_PER_CHUNK)
            data = handle.read(20 * count)
            if len(data) != 20 * count:
                raise ValueError(f"{index_path}: the index ends before its last object id")
            yield data
            remaining -= count


def _names(git_dir: str, tip: str, since: str | None) -> dict[str, str]:
    """The path of each tree and blob that the commits after ``since`` up to ``tip`` brought in.

    ``pack-objects`` pairs objects with similar names when it looks for
    deltas; without names, successive versions of a day folder would not be
    compared and the archive would grow by about a third. git's own diff of
    each new commit against its parent gives the names at a cost that follows
    what changed, in a process of its own (not on the writers' interpreter).
    """
    revs = [tip, f"^{since}"] if since else [tip, f"--max-count={_FALLBACK_COMMITS}"]
    listed = subprocess.run(["git", "--git-dir", git_dir, "log", "--raw", "-t", "-z", "--no-abbrev", "--no-renames",
                             "--format=", *revs], capture_output=True)
    if listed.returncode != 0:
        return _names(git_dir, tip, None) if since else {}
    names: dict[str, str] = {}
    for item in read_raw(listed.stdout):
        if not isinstance(item, str):
            names.setdefault(item.new_id, item.path)
    return names


def _merge_packs(git_dir: str, bases: list[str]) -> None:
    pack_dir = os.path.join(git_dir, "objects", "pack")
    tip = _tip(git_dir)
    names = _names(git_dir, tip, _read_mark(git_dir)) if tip else {}  # only the objects since the last run
    # At low priority and on one thread: writers must keep a core to themselves. The objects are streamed
    # to it pack by pack (pack-objects takes an object listed twice once).
    errors = tempfile.TemporaryFile()  # not a pipe: a full one would stop it while the ids are still coming
    packer = subprocess.Popen(
        ["nice", "-n", "10", "git", "--git-dir", git_dir, "-c", "core.fsync=objects,derived-metadata",
         "-c", "core.fsyncMethod=fsync", "pack-objects", "-q", "--threads=1", "--delta-base-offset",
         os.path.join(pack_dir, "pack")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errors)
    assert packer.stdin is not None
    try:
        for base in bases:
            for chunk in _object_ids(base + ".idx"):
                ids = (chunk[i : i + 20].hex() for i in range(0, len(chunk), 20))
                packer.stdin.write("".join(f"{oid} {names[oid]}\n" if oid in names else f"{oid}\n"
                                           for oid in ids).encode())
    except BrokenPipeError:
        pass  # pack-objects stopped early: its exit status below says why
    except BaseException:
        packer.kill()
        packer.wait()
        raise
    out, _ = packer.communicate()
    with errors:
        errors.seek(0)
        if packer.returncode != 0:
            raise subprocess.CalledProcessError(packer.returncode, packer.args, out, errors.read())
    fsync_dir(pack_dir)  # the new pack is durable before the old ones go
    for base in bases:
        for suffix in (".idx", ".pack", ".rev", ".bitmap"):
            try:
                os.unlink(base + suffix)
            except FileNotFoundError:
                pass
    if tip:
        _write_mark(git_dir, tip)


def _tip(git_dir: str) -> str | None:
    try:
        return str(open_repository(git_dir).references["refs/heads/main"].target)
    except (KeyError, pygit2.GitError):
        return None


def _read_mark(git_dir: str) -> str | None:
    """The tip at the last consolidation: commits after it are the ones whose objects need names."""
    try:
        with open(os.path.join(git_dir, _MARK), encoding="ascii") as handle:
            return handle.read().strip() or None
    except FileNotFoundError:
        return None


def _write_mark(git_dir: str, tip: str) -> None:
    tmp = os.path.join(git_dir, _MARK + ".tmp")
    with open(tmp, "w", encoding="ascii") as handle:
        handle.write(tip + "\n")
    os.replace(tmp, os.path.join(git_dir, _MARK))


def consolidate(git_dir: str, *, force: bool = False) -> bool:
    """Roll small packs together (and tidy loose objects); False if another process is at it."""
    lock_path = os.path.join(git_dir, "gitmail-maintenance.lock")
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        leftovers.clear(git_dir)
        pack_dir = os.path.join(git_dir, "objects", "pack")
        packs = _packs(pack_dir)
        if force or len(packs) >= PACK_LIMIT:
            small = _rollup(packs)
            if small:
                _merge_packs(git_dir, small)
        subprocess.run(["git", "--git-dir", git_dir, "-c", "gc.autoDetach=false", "-c", "gc.autoPackLimit=0",
                        "gc", "--auto", "-q"], check=True, capture_output=True)
        return True
    finally:
        os.close(fd)


class Maintainer:
    """Pokes a background consolidation when an archive has enough packs."""

    def __init__(self, git_dir: str, *, on_consolidated: Callable[[], None] | None = None):
        """``on_consolidated`` is called after each run that merged packs (handles on the old ones can go)."""
        self.git_dir = git_dir
        self.on_consolidated = on_consolidated
        # Not deferred to a pause in the writes: pack-objects finds good deltas
        # among a few hundred versions of a folder, poor ones among thousands.
        self.worker = Debounced(f"gitmail-maintain:{os.path.basename(os.path.dirname(git_dir))}",
                                self._run, delay=0.2)
        self._commits = 0

    def on_commit(self, old: str | None, new: str) -> None:
        self._commits += 1
        if self._commits % 8 == 0 and pack_count(self.git_dir) >= PACK_LIMIT:
            self.worker.poke()

    def _run(self) -> None:
        if consolidate(self.git_dir) and self.on_consolidated is not None:
            self.on_consolidated()
