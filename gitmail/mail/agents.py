"""Agents: registration, identity tokens, the directory, and retirement.

A profile lives at ``agents/<Name>/profile.yaml``. Registering returns a
registration token once; only its hash is committed. Retiring or deregistering
is a status change (the agent's mail stays); a hard delete removes the agent's
files and the messages it sent from the tip, while git history keeps them.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from gitmail.coord import hierarchy, reservations
from gitmail.coord.context import Context
from gitmail.coord.lookup import (
    agent_names,
    canonical_name,
    find_agent,
    profiles,
    project_record,
    require_agent,
    ts_of_hlc,
)
from gitmail.index import IndexUnavailable, indexer_for
from gitmail.model.clock import format_ts, parse_ts
from gitmail.model.errors import ALREADY_EXISTS, IDENTITY_CLASH, GitmailError, invalid
from gitmail.model.namegen import generate_name
from gitmail.model.names import OVERSEER, check_agent_name, is_reserved_name
from gitmail.model.records import (
    CONFLICTS,
    CONTACTS,
    OUTBOX,
    RESERVATIONS,
    Agent,
    Conflict,
    Message,
    Reservation,
    agent_dir,
    agent_folder,
    profile_path,
)
from gitmail.model.results import FLATTEN, OMIT_NONE, Result, result
from gitmail.storage.engine import Change
from gitmail.storage.history import authors_since, commits_by
from gitmail.storage.snapshot import Snapshot

from . import idempotency
from .contacts import release_held
from .delivery import remove_message
from .projects import check_confirmation
from .tokens import hash_token, mint_token, token_matches

MAX_REASON = 200
RETIRE_FLOOR_SECONDS = 60
DEFAULT_INACTIVE_SECONDS = 24 * 3600


@result
class AgentProfile(Result):
    """The public profile of an agent (never its token hash); ``human`` only for the project's overseer."""

    id: str
    name: str
    program: str
    model: str
    task_description: str
    inception_ts: str
    last_active_ts: str
    project_id: str
    status: str
    retired_at: str | None
    contact_policy: str
    attachments_policy: str
    card: hierarchy.Card = field(metadata=FLATTEN)
    human: bool | None = field(default=None, metadata=OMIT_NONE)


@result
class CardState(Result):
    """The version of an agent's capability card and how it is woken (brief, sse, webhook; a webhook's URL and
    secret are the server's local state, never here)."""

    card_version: int
    wake_channel: str


def card_state(ctx: Context, project_key: str, agent_name: str) -> CardState:
    """An agent's card version and wake channel as its profile says."""
    profile = require_agent(ctx.archive(project_key).snapshot(), agent_name)
    return CardState(card_version=profile.card_version, wake_channel=profile.wake_channel)


@result
class StatusChange(Result):
    """An agent retired, brought back or taken off the roster: its new status, named as the caller named it.

    The agent-mail answer to these calls (``status``, ``agent_name``,
    ``project_key``), plus when it was retired; ``whois`` reads the whole
    profile.
    """

    status: str
    agent_name: str
    project_key: str
    retired_at: str | None

    @classmethod
    def of(cls, profile: AgentProfile, project_key: str) -> StatusChange:
        return cls(status=profile.status, agent_name=profile.name, project_key=project_key,
                   retired_at=profile.retired_at)


@result
class Registration(Result):
    """A registered (or updated) agent; its token only when this call issued it, ``replayed`` on a retry."""

    profile: AgentProfile = field(metadata=FLATTEN)
    registration_token: str | None = field(default=None, metadata=OMIT_NONE)
    replayed: bool | None = field(default=None, metadata=OMIT_NONE)


@result
class TokenReset(Result):
    """A new token issued to an agent by the operator."""

    agent: str
    registration_token: str


@result
class AuthoredCommit(Result):
    """One of an agent's commits, as whois lists it."""

    hexsha: str
    summary: str
    authored_ts: str


@result
class JournalCommit(AuthoredCommit):
    """An agent's commit and the agents whose journal it wrote to (whose text whois may hide)."""

    journals: list[str]


