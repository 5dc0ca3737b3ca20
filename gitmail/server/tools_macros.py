"""Session macros: start a session, and prepare to work on a thread, in one call each."""

from __future__ import annotations

from typing import Annotated, Any

from fastmcp import Context
from pydantic import Field

from gitmail.coord.reservations import MAX_PATHS
from gitmail.mail.facade import InboxMessage, ProjectView, Reserved
from gitmail.model.limits import MAX_TTL, MIN_TTL
from gitmail.model.results import Result, result

from .params import AgentToken, Model, Program, ProjectKey, TaskUpdate, WindowUuid
from .registry import ANYONE, Toolbox
from .results import IDEMPOTENT
from .runtime import Runtime
from .tools_search import LlmMode, LlmModel, ThreadsSummarized, with_mode

InboxLimit = Annotated[int, Field(ge=1, le=100)]

tools = Toolbox("messages")


@result
class SessionStart(Result):
    """A session started: the project, the agent's registration, what it reserved (if it asked) and its inbox."""

    project: ProjectView
    agent: dict[str, Any]
    file_reservations: Reserved | None
    inbox: list[InboxMessage]


@result
class ThreadReady(Result):
    """Ready to work on a thread: the project, the agent's registration, the thread's summary and the inbox."""

    project: ProjectView
    agent: dict[str, Any]
    thread: ThreadsSummarized
    inbox: list[InboxMessage]


def join(rt: Runtime, ctx: Context, project_key: str, program: str, model: str, name: str | None, task: str | None,
         token: str | None) -> dict[str, Any]:
    """Register (or, with proof, update) the agent and bind it to this session, as register_agent does."""
    return rt.identities.register(ctx, project_key, program=program, model=model, name=name,
                                  task_description=task, token=token)


@tools.tool(IDEMPOTENT, access=ANYONE)
def macro_start_session(
    rt: Runtime,
    ctx: Context,
    human_key: Annotated[str, Field(description="Your working directory (absolute).")],
    program: Program,
    model: Model,
    agent_name: Annotated[str | None, Field(description="Your name (default: generated).")] = None,
    task_description: TaskUpdate = None,
    file_reservation_paths: Annotated[list[str] | None, Field(max_length=MAX_PATHS)] = None,
    file_reservation_reason: Annotated[str, Field(max_length=4096)] = "macro-session",
    file_reservation_ttl_seconds: Annotated[int, Field(ge=MIN_TTL, le=MAX_TTL)] = 3600,
    inbox_limit: InboxLimit = 10,
    agent_token: AgentToken = None,
    window_uuid: WindowUuid = None,
) -> SessionStart:
    """Start a session: join the project, reserve files, see your inbox."""
    project = rt.mail.ensure_project(human_key=human_key)
    if window_uuid and not agent_name:
        agent_name = rt.mail.window_agent(human_key, window_uuid)
    agent = join(rt, ctx, human_key, program, model, agent_name, task_description, agent_token)
    if window_uuid:
        rt.mail.use_window(human_key, window_uuid, agent["name"])
    reserved = None
    if file_reservation_paths:
        reserved = rt.mail.file_reservation_paths(human_key, agent["name"], file_reservation_paths,
                                                  ttl_seconds=file_reservation_ttl_seconds,
                                                  reason=file_reservation_reason)
    inbox = rt.mail.fetch_inbox(project_key=human_key, agent_name=agent["name"], limit=inbox_limit)
    return SessionStart(project=project, agent=agent, file_reservations=reserved, inbox=inbox)


@tools.tool(IDEMPOTENT, access=ANYONE)
def macro_prepare_thread(
    rt: Runtime,
    ctx: Context,
    project_key: ProjectKey,
    thread_id: str,
    program: Program,
    model: Model,
    agent_name: Annotated[str | None, Field(description=(
        "Your name (left out: a new agent)."))] = None,
    task_description: TaskUpdate = None,
    register_if_missing: bool = True,
    include_examples: Annotated[bool, Field(description="Include up to 3 of its messages.")] = True,
    include_inbox_bodies: bool = False,
    llm_mode: LlmMode = False,
    llm_model: LlmModel = None,
    inbox_limit: InboxLimit = 10,
    agent_token: AgentToken = None,
) -> ThreadReady:
    """Get ready to work on a thread: register if needed, summarize it, show your inbox."""
    project = rt.mail.ensure_project(human_key=project_key)
    if agent_name and not register_if_missing:
        rt.mail.whois(project_key=project_key, agent_name=agent_name, include_recent_commits=False)
    agent = join(rt, ctx, project_key, program, model, agent_name, task_description, agent_token)
    summary = rt.mail.summarize_thread(project_key=project_key, thread_id=thread_id,
                                       include_examples=include_examples)
    inbox = rt.mail.fetch_inbox(project_key=project_key, agent_name=agent["name"], limit=inbox_limit,
                                include_bodies=include_inbox_bodies)
    return ThreadReady(project=project, agent=agent, thread=with_mode(summary, llm_mode, llm_model), inbox=inbox)
