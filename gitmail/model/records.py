"""The typed records that make up an archive, and where each one lives.

One record is one file. Messages and journal entries are Markdown with YAML
front matter; everything else is YAML. Parsing is strict: an unknown field, a
missing required field or a value of the wrong shape is an error that names the
file and the field. Serialization is canonical (declared field order, optional
empty fields left out), so a file gitmail wrote parses and re-serializes to the
same bytes.

Paths are sharded by day (``YYYY/MM/DD``) using the UTC time encoded in the
record's ID, and under each day fanned out over two levels of folders named by
the last characters of the file's name (its random bits), so no folder a write
rewrites grows with the day's traffic: see *Layouts* below.
"""

from __future__ import annotations

import copy
import dataclasses
import datetime as dt
import functools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

from . import codec
from .clock import HLC, format_ts, parse_ts
from .controls import NUL, first_nul
from .errors import CORRUPT_RECORD, GitmailError, invalid
from .ids import ID_LENGTH, id_ms, is_id
from .names import ADDRESS_RE, AGENT_NAME_RE, CHANNEL_NAME_RE, PRODUCT_KEY_RE, TOPIC_RE

MAX_SUBJECT = 512
MAX_BODY_BYTES = 1024 * 1024
MAX_SHORT = 512
MAX_LOAD_FOLDERS = 16  # folders an agent (or the project's default) loads memory and skills from
MAX_TEXT = 64 * 1024
MAX_LIST = 1000

# A record imported from an mcp_agent_mail server keeps the id it had there under this key (see gitmail.importers).
IMPORTED_ID = "x-agent-mail-id"
IMPORTANCE = ("low", "normal", "high", "urgent")  # the known levels; high and urgent drive the urgent views
MAX_IMPORTANCE = 32  # importance is free form: other values are stored as given, one short line
AGENT_STATUS = ("active", "retired", "deregistered")
CONTACT_POLICIES = ("open", "auto", "contacts_only", "block_all")
CONTACT_STATUS = ("pending", "approved", "denied", "blocked")
ATTACHMENT_POLICIES = ("auto", "inline", "file")
LIFECYCLES = ("persistent", "intermittent", "ephemeral")  # how an agent is run (see docs/security.md, the hierarchy)
RISK_TIERS = ("low", "standard", "high")
# How an agent is woken when something it waits for resolves: at its next briefing (read), a server-sent event
# stream its host keeps open, or a signed POST to a URL (kept in the server's local state, never here).
WAKE_CHANNELS = ("brief", "sse", "webhook")
# The profile fields that make up an agent's capability card: they change together under one card_version.
CARD_FIELDS = ("capabilities", "vendor", "purpose", "risk_tier", "environment", "wake_channel")
SLEEP_UNTIL = ("reply", "woken")  # what ends an agent's sleep: a reply to it (or someone above it), or only the latter
MAX_SCOPES = 32
CONFLICT_ENCODINGS = ("utf-8", "base64")

R = TypeVar("R", bound="Record")


def _spec(kind: str, *, default: Any = dataclasses.MISSING, key: str | None = None,
          max_len: int | None = None, choices: tuple[str, ...] | None = None, omit_default: bool = False) -> Any:
    """A record field; ``omit_default`` leaves it out of the file while it has its default value."""
    meta = {"kind": kind, "key": key, "max_len": max_len, "choices": choices, "omit_default": omit_default}
    if isinstance(default, list):
        return field(default_factory=list, metadata=meta)
    return field(default=default, metadata=meta)