@result
class Whois(Result):
    """An agent's profile and, when asked for, its latest commits."""

    profile: AgentProfile = field(metadata=FLATTEN)
    recent_commits: list[AuthoredCommit] | None = field(default=None, metadata=OMIT_NONE)


@result
class AgentDeleted(Result):
    """What a hard delete removed from the tip, and the children it orphaned."""

    deleted: bool
    agent: str
    id: str
    orphaned: list[str]
    messages_removed: int
    files_removed: int
    note: str


@result
class InactiveAgent(Result):
    """An agent retired (or, on a dry run, to be retired) for inactivity."""

    agent: str
    last_active_ts: str


@result
class SkippedAgent(Result):
    """An inactive agent left active, and why."""

    agent: str
    reason: str


@result
class InactiveRetired(Result):
    """The agents a retire_inactive_agents call retired (or would, on a dry run) and those it skipped."""

    retired: list[InactiveAgent]
    skipped: list[SkippedAgent]
    threshold_seconds: int
    dry_run: bool


def last_active(ctx: Context, slug: str, agent: Agent) -> str:
    """When ``agent`` last acted, as this process knows: its latest call here, its profile's last write, its birth."""
    return max(filter(None, (ctx.activity.last(slug, agent.name), ts_of_hlc(agent.hlc), agent.inception_ts)))


def agent_view(ctx: Context, slug: str, agent: Agent, project_id: str) -> AgentProfile:
    """The public profile of an agent (never its token hash)."""
    return AgentProfile(
        id=agent.id, name=agent.name, program=agent.program, model=agent.model,
        task_description=agent.task_description, inception_ts=agent.inception_ts,
        last_active_ts=last_active(ctx, slug, agent), project_id=project_id,
        status=agent.status, retired_at=agent.retired_at, contact_policy=agent.contact_policy,
        attachments_policy=agent.attachments_policy, card=hierarchy.card(agent), human=True if agent.human else None)


def check_reason(reason: object) -> str | None:
    """A write's reason: one line of at most 200 characters (None or blank: no reason)."""
    if reason is None:
        return None
    if not isinstance(reason, str) or len(reason) > MAX_REASON or any(ord(ch) < 32 or ord(ch) == 127 for ch in reason):
        raise invalid(f"reason must be one line of text of at most {MAX_REASON} characters, without control "
                      "characters: why you are doing this", field="reason")
    return reason.strip() or None


def with_reason(line: str, reason: str | None) -> str:
    """A commit message: the line, and the reason as a trailer git log shows."""
    return f"{line}\n\nReason: {reason}\n" if reason else line


def _text(value: object, field: str) -> str:
    if not isinstance(value, str):
        raise invalid(f"{field} must be text (for example 'claude-code')", field=field)
    return value.strip()


Claim = Callable[[Agent], None]
"""Checks, inside the registering transaction, that the caller may take over an existing agent (raises if not)."""


