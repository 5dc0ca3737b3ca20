"""The git remotes a project's archive syncs with, and the refs a sync keeps for each.

A remote is plain git configuration in the archive (``git remote add``), so a
human's ``git remote -v`` shows the same list. For each remote the archive
keeps the last fetched ``main`` under ``refs/remotes/<remote>/main`` and every
machine's own ref (``refs/gitmail/nodes/<node>`` on the remote) under
``refs/remotes/<remote>/nodes/``; :mod:`gitmail.sync.syncer` fetches, merges
and pushes through them with the system ``git`` that :func:`git` runs.
"""

from __future__ import annotations

import os
import re
import subprocess

from gitmail.model.errors import ALREADY_EXISTS, NOT_FOUND, SYNC_FAILED, GitmailError, invalid
from gitmail.model.results import Result, result
from gitmail.storage.store import Store

NODE_REFS = "refs/gitmail/nodes"
_REMOTE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


def tracking_ref(remote: str) -> str:
    """Where the last fetched tip of ``remote``'s main is kept in the local archive."""
    return f"refs/remotes/{remote}/main"


def node_ref(node: str) -> str:
    """The ref on a remote that only machine ``node`` pushes to."""
    return f"{NODE_REFS}/{node}"


def tracking_nodes(remote: str) -> str:
    """Where the fetched machine refs of ``remote`` are kept in the local archive."""
    return f"refs/remotes/{remote}/nodes"


def git_env() -> dict[str, str]:
    """The environment every git run that may reach a remote gets: the caller's, never a prompt, git's own words.

    A repository that joined with a window fetches what it lacks from its
    hub by itself (git's promisor remote), from any git command that reads
    it: such a command must reach the hub as a fetch does.
    """
    return dict(os.environ, GIT_TERMINAL_PROMPT="0", LC_ALL="C")


def git(git_dir: str, *args: str, check: bool = True, timeout: float = 300,
        stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run the system git on a repository; SYNC_FAILED (with git's own words) if it fails and ``check``."""
    proc = subprocess.run(["git", "--git-dir", git_dir, *args], capture_output=True, text=True, env=git_env(),
                          timeout=timeout, input=stdin)
    if check and proc.returncode != 0:
        raise GitmailError(SYNC_FAILED, f"git {args[0]} failed: {proc.stderr.strip() or proc.stdout.strip()}; "
                           "check the remote's URL and your access to it, then sync again",
                           {"command": ["git", *args], "exit_code": proc.returncode})
    return proc


def git_output(git_dir: str, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[bytes]:
    """Run the system git on a repository as :func:`git` does, for a listing read as bytes; the caller checks it."""
    return subprocess.run(["git", "--git-dir", git_dir, *args], capture_output=True, env=git_env(), timeout=timeout,
                          check=False)


def add_remote(store: Store, project: str, name: str, url: str) -> dict[str, str]:
    """Name a remote for a project; the project's archive is created if this machine has none yet."""
    if not isinstance(name, str) or not _REMOTE_NAME.match(name):
        raise invalid(f"remote name {name!r} must be letters, digits, '.', '_' or '-'", field="name")
    if not isinstance(url, str) or not url.strip() or url.startswith("-"):
        raise invalid("the remote URL must be a git URL or path", field="url")
    archive = store.archive(project, create=True)
    if name in list_remotes(store, project):
        raise GitmailError(ALREADY_EXISTS,
                           f"project already has a remote named {name!r}; remove it first or pick another name",
                           {"remote": name})
    git(archive.git_dir, "remote", "add", name, url)
    return {"project": store.resolve(project), "remote": name, "url": url}


def remove_remote(store: Store, project: str, name: str) -> None:
    archive = store.archive(project)
    if name not in list_remotes(store, project):
        raise GitmailError(NOT_FOUND, f"project has no remote named {name!r}; `gitmail remote list PROJECT` shows them",
                           {"remote": name})
    git(archive.git_dir, "remote", "remove", name)


def list_remotes(store: Store, project: str) -> dict[str, str]:
    """Remote name -> URL for a project."""
    archive = store.archive(project)
    config = archive.repo.config
    remotes: dict[str, str] = {}
    for entry in config:
        match = re.match(r"^remote\.(.+)\.url$", entry.name)
        if match and entry.value is not None:
            remotes[match.group(1)] = entry.value
    return dict(sorted(remotes.items()))


@result
class RemoteList(Result):
    """A project's remotes: name -> URL."""

    remotes: dict[str, str]


def remote_list(store: Store, project: str) -> RemoteList:
    """:func:`list_remotes` as a result."""
    return RemoteList(remotes=list_remotes(store, project))


def projects_with_remotes(store: Store) -> list[str]:
    """Slugs of the projects that have at least one remote."""
    return [slug for slug in store.slugs() if list_remotes(store, slug)]
