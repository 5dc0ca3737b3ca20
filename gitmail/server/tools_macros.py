"""Macros: the usual first calls of a session folded into one tool each."""

from __future__ import annotations

from typing import Annotated, Any

from fastmcp import Context, FastMCP
from pydantic import Field

from gitmail.model.errors import NOT_FOUND, GitmailError

from .params import AgentToken, Model, Program, ProjectKey, TaskDescription
from .results import IDEMPOTENT, WRITE, tool
from .runtime import Runtime

InboxLimit = Annotated[int, Field(ge=1, le=100, description="How many inbox messages to include.")]


def register(mcp: FastMCP, rt: Runtime) -> None:
    mail = rt.mail

    def join(ctx: Context, project_key: str, program: str, model: str, name: str | None, task: str,
             token: str | None) -> dict[str, Any]:
        """Register (or, with proof, update) the agent and bind it to this session."""
        if name and rt.store.exists(project_key):
            try:
                mail.whois(project_key=project_key, agent_name=name, include_recent_commits=False)
            except GitmailError as exc:
                if exc.code != NOT_FOUND:
                    raise
            else:
                rt.act_as(ctx, project_key, name, token)
        profile = mail.register_agent(project_key=project_key, program=program, model=model, name=name,
                                      task_description=task)
        rt.identities.bind(ctx, project_key, profile["name"])
        return profile

    anyone = rt.access.open()

    @tool(mcp, IDEMPOTENT, access=anyone)
    def macro_start_session(
        ctx: Context,
        human_key: Annotated[str, Field(description="The absolute path of your working directory (the project).")],
        program: Program,
        model: Model,
        agent_name: Annotated[str | None, Field(description=(
            "Your agent name; omit it to get a generated one. An existing name needs agent_token."))] = None,
        task_description: TaskDescription = "",
        inbox_limit: InboxLimit = 10,
        agent_token: AgentToken = None,
    ) -> dict[str, Any]:
        """Start a session in one call: ensure the project, register you, and show your inbox.

        Returns {project, agent, inbox}; agent carries registration_token when the
        agent is new. Then use catch_up / read_messages for incremental reading.
        """
        project = mail.ensure_project(human_key=human_key)
        agent = join(ctx, human_key, program, model, agent_name, task_description, agent_token)
        inbox = mail.fetch_inbox(project_key=human_key, agent_name=agent["name"], limit=inbox_limit)
        return {"project": project, "agent": agent, "inbox": inbox}

    @tool(mcp, IDEMPOTENT, access=anyone)
    def macro_prepare_thread(
        ctx: Context,
        project_key: ProjectKey,
        thread_id: Annotated[str, Field(description="The thread to join.")],
        program: Program,
        model: Model,
        agent_name: Annotated[str | None, Field(description=(
            "Your agent name; omit it to register a new agent. An existing name needs agent_token."))] = None,
        task_description: TaskDescription = "",
        include_examples: Annotated[bool, Field(description="Include up to 3 messages of the thread.")] = True,
        inbox_limit: InboxLimit = 10,
        agent_token: AgentToken = None,
    ) -> dict[str, Any]:
        """Get ready to work on a thread: register if needed, summarize the thread, show your inbox.

        Returns {project, agent, thread, inbox}.
        """
        project = mail.ensure_project(human_key=project_key)
        agent = join(ctx, project_key, program, model, agent_name, task_description, agent_token)
        summary = mail.summarize_thread(project_key=project_key, thread_id=thread_id,
                                        include_examples=include_examples)
        inbox = mail.fetch_inbox(project_key=project_key, agent_name=agent["name"], limit=inbox_limit)
        return {"project": project, "agent": agent, "thread": summary, "inbox": inbox}

    @tool(mcp, WRITE, access=rt.access.agent("requester"))
    def macro_contact_handshake(
        ctx: Context,
        project_key: ProjectKey,
        requester: Annotated[str, Field(description="You: the agent asking to write.")],
        target: Annotated[str, Field(description="The agent you want to write to.")],
        reason: Annotated[str, Field(max_length=4096, description="Why, in a sentence.")] = "",
        ttl_seconds: Annotated[int, Field(ge=60, description="How long the request lasts, in seconds.")] = 7 * 86400,
        auto_accept: Annotated[bool, Field(description=(
            "Also approve the request as the target; needs target_token unless this session registered it."))] = False,
        welcome_subject: Annotated[str | None, Field(max_length=512, description=(
            "With auto_accept: send this first message to the target once the link is approved."))] = None,
        welcome_body: Annotated[str | None, Field(description="Body of the first message (Markdown).")] = None,
        agent_token: AgentToken = None,
        target_token: Annotated[str | None, Field(description="The target's token, for auto_accept.")] = None,
    ) -> dict[str, Any]:
        """Ask to write to an agent, optionally approve it on its behalf, and send a first message.

        Returns {request, response, welcome_message}; response and
        welcome_message are null when not done.
        """
        request = mail.request_contact(project_key=project_key, from_agent=requester, to_agent=target,
                                       reason=reason, ttl_seconds=ttl_seconds)
        response = welcome = None
        if auto_accept:
            rt.act_as(ctx, project_key, target, target_token, argument="target_token")
            response = mail.respond_contact(project_key=project_key, to_agent=target, from_agent=requester,
                                            accept=True)
        if welcome_subject and response is not None:
            welcome = mail.send_message(project_key=project_key, sender_name=requester, to=[target],
                                        subject=welcome_subject, body_md=welcome_body or "")
        return {"request": request, "response": response, "welcome_message": welcome}
