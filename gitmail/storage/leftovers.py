"""What a killed process leaves in a repository, found and cleared.

A writer killed with ``kill -9`` cannot tidy up after itself. In a repository
that leaves:

- ``objects/pack/tmp_gm_<pid>_*``: a pack gitmail was writing (the pid in the
  name tells whether its writer still runs);
- ``objects/pack/tmp_pack_*``, ``tmp_idx_*``, ``tmp_rev_*``: files of a killed
  ``git pack-objects`` or ``index-pack``;
- ``objects/tmp_objdir-incoming-*``: the quarantine of a push killed while it
  was received;
- ``packed-refs.lock`` and ``refs/**/*.lock``: a ref update killed halfway; git
  then refuses to touch those refs (``git pack-refs`` fails) until the lock goes.

Git and libgit2 hold a ref lock for milliseconds and a push quarantine for as
long as the push takes, so a lock older than :data:`LOCK_AGE` or a temporary
file older than :data:`TMP_AGE` belongs to a process that is gone. Archives
are cleared when a process opens them to write (the server at its start, the
CLI), and a hub at each push its pre-receive check sees.
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass

LOCK_AGE = 60.0  # seconds: a ref lock this old has no living owner
TMP_AGE = 3600.0  # seconds: a temporary pack or push quarantine this old has no living owner
_GIT_TMP_PREFIXES = ("tmp_pack_", "tmp_idx_", "tmp_rev_", "tmp_bitmap_", "tmp_mtimes_")


@dataclass(frozen=True)
class Leftover:
    path: str  # relative to the repository
    kind: str
    age: float  # seconds since it was last touched

    def __str__(self) -> str:
        return f"{self.path}: {self.kind}, untouched for {self.age:.0f} s"


def find(git_dir: str, *, now: float | None = None, keep: str | None = None) -> list[Leftover]:
    """Every leftover of a killed process in ``git_dir``; ``keep`` is a path never reported (a live quarantine)."""
    now = time.time() if now is None else now
    found: list[Leftover] = []

    def note(path: str, kind: str, limit: float | None) -> None:
        try:
            age = now - os.lstat(path).st_mtime
        except FileNotFoundError:
            return  # its owner finished meanwhile
        if limit is None or age >= limit:
            found.append(Leftover(os.path.relpath(path, git_dir), kind, max(0.0, age)))

    pack_dir = os.path.join(git_dir, "objects", "pack")
    for entry in _scan(pack_dir):
        if entry.name.startswith("tmp_gm_"):
            owner = _pid(entry.name)
            dead = owner is not None and not _alive(owner)
            note(entry.path, "pack a killed gitmail writer left", None if dead else TMP_AGE)
        elif entry.name.startswith(_GIT_TMP_PREFIXES):
            note(entry.path, "temporary file of a killed git pack command", TMP_AGE)
    kept = os.path.realpath(keep) if keep else None
    for entry in _scan(os.path.join(git_dir, "objects")):
        if entry.name.startswith("tmp_objdir-incoming-") and os.path.realpath(entry.path) != kept:
            note(entry.path, "quarantine of a push that was killed", TMP_AGE)
    note(os.path.join(git_dir, "packed-refs.lock"), "lock of a killed ref update (git pack-refs fails)", LOCK_AGE)
    for folder, _, files in os.walk(os.path.join(git_dir, "refs")):
        for name in files:
            if name.endswith(".lock"):
                note(os.path.join(folder, name), "lock of a killed ref update", LOCK_AGE)
    return found


def clear(git_dir: str, *, now: float | None = None, keep: str | None = None) -> list[Leftover]:
    """Remove every leftover :func:`find` reports; returns what was removed."""
    removed = []
    for leftover in find(git_dir, now=now, keep=keep):
        path = os.path.join(git_dir, leftover.path)
        try:
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path)
            else:
                os.unlink(path)
        except FileNotFoundError:
            continue
        removed.append(leftover)
    return removed


def _scan(folder: str) -> list[os.DirEntry[str]]:
    try:
        return list(os.scandir(folder))
    except FileNotFoundError:
        return []


def _pid(name: str) -> int | None:
    """The writer's process id in ``tmp_gm_<pid>_...``."""
    part = name[len("tmp_gm_"):].split("_", 1)[0]
    return int(part) if part.isdigit() else None


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process
    return True
