"""Identity writes in the hierarchy: spawning an agent below you, updating, putting to sleep and waking.

Who may do what is decided by :mod:`gitmail.coord.hierarchy` (scopes,
who is above whom) and :mod:`gitmail.coord.acting` (sleep and wake); this
module makes each one a single transaction that checks on the state it
commits onto, honours an ``idempotency_key`` the way sends do (the key is
filed under the acting agent, a retry gets the first answer and writes
nothing) and records a ``reason`` in the commit message.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from dataclasses import field
from typing import Any, TypedDict

from gitmail.coord import acting, hierarchy, loads
from gitmail.coord.capabilities import MAX_CAPABILITIES, check_capability
from gitmail.coord.context import Context
from gitmail.coord.lookup import canonical_name, find_agent, profiles, project_record, require_agent
from gitmail.model.clock import format_ts, parse_ts
from gitmail.model.errors import AGENT_ID_TAKEN, ALREADY_EXISTS, NOT_ABOVE, GitmailError, invalid
from gitmail.model.namegen import generate_name
from gitmail.model.names import OVERSEER, check_agent_name, is_reserved_name
from gitmail.model.records import CARD_FIELDS, LIFECYCLES, RISK_TIERS, WAKE_CHANNELS, Agent
from gitmail.model.results import FLATTEN, OMIT_NONE, Result, renamed, result
from gitmail.storage.engine import Change
from gitmail.storage.snapshot import Snapshot

from . import idempotency
from .agents import AgentProfile, Registration, agent_view, check_reason, with_reason
from .tokens import hash_token, mint_key, mint_token

EPHEMERAL_HOURS = 24  # an ephemeral agent spawned without an expiry ends this long after it was spawned
KEY_DAYS = 365  # a headless key ends with its agent, and at the latest this long after it was minted...
KEY_DAYS_OPEN = 90  # ...or this long after, for an agent without an end
MIN_REFRESH_WINDOW_S = 60
MAX_REFRESH_WINDOW_S = 90 * 86_400
REPLAYED_TOKEN_NOTE = ("this is a retry of an earlier call with the same idempotency_key: the token was returned "
                       "only by that call. Act as the agent with acting_as (you are above it), or have the "
                       "operator issue a new one (gitmail agents reset-token)")


def _text(value: object, field: str, limit: int) -> str:
    if not isinstance(value, str) or len(value) > limit:
        raise invalid(f"{field} must be text of at most {limit} characters", field=field)
    return value.strip()


def _choice(value: object, field: str, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise invalid(f"{field} must be one of {', '.join(choices)}; got {value!r}", field=field)
    assert isinstance(value, str)
    return value


def _capabilities(values: object) -> list[str]:
    if not isinstance(values, list) or len(values) > MAX_CAPABILITIES:
        raise invalid(f"capabilities must be a list of at most {MAX_CAPABILITIES} names, such as ['review']",
                      field="capabilities")
    return sorted({check_capability(v) for v in values})


def _expiry(value: object, field: str = "expires_at") -> str | None:
    if value is None:
        return None
    try:
        return format_ts(parse_ts(value))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise invalid(f"{field} must be an ISO 8601 time such as 2026-12-31T18:00:00Z; got {value!r}",
                      field=field) from None


class CardFields(TypedDict, total=False):
    """The card fields of an agent's profile a spawn sets or an update changes, checked."""

    vendor: str
    environment: str
    purpose: str
    risk_tier: str
    capabilities: list[str]
    task_description: str


class AgentChanges(CardFields, total=False):
    """What an update changes: card fields (and so the card's version), and (only from above) the lifecycle,
    scopes and expiry."""

    card_version: int
    lifecycle: str
    scopes: list[str]
    expires_at: str
    loads: list[str]


def _card_fields(card: dict[str, Any]) -> CardFields:
    """The card fields given (None: leave as is), checked."""
    out: CardFields = {}
    for key in ("vendor", "environment"):
        if card.get(key) is not None:
            out[key] = _text(card[key], key, 128)
    if card.get("purpose") is not None:
        out["purpose"] = _text(card["purpose"], "purpose", 4096)
    if card.get("risk_tier") is not None:
        out["risk_tier"] = _choice(card["risk_tier"], "risk_tier", RISK_TIERS)
    if card.get("capabilities") is not None:
        out["capabilities"] = _capabilities(card["capabilities"])
    if card.get("task_description") is not None:
        out["task_description"] = _text(card["task_description"], "task_description", 4096)
    return out


