"""What a sync brought in that someone should look at: conflicts, identity clashes, overlapping reservations.

Each is found from the files that entered the local ``main`` during the
sync, so every machine reports each finding once, when it first arrives
there, whether this machine's merge made it or another machine's did:

- a **conflict** is a record under ``conflicts/`` (two versions met at one
  immutable path; one stayed, the other was parked);
- an **identity clash** is such a conflict on an agent profile: one name
  registered twice while apart; the earlier registration kept the name and
  the other is parked (the agent that held it gets a clear error and a way
  on when it next proves its identity);
- **overlapping reservations** are two active exclusive reservations of
  different agents whose patterns share a path, granted on machines that
  could not see each other. Reservations are advisory, so both stand; the
  holders get a notice (one message, which every machine that finds the
  overlap writes identically, so it exists once) and the sync says so.
"""

from __future__ import annotations

import re
from typing import Any

import pygit2

from gitmail.coord.globs import overlaps
from gitmail.mail.overdue import is_escalation_filing
from gitmail.model.clock import parse_ts
from gitmail.model.errors import GitmailError
from gitmail.model.ids import derived_id
from gitmail.model.records import (
    Agent,
    Conflict,
    Message,
    Record,
    Reservation,
    inbox_path,
    message_path,
    outbox_path,
    placed,
    reservation_path,
    role_of,
)
from gitmail.storage.authorship import Rules
from gitmail.storage.engine import Archive, Change
from gitmail.storage.snapshot import Snapshot, blob_data, blob_in, tree_layout

from .merge import merged_records

_PROFILE = re.compile(r"^agents/([^/]+)/profile\.yaml$")


def conflicts_entered(repo: pygit2.Repository, entered: dict[str, pygit2.Oid | None]) -> list[dict[str, Any]]:
    """Every conflict record among the files that entered main, identity clashes described in full."""
    out = []
    for path, blob in sorted(entered.items()):
        if blob is None or role_of(path) != "conflict":
            continue
        try:
            conflict = Conflict.from_bytes(blob_data(repo, blob), path)
        except GitmailError:
            continue
        item: dict[str, Any] = {"path": conflict.file, "record": path, "kept_blob": conflict.kept_blob,
                                "other_blob": conflict.other_blob, "kind": "record"}
        match = _PROFILE.match(conflict.file)
        if match:
            item.update(kind="identity", agent=match.group(1), **_registrations(repo, conflict))
        out.append(item)
    return out


def _registrations(repo: pygit2.Repository, conflict: Conflict) -> dict[str, Any]:
    """The registration that kept the name and the one parked, as far as they parse."""
    out: dict[str, Any] = {}
    try:
        kept = Agent.from_bytes(blob_data(repo, conflict.kept_blob), conflict.file)
        out["kept"] = _registration(kept)
    except (GitmailError, KeyError, ValueError):
        pass
    try:
        parked = Agent.from_bytes(conflict.content.encode("utf-8"), conflict.file)
        out["parked"] = _registration(parked)
    except GitmailError:
        pass
    return out


def _registration(agent: Agent) -> dict[str, Any]:
    return {"id": agent.id, "inception_ts": agent.inception_ts, "node": agent.hlc.node}


def arrived_reservations(entered: dict[str, pygit2.Oid | None]) -> set[str]:
    """The ids of the reservations among the files that entered main."""
    return {path.rsplit("/", 1)[1][:-5] for path, blob in entered.items()
            if blob is not None and role_of(path) == "reservation"}


def overlapping_reservations(in_force: list[Reservation], arrived: set[str]) -> list[tuple[Reservation, Reservation]]:
    """Pairs (earlier, later) of exclusive reservations in force, of different agents, that overlap,
    at least one of which arrived (see :func:`arrived_reservations`)."""
    active = [r for r in in_force if r.exclusive]
    pairs: dict[tuple[str, str], tuple[Reservation, Reservation]] = {}
    for new in (r for r in active if r.id in arrived):
        for other in active:
            if other.agent == new.agent or not overlaps(new.path_pattern, other.path_pattern):
                continue
            first, second = sorted((new, other), key=lambda r: (r.created_ts, r.id))
            pairs[(first.id, second.id)] = (first, second)
    return [pairs[key] for key in sorted(pairs)]


