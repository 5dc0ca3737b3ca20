"""Reading the project record and agent profiles out of a snapshot.

Agent names are unique per project without regard to case, so every lookup
here resolves a name case-insensitively to the spelling that was registered.
"""

from __future__ import annotations

import datetime as dt

from gitmail.model.clock import HLC, format_ts
from gitmail.model.errors import AGENT_INACTIVE, GitmailError, not_found
from gitmail.model.names import check_agent_name
from gitmail.model.records import AGENTS, PROJECT_PATH, Agent, Project, profile_path
from gitmail.storage.snapshot import Snapshot


def project_record(snap: Snapshot) -> Project:
    project = snap.load(PROJECT_PATH, Project)
    if project is None:
        raise not_found("this archive has no project record yet; "
                        "call ensure_project with the project's human_key first")
    return project


def agent_names(snap: Snapshot) -> list[str]:
    """Names of every agent with a profile, in sorted order."""
    return [name for name in snap.listdir(AGENTS) if snap.exists(profile_path(name))]


def profiles(snap: Snapshot) -> list[Agent]:
    """Every agent's profile, by name."""
    return [agent for name in agent_names(snap) if (agent := snap.load(profile_path(name), Agent)) is not None]


def canonical_name(snap: Snapshot, name: str) -> str | None:
    """The registered spelling of ``name`` (compared case-insensitively), or None."""
    if snap.exists(profile_path(name)):
        return name
    wanted = name.lower()
    for existing in agent_names(snap):
        if existing.lower() == wanted:
            return existing
    return None


def find_agent(snap: Snapshot, name: str) -> Agent | None:
    registered = canonical_name(snap, name)
    return None if registered is None else snap.load(profile_path(registered), Agent)


def require_agent(snap: Snapshot, name: object, field: str = "agent_name", *, active: bool = False) -> Agent:
    """The profile of ``name``; NOT_FOUND if unknown, AGENT_INACTIVE if ``active`` and it is not."""
    agent = find_agent(snap, check_agent_name(name, field))
    if agent is None:
        raise not_found(f"no agent named {name!r} in this project; register it with register_agent, "
                        "or list the registered names with list_agents", field=field, agent=name)
    if active and agent.status != "active":
        raise GitmailError(AGENT_INACTIVE, f"agent {agent.name} is {agent.status}; restore it with unretire_agent "
                           "(or register_agent) before it acts or receives mail",
                           {"agent": agent.name, "status": agent.status})
    return agent


def ts_of_hlc(hlc: HLC) -> str:
    """The wall-clock part of a clock value as a timestamp."""
    return format_ts(dt.datetime.fromtimestamp(hlc.wall_ms / 1000, tz=dt.UTC))
