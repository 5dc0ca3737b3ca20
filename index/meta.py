"""The metadata store: a SQLite file that mirrors the records hot reads need.

It holds, for one project, what inbox pages, threads, topics, single
messages, time windows, the agent directory, active reservations, receipts
and cursor reads are answered from, plus the local
sequence numbers and the queue of messages the search index has yet to take
in. Everything here is derived from the repository: the file may be deleted
at any time and is rebuilt from the archive.

Each record file the store has seen gets a number from one project-wide,
ever-rising sequence the first time this machine sees it. A message pulled
from a teammate today is numbered after everything already here, even if it
was written yesterday, so cursor readers never miss it.

Writes happen in one SQLite transaction per catch-up, which also moves the
watermark (the commit the store reflects); several processes may catch up at
once and the loser of the race finds nothing left to do.

The file uses SQLite's rollback journal, not its write-ahead log: a WAL keeps
its index in a memory-mapped ``-shm`` file, and truncating that file (any
process can) kills every process that has it mapped with SIGBUS. Without it,
damage to the file is an error SQLite reports, which :class:`Meta` answers by
starting afresh; so is the file being deleted or replaced while in use, which
makes every thread reconnect. The journal is truncated at each commit, not
deleted: a commit then costs two thirds of the CPU and a third of the wait.
No transaction is held for long (a rebuild reads in short chunks), so
readers and the catch-up never wait on each other for more than a commit.

Each thread has a connection of its own, so each has its own page cache: a
server's pool of threads at SQLite's default (2 MiB each) would hold tens of
MiB of pages that any write by another connection makes stale anyway (a
rollback-journal database is reread after another connection's commit).
Connections here keep :data:`PAGE_CACHE_KIB` each.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import pygit2

from gitmail.model.errors import INDEX_UNAVAILABLE, GitmailError
from gitmail.model.records import LAYOUT, Channel, ChannelPost, Message, placed
from gitmail.storage.parsed import Parsed
from gitmail.storage.snapshot import blob_data

from . import parse
from .changes import RecordChange, relevant_role

_log = logging.getLogger("gitmail.index")

FORMAT = "8"  # of all derived state: part of its folder name, and checked in each file

_SCHEMA = """
CREATE TABLE IF NOT EXISTS state (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS seen (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    path TEXT NOT NULL UNIQUE,
    blob TEXT NOT NULL,
    first_seen TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS messages (
    id TEXT PRIMARY KEY,
    seq INTEGER NOT NULL,
    blob TEXT NOT NULL,
    thread_id TEXT NOT NULL,
    sender TEXT NOT NULL,
    subject TEXT NOT NULL,
    created_ts TEXT NOT NULL,
    importance TEXT NOT NULL,
    ack_required INTEGER NOT NULL,
    topic TEXT,
    reply_to TEXT,
    recipients TEXT NOT NULL,
    attachments TEXT
);
CREATE INDEX IF NOT EXISTS messages_thread ON messages (thread_id, created_ts);
CREATE INDEX IF NOT EXISTS messages_topic ON messages (lower(topic), id);
CREATE INDEX IF NOT EXISTS messages_time ON messages (created_ts);
CREATE INDEX IF NOT EXISTS messages_asking_ack ON messages (created_ts) WHERE ack_required = 1;
CREATE INDEX IF NOT EXISTS messages_urgent ON messages (created_ts) WHERE importance = 'urgent';
CREATE TABLE IF NOT EXISTS copies (
    agent TEXT NOT NULL,
    box TEXT NOT NULL,
    message_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    blob TEXT NOT NULL,
    created_ts TEXT NOT NULL,
    bcc TEXT,
    PRIMARY KEY (agent, box, message_id)
);
CREATE INDEX IF NOT EXISTS copies_time ON copies (agent, box, created_ts, message_id);
CREATE INDEX IF NOT EXISTS copies_seq ON copies (agent, seq);
CREATE INDEX IF NOT EXISTS copies_message ON copies (message_id);
CREATE TABLE IF NOT EXISTS receipts (
    agent TEXT NOT NULL,
    message_id TEXT NOT NULL,
    read_at TEXT,
    acked_at TEXT,
    PRIMARY KEY (agent, message_id)
);
CREATE TABLE IF NOT EXISTS agents (name TEXT PRIMARY KEY, data TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS reservations (
    id TEXT PRIMARY KEY,
    data TEXT NOT NULL,
    released INTEGER NOT NULL,
    expires_ts TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS reservations_open ON reservations (released, expires_ts);
CREATE TABLE IF NOT EXISTS pending (stamp INTEGER PRIMARY KEY AUTOINCREMENT, message_id TEXT NOT NULL UNIQUE);
CREATE TABLE IF NOT EXISTS imported (
    imported_id TEXT NOT NULL,
    message_id TEXT NOT NULL,
    PRIMARY KEY (imported_id, message_id)
);
CREATE INDEX IF NOT EXISTS imported_message ON imported (message_id);
CREATE TABLE IF NOT EXISTS channels (name TEXT PRIMARY KEY, data TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS posts (
    channel TEXT NOT NULL,
    id TEXT NOT NULL,
    position INTEGER NOT NULL,
    sender TEXT NOT NULL,
    created_ts TEXT NOT NULL,
    PRIMARY KEY (channel, id)
);
CREATE INDEX IF NOT EXISTS posts_position ON posts (channel, position);
"""

_ORDER = {"message": 0, "agent": 1, "reservation": 1, "channel": 1, "post": 1, "inbox": 2, "outbox": 2, "receipt": 3}

MESSAGE_COLUMNS = ("m.id, m.seq, m.thread_id, m.sender, m.subject, m.created_ts, m.importance, "
                   "m.ack_required, m.topic, m.reply_to, m.recipients, m.attachments, m.blob")
N_MESSAGE_COLUMNS = 13


PAGE_CACHE_KIB = 512  # each connection's page cache
BUSY_SECONDS = 10.0  # a statement waits this long for another connection's transaction, then gives up
READ_CHUNK = 1000  # messages a rebuild reads per statement


BULK_LOAD_MIN = 10_000  # records from which a store filled from nothing builds its secondary indexes at the end
BULK_CACHE_KIB = 65_536  # the page cache of that one transaction (each connection keeps PAGE_CACHE_KIB otherwise)
_SECONDARY_INDEXES = [statement.strip() + ";" for statement in _SCHEMA.split(";")
                      if statement.strip().startswith("CREATE INDEX")]


def _drop_secondary_indexes(db: sqlite3.Connection) -> None:
    """Before filling an empty store: the lookup indexes go, to be built once from the sorted rows at the end.

    Inserting 100k rows into nine indexes costs a B-tree descent per row and
    index; building an index afterwards is one sort. The keys the load itself
    looks up (primary keys, ``seen.path``) stay. Called inside the load's
    transaction, so a failed load leaves the indexes as they were; the
    caller sets the page cache back whatever happens.
    """
    db.execute(f"PRAGMA cache_size=-{BULK_CACHE_KIB}")
    for statement in _SECONDARY_INDEXES:
        name = statement.split("EXISTS", 1)[1].split()[0]
        db.execute(f"DROP INDEX IF EXISTS {name}")


def _restore_secondary_indexes(db: sqlite3.Connection) -> None:
    """The indexes :func:`_drop_secondary_indexes` dropped, built from the loaded rows."""
    for statement in _SECONDARY_INDEXES:
        db.execute(statement)


def _message_fields(repo: pygit2.Repository, blob: str, mid: str, parsed: Parsed | None) -> dict[str, Any]:
    """What the index keeps of message ``mid`` in ``blob``: from its record if ``parsed`` holds it, else its file.

    The index is the last step to read a parsed message: it takes it out of ``parsed``.
    """
    known = parsed.take(Message, bytes.fromhex(blob)) if parsed is not None else None
    if isinstance(known, Message) and known.id == mid:
        return parse.fields_of(known)
    return parse.message_fields(blob_data(repo, blob), mid)


class MetaCorrupt(Exception):
    """The SQLite file is unreadable or from another format; it must be rebuilt."""


class MetaBusy(Exception):
    """Another connection kept the file locked for longer than BUSY_SECONDS."""


class IndexUnavailable(GitmailError):
    """Derived state cannot answer right now: busy beyond its timeout, or damaged again as it was rebuilt.

    Reads the repository can answer itself (an inbox page) fall back to it;
    the others report this code and the index rebuilds itself meanwhile.
    """

    def __init__(self, cause: str):
        super().__init__(INDEX_UNAVAILABLE, f"the index of this project cannot answer right now ({cause}); it "
                         "rebuilds itself from the repository: retry in a moment", {"cause": cause})


def failure_of(exc: sqlite3.DatabaseError) -> Exception:
    """What a SQLite error means here: the OS out of a resource, a busy file, or damage to rebuild."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code == sqlite3.SQLITE_FULL:
        return OSError(errno.ENOSPC, f"the metadata store cannot grow: {exc}")
    if code == sqlite3.SQLITE_CANTOPEN:
        try:  # SQLite does not say why it could not open the file: out of descriptors is not damage
            os.close(os.open(os.devnull, os.O_RDONLY))
        except OSError as probe:
            return probe
    if isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc):
        return MetaBusy(str(exc))
    return MetaCorrupt(str(exc))


def _identity(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return st.st_dev, st.st_ino


def message_row(row: tuple[Any, ...]) -> dict[str, Any]:
    """A message's summary from the columns in :data:`MESSAGE_COLUMNS` order.

    Shaped like the mail domain's message views (``id … attachments``), plus
    ``seq`` (when this machine first saw it) and ``blob`` (its file in git).
    """
    recipients = json.loads(row[10])
    return {
        "id": row[0], "thread_id": row[2], "subject": row[4], "from": row[3], "to": recipients["to"],
        "cc": recipients["cc"], "created_ts": row[5], "importance": row[6], "ack_required": bool(row[7]),
        "topic": row[8], "reply_to": row[9], "attachments": json.loads(row[11]) if row[11] else [],
        "seq": row[1], "blob": row[12],
    }


class Meta:
    """One project's metadata store; connections are per thread."""

    def __init__(self, path: str, *, check: bool = True):
        """Open (and with ``check``, verify or recreate) the store at ``path``.

        A helper process that only serves its owner passes ``check=False``:
        checking and repairing the file is the owner's job.
        """
        self.path = path
        self.check = check
        self._local = threading.local()
        self._generation = 0  # bumped when the file is recreated or replaced, so threads reconnect
        self._reset_lock = threading.Lock()
        self._file: tuple[int, int] | None = None  # (device, inode) of the file the connections are on
        if check:
            self._open_checked()

    @property
    def generation(self) -> int:
        """Changes whenever the store starts afresh (recreated here, or deleted or replaced from outside)."""
        return self._generation

    def generation_now(self) -> int:
        """:attr:`generation` after looking whether the file is still the one in use."""
        if self.check:
            self._follow_file()
        return self._generation

    # -- connections ----------------------------------------------------------
    def _connect(self) -> sqlite3.Connection:
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        conn = sqlite3.connect(self.path, isolation_level=None, timeout=BUSY_SECONDS, check_same_thread=False)
        # A rollback journal (a WAL's shared index, truncated under a reader, was SIGBUS), kept as a file and
        # truncated at each commit: creating and deleting it cost a directory sync and a third of the commit's CPU.
        conn.execute("PRAGMA journal_mode=TRUNCATE")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute(f"PRAGMA cache_size=-{PAGE_CACHE_KIB}")
        return conn

    @property
    def db(self) -> sqlite3.Connection:
        if self.check:
            self._follow_file()
        conn = getattr(self._local, "conn", None)
        if conn is None or self._local.generation != self._generation:
            conn = self._local.conn = self._connect()
            self._local.generation = self._generation
        return conn

    def _follow_file(self) -> None:
        """Start afresh if the file was deleted (``derived/`` removed) or replaced behind this process's back."""
        if _identity(self.path) == self._file:
            return
        with self._reset_lock:
            current = _identity(self.path)
            if current == self._file:
                return  # another thread saw to it
            if current is None:
                _log.warning("index metadata %s was deleted; starting afresh", self.path)
                self._recreate()
            else:  # another process recreated it: use the new file
                self._generation += 1
                self._file = current

    def _open_checked(self) -> None:
        """Open the file, creating the schema; start afresh if it is corrupt, foreign or in WAL mode."""
        try:
            conn = self._connect()
            ok = conn.execute("PRAGMA quick_check").fetchone()[0] == "ok"
            mode = conn.execute("PRAGMA journal_mode").fetchone()[0]  # older stores used a WAL
            conn.executescript(_SCHEMA)
            conn.execute("INSERT OR IGNORE INTO state VALUES ('format', ?)", (FORMAT,))
            fmt = conn.execute("SELECT value FROM state WHERE key = 'format'").fetchone()[0]
            conn.close()
            if ok and fmt == FORMAT and mode == "truncate":
                self._file = _identity(self.path)
                return
            _log.warning("index metadata %s is from another format; rebuilding", self.path)
        except sqlite3.DatabaseError as exc:
            _log.warning("index metadata %s is unreadable (%s); rebuilding", self.path, exc)
        self.reset()

    def reset(self) -> None:
        """Delete the file and start empty (sequence numbers restart)."""
        with self._reset_lock:
            self._recreate()

    def _recreate(self) -> None:
        self._generation += 1
        for suffix in ("", "-journal", "-wal", "-shm"):
            try:
                os.unlink(self.path + suffix)
            except FileNotFoundError:
                pass
        conn = self._connect()
        conn.executescript(_SCHEMA)
        conn.execute("INSERT OR REPLACE INTO state VALUES ('format', ?)", (FORMAT,))
        conn.close()
        self._file = _identity(self.path)

    def read(self, sql: str, args: Iterable[Any] = ()) -> list[tuple[Any, ...]]:
        try:
            return self.db.execute(sql, tuple(args)).fetchall()
        except sqlite3.DatabaseError as exc:
            raise failure_of(exc) from exc

    # -- state ----------------------------------------------------------------
    def get_state(self, key: str) -> str | None:
        rows = self.read("SELECT value FROM state WHERE key = ?", (key,))
        return rows[0][0] if rows else None

    def watermark(self) -> str | None:
        return self.get_state("watermark") or None

    def high_watermark(self) -> int:
        rows = self.read("SELECT seq FROM sqlite_sequence WHERE name = 'seen'")
        return int(rows[0][0]) if rows else 0

    # -- writing --------------------------------------------------------------
    def apply(self, repo: pygit2.Repository, expected: str | None, new: str | None,
              changes: Iterable[RecordChange], *, seen_ts: str, full: bool = False,
              extra_state: dict[str, str] | None = None,
              progress: Callable[[int, int], None] | None = None, parsed: Parsed | None = None) -> bool:
        """Apply ``changes`` and move the watermark from ``expected`` to ``new``.

        Returns False (and writes nothing) if another writer moved the
        watermark first. With ``full``, ``changes`` lists every record at
        ``new`` and anything the store holds beyond it is removed. Records
        seen for the first time are stamped ``seen_ts``. ``parsed``: records
        parsed already (a sync's checks), whose messages are not parsed again.
        """
        db = self.db
        try:
            db.execute("BEGIN IMMEDIATE")
            try:
                current = db.execute("SELECT value FROM state WHERE key = 'watermark'").fetchone()
                if (current[0] if current else None) != expected:
                    db.execute("ROLLBACK")
                    return False
                todo = list(changes)
                bulk = full and len(todo) >= BULK_LOAD_MIN and not db.execute("SELECT 1 FROM seen LIMIT 1").fetchone()
                if full:
                    todo = self._against_store(db, todo)
                if bulk:
                    _drop_secondary_indexes(db)
                # By name within each folder, whatever the layout: records first seen together are
                # numbered in the order of their IDs, which is the order they were written.
                todo.sort(key=lambda change: (_ORDER[change.role], placed(change.path, 1)))
                for done, change in enumerate(todo, 1):
                    self._apply_one(db, repo, change, seen_ts, parsed)
                    if progress and (done % 1000 == 0 or done == len(todo)):
                        progress(done, len(todo))
                if bulk:
                    _restore_secondary_indexes(db)
                db.execute("INSERT OR REPLACE INTO state VALUES ('watermark', ?)", (new or "",))
                for key, value in (extra_state or {}).items():
                    db.execute("INSERT OR REPLACE INTO state VALUES (?, ?)", (key, value))
                db.execute("COMMIT")
                return True
            except BaseException:
                if db.in_transaction:
                    db.execute("ROLLBACK")  # the dropped indexes come back with it
                raise
            finally:
                db.execute(f"PRAGMA cache_size=-{PAGE_CACHE_KIB}")
        except sqlite3.DatabaseError as exc:
            raise failure_of(exc) from exc

    def set_state(self, key: str, value: str) -> None:
        self.db.execute("INSERT OR REPLACE INTO state VALUES (?, ?)", (key, value))

    @staticmethod
    def _against_store(db: sqlite3.Connection, present: list[RecordChange]) -> list[RecordChange]:
        """Turn a full listing into the changes from what the store holds.

        A record the store holds under another layout's path is the same
        record: it is renamed, keeping its sequence number.
        """
        held = {placed(path, LAYOUT): (path, blob) for path, blob in db.execute("SELECT path, blob FROM seen")}
        todo = []
        for change in present:
            was = held.pop(placed(change.path, LAYOUT), None)
            if was is not None and was[0] != change.path:
                todo.append(RecordChange(change.path, change.role, change.blob, moved_from=was[0]))
            elif was is None or was[1] != change.blob:
                todo.append(change)
        for path, _ in held.values():
            role = relevant_role(path)
            if role is not None:
                todo.append(RecordChange(path, role, None))
            else:
                db.execute("DELETE FROM seen WHERE path = ?", (path,))
        return todo

    def _seq(self, db: sqlite3.Connection, change: RecordChange, stamp: str) -> int:
        return db.execute("INSERT INTO seen (path, blob, first_seen) VALUES (?, ?, ?) "
                          "ON CONFLICT (path) DO UPDATE SET blob = excluded.blob RETURNING seq",
                          (change.path, change.blob, stamp)).fetchone()[0]

    def _apply_one(self, db: sqlite3.Connection, repo: pygit2.Repository, change: RecordChange, stamp: str,
                   parsed: Parsed | None = None) -> None:
        parts = change.path.split("/")
        name = parts[-1].rsplit(".", 1)[0]
        role = change.role
        if change.moved_from is not None:  # the same record at its new layout's path: keep its number
            was = db.execute("SELECT blob FROM seen WHERE path = ?", (change.moved_from,)).fetchone()
            db.execute("UPDATE OR REPLACE seen SET path = ? WHERE path = ?", (change.path, change.moved_from))
            if was is not None and was[0] == change.blob:
                return
        if change.blob is None:
            db.execute("DELETE FROM seen WHERE path = ?", (change.path,))
            self._forget(db, role, parts, name)
            return
        try:
            if role in ("inbox", "outbox"):  # read only if it differs from the canonical file (a bcc)
                self._put_copy(db, repo, change, change.blob, parts[1], name, stamp, parsed)
                return
            if role == "message":
                self._put_message(db, change, name, _message_fields(repo, change.blob, name, parsed), stamp)
                return
            data = blob_data(repo, change.blob)
            if role == "receipt":
                fields = parse.yaml_fields(data)
                db.execute("INSERT OR REPLACE INTO receipts VALUES (?, ?, ?, ?)",
                           (parts[1], name, fields.get("read_at"), fields.get("acked_at")))
                self._seq(db, change, stamp)
            elif role == "agent":
                fields = parse.yaml_fields(data)
                for secret in ("token_hash", "key_hash"):
                    fields.pop(secret, None)
                db.execute("INSERT OR REPLACE INTO agents VALUES (?, ?)", (parts[1], json.dumps(fields, default=str)))
                self._seq(db, change, stamp)
            elif role in ("channel", "post"):
                self._put_channel_record(db, parse.channel_record(change.path, data))
                self._seq(db, change, stamp)
            elif role == "reservation":
                fields = parse.yaml_fields(data)
                db.execute("INSERT OR REPLACE INTO reservations VALUES (?, ?, ?, ?)",
                           (name, json.dumps(fields, default=str), int(bool(fields.get("released_ts"))),
                            parse.ts_field(fields, "expires_ts")))
                self._seq(db, change, stamp)
        except parse.Unreadable as exc:
            _log.warning("index skips %s: %s", change.path, exc)
            db.execute("DELETE FROM seen WHERE path = ?", (change.path,))
            self._forget(db, role, parts, name)

    def _put_message(self, db: sqlite3.Connection, change: RecordChange, mid: str, fields: dict[str, Any],
                     stamp: str) -> None:
        seq = self._seq(db, change, stamp)
        db.execute(
            "INSERT OR REPLACE INTO messages VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (mid, seq, change.blob, fields["thread_id"], fields["from"], fields["subject"], fields["created_ts"],
             fields["importance"], int(fields["ack_required"]), fields["topic"], fields["reply_to"],
             json.dumps({"to": fields["to"], "cc": fields["cc"]}),
             json.dumps(fields["attachments"]) if fields["attachments"] else None),
        )
        db.execute("UPDATE copies SET created_ts = ? WHERE message_id = ?", (fields["created_ts"], mid))
        db.execute("INSERT OR REPLACE INTO pending (message_id) VALUES (?)", (mid,))
        db.execute("DELETE FROM imported WHERE message_id = ?", (mid,))
        if fields["imported_id"] is not None:
            db.execute("INSERT OR IGNORE INTO imported VALUES (?, ?)", (fields["imported_id"], mid))

    @staticmethod
    def _put_channel_record(db: sqlite3.Connection, record: Channel | ChannelPost) -> None:
        """A channel's definition, or a post numbered after every post this machine has of the channel.

        A channel's posts are numbered 1, 2, 3... in the order this machine
        takes them in (as an inbox's are), and a number never changes: a
        post that arrives late by sync, older than posts already here, is
        numbered after them, so a reader whose cursor is past them still
        reads it. A rebuilt index numbers them afresh, each once.
        """
        if isinstance(record, Channel):
            db.execute("INSERT OR REPLACE INTO channels VALUES (?, ?)", (record.name, json.dumps(record.to_fields())))
            return
        if db.execute("SELECT 1 FROM posts WHERE channel = ? AND id = ?", (record.channel, record.id)).fetchone():
            return  # a post never changes
        last = db.execute("SELECT max(position) FROM posts WHERE channel = ?", (record.channel,)).fetchone()[0]
        position = (last or 0) + 1
        db.execute("INSERT INTO posts VALUES (?, ?, ?, ?, ?)",
                   (record.channel, record.id, position, record.sender, record.created_ts))

    def _put_copy(self, db: sqlite3.Connection, repo: pygit2.Repository, change: RecordChange, blob: str,
                  agent: str, mid: str, stamp: str, parsed: Parsed | None) -> None:
        box = change.role
        canonical = db.execute("SELECT blob, created_ts FROM messages WHERE id = ?", (mid,)).fetchone()
        created = canonical[1] if canonical else parse.id_ts(mid)
        bcc = None
        if box == "outbox" and (canonical is None or canonical[0] != blob):
            fields = _message_fields(repo, blob, mid, parsed)
            bcc = json.dumps(fields["bcc"]) if fields["bcc"] else None
            created = created if canonical else fields["created_ts"]
        seq = self._seq(db, change, stamp)
        db.execute("INSERT OR REPLACE INTO copies VALUES (?, ?, ?, ?, ?, ?, ?)",
                   (agent, box, mid, seq, change.blob, created, bcc))
        db.execute("INSERT OR REPLACE INTO pending (message_id) VALUES (?)", (mid,))

    @staticmethod
    def _forget(db: sqlite3.Connection, role: str, parts: list[str], name: str) -> None:
        if role == "message":
            db.execute("DELETE FROM messages WHERE id = ?", (name,))
            db.execute("DELETE FROM imported WHERE message_id = ?", (name,))
            db.execute("INSERT OR REPLACE INTO pending (message_id) VALUES (?)", (name,))
        elif role in ("inbox", "outbox"):
            db.execute("DELETE FROM copies WHERE agent = ? AND box = ? AND message_id = ?", (parts[1], role, name))
            db.execute("INSERT OR REPLACE INTO pending (message_id) VALUES (?)", (name,))
        elif role == "receipt":
            db.execute("DELETE FROM receipts WHERE agent = ? AND message_id = ?", (parts[1], name))
        elif role == "agent":
            db.execute("DELETE FROM agents WHERE name = ?", (parts[1],))
        elif role == "reservation":
            db.execute("DELETE FROM reservations WHERE id = ?", (name,))
        elif role == "channel":
            db.execute("DELETE FROM channels WHERE name = ?", (parts[1],))
        elif role == "post":  # a purge: the numbers of the rest stay
            db.execute("DELETE FROM posts WHERE channel = ? AND id = ?", (parts[1], name))

    # -- the search queue -----------------------------------------------------
    def pending(self, limit: int | None = None) -> list[tuple[int, str]]:
        sql = "SELECT stamp, message_id FROM pending ORDER BY stamp"
        return [(row[0], row[1]) for row in self.read(sql + (f" LIMIT {int(limit)}" if limit else ""))]

    def has_pending(self) -> bool:
        return bool(self.read("SELECT 1 FROM pending LIMIT 1"))

    def pending_count(self) -> int:
        return int(self.read("SELECT count(*) FROM pending")[0][0])

    def done(self, stamps: list[tuple[int, str]]) -> None:
        """Drop queue entries the search index took in (unless re-queued since)."""
        db = self.db
        db.execute("BEGIN IMMEDIATE")
        try:
            db.executemany("DELETE FROM pending WHERE stamp = ?", [(stamp,) for stamp, _ in stamps])
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise

    # -- what search documents are made of -------------------------------------
    def search_sources(self, message_ids: list[str]) -> dict[str, tuple[dict[str, Any], str, list[str]]]:
        """:meth:`search_source` of each message that exists, READ_CHUNK at a time, in two statements a chunk."""
        found: dict[str, tuple[dict[str, Any], str, list[str]]] = {}
        for start in range(0, len(message_ids), READ_CHUNK):
            chunk = message_ids[start:start + READ_CHUNK]
            rows = self.read(f"SELECT {MESSAGE_COLUMNS} FROM messages m WHERE m.id IN ({','.join('?' * len(chunk))})",
                             chunk)
            found.update((source[0]["id"], source) for source in self._with_agents(rows))
        return found

    def search_source(self, message_id: str) -> tuple[dict[str, Any], str, list[str]] | None:
        """A message's summary, its blob and every agent who may see it (None if there is no such message)."""
        return self.search_sources([message_id]).get(message_id)

    def _with_agents(self, rows: list[tuple[Any, ...]]) -> Iterator[tuple[dict[str, Any], str, list[str]]]:
        """Message rows as search sources, with every agent holding a copy read in one statement."""
        visible: dict[str, set[str]] = {}
        if rows:
            for mid, agent in self.read(f"SELECT message_id, agent FROM copies WHERE message_id IN "
                                        f"({','.join('?' * len(rows))})", [row[0] for row in rows]):
                visible.setdefault(mid, set()).add(agent)
        for row in rows:
            yield message_row(row), row[12], sorted(visible.get(row[0], ()))

    def rebuild_point(self) -> tuple[str | None, int, int]:
        """What a rebuild starts from: (watermark, last queued stamp, message count), read together.

        The rebuild then reads :meth:`sources`, in chunks with no lock held
        in between (a rebuild takes its time; catch-ups go on meanwhile).
        Queue entries up to the stamp are reflected in what it reads;
        whatever changes later is queued after the stamp, and the next drain
        takes it in.
        """
        db = self.db
        db.execute("BEGIN")
        try:
            watermark = db.execute("SELECT value FROM state WHERE key = 'watermark'").fetchone()
            stamp = db.execute("SELECT max(stamp) FROM pending").fetchone()[0] or 0
            total = db.execute("SELECT count(*) FROM messages").fetchone()[0]
        finally:
            db.execute("COMMIT")
        return (watermark[0] or None) if watermark else None, stamp, total

    def sources(self, after: int = -1, upto: int | None = None) -> Iterator[tuple[dict[str, Any], str, list[str]]]:
        """Every message with a sequence number in (after, upto], as :meth:`search_source` gives it, in order.

        One pass: READ_CHUNK messages per statement, and one more statement
        for the agents holding copies of them.
        """
        bound = "" if upto is None else f" AND m.seq <= {int(upto)}"
        while rows := self.read(f"SELECT {MESSAGE_COLUMNS} FROM messages m WHERE m.seq > ?{bound} ORDER BY m.seq "
                                "LIMIT ?", (after, READ_CHUNK)):
            yield from self._with_agents(rows)
            after = rows[-1][1]

    def done_up_to(self, stamp: int) -> None:
        """Drop queue entries up to ``stamp`` (a rebuild took them in)."""
        self.db.execute("DELETE FROM pending WHERE stamp <= ?", (stamp,))


    def open_reservations(self, horizon: str) -> tuple[str | None, list[dict[str, Any]]]:
        """The watermark and, as of it, every unreleased reservation expiring after ``horizon``, in one read."""
        db = self.db
        try:
            db.execute("BEGIN")
            try:
                row = db.execute("SELECT value FROM state WHERE key = 'watermark'").fetchone()
                rows = db.execute("SELECT data FROM reservations WHERE released = 0 AND expires_ts > ?",
                                  (horizon,)).fetchall()
            finally:
                db.execute("COMMIT")
        except sqlite3.DatabaseError as exc:
            if isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc):
                raise
            raise MetaCorrupt(str(exc)) from exc
        return (row[0] or None) if row else None, [json.loads(data) for (data,) in rows]

    def message_count(self) -> int:
        return int(self.read("SELECT count(*) FROM messages")[0][0])