def overlap_view(pair: tuple[Reservation, Reservation]) -> dict[str, Any]:
    first, second = pair
    return {"reservations": [_reservation(first), _reservation(second)], "notice": notice_id(pair)}


def _reservation(record: Reservation) -> dict[str, Any]:
    return {"id": record.id, "agent": record.agent, "path_pattern": record.path_pattern,
            "created_ts": record.created_ts, "expires_ts": record.expires_ts, "node": record.hlc.node}


def notice_id(pair: tuple[Reservation, Reservation]) -> str:
    """The id of the notice about an overlap: the same on every machine that finds it."""
    first, second = pair
    ms = int(parse_ts(second.created_ts).timestamp() * 1000)
    return derived_id(ms, f"reservation-overlap {first.id} {second.id}".encode())


def notice(pair: tuple[Reservation, Reservation]) -> Message:
    """The message that tells both holders; built from the two reservations alone."""
    first, second = pair
    body = (f"Two exclusive reservations that overlap were granted while the machines that granted them could not "
            f"see each other:\n\n"
            f"- `{first.path_pattern}` held by {first.agent} ({first.id}), granted {first.created_ts}, "
            f"until {first.expires_ts}\n"
            f"- `{second.path_pattern}` held by {second.agent} ({second.id}), granted {second.created_ts}, "
            f"until {second.expires_ts}\n\n"
            f"Reservations are advisory, so both stand. Agree between you who goes on; the other releases "
            f"(release_file_reservations) or narrows the pattern.\n")
    message_id = notice_id(pair)
    return Message(id=message_id, thread_id=f"reservation-overlap-{first.id}", sender=second.agent,
                   to=[first.agent], cc=[second.agent], importance="high", created_ts=second.created_ts,
                   subject=f"Overlapping reservations: {first.path_pattern} and {second.path_pattern}"[:200],
                   body=body)


def send_notices(archive: Archive, pairs: list[tuple[Reservation, Reservation]]) -> str | None:
    """Write the notice of each overlap that is not in the archive yet; the commit, if any."""
    if not pairs:
        return None

    def fn(snap: Snapshot) -> Change:
        change = Change(f"Notify the holders of {len(pairs)} overlapping reservation(s)")
        for pair in pairs:
            message = notice(pair)
            if snap.exists(message_path(message.id)):
                continue
            data = message.to_bytes()
            change.put(message_path(message.id), data).put(outbox_path(message.sender, message.id), data)
            for name in dict.fromkeys(message.to + message.cc):
                change.put(inbox_path(name, message.id), data)
        return change

    return archive.transact(fn).commit



_NAMED_ID = re.compile(r"\(([0-9a-z]{23})\)")


def is_notice(repo: pygit2.Repository, tree: pygit2.Tree, record: Record) -> bool:
    """Whether ``record`` is exactly the notice of two reservations ``tree`` holds (any machine may write it)."""
    if not isinstance(record, Message) or not record.thread_id.startswith("reservation-overlap-"):
        return False
    ids = _NAMED_ID.findall(record.body)
    if len(ids) != 2:
        return False
    pair = []
    for reservation_id in ids:
        blob = blob_in(tree, placed(reservation_path(reservation_id), tree_layout(tree)))
        if blob is None:
            return False
        try:
            pair.append(Reservation.from_bytes(blob.data, reservation_path(reservation_id)))
        except GitmailError:
            return False
    built = notice((pair[0], pair[1]))
    return built.to_bytes() in (record.to_bytes(), record.public_copy().to_bytes())


def derived_anywhere(repo: pygit2.Repository, tree: pygit2.Tree, record: Record) -> bool:
    """Whether any machine may write ``record``, a rule having derived it from others in ``tree``."""
    return is_notice(repo, tree, record) or is_escalation_filing(repo, tree, record)


# What the who-may-write rule needs of this layer: the merge rules, and the records any machine derives.
SYNC_RULES = Rules(merged=merged_records, derived=derived_anywhere)