def _register(ctx: Context, project_key: str, program: str | None, model: str | None, name: str | None,
              task_description: str | None, *, fresh_only: bool, name_field: str,
              claim: Claim | None = None, idempotency_key: str | None = None,
              reason: str | None = None) -> Registration:
    """Create the agent, or update the fields given (None leaves a field of an existing agent as it is).

    With ``idempotency_key`` (which needs ``name``: the key is filed under
    the agent's folder) a retry returns the first answer, without the token.
    """
    why = check_reason(reason)
    if idempotency_key is not None and name is None:
        raise invalid("idempotency_key needs name: the key is kept under the agent's folder, so a retry must "
                      "name the same agent", field="name")
    key = idempotency.keyed("register_agent", idempotency_key, {
        "name": name.lower() if name else None, "program": program, "model": model,
        "task_description": task_description})
    program = _text(program, "program") if program is not None else None
    model = _text(model, "model") if model is not None else None
    task_description = _text(task_description, "task_description") if task_description is not None else None
    if name is not None:
        check_agent_name(name, name_field)
        if is_reserved_name(name):
            raise invalid(f"{OVERSEER} is the name of the project's human overseer and no agent may take it; "
                          "pick another name or omit it to get a generated one", field=name_field)
    archive = ctx.archive(project_key)
    slug = ctx.slug(project_key)
    token, agent_id, stamp, hlc = mint_token(), ctx.clock.new_id(), ctx.clock.now_ts(), ctx.tick()

    def fn(snap: Snapshot) -> Change:
        project = project_record(snap)
        existing = find_agent(snap, name) if name is not None else None
        if existing is not None and existing.id == agent_id:
            return Change("", result=(existing, project.id, token, False))  # our own write, seen on a rerun
        if key is not None and existing is not None and key.earlier(snap, existing.name, ctx.clock.now()):
            if claim is not None:
                claim(existing)  # a retry is still a claim on the name: only its owner gets the answer
            return Change("", result=(existing, project.id, None, True))
        if existing is not None and fresh_only:
            raise GitmailError(ALREADY_EXISTS, f"the name {existing.name} is already in use in this project "
                               "(names are compared without regard to case); "
                               "pick another or omit it to get a generated name",
                               {"name": existing.name})
        if existing is not None and claim is not None:
            claim(existing)  # decided on the very state the commit lands on: two new claimants never both win
        if existing is None:
            chosen = name or generate_name(lambda n: canonical_name(snap, n) is not None)
            agent = Agent(id=agent_id, name=chosen, program=program or "unknown", model=model or "unknown",
                          inception_ts=stamp, hlc=hlc, task_description=task_description or "",
                          token_hash=hash_token(token), node=archive.node)
            change = Change(with_reason(f"Register agent {chosen} ({agent.program}, {agent.model})", why),
                            author=chosen, result=(agent, project.id, token, False)).put_record(agent)
            if key is not None:
                change.put_record(key.record(chosen, chosen, stamp, True))
            return change
        updated = dataclasses.replace(existing)
        if program is not None:
            updated.program = program
        if model is not None:
            updated.model = model
        if task_description is not None:
            updated.task_description = task_description
        updated.status, updated.retired_at = "active", None
        issued = token if updated.token_hash == hash_token(token) else None  # minted by an earlier run
        if not updated.token_hash:
            issued, updated.token_hash = token, hash_token(token)
        if updated == existing:
            return Change("", result=(existing, project.id, None, False))
        updated.hlc = hlc
        change = Change(with_reason(f"Update agent {existing.name} ({updated.program}, {updated.model})", why),
                        author=existing.name, result=(updated, project.id, issued, False)).put_record(updated)
        if key is not None:
            change.put_record(key.record(existing.name, existing.name, stamp, True))
        return change

    agent, project_id, issued, replayed = archive.transact(fn).result
    ctx.touch(project_key, agent.name)
    # a retry gets the first answer (replayed), without the token it showed once
    return Registration(profile=agent_view(ctx, slug, agent, project_id), registration_token=issued,
                        replayed=True if replayed else None)


def register_agent(ctx: Context, project_key: str, program: str | None, model: str | None, *,
                   name: str | None = None, task_description: str | None = None,
                   claim: Claim | None = None, idempotency_key: str | None = None,
                   reason: str | None = None) -> Registration:
    """Create an agent, or update the profile of the one registered under ``name``.

    An update changes only the fields given: None keeps what the profile holds
    (a new agent gets ``unknown`` for a missing program or model). Whether the
    name is free and the write that takes it are one step (one
    compare-and-swap commit). With ``claim``, an existing agent is updated
    only if ``claim(agent)`` accepts the caller as that agent; otherwise the
    error it raises is the call's outcome and nothing is written. Without
    it (the operator's CLI), the profile is updated.
    """
    return _register(ctx, project_key, program, model, name, task_description, fresh_only=False, name_field="name",
                     claim=claim, idempotency_key=idempotency_key, reason=reason)


def create_agent_identity(ctx: Context, project_key: str, program: str, model: str,
                          *, name_hint: str | None = None, task_description: str = "",
                          return_registration_token: bool = True) -> Registration:
    """Always a new agent: a taken ``name_hint`` is an error, never an update."""
    made = _register(ctx, project_key, program, model, name_hint, task_description, fresh_only=True,
                     name_field="name_hint")
    return made if return_registration_token else dataclasses.replace(made, registration_token=None)