def day_shard(record_id: str) -> str:
    """``YYYY/MM/DD`` of the UTC day an ID was minted."""
    return _day_folder(id_ms(record_id) // 86_400_000)


_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


@functools.lru_cache(maxsize=4096)
def _day_folder(day: int) -> str:
    """``YYYY/MM/DD`` of the ``day``-th day since 1970 (a check or merge names the same few days again and again)."""
    return (_EPOCH + dt.timedelta(days=day)).strftime("%Y/%m/%d")


def fan_out(name: str) -> str:
    """The two folders between a day folder and the file named ``name`` (an ID, or a key's hex hash).

    They are named by the name's last characters, which are random bits (an
    ID counts up from its random part within one millisecond, so its last
    characters also spread a burst): for an ID its last two characters (32
    ways each, 1,024 folders a day), for a hash its last four hex digits,
    two per level (256 ways each).
    """
    if len(name) == ID_LENGTH:
        return f"{name[-2]}/{name[-1]}"
    return f"{name[-4:-2]}/{name[-2:]}"


class FieldError(ValueError):
    def __init__(self, key: str, reason: str):
        super().__init__(f"field '{key}': {reason}")
        self.key = key


def _check(kind: str, key: str, value: Any, meta: Mapping[str, Any]) -> Any:
    """Validate one value and return its canonical form."""
    max_len = meta.get("max_len")
    if kind in ("str", "text"):
        if not isinstance(value, str):
            raise FieldError(key, f"expected text, got {type(value).__name__}")
        limit = max_len or (MAX_TEXT if kind == "text" else MAX_SHORT)
        if len(value) > limit:
            raise FieldError(key, f"longer than {limit} characters ({len(value)})")
        if kind == "str" and ("\n" in value or "\r" in value):
            raise FieldError(key, "must be a single line")
        return value
    if kind == "choice":
        if value not in meta["choices"]:
            raise FieldError(key, f"must be one of {', '.join(meta['choices'])}; got {value!r}")
        return value
    if kind == "ts":
        try:
            return format_ts(parse_ts(value))
        except ValueError as exc:
            raise FieldError(key, str(exc)) from None
    if kind == "id":
        if not is_id(value):
            raise FieldError(key, f"not a gitmail ID: {value!r}")
        return value
    if kind == "agent":
        if not isinstance(value, str) or not AGENT_NAME_RE.match(value):
            raise FieldError(key, f"not a valid agent name: {value!r}")
        return value
    if kind == "address":
        if not isinstance(value, str) or not (AGENT_NAME_RE.match(value) or ADDRESS_RE.match(value)):
            raise FieldError(key, f"not an agent name or Name@project-slug address: {value!r}")
        return value
    if kind == "product":
        if not isinstance(value, str) or not PRODUCT_KEY_RE.match(value) or value != value.lower():
            raise FieldError(key, f"not a lower-case product key: {value!r}")
        return value
    if kind == "slug":
        if not isinstance(value, str) or not ADDRESS_RE.match("x@" + value):
            raise FieldError(key, f"not a project slug: {value!r}")
        return value
    if kind == "channel":
        if not isinstance(value, str) or not CHANNEL_NAME_RE.match(value):
            raise FieldError(key, f"not a valid channel name: {value!r}")
        return value
    if kind == "topic":
        if not isinstance(value, str) or not TOPIC_RE.match(value):
            raise FieldError(key, f"not a valid topic: {value!r}")
        return value
    if kind == "bool":
        if not isinstance(value, bool):
            raise FieldError(key, f"expected true or false, got {value!r}")
        return value
    if kind == "int":
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise FieldError(key, f"expected a non-negative integer, got {value!r}")
        return value
    if kind == "hlc":
        if isinstance(value, HLC):
            return value
        try:
            return HLC.parse(value)
        except ValueError as exc:
            raise FieldError(key, str(exc)) from None
    if kind in ("agents", "addresses", "strs"):
        if not isinstance(value, list):
            raise FieldError(key, f"expected a list, got {type(value).__name__}")
        if len(value) > (max_len or MAX_LIST):
            raise FieldError(key, f"more than {max_len or MAX_LIST} entries")
        inner = {"agents": "agent", "addresses": "address"}.get(kind, "str")
        return [_check(inner, f"{key}[{i}]", item, {}) for i, item in enumerate(value)]
    if kind == "maps":
        if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
            raise FieldError(key, "expected a list of mappings")
        for i, item in enumerate(value):
            for k, v in item.items():
                if not isinstance(k, str) or not isinstance(v, (str, int, bool)):
                    raise FieldError(f"{key}[{i}]", f"entry {k!r} must map a name to text, a number or a flag")
        return [dict(item) for item in value]
    raise AssertionError(f"unknown field kind {kind}")


def is_extra_key(key: object) -> bool:
    """Whether ``key`` names a field of a human's own (``x-team``), which every record keeps as written."""
    return isinstance(key, str) and key.startswith("x-") and len(key) > 2


_SHARED = (str, int, float, bool, type(None), bytes, HLC)  # values a record copy may share: immutable


@dataclass
class Record:
    """Base of every record type; subclasses declare fields with ``_spec``.

    ``extra`` holds the fields a human added under names starting with
    ``x-``: gitmail never reads them, and every update of the record writes
    them back unchanged (after the declared fields, in name order).
    """

    KIND: ClassVar[str] = "record"
    MARKDOWN: ClassVar[bool] = False
    MAX_BODY: ClassVar[int] = MAX_BODY_BYTES  # bytes a Markdown body may hold (kinds with a tighter purpose set less)
    LOCATED_BY: ClassVar[str] = "id"
    extra: dict[str, Any] = field(default_factory=dict, kw_only=True, compare=True, repr=False,
                                  metadata={"kind": "extra"})

    def path(self) -> str:  # pragma: no cover - every subclass overrides
        raise NotImplementedError

    def __deepcopy__(self, memo: dict[int, Any]) -> Record:
        """A copy that shares nothing mutable with this record, made without :func:`copy.deepcopy`'s walk.

        Readers that may edit take a copy of each record they load (a send
        loads several profiles), and the generic walk costs more than the
        rest of the load. Immutable values (text, numbers, clock readings)
        are shared; a list of them is copied flat; anything else is copied
        deeply as before.
        """
        clone = object.__new__(type(self))
        memo[id(self)] = clone
        target = clone.__dict__
        for name, value in self.__dict__.items():
            if isinstance(value, _SHARED):
                target[name] = value
            elif type(value) is list and all(isinstance(item, _SHARED) for item in value):
                target[name] = list(value)
            else:
                target[name] = copy.deepcopy(value, memo)
        return clone

    # -- validation ---------------------------------------------------------
    @classmethod
    @functools.cache
    def _fields(cls) -> tuple[dataclasses.Field, ...]:
        """The record's own fields (not the body or a human's extra fields), computed once per class."""
        return tuple(f for f in dataclasses.fields(cls) if f.metadata.get("kind") not in (None, "body", "extra"))

    def validate(self) -> Record:
        """Check every field, normalizing values; raise INVALID_ARGUMENT on bad input."""
        try:
            for f in self._fields():
                key = f.metadata["key"] or f.name
                value = getattr(self, f.name)
                if value is None:
                    if _required(f):
                        raise FieldError(key, "is required")
                    continue
                setattr(self, f.name, _check(f.metadata["kind"], key, value, f.metadata))
            self._check_body()
            where = self.nul_field()
            if where:  # refused when written, and at every door; a file that already holds one still reads
                raise FieldError(where, "contains a NUL character (\\0); remove it")
        except FieldError as exc:
            raise invalid(f"{self.KIND}: {exc}", field=exc.key) from None
        return self

    def nul_field(self) -> str | None:
        """The first field (named as in the file: ``subject``, ``to[1]``, ``body``) whose text holds a NUL."""
        for f in self._fields():
            where = first_nul(getattr(self, f.name), f.metadata["key"] or f.name)
            if where:
                return where
        if NUL in (getattr(self, "body", None) or ""):
            return "body"
        for key, value in self.extra.items():
            where = first_nul(key, "the name of a field") or first_nul(value, str(key))
            if where:
                return where
        return None

    def _check_body(self) -> None:
        body = getattr(self, "body", None)
        if body is None:
            return
        if not isinstance(body, str):
            raise FieldError("body", "expected Markdown text")
        if len(body.encode("utf-8")) > self.MAX_BODY:
            raise FieldError("body", f"larger than {self.MAX_BODY} bytes")

    # -- encoding -----------------------------------------------------------
    def to_fields(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in self._fields():
            value = getattr(self, f.name)
            if value is None or (value == [] and f.default_factory is list):
                continue
            if f.metadata.get("omit_default") and value == f.default:
                continue
            if isinstance(value, HLC):
                value = str(value)
            out[f.metadata["key"] or f.name] = value
        for key, value in sorted(self.extra.items()):  # a human's own fields, kept as they were written
            out[key] = value
        return out

    def to_bytes(self) -> bytes:
        self.validate()
        if self.MARKDOWN:
            return codec.join_front_matter(self.to_fields(), getattr(self, "body", ""))  # Markdown kinds declare a body
        return codec.dump_yaml(self.to_fields())

    @classmethod
    def from_bytes(cls: type[R], data: bytes, path: str = "<record>") -> R:
        """Parse a file; CORRUPT_RECORD names the file and the field on failure."""
        try:
            if cls.MARKDOWN:
                raw, body = codec.split_front_matter(data)
            else:
                raw, body = codec.load_yaml(data), None
            values: dict[str, Any] = {}
            known = {}
            for f in cls._fields():
                known[f.metadata["key"] or f.name] = f
            extra: dict[str, Any] = {}
            for key in raw:
                if key in known:
                    continue
                if not is_extra_key(key):
                    raise FieldError(str(key), f"unknown field for a {cls.KIND} record (a field of your own "
                                     f"must start with 'x-', such as 'x-team')")
                extra[key] = raw[key]
            for key, f in known.items():
                if key not in raw or raw[key] is None:
                    if _required(f):
                        raise FieldError(key, "is required")
                    continue
                values[f.name] = _check(f.metadata["kind"], key, raw[key], f.metadata)
            if cls.MARKDOWN:
                values["body"] = body
            record = cls(**values)
            record.extra = extra
            record._check_body()
            record._check_consistency(path)
        except (codec.DecodeError, FieldError) as exc:
            raise GitmailError(CORRUPT_RECORD, f"{path}: {exc}", {"path": path}) from None
        return record

    def misplaced(self, path: str) -> str | None:
        """Why this record cannot be the file at ``path`` (None when it can)."""
        try:
            self._check_consistency(path)
        except FieldError as exc:
            return str(exc)
        return None

    def _check_consistency(self, path: str) -> None:
        """The file must sit where its own fields say it lives (in either layout: see :func:`placed`)."""
        if path != "<record>" and path != self.path() and placed(path, LAYOUT) != self.path():
            expected = placed(self.path(), path_layout(path) or LAYOUT)
            raise FieldError(self.LOCATED_BY, f"does not match the file's location (expected {expected})")


def _required(f: dataclasses.Field) -> bool:
    return f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING


@dataclass
class Project(Record):
    KIND: ClassVar[str] = "project"
    id: str = _spec("id")
    slug: str = _spec("str")
    human_key: str = _spec("str", max_len=1024)
    created_at: str = _spec("ts")
    hlc: HLC = _spec("hlc")
    archived_at: str | None = _spec("ts", default=None)
    # Where the dated records sit (see *Layouts* below); absent in archives made before there were two.
    layout: int = _spec("int", default=1, omit_default=True)

    def path(self) -> str:
        return PROJECT_PATH

    def _check_body(self) -> None:
        if isinstance(self.layout, int) and not isinstance(self.layout, bool) and self.layout < 1:
            raise FieldError("layout", f"must be 1 or more; got {self.layout}")


@dataclass
class Agent(Record):
    KIND: ClassVar[str] = "agent"
    LOCATED_BY: ClassVar[str] = "name"
    id: str = _spec("id")
    name: str = _spec("agent")
    program: str = _spec("str")
    model: str = _spec("str")
    inception_ts: str = _spec("ts")
    hlc: HLC = _spec("hlc")
    task_description: str = _spec("text", default="", max_len=4096)
    status: str = _spec("choice", default="active", choices=AGENT_STATUS)
    retired_at: str | None = _spec("ts", default=None)
    contact_policy: str = _spec("choice", default="auto", choices=CONTACT_POLICIES)
    attachments_policy: str = _spec("choice", default="auto", choices=ATTACHMENT_POLICIES)
    capabilities: list[str] = _spec("strs", default=[], max_len=64)
    asleep: bool = _spec("bool", default=False)
    token_hash: str | None = _spec("str", default=None)
    human: bool = _spec("bool", default=False, omit_default=True)  # the project's overseer: a person, not an agent
    # The hierarchy (docs/security.md): an agent spawned by another names it as its parent, and the
    # registration that spawned it (the parent profile's id), and holds a subset of its scopes
    # (``role@location``); a top-level agent has no parent and holds manager@*. An agent whose parent
    # was deleted names the registration it was orphaned from and holds only its recorded scopes.
    parent: str | None = _spec("agent", default=None)
    parent_id: str | None = _spec("id", default=None)
    orphaned_from: str | None = _spec("agent", default=None)
    orphaned_from_id: str | None = _spec("id", default=None)
    scopes: list[str] = _spec("strs", default=[], max_len=MAX_SCOPES)
    expires_at: str | None = _spec("ts", default=None)
    lifecycle: str = _spec("choice", default="intermittent", choices=LIFECYCLES, omit_default=True)
    sleep_until: str | None = _spec("choice", default=None, choices=SLEEP_UNTIL)
    # The capability card beyond the capabilities themselves.
    vendor: str = _spec("str", default="", max_len=128, omit_default=True)
    purpose: str = _spec("text", default="", max_len=4096, omit_default=True)
    risk_tier: str = _spec("choice", default="standard", choices=RISK_TIERS, omit_default=True)
    environment: str = _spec("str", default="", max_len=128, omit_default=True)
    wake_channel: str = _spec("choice", default="brief", choices=WAKE_CHANNELS, omit_default=True)
    # Rises by one with each change of the card (set_card, update_agent, publish_capabilities); a merge takes the
    # card as a whole from the side with the higher version (see gitmail.sync.merge).
    card_version: int = _spec("int", default=0, omit_default=True)
    # The node (machine) the agent is bound to: the one that registered it, whose key must sign every record
    # written in the agent's name (gitmail.storage.authorship); moved only by a handover that node signs.
    # Profiles written before binding name none: any node of the project may write for them.
    node: str | None = _spec("str", default=None, max_len=128, omit_default=True)
    # A headless agent's long-lived key (spawn_agent bootstrap_key): its hash, when it ends, and how long the
    # agent may go without acting and still prove itself with it. Dropped for good when the agent leaves.
    key_hash: str | None = _spec("str", default=None, omit_default=True)
    key_expires_at: str | None = _spec("ts", default=None, omit_default=True)
    refresh_window_s: int | None = _spec("int", default=None, omit_default=True)
    # The folders whose memory and skills the agent is handed when it takes its seat (gitmail.coord.loads),
    # set by the agent above it; absent: the project's default (org_context.yaml); []: nothing.
    loads: list[str] | None = _spec("strs", default=None, max_len=MAX_LOAD_FOLDERS, omit_default=True)

    def path(self) -> str:
        return profile_path(self.name)

    def _check_body(self) -> None:
        if isinstance(self.card_version, int) and not isinstance(self.card_version, bool) and self.card_version < 0:
            raise FieldError("card_version", f"must be 0 or more; got {self.card_version}")

    def leave(self, status: str, stamp: str, hlc: HLC) -> None:
        """Retire (or deregister) the agent at ``stamp``: its history stays, its headless key dies for good.

        Restoring the agent later does not revive the key: a new one comes
        only with a new spawn.
        """
        self.status, self.retired_at, self.hlc = status, stamp, hlc
        self.key_hash = self.key_expires_at = self.refresh_window_s = None

    def manages_project(self) -> bool:
        """Whether its own record grants ``manager@*``: a top-level agent (never an orphan), or one given it.

        What the record checker and fsck can see in one profile; a write
        also checks every agent above it (:func:`gitmail.coord.hierarchy.allows`).
        """
        top_level = self.parent is None and self.orphaned_from is None and not self.scopes
        return not self.human and (top_level or "manager@*" in self.scopes)

    def spawned_by(self, parent: Agent) -> bool:
        """Whether ``parent`` is the registration that spawned this agent, not only one holding its parent's name.

        A child names its parent's registration (``parent_id``). One written
        before children named it holds only its parent's name: then only a
        registration older than the child itself can be the one that spawned
        it, never a later registration of a deleted parent's name.
        """
        if self.parent is None or parent.name.lower() != self.parent.lower():
            return False
        return parent.id == self.parent_id if self.parent_id is not None else parent.id < self.id

    def _check_consistency(self, path: str) -> None:
        super()._check_consistency(path)
        if self.parent_id is not None and self.parent is None:
            raise FieldError("parent_id", "names the parent's registration, so it needs parent")
        if (self.orphaned_from is None) != (self.orphaned_from_id is None):
            raise FieldError("orphaned_from", "orphaned_from and orphaned_from_id go together")
        if self.orphaned_from is not None and self.parent is not None:
            raise FieldError("orphaned_from", "an orphaned agent has no parent")


@dataclass
class Message(Record):
    """A message: immutable once written. ``bcc`` appears only in the sender's outbox copy.

    ``from``, ``to`` and ``cc`` name agents of this archive's project by name
    and agents of another project as ``Name@<slug>`` (a cross-project
    message, whose copy in that project's archive names the parties the
    other way round); ``bcc`` names only agents of this project.
    """

    KIND: ClassVar[str] = "message"
    MARKDOWN: ClassVar[bool] = True
    id: str = _spec("id")
    thread_id: str = _spec("str", max_len=128)
    sender: str = _spec("address", key="from")
    subject: str = _spec("str", max_len=MAX_SUBJECT)
    created_ts: str = _spec("ts", key="created")
    to: list[str] = _spec("addresses", default=[])
    cc: list[str] = _spec("addresses", default=[])
    bcc: list[str] = _spec("agents", default=[])
    importance: str = _spec("str", default="normal", max_len=MAX_IMPORTANCE)
    ack_required: bool = _spec("bool", default=False)
    topic: str | None = _spec("topic", default=None)
    reply_to: str | None = _spec("id", default=None)
    attachments: list[dict[str, Any]] = _spec("maps", default=[])
    human: bool = _spec("bool", default=False, omit_default=True)  # written by a person (the overseer), not by an agent
    body: str = field(default="", metadata={"kind": "body"})

    def path(self) -> str:
        return message_path(self.id)

    def public_copy(self) -> Message:
        """The copy every recipient and the canonical file hold (no bcc)."""
        return dataclasses.replace(self, bcc=[])

    def _check_consistency(self, path: str) -> None:
        if path == "<record>":
            return
        if not placed(path, LAYOUT).endswith(f"/{day_shard(self.id)}/{fan_out(self.id)}/{self.id}.md"):
            raise FieldError("id", f"does not match the file's location ({path})")


MAX_POST_BYTES = 64 * 1024  # a channel post is a chat line or a short note: a long document goes in a message


@dataclass
class OrgContext(Record):
    """The project's defaults for the identities in it: the folders a new agent loads, and folder hints.

    One per project (``org_context.yaml``), written by an agent holding
    ``manager@*`` (``set_by``, the last to change it). It merges field by
    field, the later writer (by clock) winning a field both sides changed.
    """

    KIND: ClassVar[str] = "org_context"
    LOCATED_BY: ClassVar[str] = "set_by"
    set_by: str = _spec("agent")
    updated_at: str = _spec("ts")
    hlc: HLC = _spec("hlc")
    loads: list[str] = _spec("strs", default=[], max_len=MAX_LOAD_FOLDERS)
    folder_hints: bool = _spec("bool", default=True)

    def path(self) -> str:
        return ORG_CONTEXT_PATH


MEMORY_DOC_NAMES = ("AGENTS.md", "CLAUDE.md")  # the memory files a folder holds at its top
SKILL_DOC = "SKILL.md"  # a skill's file: skills/<name>/SKILL.md
MAX_MEMORY_DOC_BYTES = 256 * 1024  # a memory file or skill is guidance to read at a seat, not a document store
MEMORY_DOC_RE = re.compile(r"^(?:AGENTS\.md|CLAUDE\.md|skills/[A-Za-z0-9][A-Za-z0-9._-]{0,63}/SKILL\.md)$")


@dataclass
class MemoryDoc(Record):
    """A memory file or a skill of a memory folder kept in the archive (``memory/<folder>/...``).

    ``file`` is where it sits in its folder: ``AGENTS.md``, ``CLAUDE.md`` or
    ``skills/<name>/SKILL.md``; the body is its text, handed to the
    identities that load the folder (``archive:<folder>``) as data. Written
    by an agent holding ``manager@*`` (``written_by``, the last to change
    it); two versions written apart merge to the later writer's (by clock).

    A removed file stays as a version of its own (``removed: true``, no
    text), written and signed by the manager who removed it like any other
    version, so every door judges a removal as it judges a write; loaders
    pass over it. A removal made apart from a write of the same file gives
    way to the write (:mod:`gitmail.sync.merge`): nothing written is lost.
    """

    KIND: ClassVar[str] = "memory"
    MARKDOWN: ClassVar[bool] = True
    MAX_BODY: ClassVar[int] = MAX_MEMORY_DOC_BYTES
    LOCATED_BY: ClassVar[str] = "file"
    folder: str = _spec("channel")
    file: str = _spec("str")
    written_by: str = _spec("agent")
    updated_at: str = _spec("ts")
    hlc: HLC = _spec("hlc")
    removed: bool = _spec("bool", default=False, omit_default=True)
    body: str = field(default="", metadata={"kind": "body"})

    def path(self) -> str:
        return memory_path(self.folder, self.file)

    def _check_body(self) -> None:
        super()._check_body()
        if self.removed and self.body.strip():
            raise FieldError("body", "a removed memory file keeps no text (its last text is in the history)")
        if not MEMORY_DOC_RE.match(self.file):
            raise FieldError("file", f"must be AGENTS.md, CLAUDE.md or skills/<name>/SKILL.md; got {self.file!r}")


@dataclass
class Channel(Record):
    """A channel: a named stream of posts that every active agent of the project reads and writes.

    Its definition is written once. Two definitions of one name made apart
    (on two machines offline) merge to the earlier one (by creation time,
    then id), and the posts written under either are all kept, since they
    are filed under the channel's name.
    """

    KIND: ClassVar[str] = "channel"
    LOCATED_BY: ClassVar[str] = "name"
    id: str = _spec("id")
    name: str = _spec("channel")
    created_by: str = _spec("agent")
    created_ts: str = _spec("ts", key="created")
    purpose: str | None = _spec("str", default=None)

    def path(self) -> str:
        return channel_path(self.name)

    def earlier_than(self, other: Channel) -> bool:
        """Whether this definition wins over ``other`` when two of one name meet (the merge rule)."""
        return (self.created_ts, self.id) < (other.created_ts, other.id)


@dataclass
class ChannelPost(Record):
    """One post in a channel: immutable once written, in its author's name, filed by its ID's day.

    Its place in the channel (its sequence number) is not stored: each
    machine numbers a channel's posts 1, 2, 3... in the order it takes them
    in, and never moves a number (see :mod:`gitmail.index`).
    """

    KIND: ClassVar[str] = "post"
    MARKDOWN: ClassVar[bool] = True
    MAX_BODY: ClassVar[int] = MAX_POST_BYTES
    id: str = _spec("id")
    channel: str = _spec("channel")
    sender: str = _spec("agent", key="from")
    created_ts: str = _spec("ts", key="created")
    body: str = field(default="", metadata={"kind": "body"})

    def path(self) -> str:
        return post_path(self.channel, self.id)

    def _check_consistency(self, path: str) -> None:
        if path == "<record>":
            return
        if placed(path, LAYOUT) != self.path():
            raise FieldError("id", f"does not match the file's location ({path})")


@dataclass
class Receipt(Record):
    """When one recipient read and acknowledged one message."""

    KIND: ClassVar[str] = "receipt"
    LOCATED_BY: ClassVar[str] = "message_id"
    message_id: str = _spec("id")
    agent: str = _spec("agent")
    hlc: HLC = _spec("hlc")
    read_at: str | None = _spec("ts", default=None)
    acked_at: str | None = _spec("ts", default=None)

    def path(self) -> str:
        return receipt_path(self.agent, self.message_id)



@dataclass
class Contact(Record):
    """A directed contact link: ``requester`` asked to write to ``target``.

    The link lives in the target's archive; a requester of another project
    is named ``Name@<slug>``.
    """

    KIND: ClassVar[str] = "contact"
    LOCATED_BY: ClassVar[str] = "from"
    requester: str = _spec("address", key="from")
    target: str = _spec("agent", key="to")
    status: str = _spec("choice", choices=CONTACT_STATUS)
    requested_at: str = _spec("ts")
    hlc: HLC = _spec("hlc")
    reason: str = _spec("text", default="", max_len=4096)
    responded_at: str | None = _spec("ts", default=None)
    expires_at: str | None = _spec("ts", default=None)

    def path(self) -> str:
        return contact_path(self.requester, self.target)



@dataclass
class Reservation(Record):
    """A lease on paths or globs of a code repository; a release is final."""

    KIND: ClassVar[str] = "reservation"
    id: str = _spec("id")
    agent: str = _spec("agent")
    path_pattern: str = _spec("str", max_len=1024)
    created_ts: str = _spec("ts")
    expires_ts: str = _spec("ts")
    hlc: HLC = _spec("hlc")
    exclusive: bool = _spec("bool", default=True)
    reason: str = _spec("text", default="", max_len=4096)
    released_ts: str | None = _spec("ts", default=None)

    def path(self) -> str:
        return reservation_path(self.id)



@dataclass
class Seat(Record):
    """Who currently acts as an agent, fenced by a monotonically rising epoch."""

    KIND: ClassVar[str] = "seat"
    LOCATED_BY: ClassVar[str] = "agent"
    agent: str = _spec("agent")
    epoch: int = _spec("int")
    holder: str = _spec("str")
    lease_expires_at: str = _spec("ts")
    hlc: HLC = _spec("hlc")
    taken_at: str | None = _spec("ts", default=None)
    released_at: str | None = _spec("ts", default=None)
    token_hash: str | None = _spec("str", default=None)

    def path(self) -> str:
        return seat_path(self.agent)



BUILD_SLOT_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
MAX_SLOT_HOLDERS = 64
_HOLDING_KEYS = {"agent": "agent", "epoch": "int", "acquired_ts": "ts", "expires_ts": "ts", "reason": "text"}


@dataclass
class BuildSlot(Record):
    """A named slot for a scarce shared resource (a build folder, a test database), leased to its holders.

    ``epoch`` counts the holdings ever granted: each grant takes the next
    number, and a holder names its holding by it. A holding that is no longer
    in ``holders`` (released, or taken over once it went stale) is over, and
    renewing or releasing it is refused, so a holder that was replaced finds
    out before it touches the resource again. ``exclusive`` and
    ``max_holders`` are the terms the first holder of an empty slot set.
    """

    KIND: ClassVar[str] = "build_slot"
    LOCATED_BY: ClassVar[str] = "slot"
    slot: str = _spec("str", max_len=64)
    epoch: int = _spec("int")
    hlc: HLC = _spec("hlc")
    exclusive: bool = _spec("bool", default=True)
    max_holders: int = _spec("int", default=1)
    holders: list[dict[str, Any]] = _spec("maps", default=[], max_len=MAX_SLOT_HOLDERS)

    def path(self) -> str:
        return build_slot_path(self.slot)

    def _check_body(self) -> None:
        """The slot's name, terms and each holding, beyond what the field kinds check."""
        if not isinstance(self.slot, str) or not BUILD_SLOT_RE.match(self.slot):
            raise FieldError("slot", f"not a slot name (lowercase letters, digits, '.', '_', '-'): {self.slot!r}")
        if not isinstance(self.max_holders, int) or not 1 <= self.max_holders <= MAX_SLOT_HOLDERS:
            raise FieldError("max_holders", f"must be from 1 to {MAX_SLOT_HOLDERS}; got {self.max_holders!r}")
        if self.exclusive and self.max_holders != 1:
            raise FieldError("max_holders", "an exclusive slot has exactly one holder")
        seen = set()
        for i, holding in enumerate(self.holders or []):
            key = f"holders[{i}]"
            unknown = set(holding) - set(_HOLDING_KEYS)
            if unknown:
                raise FieldError(key, f"unknown entries {sorted(unknown)}")
            for name, kind in _HOLDING_KEYS.items():
                if name not in holding:
                    if name == "reason":
                        continue
                    raise FieldError(f"{key}.{name}", "is required")
                holding[name] = _check(kind, f"{key}.{name}", holding[name], {"max_len": 4096})
            if isinstance(self.epoch, int) and holding["epoch"] > self.epoch:
                raise FieldError(f"{key}.epoch", f"{holding['epoch']} is beyond the slot's epoch {self.epoch}")
            if holding["agent"] in seen:
                raise FieldError(f"{key}.agent", f"{holding['agent']} holds the slot twice")
            seen.add(holding["agent"])


@dataclass
class JournalEntry(Record):
    """One dated note an agent leaves for its future self; add-only."""

    KIND: ClassVar[str] = "journal"
    MARKDOWN: ClassVar[bool] = True
    id: str = _spec("id")
    agent: str = _spec("agent")
    created_ts: str = _spec("ts", key="created")
    body: str = field(default="", metadata={"kind": "body"})

    def path(self) -> str:
        return journal_path(self.agent, self.id)



TOMBSTONE_REASONS = ("retention", "agent-deleted")
IDEMPOTENT_OPERATIONS = ("send_message", "reply_message")
CHANNEL_OPERATIONS = ("create_channel",)
# Identity writes keyed the same way; their record names the agent written (``target``) instead of a message.
IDENTITY_OPERATIONS = ("register_agent", "spawn_agent", "update_agent", "sleep_agent", "wake_agent")


@dataclass
class Tombstone(Record):
    """Marks a message removed from the tip; git history still holds its content.

    References to it (a reply's ``reply_to``, a ``thread_id``) stay valid, and a
    sync can tell a deliberate removal from a message it has not seen yet.
    """

    KIND: ClassVar[str] = "tombstone"
    LOCATED_BY: ClassVar[str] = "message_id"
    message_id: str = _spec("id")
    deleted_at: str = _spec("ts")
    reason: str = _spec("choice", choices=TOMBSTONE_REASONS)
    hlc: HLC = _spec("hlc")

    def path(self) -> str:
        return tombstone_path(self.message_id)


@dataclass
class IdempotencyKey(Record):
    """One idempotency key a sender used, and the message it produced.

    Filed by the day the key was first used, under the hash of the key, so a
    retry finds it in today's or yesterday's folder without any index.
    """

    KIND: ClassVar[str] = "idempotency"
    LOCATED_BY: ClassVar[str] = "key_hash"
    key_hash: str = _spec("str", max_len=64)
    agent: str = _spec("agent")
    operation: str = _spec("choice", choices=IDEMPOTENT_OPERATIONS + IDENTITY_OPERATIONS + CHANNEL_OPERATIONS)
    request_hash: str = _spec("str", max_len=64)
    created_at: str = _spec("ts")
    message_id: str | None = _spec("id", default=None)  # sends and replies
    held: bool = _spec("bool", default=False)
    target: str | None = _spec("agent", default=None)  # identity writes: the agent written
    changed: bool | None = _spec("bool", default=None)  # identity writes: whether the first call changed anything
    channel: str | None = _spec("channel", default=None)  # channel creations: the channel the first call named

    def _check_consistency(self, path: str) -> None:
        super()._check_consistency(path)
        if (self.operation in IDEMPOTENT_OPERATIONS) != (self.message_id is not None):
            raise FieldError("message_id", "a send or reply names its message; no other write names one")
        if (self.operation in IDENTITY_OPERATIONS) != (self.target is not None):
            raise FieldError("target", "an identity write names the agent written (target); no other write names one")
        if (self.operation in CHANNEL_OPERATIONS) != (self.channel is not None):
            raise FieldError("channel", "a channel's creation names the channel; no other write names one")

    def path(self) -> str:
        return idempotency_path(self.agent, self.created_at, self.key_hash)


@dataclass
class HeldMessage(Record):
    """A message waiting for recipients to approve contact with its sender.

    It is delivered (as a new message) once nobody is ``awaiting`` any more;
    recipients who ``denied`` are left out of that delivery.
    """

    KIND: ClassVar[str] = "held"
    MARKDOWN: ClassVar[bool] = True
    id: str = _spec("id")
    sender: str = _spec("agent", key="from")
    subject: str = _spec("str", max_len=MAX_SUBJECT)
    created_ts: str = _spec("ts", key="created")
    awaiting: list[str] = _spec("agents")
    to: list[str] = _spec("agents", default=[])
    cc: list[str] = _spec("agents", default=[])
    bcc: list[str] = _spec("agents", default=[])
    denied: list[str] = _spec("agents", default=[])
    thread_id: str | None = _spec("str", default=None, max_len=128)
    importance: str = _spec("str", default="normal", max_len=MAX_IMPORTANCE)
    ack_required: bool = _spec("bool", default=False)
    topic: str | None = _spec("topic", default=None)
    reply_to: str | None = _spec("id", default=None)
    attachments: list[dict[str, Any]] = _spec("maps", default=[])
    idempotency_key_hash: str | None = _spec("str", default=None, max_len=64)
    body: str = field(default="", metadata={"kind": "body"})

    def path(self) -> str:
        return held_path(self.sender, self.id)


@dataclass
class Summary(Record):
    """A stored digest of the project's messages over one time window."""

    KIND: ClassVar[str] = "summary"
    id: str = _spec("id")
    start_ts: str = _spec("ts")
    end_ts: str = _spec("ts")
    created_ts: str = _spec("ts", key="created")
    message_count: int = _spec("int")
    thread_count: int = _spec("int")
    participants: list[str] = _spec("agents", default=[])
    key_points: list[str] = _spec("strs", default=[])
    action_items: list[str] = _spec("strs", default=[])
    threads: list[dict[str, Any]] = _spec("maps", default=[])

    def path(self) -> str:
        return summary_path(self.id)


@dataclass
class Window(Record):
    """A window identity: a terminal or editor window (``window_uuid``) and the agent name it goes by.

    Registering with a window's UUID and no name reuses ``display_name``, so an
    agent relaunched in the same window keeps its identity (acting as it still
    needs its token). A window lapses at ``expires_ts`` (renewed by use) or
    when expired by hand (``expired_at``).
    """

    KIND: ClassVar[str] = "window"
    LOCATED_BY: ClassVar[str] = "window_uuid"
    id: str = _spec("id")
    window_uuid: str = _spec("str", max_len=64)
    display_name: str = _spec("agent")
    created_ts: str = _spec("ts", key="created")
    last_active_ts: str = _spec("ts")
    expires_ts: str = _spec("ts")
    hlc: HLC = _spec("hlc")
    expired_at: str | None = _spec("ts", default=None)

    def path(self) -> str:
        return window_path(self.window_uuid)


@dataclass
class Repair(Record):
    """An operator took a file that broke the archive's rules out of the tip, or put it back.

    Written by ``gitmail repair`` when a bad change reached a shared hub
    without checks: the record checker accepts the removal or restoration it
    names (and nothing else), so the repaired ``main`` can be pushed to a
    checked hub. ``removed_blob`` is the version taken out (None when the
    file had been deleted and is put back), ``restored_blob`` the version put
    back (None when the file is simply gone), ``restored_from`` a commit
    earlier in ``main``'s history that held ``restored_blob`` at ``file``.
    """

    KIND: ClassVar[str] = "repair"
    id: str = _spec("id")
    file: str = _spec("str", max_len=1024)
    reason: str = _spec("text", max_len=4096)
    repaired_at: str = _spec("ts")
    removed_blob: str | None = _spec("str", default=None, max_len=40)
    restored_blob: str | None = _spec("str", default=None, max_len=40)
    restored_from: str | None = _spec("str", default=None, max_len=40)

    def path(self) -> str:
        return repair_path(self.id)


@dataclass
class Conflict(Record):
    """Two different files met at one immutable path during a merge.

    The merge keeps one version at the path (chosen the same way on every
    machine) and parks the other here, so nothing is lost and a human can
    see and settle it. ``content`` is the other version's text, or base64 of
    its bytes when it is not text (``encoding``).
    """

    KIND: ClassVar[str] = "conflict"
    LOCATED_BY: ClassVar[str] = "file"
    file: str = _spec("str", max_len=1024)
    kept_blob: str = _spec("str", max_len=40)
    other_blob: str = _spec("str", max_len=40)
    encoding: str = _spec("choice", choices=CONFLICT_ENCODINGS)
    content: str = _spec("text", default="", max_len=4 * MAX_BODY_BYTES)

    def path(self) -> str:
        return conflict_path(self.file, self.other_blob)


@dataclass
class ProductLink(Record):
    """This project belongs to a product (a group of projects read together, such as a frontend and a backend).

    A product has no archive of its own: it is the set of its links, one in
    the archive of each linked project, so it syncs with those projects and
    a deleted project takes its link along. ``unlinked_at`` marks a link
    undone (kept so the undoing merges like any other field); ``name`` is the
    product's display name.
    """

    KIND: ClassVar[str] = "product"
    LOCATED_BY: ClassVar[str] = "product"
    product: str = _spec("product")
    name: str = _spec("str", max_len=200)
    linked_at: str = _spec("ts")
    hlc: HLC = _spec("hlc")
    unlinked_at: str | None = _spec("ts", default=None)

    def path(self) -> str:
        return product_path(self.product)


@dataclass
class Relay(Record):
    """A message of this project still owed to (or already delivered in) another project's archive.

    A cross-project send commits the message here first, with one relay
    record per other project; the copy in that project's archive is written
    next, under the same message id, and ``delivered_at`` then set. A relay
    without ``delivered_at`` is completed at the next start or sync.
    """

    KIND: ClassVar[str] = "relay"
    LOCATED_BY: ClassVar[str] = "message_id"
    message_id: str = _spec("id")
    project: str = _spec("slug")
    created_ts: str = _spec("ts", key="created")
    hlc: HLC = _spec("hlc")
    delivered_at: str | None = _spec("ts", default=None)

    def path(self) -> str:
        return relay_path(self.project, self.message_id)


ESCALATION_MODES = ("log", "claim")


@dataclass
class Escalation(Record):
    """An acknowledgement that fell overdue, escalated once: recipient ``agent`` never acknowledged ``message_id``.

    Its path is named by the message and the recipient, not by a fresh ID,
    so every machine that sees the same overdue acknowledgement writes the
    same file, and a merge keeps one. In ``claim`` mode it names the
    reservation (``claim_id``) and the notice (``notice_id``) filed for the
    operations agent ``holder``; their IDs are derived from the same facts,
    so those too are one file each however many machines escalated.
    """

    KIND: ClassVar[str] = "escalation"
    LOCATED_BY: ClassVar[str] = "message_id"
    message_id: str = _spec("id")
    agent: str = _spec("agent")
    sender: str = _spec("agent", key="from")
    subject: str = _spec("str", max_len=MAX_SUBJECT)
    sent_ts: str = _spec("ts")
    due_ts: str = _spec("ts")
    escalated_ts: str = _spec("ts")
    mode: str = _spec("choice", choices=ESCALATION_MODES)
    holder: str | None = _spec("agent", default=None)
    claim_id: str | None = _spec("id", default=None)
    notice_id: str | None = _spec("id", default=None)
    node: str | None = _spec("str", default=None, max_len=128)

    def path(self) -> str:
        return escalation_path(self.message_id, self.agent)


NODE_KINDS = ("node", "human")  # a machine's own key, or a person's git signing key registered by an operator


@dataclass
class Node(Record):
    """A signing key allowed to write this archive: a machine's node key, or a person's (``kind: human``).

    A node publishes its own record, in a commit it signs itself; a person's
    key is added by an operator. ``key`` is the public key as OpenSSH writes
    it. A rotation replaces ``key`` and names the key it replaces in
    ``previous_key``, with ``rotation_sig``: the old key's signature of
    :func:`rotation_statement` (the record checker verifies it at every door,
    so nobody without the old key can put another key in a node's place).
    """

    KIND: ClassVar[str] = "node"
    LOCATED_BY: ClassVar[str] = "node"
    node: str = _spec("str", max_len=128)
    key: str = _spec("str", max_len=512)
    kind: str = _spec("choice", choices=NODE_KINDS)
    created_at: str = _spec("ts")
    added_by: str | None = _spec("str", default=None, max_len=128)
    previous_key: str | None = _spec("str", default=None, max_len=512)
    rotated_at: str | None = _spec("ts", default=None)
    rotation_sig: str | None = _spec("text", default=None, max_len=4096)

    def path(self) -> str:
        return node_path(self.node)


ROTATION_NAMESPACE = "gitmail-node-rotation"


def rotation_statement(node: str, key: str, rotated_at: str) -> bytes:
    """What the old key signs when ``node`` moves to ``key`` (the ``rotation_sig`` of its record)."""
    return f"gitmail node {node} rotates to {key} at {rotated_at}\n".encode()


@dataclass
class Revocation(Record):
    """A key no longer trusted from ``revoked_at`` on: commits it signs are reported, whoever wrote them.

    Named by the key's SHA-256 (``key_id``), so two machines revoking one key
    write one file; any node of the project may revoke any key (a stolen
    machine cannot be trusted to revoke itself), and a revocation is final.
    """

    KIND: ClassVar[str] = "revocation"
    LOCATED_BY: ClassVar[str] = "key_id"
    key_id: str = _spec("str", max_len=64)
    key: str = _spec("str", max_len=512)
    node: str = _spec("str", max_len=128)
    revoked_at: str = _spec("ts")
    revoked_by: str = _spec("str", max_len=128)
    reason: str = _spec("text", default="", max_len=4096)

    def path(self) -> str:
        return revocation_path(self.key_id)


@dataclass
class Adoption(Record):
    """The history up to ``commit`` (written before commits were signed) is trusted as it is.

    Written once by ``gitmail adopt``, in a commit signed by ``node``;
    ``gitmail verify`` and every door then accept, in that history, the
    unsigned commits with no signed commit below them and what a revoked
    key signed before its revocation (``gitmail.storage.authorship``).
    """

    KIND: ClassVar[str] = "adoption"
    LOCATED_BY: ClassVar[str] = "commit"
    commit: str = _spec("str", max_len=40)
    node: str = _spec("str", max_len=128)
    adopted_at: str = _spec("ts")

    def path(self) -> str:
        return adoption_path(self.commit)


MAX_FILE_NAME = 255
SHA256_RE = re.compile(r"^[0-9a-f]{64}$")


@dataclass
class FileRecord(Record):
    """A file uploaded to the project: its bytes' SHA-256 (the file's ID), size, media type, name, uploader and time.

    The bytes sit at ``blob``, an attachment path named by the same hash, so
    a message can carry the file as it carries any attachment. The record is
    named by the hash (:func:`file_path`): one record per content, however
    often and by whomever it is uploaded. It never changes, but for one
    rule: when two machines each recorded the same content, the merge keeps
    the earlier upload (:meth:`order`), the same on every machine.
    """

    KIND: ClassVar[str] = "file"
    LOCATED_BY: ClassVar[str] = "sha256"
    sha256: str = _spec("str", max_len=64)
    size: int = _spec("int")
    media_type: str = _spec("str", max_len=255)
    name: str = _spec("str", max_len=MAX_FILE_NAME)
    blob: str = _spec("str", max_len=200)  # where the bytes are: an attachment path named by sha256
    uploaded_by: str = _spec("agent")
    uploaded_at: str = _spec("ts")

    def _check_consistency(self, path: str) -> None:
        if SHA256_RE.match(self.sha256) is None:
            raise FieldError("sha256", "must be 64 lower-case hex digits (the SHA-256 of the file's bytes)")
        found = ATTACHMENT_RE.match(self.blob)
        if found is None or found.group(1) or found.group(3) != self.sha256:
            raise FieldError("blob", "must be the attachment path named by the file's sha256 "
                             "(attachments/<xx>/<yy>/<sha256>.<ext>)")
        if self.size < 0:
            raise FieldError("size", "must not be negative")
        if path != "<record>" and path != self.path():
            raise FieldError("sha256", f"does not match the file's location (expected {self.path()})")

    def path(self) -> str:
        return file_path(self.sha256)

    def order(self) -> tuple[str, str, str, str, str]:
        """How two uploads of one content are ordered: the earlier upload first, then by uploader, name and type.

        Two records of one content that order alike hold the same fields.
        """
        return self.uploaded_at, self.uploaded_by, self.name, self.media_type, self.blob


# -- paths --------------------------------------------------------------------
# Where each record lives is written down here once: every other module asks
# these functions (and PATH_TYPES below answers the reverse question, what a
# path holds). Folders sharded by day are ``<folder>/YYYY/MM/DD/<a>/<b>/<name>.<ext>``,
# by the UTC day of the ID and the fan-out of the name (:func:`fan_out`).
#
# -- layouts ------------------------------------------------------------------
# An archive's layout is the ``layout`` field of its ``project.yaml`` (absent:
# 1). Layout 1 kept dated records straight in their day folder
# (``messages/2026/12/01/<id>.md``), so a busy day's folder held every record
# of the day and each commit rewrote it whole; layout 2 puts the two fan-out
# folders in between (``messages/2026/12/01/<a>/<b>/<id>.md``). The path
# functions below answer in the newest layout (:data:`LAYOUT`); an archive
# still at an older one keeps its records at :func:`placed` of those paths,
# which the snapshot reads through and the engine writes through, so no other
# module needs to know which layout an archive is at. ``gitmail migrate``
# moves an archive to the newest layout (:mod:`gitmail.storage.layout`).

LAYOUT = 2  # the newest layout: new archives are made at it, and ``gitmail migrate`` moves older ones to it
LAYOUTS = (1, 2)

PROJECT_PATH = "project.yaml"
ORG_CONTEXT_PATH = "org_context.yaml"
AGENTS = "agents"
MESSAGES = "messages"
CONTACTS = "contacts"
RESERVATIONS = "reservations"
TOMBSTONES = "tombstones"
SUMMARIES = "summaries"
ATTACHMENTS = "attachments"
CONFLICTS = "conflicts"
WINDOWS = "windows"
REPAIRS = "repairs"
PRODUCTS = "products"
RELAYS = "relays"
BUILD_SLOTS = "build_slots"
ESCALATIONS = "escalations"
NODES = "nodes"
REVOCATIONS = "revocations"
ADOPTIONS = "adoptions"
FILES = "files"
CHANNELS = "channels"
MEMORY = "memory"
# The day-sharded folders inside an agent's folder.
INBOX, OUTBOX, RECEIPTS, JOURNAL, HELD, IDEMPOTENCY = "inbox", "outbox", "receipts", "journal", "held", "idempotency"


def agent_dir(name: str) -> str:
    return f"{AGENTS}/{name}"


def agent_folder(name: str, folder: str) -> str:
    """One of an agent's day-sharded folders (:data:`INBOX`, :data:`OUTBOX`, :data:`JOURNAL`, ...)."""
    return f"{agent_dir(name)}/{folder}"


def profile_path(name: str) -> str:
    return f"{agent_dir(name)}/profile.yaml"


def seat_path(agent: str) -> str:
    return f"{agent_dir(agent)}/seat.yaml"


def _dated(folder: str, record_id: str, ext: str) -> str:
    """``<folder>/YYYY/MM/DD/<a>/<b>/<id>.<ext>`` for a record named by its ID."""
    return f"{folder}/{day_shard(record_id)}/{fan_out(record_id)}/{record_id}.{ext}"


def message_path(message_id: str) -> str:
    return _dated(MESSAGES, message_id, "md")


def inbox_path(agent: str, message_id: str) -> str:
    return _dated(agent_folder(agent, INBOX), message_id, "md")


def outbox_path(agent: str, message_id: str) -> str:
    return _dated(agent_folder(agent, OUTBOX), message_id, "md")


def receipt_path(agent: str, message_id: str) -> str:
    return _dated(agent_folder(agent, RECEIPTS), message_id, "yaml")


def message_files(message_id: str, agents: Iterable[str]) -> list[str]:
    """Every path a message may occupy: its canonical file, and each agent's inbox and outbox copy and receipt."""
    paths = [message_path(message_id)]
    for name in agents:
        paths += [inbox_path(name, message_id), outbox_path(name, message_id), receipt_path(name, message_id)]
    return paths


def journal_path(agent: str, entry_id: str) -> str:
    return _dated(agent_folder(agent, JOURNAL), entry_id, "md")


def channel_path(name: str) -> str:
    return f"{CHANNELS}/{name}/channel.yaml"


def memory_path(folder: str, file: str) -> str:
    """Where a memory folder of the archive keeps one of its files (``file``: ``AGENTS.md``, ``skills/x/SKILL.md``)."""
    return f"{MEMORY}/{folder}/{file}"


def post_path(channel: str, post_id: str) -> str:
    return _dated(f"{CHANNELS}/{channel}/posts", post_id, "md")


def contact_path(requester: str, target: str) -> str:
    return f"{CONTACTS}/{requester}/{target}.yaml"


def reservation_path(reservation_id: str) -> str:
    return _dated(RESERVATIONS, reservation_id, "yaml")


def escalation_path(message_id: str, agent: str) -> str:
    return f"{ESCALATIONS}/{day_shard(message_id)}/{fan_out(message_id)}/{message_id}/{agent}.yaml"


def node_path(node: str) -> str:
    return f"{NODES}/{node}.yaml"


def revocation_path(key_id: str) -> str:
    return f"{REVOCATIONS}/{key_id}.yaml"


def adoption_path(commit: str) -> str:
    return f"{ADOPTIONS}/{commit}.yaml"


def build_slot_path(slot: str) -> str:
    return f"{BUILD_SLOTS}/{slot}.yaml"


WINDOW_UUID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]{7,63}$")


def window_path(window_uuid: str) -> str:
    return f"{WINDOWS}/{window_uuid}.yaml"


def conflict_path(file: str, other_blob: str) -> str:
    return f"{CONFLICTS}/{file}/{other_blob}.yaml"


def tombstone_path(message_id: str) -> str:
    return _dated(TOMBSTONES, message_id, "yaml")


def repair_path(repair_id: str) -> str:
    return _dated(REPAIRS, repair_id, "yaml")


def idempotency_path(agent: str, created_at: str, key_hash: str) -> str:
    day = parse_ts(created_at).strftime("%Y/%m/%d")
    return f"{agent_folder(agent, IDEMPOTENCY)}/{day}/{fan_out(key_hash)}/{key_hash}.yaml"


def held_path(agent: str, message_id: str) -> str:
    return _dated(agent_folder(agent, HELD), message_id, "md")


def product_path(product: str) -> str:
    return f"{PRODUCTS}/{product}.yaml"


def relay_path(project_slug: str, message_id: str) -> str:
    return _dated(f"{RELAYS}/{project_slug}", message_id, "yaml")


def summary_path(summary_id: str) -> str:
    return _dated(SUMMARIES, summary_id, "yaml")


def file_path(sha256: str) -> str:
    """Where the record of the file whose bytes hash to ``sha256`` lives (fanned out by the hash's first digits)."""
    return f"{FILES}/{sha256[:2]}/{sha256[2:4]}/{sha256}.yaml"


# Attachments are named by the SHA-256 of the stored bytes (originals of
# converted images, when kept, under ``attachments/originals/``), in folders
# named by its first hex digits: two at layout 1, two levels of two at layout
# 2. An attachment never moves (messages name its path), so an archive moved
# to layout 2 keeps its older attachments where they are.
ATTACHMENT_RE = re.compile(
    r"^attachments/(originals/)?([0-9a-f]{2}(?:/[0-9a-f]{2})?)/([0-9a-f]{64})\.([a-z0-9]{1,10})$")


def attachment_path(digest: str, ext: str, *, original: bool = False, layout: int = LAYOUT) -> str:
    """Where an attachment with this hash is stored in an archive at ``layout``."""
    folder = digest[:2] if layout < 2 else f"{digest[:2]}/{digest[2:4]}"
    return f"{ATTACHMENTS}/{'originals/' if original else ''}{folder}/{digest}.{ext}"


# The folders whose records are dated (a day folder under each), and how a
# dated path splits: the day folder, the fan-out (absent at layout 1), the
# file's name (an ID, or a key hash), and the rest (the extension, or for an
# escalation ``/<agent>.yaml``).
_DATED_FOLDERS = (r"(?:messages|reservations|tombstones|summaries|repairs|escalations|relays/[^/]+|channels/[^/]+/posts"
                  r"|agents/[^/]+/(?:inbox|outbox|receipts|journal|held|idempotency))")
_DATED_PATH = re.compile(rf"^({_DATED_FOLDERS}/\d{{4}}/\d{{2}}/\d{{2}})/"
                         r"((?:[0-9a-z]/[0-9a-z]|[0-9a-f]{2}/[0-9a-f]{2})/)?([0-9a-z]{23}|[0-9a-f]{64})([./].*)$")
_DAY_FOLDER = re.compile(rf"^{_DATED_FOLDERS}/\d{{4}}/\d{{2}}/\d{{2}}$")
_ABOVE_DAYS = re.compile(rf"^(?:|agents|agents/[^/]+|relays|channels|channels/[^/]+"
                         rf"|{_DATED_FOLDERS}(?:/\d{{4}}(?:/\d{{2}})?)?)$")
_NAMED = re.compile(r"^([0-9a-z]{23}|[0-9a-f]{64})(?:\.[a-z]+)?$")
_ATTACHMENT_LAYOUT = re.compile(r"^attachments/(?:originals/)?[0-9a-f]{2}/(?:([0-9a-f]{2})/)?[^/]+$")


def path_layout(path: str) -> int | None:
    """The layout a path belongs to: 1 or 2 for a dated record or an attachment, None for paths every layout shares."""
    match = _DATED_PATH.match(path)
    if match is not None:
        return 1 if match.group(2) is None else 2
    if path.startswith(ATTACHMENTS + "/"):
        found = _ATTACHMENT_LAYOUT.match(path)
        return None if found is None else (1 if found.group(1) is None else 2)
    return None


def placed(path: str, layout: int) -> str:
    """Where the record at ``path`` (in any layout) sits in an archive at ``layout``.

    Only dated records move between layouts; every other path (and an
    attachment's, which never moves) is returned as it is.
    """
    match = _DATED_PATH.match(path)
    if match is None:
        return path
    day, fan, name, rest = match.groups()
    if layout < 2:
        return f"{day}/{name}{rest}" if fan is not None else path
    return f"{day}/{fan_out(name)}/{name}{rest}" if fan is None else path


def is_day_folder(path: str) -> bool:
    """Whether the folder at ``path`` is a day folder of dated records (``messages/2026/12/01``)."""
    return _DAY_FOLDER.match(path) is not None


def holds_day_folders(path: str) -> bool:
    """Whether the folder at ``path`` (``""``: the root) may hold day folders of dated records further down."""
    return _ABOVE_DAYS.match(path) is not None


def dated_name(entry: str) -> str | None:
    """The name (an ID or a key hash) an entry of a day folder is filed by at layout 1, or None for any other entry.

    A file is ``<name>.<ext>``; an escalation's folder is ``<name>`` itself.
    """
    match = _NAMED.match(entry)
    return match.group(1) if match else None


def layout_moves(gone: Iterable[str], arrived: Iterable[str]) -> dict[str, str]:
    """Records that moved to the newest layout: path arrived -> the older layout's path it left, for the same record."""
    landed = set(arrived)
    moves = {}
    for path in gone:
        record = placed(path, LAYOUT)
        if record != path and record in landed:
            moves[record] = path
    return moves


def layout_forms(path: str) -> list[str]:
    """Every path the record at ``path`` has had in some layout, newest layout first (for its history)."""
    forms = [placed(path, layout) for layout in reversed(LAYOUTS)]
    return list(dict.fromkeys(forms))


_DAY = r"\d{4}/\d{2}/\d{2}"
_ID = r"[0-9a-z]{23}"
_BY_ID = r"(?:/[0-9a-z]/[0-9a-z])?"  # layout 2's fan-out of a file named by an ID (absent at layout 1)
_BY_HASH = r"(?:/[0-9a-f]{2}/[0-9a-f]{2})?"  # ... and of one named by a hash
_NAME = r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}"
_SLUG = r"[a-z0-9][a-z0-9-]{0,80}-[0-9a-f]{12}"
_CHANNEL = r"[a-z0-9][a-z0-9_-]{0,63}"
PATH_TYPES: list[tuple[re.Pattern[str], type[Record] | None, str]] = [
    (re.compile(r"^project\.yaml$"), Project, "project"),
    (re.compile(r"^org_context\.yaml$"), OrgContext, "org_context"),
    (re.compile(rf"^messages/{_DAY}{_BY_ID}/{_ID}\.md$"), Message, "message"),
    (re.compile(rf"^agents/{_NAME}/profile\.yaml$"), Agent, "agent"),
    (re.compile(rf"^agents/{_NAME}/inbox/{_DAY}{_BY_ID}/{_ID}\.md$"), Message, "inbox"),
    (re.compile(rf"^agents/{_NAME}/outbox/{_DAY}{_BY_ID}/{_ID}\.md$"), Message, "outbox"),
    (re.compile(rf"^agents/{_NAME}/receipts/{_DAY}{_BY_ID}/{_ID}\.yaml$"), Receipt, "receipt"),
    (re.compile(rf"^agents/{_NAME}/seat\.yaml$"), Seat, "seat"),
    (re.compile(rf"^agents/{_NAME}/journal/{_DAY}{_BY_ID}/{_ID}\.md$"), JournalEntry, "journal"),
    (re.compile(rf"^contacts/{_NAME}(@{_SLUG})?/{_NAME}\.yaml$"), Contact, "contact"),
    (re.compile(rf"^reservations/{_DAY}{_BY_ID}/{_ID}\.yaml$"), Reservation, "reservation"),
    (re.compile(r"^conflicts/.+/[0-9a-f]{40}\.yaml$"), Conflict, "conflict"),
    (re.compile(rf"^tombstones/{_DAY}{_BY_ID}/{_ID}\.yaml$"), Tombstone, "tombstone"),
    (re.compile(rf"^agents/{_NAME}/idempotency/{_DAY}{_BY_HASH}/[0-9a-f]{{64}}\.yaml$"), IdempotencyKey,
     "idempotency"),
    (re.compile(rf"^agents/{_NAME}/held/{_DAY}{_BY_ID}/{_ID}\.md$"), HeldMessage, "held"),
    (re.compile(rf"^summaries/{_DAY}{_BY_ID}/{_ID}\.yaml$"), Summary, "summary"),
    (re.compile(r"^windows/[A-Za-z0-9][A-Za-z0-9-]{7,63}\.yaml$"), Window, "window"),
    (re.compile(rf"^repairs/{_DAY}{_BY_ID}/{_ID}\.yaml$"), Repair, "repair"),
    (re.compile(r"^products/[a-z0-9][a-z0-9._-]{0,63}\.yaml$"), ProductLink, "product"),
    (re.compile(rf"^relays/{_SLUG}/{_DAY}{_BY_ID}/{_ID}\.yaml$"), Relay, "relay"),
    (re.compile(r"^build_slots/[a-z0-9][a-z0-9._-]{0,63}\.yaml$"), BuildSlot, "build_slot"),
    (re.compile(rf"^escalations/{_DAY}{_BY_ID}/{_ID}/{_NAME}\.yaml$"), Escalation, "escalation"),
    (re.compile(rf"^nodes/{_NAME}\.yaml$"), Node, "node"),
    (re.compile(r"^revocations/[0-9a-f]{64}\.yaml$"), Revocation, "revocation"),
    (re.compile(r"^adoptions/[0-9a-f]{40}\.yaml$"), Adoption, "adoption"),
    (re.compile(r"^files/[0-9a-f]{2}/[0-9a-f]{2}/[0-9a-f]{64}\.yaml$"), FileRecord, "file"),
    (re.compile(rf"^channels/{_CHANNEL}/channel\.yaml$"), Channel, "channel"),
    (re.compile(rf"^channels/{_CHANNEL}/posts/{_DAY}{_BY_ID}/{_ID}\.md$"), ChannelPost, "post"),
    (re.compile(rf"^memory/{_CHANNEL}/(?:AGENTS|CLAUDE)\.md$"), MemoryDoc, "memory"),
    (re.compile(rf"^memory/{_CHANNEL}/skills/[A-Za-z0-9][A-Za-z0-9._-]{{0,63}}/SKILL\.md$"), MemoryDoc, "memory"),
]
# Roles whose files never change once written: a merge or a push may only add them.
IMMUTABLE_ROLES = frozenset({"message", "inbox", "outbox", "journal", "tombstone", "summary", "conflict",
                             "attachment", "repair", "revocation", "adoption", "post"})
