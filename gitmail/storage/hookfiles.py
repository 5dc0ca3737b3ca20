"""Putting gitmail's hook scripts (package data ``gitmail.hooks``) into a repository.

An archive gets the scripts of ``hooks/archive`` when it is created (and,
for archives made before a script existed, the next time it is opened):
``pre-receive`` runs the record checker on every push into the archive,
the others poke the watcher after git itself moved a ref. A hub gets
``hooks/hub`` through ``gitmail hooks install --hub``. Each script names the
interpreter that installed it and runs it isolated (``python -I``), so the
environment of whoever pushes cannot swap the check for something else.

A hook already in place that gitmail did not write is left alone and
reported; gitmail's own scripts (recognised by their mark) are replaced.
"""

from __future__ import annotations

import os
import stat
import sys
from importlib import resources
from typing import TypedDict

ARCHIVE_MARK = "gitmail-archive-hook"
HUB_MARK = "gitmail-hub-hook"
RECEIVE_HOOK = "pre-receive"


class HookFiles(TypedDict):
    """Hooks written by gitmail, and hooks of someone else's left in place."""

    installed: list[str]
    kept: list[str]


def _template(folder: str, name: str) -> str:
    return (resources.files("gitmail.hooks") / folder / name).read_text(encoding="utf-8")


def _names(folder: str) -> list[str]:
    return sorted(entry.name for entry in (resources.files("gitmail.hooks") / folder).iterdir()
                  if entry.is_file() and not entry.name.startswith((".", "_")))


def install_hooks(git_dir: str, folder: str, mark: str) -> HookFiles:
    """Write every script of ``hooks/<folder>`` into ``git_dir/hooks``, keeping foreign hooks."""
    hooks_dir = os.path.join(git_dir, "hooks")
    os.makedirs(hooks_dir, exist_ok=True)
    done: HookFiles = {"installed": [], "kept": []}
    for name in _names(folder):
        target = os.path.join(hooks_dir, name)
        if os.path.exists(target):
            with open(target, encoding="utf-8", errors="replace") as handle:
                if mark not in handle.read():
                    done["kept"].append(name)  # somebody else's hook: leave it alone
                    continue
        text = _template(folder, name).replace("@PYTHON@", sys.executable)
        tmp = f"{target}.gitmail-tmp-{os.getpid()}"
        with open(tmp, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(tmp, os.stat(tmp).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        os.replace(tmp, target)
        done["installed"].append(name)
    return done


def install_archive_hooks(git_dir: str) -> HookFiles:
    """The archive's hooks: the record check on pushes into it, and the watcher's pokes."""
    return install_hooks(git_dir, "archive", ARCHIVE_MARK)


def ensure_archive_hooks(git_dir: str) -> None:
    """Install the archive's hooks if one of gitmail's is missing or older (an archive made by an earlier gitmail)."""
    if any(_outdated(git_dir, "archive", name) for name in _names("archive")):
        install_archive_hooks(git_dir)


def _outdated(git_dir: str, folder: str, name: str) -> bool:
    """Whether gitmail's hook ``name`` is missing in ``git_dir`` or lacks a line of today's script.

    Lines naming the interpreter are left out of the comparison: whichever
    Python opened the archive last, the script is the same.
    """
    try:
        with open(os.path.join(git_dir, "hooks", name), encoding="utf-8", errors="replace") as handle:
            lines = set(handle.read().splitlines())
    except FileNotFoundError:
        return True
    if not any(ARCHIVE_MARK in line or HUB_MARK in line for line in lines):
        return False  # somebody else's hook: never ours to replace
    return any(line not in lines for line in _template(folder, name).splitlines() if "@PYTHON@" not in line)
