"""Sync over MCP: exchange a project's archive with its git remotes on demand.

Remotes are configured on the machine (``gitmail remote add``), not over MCP:
naming a URL is an operator's decision, while asking for a sync now is
something any agent may reasonably do (for example before reading mail that a
teammate on another machine just sent).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from gitmail.sync import remotes, status, syncer
from gitmail.sync.remotes import RemoteList
from gitmail.sync.status import RemoteStates
from gitmail.sync.syncer import ProjectSync

from .params import AgentToken, ProjectKey, ProverName
from .registry import MEMBER, Toolbox
from .results import READ, WRITE
from .runtime import Runtime

tools = Toolbox("sync")


@tools.tool(READ, access=MEMBER)
def list_remotes(rt: Runtime, project_key: ProjectKey, agent_name: ProverName = None,
                 agent_token: AgentToken = None) -> RemoteList:
    """List the git remotes the project's archive syncs with."""
    return remotes.remote_list(rt.store, project_key)


@tools.tool(WRITE, access=MEMBER)
def sync_project(
    rt: Runtime,
    project_key: ProjectKey,
    remote: Annotated[str | None, Field(description=(
        "The remote to sync with (see list_remotes); default: every remote of the project."))] = None,
    agent_name: ProverName = None,
    agent_token: AgentToken = None,
) -> ProjectSync:
    """Sync the project's archive with its git remotes now (fetch, check, merge, push). exit_code 0: clean, 1: look,
    2: failed.
    """
    return syncer.sync_project(rt.store, project_key, remote).to_result()


@tools.tool(READ, access=MEMBER)
def sync_status(rt: Runtime, project_key: ProjectKey, agent_name: ProverName = None,
                agent_token: AgentToken = None) -> RemoteStates:
    """How each git remote of the project is syncing, without syncing."""
    return RemoteStates(remotes=status.remote_states(rt.store, project_key))