@result
class Spawned(Registration):
    """An agent spawned below another: with its token when this call made it, or ``replayed`` and a note.

    A spawn asked for a headless key carries it, once, with its end.
    """

    bootstrap_key: str | None = field(default=None, metadata=OMIT_NONE)
    key_expires_at: str | None = field(default=None, metadata=OMIT_NONE)
    note: str | None = field(default=None, metadata=OMIT_NONE)
    # the folders it loads memory and skills from (absent: the project's default)
    load_memory_and_skills: list[str] | None = field(default=None, metadata=OMIT_NONE)


@result
class AgentUpdated(Result):
    """An agent's profile after an update, and whether the update changed it."""

    profile: AgentProfile = field(metadata=FLATTEN)
    changed: bool
    replayed: bool | None = field(default=None, metadata=OMIT_NONE)
    # the folders it loads memory and skills from (absent: the project's default)
    load_memory_and_skills: list[str] | None = field(default=None, metadata=OMIT_NONE)


@result
class SleepState(Result):
    """Whether an agent sleeps now (and until what), and whether this call changed it."""

    agent: str
    asleep: bool
    until: str | None
    changed: bool
    replayed: bool | None = field(default=None, metadata=OMIT_NONE)


@result
class Placed(Result):
    """An agent as its position in the hierarchy lists it, with its card's version and wake channel."""

    name: str
    status: str
    card: hierarchy.Card = field(metadata=FLATTEN)
    card_version: int = 0
    wake_channel: str = "brief"


@result
class Position(Result):
    """Where an agent stands: itself, the agents above it (nearest first), its siblings, its children, its expiry.

    Siblings are the other children of its parent; an agent without a parent
    has none listed (every top-level agent is in ``list_agents``).
    """

    me: Placed = field(metadata=renamed("self"))
    ancestors: list[Placed]
    siblings: list[Placed]
    children: list[Placed]
    effective_expires_at: str | None


def _view(ctx: Context, project_key: str, snap: Snapshot, agent: Agent) -> AgentProfile:
    return agent_view(ctx, ctx.slug(project_key), agent, project_record(snap).id)


# -- spawn ------------------------------------------------------------------------------

