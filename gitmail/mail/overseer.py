"""The project's human overseer: a person writing to the agents.

Each project has one reserved sender, ``Overseer``
(:data:`gitmail.model.names.OVERSEER`), that no agent may register. Its
profile is marked ``human``, takes mail from anyone (contact policy
``open``) and is created the first time the overseer writes, so agents
answer it with ``reply_message`` like any sender and the person reads the
answers in its inbox (the web view, ``gitmail inbox PROJECT Overseer``).
The overseer's messages are marked ``human``, pass every contact policy, and
are committed under the operator's git identity
(:mod:`gitmail.storage.operator`). Only the operator writes as the overseer:
the profile has no token, so no MCP caller can prove to be it.
"""

from __future__ import annotations

import dataclasses
import os

from gitmail.coord import reservations
from gitmail.coord.context import Context
from gitmail.coord.lookup import find_agent, project_record
from gitmail.coord.reservations import ForceRelease
from gitmail.model.errors import ALREADY_EXISTS, GitmailError
from gitmail.model.ids import is_id
from gitmail.model.limits import DEFAULT_INACTIVITY
from gitmail.model.names import OVERSEER
from gitmail.model.records import Agent, Reservation, reservation_path
from gitmail.storage.engine import Change
from gitmail.storage.operator import operator_identity
from gitmail.storage.snapshot import Snapshot

from . import sending
from .sending import NO_OPTIONS, ReplyRequest, ReplyResult, SendOptions, SendRequest, SendResult

DESCRIPTION = "The person overseeing this project's agents; replies reach them in the web view and the CLI."


def ensure_overseer(ctx: Context, project_key: str) -> Agent:
    """The overseer's profile, created on first use (one commit under the operator's identity)."""
    archive = ctx.archive(project_key)
    current = find_agent(archive.snapshot(), OVERSEER)
    if current is not None and current.human and current.status == "active":
        return current
    agent_id, stamp, hlc = ctx.clock.new_id(), ctx.clock.now_ts(), ctx.tick()
    name, email = operator_identity(OVERSEER, ctx.store.node)

    def fn(snap: Snapshot) -> Change:
        project_record(snap)
        existing = find_agent(snap, OVERSEER)
        if existing is not None and not existing.human:
            raise GitmailError(ALREADY_EXISTS, f"an agent registered as {existing.name} before the name was kept for "
                               "the human overseer; rename or delete that agent to write as the overseer",
                               {"name": existing.name})
        if existing is not None and existing.status == "active":
            return Change("", result=existing)
        if existing is not None:  # retired by hand: the overseer stays reachable
            profile = dataclasses.replace(existing, status="active", retired_at=None, hlc=hlc)
            verb = "Reactivate"
        else:
            profile = Agent(id=agent_id, name=OVERSEER, program="human", model="overseer", inception_ts=stamp, hlc=hlc,
                            task_description=DESCRIPTION, contact_policy="open", human=True)
            verb = "Create"
        return Change(f"{verb} the human overseer's profile", author=name, author_email=email,
                      result=profile).put_record(profile)

    result: Agent = archive.transact(fn).result
    return result


def send(ctx: Context, project_key: str, to: list[str] | None, subject: str, body_md: str,
         options: SendOptions = NO_OPTIONS) -> SendResult:
    """Send as the overseer."""
    ensure_overseer(ctx, project_key)
    return sending.send_message(ctx, SendRequest(project_key=project_key, sender_name=OVERSEER, to=to,
                                                 subject=subject, body_md=body_md, options=options))


def reply(ctx: Context, project_key: str, message_id: str, body_md: str,
          options: SendOptions = NO_OPTIONS, *, to: list[str] | None = None) -> ReplyResult:
    """Reply as the overseer in a message's thread, to the original's sender unless ``to`` names recipients."""
    ensure_overseer(ctx, project_key)
    return sending.reply_message(ctx, ReplyRequest(project_key=project_key, message_id=message_id,
                                                   sender_name=OVERSEER, body_md=body_md, to=to,
                                                   options=options))


def force_release(ctx: Context, project_key: str, reservation_id: str, *, note: str = "") -> ForceRelease:
    """Release another agent's abandoned reservation as the overseer, by the rules any agent meets.

    The reservation must have expired or its holder must show no activity
    for the default threshold (RESERVATION_NOT_STALE otherwise), and the
    holder gets a notice in its inbox from the overseer.
    """
    if find_agent(ctx.archive(project_key).snapshot(), OVERSEER) is None:
        _check_stale(ctx, project_key, reservation_id)  # a refused release must not leave a new profile behind
    ensure_overseer(ctx, project_key)
    return reservations.force_release(ctx, project_key, OVERSEER, reservation_id, note=note, notify_previous=True)


def _check_stale(ctx: Context, project_key: str, reservation_id: str) -> None:
    """RESERVATION_NOT_STALE now, by the release's own test, for a reservation in force whose holder is busy."""
    snap = ctx.archive(project_key).snapshot()
    record = snap.load(reservation_path(reservation_id), Reservation) if is_id(reservation_id) else None
    if record is None or record.released_ts is not None:
        return  # the release itself says what is wrong, or that there is nothing to do
    project = project_record(snap)
    outside = (reservations.workspace_activity(project.human_key, record.path_pattern)
               if os.path.isdir(project.human_key) else [])
    reservations.judge_stale(ctx, project_key, snap, record, ctx.clock.now(), threshold=DEFAULT_INACTIVITY,
                             outside=outside)