# Files that may sit in an archive without being records.
PLAIN_FILES = frozenset({".gitattributes", ".gitignore", "README.md"})
# The archive's ``.gitattributes`` names gitmail's merge driver for record files, so a human's
# ``git pull`` merges them by the record rules; git merges as text where the driver is not configured.
MERGE_DRIVER = "gitmail"
GITATTRIBUTES_PATH = ".gitattributes"
GITATTRIBUTES = (
    "# Merge gitmail records by their rules (last writer wins by clock, earliest receipt, ...).\n"
    "# `gitmail hooks install --repo .` registers the driver; without it git merges as text.\n"
    f"*.yaml merge={MERGE_DRIVER}\n"
    f"*.md merge={MERGE_DRIVER}\n"
).encode()


def layout_of(project_yaml: bytes | None) -> int:
    """The layout of an archive whose ``project.yaml`` holds these bytes (None: no project record yet).

    An archive without a project record is new, so it is made at the newest
    layout; a project record without the field is from layout 1. A record
    that does not parse is read for its ``layout:`` line alone.
    """
    if project_yaml is None:
        return LAYOUT
    try:
        return Project.from_bytes(project_yaml).layout
    except GitmailError:
        match = re.search(rb"^layout: *([0-9]+) *$", project_yaml, re.MULTILINE)
        return int(match.group(1)) if match else 1