def spawn(ctx: Context, project_key: str, parent: str, scope: list[str], *, name: str | None = None,
          program: str | None = None, model: str | None = None, task_description: str = "",
          expires_at: str | None = None, lifecycle: str = "intermittent", capabilities: list[str] | None = None,
          vendor: str = "", purpose: str = "", risk_tier: str = "standard", environment: str = "",
          seat: str | None = None, idempotency_key: str | None = None, reason: str | None = None,
          bootstrap_key: bool = False, refresh_window_s: int | None = None,
          load_memory_and_skills: list[str] | None = None) -> Spawned:
    """Create an agent below ``parent`` holding ``scope`` (a subset of the parent's); return it with its token.

    The parent must be a manager somewhere; the child's expiry is never later
    than the earliest expiry above it. The child's token is returned once
    (only its hash is stored); the parent and every agent above it may also
    act as the child with ``acting_as``. With ``bootstrap_key`` the child also
    gets a long-lived key for a headless agent (see :func:`_key_end`), which
    proves it as its token does and dies when it is retired; with
    ``refresh_window_s`` the key proves it only while it acted within that
    many seconds. ``load_memory_and_skills`` names the folders whose memory
    and skills the child is handed when it takes its seat (each one the
    parent may read, :mod:`gitmail.coord.loads`); None leaves it on the
    project's default.
    """
    window = _refresh_window(refresh_window_s, bootstrap_key)
    folders = loads.check_folders(load_memory_and_skills) if load_memory_and_skills is not None else None
    check_agent_name(parent, "agent_name")
    wanted = hierarchy.parse_scopes(scope)
    _check_child_name(name)
    fields = _card_fields({"vendor": vendor, "purpose": purpose, "risk_tier": risk_tier, "environment": environment,
                           "capabilities": capabilities or [], "task_description": task_description})
    lifecycle = _choice(lifecycle, "lifecycle", LIFECYCLES)
    expires = _expiry(expires_at)
    program = _text(program, "program", 512) if program is not None else None
    model = _text(model, "model", 512) if model is not None else None
    why = check_reason(reason)
    key = idempotency.keyed("spawn_agent", idempotency_key, {
        "name": name, "scope": [str(s) for s in wanted], "program": program, "model": model, "expires_at": expires,
        "lifecycle": lifecycle, "bootstrap_key": bool(bootstrap_key), "refresh_window_s": window, "loads": folders,
        **fields})
    archive = ctx.archive(project_key)
    token, agent_id, hlc = mint_token(), ctx.clock.new_id(), ctx.tick()
    headless = mint_key() if bootstrap_key else None
    at = ctx.clock.now()

    def fn(snap: Snapshot) -> Change:
        me = acting.require_actor(snap, parent, seat, at=at)
        if key is not None and (earlier := key.earlier(snap, me.name, at)) is not None:
            return Change("", result=_replayed(ctx, project_key, snap, earlier.target))
        existing = find_agent(snap, name) if name is not None else None
        if existing is not None and existing.id == agent_id:  # written by this very call, seen on a newer tip
            return Change("", result=_spawned(ctx, project_key, snap, existing, token, headless))
        hierarchy.require_manager(me)
        hierarchy.check_subset(snap, me, wanted)
        loads.check_readable(snap, me, folders or [])
        if existing is not None:
            raise GitmailError(ALREADY_EXISTS, f"the name {existing.name} is already in use in this project; pick "
                               "another or omit name to get a generated one", {"name": existing.name})
        ends = _child_end(snap, me, expires, lifecycle, at)
        chosen = name or generate_name(lambda n: canonical_name(snap, n) is not None)
        child = Agent(id=agent_id, name=chosen, program=program or me.program, model=model or me.model,
                      inception_ts=format_ts(at), hlc=hlc, token_hash=hash_token(token), parent=me.name,
                      parent_id=me.id, scopes=[str(s) for s in wanted], expires_at=ends, lifecycle=lifecycle,
                      node=archive.node, loads=folders, **fields)
        if headless is not None:
            child.key_hash, child.key_expires_at = hash_token(headless), _key_end(at, ends)
            child.refresh_window_s = window
        scopes = ", ".join(child.scopes)
        change = Change(with_reason(f"{me.name} spawned {chosen} ({scopes}; {lifecycle})", why), author=me.name,
                        result=_spawned(ctx, project_key, snap, child, token, headless))
        change.put_record(child)
        if key is not None:
            change.put_record(key.record(me.name, chosen, format_ts(at), True))
        return change

    result = archive.transact(fn).result
    ctx.touch(project_key, parent)
    return result


def _check_child_name(name: str | None) -> None:
    """A name asked for a child: a valid agent name, and not the overseer's."""
    if name is None:
        return
    check_agent_name(name, "name")
    if is_reserved_name(name):
        raise invalid(f"{OVERSEER} is the name of the project's human overseer; pick another name", field="name")


def _spawned(ctx: Context, project_key: str, snap: Snapshot, child: Agent, token: str,
             headless: str | None) -> Spawned:
    """The answer of the call that made ``child``: its token and headless key (if one was asked), given once."""
    return Spawned(profile=_view(ctx, project_key, snap, child), registration_token=token,
                   load_memory_and_skills=child.loads, bootstrap_key=headless, key_expires_at=child.key_expires_at)


def _replayed(ctx: Context, project_key: str, snap: Snapshot, target: str | None) -> Spawned:
    """The answer to a retry of an earlier spawn with the same idempotency key: the child, without its secrets."""
    child = require_agent(snap, target, "target")
    return Spawned(profile=_view(ctx, project_key, snap, child), replayed=True, load_memory_and_skills=child.loads,
                   note=REPLAYED_TOKEN_NOTE)