@dataclass(frozen=True)
class Credential:
    """What a proof of an agent rests on: the registration holding its name, and the hash of its token now.

    A human profile (the overseer) is proved by no token, whatever its file
    says: its ``token_hash`` here is None.
    """

    name: str
    id: str
    token_hash: str | None
    # The hash of the agent's headless key while it may prove the agent now (see ``usable_key``). Not part of
    # what a session is bound under: a key ending does not unbind a session its token opened.
    key_hash: str | None = field(default=None, compare=False)

    @classmethod
    def of(cls, agent: Agent, *, key_hash: str | None = None) -> Credential:
        return cls(agent.name, agent.id, None if agent.human else agent.token_hash, key_hash)

    @classmethod
    def issued(cls, made: Registration) -> Credential:
        """The credential a registration answer carries with its new ``registration_token``."""
        assert made.registration_token is not None, "a registration that issued no token proves nobody"
        return cls(made.profile.name, made.profile.id, hash_token(made.registration_token))

    def proved_by(self, token: object) -> bool:
        return token_matches(token, self.token_hash) or token_matches(token, self.key_hash)


def usable_key(ctx: Context, slug: str, agent: Agent) -> str | None:
    """The hash of ``agent``'s headless key if the key proves it now, else None.

    A key proves an active agent (never the overseer) until ``key_expires_at``,
    and with a ``refresh_window_s`` only while the agent acted (by any
    credential) within that many seconds.
    """
    if agent.key_hash is None or agent.human or agent.status != "active" or agent.key_expires_at is None:
        return None
    now = ctx.clock.now()
    if parse_ts(agent.key_expires_at) <= now:
        return None
    if agent.refresh_window_s is not None:
        if parse_ts(last_active(ctx, slug, agent)) + dt.timedelta(seconds=agent.refresh_window_s) <= now:
            return None
    return agent.key_hash


def credential(ctx: Context, project_key: str, agent_name: object) -> Credential | None:
    """The credential of the agent holding ``agent_name`` now (None if nobody does)."""
    if not isinstance(agent_name, str) or not agent_name or not ctx.store.exists(project_key):
        return None
    agent = find_agent(ctx.archive(project_key).snapshot(), agent_name)
    if agent is None:
        return None
    return Credential.of(agent, key_hash=usable_key(ctx, ctx.slug(project_key), agent))


def verify_agent_token(ctx: Context, project_key: str, agent_name: str, token: str) -> bool:
    """Whether ``token`` is the registration token of ``agent_name`` (never true of a human profile)."""
    held = credential(ctx, project_key, agent_name)
    return held is not None and held.proved_by(token)


def identity_clash(ctx: Context, project_key: str, agent_name: str, *, token: str | None = None,
                   registration: str | None = None) -> GitmailError | None:
    """The error for a caller whose registration of ``agent_name`` lost a clash, or None.

    Two machines that could not see each other may both register one name.
    When their archives meet, the earlier registration keeps the name and
    the other is parked under ``conflicts/`` (see the sync's merge rules).
    A caller proving itself with the parked registration's token (or a
    session bound to its id) is not that agent any more: it gets this error,
    which says what happened and how to go on, instead of a bare refusal,
    and never acts as the agent that kept the name.
    """
    if not ctx.store.exists(project_key) or not isinstance(agent_name, str) or not agent_name:
        return None
    snap = ctx.archive(project_key).snapshot()
    kept = find_agent(snap, agent_name)
    name = kept.name if kept is not None else agent_name
    folder = f"{CONFLICTS}/{profile_path(name)}"
    for entry in snap.listdir(folder):
        record = snap.load(f"{folder}/{entry}", Conflict)
        if record is None or record.encoding != "utf-8":
            continue
        try:
            parked = Agent.from_bytes(record.content.encode("utf-8"), profile_path(name))
        except GitmailError:
            continue
        if not ((token and token_matches(token, parked.token_hash)) or parked.id == registration):
            continue
        winner = (f"the registration made {kept.inception_ts} on machine {kept.hlc.node}" if kept is not None
                  else "another registration")
        return GitmailError(
            IDENTITY_CLASH,
            f"the name {name} was registered on two machines while they could not see each other, and {winner} "
            f"keeps it; yours (made {parked.inception_ts} on machine {parked.hlc.node}) is kept for the record in "
            f"{folder}/{entry}. Register again under another name (register_agent with a new name gives you a "
            f"new token) and tell your correspondents: mail to {name} now reaches the other agent",
            {"agent": name, "parked": f"{folder}/{entry}", "parked_id": parked.id,
             "kept_id": kept.id if kept is not None else None})
    return None


