"""Reads for a person overseeing a project: urgent mail nobody read, who has read or acknowledged what, and
every message filtered by its parties, importance, acknowledgements and time.

Each is a single indexed SQLite query over the copies and receipts the
metadata store mirrors (:mod:`.meta`); :class:`.project.ProjectIndex` keeps
their answers per commit like every other read.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from .meta import MESSAGE_COLUMNS, Meta, message_row

MAX_IDS = 1000  # message IDs one receipts read takes (a thread page holds far fewer)
ACK_STATES = ("asked", "owed", "done")  # asks for acknowledgements; some still owed; every one given


@dataclasses.dataclass(frozen=True)
class Filter:
    """Which messages a listing holds; an empty field does not filter. Names are as the archive spells them.

    ``recipient`` is a to or cc recipient (as the query language's ``to:``);
    ``since`` and ``until`` bound ``created_ts`` (both included);
    ``before`` is the ``(created_ts, id)`` a page continues after, newest first.
    """

    sender: str = ""
    recipient: str = ""
    importance: str = ""
    ack: str = ""
    since: str = ""
    until: str = ""
    before: tuple[str, str] | None = None
    inclusive: bool = False  # whether the message at ``before`` itself is listed


_OWED = ("EXISTS (SELECT 1 FROM copies c LEFT JOIN receipts r ON r.agent = c.agent AND r.message_id = c.message_id "
         "WHERE c.message_id = m.id AND c.box = 'inbox' AND r.acked_at IS NULL)")
_NAMED = ("(EXISTS (SELECT 1 FROM json_each(m.recipients, '$.to') WHERE value = ?) "
          "OR EXISTS (SELECT 1 FROM json_each(m.recipients, '$.cc') WHERE value = ?))")


def listing(meta: Meta, where: Filter, *, limit: int) -> list[dict[str, Any]]:
    """Up to ``limit`` messages passing ``where``, newest first (``created_ts``, then ``id``), as message summaries.

    Read in time order by the time index (or the partial index of urgent
    messages, or of those asking for acknowledgements), so a page costs what
    it skips over; a recipient's messages are found through its copies.
    """
    sql, args = [f"SELECT {MESSAGE_COLUMNS} FROM messages m WHERE 1"], list[Any]()
    if where.sender:
        sql.append("AND m.sender = ?")
        args.append(where.sender)
    if where.recipient:
        sql.append("AND m.id IN (SELECT message_id FROM copies WHERE agent = ? AND box = 'inbox') AND " + _NAMED)
        args += [where.recipient] * 3
    if where.importance:
        sql.append("AND m.importance = ?")
        args.append(where.importance)
    if where.ack:
        sql.append("AND m.ack_required = 1" + {"asked": "", "owed": f" AND {_OWED}", "done": f" AND NOT {_OWED}"}[
            where.ack])
    if where.since:
        sql.append("AND m.created_ts >= ?")
        args.append(where.since)
    if where.until:
        sql.append("AND m.created_ts <= ?")
        args.append(where.until)
    if where.before is not None:
        sql.append("AND (m.created_ts, m.id) " + ("<= (?, ?)" if where.inclusive else "< (?, ?)"))
        args += list(where.before)
    sql.append("ORDER BY m.created_ts DESC, m.id DESC LIMIT ?")
    args.append(limit)
    out = []
    for row in meta.read(" ".join(sql), args):
        entry = message_row(row)
        del entry["blob"], entry["seq"]
        out.append(entry)
    return out


def ack_states(meta: Meta, message_ids: list[str]) -> dict[str, str]:
    """Of the messages that ask for acknowledgements among ``message_ids``: ``owed`` or ``done`` for each."""
    ids = list(dict.fromkeys(message_ids))[:MAX_IDS]
    if not ids:
        return {}
    marks = ", ".join("?" * len(ids))
    return {row[0]: "owed" if row[1] else "done" for row in meta.read(
        f"SELECT m.id, {_OWED} FROM messages m WHERE m.ack_required = 1 AND m.id IN ({marks})", ids)}


def urgent_unread(meta: Meta, *, limit: int) -> list[dict[str, Any]]:
    """Urgent messages a recipient has not read yet, newest first: one entry per message and recipient."""
    rows = meta.read(
        "SELECT m.id, m.thread_id, m.subject, m.sender, m.created_ts, c.agent FROM messages m "
        "CROSS JOIN copies c ON c.message_id = m.id AND c.box = 'inbox' "  # urgent messages first: few of them
        "LEFT JOIN receipts r ON r.agent = c.agent AND r.message_id = m.id "
        "WHERE m.importance = 'urgent' AND r.read_at IS NULL "
        "ORDER BY m.created_ts DESC, m.id DESC, c.agent LIMIT ?", (limit,))
    return [{"id": r[0], "thread_id": r[1], "subject": r[2], "sender": r[3], "created_ts": r[4], "agent": r[5]}
            for r in rows]


def receipts(meta: Meta, message_ids: list[str]) -> dict[str, dict[str, Any]]:
    """Per message: its sender, to and cc, who got a copy and when each read and acknowledged it, and the bcc.

    ``{id: {"from": name, "to": [...], "cc": [...], "delivered": {agent: (read_at, acked_at)}, "bcc": [...]}}``
    for each message known here; ``bcc`` comes from the sender's outbox copy
    (only that copy records it), ``delivered`` holds every inbox copy, blind
    ones included.
    """
    ids = list(dict.fromkeys(message_ids))[:MAX_IDS]
    if not ids:
        return {}
    marks = ", ".join("?" * len(ids))
    out: dict[str, dict[str, Any]] = {}
    for message_id, sender, recipients in meta.read(
            f"SELECT id, sender, recipients FROM messages WHERE id IN ({marks})", ids):
        named = json.loads(recipients)
        out[message_id] = {"from": sender, "to": named["to"], "cc": named["cc"], "delivered": {}, "bcc": []}
    for message_id, agent, read_at, acked_at in meta.read(
            "SELECT c.message_id, c.agent, r.read_at, r.acked_at FROM copies c "
            "LEFT JOIN receipts r ON r.agent = c.agent AND r.message_id = c.message_id "
            f"WHERE c.box = 'inbox' AND c.message_id IN ({marks}) ORDER BY c.agent", ids):
        if message_id in out:
            out[message_id]["delivered"][agent] = (read_at, acked_at)
    for message_id, bcc in meta.read(
            f"SELECT message_id, bcc FROM copies WHERE box = 'outbox' AND message_id IN ({marks}) AND bcc IS NOT NULL",
            ids):
        if message_id in out:
            out[message_id]["bcc"] = json.loads(bcc)
    return out
