"""Project tools: create, archive, restore and delete a project's archive."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from .params import AgentToken, Confirmation, ProjectKey, ProverName
from .registry import ANYONE, MEMBER, Toolbox
from .results import DESTRUCTIVE, IDEMPOTENT
from .runtime import Runtime

tools = Toolbox("admin")


@tools.tool(IDEMPOTENT, access=ANYONE)
def ensure_project(
    rt: Runtime,
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
    return rt.mail.ensure_project(human_key=human_key)


@tools.tool(IDEMPOTENT, access=MEMBER)
def archive_project(rt: Runtime, project_key: ProjectKey, agent_name: ProverName = None,
                    agent_token: AgentToken = None) -> dict[str, Any]:
    """Hide a project from the active project list, keeping every message.

    Reversible with unarchive_project; the archive's history is untouched.
    Needs proof of an agent of the project.
    """
    return rt.mail.archive_project(project_key=project_key)


@tools.tool(IDEMPOTENT, access=MEMBER)
def unarchive_project(rt: Runtime, project_key: ProjectKey, agent_name: ProverName = None,
                      agent_token: AgentToken = None) -> dict[str, Any]:
    """Return an archived project to the active project list. Needs proof of an agent of the project."""
    return rt.mail.unarchive_project(project_key=project_key)


@tools.tool(DESTRUCTIVE, access=MEMBER)
def hard_delete_project(rt: Runtime, project_key: ProjectKey, confirmation: Confirmation, agent_name: ProverName = None,
                        agent_token: AgentToken = None) -> dict[str, Any]:
    """Delete a project's whole archive, its checkout and derived state. Irreversible.

    Every agent, message, receipt, contact and reservation of the project is
    removed from this machine. Copies already pushed to other machines are not
    affected. Requires confirmation='I UNDERSTAND' and proof of an agent of the project.
    """
    slug = rt.store.resolve(project_key)
    result = rt.mail.hard_delete_project(project_key=project_key, confirmation=confirmation)
    rt.identities.forget(slug)
    return result
