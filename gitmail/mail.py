"""The mail facade: one method per agent-mail operation.

:class:`Mail` is what the MCP server and the CLI call. Its methods take the
argument names agents already use (``project_key``, ``sender_name``,
``body_md`` …) and return plain JSON-ready dicts and lists. Each method only
delegates to the module that owns the rule; the facade holds the shared
context (the store and the in-memory activity timestamps).
"""

from __future__ import annotations

from typing import Any

from . import agents, projects
from .context import Activity, MailContext
from .store import Store


class Mail:
    """Agent mail over one :class:`Store` of project archives."""

    def __init__(self, store: Store, activity: Activity | None = None):
        self.store = store
        self.ctx = MailContext(store, activity or Activity())

    # -- projects -------------------------------------------------------------
    def ensure_project(self, human_key: str) -> dict[str, Any]:
        return projects.ensure_project(self.ctx, human_key)

    def archive_project(self, project_key: str) -> dict[str, Any]:
        return projects.archive_project(self.ctx, project_key)

    def unarchive_project(self, project_key: str) -> dict[str, Any]:
        return projects.unarchive_project(self.ctx, project_key)

    def hard_delete_project(self, project_key: str, confirmation: str = "") -> dict[str, Any]:
        return projects.hard_delete_project(self.ctx, project_key, confirmation)

    def list_projects(self, include_archived: bool = False) -> list[dict[str, Any]]:
        return projects.list_projects(self.ctx, include_archived)

    def get_project(self, slug: str) -> dict[str, Any]:
        return projects.get_project(self.ctx, slug)

    # -- agents ---------------------------------------------------------------
    def register_agent(self, project_key: str, program: str, model: str, name: str | None = None,
                       task_description: str = "") -> dict[str, Any]:
        return agents.register_agent(self.ctx, project_key, program, model, name, task_description)

    def create_agent_identity(self, project_key: str, program: str, model: str, name_hint: str | None = None,
                              task_description: str = "", return_registration_token: bool = True) -> dict[str, Any]:
        return agents.create_agent_identity(self.ctx, project_key, program, model, name_hint, task_description,
                                            return_registration_token)

    def verify_agent_token(self, project_key: str, agent_name: str, token: str) -> bool:
        return agents.verify_agent_token(self.ctx, project_key, agent_name, token)

    def reset_agent_token(self, project_key: str, agent_name: str) -> dict[str, Any]:
        return agents.reset_agent_token(self.ctx, project_key, agent_name)

    def whois(self, project_key: str, agent_name: str, include_recent_commits: bool = True,
              commit_limit: int = 5) -> dict[str, Any]:
        return agents.whois(self.ctx, project_key, agent_name, include_recent_commits, commit_limit)

    def list_agents(self, project_key: str, active_only: bool = True) -> list[dict[str, Any]]:
        return agents.list_agents(self.ctx, project_key, active_only)

    def retire_agent(self, project_key: str, agent_name: str) -> dict[str, Any]:
        return agents.retire_agent(self.ctx, project_key, agent_name)

    def unretire_agent(self, project_key: str, agent_name: str) -> dict[str, Any]:
        return agents.unretire_agent(self.ctx, project_key, agent_name)

    def deregister_agent(self, project_key: str, agent_name: str) -> dict[str, Any]:
        return agents.deregister_agent(self.ctx, project_key, agent_name)

    def hard_delete_agent(self, project_key: str, agent_name: str, confirmation: str = "") -> dict[str, Any]:
        return agents.hard_delete_agent(self.ctx, project_key, agent_name, confirmation)

    def retire_inactive_agents(self, project_key: str, agent_name: str,
                               inactive_seconds: int = agents.DEFAULT_INACTIVE_SECONDS,
                               include_reserved: bool = False, dry_run: bool = False) -> dict[str, Any]:
        return agents.retire_inactive_agents(self.ctx, project_key, agent_name, inactive_seconds,
                                             include_reserved, dry_run)
