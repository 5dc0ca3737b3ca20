"""Search and summary tools over a whole project."""

from __future__ import annotations

from dataclasses import field
from typing import Annotated

from pydantic import Field

from gitmail.mail.facade import SearchHit, SummaryView, ThreadSummaries
from gitmail.model.results import FLATTEN, OMIT_NONE, Result, result

from .params import AgentToken, ProjectKey, ProverName
from .registry import MEMBER, Toolbox
from .results import IDEMPOTENT, READ, OutputFormat, formatted
from .runtime import Runtime
from .schemas import UNLISTED

# Summaries are extracted, never written by a model: these two are taken so that calls written for agent-mail keep
# working, and are not listed (a call that asks for a model is answered with a note saying none ran).
LlmMode = Annotated[bool, Field(json_schema_extra={UNLISTED: True})]
LlmModel = Annotated[str | None, Field(max_length=200, json_schema_extra={UNLISTED: True})]

tools = Toolbox("messages")

NO_MODEL = ("no language model runs on this server, so the summary was extracted from the messages "
            "(llm_mode and llm_model have no effect)")


@result
class ThreadsSummarized(Result):
    """A thread summary, with the mode that made it and, when a model was asked for, why none ran."""

    found: ThreadSummaries = field(metadata=FLATTEN)
    mode: str
    note: str | None = field(default=None, metadata=OMIT_NONE)


@result
class RecentSummarized(Result):
    """A project summary of a time window, with the mode that made it and, when a model was asked for, the note."""

    found: SummaryView = field(metadata=FLATTEN)
    mode: str
    note: str | None = field(default=None, metadata=OMIT_NONE)


@tools.tool(READ, access=MEMBER)
def search_messages(
    rt: Runtime,
    project_key: ProjectKey,
    query: Annotated[str, Field(min_length=1, max_length=1000, description=(
        "Words; \"phrases\", prefix*, AND/OR/NOT, field:value."))],
    limit: Annotated[int, Field(ge=1, le=200)] = 20,
    exhaustive: Annotated[bool, Field(description="Rank every match, not only the newest 1,000.")]
    = False,
    agent_name: ProverName = None,
    agent_token: AgentToken = None,
) -> list[SearchHit]:
    """Search the project's messages, best first."""
    return rt.mail.search_messages(project_key=project_key, query=query, limit=limit, exhaustive=exhaustive)


@tools.tool(READ, access=MEMBER)
def summarize_thread(
    rt: Runtime,
    project_key: ProjectKey,
    thread_id: Annotated[str, Field(description="Thread ID(s), comma-separated.")],
    include_examples: Annotated[bool, Field(description="Include up to 3 of its messages.")] = False,
    llm_mode: LlmMode = False,
    llm_model: LlmModel = None,
    per_thread_limit: Annotated[int, Field(ge=1, le=500)] = 50,
    agent_name: ProverName = None,
    agent_token: AgentToken = None,
) -> ThreadsSummarized:
    """Summarize threads (comma-separated IDs): participants, key points, action items."""
    found = rt.mail.summarize_thread(project_key=project_key, thread_id=thread_id,
                                     include_examples=include_examples, per_thread_limit=per_thread_limit)
    return with_mode(found, llm_mode, llm_model)


@tools.tool(IDEMPOTENT, access=MEMBER)
def summarize_recent(
    rt: Runtime,
    project_key: ProjectKey,
    since_hours: Annotated[float, Field(gt=0, le=24 * 365)] = 1.0,
    llm_mode: LlmMode = True,
    llm_model: LlmModel = None,
    max_messages: Annotated[int, Field(ge=1, le=500)] = 500,
    format: OutputFormat = None,
    agent_name: ProverName = None,
    agent_token: AgentToken = None,
) -> RecentSummarized:
    """Summarize the project's recent messages by thread, kept for fetch_summary."""
    found = rt.mail.summarize_recent(project_key=project_key, since_hours=since_hours, max_messages=max_messages)
    note = NO_MODEL if llm_mode or llm_model else None
    return formatted(RecentSummarized(found=found, mode="extractive", note=note), format)


@tools.tool(READ, access=MEMBER)
def fetch_summary(
    rt: Runtime,
    project_key: ProjectKey,
    since_hours: Annotated[float, Field(gt=0, description="Summaries that end within this many hours.")] = 24.0,
    limit: Annotated[int, Field(ge=1, le=100)] = 5,
    format: OutputFormat = None,
    agent_name: ProverName = None,
    agent_token: AgentToken = None,
) -> list[SummaryView]:
    """List summaries made by summarize_recent, newest first."""
    return formatted(rt.mail.fetch_summary(project_key=project_key, since_hours=since_hours, limit=limit), format)


def with_mode(summary: ThreadSummaries, llm_mode: bool, llm_model: str | None) -> ThreadsSummarized:
    """The summary with the mode that made it: always extractive; a request for a model is answered, not ignored."""
    return ThreadsSummarized(found=summary, mode="extractive", note=NO_MODEL if llm_mode or llm_model else None)
