"""Search and summary tools over a whole project."""

from __future__ import annotations

from typing import Annotated, Any

from fastmcp import FastMCP
from pydantic import Field

from .params import AgentToken, ProjectKey, ProverName
from .results import IDEMPOTENT, READ, tool
from .runtime import Runtime


def register(mcp: FastMCP, rt: Runtime) -> None:
    mail = rt.mail
    member = rt.access.member()

    @tool(mcp, READ, access=member)
    def search_messages(
        project_key: ProjectKey,
        query: Annotated[str, Field(min_length=1, max_length=1000, description=(
            "Words to find in subjects and bodies. Supports \"exact phrases\", prefix* and AND / OR / NOT, "
            "and field:value for subject, from, to, thread, topic, importance."))],
        limit: Annotated[int, Field(ge=1, le=200, description="At most this many results.")] = 20,
        agent_name: ProverName = None,
        agent_token: AgentToken = None,
    ) -> list[dict[str, Any]]:
        """Full-text search over the project's messages, best matches first.

        Each result: {id, subject, importance, ack_required, created_ts, thread_id,
        from, snippet}. Read a hit with resource://message/{id}.
        """
        return mail.search_messages(project_key=project_key, query=query, limit=limit)

    @tool(mcp, READ, access=member)
    def summarize_thread(
        project_key: ProjectKey,
        thread_id: Annotated[str, Field(description="A thread ID, or several separated by commas for a digest.")],
        include_examples: Annotated[bool, Field(description="Include up to 3 messages of the thread.")] = False,
        per_thread_limit: Annotated[int, Field(ge=1, le=500, description="Messages considered per thread.")] = 50,
        agent_name: ProverName = None,
        agent_token: AgentToken = None,
    ) -> dict[str, Any]:
        """Summarize a thread: participants, key points and action items, extracted from the messages.

        With several comma-separated IDs, returns one summary per thread plus an aggregate.
        """
        return mail.summarize_thread(project_key=project_key, thread_id=thread_id,
                                     include_examples=include_examples, per_thread_limit=per_thread_limit)

    @tool(mcp, IDEMPOTENT, access=member)
    def summarize_recent(
        project_key: ProjectKey,
        since_hours: Annotated[float, Field(gt=0, le=24 * 365, description="Look back this many hours.")] = 1.0,
        max_messages: Annotated[int, Field(ge=1, le=500, description="At most this many messages.")] = 500,
        agent_name: ProverName = None,
        agent_token: AgentToken = None,
    ) -> dict[str, Any]:
        """Summarize the project's recent messages grouped by thread, and keep the summary for fetch_summary."""
        return mail.summarize_recent(project_key=project_key, since_hours=since_hours, max_messages=max_messages)

    @tool(mcp, READ, access=member)
    def fetch_summary(
        project_key: ProjectKey,
        since_hours: Annotated[float, Field(gt=0, description="Summaries that end within this many hours.")] = 24.0,
        limit: Annotated[int, Field(ge=1, le=100, description="At most this many summaries.")] = 5,
        agent_name: ProverName = None,
        agent_token: AgentToken = None,
    ) -> list[dict[str, Any]]:
        """List summaries made earlier by summarize_recent, newest first."""
        return mail.fetch_summary(project_key=project_key, since_hours=since_hours, limit=limit)
