"""Putting gitmail's git integration in place: hooks, the merge driver, ``.gitattributes``.

- Archives get the hooks of ``hooks/archive`` (the record check on pushes
  into the archive, and pokes for the watcher; the store installs them when
  it creates an archive) and the merge driver, so a pull inside the
  archive's checkout merges by the record rules.
- A human's clone of an archive (``--repo``) gets the merge driver, so a
  plain ``git pull`` there builds the same tree as ``gitmail sync``.
- A hub (``--hub``, a bare repository machines push to) gets the
  ``pre-receive`` check of :mod:`gitmail.sync.pushcheck` and refuses history
  rewrites and branch deletion.

The scripts themselves are written by :mod:`gitmail.storage.hookfiles`.

Each archive's tree carries a ``.gitattributes`` naming the driver for
record files (its text is :data:`gitmail.model.records.GITATTRIBUTES`, which
the record checker holds every pushed or fetched version to); git falls back
to its plain text merge where the driver is not configured, so the file is
harmless in a clone without gitmail.
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import TypedDict

from gitmail.model.errors import NOT_FOUND, GitmailError
from gitmail.model.records import GITATTRIBUTES, GITATTRIBUTES_PATH, MERGE_DRIVER
from gitmail.storage.engine import Archive, Change
from gitmail.storage.hookfiles import HUB_MARK, HookFiles, install_archive_hooks, install_hooks


def _git(*args: str) -> None:
    proc = subprocess.run(["git", *args], capture_output=True, text=True)
    if proc.returncode != 0:
        raise GitmailError(NOT_FOUND, f"git {' '.join(args[:3])} failed: {proc.stderr.strip()}; "
                           "is the path a git repository?", {"command": list(args)})


def driver_command() -> str:
    """The command git runs for the merge driver: this Python's gitmail."""
    return f'"{sys.executable}" -m gitmail merge-driver %O %A %B %P'


def register_merge_driver(git_dir: str) -> None:
    """Name the gitmail merge driver in a repository's config."""
    _git("--git-dir", git_dir, "config", f"merge.{MERGE_DRIVER}.name", "gitmail record merge rules")
    _git("--git-dir", git_dir, "config", f"merge.{MERGE_DRIVER}.driver", driver_command())
    # Records never move between paths, so rename detection could only pair
    # unrelated files; gitmail's own merge never does it.
    _git("--git-dir", git_dir, "config", "merge.renames", "false")


class ArchiveHooks(TypedDict):
    hooks: HookFiles
    merge_driver: str
    gitattributes_commit: str | None


class HubHooks(TypedDict):
    hub: str
    hooks: HookFiles


def ensure_gitattributes(archive: Archive) -> str | None:
    """Commit the archive's ``.gitattributes`` if it is missing or different; the new commit, if any."""
    if archive.tip() is None:
        return None

    def fn(snapshot):
        change = Change("Name the gitmail merge driver for record files")
        if snapshot.read(GITATTRIBUTES_PATH) != GITATTRIBUTES:
            change.put(GITATTRIBUTES_PATH, GITATTRIBUTES)
        return change

    return archive.transact(fn).commit


def install_archive(archive: Archive, checkout_dir: str | None = None) -> ArchiveHooks:
    """Hooks and merge driver for one archive (and its checkout, if there is one)."""
    hooks = install_archive_hooks(archive.git_dir)
    register_merge_driver(archive.git_dir)
    if checkout_dir and os.path.isdir(os.path.join(checkout_dir, ".git")):
        register_merge_driver(os.path.join(checkout_dir, ".git"))
    commit = ensure_gitattributes(archive)
    return {"hooks": hooks, "merge_driver": driver_command(), "gitattributes_commit": commit}


def install_clone(path: str) -> dict[str, str]:
    """The merge driver for a human's clone of an archive."""
    git_dir = os.path.join(path, ".git") if os.path.isdir(os.path.join(path, ".git")) else path
    if not os.path.exists(os.path.join(git_dir, "HEAD")):
        raise GitmailError(NOT_FOUND, f"{path} is not a git repository; pass the folder of a clone", {"path": path})
    register_merge_driver(git_dir)
    return {"repo": path, "merge_driver": driver_command()}


def install_hub(path: str) -> HubHooks:
    """The pre-receive check and fast-forward-only pushes for a bare hub repository."""
    if not os.path.exists(os.path.join(path, "HEAD")):
        raise GitmailError(NOT_FOUND, f"{path} is not a bare git repository; create it with "
                           "`git init --bare --initial-branch=main PATH`", {"path": path})
    hooks = install_hooks(path, "hub", HUB_MARK)
    _git("--git-dir", path, "config", "receive.denyNonFastForwards", "true")
    _git("--git-dir", path, "config", "receive.denyDeletes", "true")
    return {"hub": path, "hooks": hooks}
