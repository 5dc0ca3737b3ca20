"""The git merge driver: git's per-file merge, done by gitmail's record rules.

git calls the driver for a file changed on both sides of a merge
(``%O %A %B %P``: ancestor, ours, theirs, path); it must leave the result in
the ours file and exit 0, or exit non-zero for a conflict. Files changed on
one side only never reach it, exactly as in :func:`gitmail.sync.merge.merge_commits`.

A conflict no rule settles is handled as the sync handles it: the version
with the smaller blob id stays, the other is written as a conflict record in
the work tree, and the driver exits 1 so that git stops and the human adds
the record (``git add conflicts && git commit``).
"""

from __future__ import annotations

import os
import subprocess

from .merge import merge_file


def _read(path: str) -> bytes | None:
    with open(path, "rb") as handle:
        data = handle.read()
    return data or None  # git passes an empty ancestor when both sides added the file


def run(base_file: str, ours_file: str, theirs_file: str, path: str) -> tuple[int, str]:
    """Merge one file in place; (exit code, a line for the human)."""
    result = merge_file(path, _read(base_file), _read(ours_file), _read(theirs_file))
    with open(ours_file, "wb") as handle:
        handle.write(result.content or b"")
    if result.conflict is None:
        return 0, ""
    top = subprocess.run(["git", "rev-parse", "--show-toplevel"], capture_output=True, text=True).stdout.strip()
    target = os.path.join(top or os.getcwd(), result.conflict.path())
    os.makedirs(os.path.dirname(target), exist_ok=True)
    with open(target, "wb") as handle:
        handle.write(result.conflict.to_bytes())
    return 1, (f"gitmail: two different versions of {path}; kept one, saved the other as "
               f"{result.conflict.path()}. Run `git add {result.conflict.path()} {path}` and commit.")
