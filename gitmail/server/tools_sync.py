"""Sync over MCP: exchange a project's archive with its git remotes on demand.

Remotes are configured on the machine (``gitmail remote add``), not over MCP:
naming a URL is an operator's decision, while asking for a sync now is
something any agent may reasonably do (for example before reading mail that a
teammate on another machine just sent).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from gitmail.sync import remotes, status, syncer

from .params import AgentToken, ProjectKey, ProverName
from .registry import MEMBER, Toolbox
from .results import READ, WRITE
from .runtime import Runtime

tools = Toolbox("sync")


@tools.tool(READ, access=MEMBER)
def list_remotes(rt: Runtime, project_key: ProjectKey, agent_name: ProverName = None,
                 agent_token: AgentToken = None) -> dict[str, Any]:
    """List the git remotes this machine syncs the project's archive with (needs an agent of the project).

    Returns {remotes: {name: url}}. An empty mapping means the archive lives
    only on this machine; an operator adds remotes with `gitmail remote add`.
    """
    return {"remotes": remotes.list_remotes(rt.store, project_key)}


@tools.tool(WRITE, access=MEMBER)
def sync_project(
    rt: Runtime,
    project_key: ProjectKey,
    remote: Annotated[str | None, Field(description=(
        "The remote to sync with (see list_remotes); default: every remote of the project."))] = None,
    agent_name: ProverName = None,
    agent_token: AgentToken = None,
) -> dict[str, Any]:
    """Sync the project's archive with its git remotes now: fetch, check, merge by the record rules, push.

    Needs proof of an agent of the project. Nothing is lost either way: messages and journal entries are add-only,
    receipts keep the earliest times, profiles merge field by field, and
    incoming changes that break the record rules are kept aside instead of
    applied. Each remote syncs on its own. Returns {exit_code, status,
    results: [{remote, records_in, records_out, messages_in, messages_out,
    conflicts, quarantined, overlaps, error, ...}], index}. exit_code is 0
    when every remote synced cleanly, 1 when there is something to look at
    (conflicts kept under conflicts/, refused changes, overlapping
    reservations), 2 when a remote failed (its error says why; the others
    still synced). It returns once search has taken in what came, or index
    says how many messages search still lacks.
    """
    return syncer.sync_project(rt.store, project_key, remote).to_dict()


@tools.tool(READ, access=MEMBER)
def sync_status(rt: Runtime, project_key: ProjectKey, agent_name: ProverName = None,
                agent_token: AgentToken = None) -> dict[str, Any]:
    """How each git remote of the project is syncing, without syncing (needs an agent of the project).

    Returns {remotes: [{remote, url, state, last_attempt, last_success,
    last_error, last_result, ahead, behind, quarantined}]}: state is ok,
    attention (the last sync left something to look at), failing (the
    last attempt failed: last_error says why), syncing or never; ahead and
    behind count commits against the remote's main as last fetched.
    """
    return {"remotes": [state.to_dict() for state in status.remote_states(rt.store, project_key)]}
