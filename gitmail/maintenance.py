"""Keeping an archive's object store compact without blocking anyone.

Every commit the engine makes arrives as one small pack. Left alone, a busy
archive would collect thousands of them, and every object lookup would pay
for it. Here, after commits, a background run rolls the small packs into
larger ones with ``git repack --geometric=2``: each run touches only recent
packs, so its cost stays proportional to what is new, while old large packs
are left alone. The run holds a non-blocking ``flock`` so that only one
process maintains an archive at a time; readers and writers never wait for it.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import time

from .background import Debounced

PACK_LIMIT = 24  # consolidate once this many packs have accumulated
_TMP_MAX_AGE = 3600.0


def pack_count(git_dir: str) -> int:
    pack_dir = os.path.join(git_dir, "objects", "pack")
    try:
        return sum(1 for entry in os.scandir(pack_dir) if entry.name.endswith(".idx"))
    except FileNotFoundError:
        return 0


def consolidate(git_dir: str, *, force: bool = False) -> bool:
    """Roll small packs together (and pack any loose objects); False if another process is at it."""
    lock_path = os.path.join(git_dir, "gitmail-maintenance.lock")
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        _remove_orphans(git_dir)
        if force or pack_count(git_dir) >= PACK_LIMIT:
            subprocess.run(["git", "--git-dir", git_dir, "repack", "-d", "-q", "--geometric=2"],
                           check=True, capture_output=True)
        subprocess.run(["git", "--git-dir", git_dir, "-c", "gc.autoDetach=false", "gc", "--auto", "-q"],
                       check=True, capture_output=True)
        return True
    finally:
        os.close(fd)


def _remove_orphans(git_dir: str) -> None:
    """Delete temporary pack files that a killed writer left behind."""
    pack_dir = os.path.join(git_dir, "objects", "pack")
    cutoff = time.time() - _TMP_MAX_AGE
    for entry in os.scandir(pack_dir):
        if entry.name.startswith("tmp_gm_") and entry.stat().st_mtime < cutoff:
            os.unlink(entry.path)


class Maintainer:
    """Pokes a background consolidation when an archive has enough packs."""

    def __init__(self, git_dir: str):
        self.git_dir = git_dir
        self.worker = Debounced(f"gitmail-maintain:{os.path.basename(os.path.dirname(git_dir))}",
                                self._run, delay=0.2)
        self._commits = 0

    def on_commit(self, old: str | None, new: str) -> None:
        self._commits += 1
        if self._commits % 8 == 0 and pack_count(self.git_dir) >= PACK_LIMIT:
            self.worker.poke()

    def _run(self) -> None:
        consolidate(self.git_dir)
