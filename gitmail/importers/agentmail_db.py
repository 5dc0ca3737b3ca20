"""The SQLite database of an mcp_agent_mail server, read by column name.

Releases of that server grew their schema over time: topics, registration
tokens, retirement (``retired_at``, where early releases had ``is_active``
and ``deleted_ts``), products, window identities and stored summaries. Every
row is read by column name, so a database of any release reads; a table or
column this module does not know is reported and left out, never guessed
at, and a table that lacks a column the import needs is reported and left
out whole.

The file is opened read-only and read in one transaction, so the import sees
one consistent state even if the server is still running. A database that
another program keeps locked beyond ``busy_seconds`` is refused with
``SOURCE_LOCKED`` (stop that server, or wait for its write, and run again).
Rows come back as typed values; a row whose values cannot be read (a
timestamp in no known form, a broken JSON column) is counted in the report
and left out.
"""

from __future__ import annotations

import datetime as dt
import heapq
import json
import os
import sqlite3
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

from gitmail.model.clock import UTC
from gitmail.model.errors import NOT_FOUND, SOURCE_LOCKED, GitmailError, invalid

from .report import ImportReport

T = TypeVar("T")
CHUNK = 2000  # messages read per statement (their recipients follow in one more)

# Every table the import reads: its columns, and those without which a row means nothing.
TABLES: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "projects": (frozenset({"id", "slug", "human_key", "created_at", "archived_at"}),
                 frozenset({"id", "human_key"})),
    "agents": (frozenset({"id", "project_id", "name", "program", "model", "task_description", "inception_ts",
                          "last_active_ts", "attachments_policy", "contact_policy", "registration_token",
                          "retired_at", "is_active", "deleted_ts"}),
               frozenset({"id", "project_id", "name"})),
    "messages": (frozenset({"id", "project_id", "sender_id", "thread_id", "topic", "subject", "body_md",
                            "importance", "ack_required", "created_ts", "attachments"}),
                 frozenset({"id", "project_id", "sender_id", "created_ts"})),
    "message_recipients": (frozenset({"message_id", "agent_id", "kind", "read_ts", "ack_ts"}),
                           frozenset({"message_id", "agent_id"})),
    "file_reservations": (frozenset({"id", "project_id", "agent_id", "path_pattern", "exclusive", "reason",
                                     "created_ts", "expires_ts", "released_ts"}),
                          frozenset({"id", "project_id", "agent_id", "path_pattern", "created_ts", "expires_ts"})),
    "agent_links": (frozenset({"id", "a_project_id", "a_agent_id", "b_project_id", "b_agent_id", "status",
                               "reason", "created_ts", "updated_ts", "expires_ts"}),
                    frozenset({"a_project_id", "a_agent_id", "b_project_id", "b_agent_id"})),
    "products": (frozenset({"id", "product_uid", "name", "created_at"}), frozenset({"id", "name"})),
    "product_project_links": (frozenset({"id", "product_id", "project_id", "created_at"}),
                              frozenset({"product_id", "project_id"})),
    "window_identities": (frozenset({"id", "project_id", "window_uuid", "display_name", "created_ts",
                                     "last_active_ts", "expires_ts"}),
                          frozenset({"project_id", "window_uuid", "display_name"})),
    "message_summaries": (frozenset({"id", "project_id", "summary_text", "start_ts", "end_ts",
                                     "source_message_count", "source_thread_ids", "llm_model", "cost_usd",
                                     "created_ts"}),
                          frozenset({"id", "project_id", "start_ts", "end_ts"})),
}
_INTERNAL = ("sqlite_", "fts_")  # SQLite's own tables and the full-text index the server derives


class BadRow(ValueError):
    """A row whose values cannot be read: ``key`` is the report's problem key."""

    def __init__(self, key: str, reason: str):
        super().__init__(reason)
        self.key = key


# -- rows -----------------------------------------------------------------------

@dataclass(frozen=True)
class SourceProject:
    id: int
    slug: str
    human_key: str
    created: dt.datetime | None
    archived: dt.datetime | None


