"""Capability cards: what an agent can do, so mail can be addressed by role.

An agent publishes a list of capabilities (short names such as ``review`` or
``db-migrations``) in its profile. A message addressed to ``role:<capability>``
reaches every active agent that has published that capability; the sender
does not need to know their names.
"""

from __future__ import annotations

from gitmail.model.errors import NOT_FOUND, GitmailError, invalid
from gitmail.model.names import TOPIC_RE, check_agent_name
from gitmail.model.results import Result, result
from gitmail.storage.snapshot import Snapshot

from .acting import update_own_profile
from .context import Context
from .lookup import profiles

ROLE_PREFIX = "role:"
MAX_CAPABILITIES = 64


def check_capability(value: object, field: str = "capabilities") -> str:
    text = value.strip().lower() if isinstance(value, str) else value
    if not isinstance(text, str) or not TOPIC_RE.match(text):
        raise invalid(f"{field}: capability {value!r} must be 1-64 characters from letters, digits, '.', '_' and '-', "
                      "starting with a letter or digit (for example 'review' or 'db-migrations')", field=field)
    return text


@result
class CapabilitiesSet(Result):
    """The capabilities an agent publishes now."""

    agent: str
    capabilities: list[str]


@result
class CapabilityCard(Result):
    """One active agent's published capabilities."""

    name: str
    capabilities: list[str]
    asleep: bool


@result
class CapabilityCards(Result):
    """The cards of every active agent, or of those having ``capability``."""

    capability: str | None
    agents: list[CapabilityCard]


def publish(ctx: Context, project_key: str, agent: str, capabilities: list[str], *,
            seat: str | None = None) -> CapabilitiesSet:
    """Replace ``agent``'s published capabilities (an empty list withdraws them all)."""
    check_agent_name(agent, "agent_name")
    if not isinstance(capabilities, list):
        raise invalid("capabilities must be a list of names, such as ['review', 'frontend']", field="capabilities")
    if len(capabilities) > MAX_CAPABILITIES:
        raise invalid(f"at most {MAX_CAPABILITIES} capabilities per agent", field="capabilities")
    wanted = sorted({check_capability(item) for item in capabilities})
    listed = ", ".join(wanted) or "none"
    name = update_own_profile(ctx, project_key, agent, seat, lambda name: f"{name} published capabilities: {listed}",
                              card=True, capabilities=wanted)
    return CapabilitiesSet(agent=name, capabilities=wanted)


def holders(snapshot: Snapshot, capability: str) -> list[str]:
    """Names of the active agents that publish ``capability`` (asleep ones included: they still get mail)."""
    capability = check_capability(capability, "capability")
    return [p.name for p in profiles(snapshot) if p.status == "active" and capability in p.capabilities]


def cards(ctx: Context, project_key: str, capability: str | None = None) -> CapabilityCards:
    """Every active agent's capabilities, or only the agents having ``capability``."""
    snap = ctx.archive(project_key).snapshot()
    wanted = check_capability(capability, "capability") if capability is not None else None
    agents = [CapabilityCard(name=p.name, capabilities=p.capabilities, asleep=p.asleep)
              for p in profiles(snap) if p.status == "active" and (wanted is None or wanted in p.capabilities)]
    return CapabilityCards(capability=wanted, agents=agents)


def expand_roles(snapshot: Snapshot, names: list[str], *, exclude: str | None = None,
                 field: str = "to") -> list[str]:
    """Replace each ``role:<capability>`` in ``names`` by the agents having it.

    Order is kept and duplicates dropped; ``exclude`` (the sender) is left out
    of role expansions. A role nobody has is NOT_FOUND, so a message never
    silently goes nowhere.
    """
    out: list[str] = []
    for name in names:
        if isinstance(name, str) and name.startswith(ROLE_PREFIX):
            capability = name[len(ROLE_PREFIX):]
            members = [m for m in holders(snapshot, capability) if m != exclude]
            if not members:
                raise GitmailError(NOT_FOUND, f"{field}: no active agent publishes the capability "
                                   f"{capability!r}; list them with list_capabilities or address agents by name",
                                   {"field": field, "role": capability})
            out.extend(m for m in members if m not in out)
        elif name not in out:
            out.append(name)
    return out
