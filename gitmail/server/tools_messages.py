"""Message tools: send, reply, list an inbox or a topic, mark read, acknowledge."""

from __future__ import annotations

from typing import Annotated

from fastmcp import Context
from pydantic import Field

from gitmail.mail.facade import (
    AckReceipt,
    InboxMessage,
    ReadReceipt,
    ReplyResult,
    SendOptions,
    SendResult,
    TopicMessage,
)
from gitmail.mail.sending import MAX_RECIPIENTS
from gitmail.model.limits import READ_BUDGET_DEFAULT

from .params import (
    AgentName,
    AgentToken,
    AttachmentIds,
    AttachmentPaths,
    AttachmentsPolicy,
    ConvertImages,
    Importance,
    MaxBytes,
    MessageId,
    ProjectKey,
    Recipients,
    SenderSeat,
    SenderToken,
    SinceTs,
)
from .registry import ITSELF, MEMBER, Toolbox, agent
from .results import IDEMPOTENT, READ, WRITE
from .runtime import Runtime

IdempotencyKey = Annotated[str | None, Field(max_length=128)]
Topic = str | None
Limit = Annotated[int, Field(ge=1, le=1000)]
IncludeBodies = bool
UrgentOnly = Annotated[bool, Field(description="Only high or urgent.")]
UnreadOnly = bool


AutoContact = bool
HoldIfBlocked = Annotated[bool, Field(description="Hold until they approve.")]

tools = Toolbox("messages")


def named(recipients: list[str] | None) -> list[str] | None:
    """Recipients as the domain takes them: a mention written ``@Kid`` (as in chat) addresses the agent ``Kid``.

    An agent name never starts with ``@`` (``name@project`` names another
    project's agent), so the leading ``@`` can only be a mention's.
    """
    if recipients is None:
        return None
    return [r[1:] if isinstance(r, str) and r.startswith("@") and len(r) > 1 else r for r in recipients]


def in_session(rt: Runtime, ctx: Context, project_key: str) -> frozenset[str]:
    """The agents this session proved in the project: contact to them is approved in band."""
    return frozenset(name.lower() for name in rt.identities.agents_in(ctx, rt.store.resolve(project_key)))


@tools.tool(WRITE, access=agent("sender_name", "sender_token"))
def send_message(
    rt: Runtime,
    ctx: Context,
    project_key: ProjectKey,
    sender_name: Annotated[str, Field(description="You.")],
    subject: Annotated[str, Field(max_length=512)],
    body_md: str,
    to: Annotated[list[str] | None, Field(max_length=MAX_RECIPIENTS, description=(
        "Recipients (name@project elsewhere)."))] = None,
    cc: Recipients = None,
    bcc: Annotated[list[str] | None, Field(max_length=MAX_RECIPIENTS)] = None,
    importance: Importance = "normal",
    ack_required: bool = False,
    thread_id: Annotated[str | None, Field(description="Continue this thread.")] = None,
    topic: Topic = None,
    broadcast: Annotated[bool, Field(description="With no to: send to every active agent.")] = False,
    auto_contact_if_blocked: AutoContact = True,
    hold_if_blocked: HoldIfBlocked = False,
    idempotency_key: IdempotencyKey = None,
    attachment_paths: AttachmentPaths = None,
    attachment_ids: AttachmentIds = None,
    convert_images: ConvertImages = None,
    attachments_policy: AttachmentsPolicy = None,
    seat: SenderSeat = None,
    sender_token: SenderToken = None,
) -> SendResult:
    """Send a Markdown message to agents."""
    return rt.mail.send_message(
        project_key=project_key, sender_name=sender_name, to=named(to), subject=subject, body_md=body_md,
        options=SendOptions(
            cc=named(cc), bcc=named(bcc), importance=importance, ack_required=ack_required, thread_id=thread_id,
            topic=topic, broadcast=broadcast, auto_contact_if_blocked=auto_contact_if_blocked,
            hold_if_blocked=hold_if_blocked, approve_as=in_session(rt, ctx, project_key),
            idempotency_key=idempotency_key, attachment_paths=attachment_paths, convert_images=convert_images,
            attachment_ids=attachment_ids,
            attachments_policy=attachments_policy, seat=seat))


