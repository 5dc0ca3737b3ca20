"""Coordination commands: reservations, the commit guard, seats, journals, sleep/wake, capabilities.

Thin calls into :class:`gitmail.mail.facade.Mail` on the local store, like
the mail commands and the MCP tools. ``gitmail guard check`` is what the
installed git hooks run; it exits 1 to stop a commit or push that touches
another agent's exclusive reservation.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import click

from gitmail.model.limits import DEFAULT_INACTIVITY, DEFAULT_LEASE_S, DEFAULT_TTL

from ._app import Context, cli, command

if TYPE_CHECKING:
    from gitmail.mail.facade import SleepState


def table(rows: Sequence[Mapping[str, Any]], columns: list[tuple[str, str]], empty: str) -> str:
    """Rows as left-aligned text columns under a header, or ``empty`` when there are none."""
    if not rows:
        return empty
    cells = [["" if row.get(key) is None else str(row.get(key)) for key, _ in columns] for row in rows]
    widths = [max(len(title), *(len(line[i]) for line in cells)) for i, (_, title) in enumerate(columns)]
    lines = ["  ".join(title.ljust(widths[i]) for i, (_, title) in enumerate(columns)).rstrip()]
    lines += ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(line)).rstrip() for line in cells]
    return "\n".join(lines)


RESERVATION_COLUMNS = [("id", "ID"), ("agent", "AGENT"), ("path_pattern", "PATTERN"), ("exclusive", "EXCLUSIVE"),
                       ("expires_ts", "EXPIRES"), ("released_ts", "RELEASED"), ("reason", "REASON")]


@command(name="reserve")
@click.argument("project")
@click.argument("agent")
@click.argument("paths", nargs=-1, required=True)
@click.option("--ttl", "ttl_seconds", type=int, default=DEFAULT_TTL, show_default=True,
              help="Seconds the reservation lasts (at least 60).")
@click.option("--shared", is_flag=True, help="Reserve without excluding others (signal intent only).")
@click.option("--reason", default="", help="Why, for the humans and agents reading it.")
@click.option("--seat", default=None, help="The seat token, if a session holds AGENT's seat.")
def reserve(ctx: Context, project: str, agent: str, paths: tuple[str, ...], ttl_seconds: int, shared: bool,
            reason: str, seat: str | None) -> tuple[object, str, int]:
    """Reserve PATHS (files, folders or globs relative to the repository root) for AGENT.

    Exits 1 if any path conflicts with another agent's exclusive reservation.
    """
    out = ctx.mail.file_reservation_paths(project, agent, list(paths), ttl_seconds=ttl_seconds,
                                          exclusive=not shared, reason=reason, seat=seat)
    lines = [f"granted {g.path_pattern} ({g.id}) until {g.expires_ts}" for g in out.granted]
    for conflict in out.conflicts:
        holders = ", ".join(f"{h.agent} ({h.path_pattern} until {h.expires_ts})" for h in conflict.holders)
        lines.append(f"conflict {conflict.path}: held by {holders}")
    return out, "\n".join(lines), 1 if out.conflicts else 0


@command(name="release")
@click.argument("project")
@click.argument("agent")
@click.option("--id", "ids", multiple=True, help="A reservation ID to release (repeatable).")
@click.option("--path", "paths", multiple=True, help="A reserved pattern to release (repeatable).")
@click.option("--seat", default=None, help="The seat token, if a session holds AGENT's seat.")
def release(ctx: Context, project: str, agent: str, ids: tuple[str, ...], paths: tuple[str, ...],
            seat: str | None) -> tuple[object, str]:
    """Release AGENT's active reservations: those named by --id / --path, or all of them."""
    out = ctx.mail.release_file_reservations(project, agent, file_reservation_ids=list(ids) or None,
                                             paths=list(paths) or None, seat=seat)
    return out, f"released {out.released} reservation(s)"


@command(name="renew")
@click.argument("project")
@click.argument("agent")
@click.option("--extend", "extend_seconds", type=int, default=1800, show_default=True,
              help="Seconds to add to the later of now and each expiry.")
