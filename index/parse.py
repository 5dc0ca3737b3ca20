"""Reading records quickly for derived state.

The index reads every message of an archive when it is built, so it parses
front matter with the record codec's fast path (flat headers line by line,
anything else by libyaml's C loader in the same dialect). It is lenient where
strictness buys nothing here: a file the engine would reject is skipped by the
index and reported by ``gitmail fsck``, never half-indexed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar

from gitmail.model import codec
from gitmail.model.clock import HLC, format_ts, parse_ts
from gitmail.model.errors import GitmailError
from gitmail.model.ids import id_time, is_id
from gitmail.model.records import IMPORTED_ID, MAX_IMPORTANCE, Channel, ChannelPost, Message, Record


class Unreadable(ValueError):
    """The file is not a record the index can use."""


def _load(text: str) -> dict[str, Any]:
    try:
        return codec.load_text(text)
    except codec.DecodeError as exc:
        raise Unreadable(str(exc)) from None


def front_matter(data: bytes) -> tuple[dict[str, Any], str]:
    """The front matter fields and Markdown body of a message or journal file."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Unreadable(f"not UTF-8 ({exc.reason})") from None
    if not text.startswith("---\n"):
        raise Unreadable("missing front matter")
    end = text.find("\n---\n", 3)
    if end < 0:
        raise Unreadable("unterminated front matter")
    body = text[end + 5 :]
    return _load(text[4 : end + 1]), body[1:] if body.startswith("\n") else body


def body_of(data: bytes) -> str:
    """Just the Markdown body of a message file (no YAML parsing), for snippets."""
    text = data.decode("utf-8", errors="replace")
    end = text.find("\n---\n", 3) if text.startswith("---\n") else -1
    body = text[end + 5 :] if end >= 0 else text
    return body[1:] if body.startswith("\n") else body


def yaml_fields(data: bytes) -> dict[str, Any]:
    try:
        return _load(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise Unreadable(f"not UTF-8 ({exc.reason})") from None


def _names(value: Any, key: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise Unreadable(f"field '{key}' must be a list of agent names")
    return value


def _maps(value: Any) -> list[dict[str, Any]]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
        raise Unreadable("field 'attachments' must be a list of mappings")
    return value


def _text(fields: dict[str, Any], key: str) -> str:
    value = _optional_text(fields, key)
    if value is None:
        raise Unreadable(f"field '{key}' is required")
    return value


def _optional_text(fields: dict[str, Any], key: str) -> str | None:
    value = fields.get(key)
    if value is not None and not isinstance(value, str):
        raise Unreadable(f"field '{key}' must be text")
    return value


def ts_field(fields: dict[str, Any], key: str) -> str:
    """The timestamp in ``fields[key]``, in canonical form (Unreadable if missing or malformed)."""
    try:
        return format_ts(parse_ts(_text(fields, key)))
    except ValueError as exc:
        raise Unreadable(f"field '{key}': {exc}") from None


def message_fields(data: bytes, message_id: str) -> dict[str, Any]:
    """What the index keeps of one message file (header fields plus body)."""
    fields, body = front_matter(data)
    if fields.get("id") != message_id or not is_id(message_id):
        raise Unreadable(f"field 'id' does not match the file name {message_id}")
    importance = fields.get("importance") or "normal"
    if not isinstance(importance, str) or len(importance) > MAX_IMPORTANCE or "\n" in importance:
        raise Unreadable(f"field 'importance' must be one line of at most {MAX_IMPORTANCE} characters")
    return {
        "id": message_id,
        "thread_id": _text(fields, "thread_id"),
        "from": _text(fields, "from"),
        "subject": _text(fields, "subject"),
        "created_ts": ts_field(fields, "created"),
        "to": _names(fields.get("to"), "to"),
        "cc": _names(fields.get("cc"), "cc"),
        "bcc": _names(fields.get("bcc"), "bcc"),
        "importance": importance,
        "ack_required": bool(fields.get("ack_required", False)),
        "topic": _optional_text(fields, "topic"),
        "reply_to": _optional_text(fields, "reply_to"),
        "attachments": _maps(fields.get("attachments")),
        "body": body,
        "imported_id": _imported_id(fields.get(IMPORTED_ID)),
    }


def fields_of(message: Message) -> dict[str, Any]:
    """What the index keeps of a message already parsed as a record, as :func:`message_fields` reads it from its file.

    The record checks parse every message a sync brings in, strictly (a
    record that parses there reads here too); the index takes their record
    instead of parsing the file a second time.
    """
    return {
        "id": message.id,
        "thread_id": message.thread_id,
        "from": message.sender,
        "subject": message.subject,
        "created_ts": message.created_ts,
        "to": list(message.to),
        "cc": list(message.cc),
        "bcc": list(message.bcc),
        "importance": message.importance or "normal",
        "ack_required": message.ack_required,
        "topic": message.topic,
        "reply_to": message.reply_to,
        "attachments": [dict(item) for item in message.attachments],
        "body": message.body,
        "imported_id": _imported_id(message.extra.get(IMPORTED_ID)),
    }


def _imported_id(value: Any) -> str | None:
    """The id an imported message had in its source (a number there), as text; None for gitmail's own."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        return None
    text = str(value).strip()
    return text if text and len(text) <= 64 else None


def id_ts(record_id: str) -> str:
    """The creation time encoded in an ID, as a record timestamp."""
    return format_ts(id_time(record_id))


R = TypeVar("R", bound=Record)


def record_from_fields(record_type: type[R], fields: dict[str, Any]) -> R | None:
    """A record rebuilt from the fields the metadata store keeps of it (None if they do not make a valid one).

    The store keeps YAML records as JSON with clock values as text; extra
    ``x-`` fields a human added are left out, and fields the store drops (a
    token hash) take their defaults.
    """
    known = {f.metadata.get("key") or f.name: f.name for f in dataclasses.fields(record_type) if f.metadata.get("kind")}
    try:
        values = {known[key]: value for key, value in fields.items() if key in known}
        if "hlc" in values:
            values["hlc"] = HLC.parse(str(values["hlc"]))
        make: Callable[..., R] = record_type
        record = make(**values)
        record.validate()
    except (GitmailError, TypeError, ValueError):
        return None  # not a valid record: fsck reports the file, derived state leaves it out
    return record


def channel_record(path: str, data: bytes) -> Channel | ChannelPost:
    """The channel definition or post at ``path``, parsed strictly (they are few and small); Unreadable if not one."""
    record_type: type[Channel] | type[ChannelPost] = ChannelPost if path.endswith(".md") else Channel
    try:
        return record_type.from_bytes(data, path)
    except GitmailError as exc:
        raise Unreadable(exc.message) from None
