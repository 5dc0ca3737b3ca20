"""Reads for a person overseeing a project: urgent mail nobody read, and who has read or acknowledged what.

Both are single indexed SQLite queries over the copies and receipts the
metadata store mirrors (:mod:`.meta`); :class:`.project.ProjectIndex` keeps
their answers per commit like every other read.
"""

from __future__ import annotations

import json
from typing import Any

from .meta import Meta

MAX_IDS = 1000  # message IDs one receipts read takes (a thread page holds far fewer)


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
