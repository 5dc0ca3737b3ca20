"""The agent hierarchy: scopes (``role@location``), who is above whom, and the checks they drive.

An agent registered on its own is *top-level*: it has no parent and holds
``manager@*``, everything in its project. An agent spawned by another names
that agent as its ``parent`` and holds the scopes it was given, each within
one of its parent's, so authority only narrows on the way down.

A scope is ``role@location``. Roles rank ``viewer`` < ``editor`` <
``manager``: a viewer reads and sends mail; an editor may also reserve files
within its locations, write its journal and publish its card; a manager may
also spawn agents below it. A location is ``*`` (the whole project) or a path
or glob of the code repository, in the reservation patterns' syntax
(:mod:`.globs`). One location *contains* another when every file the second
names is one the first names, decided soundly but not completely: ``*``
contains everything, a location contains itself, and a plain path (no
wildcards) contains everything below it, wildcards included; a location with
wildcards is handed down only as itself.

An agent is *above* another when it is its parent, or its parent's parent,
and so on. A parent is a registration, not a name: a child names the
registration that spawned it (:meth:`~gitmail.model.records.Agent.spawned_by`),
so a new registration of a deleted parent's name is above no one. Only the
agent itself or one above it may put it to sleep, wake it or update it (the
operator may do anything).

Deleting an agent *orphans* its children (:func:`orphaned`): each holds from
then on what it effectively held at that moment (its scopes narrowed by
every agent above it, its expiry no later than theirs), names the
registration it was orphaned from, and only the operator is above it.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from dataclasses import dataclass

from gitmail.model.clock import HLC, parse_ts
from gitmail.model.errors import AGENT_EXPIRED, NOT_ABOVE, SCOPE_DENIED, GitmailError, invalid
from gitmail.model.records import MAX_SCOPES, Agent
from gitmail.model.results import OMIT_NONE, Result, result
from gitmail.storage.snapshot import Snapshot

from . import globs
from .lookup import find_agent, profiles

ROLES = ("viewer", "editor", "manager")
ROLE_ALIASES = {"reader": "viewer", "writer": "editor", "approver": "manager"}
WHOLE = "*"
TOP_SCOPE = f"manager@{WHOLE}"
MAX_DEPTH = 64  # a chain of parents longer than this is damage (a cycle a hand edit made), not a hierarchy


@dataclass(frozen=True)
class Scope:
    role: str
    location: str

    def __str__(self) -> str:
        return f"{self.role}@{self.location}"

    def rank(self) -> int:
        return ROLES.index(self.role)


def parse_scope(text: object, field: str = "scope") -> Scope:
    """One ``role@location``, normalized; INVALID_ARGUMENT says what a scope looks like."""
    if not isinstance(text, str) or "@" not in text:
        raise invalid(f"{field}: a scope is role@location, such as editor@src/api or viewer@*; got {text!r}",
                      field=field)
    role, _, location = text.strip().partition("@")
    role = ROLE_ALIASES.get(role.strip().lower(), role.strip().lower())
    if role not in ROLES:
        raise invalid(f"{field}: role {role!r} must be one of {', '.join(ROLES)} (in {text!r})", field=field)
    location = location.strip()
    if location != WHOLE:
        location = globs.normalize(location, field)
    return Scope(role, location)


def parse_scopes(values: object, field: str = "scope") -> list[Scope]:
    """A list of scopes, duplicates dropped, in the order given."""
    if isinstance(values, str):
        values = [values]
    if not isinstance(values, list) or not values:
        raise invalid(f"{field}: give at least one role@location, such as editor@src/api", field=field)
    if len(values) > MAX_SCOPES:
        raise invalid(f"{field}: at most {MAX_SCOPES} scopes per agent", field=field)
    out: list[Scope] = []
    for value in values:
        scope = parse_scope(value, field)
        if scope not in out:
            out.append(scope)
    return out


def scopes_of(agent: Agent) -> list[Scope]:
    """What ``agent`` may do: its recorded scopes, or manager@* for a top-level agent (never an orphan)."""
    if agent.parent is None and agent.orphaned_from is None and not agent.scopes:
        return [Scope("manager", WHOLE)]
    out = []
    for text in agent.scopes:
        try:
            out.append(parse_scope(text))
        except GitmailError:
            continue  # a hand-edited scope that does not parse grants nothing
    return out


def location_contains(outer: str, inner: str) -> bool:
    """Whether every file ``inner`` names is one ``outer`` names (sound, not complete; see the module)."""
    if outer == WHOLE or outer == inner:
        return True
    if inner == WHOLE or any(ch in outer for ch in "*?["):
        return False
    outer_parts, inner_parts = outer.split("/"), inner.split("/")
    return inner_parts[:len(outer_parts)] == outer_parts


def scope_contains(outer: Scope, inner: Scope) -> bool:
    return outer.rank() >= inner.rank() and location_contains(outer.location, inner.location)


def _meet(a: Scope, b: Scope) -> Scope | None:
    """What both scopes grant, when one location contains the other (None: nothing known to be in both)."""
    role = min(a.role, b.role, key=ROLES.index)
    if location_contains(a.location, b.location):
        return Scope(role, b.location)
    if location_contains(b.location, a.location):
        return Scope(role, a.location)
    return None


def effective_scopes(snapshot: Snapshot, agent: Agent) -> list[Scope]:
    """The scopes ``agent`` holds once every agent above it has narrowed them (see :func:`allows`).

    Each is within one of the agent's own scopes and within one of each
    ancestor's, so the list grants exactly what :func:`allows` grants, never
    more (two locations neither of which contains the other grant nothing
    together, as for :func:`allows`).
    """
    held = scopes_of(agent)
    for above in ancestors(snapshot, agent):
        met = [m for a in held for b in scopes_of(above) if (m := _meet(a, b)) is not None]
        held = []
        for scope in met:
            if scope not in held and not any(o != scope and scope_contains(o, scope) for o in met):
                held.append(scope)
    return held[:MAX_SCOPES]


def _grants(agent: Agent, wanted: Scope) -> bool:
    return any(scope_contains(scope, wanted) for scope in scopes_of(agent))


def allows(snapshot: Snapshot, agent: Agent, role: str, location: str = WHOLE) -> bool:
    """Whether ``agent`` holds ``role`` (or more) over ``location``.

    Its own scopes must grant it, and so must those of every agent above it:
    narrowing a parent narrows what its descendants may do, and a scope
    widened by hand in a child's profile grants nothing its parent lacks.
    """
    wanted = Scope(role, location)
    return _grants(agent, wanted) and all(_grants(a, wanted) for a in ancestors(snapshot, agent))


def files_outside(snapshot: Snapshot, agent: Agent, files: list[str]) -> list[str]:
    """The files (plain paths, as a commit lists them) ``agent`` may not edit: no editor scope covers them."""
    chain = [agent, *ancestors(snapshot, agent)]

    def grants(holder: Agent, path: str) -> bool:
        return any(s.rank() >= ROLES.index("editor") and (s.location == WHOLE or globs.covers(s.location, path))
                   for s in scopes_of(holder))

    return [path for path in files if not all(grants(holder, path) for holder in chain)]


def require_role(snapshot: Snapshot, agent: Agent, role: str, what: str) -> None:
    """SCOPE_DENIED unless ``agent`` holds ``role`` (or more) over some location; ``what`` names the act.

    For acts on the agent's own records (its journal, its card), where no
    path is involved, so the role alone decides.
    """
    if any(s.rank() >= ROLES.index(role) and allows(snapshot, agent, role, s.location) for s in scopes_of(agent)):
        return
    held = ", ".join(str(s) for s in scopes_of(agent)) or "none"
    advice = (f"; ask an agent above it (its parent {agent.parent}) to do it, or to widen its scopes within its own"
              if agent.parent else "")
    raise GitmailError(SCOPE_DENIED, f"{agent.name} may not {what}: that needs {role} (or more) over some location, "
                       f"and its scopes are {held}{advice}",
                       {"agent": agent.name, "needed": role, "scopes": [str(s) for s in scopes_of(agent)]})


def require_manager(agent: Agent) -> None:
    """SCOPE_DENIED unless ``agent`` is a manager over some location (spawning needs it)."""
    if any(s.role == "manager" for s in scopes_of(agent)):
        return
    held = ", ".join(str(s) for s in scopes_of(agent)) or "none"
    raise GitmailError(SCOPE_DENIED, f"{agent.name} may not spawn agents: that needs manager over some location, "
                       f"and its scopes are {held}; ask an agent above it to spawn the agent",
                       {"agent": agent.name, "needed": "manager", "scopes": [str(s) for s in scopes_of(agent)]})


def require_paths(snapshot: Snapshot, agent: Agent, patterns: list[str], what: str) -> None:
    """SCOPE_DENIED unless ``agent`` may edit every pattern (editor or more over a location containing it)."""
    outside = [p for p in patterns if not allows(snapshot, agent, "editor", p)]
    if not outside:
        return
    held = ", ".join(str(s) for s in scopes_of(agent)) or "none"
    raise GitmailError(SCOPE_DENIED, f"{agent.name} may not {what} {', '.join(outside)}: editing needs editor (or "
                       f"manager) over a location containing each path, and its scopes are {held}. Keep to those "
                       "locations, or ask an agent above it to act", {"agent": agent.name, "paths": outside,
                                                                      "scopes": [str(s) for s in scopes_of(agent)]})


def check_subset(snapshot: Snapshot, parent: Agent, wanted: list[Scope]) -> None:
    """SCOPE_DENIED unless ``parent`` holds each of ``wanted`` (see :func:`allows`)."""
    mine = scopes_of(parent)
    wider = [str(w) for w in wanted if not allows(snapshot, parent, w.role, w.location)]
    if wider:
        raise GitmailError(SCOPE_DENIED, f"{', '.join(wider)} is not within {parent.name}'s own scopes "
                           f"({', '.join(str(s) for s in mine)}); a child gets a subset of what its parent may do: "
                           "narrow the role or the location", {"agent": parent.name, "refused": wider,
                                                               "scopes": [str(s) for s in mine]})


# -- who is above whom ------------------------------------------------------------

def parent_of(snapshot: Snapshot, agent: Agent) -> Agent | None:
    """The registration that spawned ``agent``, while it holds its name (None: top-level, orphaned or gone)."""
    if agent.parent is None:
        return None
    parent = find_agent(snapshot, agent.parent)
    return parent if parent is not None and agent.spawned_by(parent) else None


def ancestors(snapshot: Snapshot, agent: Agent) -> list[Agent]:
    """``agent``'s parent, its parent's parent, and so on (a link to another registration or a cycle ends it)."""
    chain: list[Agent] = []
    seen = {agent.id}
    current = agent
    while len(chain) < MAX_DEPTH:
        parent = parent_of(snapshot, current)
        if parent is None or parent.id in seen:
            break
        chain.append(parent)
        seen.add(parent.id)
        current = parent
    return chain


def children(snapshot: Snapshot, agent: Agent) -> list[Agent]:
    """The agents ``agent`` spawned that are still below it, by name."""
    return [other for other in profiles(snapshot) if other.spawned_by(agent)]


def orphaned(snapshot: Snapshot, child: Agent, parent: Agent, hlc: HLC) -> Agent:
    """``child`` once ``parent`` is deleted: no parent, holding what it effectively holds now, never more."""
    return dataclasses.replace(child, parent=None, parent_id=None, orphaned_from=parent.name,
                               orphaned_from_id=parent.id, hlc=hlc,
                               scopes=[str(s) for s in effective_scopes(snapshot, child)],
                               expires_at=effective_expiry(snapshot, child))


def is_above(snapshot: Snapshot, actor: Agent, target: Agent) -> bool:
    """Whether ``actor`` is ``target``'s parent or an ancestor of it."""
    return any(a.id == actor.id for a in ancestors(snapshot, target))