def reset_agent_token(ctx: Context, project_key: str, agent_name: str) -> TokenReset:
    """Issue a new token for an agent (an operator's recovery path); the old one stops working.

    Every session that proved the agent with the old token stops acting as
    it (the server compares the hash a binding was made under with the
    profile's). A human profile has no token to reset.
    """
    archive = ctx.archive(project_key)
    token, hlc = mint_token(), ctx.tick()

    def fn(snap: Snapshot) -> Change:
        agent = require_agent(snap, agent_name)
        if agent.human:
            raise invalid(f"{agent.name} is a person (the project's human overseer): it acts through the CLI and "
                          "the web view and never holds a token", field="name")
        agent.token_hash, agent.hlc = hash_token(token), hlc
        return Change(f"Issue a new token for agent {agent.name}", result=agent.name).put_record(agent)

    return TokenReset(agent=archive.transact(fn).result, registration_token=token)


def whois(ctx: Context, project_key: str, agent_name: str, *, include_recent_commits: bool = True,
          commit_limit: int = 5, readers: list[str] | None = None) -> Whois:
    """An agent's profile, plus its latest commits to the archive.

    A commit that wrote a journal entry quotes the entry in its summary:
    it is shown with its summary only when one of ``readers`` (the agents the
    caller proved) may read that journal, as ``read_journal`` decides (the
    journal's agent, or one above it); to anyone else it is listed with a
    summary that says only that an entry was written. ``readers`` None is
    the operator, who reads every journal.
    """
    if not isinstance(commit_limit, int) or isinstance(commit_limit, bool) or not 0 <= commit_limit <= 100:
        raise invalid("commit_limit must be a whole number from 0 to 100", field="commit_limit")
    archive = ctx.archive(project_key)
    snap = archive.snapshot()
    agent = require_agent(snap, agent_name)
    view = agent_view(ctx, ctx.slug(project_key), agent, project_record(snap).id)
    expiry = hierarchy.effective_expiry(snap, agent)
    if view.status == "active" and expiry is not None and parse_ts(expiry) <= ctx.clock.now():
        view = dataclasses.replace(view, status="dead")  # past its (or an ancestor's) expiry: AGENT_EXPIRED
    if not include_recent_commits:
        return Whois(profile=view)
    readable = _journal_reader(snap, readers)
    shown = []
    for commit in recent_commits(ctx, project_key, agent.name, commit_limit):
        summary = commit.summary
        if not all(readable(owner) for owner in commit.journals):
            summary = (f"{agent.name} wrote to the journal of {', '.join(commit.journals)} (the entry is "
                       "shown only to that agent and the agents above it)")
        shown.append(AuthoredCommit(hexsha=commit.hexsha, summary=summary, authored_ts=commit.authored_ts))
    return Whois(profile=view, recent_commits=shown)


def _journal_reader(snap: Snapshot, readers: list[str] | None) -> Callable[[str], bool]:
    """Whether one of ``readers`` may read a journal, by the journal's agent (None: everyone may)."""
    if readers is None:
        return lambda owner: True
    proved = [agent for name in readers if (agent := find_agent(snap, name)) is not None]

    def readable(owner: str) -> bool:
        agent = find_agent(snap, owner)
        return agent is not None and any(p.id == agent.id or hierarchy.is_above(snap, p, agent) for p in proved)

    return readable