@click.option("--id", "ids", multiple=True, help="Only this reservation ID (repeatable).")
@click.option("--path", "paths", multiple=True, help="Only this reserved pattern (repeatable).")
@click.option("--seat", default=None, help="The seat token, if a session holds AGENT's seat.")
def renew(ctx: Context, project: str, agent: str, extend_seconds: int, ids: tuple[str, ...], paths: tuple[str, ...],
          seat: str | None) -> tuple[object, str]:
    """Extend AGENT's active reservations (never shortens them)."""
    out = ctx.mail.renew_file_reservations(project, agent, extend_seconds=extend_seconds,
                                           file_reservation_ids=list(ids) or None, paths=list(paths) or None,
                                           seat=seat)
    lines = [f"{r.path_pattern}: {r.old_expires_ts} -> {r.new_expires_ts}" for r in out.file_reservations]
    return out, "\n".join(lines + [f"renewed {out.renewed} reservation(s)"])


@command(name="reservations")
@click.argument("project")
@click.option("--agent", default=None, help="Only this agent's reservations.")
@click.option("--all", "history", is_flag=True, help="Include released and expired ones (the audit trail).")
def reservations(ctx: Context, project: str, agent: str | None, history: bool) -> tuple[object, str]:
    """List the active reservations of PROJECT."""
    out = ctx.mail.list_file_reservations(project, agent, active_only=not history)
    return out, table(out.file_reservations, RESERVATION_COLUMNS, "no reservations")


@command(name="force-release")
@click.argument("project")
@click.argument("agent")
@click.argument("reservation_id")
@click.option("--note", default="", help="Added to the message sent to the holder.")
@click.option("--no-notify", is_flag=True, help="Do not send the holder a message.")
@click.option("--inactivity", "inactivity_seconds", type=int, default=DEFAULT_INACTIVITY, show_default=True,
              help="Seconds without activity after which the holder counts as gone (at least 60).")
@click.option("--seat", default=None, help="The seat token, if a session holds AGENT's seat.")
def force_release(ctx: Context, project: str, agent: str, reservation_id: str, note: str, no_notify: bool,
                  inactivity_seconds: int, seat: str | None) -> tuple[object, str]:
    """As AGENT, release another agent's abandoned reservation RESERVATION_ID and notify the holder."""
    out = ctx.mail.force_release_file_reservation(project, agent, reservation_id, note=note,
                                                  notify_previous=not no_notify,
                                                  inactivity_seconds=inactivity_seconds, seat=seat)
    if not out.released:
        return out, f"already released at {out.already_released_ts}"
    return out, f"released {out.reservation.path_pattern} held by {out.reservation.agent}"


# -- the commit guard ----------------------------------------------------------------------


@cli.group(name="guard")
def guard_group() -> None:
    """Git hooks that stop commits and pushes touching files other agents reserved."""


@command(group=guard_group, name="install")
@click.argument("project")
@click.argument("repo", type=click.Path(file_okay=False))
def guard_install(ctx: Context, project: str, repo: str) -> tuple[object, str]:
    """Install the pre-commit and pre-push guard into the git repository REPO for PROJECT."""
    out = ctx.mail.install_precommit_guard(project, repo)
    chained = f"\nkept and chained: {', '.join(out.chained)}" if out.chained else ""
    return out, f"installed {', '.join(out.hooks)} for {out.project}{chained}"


@command(group=guard_group, name="uninstall")
@click.argument("repo", type=click.Path(file_okay=False))
def guard_uninstall(ctx: Context, repo: str) -> tuple[object, str]:
    """Remove the guard from REPO (other hooks stay; a chained hook is put back)."""
    out = ctx.mail.uninstall_precommit_guard(repo)
    return out, ("removed " + ", ".join(out.hooks)) if out.removed else "no gitmail guard was installed"


