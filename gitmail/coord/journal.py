"""Journals: dated notes an agent leaves for the next session that drives it.

Each entry is one add-only Markdown file under
``agents/<Name>/journal/YYYY/MM/DD/<id>.md``. ``take_seat`` hands the end of the
journal to the session taking the seat, so whoever carries on first reads what
was decided and why.
"""

from __future__ import annotations

from collections.abc import Iterable

from gitmail.model.errors import invalid
from gitmail.model.names import check_agent_name
from gitmail.model.records import JOURNAL, JournalEntry, agent_folder
from gitmail.model.results import Result, result
from gitmail.storage.engine import Change
from gitmail.storage.snapshot import Snapshot

from .acting import require_actor
from .context import Context
from .hierarchy import require_role
from .lookup import require_agent

MAX_ENTRY = 20000


@result
class JournalView(Result):
    """One journal entry as callers see it."""

    id: str
    agent: str
    created: str
    entry: str
    path: str


@result
class JournalPage(Result):
    """The end of an agent's journal, oldest first."""

    agent: str
    entries: list[JournalView]


def _view(entry: JournalEntry) -> JournalView:
    return JournalView(id=entry.id, agent=entry.agent, created=entry.created_ts, entry=entry.body, path=entry.path())


def append(ctx: Context, project_key: str, agent: str, entry: str, *, seat: str | None = None) -> JournalView:
    """Append one entry to ``agent``'s journal; the agent must be able to act."""
    check_agent_name(agent, "agent_name")
    if not isinstance(entry, str) or not entry.strip():
        raise invalid("entry must be non-empty text: what was decided and why, or what the next session must know",
                      field="entry")
    if len(entry) > MAX_ENTRY:
        raise invalid(f"entry is longer than {MAX_ENTRY} characters; split it or link to a file", field="entry")
    entry_id, created = ctx.clock.new_id(), ctx.clock.now_ts()
    archive = ctx.archive(project_key)

    def fn(snap: Snapshot) -> Change:
        actor = require_actor(snap, agent, seat, at=ctx.clock.now())
        require_role(snap, actor, "editor", "write its journal")
        name = actor.name
        record = JournalEntry(id=entry_id, agent=name, created_ts=created, body=entry.strip() + "\n")
        first_line = entry.strip().splitlines()[0][:72]
        return Change(f"{name} journal: {first_line}", author=name, result=_view(record)).put_record(record)

    result: JournalView = archive.transact(fn).result
    ctx.touch(project_key, result.agent)
    return result


def tail(snapshot: Snapshot, agent: str, limit: int = 5) -> list[JournalView]:
    """The last ``limit`` entries of ``agent``'s journal, oldest first (newest last).

    Walks the day folders from the newest, so the cost follows ``limit``, not
    the length of the journal.
    """
    if limit <= 0:
        return []
    found: list[str] = []
    for _, path in snapshot.day_files(agent_folder(agent, JOURNAL)):
        found.append(path)
        if len(found) == limit:
            break
    return _views(snapshot, reversed(found))


def _views(snapshot: Snapshot, paths: Iterable[str]) -> list[JournalView]:
    return [_view(entry) for path in paths if (entry := snapshot.load(path, JournalEntry)) is not None]


def read(ctx: Context, project_key: str, agent: str, *, limit: int = 20, observe: bool = False) -> JournalPage:
    """The end of ``agent``'s journal (read only).

    Read as the agent, it counts as the agent's activity; ``observe`` reads
    it as an onlooker (the overseer), which does not.
    """
    check_agent_name(agent, "agent_name")
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= 1000:
        raise invalid("limit must be a whole number from 1 to 1000", field="limit")
    snap = ctx.archive(project_key).snapshot()
    agent = require_agent(snap, agent).name
    if not observe:
        ctx.touch(project_key, agent)
    return JournalPage(agent=agent, entries=tail(snap, agent, limit))
