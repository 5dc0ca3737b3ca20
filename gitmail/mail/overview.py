"""What an overseer looks at: project figures, threads, an agent's counts, and the history of records.

Every read here is answered by the project's index (its tables of messages,
copies and receipts, and its derived history), so a page costs the same at
ten thousand messages as at ten. Nothing here counts as an agent's activity.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any

from gitmail.coord.context import Context
from gitmail.coord.lookup import require_agent
from gitmail.index import indexer_for
from gitmail.model.records import (
    layout_forms,
    message_files,
    message_path,
    profile_path,
    reservation_path,
    seat_path,
)
from gitmail.model.results import Result, result
from gitmail.storage.snapshot import blob_data

from .mailbox import check_message_id, load_message

MAX_DIFF_LINES = 400


@result
class ProjectStats(Result):
    """A project's message and thread counts and the time of its latest message."""

    messages: int
    threads: int
    last_message_ts: str | None


@result
class ThreadRow(Result):
    """A thread by its latest message: its size, first and last times, first subject and last sender."""

    thread_id: str
    count: int
    last_ts: str
    first_ts: str
    subject: str
    last_from: str | None


@result
class FileChange(Result):
    """One file a commit changed: its blobs before and after, and the unified diff (cut at MAX_DIFF_LINES)."""

    path: str
    old_blob: str | None
    new_blob: str | None
    diff: list[str]
    truncated: bool


@result
class HistoryCommit(Result):
    """A commit that changed the files asked about: who, when (epoch seconds), its summary and those files."""

    commit: str
    author: str
    email: str
    time: int
    summary: str
    files: list[FileChange]


def stats(ctx: Context, project_key: str) -> ProjectStats:
    """Message and thread counts and the latest message time of a project."""
    found = indexer_for(ctx.store).project(project_key).stats()
    return ProjectStats(messages=found["messages"], threads=found["threads"], last_message_ts=found["last_message_ts"])


def recent_threads(ctx: Context, project_key: str, *, limit: int = 50, offset: int = 0) -> list[ThreadRow]:
    """Threads by their latest message, newest first."""
    return [ThreadRow(**row) for row in
            indexer_for(ctx.store).project(project_key).recent_threads(limit=limit, offset=offset)]


def agent_counts(ctx: Context, project_key: str, agent_name: str) -> dict[str, int]:
    """An agent's received, unread, unacknowledged and sent counts."""
    return indexer_for(ctx.store).project(project_key).agent_counts(agent_name)


def record_paths(ctx: Context, project_key: str, kind: str, key: str) -> list[str]:
    """The files whose history tells the story of one record.

    ``kind`` is ``message`` (its canonical file, every copy and every
    receipt), ``thread`` (the canonical file of each of its messages),
    ``agent`` (the profile and the seat) or ``reservation``.
    """
    snap = ctx.archive(project_key).snapshot()
    if kind == "message":
        message = load_message(snap, check_message_id(key))
        agents = dict.fromkeys([message.sender, *message.to, *message.cc])
        return message_files(message.id, agents)
    if kind == "thread":
        found = indexer_for(ctx.store).project(project_key).thread(key, include_bodies=False)
        return [message_path(m["id"]) for m in found]
    if kind == "agent":
        name = require_agent(snap, key).name
        return [profile_path(name), seat_path(name)]
    if kind == "reservation":
        return [reservation_path(check_message_id(key, "reservation_id"))]
    raise ValueError(f"unknown record kind {kind!r}")


def history(ctx: Context, project_key: str, paths: list[str], *, limit: int = 100,
            offset: int = 0) -> list[HistoryCommit]:
    """The commits that changed ``paths``, newest first from the ``offset``-th, each file with its unified diff."""
    archive = ctx.archive(project_key)
    forms = [form for path in paths for form in layout_forms(path)]  # a record keeps its history across layouts
    found = indexer_for(ctx.store).project(project_key).file_history(forms, offset + limit)[offset:]
    repo = archive.repo
    return [HistoryCommit(commit=commit["commit"], author=commit["author"], email=commit["email"],
                          time=commit["time"], summary=commit["summary"],
                          files=[_diffed(repo, change) for change in commit["files"]]) for commit in found]


def _diffed(repo: Any, change: Mapping[str, Any]) -> FileChange:
    """One changed file of a commit, with its unified diff."""
    old = _text(repo, change["old_blob"])
    new = _text(repo, change["new_blob"])
    lines = list(difflib.unified_diff(old.splitlines(), new.splitlines(), f"a/{change['path']}",
                                      f"b/{change['path']}", lineterm=""))
    return FileChange(path=change["path"], old_blob=change["old_blob"], new_blob=change["new_blob"],
                      diff=lines[:MAX_DIFF_LINES], truncated=len(lines) > MAX_DIFF_LINES)


def _text(repo: Any, blob: str | None) -> str:
    if blob is None:
        return ""
    try:
        return blob_data(repo, blob).decode("utf-8", "replace")
    except KeyError:
        return ""
