"""Sync over MCP: exchange a project's archive with its git remotes on demand.

Remotes are configured on the machine (``gitmail remote add``), not over MCP:
naming a URL is an operator's decision, while asking for a sync now is
something any agent may reasonably do (for example before reading mail that a
teammate on another machine just sent).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastmcp import FastMCP
from pydantic import Field

from gitmail.sync import remotes, syncer

from .params import AgentToken, ProjectKey, ProverName
from .results import READ, WRITE, tool
from .runtime import Runtime


def register(mcp: FastMCP, rt: Runtime) -> None:
    member = rt.access.member()

    @tool(mcp, READ, access=member)
    def list_remotes(project_key: ProjectKey, agent_name: ProverName = None,
                     agent_token: AgentToken = None) -> dict[str, Any]:
        """List the git remotes this machine syncs the project's archive with (needs an agent of the project).

        Returns {remotes: {name: url}}. An empty mapping means the archive lives
        only on this machine; an operator adds remotes with `gitmail remote add`.
        """
        return {"remotes": remotes.list_remotes(rt.store, project_key)}

    @tool(mcp, WRITE, access=member)
    def sync_project(
        project_key: ProjectKey,
        remote: Annotated[str | None, Field(description=(
            "The remote to sync with (see list_remotes); default: every remote of the project."))] = None,
        agent_name: ProverName = None,
        agent_token: AgentToken = None,
    ) -> dict[str, Any]:
        """Sync the project's archive with its git remotes now: fetch, merge by the record rules, push.

        Needs proof of an agent of the project.
        Nothing is lost either way: messages and journal entries are add-only,
        receipts keep the earliest times, profiles merge field by field. Returns
        {results: [{remote, records_in, records_out, messages_in, messages_out,
        conflicts, ...}]}; conflicts lists any immutable file that differed on the
        two sides (both versions are kept under conflicts/).
        """
        return {"results": [result.to_dict() for result in syncer.sync_project(rt.store, project_key, remote)]}