def _child_end(snap: Snapshot, parent: Agent, expires: str | None, lifecycle: str, at: dt.datetime) -> str | None:
    """When a child spawned at ``at`` ends: as asked, or an ephemeral's day, never after ``parent`` (checked)."""
    ceiling = hierarchy.effective_expiry(snap, parent)
    ends = expires
    if ends is None and lifecycle == "ephemeral":
        ends = format_ts(at + dt.timedelta(hours=EPHEMERAL_HOURS))
        if ceiling is not None and parse_ts(ceiling) < parse_ts(ends):
            ends = ceiling
    if ends is None and ceiling is not None:
        ends = ceiling  # a child never outlives its parent: it inherits the parent's end
    hierarchy.check_child_expiry(ceiling, ends)
    if ends is not None and parse_ts(ends) <= at:
        raise invalid(f"expires_at {ends} has already passed; give a time in the future", field="expires_at")
    return ends


def _key_end(at: dt.datetime, child_ends: str | None) -> str:
    """When a headless key minted at ``at`` ends: with its agent, at most KEY_DAYS on; KEY_DAYS_OPEN for an open end."""
    if child_ends is None:
        return format_ts(at + dt.timedelta(days=KEY_DAYS_OPEN))
    return min(child_ends, format_ts(at + dt.timedelta(days=KEY_DAYS)), key=parse_ts)


def _refresh_window(refresh_window_s: object, bootstrap_key: bool) -> int | None:
    """``refresh_window_s`` checked: whole seconds within the bounds, and only beside ``bootstrap_key``."""
    if refresh_window_s is None:
        return None
    if not bootstrap_key:
        raise invalid("refresh_window_s applies to a headless key: pass bootstrap_key=true with it, or leave it out",
                      field="refresh_window_s")
    if (not isinstance(refresh_window_s, int) or isinstance(refresh_window_s, bool)
            or not MIN_REFRESH_WINDOW_S <= refresh_window_s <= MAX_REFRESH_WINDOW_S):
        raise invalid(f"refresh_window_s must be whole seconds from {MIN_REFRESH_WINDOW_S} to {MAX_REFRESH_WINDOW_S} "
                      f"(90 days); got {refresh_window_s!r}", field="refresh_window_s")
    return refresh_window_s


# -- update -----------------------------------------------------------------------------

def update(ctx: Context, project_key: str, actor: str, *, target: str | None = None,
           scope: list[str] | None = None, expires_at: str | None = None, lifecycle: str | None = None,
           capabilities: list[str] | None = None, vendor: str | None = None, purpose: str | None = None,
           risk_tier: str | None = None, environment: str | None = None, task_description: str | None = None,
           seat: str | None = None, idempotency_key: str | None = None, reason: str | None = None,
           load_memory_and_skills: list[str] | None = None) -> AgentUpdated:
    """Update ``target`` (default: ``actor`` itself); fields left None stay as they are.

    The agent itself or one above it may change its card (capabilities,
    vendor, purpose, risk tier, environment, task); acting on itself needs
    the editor role, as any card write does. Only an agent above it may
    change its scopes (within its parent's), its expiry (never past the
    expiry above it), its lifecycle or the folders it loads
    (``load_memory_and_skills``, each one the updater may read; [] loads
    nothing): no agent widens its own authority.
    """
    check_agent_name(actor, "agent_name")
    fields = AgentChanges(**_card_fields({"vendor": vendor, "purpose": purpose, "risk_tier": risk_tier,
                                          "environment": environment, "capabilities": capabilities,
                                          "task_description": task_description}))
    wanted = hierarchy.parse_scopes(scope) if scope is not None else None
    expires = _expiry(expires_at)
    if lifecycle is not None:
        fields["lifecycle"] = _choice(lifecycle, "lifecycle", LIFECYCLES)
    folders = loads.check_folders(load_memory_and_skills) if load_memory_and_skills is not None else None
    why = check_reason(reason)
    structural = wanted is not None or expires is not None or lifecycle is not None or folders is not None
    if not fields and not structural:
        raise invalid("name at least one field to change (scope, expires_at, lifecycle, load_memory_and_skills, "
                      "capabilities, vendor, purpose, risk_tier, environment, task_description)", field="target")
    key = idempotency.keyed("update_agent", idempotency_key, {
        "target": (target or actor).lower(), "scope": [str(s) for s in wanted] if wanted is not None else None,
        "expires_at": expires, "loads": folders, **fields})
    archive = ctx.archive(project_key)
    hlc = ctx.tick()
    at = ctx.clock.now()

    def fn(snap: Snapshot) -> Change:
        me = acting.require_actor(snap, actor, seat, at=at)
        profile = require_agent(snap, target or me.name, "target")
        if key is not None and (earlier := key.earlier(snap, me.name, at)) is not None:
            return Change("", result=_updated(ctx, project_key, snap, profile, bool(earlier.changed), replayed=True))
        hierarchy.require_self_or_above(snap, me, profile, "update")
        if me.id == profile.id:
            if structural:
                raise GitmailError(
                    NOT_ABOVE, f"{me.name} may not change its own scopes, expiry, lifecycle or the folders it loads: "
                    "only an agent above it may (an agent never widens its own authority)",
                    {"agent": me.name, "target": me.name})
            hierarchy.require_role(snap, me, "editor", "publish its capability card")
        values = _structural(snap, me, profile, AgentChanges(**fields), wanted, expires, folders)
        changed = any(getattr(profile, k) != v for k, v in values.items())
        if any(k in CARD_FIELDS and getattr(profile, k) != v for k, v in values.items()):
            values["card_version"] = profile.card_version + 1  # the card changed: its next version
        if not changed:
            return Change("no change", result=_updated(ctx, project_key, snap, profile, False))
        updated = dataclasses.replace(profile, hlc=hlc, **values)
        names = ", ".join(sorted(values))
        who = "its own" if me.id == profile.id else f"{profile.name}'s"
        change = Change(with_reason(f"{me.name} updated {who} {names}", why), author=me.name,
                        result=_updated(ctx, project_key, snap, updated, True)).put_record(updated)
        if expires is not None:
            for below in _outliving(snap, profile, expires):  # nobody below may end later than it now does
                change.put_record(dataclasses.replace(below, expires_at=expires, hlc=hlc))
        if key is not None:
            change.put_record(key.record(me.name, profile.name, format_ts(at), True))
        return change

    result = archive.transact(fn).result
    ctx.touch(project_key, actor)
    return result


