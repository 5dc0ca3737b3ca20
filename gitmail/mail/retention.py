"""Retention: removing old messages from the tip of the archive.

A purge deletes each old message's canonical file, inbox and outbox copies
and receipts in one commit and leaves a tombstone per message, so replies
that point at it stay valid and a sync does not bring it back. Git history
still holds every purged message; the result says so. Idempotency key folders
older than the honoured window are dropped in the same commit.
"""

from __future__ import annotations

import dataclasses
import datetime as dt

from gitmail.coord.context import Context
from gitmail.coord.lookup import agent_names
from gitmail.index import indexer_for
from gitmail.model.clock import format_ts
from gitmail.model.errors import invalid
from gitmail.model.ids import first_id_at, id_time, is_id
from gitmail.model.records import IDEMPOTENCY, MESSAGES, Message, agent_folder, message_path
from gitmail.model.results import Result, result
from gitmail.storage.engine import Change
from gitmail.storage.snapshot import Snapshot

from .delivery import remove_message
from .idempotency import HONOURED_DAYS

DEFAULT_MAX_AGE_DAYS = 180
MAX_LISTED = 100


def _expired_key_files(snap: Snapshot, floor_day: str) -> list[str]:
    """Idempotency key files in day folders before ``floor_day`` (``YYYY/MM/DD``); later days are not visited."""
    stale: list[str] = []
    for name in agent_names(snap):
        folder = agent_folder(name, IDEMPOTENCY)
        for shard in snap.day_shards_until(folder, floor_day):
            if shard < floor_day:
                stale.extend(snap.walk(f"{folder}/{shard}"))
    return stale


def _candidates(ctx: Context, project_key: str, snap: Snapshot, cutoff: dt.datetime) -> list[str]:
    """IDs of the messages older than ``cutoff`` that ``snap`` may hold, oldest first.

    Asked of the index at exactly the snapshot's commit (IDs sort by time, so
    this costs what is purged, not the archive), plus messages the edits
    queued ahead in the same group commit add; the caller loads each from
    the snapshot, which drops any it does not hold.
    """
    below = first_id_at(cutoff + dt.timedelta(milliseconds=1))
    found = set(indexer_for(ctx.store).project(project_key).message_ids_below(below, commit=snap.commit))
    for path, data in snap.pending_edits(MESSAGES).items():
        stem = path.rsplit("/", 1)[-1].rsplit(".", 1)[0]
        if data is not None and is_id(stem) and stem < below:
            found.add(stem)
    return sorted(mid for mid in found if id_time(mid) < cutoff)


@result
class PurgeReport(Result):
    """What a retention purge removed (or, dry, would remove) from the tip, and the commit that did it."""

    purged: int
    message_ids: list[str]
    expired_keys_removed: int
    cutoff_ts: str
    dry_run: bool
    note: str
    commit: str | None = None


def purge_old_messages(ctx: Context, project_key: str, *, max_age_days: int = DEFAULT_MAX_AGE_DAYS,
                       dry_run: bool = False) -> PurgeReport:
    """Remove messages older than ``max_age_days`` from the tip (history keeps them)."""
    if not isinstance(max_age_days, int) or isinstance(max_age_days, bool) or max_age_days < 1:
        raise invalid("max_age_days must be a whole number of days, at least 1", field="max_age_days")
    archive = ctx.archive(project_key)
    cutoff = ctx.clock.now() - dt.timedelta(days=max_age_days)
    cutoff_ts = format_ts(cutoff)
    key_floor = (ctx.clock.now() - dt.timedelta(days=HONOURED_DAYS)).strftime("%Y/%m/%d")
    stamp, hlc = ctx.clock.now_ts(), ctx.tick()

    def fn(snap: Snapshot) -> Change:
        change = Change("")
        purged = []
        for message_id in _candidates(ctx, project_key, snap, cutoff):
            message = snap.load(message_path(message_id), Message)
            if message is None:
                continue
            purged.append(message_id)
            if not dry_run:
                remove_message(snap, change, message, reason="retention", stamp=stamp, hlc=hlc)
        stale_keys = _expired_key_files(snap, key_floor)
        if not dry_run:
            for path in stale_keys:
                change.delete(path)
            if change.edits:
                change.message = (f"Purge {len(purged)} message(s) older than {max_age_days} days "
                                  "(tombstones kept; git history keeps the content)")
        change.result = PurgeReport(
            purged=len(purged), message_ids=sorted(purged)[:MAX_LISTED], expired_keys_removed=len(stale_keys),
            cutoff_ts=cutoff_ts, dry_run=bool(dry_run),
            note="purged messages are gone from the current tree but remain in git history "
                 "(git log -p shows them); a tombstone records each removal")
        return change

    committed = archive.transact(fn)
    return dataclasses.replace(committed.result, commit=committed.commit)