@dataclass(frozen=True)
class SourceAgent:
    id: int
    project_id: int
    name: str
    program: str
    model: str
    task_description: str
    inception: dt.datetime | None
    last_active: dt.datetime | None
    attachments_policy: str
    contact_policy: str
    token: str | None  # the registration token as the server kept it (in clear)
    retired: dt.datetime | None
    active: bool


@dataclass(frozen=True)
class SourceRecipient:
    agent_id: int
    kind: str  # to, cc or bcc
    read: dt.datetime | None
    acked: dt.datetime | None


@dataclass(frozen=True)
class SourceMessage:
    id: int
    project_id: int
    sender_id: int
    thread_id: str | None
    topic: str | None
    subject: str
    body: str
    importance: str
    ack_required: bool
    created: dt.datetime
    attachments: list[dict[str, Any]]
    recipients: list[SourceRecipient] = field(default_factory=list)


@dataclass(frozen=True)
class SourceLink:
    id: int | None
    a_project_id: int
    a_agent_id: int
    b_project_id: int
    b_agent_id: int
    status: str
    reason: str
    created: dt.datetime | None
    updated: dt.datetime | None
    expires: dt.datetime | None


@dataclass(frozen=True)
class SourceReservation:
    id: int
    project_id: int
    agent_id: int
    pattern: str
    exclusive: bool
    reason: str
    created: dt.datetime
    expires: dt.datetime
    released: dt.datetime | None


@dataclass(frozen=True)
class SourceProduct:
    id: int
    uid: str
    name: str
    created: dt.datetime | None


@dataclass(frozen=True)
class SourceProductLink:
    product_id: int
    project_id: int
    created: dt.datetime | None


@dataclass(frozen=True)
class SourceWindow:
    id: int | None
    project_id: int
    uuid: str
    display_name: str
    created: dt.datetime | None
    last_active: dt.datetime | None
    expires: dt.datetime | None


@dataclass(frozen=True)
class SourceSummary:
    id: int
    project_id: int
    text: str
    start: dt.datetime
    end: dt.datetime
    message_count: int
    thread_ids: list[str]
    llm_model: str | None
    created: dt.datetime | None


# -- values ---------------------------------------------------------------------

def parse_time(value: object) -> dt.datetime | None:
    """A time as the server stored it (naive UTC text, ISO-8601 with a zone, or epoch seconds), in UTC.

    None for no value; :class:`BadRow` (``unreadable_timestamp``) for one in no known form.
    """
    if value is None or value == "":
        return None
    try:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            seconds = value / 1000 if value > 1e11 else value  # milliseconds, by their size
            return dt.datetime.fromtimestamp(seconds, tz=UTC)
        if isinstance(value, str):
            moment = dt.datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
            return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).astimezone(UTC)
    except (ValueError, OverflowError, OSError):
        pass
    raise BadRow("unreadable_timestamp", f"unreadable time {value!r}")


def _required_time(value: object, column: str) -> dt.datetime:
    moment = parse_time(value)
    if moment is None:
        raise BadRow("unreadable_timestamp", f"no {column}")
    return moment


def _text(value: object, default: str = "") -> str:
    return default if value is None else str(value)


def _flag(value: object, default: bool) -> bool:
    if value is None:
        return default
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "t", "yes")
    return bool(value)


def _json_list(value: object, column: str) -> list[Any]:
    if value is None or value == "":
        return []
    if isinstance(value, list):
        return value
    try:
        loaded = json.loads(value) if isinstance(value, (str, bytes)) else None
    except ValueError:
        loaded = None
    if not isinstance(loaded, list):
        raise BadRow("invalid_record", f"{column} is not a JSON list")
    return loaded


# -- the database -----------------------------------------------------------------

