"""How each remote of a project is syncing: the state agents, the CLI and the web view read.

Every sync of a project with a remote notes here when it started, when it
last succeeded, the error that ended it if it failed, and what it moved;
whoever syncs (``gitmail sync``, the server's interval syncer, the
``sync_project`` tool) writes the same record. It lives in the archive's
git folder (``gitmail-sync.json``, beside the remotes' configuration) and
is replaced atomically under a lock, so concurrent syncs from several
processes never tear it. It is an observation, not data: deleting it loses
only the history of attempts.

:func:`remote_states` reads it back for one project and adds what the refs
say now: how many commits the local ``main`` is ahead of and behind the
remote's ``main`` as last fetched, and how many refused changes are kept
aside in the remote's quarantine ref.
"""

from __future__ import annotations

import fcntl
import json
import os
from dataclasses import field
from typing import Any

from gitmail.model.results import Result, result
from gitmail.storage.engine import Archive
from gitmail.storage.store import Store

from .quarantine import read_quarantine
from .remotes import list_remotes, projects_with_remotes, tracking_ref

STATE_FILE = "gitmail-sync.json"
_LOCK_FILE = "gitmail-sync.lock"


@result
class RemoteState(Result):
    """The sync state of one remote of one project.

    ``state`` sums it up: ``never`` (no sync yet), ``syncing`` (an attempt
    started after the last one ended), ``failing`` (the last attempt
    failed), ``attention`` (it synced, with conflicts or refused changes to
    look at) or ``ok``.
    """

    project: str
    remote: str
    url: str
    state: str
    last_attempt: str | None = None
    last_success: str | None = None
    last_error: dict[str, Any] | None = None
    last_result: dict[str, Any] | None = None
    ahead: int | None = None  # commits on the local main that the remote's main (as last fetched) lacks
    behind: int | None = None  # commits on the remote's main (as last fetched) that the local main lacks
    quarantined: int = 0  # refused changes from this remote kept aside

    def to_dict(self) -> dict[str, Any]:
        """A changeable copy of the state's JSON object (for a face that leaves a part out)."""
        return self.wire()


@result
class RemoteStates(Result):
    """The sync state of each remote of a project."""

    remotes: list[RemoteState] = field(default_factory=list)


def _paths(archive: Archive) -> tuple[str, str]:
    return os.path.join(archive.git_dir, STATE_FILE), os.path.join(archive.git_dir, _LOCK_FILE)


def _read(path: str) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (FileNotFoundError, json.JSONDecodeError):
        return {}
    return data if isinstance(data, dict) else {}


def _entry(data: dict[str, Any], remote: str) -> dict[str, Any]:
    entry = data.get(remote)
    return dict(entry) if isinstance(entry, dict) else {}


def _update(archive: Archive, remote: str, **values: Any) -> None:
    path, lock_path = _paths(archive)
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        data = _read(path)
        entry = _entry(data, remote)
        entry.update(values)
        data[remote] = entry
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as handle:
            json.dump(data, handle, indent=1, sort_keys=True)
        os.replace(tmp, path)
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def record_attempt(archive: Archive, remote: str, at: str) -> None:
    """Note that a sync with ``remote`` starts now."""
    _update(archive, remote, last_attempt=at, running=True)


def record_outcome(archive: Archive, remote: str, at: str, *, error: dict[str, Any] | None,
                   result: dict[str, Any]) -> None:
    """Note how the sync with ``remote`` ended: ``error`` (code and message) if it failed."""
    if error is not None:
        _update(archive, remote, running=False, last_error={**error, "at": at}, last_result=result)
    else:
        _update(archive, remote, running=False, last_success=at, last_error=None, last_result=result)


def remote_states(store: Store, project: str) -> list[RemoteState]:
    """The sync state of each remote of a project, by remote name."""
    archive = store.archive(project)
    slug = store.resolve(project)
    recorded = _read(_paths(archive)[0])
    repo = archive.repo
    tip = archive.tip()
    out = []
    for remote, url in list_remotes(store, project).items():
        entry = _entry(recorded, remote)
        ahead = behind = None
        fetched = repo.references.get(tracking_ref(remote))
        if tip is not None and fetched is not None:
            ahead, behind = repo.ahead_behind(tip, fetched.target)
        quarantined = len(read_quarantine(archive, remote))
        out.append(RemoteState(project=slug, remote=remote, url=url, state=_summary(entry, quarantined),
                               last_attempt=entry.get("last_attempt"), last_success=entry.get("last_success"),
                               last_error=entry.get("last_error"), last_result=entry.get("last_result"),
                               ahead=ahead, behind=behind, quarantined=quarantined))
    return out


def _summary(entry: dict[str, Any], quarantined: int) -> str:
    if not entry.get("last_attempt"):
        return "never"
    if entry.get("running"):
        return "syncing"
    if entry.get("last_error"):
        return "failing"
    result = entry.get("last_result") or {}
    if quarantined or result.get("conflicts") or result.get("overlaps"):
        return "attention"
    return "ok"


def store_states(store: Store) -> list[RemoteState]:
    """The sync state of every remote of every project that has one."""
    return [state for slug in projects_with_remotes(store) for state in remote_states(store, slug)]