def require_self_or_above(snapshot: Snapshot, actor: Agent, target: Agent, what: str) -> None:
    """NOT_ABOVE unless ``actor`` is ``target`` or above it."""
    if actor.id == target.id or is_above(snapshot, actor, target):
        return
    above = [a.name for a in ancestors(snapshot, target)]
    who = (f"itself or the agents above it ({', '.join(above)})" if above else
           "itself (it is top-level: nobody is above it)")
    raise GitmailError(NOT_ABOVE, f"{actor.name} may not {what} {target.name}: only {who} may, or the operator "
                       "on the server's machine (gitmail sleep / gitmail wake)",
                       {"agent": actor.name, "target": target.name, "above": above})


def require_above(snapshot: Snapshot, actor: Agent, target: Agent, what: str) -> None:
    """NOT_ABOVE unless ``actor`` is strictly above ``target``."""
    if is_above(snapshot, actor, target):
        return
    above = [a.name for a in ancestors(snapshot, target)]
    who = (f"only the agents above it ({', '.join(above)}) or the operator may" if above else
           f"{target.name} is top-level (nobody is above it), so only the operator may")
    command = {"wake": "wake", "put to sleep": "sleep"}.get(what)
    advice = f" (on the server's machine: gitmail {command} PROJECT {target.name})" if command else ""
    raise GitmailError(NOT_ABOVE, f"{actor.name} may not {what} {target.name}: {who}{advice}",
                       {"agent": actor.name, "target": target.name, "above": above})


