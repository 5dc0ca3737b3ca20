"""Errors that callers can act on.

Every expected failure in gitmail is a :class:`GitmailError` carrying a stable
``code`` (what kind of failure), a ``message`` that tells the caller what to do
next, and optional structured ``data``. The MCP server and the CLI render these
unchanged, so the codes are part of the public contract.
"""

from __future__ import annotations

from typing import Any

INVALID_ARGUMENT = "INVALID_ARGUMENT"
NOT_FOUND = "NOT_FOUND"
ALREADY_EXISTS = "ALREADY_EXISTS"
CONFLICT = "CONFLICT"
RETRY_EXHAUSTED = "RETRY_EXHAUSTED"
CORRUPT_RECORD = "CORRUPT_RECORD"
UNAUTHORIZED = "UNAUTHORIZED"
SYNC_FAILED = "SYNC_FAILED"  # fetch or push could not reach the remote
SYNC_REJECTED = "SYNC_REJECTED"  # the remote's hooks refused what we pushed
CONFIRMATION_REQUIRED = "CONFIRMATION_REQUIRED"
RECIPIENT_NOT_FOUND = "RECIPIENT_NOT_FOUND"
AGENT_INACTIVE = "AGENT_INACTIVE"
CONTACT_REQUIRED = "CONTACT_REQUIRED"
CONTACT_BLOCKED = "CONTACT_BLOCKED"
IDEMPOTENCY_CONFLICT = "IDEMPOTENCY_CONFLICT"
STALE_EPOCH = "STALE_EPOCH"  # a write under a seat that was taken over or given up
SEAT_HELD = "SEAT_HELD"  # another session holds the agent's seat
AGENT_ASLEEP = "AGENT_ASLEEP"  # the agent must be woken before it acts
RESERVATION_NOT_STALE = "RESERVATION_NOT_STALE"  # force release refused: the holder is still active
PATH_NOT_ALLOWED = "PATH_NOT_ALLOWED"  # a file outside the archive and the allowed roots
ATTACHMENT_TOO_LARGE = "ATTACHMENT_TOO_LARGE"
ATTACHMENT_UNDECODABLE = "ATTACHMENT_UNDECODABLE"  # an image Pillow cannot read
CURSOR_AHEAD = "CURSOR_AHEAD"  # a read cursor beyond this machine's high watermark


class GitmailError(Exception):
    """A failure with a stable code and advice for the caller."""

    def __init__(self, code: str, message: str, data: dict[str, Any] | None = None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = dict(data or {})

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "data": self.data}

    def __repr__(self) -> str:
        return f"GitmailError({self.code!r}, {self.message!r})"


def invalid(message: str, **data: Any) -> GitmailError:
    return GitmailError(INVALID_ARGUMENT, message, data)


def not_found(message: str, **data: Any) -> GitmailError:
    return GitmailError(NOT_FOUND, message, data)