class SourceDatabase:
    """One mcp_agent_mail database, open for reading; use as a context manager."""

    def __init__(self, path: str, report: ImportReport, *, busy_seconds: float = 5.0):
        self.path = os.path.abspath(path)
        self.report = report
        if not os.path.isfile(self.path):
            raise GitmailError(NOT_FOUND, f"no database at {self.path}: give the path of the mcp_agent_mail "
                               "server's SQLite file (its DATABASE_URL; storage.sqlite3 by default)",
                               {"path": self.path})
        uri = f"file:{urllib.parse.quote(self.path)}?mode=ro"
        try:
            self.db = sqlite3.connect(uri, uri=True, timeout=busy_seconds, isolation_level=None)
        except sqlite3.Error as exc:
            raise self._failure(exc) from None
        self.columns: dict[str, list[str]] = {}
        try:
            self.db.execute("BEGIN")  # one read transaction: one consistent state for the whole import
            self._survey()
        except sqlite3.Error as exc:
            self.db.close()
            raise self._failure(exc) from None

    def __enter__(self) -> SourceDatabase:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        try:
            self.db.execute("ROLLBACK")
        except sqlite3.Error:
            pass
        self.db.close()

    def _failure(self, exc: sqlite3.Error) -> GitmailError:
        text = str(exc)
        if "locked" in text or "busy" in text:
            return GitmailError(SOURCE_LOCKED, f"{self.path} is locked by another program ({text}): stop the "
                                "mcp_agent_mail server, or wait until it has finished writing, and run the "
                                "import again", {"path": self.path})
        return invalid(f"{self.path} cannot be read as an SQLite database ({text}): give the mcp_agent_mail "
                       "server's database file", path=self.path)

    def _survey(self) -> None:
        """Which tables and columns the file has; what the import leaves out goes into the report."""
        names = [row[0] for row in self.db.execute("SELECT name FROM sqlite_master WHERE type = 'table' "
                                                   "ORDER BY name")]
        if "projects" not in names or "agents" not in names:
            raise invalid(f"{self.path} has no projects and agents tables: it is not an mcp_agent_mail database",
                          path=self.path)
        for name in names:
            if name.startswith(_INTERNAL):
                continue
            if name not in TABLES:
                self.report.problem("table_not_imported", name)
                continue
            columns = [row[1] for row in self.db.execute(f"PRAGMA table_info('{name}')")]
            known, needed = TABLES[name]
            missing = sorted(needed - set(columns))
            if missing:
                self.report.problem("table_unusable", f"{name} (no {', '.join(missing)})")
                continue
            for column in columns:
                if column not in known:
                    self.report.problem("column_not_imported", f"{name}.{column}")
            self.columns[name] = [column for column in columns if column in known]

    def has(self, table: str) -> bool:
        return table in self.columns

    def _rows(self, table: str, where: str = "", args: tuple[Any, ...] = (), order: str = "") -> Iterator[dict]:
        if table not in self.columns:
            return
        columns = self.columns[table]
        sql = f"SELECT {', '.join(columns)} FROM {table} {where} {order}"
        try:
            cursor = self.db.execute(sql, args)
            for row in cursor:
                yield dict(zip(columns, row, strict=True))
        except sqlite3.Error as exc:
            raise self._failure(exc) from None

    def _typed(self, table: str, make: Callable[[dict], T], where: str = "", args: tuple[Any, ...] = (),
               order: str = "") -> list[T]:
        out = []
        for row in self._rows(table, where, args, order):
            try:
                out.append(make(row))
            except BadRow as exc:
                self.report.problem(exc.key, f"{table} {row.get('id', '?')}: {exc}")
        return out

    # -- each table ----------------------------------------------------------------
    def projects(self) -> list[SourceProject]:
        return self._typed("projects", lambda r: SourceProject(
            id=int(r["id"]), slug=_text(r.get("slug")), human_key=_text(r["human_key"]),
            created=parse_time(r.get("created_at")), archived=parse_time(r.get("archived_at"))), order="ORDER BY id")

    def agents(self) -> list[SourceAgent]:
        def make(r: dict) -> SourceAgent:
            retired = parse_time(r.get("retired_at")) or parse_time(r.get("deleted_ts"))
            active = _flag(r.get("is_active"), True) and r.get("retired_at") is None
            return SourceAgent(
                id=int(r["id"]), project_id=int(r["project_id"]), name=_text(r["name"]),
                program=_text(r.get("program"), "unknown"), model=_text(r.get("model"), "unknown"),
                task_description=_text(r.get("task_description")), inception=parse_time(r.get("inception_ts")),
                last_active=parse_time(r.get("last_active_ts")),
                attachments_policy=_text(r.get("attachments_policy"), "auto"),
                contact_policy=_text(r.get("contact_policy"), "auto"),
                token=_text(r.get("registration_token")).strip() or None, retired=retired, active=active)
        return self._typed("agents", make, order="ORDER BY id")

    def first_activity(self) -> dict[int, dt.datetime]:
        """Each agent's earliest message, sent or received: an agent is shown registered by then at the latest."""
        found: dict[int, dt.datetime] = {}
        if not self.has("messages"):
            return found
        queries = ["SELECT sender_id, min(created_ts) FROM messages GROUP BY sender_id"]
        if self.has("message_recipients"):
            queries.append("SELECT r.agent_id, min(m.created_ts) FROM message_recipients r "
                           "JOIN messages m ON m.id = r.message_id GROUP BY r.agent_id")
        for sql in queries:
            for agent_id, first in self.db.execute(sql):
                try:
                    moment = parse_time(first)
                except BadRow:
                    continue
                if moment is not None and (agent_id not in found or moment < found[agent_id]):
                    found[agent_id] = moment
        return found

    def message_count(self, project_id: int, agent_ids: list[int]) -> int:
        if not self.has("messages"):
            return 0
        return sum(int(self.db.execute(f"SELECT count(*) FROM messages WHERE {where}", args).fetchone()[0])
                   for where, args in self._message_scopes(project_id, agent_ids))

    @staticmethod
    def _message_scopes(project_id: int, agent_ids: list[int]) -> list[tuple[str, tuple[Any, ...]]]:
        """Messages kept in a project's archive: those to it, and those its agents sent to another project.

        Two conditions rather than one with OR, so each can follow an index on
        the project (or the sender) and the creation time.
        """
        scopes: list[tuple[str, tuple[Any, ...]]] = [("project_id = ?", (project_id,))]
        if agent_ids:
            scopes.append((f"project_id != ? AND sender_id IN ({', '.join('?' * len(agent_ids))})",
                           (project_id, *agent_ids)))
        return scopes

    def messages(self, project_id: int, agent_ids: list[int]) -> Iterator[SourceMessage]:
        """The messages of a project's archive, oldest first, each with its recipients (read in chunks)."""
        if not self.has("messages"):
            return
        streams = [self._messages_where(where, args) for where, args in self._message_scopes(project_id, agent_ids)]
        yield from heapq.merge(*streams, key=lambda message: (message.created, message.id))

    def _messages_where(self, scope: str, args: tuple[Any, ...]) -> Iterator[SourceMessage]:
        """The messages that match ``scope``, by creation time, a page at a time (each page after the last row)."""
        where, page_args = f"WHERE {scope}", args
        while True:
            rows = list(self._rows("messages", where, page_args, f"ORDER BY created_ts, id LIMIT {CHUNK}"))
            if not rows:
                return
            last = rows[-1]
            where = f"WHERE {scope} AND created_ts >= ? AND (created_ts > ? OR id > ?)"  # a range on the time
            page_args = (*args, last["created_ts"], last["created_ts"], last["id"])
            recipients = self._recipients([row["id"] for row in rows])
            for row in rows:
                try:
                    yield self._message(row, recipients.get(row["id"], []))
                except BadRow as exc:
                    self.report.problem(exc.key, f"message {row['id']}: {exc}")

    def _message(self, r: dict, recipients: list[SourceRecipient]) -> SourceMessage:
        attachments = [item for item in _json_list(r.get("attachments"), "attachments") if isinstance(item, dict)]
        return SourceMessage(
            id=int(r["id"]), project_id=int(r["project_id"]), sender_id=int(r["sender_id"]),
            thread_id=_text(r.get("thread_id")).strip() or None, topic=_text(r.get("topic")).strip() or None,
            subject=_text(r.get("subject")), body=_text(r.get("body_md")),
            importance=_text(r.get("importance"), "normal").strip() or "normal",
            ack_required=_flag(r.get("ack_required"), False), created=_required_time(r["created_ts"], "created_ts"),
            attachments=attachments, recipients=recipients)

    def _recipients(self, message_ids: list[int]) -> dict[int, list[SourceRecipient]]:
        out: dict[int, list[SourceRecipient]] = {}
        if not self.has("message_recipients") or not message_ids:
            return out
        marks = ", ".join("?" * len(message_ids))
        for r in self._rows("message_recipients", f"WHERE message_id IN ({marks})", tuple(message_ids),
                            "ORDER BY message_id"):
            try:
                kind = _text(r.get("kind"), "to").strip().lower()
                out.setdefault(int(r["message_id"]), []).append(SourceRecipient(
                    agent_id=int(r["agent_id"]), kind=kind if kind in ("to", "cc", "bcc") else "to",
                    read=parse_time(r.get("read_ts")), acked=parse_time(r.get("ack_ts"))))
            except BadRow as exc:
                self.report.problem(exc.key, f"message_recipients {r.get('message_id')}/{r.get('agent_id')}: {exc}")
        return out

    def links(self) -> list[SourceLink]:
        return self._typed("agent_links", lambda r: SourceLink(
            id=r.get("id"), a_project_id=int(r["a_project_id"]), a_agent_id=int(r["a_agent_id"]),
            b_project_id=int(r["b_project_id"]), b_agent_id=int(r["b_agent_id"]),
            status=_text(r.get("status"), "pending").strip().lower(), reason=_text(r.get("reason")),
            created=parse_time(r.get("created_ts")), updated=parse_time(r.get("updated_ts")),
            expires=parse_time(r.get("expires_ts"))))

    def reservations(self, project_id: int) -> list[SourceReservation]:
        return self._typed("file_reservations", lambda r: SourceReservation(
            id=int(r["id"]), project_id=int(r["project_id"]), agent_id=int(r["agent_id"]),
            pattern=_text(r["path_pattern"]), exclusive=_flag(r.get("exclusive"), True),
            reason=_text(r.get("reason")), created=_required_time(r["created_ts"], "created_ts"),
            expires=_required_time(r["expires_ts"], "expires_ts"),
            released=parse_time(r.get("released_ts"))), "WHERE project_id = ?", (project_id,), "ORDER BY id")

    def products(self) -> list[SourceProduct]:
        return self._typed("products", lambda r: SourceProduct(
            id=int(r["id"]), uid=_text(r.get("product_uid")).strip(), name=_text(r["name"]).strip(),
            created=parse_time(r.get("created_at"))), order="ORDER BY id")

    def product_links(self, project_id: int) -> list[SourceProductLink]:
        return self._typed("product_project_links", lambda r: SourceProductLink(
            product_id=int(r["product_id"]), project_id=int(r["project_id"]), created=parse_time(r.get("created_at"))),
            "WHERE project_id = ?", (project_id,))

    def windows(self, project_id: int) -> list[SourceWindow]:
        return self._typed("window_identities", lambda r: SourceWindow(
            id=r.get("id"), project_id=int(r["project_id"]), uuid=_text(r["window_uuid"]).strip(),
            display_name=_text(r["display_name"]).strip(), created=parse_time(r.get("created_ts")),
            last_active=parse_time(r.get("last_active_ts")), expires=parse_time(r.get("expires_ts"))),
            "WHERE project_id = ?", (project_id,))

    def summaries(self, project_id: int) -> list[SourceSummary]:
        return self._typed("message_summaries", lambda r: SourceSummary(
            id=int(r["id"]), project_id=int(r["project_id"]), text=_text(r.get("summary_text")),
            start=_required_time(r["start_ts"], "start_ts"), end=_required_time(r["end_ts"], "end_ts"),
            message_count=max(0, int(r.get("source_message_count") or 0)),
            thread_ids=[str(item) for item in _json_list(r.get("source_thread_ids"), "source_thread_ids")],
            llm_model=_text(r.get("llm_model")).strip() or None, created=parse_time(r.get("created_ts"))),
            "WHERE project_id = ?", (project_id,), "ORDER BY id")