# -- expiry ---------------------------------------------------------------------------

def check_expiry(snapshot: Snapshot, agent: Agent, at: dt.datetime) -> None:
    """AGENT_EXPIRED once ``agent``'s expiry, or that of an agent above it, has passed."""
    expiry = effective_expiry(snapshot, agent)
    if expiry is not None and parse_ts(expiry) <= at:
        raise GitmailError(AGENT_EXPIRED, f"agent {agent.name} expired at {expiry} (its own expiry or that of an "
                           "agent above it) and can no longer act; an agent above it may extend it "
                           "(update_agent expires_at, within its own expiry)",
                           {"agent": agent.name, "expires_at": expiry})


def effective_expiry(snapshot: Snapshot, agent: Agent) -> str | None:
    """The earliest ``expires_at`` of ``agent`` and every agent above it (None: it never expires)."""
    times = [a.expires_at for a in [agent, *ancestors(snapshot, agent)] if a.expires_at is not None]
    return min(times, key=parse_ts) if times else None


def check_child_expiry(parent_expiry: str | None, wanted: str | None, *, field: str = "expires_at") -> None:
    """INVALID_ARGUMENT when a child would outlive its parent (a parent with an expiry needs one in the child)."""
    if parent_expiry is None:
        return
    if wanted is None or parse_ts(wanted) > parse_ts(parent_expiry):
        raise invalid(f"{field} must be no later than the parent's expiry ({parent_expiry}); give an earlier time",
                      field=field, parent_expires_at=parent_expiry)


