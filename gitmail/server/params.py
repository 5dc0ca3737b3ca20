"""Typed, described parameters shared by the tools (they become the input schemas)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from gitmail.mail.attachments import MAX_ATTACHMENTS
from gitmail.mail.sending import MAX_RECIPIENTS
from gitmail.model.limits import MAX_TTL, MIN_INACTIVITY, READ_BUDGET_MAX, READ_BUDGET_MIN

ProjectKey = Annotated[str, Field(
    description="Project path (or slug).")]
AgentName = Annotated[str, Field(
    description="An agent of the project.")]
AgentToken = Annotated[str | None, Field(
    description="agent_name's registration_token (not needed in its own session).")]
ProverName = Annotated[str | None, Field(description="You, an agent of the project.")]
WindowUuid = Annotated[str | None, Field(max_length=64, description=(
    "Your window's UUID: without a name, its agent registers again."))]
SenderToken = Annotated[str | None, Field(
    description="sender_name's registration_token (not needed in its own session).")]
MessageId = Annotated[str | int, Field(
    description="A message ID (or an imported message's old number).")]
Recipients = Annotated[list[str] | None, Field(max_length=MAX_RECIPIENTS, description=(
    "Agent names (name@project elsewhere)."))]
Importance = Annotated[str, Field(max_length=32, description="low, normal, high or urgent.")]
SinceTs = Annotated[str | int | float | None, Field(
    description="Only messages after this time: ISO-8601 (UTC by default) or epoch seconds.")]
Confirmation = Annotated[str, Field(description="Exactly 'I UNDERSTAND': this deletion cannot be undone.")]
Program = Annotated[str, Field(description="The agent program, e.g. 'claude-code'.")]
Model = Annotated[str, Field(description="The model, e.g. 'opus-4.1'.")]
TaskDescription = Annotated[str, Field(description="What the agent works on.")]
TaskUpdate = Annotated[str | None, Field(description=(
    "What the agent works on (left out: unchanged)."))]
AttachmentPaths = Annotated[list[str] | None, Field(max_length=MAX_ATTACHMENTS, description=(
    "Files to attach (under the attachment roots)."))]
ConvertImages = Annotated[bool | None, Field(description="false: keep images as they are.")]
AttachmentsPolicy = Annotated[Literal["auto", "inline", "file"] | None, Field(description=(
    "How images in body_md are stored."))]
SenderSeat = Annotated[str | None, Field(max_length=128, description="Seat token, while a session holds the seat.")]
IdentityKey = Annotated[str | None, Field(max_length=128, description=(
    "Your key for this write: a retry with it replays the first answer."))]
Reason = Annotated[str | None, Field(max_length=200, description=(
    "Why, in one line (kept in the commit message)."))]
ActingAs = Annotated[str | None, Field(description=(
    "Make this call as an agent below you (after proving yourself as usual)."))]
MaxBytes = Annotated[int, Field(ge=READ_BUDGET_MIN, le=READ_BUDGET_MAX, description=(
    "With bodies: byte budget of the page (the first item's more tells how to read the rest)."))]
# What forcing another agent's holding (a reservation, a build slot) takes.
ForceNote = Annotated[str, Field(max_length=4096, description="Added to the message sent to the holder.")]
NotifyPrevious = Annotated[bool, Field(description="Send the holder a message saying why.")]
InactivitySeconds = Annotated[int, Field(ge=MIN_INACTIVITY, le=MAX_TTL, description=(
    "The holder counts as gone after this long without activity."))]
Seat = Annotated[str | None, Field(max_length=128, description="Seat token, while a session holds the seat.")]
