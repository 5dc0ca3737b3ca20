"""Build slot commands, and the overdue-acknowledgement scan: for scripts and operators at a shell.

``gitmail slot acquire`` exits 1 when the slot is not granted, so a build
script can wait and try again; the epoch it prints is what ``renew`` and
``release`` take. ``gitmail acks`` scans a project with the settings of this
shell's environment (``GITMAIL_ACK_*``), as a server would.
"""

from __future__ import annotations

import click

from gitmail.model.limits import DEFAULT_INACTIVITY, DEFAULT_SLOT_EXTEND, DEFAULT_SLOT_TTL

from ._app import Context, cli, command
from .coord_cmds import table

SEAT = "The seat token, if a session holds AGENT's seat."


@cli.group(name="slot")
def slot_group() -> None:
    """Acquire, renew, release or force-release a build slot (a named, leased scarce resource)."""


@command(group=slot_group, name="acquire")
@click.argument("project")
@click.argument("agent")
@click.argument("slot")
@click.option("--ttl", "ttl_seconds", type=int, default=DEFAULT_SLOT_TTL, show_default=True,
              help="Lease in seconds (at least 60).")
@click.option("--shared", is_flag=True, help="Share the slot instead of holding it alone.")
@click.option("--max", "max_holders", type=int, default=None, help="With --shared: at most this many holders.")
@click.option("--reason", default="", help="What the slot is used for.")
@click.option("--seat", default=None, help=SEAT)
def slot_acquire(ctx: Context, project: str, agent: str, slot: str, ttl_seconds: int, shared: bool,
                 max_holders: int | None, reason: str, seat: str | None) -> tuple[object, str, int]:
    """Hold SLOT as AGENT; prints the epoch to renew and release with, or who holds it (exit 1)."""
    out = ctx.mail.acquire_build_slot(project, agent, slot, ttl_seconds=ttl_seconds, exclusive=not shared,
                                      max_holders=max_holders, reason=reason, seat=seat)
    if out.refusal is not None:
        holders = ", ".join(f"{h.agent} until {h.expires_ts}" for h in out.refusal.holders)
        return out, f"{out.refusal.reason} ({holders}); try again after {out.refusal.retry_after_ts}", 1
    held = out.new or out.kept
    assert held is not None  # granted: a new holding or the one the agent had
    return out, f"epoch {held.epoch}, held until {held.expires_ts}", 0


@command(group=slot_group, name="renew")
@click.argument("project")
@click.argument("agent")
@click.argument("slot")
@click.argument("epoch", type=int)
@click.option("--extend", "extend_seconds", type=int, default=DEFAULT_SLOT_EXTEND, show_default=True,
              help="Seconds added to the later of now and the expiry.")
@click.option("--seat", default=None, help=SEAT)
def slot_renew(ctx: Context, project: str, agent: str, slot: str, epoch: int, extend_seconds: int,
               seat: str | None) -> tuple[object, str]:
    """Extend AGENT's holding EPOCH of SLOT (never shortens it)."""
    out = ctx.mail.renew_build_slot(project, agent, slot, epoch, extend_seconds=extend_seconds, seat=seat)
    return out, f"held until {out.expires_ts}"


@command(group=slot_group, name="release")
@click.argument("project")
@click.argument("agent")
@click.argument("slot")
@click.argument("epoch", type=int)
@click.option("--seat", default=None, help=SEAT)
def slot_release(ctx: Context, project: str, agent: str, slot: str, epoch: int,
                 seat: str | None) -> tuple[object, str]:
    """End AGENT's holding EPOCH of SLOT now."""
    out = ctx.mail.release_build_slot(project, agent, slot, epoch, seat=seat)
    return out, f"released {out.slot} (epoch {epoch})"


@command(group=slot_group, name="force-release")
@click.argument("project")
@click.argument("agent")
@click.argument("slot")
@click.argument("holder")
@click.option("--note", default="", help="Added to the message sent to the holder.")
@click.option("--no-notify", is_flag=True, help="Do not send the holder a message.")
@click.option("--inactivity", "inactivity_seconds", type=int, default=DEFAULT_INACTIVITY, show_default=True,
              help="Seconds without activity after which the holder counts as gone (at least 60).")
@click.option("--seat", default=None, help=SEAT)
def slot_force_release(ctx: Context, project: str, agent: str, slot: str, holder: str, note: str, no_notify: bool,
                       inactivity_seconds: int, seat: str | None) -> tuple[object, str]:
    """As AGENT, end HOLDER's stale holding of SLOT and tell it."""
    out = ctx.mail.force_release_build_slot(project, agent, slot, holder, note=note, notify_previous=not no_notify,
                                            inactivity_seconds=inactivity_seconds, seat=seat)
    return out, f"released {out.holder}'s holding of {out.slot}: {out.reason}"


@command(name="slots")
@click.argument("project")
@click.option("--in-use", is_flag=True, help="Only the slots someone holds now.")
def slots(ctx: Context, project: str, in_use: bool) -> tuple[object, str]:
    """List PROJECT's build slots with their holders."""
    out = ctx.mail.list_build_slots(project, active_only=in_use)
    rows = []
    for slot in out.build_slots:
        terms = "exclusive" if slot.exclusive else f"shared <= {slot.max_holders}"
        for holding in slot.holders:
            rows.append({"slot": slot.slot, "terms": terms, "epoch": slot.epoch,
                         "holder": f"{holding.agent} (epoch {holding.epoch})",
                         "until": holding.expires_ts + (" (stale)" if holding.stale else "")})
        if not slot.holders:
            rows.append({"slot": slot.slot, "terms": terms, "epoch": slot.epoch, "holder": None, "until": None})
    columns = [("slot", "SLOT"), ("terms", "TERMS"), ("epoch", "EPOCH"), ("holder", "HOLDER"), ("until", "UNTIL")]
    return out, table(rows, columns, "no build slots")


@command(name="acks")
@click.argument("project")
def acks(ctx: Context, project: str) -> tuple[object, str]:
    """Scan PROJECT for overdue acknowledgements with this environment's GITMAIL_ACK_* settings (and escalate
    the new ones if they say so)."""
    out = ctx.mail_serving.scan_overdue_acks(project)
    rows = [{**item, "escalated": "yes" if item.escalated else ""} for item in out.overdue]
    columns = [("message_id", "MESSAGE"), ("agent", "RECIPIENT"), ("sender", "FROM"), ("subject", "SUBJECT"),
               ("due_ts", "DUE"), ("escalated", "ESCALATED")]
    text = table(rows, columns, f"no acknowledgement overdue (TTL {out.ttl_seconds}s)")
    if out.escalated:
        text += f"\nescalated now: {len(out.escalated)} ({out.escalation})"
    return out, text