@result
class CardSet(Result):
    """The capability card an agent published with ``set_card``: its new version and what it says."""

    agent: str
    card_version: int
    wake_channel: str
    capabilities: list[str]
    vendor: str
    purpose: str
    risk_tier: str
    environment: str


def check_wake_channel(value: object) -> str:
    """``value`` as a wake channel (INVALID_ARGUMENT naming the choices otherwise)."""
    return _choice(value, "wake_channel", WAKE_CHANNELS)


def set_card(ctx: Context, project_key: str, agent: str, *, wake_channel: str = "brief",
             capabilities: list[str] | None = None, vendor: str | None = None, purpose: str | None = None,
             risk_tier: str | None = None, environment: str | None = None, seat: str | None = None) -> CardSet:
    """Publish the next version of ``agent``'s own card: ``wake_channel`` and the card fields given (None: as is).

    Every call publishes a new version (one more than the last), even when
    the fields are the ones already published: a version names one
    publication, which other machines order cards by (see the merge rule in
    :mod:`gitmail.sync.merge`). Publishing a card needs the editor role.
    """
    check_agent_name(agent, "agent_name")
    channel = check_wake_channel(wake_channel)
    fields = _card_fields({"vendor": vendor, "purpose": purpose, "risk_tier": risk_tier, "environment": environment,
                           "capabilities": capabilities})
    archive = ctx.archive(project_key)
    hlc = ctx.tick()
    at = ctx.clock.now()

    def fn(snap: Snapshot) -> Change:
        me = acting.require_actor(snap, agent, seat, at=at)
        hierarchy.require_role(snap, me, "editor", "publish its capability card")
        card = dataclasses.replace(me, hlc=hlc, wake_channel=channel, card_version=me.card_version + 1, **fields)
        done = CardSet(agent=me.name, card_version=card.card_version, wake_channel=channel,
                       capabilities=card.capabilities, vendor=card.vendor, purpose=card.purpose,
                       risk_tier=card.risk_tier, environment=card.environment)
        return Change(f"{me.name} published card version {card.card_version} (wake by {channel})", author=me.name,
                      result=done).put_record(card)

    done: CardSet = archive.transact(fn).result
    ctx.touch(project_key, done.agent)
    return done
def _updated(ctx: Context, project_key: str, snap: Snapshot, profile: Agent, changed: bool, *,
             replayed: bool | None = None) -> AgentUpdated:
    return AgentUpdated(profile=_view(ctx, project_key, snap, profile), changed=changed, replayed=replayed,
                        load_memory_and_skills=profile.loads)


