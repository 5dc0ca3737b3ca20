"""Typed, described parameters shared by the tools (they become the input schemas)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from gitmail.mail.attachments import MAX_ATTACHMENTS
from gitmail.mail.sending import MAX_RECIPIENTS
from gitmail.model.limits import MAX_TTL, MIN_INACTIVITY, READ_BUDGET_DEFAULT, READ_BUDGET_MAX, READ_BUDGET_MIN

ProjectKey = Annotated[str, Field(
    description="The project: the absolute path of your working directory (e.g. '/data/projects/backend'), "
                "as passed to ensure_project, or the project's slug.")]
AgentName = Annotated[str, Field(
    description="An agent name registered in the project (see resource://agents/{project_key}).")]
AgentToken = Annotated[str | None, Field(
    description="Proof that you are agent_name: the registration_token returned when it registered. "
                "Not needed in the MCP session that registered the agent.")]
ProverName = Annotated[str | None, Field(description=(
    "You: an agent of the project, proving with agent_token that the caller belongs to it. Not needed in an MCP "
    "session that registered or proved an agent of this project."))]
WindowUuid = Annotated[str | None, Field(max_length=64, description=(
    "Your window's UUID (one per terminal or editor window, kept by your client). Without a name, the agent "
    "this window went by is registered again (its token is still needed); the window then goes by the agent "
    "registered."))]
SenderToken = Annotated[str | None, Field(
    description="Proof that you are sender_name: the registration_token returned when it registered. "
                "Not needed in the MCP session that registered the agent.")]
MessageId = Annotated[str | int, Field(
    description="A message ID (23 characters, as returned by send_message or fetch_inbox), or the number a message "
                "imported from mcp_agent_mail had there.")]
Recipients = Annotated[list[str] | None, Field(max_length=MAX_RECIPIENTS, description=(
    "Agent names in the project (name@project for an agent of another project of this server)."))]
Importance = Annotated[str, Field(max_length=32, description=(
    "How urgent: low, normal, high or urgent (high and urgent show in urgent-only views); any other short "
    "label is stored as given, for filters."))]
SinceTs = Annotated[str | int | float | None, Field(
    description="Only messages created strictly after this time: ISO-8601 (e.g. '2026-12-01T09:00:00Z'; without a "
                "zone it is UTC) or epoch seconds.")]
Confirmation = Annotated[str, Field(description="Must be exactly 'I UNDERSTAND': this deletion cannot be undone.")]
Program = Annotated[str, Field(description="The agent program, e.g. 'claude-code' or 'codex-cli'.")]
Model = Annotated[str, Field(description="The model behind the agent, e.g. 'opus-4.1' or 'gpt5-codex'.")]
TaskDescription = Annotated[str, Field(description="What the agent is working on (shown in directory listings).")]
TaskUpdate = Annotated[str | None, Field(description=(
    "What the agent is working on (shown in directory listings). Left out: an existing agent keeps its task."))]
AttachmentPaths = Annotated[list[str] | None, Field(max_length=MAX_ATTACHMENTS, description=(
    "Files to attach: absolute paths inside the server's allowed attachment roots (GITMAIL_ATTACHMENT_ROOTS), or "
    "an attachment already stored in the archive by its path (attachments/<xx>/<yy>/<sha256>.<ext>, as a message's "
    "attachments list it); no other file of the archive. Images become WebP; every file is stored by its "
    "SHA-256 and listed in the message's attachments with media type, size and hash."))]
ConvertImages = Annotated[bool | None, Field(description=(
    "false: store images as they are and inline nothing (default: convert to WebP). Ignored when your "
    "attachments policy is inline or file."))]
AttachmentsPolicy = Annotated[Literal["auto", "inline", "file"] | None, Field(description=(
    "How images referenced in body_md (file paths or data: URIs) are stored: auto inlines small ones as "
    "data URIs, inline always, file never (default: your set_attachments_policy, else auto)."))]
SenderSeat = Annotated[str | None, Field(max_length=128, description=(
    "Your seat token from take_seat, when a session holds your seat (writes without it are refused then)."))]
IdentityKey = Annotated[str | None, Field(max_length=128, description=(
    "A key you choose for this identity write (e.g. a UUID). Retrying with the same key and the same arguments "
    "returns the first answer (with replayed=true) and writes nothing; the same key for a different request fails "
    "with IDEMPOTENCY_CONFLICT. Keys are honoured for at least 24 hours."))]
Reason = Annotated[str | None, Field(max_length=200, description=(
    "Why you are doing this, in one line (at most 200 characters); recorded in the commit message."))]
ActingAs = Annotated[str | None, Field(description=(
    "An agent below you (one you or an agent below you spawned) to make this one call as, with its narrower "
    "scopes: the call proves you (the agent named by the usual argument, with your token or session) and then "
    "acts as this agent. Its seat token is still needed while a session holds its seat."))]
MaxBytes = Annotated[int, Field(ge=READ_BUDGET_MIN, le=READ_BUDGET_MAX, description=(
    f"With bodies: at most this many bytes of messages (each as its JSON text) on the page (default "
    f"{READ_BUDGET_DEFAULT}, {READ_BUDGET_MIN}-{READ_BUDGET_MAX}). The page is filled from the oldest of the "
    "messages asked for; when newer ones do not fit, the first (newest) item carries more: {left_out, since_ts, "
    "hint}, and calling again with that since_ts reads them. A message too large for the page on its own is "
    "listed with body_omitted: true and body_bytes (read it with resource://message/{id}))."))]
# What forcing another agent's holding (a reservation, a build slot) takes.
ForceNote = Annotated[str, Field(max_length=4096, description="Added to the message sent to the holder.")]
NotifyPrevious = Annotated[bool, Field(description="Send the holder a message saying why.")]
InactivitySeconds = Annotated[int, Field(ge=MIN_INACTIVITY, le=MAX_TTL, description=(
    "The holder counts as gone after this long without activity."))]
Seat = Annotated[str | None, Field(max_length=128, description=(
    "Your seat token from take_seat, when a session holds this agent's seat; writes without it are refused "
    "while the seat is held, and writes under a replaced seat fail with STALE_EPOCH."))]
