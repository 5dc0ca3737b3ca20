"""File reservations: advisory leases on paths of a code repository.

An agent reserves paths or globs (see :mod:`gitmail.coord.globs`) for a while,
exclusively or shared, so other agents know what it is editing. A request
conflicts with the active *exclusive* reservations of other agents whose
patterns overlap it; conflicting paths are refused and reported with their
holders, the rest are granted. Check and grant happen in one transaction, so
when two processes race for one exclusive pattern exactly one wins.

Each reservation is a record ``reservations/YYYY/MM/DD/<id>.yaml``. A release
sets ``released_ts`` and keeps the file for audit; a released reservation is
never active again. Expiry is exact: a reservation is active while the current
time is before ``expires_ts``.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
import subprocess
from collections.abc import Iterable
from dataclasses import field

from gitmail.index import indexer_for
from gitmail.model.clock import format_ts, parse_ts
from gitmail.model.errors import NOT_FOUND, RESERVATION_NOT_STALE, GitmailError, invalid
from gitmail.model.ids import id_time, is_id
from gitmail.model.limits import DEFAULT_INACTIVITY, DEFAULT_TTL, MAX_TTL, MIN_INACTIVITY, MIN_TTL
from gitmail.model.names import check_agent_name
from gitmail.model.records import (
    JOURNAL,
    OUTBOX,
    PROJECT_PATH,
    Message,
    Project,
    Reservation,
    Seat,
    agent_folder,
    inbox_path,
    message_path,
    outbox_path,
    reservation_path,
    seat_path,
)
from gitmail.model.results import OMIT_NONE, Result, result
from gitmail.storage.engine import Change
from gitmail.storage.snapshot import Snapshot

from .acting import require_actor
from .context import Context
from .globs import covers, normalize, overlaps
from .hierarchy import require_paths
from .loads import FolderHint, folder_hints
from .lookup import require_agent

MAX_PATHS = 200
_WORKSPACE_SCAN_LIMIT = 5000


@result
class Grant(Result):
    """A reservation just granted (so not released)."""

    id: str
    agent: str
    path_pattern: str
    exclusive: bool
    reason: str
    created_ts: str
    expires_ts: str


@result
class ReservationView(Grant):
    """A reservation as the tools list it, with its release time once released."""

    released_ts: str | None


@result
class Conflict(Result):
    """A path refused (or a file guarded) because other agents hold it exclusively."""

    path: str
    holders: list[ReservationView]


@result
class Reserved(Result):
    """What a reservation request got: the patterns granted and the ones refused with their holders.

    ``folder_hints`` names the memory files and skills of the folders the
    granted patterns touch (:func:`.loads.folder_hints`), when there are any.
    """

    granted: list[Grant]
    conflicts: list[Conflict]
    folder_hints: list[FolderHint] | None = field(default=None, metadata=OMIT_NONE)


@result
class Released(Result):
    """The reservations a release ended (none when nothing of the caller's matched)."""

    released: int
    released_at: str
    file_reservation_ids: list[str]


@result
class NothingReleased(Result):
    """A reservation cycle that had nothing granted to release."""

    released: int = 0
    released_at: str | None = None


@result
class ReservationCycle(Result):
    """A reservation request and, when asked for, the release of what it granted."""

    file_reservations: Reserved
    released: Released | NothingReleased | None


@result
class Renewed(Result):
    """One reservation extended: its expiry before and after."""

    id: str
    path_pattern: str
    old_expires_ts: str
    new_expires_ts: str


@result
class Renewal(Result):
    """The reservations a renewal extended; the tool adds the extension it applied, and why when it raised it."""

    renewed: int
    file_reservations: list[Renewed]
    extend_seconds: int | None = field(default=None, metadata=OMIT_NONE)
    note: str | None = field(default=None, metadata=OMIT_NONE)


@result
class ReservationList(Result):
    """Reservations of a project or an agent, oldest first."""

    file_reservations: list[ReservationView]


@result
class Staleness(Result):
    """Why a force release was allowed: expiry, or how long the holder showed no activity, and its last sign."""

    expired: bool
    inactivity_seconds: int
    last_activity: str | None
    last_signal: str | None


@result
class ForceRelease(Result):
    """A force release: the reservation, why it was found abandoned, and the notice sent to its holder.

    Releasing one already released changes nothing and says since when.
    """

    released: bool
    already_released_ts: str | None = field(default=None, metadata=OMIT_NONE)
    reservation: ReservationView
    heuristics: Staleness | None = field(default=None, metadata=OMIT_NONE)
    notified: str | None


def view(record: Reservation) -> ReservationView:
    """A reservation as tools return it."""
    return ReservationView(id=record.id, agent=record.agent, path_pattern=record.path_pattern,
                           exclusive=record.exclusive, reason=record.reason, created_ts=record.created_ts,
                           expires_ts=record.expires_ts, released_ts=record.released_ts)


def _seconds(value: object, field: str, low: int, high: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise invalid(f"{field} must be a whole number of seconds from {low} to {high}; got {value!r}", field=field)
    return value


def _patterns(paths: object, field: str = "paths", *, required: bool = True) -> list[str]:
    if paths is None and not required:
        return []
    if isinstance(paths, str) or not isinstance(paths, list) or (required and not paths):
        raise invalid(f"{field} must be a list of paths or globs relative to the repository root, "
                      "such as ['src/api/*.py', 'docs/']", field=field)
    if len(paths) > MAX_PATHS:
        raise invalid(f"{field}: at most {MAX_PATHS} patterns per call", field=field)
    out: list[str] = []
    for item in paths:
        pattern = normalize(item, field)
        if pattern not in out:
            out.append(pattern)
    return out


def _ids(ids: object) -> list[str]:
    if ids is None:
        return []
    if isinstance(ids, str) or not isinstance(ids, list):
        raise invalid("file_reservation_ids must be a list of reservation IDs", field="file_reservation_ids")
    if len(ids) > MAX_PATHS:
        raise invalid(f"file_reservation_ids: at most {MAX_PATHS} IDs per call", field="file_reservation_ids")
    for item in ids:
        if not is_id(item):
            raise invalid(f"file_reservation_ids: {item!r} is not a reservation ID (23 characters, as returned "
                          "by file_reservation_paths)", field="file_reservation_ids")
    return list(ids)


def active(ctx: Context, project_key: str, snapshot: Snapshot, at: dt.datetime, *, held_by: str | None = None,
           blocking: str | None = None) -> list[Reservation]:
    """The reservations in force at ``at`` in what ``snapshot`` sees, queued group-commit edits included.

    ``held_by``: only that agent's; ``blocking``: only the exclusive ones of
    the other agents. Served by the project's index
    (:meth:`gitmail.index.ProjectIndex.active_reservations`), so the cost
    grows with neither the reservation history nor, for those two, the
    reservations the caller does not ask about.
    """
    return indexer_for(ctx.store).project(project_key).active_reservations(snapshot, at, held_by=held_by,
                                                                          blocking=blocking)


def reserve(ctx: Context, project_key: str, agent: str, paths: list[str], *, ttl_seconds: int = DEFAULT_TTL,
            exclusive: bool = True, reason: str = "", seat: str | None = None) -> Reserved:
    """Grant what does not conflict; the rest is refused with the reservations it conflicts with."""
    check_agent_name(agent, "agent_name")
    patterns = _patterns(paths)
    ttl = _seconds(ttl_seconds, "ttl_seconds", MIN_TTL, MAX_TTL)
    if not isinstance(exclusive, bool):
        raise invalid("exclusive must be true or false", field="exclusive")
    if not isinstance(reason, str) or len(reason) > 4096:
        raise invalid("reason must be text of at most 4096 characters", field="reason")
    archive = ctx.archive(project_key)
    ids = [ctx.clock.new_id() for _ in patterns]
    hlc = ctx.clock.tick()
    at = ctx.clock.now()
    created, expires = format_ts(at), format_ts(at + dt.timedelta(seconds=ttl))

    def fn(snap: Snapshot) -> Change:
        actor = require_actor(snap, agent, seat, at=at)
        require_paths(snap, actor, patterns, "reserve")  # a viewer reserves nothing; a location limits the paths
        me = actor.name
        blocking = active(ctx, project_key, snap, at, blocking=me)
        granted: list[Grant] = []
        conflicts: list[Conflict] = []
        change = Change("", author=me)
        for pattern, rid in zip(patterns, ids, strict=True):
            holders = [r for r in blocking if overlaps(pattern, r.path_pattern)]
            if holders:
                conflicts.append(Conflict(path=pattern, holders=[view(r) for r in holders]))
                continue
            record = Reservation(id=rid, agent=me, path_pattern=pattern, created_ts=created, expires_ts=expires,
                                 hlc=hlc, exclusive=exclusive, reason=reason)
            change.put_record(record)
            granted.append(Grant(id=rid, agent=me, path_pattern=pattern, exclusive=exclusive, reason=reason,
                                 created_ts=created, expires_ts=expires))
        kind = "exclusive" if exclusive else "shared"
        change.message = (f"{me} reserved {_listing(g.path_pattern for g in granted)} ({kind}, {ttl}s)"
                          if granted else f"{me} was refused {_listing(patterns)}")
        change.result = Reserved(granted=granted, conflicts=conflicts)
        return change

    result: Reserved = archive.transact(fn).result
    ctx.touch(project_key, agent)
    hints = folder_hints(archive.snapshot(), [g.path_pattern for g in result.granted])  # files read outside the lock
    return dataclasses.replace(result, folder_hints=hints) if hints else result


def _listing(patterns: Iterable[str]) -> str:
    items = list(patterns)
    text = ", ".join(items[:3])
    return text + (f" and {len(items) - 3} more" if len(items) > 3 else "")


def _select(records: list[Reservation], agent: str, ids: list[str], patterns: list[str]) -> list[Reservation]:
    mine = [r for r in records if r.agent.lower() == agent.lower()]
    if not ids and not patterns:
        return mine
    return [r for r in mine if r.id in ids or r.path_pattern in patterns]


def release(ctx: Context, project_key: str, agent: str, *, file_reservation_ids: list[str] | None = None,
            paths: list[str] | None = None, seat: str | None = None) -> Released:
    """Release ``agent``'s active reservations: by ids, by patterns, or all of them when neither is given.

    Releasing what is already released, expired or not the agent's is a no-op.
    """
    check_agent_name(agent, "agent_name")
    ids = _ids(file_reservation_ids)
    patterns = _patterns(paths, required=False)
    archive = ctx.archive(project_key)
    hlc = ctx.clock.tick()
    at = ctx.clock.now()
    released_at = format_ts(at)

    def fn(snap: Snapshot) -> Change:
        me = require_actor(snap, agent, seat, at=at).name
        chosen = _select(active(ctx, project_key, snap, at, held_by=me), me, ids, patterns)
        change = Change(f"{me} released {_listing(r.path_pattern for r in chosen)}", author=me)
        for record in chosen:
            change.put_record(dataclasses.replace(record, released_ts=released_at, hlc=hlc))
        change.result = Released(released=len(chosen), released_at=released_at,
                                 file_reservation_ids=[r.id for r in chosen])
        return change

    result = archive.transact(fn).result
    ctx.touch(project_key, agent)
    return result


def renew(ctx: Context, project_key: str, agent: str, *, extend_seconds: int = 1800,
          file_reservation_ids: list[str] | None = None, paths: list[str] | None = None,
          seat: str | None = None) -> Renewal:
    """Extend ``agent``'s active reservations from the later of now and their expiry; never shortens."""
    check_agent_name(agent, "agent_name")
    extend = _seconds(extend_seconds, "extend_seconds", MIN_TTL, MAX_TTL)
    ids = _ids(file_reservation_ids)
    patterns = _patterns(paths, required=False)
    archive = ctx.archive(project_key)
    hlc = ctx.clock.tick()
    at = ctx.clock.now()

    def fn(snap: Snapshot) -> Change:
        me = require_actor(snap, agent, seat, at=at).name
        chosen = _select(active(ctx, project_key, snap, at, held_by=me), me, ids, patterns)
        change = Change(f"{me} renewed {_listing(r.path_pattern for r in chosen)} by {extend}s", author=me)
        out = []
        for record in chosen:
            start = max(at, parse_ts(record.expires_ts))
            renewed = dataclasses.replace(record, expires_ts=format_ts(start + dt.timedelta(seconds=extend)), hlc=hlc)
            change.put_record(renewed)
            out.append(Renewed(id=record.id, path_pattern=record.path_pattern, old_expires_ts=record.expires_ts,
                               new_expires_ts=renewed.expires_ts))
        change.result = Renewal(renewed=len(out), file_reservations=out)
        return change

    result = archive.transact(fn).result
    ctx.touch(project_key, agent)
    return result


def list_reservations(ctx: Context, project_key: str, *, agent: str | None = None,
                      active_only: bool = True) -> ReservationList:
    """Reservations of the project (or of one agent): the active ones, or the whole history."""
    if agent is not None:
        check_agent_name(agent, "agent_name")
    snap = ctx.archive(project_key).snapshot()
    if active_only:
        records = active(ctx, project_key, snap, ctx.clock.now())
    else:
        records = indexer_for(ctx.store).project(project_key).reservations()
    chosen = sorted((r for r in records if agent is None or r.agent.lower() == agent.lower()), key=lambda r: r.id)
    return ReservationList(file_reservations=[view(r) for r in chosen])


def conflicts_for_paths(ctx: Context, project_key: str, paths: list[str], *,
                        agent: str | None) -> list[Conflict]:
    """For the files ``paths``, the active exclusive reservations of agents other than ``agent`` covering them."""
    snap = ctx.archive(project_key).snapshot()
    me = (agent or "").lower()
    blocking = active(ctx, project_key, snap, ctx.clock.now(), blocking=me)
    out = []
    for path in paths:
        holders = [r for r in blocking if covers(r.path_pattern, path)]
        if holders:
            out.append(Conflict(path=path, holders=[view(r) for r in holders]))
    return out


# -- force release of abandoned reservations ----------------------------------------------


def archive_activity(ctx: Context, project_key: str, snapshot: Snapshot, agent: str,
                     at: dt.datetime) -> list[tuple[str, dt.datetime]]:
    """The holder's latest activity visible in the archive, one time per kind of signal."""
    signals: list[tuple[str, dt.datetime]] = []
    profile = require_agent(snapshot, agent)
    signals.append(("profile updated", dt.datetime.fromtimestamp(profile.hlc.wall_ms / 1000, dt.UTC)))
    for kind, folder in (("message sent", OUTBOX), ("journal entry", JOURNAL)):
        newest = next(snapshot.day_files(agent_folder(agent, folder)), None)
        if newest is not None:
            signals.append((kind, id_time(newest[0])))
    seat = snapshot.load(seat_path(agent), Seat)
    if seat is not None and seat.released_at is None:
        signals.append(("seat taken or renewed", dt.datetime.fromtimestamp(seat.hlc.wall_ms / 1000, dt.UTC)))
    for record in active(ctx, project_key, snapshot, at, held_by=agent):
        if record.agent == agent:
            wall = dt.datetime.fromtimestamp(record.hlc.wall_ms / 1000, dt.UTC)
            signals.append(("reservation made or renewed", wall))
    return signals


def workspace_activity(workspace: str, pattern: str) -> list[tuple[str, dt.datetime]]:
    """Recent edits under ``pattern`` in the project's working folder: file times and git commits."""
    signals: list[tuple[str, dt.datetime]] = []
    prefix = []
    for part in pattern.split("/"):
        if any(ch in part for ch in "*?["):
            break
        prefix.append(part)
    base = os.path.join(workspace, *prefix)
    newest = 0.0
    seen = 0
    if os.path.isfile(base):
        newest = os.stat(base).st_mtime
    elif os.path.isdir(base):
        for root, dirs, files in os.walk(base):
            dirs[:] = [d for d in dirs if d != ".git"]
            for name in files:
                full = os.path.join(root, name)
                rel = os.path.relpath(full, workspace).replace(os.sep, "/")
                if covers(pattern, rel):
                    try:
                        newest = max(newest, os.stat(full).st_mtime)
                    except OSError:
                        continue
                seen += 1
                if seen >= _WORKSPACE_SCAN_LIMIT:
                    break
            if seen >= _WORKSPACE_SCAN_LIMIT:
                break
    if newest:
        signals.append(("file modified", dt.datetime.fromtimestamp(newest, dt.UTC)))
    if os.path.exists(os.path.join(workspace, ".git")):
        proc = subprocess.run(["git", "-C", workspace, "log", "-1", "--format=%ct", "--", "/".join(prefix) or "."],
                              capture_output=True, text=True)
        if proc.returncode == 0 and proc.stdout.strip().isdigit():
            signals.append(("git commit", dt.datetime.fromtimestamp(int(proc.stdout.strip()), dt.UTC)))
    return signals


def judge_stale(ctx: Context, project_key: str, snap: Snapshot, record: Reservation, at: dt.datetime, *,
                threshold: int, outside: list[tuple[str, dt.datetime]]
                ) -> tuple[bool, tuple[str, dt.datetime] | None, float | None]:
    """Whether ``record`` may be force-released at ``at``: (expired, latest activity, seconds idle).

    RESERVATION_NOT_STALE when it is in force and its holder's latest
    activity (in the archive, or ``outside`` it in the working folder) is
    more recent than ``threshold`` seconds.
    """
    expired = parse_ts(record.expires_ts) <= at
    signals = [] if expired else archive_activity(ctx, project_key, snap, record.agent, at) + outside
    latest = max(signals, key=lambda s: s[1]) if signals else None
    idle = (at - latest[1]).total_seconds() if latest else None
    if latest is not None and idle is not None and idle < threshold:
        raise GitmailError(RESERVATION_NOT_STALE, f"{record.agent} is still active ({latest[0]} {int(idle)}s ago, "
                           f"threshold {threshold}s); ask them to release {record.path_pattern} instead",
                           {"holder": record.agent, "signal": latest[0], "last_activity": format_ts(latest[1]),
                            "inactivity_seconds": threshold})
    return expired, latest, idle


def force_release(ctx: Context, project_key: str, agent: str, file_reservation_id: str, *, note: str = "",
                  notify_previous: bool = True, inactivity_seconds: int = DEFAULT_INACTIVITY,
                  seat: str | None = None) -> ForceRelease:
    """Release another agent's reservation that looks abandoned, and tell the holder.

    A reservation is abandoned when it has expired, or when its holder shows no
    activity for ``inactivity_seconds`` (at least 60): no message sent, journal
    entry, seat renewal, reservation made or renewed, profile change, and, when
    the project's working folder exists on this machine, no file under the
    pattern modified and no git commit touching it. Otherwise the call is
    refused with RESERVATION_NOT_STALE naming the most recent activity.
    """
    check_agent_name(agent, "agent_name")
    if not is_id(file_reservation_id):
        raise invalid(f"file_reservation_id {file_reservation_id!r} is not a reservation ID",
                      field="file_reservation_id")
    threshold = _seconds(inactivity_seconds, "inactivity_seconds", MIN_INACTIVITY, MAX_TTL)
    if not isinstance(note, str) or len(note) > 4096:
        raise invalid("note must be text of at most 4096 characters", field="note")
    archive = ctx.archive(project_key)
    path = reservation_path(file_reservation_id)
    outside: list[tuple[str, dt.datetime]] = []
    snap = archive.snapshot()
    current = snap.load(path, Reservation)
    project_record = snap.load(PROJECT_PATH, Project)
    if current is not None and project_record is not None and os.path.isdir(project_record.human_key):
        outside = workspace_activity(project_record.human_key, current.path_pattern)
    hlc = ctx.clock.tick()
    at = ctx.clock.now()
    message_id = ctx.clock.new_id()

    def fn(snap: Snapshot) -> Change:
        actor = require_actor(snap, agent, seat, at=at)
        me = actor.name
        record = snap.load(path, Reservation)
        if record is None:
            raise GitmailError(NOT_FOUND, f"no reservation {file_reservation_id} in this project; list them with "
                               "list_file_reservations", {"file_reservation_id": file_reservation_id})
        require_paths(snap, actor, [record.path_pattern], "force-release a reservation of")
        if record.released_ts is not None:
            already = ForceRelease(released=False, already_released_ts=record.released_ts, reservation=view(record),
                                   notified=None)
            return Change("already released", result=already)
        if record.agent == me:
            raise invalid("this reservation is yours: release it with release_file_reservations",
                          field="file_reservation_id")
        expired, latest, idle = judge_stale(ctx, project_key, snap, record, at, threshold=threshold, outside=outside)
        released = dataclasses.replace(record, released_ts=format_ts(at), hlc=hlc)
        why = "it had expired" if expired else (
            f"no activity for {int(idle)}s (last: {latest[0]})" if latest and idle is not None
            else "no recorded activity")
        heuristics = Staleness(expired=expired, inactivity_seconds=threshold,
                               last_activity=format_ts(latest[1]) if latest else None,
                               last_signal=latest[0] if latest else None)
        change = Change(f"{me} force-released {record.agent}'s reservation {record.path_pattern}: {why}",
                        author=me).put_record(released)
        notified = None
        if notify_previous:
            body = (f"{me} released your reservation `{record.path_pattern}` ({record.id}) because {why}.\n")
            if note:
                body += f"\n{note}\n"
            body += "\nReserve it again if you are still working on it.\n"
            message = Message(id=message_id, thread_id=message_id, sender=me, to=[record.agent],
                              subject=f"Reservation released: {record.path_pattern}"[:200], created_ts=format_ts(at),
                              body=body)
            data = message.to_bytes()
            change.put(message_path(message_id), data).put(inbox_path(record.agent, message_id), data)
            change.put(outbox_path(me, message_id), data)
            notified = message_id
        change.result = ForceRelease(released=True, reservation=view(released), heuristics=heuristics,
                                     notified=notified)
        return change

    result = archive.transact(fn).result
    ctx.touch(project_key, agent)
    return result