@command(group=guard_group, name="check")
@click.option("--hook", required=True, help="Which hook is running: pre-commit or pre-push.")
@click.option("--repo", default=".", type=click.Path(file_okay=False), help="The repository (default: here).")
def guard_check(ctx: Context, hook: str, repo: str) -> tuple[object, str, int]:
    """Run the guard's check (the installed hooks call this; pre-push reads git's ref lines on stdin)."""
    from gitmail.coord.guard import HOOKS
    from gitmail.mail.facade import Mail
    from gitmail.storage.store import Store, default_home

    if hook not in HOOKS:
        raise click.BadParameter(f"must be one of {', '.join(HOOKS)}", param_hint="--hook")
    stdin = sys.stdin.read() if hook == "pre-push" else ""
    home = os.path.abspath(os.path.expanduser(ctx.home)) if ctx.home else default_home()
    if not os.path.isdir(os.path.join(home, "projects")):  # never create a store from inside a git hook
        text = f"gitmail guard: no gitmail store at {home}; set GITMAIL_HOME to the store. Not checking."
        return {"exit": 0, "report": text}, text, 0
    code, text = Mail(Store(home, background=False)).run_guard_hook(hook, repo, stdin)
    return {"exit": code, "report": text}, text, code


# -- seats, journals, sleep/wake, capabilities ---------------------------------------------


@cli.group(name="seat")
def seat_group() -> None:
    """Take, renew, release or inspect the seat that decides which session drives an agent."""


@command(group=seat_group, name="take")
@click.argument("project")
@click.argument("agent")
@click.option("--holder", default="cli", show_default=True, help="Names the session taking the seat.")
@click.option("--lease", "lease_s", type=int, default=DEFAULT_LEASE_S, show_default=True,
              help="Lease in seconds.")
@click.option("--take-over", is_flag=True, help="Take it even though another session holds it.")
def seat_take(ctx: Context, project: str, agent: str, holder: str, lease_s: int, take_over: bool) -> tuple[object, str]:
    """Take AGENT's seat; prints the token to pass as --seat, then the end of its journal."""
    out = ctx.mail.take_seat(project, agent, holder=holder, lease_s=lease_s, take_over=take_over)
    seat = out.seat
    lines = [f"seat token: {seat.token}", f"epoch {seat.epoch}, lease until {seat.expires_at}"]
    lines += [f"\n[{e.created}]\n{e.entry.rstrip()}" for e in out.journal]
    return out, "\n".join(lines)


@command(group=seat_group, name="renew")
@click.argument("project")
@click.argument("agent")
@click.argument("token")
@click.option("--lease", "lease_s", type=int, default=DEFAULT_LEASE_S, show_default=True,
              help="Lease in seconds.")
def seat_renew(ctx: Context, project: str, agent: str, token: str, lease_s: int) -> tuple[object, str]:
    """Extend the lease of AGENT's seat held with TOKEN (never shortens it)."""
    out = ctx.mail.renew_seat(project, agent, token, lease_s=lease_s)
    return out, f"lease until {out.seat.expires_at}"


@command(group=seat_group, name="release")
@click.argument("project")
@click.argument("agent")
@click.argument("token")
def seat_release(ctx: Context, project: str, agent: str, token: str) -> tuple[object, str]:
    """Give up AGENT's seat held with TOKEN."""
    out = ctx.mail.release_seat(project, agent, token)
    return out, f"released epoch {out.seat.epoch}"


@command(group=seat_group, name="status")
@click.argument("project")
@click.argument("agent")
def seat_status(ctx: Context, project: str, agent: str) -> tuple[object, str]:
    """Show who holds AGENT's seat."""
    out = ctx.mail.seat_status(project, agent)
    seat = out.seat
    if seat is None:
        return out, f"{agent}'s seat has never been taken"
    state = "held" if out.held else "free"
    return out, f"{state}: epoch {seat.epoch} by {seat.holder}, lease until {seat.expires_at}"