# PATH_TYPES by the name each pattern starts with (``agents``, ``project``): a path is tried only against
# the patterns of its own first name, which is the run of lower-case letters and ``_`` it starts with (every
# pattern's first name is followed by ``/`` or ``.``, so a path it matches starts with exactly that run).
_FIRST_NAME = re.compile(r"[a-z_]+")


def _first_name(text: str, start: int = 0) -> str:
    found = _FIRST_NAME.match(text, start)
    return found.group() if found is not None else ""


_TYPES_BY_FIRST: dict[str, list[tuple[re.Pattern[str], type[Record] | None, str]]] = {}
for _entry in PATH_TYPES:
    _TYPES_BY_FIRST.setdefault(_first_name(_entry[0].pattern, 1), []).append(_entry)  # after the pattern's "^"


def classify(path: str) -> tuple[str, type[Record] | None] | None:
    """The role and record type of a path in the archive, or None if unknown (the first of PATH_TYPES to match)."""
    for pattern, record_type, role in _TYPES_BY_FIRST.get(_first_name(path), ()):
        if pattern.match(path):
            return role, record_type
    return None


def role_of(path: str) -> str | None:
    """The record role of ``path`` (``attachment`` for attachment files), or None for other files."""
    if path.startswith(ATTACHMENTS + "/"):
        return "attachment"
    kind = classify(path)
    return kind[0] if kind else None


def parse_path(path: str, data: bytes) -> Record:
    """Parse the file at ``path`` as whatever record type lives there."""
    kind = classify(path)
    if kind is None or kind[1] is None:
        raise GitmailError(CORRUPT_RECORD, f"{path}: not a path where gitmail keeps records", {"path": path})
    return kind[1].from_bytes(data, path)
