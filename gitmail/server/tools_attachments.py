"""Attachment tools: how images in your messages are stored, and reading a stored attachment."""

from __future__ import annotations

from typing import Annotated, Literal

from fastmcp import Context
from pydantic import Field

from gitmail.mail.facade import AttachmentContent, AttachmentsPolicySet

from .params import AgentName, AgentToken, ProjectKey, ProverName, Seat
from .registry import ITSELF, MEMBER, Toolbox
from .results import IDEMPOTENT, READ
from .runtime import Runtime

tools = Toolbox("attachments")


@tools.tool(IDEMPOTENT, access=ITSELF)
def set_attachments_policy(
    rt: Runtime,
    ctx: Context,
    project_key: ProjectKey,
    agent_name: AgentName,
    policy: Annotated[Literal["auto", "inline", "file"], Field(description=(
        "auto (small images inline), inline or file."))],
    agent_token: AgentToken = None,
    seat: Seat = None,
) -> AttachmentsPolicySet:
    """Choose your default handling of images in outgoing messages."""
    return rt.mail.set_attachments_policy(project_key, agent_name, policy, seat=seat)


@tools.tool(READ, access=MEMBER)
def get_attachment(
    rt: Runtime,
    project_key: ProjectKey,
    path: Annotated[str, Field(description=(
        "The stored path from a message's attachments (attachments/xx/<sha256>.<ext>)."))],
    agent_name: ProverName = None,
    agent_token: AgentToken = None,
) -> AttachmentContent:
    """Fetch a stored attachment, base64 encoded, checked against its SHA-256."""
    return rt.mail.get_attachment(project_key, path)