def recent_commits(ctx: Context, project_key: str, author: str, limit: int) -> list[JournalCommit]:
    """An agent's latest ``limit`` commits, newest first: from the derived history, or from git while it is down.

    Each names the agents whose journal it wrote to (``journals``), whose
    text whois shows or hides. The derived history answers
    in what the answer holds; a walk of ``git log`` costs more the longer
    the agent has been quiet.
    """
    if limit <= 0:
        return []
    try:
        found = indexer_for(ctx.store).project(project_key).commits_by(author, limit)
    except IndexUnavailable:
        return [JournalCommit(**c) for c in commits_by(ctx.archive(project_key), author, limit)]
    return [JournalCommit(hexsha=c["commit"], summary=c["summary"],
                          authored_ts=format_ts(dt.datetime.fromtimestamp(c["time"], tz=dt.UTC)),
                          journals=c["journals"]) for c in found]


def list_agents(ctx: Context, project_key: str, *, active_only: bool = True) -> list[AgentProfile]:
    """The project's agent directory, sorted by name."""
    snap = ctx.archive(project_key).snapshot()
    project_id, slug = project_record(snap).id, ctx.slug(project_key)
    # The agent directory is a hot read: answered by the index, caught up to the tip.
    directory = indexer_for(ctx.store).project(project_key).agents()
    return [agent_view(ctx, slug, agent, project_id) for agent in directory
            if agent.status == "active" or not active_only]


def _set_status(ctx: Context, project_key: str, agent_name: str, status: str, verb: str) -> AgentProfile:
    archive = ctx.archive(project_key)
    stamp, hlc = ctx.clock.now_ts(), ctx.tick()

    def fn(snap: Snapshot) -> Change:
        project = project_record(snap)
        agent = require_agent(snap, agent_name)
        if agent.status == status:
            return Change("", result=(agent, project.id))
        if status == "active":
            agent.status, agent.retired_at, agent.hlc = status, None, hlc
        else:
            agent.leave(status, stamp, hlc)
        return Change(f"{verb} agent {agent.name}", author=agent.name, result=(agent, project.id)).put_record(agent)

    agent, project_id = archive.transact(fn).result
    return agent_view(ctx, ctx.slug(project_key), agent, project_id)


def retire_agent(ctx: Context, project_key: str, agent_name: str) -> AgentProfile:
    """Stop an agent from sending or receiving new mail; its history stays."""
    return _set_status(ctx, project_key, agent_name, "retired", "Retire")


def unretire_agent(ctx: Context, project_key: str, agent_name: str) -> AgentProfile:
    """Make a retired or deregistered agent active again."""
    return _set_status(ctx, project_key, agent_name, "active", "Restore")


def deregister_agent(ctx: Context, project_key: str, agent_name: str) -> AgentProfile:
    """Take an agent off the roster; its mail stays for audit."""
    return _set_status(ctx, project_key, agent_name, "deregistered", "Deregister")