@command(name="journal")
@click.argument("project")
@click.argument("agent")
@click.argument("entry", required=False)
@click.option("--seat", default=None, help="The seat token, if a session holds AGENT's seat.")
@click.option("--limit", type=int, default=20, show_default=True, help="Entries to show when reading.")
def journal_cmd(ctx: Context, project: str, agent: str, entry: str | None, seat: str | None,
                limit: int) -> tuple[object, str]:
    """Append ENTRY to AGENT's journal, or show its last entries when ENTRY is omitted."""
    if entry is not None:
        out = ctx.mail.journal(project, agent, entry, seat=seat)
        return out, f"journal entry {out.id} at {out.path}"
    shown = ctx.mail.read_journal(project, agent, limit=limit)
    text = "\n\n".join(f"[{e.created}]\n{e.entry.rstrip()}" for e in shown.entries)
    return shown, text or "the journal is empty"


def _sleep_wake(ctx: Context, project: str, target: str, asleep: bool, actor: str | None,
                seat: str | None, reason: str | None, until: str = "reply") -> tuple[SleepState, str]:
    if asleep:
        out = ctx.mail.sleep_agent(project, actor, target=target, until=until, seat=seat, reason=reason)
    else:
        out = ctx.mail.wake_agent(project, actor, target, seat=seat, reason=reason)
    state = "asleep" if asleep else "awake"
    return out, f"{target} is {state}" + ("" if out.changed else " (no change)")


@command(name="sleep")
@click.argument("project")
@click.argument("target")
@click.option("--until", type=click.Choice(["reply", "woken"]), default="reply", show_default=True,
              help="What wakes it: a reply to one of its messages (or an agent above it), or only being woken.")
@click.option("--by", "actor", default=None, help="The agent doing it: TARGET itself or one above it "
              "(default: you, the operator, who may put any agent to sleep).")
@click.option("--seat", default=None, help="The acting agent's seat token, if its seat is held.")
@click.option("--reason", default=None, help="Why, in one line; recorded in the commit message.")
def sleep_cmd(ctx: Context, project: str, target: str, until: str, actor: str | None, seat: str | None,
              reason: str | None) -> tuple[object, str]:
    """Put TARGET to sleep: it keeps receiving mail but cannot act until woken."""
    return _sleep_wake(ctx, project, target, True, actor, seat, reason, until)


@command(name="wake")
@click.argument("project")
@click.argument("target")
@click.option("--by", "actor", default=None, help="The agent doing it: one above TARGET "
              "(default: you, the operator, who may wake any agent).")
@click.option("--seat", default=None, help="The acting agent's seat token, if its seat is held.")
@click.option("--reason", default=None, help="Why, in one line; recorded in the commit message.")
def wake_cmd(ctx: Context, project: str, target: str, actor: str | None, seat: str | None,
             reason: str | None) -> tuple[object, str]:
    """Wake TARGET so it can act again."""
    return _sleep_wake(ctx, project, target, False, actor, seat, reason)


@command(name="capabilities")
@click.argument("project")
@click.argument("agent", required=False)
@click.argument("names", nargs=-1)
@click.option("--set", "set_them", is_flag=True, help="Replace AGENT's capabilities with NAMES (none clears them).")
@click.option("--seat", default=None, help="The seat token, if a session holds AGENT's seat.")
def capabilities_cmd(ctx: Context, project: str, agent: str | None, names: tuple[str, ...], set_them: bool,
                     seat: str | None) -> tuple[object, str]:
    """Show the capability cards of PROJECT, or with --set publish AGENT's capabilities.

    Mail addressed to role:<capability> reaches every active agent with it.
    """
    if set_them:
        if agent is None:
            raise click.UsageError("--set needs AGENT")
        out = ctx.mail.publish_capabilities(project, agent, list(names), seat=seat)
        return out, f"{agent}: {', '.join(out.capabilities) or '(none)'}"
    cards = ctx.mail.list_capabilities(project)
    rows = [dict(a, capabilities=", ".join(a.capabilities)) for a in cards.agents
            if agent is None or a.name == agent]
    return cards, table(rows, [("name", "AGENT"), ("capabilities", "CAPABILITIES"), ("asleep", "ASLEEP")],
                        "no agents")
