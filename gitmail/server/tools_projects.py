"""Project tools: create, archive, restore and delete a project's archive."""

from __future__ import annotations

from typing import Annotated, Any

from fastmcp import FastMCP
from pydantic import Field

from .params import AgentToken, Confirmation, ProjectKey, ProverName
from .results import DESTRUCTIVE, IDEMPOTENT, tool
from .runtime import Runtime


def register(mcp: FastMCP, rt: Runtime) -> None:
    mail = rt.mail
    member = rt.access.member()

    @tool(mcp, IDEMPOTENT, access=rt.access.open())
    def ensure_project(
        human_key: Annotated[str, Field(description=(
            "The absolute path of the working directory that names the project, e.g. "
            "'/data/projects/backend'. It need not exist on this machine; agents using the same "
            "path share the project."))],
    ) -> dict[str, Any]:
        """Create the project named by an absolute path, or return it if it exists.

        Call this first in a new working directory. The project gets its own git
        archive; its slug is derived from the path, so every machine computes the
        same one. Safe to repeat: nothing changes when the project exists.
        Returns {id, slug, human_key, created_at}.
        """
        return mail.ensure_project(human_key=human_key)

    @tool(mcp, IDEMPOTENT, access=member)
    def archive_project(project_key: ProjectKey, agent_name: ProverName = None,
                        agent_token: AgentToken = None) -> dict[str, Any]:
        """Hide a project from the active project list, keeping every message.

        Reversible with unarchive_project; the archive's history is untouched.
        Needs proof of an agent of the project.
        """
        return mail.archive_project(project_key=project_key)

    @tool(mcp, IDEMPOTENT, access=member)
    def unarchive_project(project_key: ProjectKey, agent_name: ProverName = None,
                          agent_token: AgentToken = None) -> dict[str, Any]:
        """Return an archived project to the active project list. Needs proof of an agent of the project."""
        return mail.unarchive_project(project_key=project_key)

    @tool(mcp, DESTRUCTIVE, access=member)
    def hard_delete_project(project_key: ProjectKey, confirmation: Confirmation, agent_name: ProverName = None,
                            agent_token: AgentToken = None) -> dict[str, Any]:
        """Delete a project's whole archive, its checkout and derived state. Irreversible.

        Every agent, message, receipt, contact and reservation of the project is
        removed from this machine. Copies already pushed to other machines are not
        affected. Requires confirmation='I UNDERSTAND' and proof of an agent of the project.
        """
        slug = rt.store.resolve(project_key)
        result = mail.hard_delete_project(project_key=project_key, confirmation=confirmation)
        rt.identities.forget(slug)
        return result