def hard_delete_agent(ctx: Context, project_key: str, agent_name: str, *, confirmation: str) -> AgentDeleted:
    """Remove an agent's files, the messages it sent, its contacts and reservations from the tip.

    Its children are orphaned in the same commit (see
    :func:`gitmail.coord.hierarchy.orphaned`): each keeps acting as itself,
    with what it effectively held, and only the operator is above it, so a
    later registration of the deleted name inherits nothing.
    """
    check_confirmation(confirmation, "deleting an agent")
    archive = ctx.archive(project_key)
    stamp, hlc = ctx.clock.now_ts(), ctx.tick()

    def fn(snap: Snapshot) -> Change:
        agent = require_agent(snap, agent_name)
        name = agent.name
        change = Change("", result=None)
        removed_messages = []
        for other in agent_names(snap):  # mail held for the deleted agent's approval goes on without it
            if other != name:
                release_held(snap, change, other, name, False, hlc, clock=ctx.clock)
        for path in snap.walk(agent_folder(name, OUTBOX)):
            copy = snap.load(path, Message)
            if copy is None:
                continue
            removed_messages.append(copy.id)
            remove_message(snap, change, copy, reason="agent-deleted", stamp=stamp, hlc=hlc)
        for path in snap.walk(agent_dir(name)):
            change.delete(path)
        for path in snap.walk(CONTACTS):
            requester, target = path[len(CONTACTS) + 1:-len(".yaml")].split("/")
            if name in (requester, target):
                change.delete(path)
        for path in snap.walk(RESERVATIONS):
            reservation = snap.load(path, Reservation)
            if reservation is not None and reservation.agent == name:
                change.delete(path)
        orphans = hierarchy.children(snap, agent)
        for child in orphans:
            change.put_record(hierarchy.orphaned(snap, child, agent, hlc))
        change.message = f"Delete agent {name} and the {len(removed_messages)} message(s) it sent"
        if orphans:
            names = ", ".join(child.name for child in orphans)
            change.message += (f"\n\n{names} now {'answers' if len(orphans) == 1 else 'answer'} to the operator "
                               f"(orphaned from {name}, registration {agent.id}).\n")
        change.result = AgentDeleted(
            deleted=True, agent=name, id=agent.id, orphaned=[child.name for child in orphans],
            messages_removed=len(removed_messages),
            files_removed=sum(1 for data in change.edits.values() if data is None),
            note="the files are gone from the current tree, but git history still holds them "
                 "(git log -p shows them); erasing them everywhere means rewriting history on every clone")
        return change

    result: AgentDeleted = archive.transact(fn).result
    ctx.activity.forget(ctx.slug(project_key), result.agent)
    return result


def retire_inactive_agents(ctx: Context, project_key: str, agent_name: str,
                           *, inactive_seconds: int = DEFAULT_INACTIVE_SECONDS, include_reserved: bool = False,
                           dry_run: bool = False) -> InactiveRetired:
    """Retire agents with no activity for ``inactive_seconds`` (at least 60).

    Activity is any commit the agent authored, any call seen by this process,
    or its registration. The caller is never retired, and an agent holding an
    active reservation is skipped unless ``include_reserved``.
    """
    if not isinstance(inactive_seconds, (int, float)) or isinstance(inactive_seconds, bool) or inactive_seconds < 0:
        raise invalid("inactive_seconds must be a non-negative number of seconds", field="inactive_seconds")
    threshold = max(RETIRE_FLOOR_SECONDS, int(inactive_seconds))
    archive = ctx.archive(project_key)
    slug = ctx.slug(project_key)
    snap = archive.snapshot()
    caller = require_agent(snap, agent_name)
    since = ctx.clock.time() - threshold
    recent = authors_since(archive, since)
    cutoff = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(since))
    reserved = {r.agent for r in reservations.active(ctx, project_key, snap, ctx.clock.now())}
    candidates: list[InactiveAgent] = []
    skipped: list[SkippedAgent] = []
    for agent in profiles(snap):
        name = agent.name
        if agent.status != "active" or name == caller.name or is_reserved_name(name):
            continue  # the human overseer is no agent: retiring it would refuse the replies agents send it
        seen = max(filter(None, (last_active(ctx, slug, agent), recent.get(name.lower()))))
        if seen[:19] >= cutoff:
            continue
        if name in reserved and not include_reserved:
            skipped.append(SkippedAgent(agent=name, reason="holds an active file reservation"))
            continue
        candidates.append(InactiveAgent(agent=name, last_active_ts=seen))
    result = InactiveRetired(retired=candidates, skipped=skipped, threshold_seconds=threshold, dry_run=bool(dry_run))
    if dry_run or not candidates:
        return result
    stamp, hlc = ctx.clock.now_ts(), ctx.tick()
    names = [c.agent for c in candidates]

    def fn(tip: Snapshot) -> Change:
        change = Change(f"{caller.name} retired {len(names)} inactive agent(s): {', '.join(names)}", author=caller.name)
        for name in names:
            agent = find_agent(tip, name)
            if agent is not None and agent.status == "active":
                agent.leave("retired", stamp, hlc)
                change.put_record(agent)
        return change

    archive.transact(fn)
    return result
