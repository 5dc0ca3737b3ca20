"""Contact tools: ask to write to an agent, answer such a request, list links, set a policy, the handshake macro."""

from __future__ import annotations

from typing import Annotated, Literal

from fastmcp import Context
from pydantic import Field

from gitmail.mail.facade import ContactListing, ContactRequest, ContactResponse, PolicySet, SendResult
from gitmail.model.errors import invalid
from gitmail.model.records import MAX_BODY_BYTES
from gitmail.model.results import Result, result

from .params import AgentName, AgentToken, ProjectKey, SenderSeat
from .registry import ITSELF, Toolbox, agent
from .results import IDEMPOTENT, READ, WRITE
from .runtime import Runtime

Ttl = Annotated[int, Field(ge=60, le=365 * 86400)]

tools = Toolbox("contacts")


@result
class Handshake(Result):
    """A contact request, its approval when the call made it for the target, and the first message sent."""

    request: ContactRequest
    response: ContactResponse | None
    welcome_message: SendResult | None


@tools.tool(WRITE, access=agent("from_agent"))
def request_contact(
    rt: Runtime,
    ctx: Context,
    project_key: ProjectKey,
    from_agent: Annotated[str, Field(description="You, asking to write.")],
    to_agent: str,
    reason: Annotated[str, Field(max_length=4096, description="Why, in a sentence; the target sees it.")] = "",
    ttl_seconds: Ttl = 7 * 86400,
    to_project: Annotated[str | None, Field(description="The target's project, when not yours.")] = None,
    agent_token: AgentToken = None,
    seat: SenderSeat = None,
) -> ContactRequest:
    """Ask an agent for permission to message it (when its policy or another project requires it)."""
    return rt.mail.request_contact(project_key=project_key, from_agent=from_agent, to_agent=to_agent,
                                   reason=reason, ttl_seconds=ttl_seconds, seat=seat, to_project=to_project)


@tools.tool(IDEMPOTENT, access=agent("to_agent"))
def respond_contact(
    rt: Runtime,
    ctx: Context,
    project_key: ProjectKey,
    to_agent: Annotated[str, Field(description="You: the agent that received the request.")],
    from_agent: Annotated[str, Field(description=(
        "The agent that asked (name@project from another project)."))],
    accept: Annotated[bool, Field(description="true to approve, false to deny.")],
    ttl_seconds: Ttl = 30 * 86400,
    agent_token: AgentToken = None,
    seat: SenderSeat = None,
) -> ContactResponse:
    """Approve or deny a contact request made to you."""
    return rt.mail.respond_contact(project_key=project_key, to_agent=to_agent, from_agent=from_agent,
                                   accept=accept, ttl_seconds=ttl_seconds, seat=seat)


@tools.tool(READ, access=ITSELF)
def list_contacts(rt: Runtime, ctx: Context, project_key: ProjectKey, agent_name: AgentName,
                  agent_token: AgentToken = None) -> list[ContactListing]:
    """List your contact links with status and expiry."""
    return rt.mail.list_contacts(project_key=project_key, agent_name=agent_name)


@tools.tool(IDEMPOTENT, access=ITSELF)
def set_contact_policy(
    rt: Runtime,
    ctx: Context,
    project_key: ProjectKey,
    agent_name: AgentName,
    policy: Annotated[Literal["open", "auto", "contacts_only", "block_all"], Field(description=(
        "open: anyone; auto: shared context or approved; contacts_only; block_all."))],
    agent_token: AgentToken = None,
    seat: SenderSeat = None,
) -> PolicySet:
    """Choose who may send you messages."""
    return rt.mail.set_contact_policy(project_key=project_key, agent_name=agent_name, policy=policy, seat=seat)


@tools.tool(WRITE, access=agent("requester"))
def macro_contact_handshake(
    rt: Runtime,
    ctx: Context,
    project_key: ProjectKey,
    requester: Annotated[str, Field(description="You, asking to write.")],
    target: str,
    reason: Annotated[str, Field(max_length=4096, description="Why, in a sentence.")] = "",
    ttl_seconds: Annotated[int, Field(ge=60)] = 7 * 86400,
    auto_accept: Annotated[bool, Field(description="Also approve it as the target (target_token).")] = False,
    welcome_subject: Annotated[str | None, Field(max_length=512, description=(
        "With auto_accept: a first message's subject."))] = None,
    welcome_body: str | None = None,
    agent_token: AgentToken = None,
    target_token: Annotated[str | None, Field(description="The target's token, for auto_accept.")] = None,
) -> Handshake:
    """Request contact, optionally approve it for the target, and send a first message."""
    if auto_accept:  # every proof before the first write: a call that fails changes nothing
        rt.act_as(ctx, project_key, target, target_token, argument="target_token")
    if welcome_subject and auto_accept and len((welcome_body or "").encode("utf-8")) > MAX_BODY_BYTES:
        raise invalid(f"welcome_body is larger than {MAX_BODY_BYTES} bytes; shorten it", field="welcome_body")
    request = rt.mail.request_contact(project_key=project_key, from_agent=requester, to_agent=target,
                                      reason=reason, ttl_seconds=ttl_seconds)
    response = welcome = None
    if auto_accept:
        response = rt.mail.respond_contact(project_key=project_key, to_agent=target, from_agent=requester,
                                           accept=True)
    if welcome_subject and response is not None:
        welcome = rt.mail.send_message(project_key=project_key, sender_name=requester, to=[target],
                                       subject=welcome_subject, body_md=welcome_body or "")
    return Handshake(request=request, response=response, welcome_message=welcome)
