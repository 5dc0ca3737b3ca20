"""Hot reads answered from the metadata store.

Inbox and outbox pages, the agent directory, the reservation history and
cursor reads, each one indexed SQLite query. :class:`.project.ProjectIndex`
keeps their answers per commit.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from gitmail.model.clock import format_ts, parse_ts
from gitmail.model.errors import invalid

from .meta import MESSAGE_COLUMNS, N_MESSAGE_COLUMNS, Meta, message_row

URGENT = ("high", "urgent")
MAX_LIMIT = 1000


def check_limit(limit: int, name: str = "limit") -> int:
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1 or limit > MAX_LIMIT:
        raise invalid(f"{name} must be a whole number from 1 to {MAX_LIMIT}; got {limit!r}", field=name)
    return limit


def normalize_ts(value: str | None, name: str) -> str | None:
    if value is None or value == "":
        return None
    try:
        return format_ts(parse_ts(value))
    except ValueError:
        raise invalid(f"{name} must be an ISO-8601 timestamp with a time zone, like 2026-12-01T08:00:00Z; "
                      f"got {value!r}", field=name) from None


def _kind(entry: dict[str, Any], agent: str) -> str:
    if agent in entry["to"]:
        return "to"
    if agent in entry["cc"]:
        return "cc"
    return "bcc"


BodyReader = Callable[[str], str]


def _view(entry: dict[str, Any], body_of: BodyReader | None) -> dict[str, Any]:
    """The domain's message view: drop what is ours (seq, blob), add the body if asked."""
    blob = entry.pop("blob")
    entry.pop("seq")
    if body_of is not None:
        entry["body_md"] = body_of(blob)
    return entry


def inbox(meta: Meta, agent: str, *, since_ts: str | None = None, urgent_only: bool = False,
          unread_only: bool = False, topic: str | None = None, limit: int = 20,
          body_of: BodyReader | None = None) -> list[dict[str, Any]]:
    """An agent's received messages, newest first (by ID, as the folders list them).

    Each entry is the mail domain's inbox view: the message fields, ``kind``
    (to, cc or bcc), this agent's ``read_at`` and ``acknowledged_at``, and
    ``body_md`` when ``body_of`` is given. ``unread_only`` keeps messages
    without a read time; ``topic`` compares without case.
    """
    sql = [f"SELECT {MESSAGE_COLUMNS}, r.read_at, r.acked_at FROM copies c "
           "JOIN messages m ON m.id = c.message_id "
           "LEFT JOIN receipts r ON r.agent = c.agent AND r.message_id = c.message_id "
           "WHERE c.agent = ? AND c.box = 'inbox'"]
    args: list[Any] = [agent]
    if since_ts:
        sql.append("AND c.created_ts > ?")
        args.append(since_ts)
    if urgent_only:
        sql.append("AND m.importance IN ('high', 'urgent')")
    if topic:
        sql.append("AND lower(m.topic) = lower(?)")
        args.append(topic)
    if unread_only:
        sql.append("AND r.read_at IS NULL")
    sql.append("ORDER BY c.message_id DESC LIMIT ?")
    args.append(limit)
    out = []
    for row in meta.read(" ".join(sql), args):
        entry = _view(message_row(row), body_of)
        entry.update(kind=_kind(entry, agent), read_at=row[N_MESSAGE_COLUMNS],
                     acknowledged_at=row[N_MESSAGE_COLUMNS + 1])
        out.append(entry)
    return out


def outbox(meta: Meta, agent: str, *, since_ts: str | None = None, limit: int = 20,
           body_of: BodyReader | None = None) -> list[dict[str, Any]]:
    """What an agent sent, newest first, with ``bcc`` (the sender's own copy shows it)."""
    sql = (f"SELECT {MESSAGE_COLUMNS}, c.bcc FROM copies c JOIN messages m ON m.id = c.message_id "
           "WHERE c.agent = ? AND c.box = 'outbox'" + (" AND c.created_ts > ?" if since_ts else "")
           + " ORDER BY c.message_id DESC LIMIT ?")
    args = [agent, since_ts, limit] if since_ts else [agent, limit]
    out = []
    for row in meta.read(sql, args):
        entry = _view(message_row(row), body_of)
        entry["bcc"] = json.loads(row[N_MESSAGE_COLUMNS]) if row[N_MESSAGE_COLUMNS] else []
        out.append(entry)
    return out


def agents(meta: Meta) -> list[dict[str, Any]]:
    """Every agent profile (without secrets), by name."""
    return [json.loads(row[0]) for row in meta.read("SELECT data FROM agents ORDER BY name")]


def reservations(meta: Meta) -> list[dict[str, Any]]:
    """Every reservation record, oldest first."""
    return [json.loads(row[0]) for row in meta.read("SELECT data FROM reservations ORDER BY id")]


def messages_after(meta: Meta, agent: str, after_seq: int, limit: int, include_sent: bool) -> list[dict[str, Any]]:
    """Messages that reached an agent after a cursor, in the order this machine saw them."""
    boxes = "('inbox', 'outbox')" if include_sent else "('inbox')"
    rows = meta.read(f"SELECT c.seq, c.box, {MESSAGE_COLUMNS} FROM copies c JOIN messages m ON m.id = c.message_id "
                     f"WHERE c.agent = ? AND c.box IN {boxes} AND c.seq > ? ORDER BY c.seq LIMIT ?",
                     (agent, after_seq, limit))
    out, seen = [], set()
    for row in rows:
        entry = message_row(row[2:])
        if entry["id"] in seen:
            continue
        seen.add(entry["id"])
        entry["seq"], entry["box"] = row[0], row[1]
        del entry["blob"]
        out.append(entry)
    return out


def newest_arrivals(meta: Meta, agent: str, count: int) -> tuple[list[dict[str, Any]], bool]:
    """The last ``count`` messages to reach an agent's inbox (oldest first), and whether earlier ones exist."""
    rows = meta.read(f"SELECT c.seq, c.box, {MESSAGE_COLUMNS} FROM copies c JOIN messages m ON m.id = c.message_id "
                     "WHERE c.agent = ? AND c.box = 'inbox' ORDER BY c.seq DESC LIMIT ?", (agent, count + 1))
    out = []
    for row in rows[:count]:
        entry = message_row(row[2:])
        entry["seq"], entry["box"] = row[0], row[1]
        del entry["blob"]
        out.append(entry)
    return out[::-1], len(rows) > count


def known_agent(meta: Meta, name: str) -> bool:
    return bool(meta.read("SELECT 1 FROM agents WHERE name = ?", (name,)))