@tools.tool(WRITE, access=agent("sender_name", "sender_token"))
def reply_message(
    rt: Runtime,
    ctx: Context,
    project_key: ProjectKey,
    message_id: MessageId,
    sender_name: Annotated[str, Field(description="You.")],
    body_md: str,
    to: Annotated[list[str] | None, Field(max_length=MAX_RECIPIENTS, description=(
        "Default: the sender."))] = None,
    cc: Recipients = None,
    bcc: Recipients = None,
    subject_prefix: Annotated[str, Field(max_length=32, description=(
        "Prefixed unless present."))] = "Re:",
    importance: Annotated[str | None, Field(max_length=32, description="Default: the original's.")] = None,
    ack_required: Annotated[bool | None, Field(description="Default: the original's.")] = None,
    auto_contact_if_blocked: AutoContact = True,
    hold_if_blocked: HoldIfBlocked = False,
    idempotency_key: IdempotencyKey = None,
    attachment_paths: AttachmentPaths = None,
    attachment_ids: AttachmentIds = None,
    convert_images: ConvertImages = None,
    attachments_policy: AttachmentsPolicy = None,
    seat: SenderSeat = None,
    sender_token: SenderToken = None,
) -> ReplyResult:
    """Reply in a message's thread, to its sender unless you name recipients."""
    return rt.mail.reply_message(
        project_key=project_key, message_id=message_id, sender_name=sender_name, body_md=body_md, to=named(to),
        options=SendOptions(
            cc=named(cc), bcc=named(bcc), subject_prefix=subject_prefix, importance=importance,
            ack_required=ack_required, auto_contact_if_blocked=auto_contact_if_blocked,
            hold_if_blocked=hold_if_blocked, approve_as=in_session(rt, ctx, project_key),
            idempotency_key=idempotency_key, attachment_paths=attachment_paths, convert_images=convert_images,
            attachment_ids=attachment_ids,
            attachments_policy=attachments_policy, seat=seat))


@tools.tool(READ, access=ITSELF)
def fetch_inbox(
    rt: Runtime,
    ctx: Context,
    project_key: ProjectKey,
    agent_name: AgentName,
    limit: Limit = 20,
    urgent_only: UrgentOnly = False,
    include_bodies: IncludeBodies = False,
    since_ts: SinceTs = None,
    topic: Topic = None,
    unread_only: UnreadOnly = False,
    max_bytes: MaxBytes = READ_BUDGET_DEFAULT,
    agent_token: AgentToken = None,
) -> list[InboxMessage]:
    """List your newest inbox messages; read state unchanged."""
    return rt.mail.fetch_inbox(project_key=project_key, agent_name=agent_name, limit=limit, urgent_only=urgent_only,
                               include_bodies=include_bodies, since_ts=since_ts, topic=topic, unread_only=unread_only,
                               max_bytes=max_bytes)


@tools.tool(READ, access=MEMBER)
def fetch_topic(
    rt: Runtime,
    ctx: Context,
    project_key: ProjectKey,
    topic_name: Annotated[str, Field(description="The topic tag (case-insensitive).")],
    limit: Limit = 50,
    include_bodies: IncludeBodies = True,
    since_ts: SinceTs = None,
    agent_name: Annotated[str | None, Field(description="You (default: this session's agent).")] = None,
    unread_only: Annotated[bool, Field(description="Only unread ones addressed to you.")] = False,
    max_bytes: MaxBytes = READ_BUDGET_DEFAULT,
    agent_token: AgentToken = None,
) -> list[TopicMessage]:
    """List the project's messages with a topic tag, newest first."""
    viewer = rt.access.viewer(ctx, project_key, agent_name)
    return rt.mail.fetch_topic(project_key=project_key, topic_name=topic_name, limit=limit,
                               include_bodies=include_bodies, since_ts=since_ts, agent_name=viewer,
                               unread_only=unread_only, max_bytes=max_bytes)


@tools.tool(IDEMPOTENT, access=ITSELF)
def mark_message_read(rt: Runtime, ctx: Context, project_key: ProjectKey, agent_name: AgentName, message_id: MessageId,
                      agent_token: AgentToken = None, seat: SenderSeat = None) -> ReadReceipt:
    """Mark a message in your inbox read."""
    return rt.mail.mark_message_read(project_key=project_key, agent_name=agent_name, message_id=message_id,
                                     seat=seat)


@tools.tool(IDEMPOTENT, access=ITSELF)
def acknowledge_message(rt: Runtime, ctx: Context, project_key: ProjectKey, agent_name: AgentName,
                        message_id: MessageId, agent_token: AgentToken = None,
                        seat: SenderSeat = None) -> AckReceipt:
    """Acknowledge an inbox message (and mark it read)."""
    return rt.mail.acknowledge_message(project_key=project_key, agent_name=agent_name, message_id=message_id,
                                       seat=seat)