def _structural(snap: Snapshot, me: Agent, profile: Agent, values: AgentChanges, wanted: list[hierarchy.Scope] | None,
                expires: str | None, folders: list[str] | None) -> AgentChanges:
    """``values`` with the changes only an agent above ``profile`` makes, each checked: scopes, expiry, folders."""
    above = hierarchy.parent_of(snap, profile)  # not None when me is above profile: only then is this structural
    if wanted is not None:
        if above is None:
            raise invalid(f"{profile.name} is top-level (manager@* of its project); only agents spawned below "
                          "another have scopes to change", field="scope")
        hierarchy.check_subset(snap, above, wanted)
        values["scopes"] = [str(s) for s in wanted]
    if expires is not None:
        ceiling = hierarchy.effective_expiry(snap, above) if above is not None else None
        hierarchy.check_child_expiry(ceiling, expires)
        values["expires_at"] = expires
    if folders is not None:
        loads.check_readable(snap, me, folders)
        values["loads"] = folders
    return values


def _outliving(snap: Snapshot, agent: Agent, expires: str) -> list[Agent]:
    """The agents below ``agent`` whose expiry is missing or later than ``expires``."""
    end = parse_ts(expires)
    return [other for other in profiles(snap)
            if other.parent is not None and (other.expires_at is None or parse_ts(other.expires_at) > end)
            and any(a.id == agent.id for a in hierarchy.ancestors(snap, other))]


# -- sleep and wake -----------------------------------------------------------------------

def set_asleep(ctx: Context, project_key: str, target: str, asleep: bool, *, actor: str | None = None,
               until: str = "reply", seat: str | None = None, idempotency_key: str | None = None,
               reason: str | None = None) -> SleepState:
    """Put ``target`` to sleep (until a reply, or until woken) or wake it; ``actor`` None is the operator.

    An asleep agent keeps receiving mail, but every write as it is refused
    (AGENT_ASLEEP) and its seat cannot be taken. Who may do it:
    :func:`gitmail.coord.acting.sleep_decision` and
    :func:`~gitmail.coord.acting.wake_decision`.
    """
    check_agent_name(target, "target")
    if actor is not None:
        check_agent_name(actor, "agent_name")
    if asleep:
        until = acting.check_until(until)
    why = check_reason(reason)
    operation = "sleep_agent" if asleep else "wake_agent"
    key = idempotency.keyed(operation, idempotency_key, {"target": target.lower(), "until": until if asleep else None})
    if key is not None and actor is None:
        raise invalid("idempotency_key needs the agent doing it (the key is kept under its folder)",
                      field="idempotency_key")
    archive = ctx.archive(project_key)
    hlc = ctx.tick()
    at = ctx.clock.now()

    def outcome(profile: Agent, changed: bool, replayed: bool | None = None) -> SleepState:
        return SleepState(agent=profile.name, asleep=asleep, until=until if asleep else None, changed=changed,
                          replayed=replayed)

    def fn(snap: Snapshot) -> Change:
        # A retry is answered before the decision: the first call may have put the caller itself to sleep.
        me = find_agent(snap, actor) if key is not None and actor is not None else None
        if key is not None and me is not None and (earlier := key.earlier(snap, me.name, at)) is not None:
            return Change("", result=outcome(require_agent(snap, target, "target"), bool(earlier.changed), True))
        if asleep:
            profile, me = acting.sleep_decision(snap, actor, target, until, seat=seat, at=at)
        else:
            profile, me = acting.wake_decision(snap, actor, target, seat=seat, at=at)
        wanted_until = until if asleep else None
        changed = profile.asleep != asleep or (asleep and profile.sleep_until != wanted_until)
        if not changed:
            return Change("no change", result=outcome(profile, False))
        updated = dataclasses.replace(profile, asleep=asleep, sleep_until=wanted_until, hlc=hlc)
        who = me.name if me is not None else "a human"
        text = (f"{who} put {profile.name} to sleep (until {until})" if asleep else f"{who} woke {profile.name}")
        change = Change(with_reason(text, why), author=me.name if me is not None else None,
                        result=outcome(profile, True)).put_record(updated)
        if key is not None and me is not None:
            change.put_record(key.record(me.name, profile.name, format_ts(at), True))
        return change

    result = archive.transact(fn).result
    if actor is not None:
        ctx.touch(project_key, actor)
    return result


