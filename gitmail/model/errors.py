"""Errors that callers can act on.

Every expected failure in gitmail is a :class:`GitmailError` carrying a stable
``code`` (what kind of failure), a ``message`` that tells the caller what to do
next, and optional structured ``data``. The MCP server and the CLI render these
unchanged, so the codes are part of the public contract.
"""

from __future__ import annotations

import errno
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
SEAT_REQUIRED = "SEAT_REQUIRED"  # an agent driven from a seat wrote without holding it
AGENT_ASLEEP = "AGENT_ASLEEP"  # the agent must be woken before it acts
RESERVATION_NOT_STALE = "RESERVATION_NOT_STALE"  # force release refused: the holder is still active
PATH_NOT_ALLOWED = "PATH_NOT_ALLOWED"  # a file outside the archive and the allowed roots
ATTACHMENT_TOO_LARGE = "ATTACHMENT_TOO_LARGE"
ATTACHMENT_UNDECODABLE = "ATTACHMENT_UNDECODABLE"  # an image Pillow cannot read
CURSOR_AHEAD = "CURSOR_AHEAD"  # a read cursor beyond this machine's high watermark
RESOURCE_EXHAUSTED = "RESOURCE_EXHAUSTED"  # the machine ran out of file handles, disk space or memory
INDEX_UNAVAILABLE = "INDEX_UNAVAILABLE"  # derived state cannot answer right now; it rebuilds itself
INTERNAL = "INTERNAL"  # a failure gitmail did not foresee; the server's log has the details
SCOPE_DENIED = "SCOPE_DENIED"  # the agent's scopes (role@location) do not allow this
NOT_ABOVE = "NOT_ABOVE"  # only the agent itself or one above it in the hierarchy may do this
WAKE_REFUSED = "WAKE_REFUSED"  # an agent asleep until woken cannot wake itself
AGENT_EXPIRED = "AGENT_EXPIRED"  # the agent's expires_at has passed
IDENTITY_CLASH = "IDENTITY_CLASH"  # the name was registered twice apart, and the other registration kept it
SLOT_NOT_STALE = "SLOT_NOT_STALE"  # force release of a build slot refused: its holder is still active
TOO_MANY_SUBSCRIPTIONS = "TOO_MANY_SUBSCRIPTIONS"  # a subscription past the session's or the server's cap
TOO_MANY_WAITS = "TOO_MANY_WAITS"  # a waiting read past the agent's or the server's cap on waiting reads
SOURCE_LOCKED = "SOURCE_LOCKED"  # another program holds a lock on a database being imported
WAKE_TARGET_REFUSED = "WAKE_TARGET_REFUSED"  # a webhook URL neither on loopback nor on the operator's allow-list
WAKE_CHANNEL_MISMATCH = "WAKE_CHANNEL_MISMATCH"  # a wake stream opened for an agent whose card asks for another channel
HOST_NOT_ALLOWED = "HOST_NOT_ALLOWED"  # an HTTP request named a host the server does not answer for
ORIGIN_NOT_ALLOWED = "ORIGIN_NOT_ALLOWED"  # an HTTP request came from a web page of an origin not allowed
LAYOUT_UNSUPPORTED = "LAYOUT_UNSUPPORTED"  # the archive is at a layout newer than this version of gitmail knows
UNKNOWN_TOOL = "UNKNOWN_TOOL"  # no tool of that name (data: the nearest names, or the tool to use now)
TOOL_NOT_SERVED = "TOOL_NOT_SERVED"  # a tool of gitmail the server's tool profile leaves out (data: who has it)
FILE_TOO_LARGE = "FILE_TOO_LARGE"  # an upload or download past a limit (data: the limit, and the HTTP endpoint to use)
FILE_NOT_FOUND = "FILE_NOT_FOUND"  # no file of that ID in the project (files belong to one project)
DUPLICATE_ATTACHMENT = "DUPLICATE_ATTACHMENT"  # one file named twice in attachment_ids
NOT_FETCHED = "NOT_FETCHED"  # a record older than the window this machine joined with (data: the window's first day)
AGENT_ID_TAKEN = "AGENT_ID_TAKEN"  # an agent_id naming an agent that is not below the caller's agent


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


# What the operating system ran out of, by errno; libgit2 and SQLite report the
# same conditions only as text, so their messages are matched too.
_EXHAUSTED = {
    errno.EMFILE: "file handles (the process's open-file limit, ulimit -n)",
    errno.ENFILE: "file handles (the system-wide limit)",
    errno.ENOSPC: "disk space",
    errno.EDQUOT: "disk quota",
    errno.ENOMEM: "memory",
}
_EXHAUSTED_TEXT = {
    "too many open files": errno.EMFILE,
    "no space left on device": errno.ENOSPC,
    "disk quota exceeded": errno.EDQUOT,
    "cannot allocate memory": errno.ENOMEM,
    "out of memory": errno.ENOMEM,
    "database or disk is full": errno.ENOSPC,
}


def resource_exhausted(exc: BaseException) -> GitmailError | None:
    """RESOURCE_EXHAUSTED if ``exc`` (or what caused it) is the OS running out of something, else None."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        number = _exhausted_errno(current)
        if number is not None:
            what = _EXHAUSTED[number]
            return GitmailError(
                RESOURCE_EXHAUSTED,
                f"the server ran out of {what} and could not finish this call ({current}); retry it in a moment "
                "(writes with an idempotency_key are safe to repeat). If it keeps happening, the operator must "
                "raise the limit or free space; the server recovers by itself once the resource is back",
                {"errno": errno.errorcode.get(number, str(number))},
            )
        current = current.__cause__ or current.__context__
    return None


def _exhausted_errno(exc: BaseException) -> int | None:
    if isinstance(exc, GitmailError):
        return None  # already coded (its message may well mention what ran out)
    if isinstance(exc, MemoryError):
        return errno.ENOMEM
    if isinstance(exc, OSError) and exc.errno in _EXHAUSTED:
        return exc.errno
    text = str(exc).lower()
    return next((number for phrase, number in _EXHAUSTED_TEXT.items() if phrase in text), None)


def coded(exc: BaseException) -> GitmailError:
    """Any failure as a GitmailError: itself, RESOURCE_EXHAUSTED, or INTERNAL (for the faces' last resort)."""
    if isinstance(exc, GitmailError):
        return exc
    exhausted = resource_exhausted(exc)
    if exhausted is not None:
        return exhausted
    return GitmailError(INTERNAL, f"an unexpected failure stopped this call ({type(exc).__name__}: {exc}); it may be "
                        "retried, and if it keeps failing, report it with the server's log",
                        {"exception": type(exc).__name__})