@result
class Orphaned(Result):
    """The agent an orphan was spawned by, deleted since: its name and registration."""

    name: str
    id: str | None


@result
class Card(Result):
    """The hierarchy and card fields of an agent, as answers show them (``orphaned_from`` only for an orphan)."""

    parent: str | None
    orphaned_from: Orphaned | None = dataclasses.field(default=None, metadata=OMIT_NONE)
    scopes: list[str]
    expires_at: str | None
    lifecycle: str
    vendor: str
    purpose: str
    risk_tier: str
    environment: str
    capabilities: list[str]
    asleep: bool
    sleep_until: str | None


def card(agent: Agent) -> Card:
    """The :class:`Card` of ``agent`` (its sleep's end only while it sleeps)."""
    orphan = Orphaned(name=agent.orphaned_from, id=agent.orphaned_from_id) if agent.orphaned_from is not None else None
    return Card(parent=agent.parent, orphaned_from=orphan, scopes=[str(s) for s in scopes_of(agent)],
                expires_at=agent.expires_at, lifecycle=agent.lifecycle, vendor=agent.vendor, purpose=agent.purpose,
                risk_tier=agent.risk_tier, environment=agent.environment, capabilities=agent.capabilities,
                asleep=agent.asleep, sleep_until=agent.sleep_until if agent.asleep else None)
