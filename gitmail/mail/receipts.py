"""Read and acknowledgement receipts, one small file per recipient per message.

Receipts live in the recipient's folder, so they travel with a sync like any
other record. Marking twice keeps the first time: repeated calls return the
original timestamps and commit nothing.
"""

from __future__ import annotations

from gitmail.coord.acting import check_acting
from gitmail.coord.context import Context
from gitmail.coord.lookup import require_agent
from gitmail.model.errors import not_found
from gitmail.model.records import Receipt, inbox_path
from gitmail.model.results import Result, result
from gitmail.storage.engine import Change
from gitmail.storage.snapshot import Snapshot

from .mailbox import resolve_message_id


def _mark(ctx: Context, project_key: str, agent_name: str, message_id: str | int, ack: bool,
          seat: str | None = None) -> Receipt:
    message_id = resolve_message_id(ctx, project_key, message_id)
    archive = ctx.archive(project_key)
    stamp, hlc = ctx.clock.now_ts(), ctx.tick()

    def fn(snap: Snapshot) -> Change:
        # awake, and holding its seat if taken
        agent = check_acting(snap, require_agent(snap, agent_name), seat, at=ctx.clock.now())
        if not snap.exists(inbox_path(agent.name, message_id)):
            raise not_found(f"message {message_id} is not in {agent.name}'s inbox; only a recipient can mark it "
                            "(fetch_inbox lists the IDs)", message_id=message_id, agent=agent.name)
        path = Receipt(message_id=message_id, agent=agent.name, hlc=hlc).path()
        receipt = snap.load(path, Receipt) or Receipt(message_id=message_id, agent=agent.name, hlc=hlc)
        if receipt.read_at and (receipt.acked_at or not ack):
            return Change("", result=receipt)
        receipt.read_at = receipt.read_at or stamp
        if ack:
            receipt.acked_at = stamp
        receipt.hlc = hlc
        verb = "acknowledged" if ack else "read"
        return Change(f"{agent.name} {verb} {message_id}", author=agent.name, result=receipt).put_record(receipt)

    receipt = archive.transact(fn).result
    ctx.touch(project_key, receipt.agent)
    return receipt


@result
class ReadReceipt(Result):
    """A message marked read (``message_id`` as the caller named it)."""

    message_id: str | int
    read: bool
    read_at: str | None


@result
class AckReceipt(Result):
    """A message acknowledged, and when it was first read."""

    message_id: str | int
    acknowledged: bool
    acknowledged_at: str | None
    read_at: str | None


def mark_message_read(ctx: Context, project_key: str, agent_name: str, message_id: str | int,
                      *, seat: str | None = None) -> ReadReceipt:
    """Record that the agent read a message it received."""
    receipt = _mark(ctx, project_key, agent_name, message_id, ack=False, seat=seat)
    return ReadReceipt(message_id=message_id, read=True, read_at=receipt.read_at)


def acknowledge_message(ctx: Context, project_key: str, agent_name: str, message_id: str | int,
                        *, seat: str | None = None) -> AckReceipt:
    """Acknowledge a message the agent received (which also marks it read)."""
    receipt = _mark(ctx, project_key, agent_name, message_id, ack=True, seat=seat)
    return AckReceipt(message_id=message_id, acknowledged=True, acknowledged_at=receipt.acked_at,
                      read_at=receipt.read_at)
