"""Typed, described parameters shared by the tools (they become the input schemas)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from gitmail.mail.attachments import MAX_ATTACHMENTS
from gitmail.mail.sending import MAX_RECIPIENTS
from gitmail.model.limits import (
    FEED_MAX_LIMIT,
    MAX_ATTACHMENT_IDS,
    MAX_TTL,
    MIN_INACTIVITY,
    READ_BUDGET_MAX,
    READ_BUDGET_MIN,
)

from .pages import BUDGET_MAX, BUDGET_MIN

# The server's instructions (sent once, at initialize) say what a project_key holds: a path or a slug. Repeated
# in every tool's schema it cost each agent 1.3 KB of context in the default listing.
ProjectKey = str
AgentName = str  # these arguments' names say what they hold: a description would repeat them
# The proof arguments hold the registration_token register_agent answered (a refused call says so, and a session
# that registered the agent needs none): a description on each of the forty tools would cost every agent 1.5 KB.
AgentToken = str | None
ProverName = Annotated[str | None, Field(description="You.")]
WindowUuid = Annotated[str | None, Field(max_length=64)]
SenderToken = str | None
MessageId = str | int
Recipients = Annotated[list[str] | None, Field(max_length=MAX_RECIPIENTS)]
Importance = Annotated[str, Field(max_length=32, description="low, normal, high or urgent.")]
SinceTs = Annotated[str | int | float | None, Field(
    description="After this time (ISO-8601 or epoch seconds).")]
Confirmation = Annotated[str, Field(description="Exactly 'I UNDERSTAND'.")]
# The instructions give an example of each once (claude-code, opus-4.1) rather than every tool that takes them.
Program = str
Model = str
TaskDescription = str
TaskUpdate = str | None
AttachmentPaths = Annotated[list[str] | None, Field(max_length=MAX_ATTACHMENTS)]
AttachmentIds = Annotated[list[str] | None, Field(max_length=MAX_ATTACHMENT_IDS, description=(
    "IDs of files upload_file stored in this project."))]
ConvertImages = bool | None  # its name says what false does: images stay as they are
AttachmentsPolicy = Annotated[Literal["auto", "inline", "file"] | None, Field(description=(
    "How body_md images are kept."))]
SenderSeat = Annotated[str | None, Field(max_length=128, description="Seat token, while a session holds the seat.")]
IdentityKey = Annotated[str | None, Field(max_length=128, description="Retry key (replays the first answer).")]
Reason = Annotated[str | None, Field(max_length=200, description="Why (kept in the commit message).")]
ActingAs = Annotated[str | None, Field(description=(
    "Make this call as an agent below you (after proving yourself as usual)."))]
AgentId = Annotated[str | None, Field(max_length=128, description=(
    "A readable name for this task's identity: made below you on first use, reused after."))]
MaxBytes = Annotated[int, Field(ge=READ_BUDGET_MIN, le=READ_BUDGET_MAX, description="Byte budget for bodies.")]
# What forcing another agent's holding (a reservation, a build slot) takes.
ForceNote = Annotated[str, Field(max_length=4096, description="Added to the message sent to the holder.")]
NotifyPrevious = Annotated[bool, Field(description="Send the holder a message saying why.")]
InactivitySeconds = Annotated[int, Field(ge=MIN_INACTIVITY, le=MAX_TTL, description=(
    "The holder counts as gone after this long without activity."))]
Seat = Annotated[str | None, Field(max_length=128, description="Seat token, while a session holds the seat.")]

# The cursor reads (read_messages, read_compact): where to continue, how many, in how many bytes.
Cursor = Annotated[int, Field(ge=0, description="next_after from catch_up or the last page.")]
FeedLimit = Annotated[int, Field(ge=1, le=FEED_MAX_LIMIT)]
PageBudget = Annotated[int, Field(ge=BUDGET_MIN, le=BUDGET_MAX, description="Byte budget of the result.")]
# catch_up and read_compact read a channel instead of the inbox (listed only with the channels family).
ChannelArgument = Annotated[str | None, Field(max_length=65, description="Read this channel instead.")]