# -- reading the hierarchy ---------------------------------------------------------------

def position(ctx: Context, project_key: str, agent: str) -> Position:
    """Where ``agent`` stands: itself, the agents above it (nearest first), its siblings, its children."""
    snap = ctx.archive(project_key).snapshot()
    me = require_agent(snap, agent)

    def brief(profile: Agent) -> Placed:
        return Placed(name=profile.name, status=profile.status, card=hierarchy.card(profile),
                      card_version=profile.card_version, wake_channel=profile.wake_channel)

    above = hierarchy.ancestors(snap, me)
    siblings = [c for c in hierarchy.children(snap, above[0]) if c.id != me.id] if above else []
    return Position(me=brief(me), ancestors=[brief(a) for a in above], siblings=[brief(s) for s in siblings],
                    children=[brief(c) for c in hierarchy.children(snap, me)],
                    effective_expires_at=hierarchy.effective_expiry(snap, me))


def acting_identity(ctx: Context, project_key: str, parent: str, agent_id: str) -> str:
    """The agent ``agent_id`` names below ``parent``, made on first use: an ``agent_id`` call's acting identity.

    A name chosen per task. The first call naming it spawns an agent of that
    name below ``parent`` holding ``parent``'s own scopes (so the parent
    must be a manager somewhere, as for any spawn), ending when the parent
    does; later calls act as it, as ``acting_as`` would. A name held by an
    agent that is not below ``parent`` is AGENT_ID_TAKEN. Making it is not
    fenced by the parent's seat: a seat fences the parent's own writes.
    """
    check_agent_name(agent_id, "agent_id")
    if is_reserved_name(agent_id):
        raise invalid(f"{OVERSEER} is the name of the project's human overseer; choose another agent_id",
                      field="agent_id")
    archive = ctx.archive(project_key)
    if find_agent(archive.snapshot(), agent_id) is None:
        token, new, hlc, at = mint_token(), ctx.clock.new_id(), ctx.tick(), ctx.clock.now()

        def fn(snap: Snapshot) -> Change:
            me = require_agent(snap, parent, active=True)
            acting.check_able(snap, me, at=at)
            if find_agent(snap, agent_id) is not None:
                return Change("")  # made meanwhile (by this caller or another): judged below
            hierarchy.require_manager(me)
            child = Agent(id=new, name=agent_id, program=me.program, model=me.model, inception_ts=format_ts(at),
                          hlc=hlc, token_hash=hash_token(token), parent=me.name, parent_id=me.id,
                          scopes=[str(s) for s in hierarchy.scopes_of(me)],
                          expires_at=hierarchy.effective_expiry(snap, me), node=archive.node,
                          task_description=f"acting identity {agent_id} of {me.name}")
            return Change(f"{me.name} made its acting identity {agent_id}", author=me.name).put_record(child)

        archive.transact(fn)
    try:
        return require_below(ctx, project_key, parent, agent_id)
    except GitmailError as exc:
        if exc.code != NOT_ABOVE:
            raise
        raise GitmailError(AGENT_ID_TAKEN, f"agent_id {agent_id!r} is the name of an agent that is not below "
                           f"{parent}: choose another name for this task (names are unique in the project)",
                           {"agent_id": agent_id, "agent": parent}) from None


def require_below(ctx: Context, project_key: str, ancestor: str, agent: str) -> str:
    """``agent``'s registered name when ``ancestor`` is above it (an ``acting_as`` call); NOT_ABOVE otherwise.

    Naming the proved agent itself is allowed and changes nothing. Acting
    through an agent is acting: one that is retired, asleep or expired may
    not (AGENT_INACTIVE, AGENT_ASLEEP, AGENT_EXPIRED), whatever the agent
    below it may do.
    """
    check_agent_name(agent, "acting_as")
    snap = ctx.archive(project_key).snapshot()
    me = require_agent(snap, ancestor)
    child = require_agent(snap, agent, "acting_as")
    if child.id != me.id:
        hierarchy.require_above(snap, me, child, "act as")
        require_agent(snap, ancestor, active=True)
        acting.check_able(snap, me, at=ctx.clock.now())
    return child.name
