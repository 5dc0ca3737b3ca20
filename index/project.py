"""One project's derived state: metadata, search index, hot-read cache, cursors.

Everything lives under ``<derived>/index-v<FORMAT>/`` (the format version is
part of the path, so a new format never reads an old one; older folders are
removed on sight). Any of it may be deleted at any time and is rebuilt from
the archive.

Catching up (``catch_up``) moves the metadata store from its watermark to the
tip by tree diff; if the watermark is gone or not an ancestor of the tip
(history rewritten), the store is resynchronized from the full tree (keeping
the sequence numbers of records it still holds) and the search index is
rebuilt beside the old one. Reads catch up first, so they see every commit
made before they were called; searches do not wait for the search writer.
"""

from __future__ import annotations

import copy
import datetime as dt
import logging
import os
import shutil
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import pygit2

from gitmail.model.clock import UTC, format_ts
from gitmail.model.errors import invalid, not_found
from gitmail.model.records import Agent, Record, Reservation
from gitmail.storage.background import Debounced
from gitmail.storage.engine import Archive
from gitmail.storage.layout import Comparisons
from gitmail.storage.parsed import Parsed
from gitmail.storage.snapshot import Snapshot, blob_data

from . import oversight, parse, reads
from .changes import Trees, compared_changes, diff, is_ancestor, listing, recorded_changes
from .history import MAX_ROWS, History
from .meta import FORMAT, IndexUnavailable, Meta, MetaBusy, MetaCorrupt
from .reservations import ActiveReservations, record_entry
from .search_process import SearchWriter, SearchWriterFailed, write

if TYPE_CHECKING:
    from .search import Progress, SearchIndex

_log = logging.getLogger("gitmail.index")

VERSION_DIR = f"index-v{FORMAT}"
MEMO_ENTRIES = 1024
CATCH_UP_DELAY = 0.02  # seconds commits may gather before one background catch-up takes them all in...
CATCH_UP_SPACING = 0.1  # ...and the least time between the starts of two, so a burst's catch-ups take in several
MERGE_DELAY = 1.0  # seconds without a search-index commit before small search segments are merged
DRAIN_QUIET = 0.25  # queued messages go into the search index once commits pause this long...
DRAIN_MAX_WAIT = 1.0  # ...or at the latest this long after the first of them was queued...
DRAIN_AT = 128  # ...or at once when this many are queued (searches merge the queue in from memory)
BULK_REBUILD_MIN = 2000  # queued messages from which a large arrival may be taken in by a rebuild...
BULK_REBUILD_SHARE = 0.3  # ...when they are at least this share of all messages


T = TypeVar("T")


def _fresh(value: Any) -> Any:
    """A copy of a cached answer that the caller may change freely."""
    if isinstance(value, list):
        return [_fresh(item) for item in value]
    if isinstance(value, dict):
        return {key: _fresh(item) if isinstance(item, (list, dict)) else item for key, item in value.items()}
    if isinstance(value, Record):
        return copy.deepcopy(value)
    return value


class ProjectIndex:
    """Derived state of one archive, safe to share between threads."""

    def __init__(self, archive: Archive, derived_dir: str, search_writer: SearchWriter | None = None):
        self.archive = archive
        self.root = os.path.join(derived_dir, VERSION_DIR)
        _remove_other_versions(derived_dir)
        self.meta = Meta(os.path.join(self.root, "meta.sqlite"))
        self.open_reservations = ActiveReservations(self.meta)
        self.history = History(self.meta)
        self._history_lock = threading.Lock()
        self._search_index: SearchIndex | None = None  # opened on first use: see search_index
        self._search_index_lock = threading.Lock()
        self.search_writer = search_writer  # background drains and merges run there when set
        self._sync_lock = threading.Lock()
        self._changed = threading.Condition()
        self._version = 0  # bumped (under _changed) each time the metadata store moves
        self._listeners: list[Callable[[], None]] = []  # told after each bump (see subscribe)
        self._known_tip: str | None = None  # the tip the metadata store is known to reflect
        self._known_generation = self.meta.generation  # ...as that store file was (see Meta.generation)
        self._trees = Trees()  # the trees the last catch-up visited, where the next one starts
        self._memo: dict[Any, Any] = {}
        self._memo_tip: str | None = None
        self._search_ready = False
        self._ensure_lock = threading.Lock()
        name = os.path.basename(derived_dir)
        self.worker = Debounced(f"gitmail-index:{name}", self._work, delay=CATCH_UP_DELAY,
                                 min_interval=CATCH_UP_SPACING)
        self.drainer = Debounced(f"gitmail-index-drain:{name}", self._drain, delay=DRAIN_QUIET,
                                 max_wait=DRAIN_MAX_WAIT)
        self.merger = Debounced(f"gitmail-index-merge:{name}", self._merge, delay=MERGE_DELAY,
                                max_wait=4 * MERGE_DELAY)

    def _now_ts(self) -> str:
        """The time by the archive's clock (the store's wall-time source)."""
        return format_ts(dt.datetime.fromtimestamp(self.archive.wall(), UTC))

    @property
    def search_index(self) -> SearchIndex:
        """The Whoosh side, opened on first use, so reads that search nothing never load Whoosh."""
        if self._search_index is None:
            with self._search_index_lock:
                if self._search_index is None:
                    from .search import SearchIndex

                    self._search_index = SearchIndex(os.path.join(self.root, "search"), self.meta, self._blob,
                                                     git_dir=self.archive.git_dir)
        return self._search_index

    def _blob(self, oid: str) -> bytes:
        return blob_data(self.archive.repo, oid)

    # -- catching up ----------------------------------------------------------
    def on_commit(self, old_tip: str | None, new_tip: str) -> None:
        """Archive listener: catch up in the background, never in the committer's way."""
        self.poke()

    def poke(self) -> None:
        """Catch up in the background soon; pokes that arrive together share one catch-up."""
        self.worker.poke()

    def _work(self) -> None:
        """Background catch-up: the metadata at once, the search index in batches.

        Every commit moves the metadata store (inbox, cursors) within
        CATCH_UP_DELAY. A search-index commit costs about the same for one
        message as for a hundred, so queued messages wait for a pause (or
        for DRAIN_AT of them); searches meanwhile merge the queue in from
        memory, so they miss nothing.
        """
        try:
            self._sync()
            self._catch_up_history()
            self._ensure_search()
            rebuild = self.meta.get_state("search_rebuild") == "1" or self._bulk_arrival()
            pending = self.meta.pending_count()
        except (MetaCorrupt, MetaBusy) as exc:  # the next commit or read tries again, or rebuilds
            _log.warning("index catch-up of %s deferred: %s", self.archive.path, exc)
            return
        if rebuild:
            self._rebuild_search()
        elif pending >= DRAIN_AT:
            self._drain()
        elif pending:
            self.drainer.poke()

    def _drain(self) -> None:
        applied = self._write_search("drain")
        if applied is None:
            self.drainer.poke()  # another writer was busy: try again after the next pause
        elif applied:
            self.merger.poke()

    def _merge(self) -> None:
        if self._write_search("merge") is None:
            self.merger.poke()  # a writer was busy: try again after the next pause

    def _write_search(self, op: str) -> Any:
        """A background drain or merge: in the search writer process if there is one, else here."""
        if self.search_writer is not None:
            try:
                result = self.search_writer.run(op, git_dir=self.archive.git_dir, search_root=self.search_index.root,
                                                meta_path=self.meta.path)
            except SearchWriterFailed as exc:
                _log.warning("search writer process failed (%s); writing the search index in process", exc)
            else:
                if result:
                    self.search_index.refresh()
                return result
        return write(self.search_index, op)

    def flush(self, timeout: float = 60.0) -> bool:
        """Wait until background catch-up and segment merging are idle (for tests and shutdown)."""
        return all(job.wait_idle(timeout) for job in (self.worker, self.drainer, self.merger))

    def catch_up(self, tip: str | None = None, *, compared: Comparisons | None = None,
                 parsed: Parsed | None = None) -> str | None:
        """Bring all derived state up to ``tip`` (default: the archive's tip), now.

        Applies the tree diff from the watermark (or resynchronizes and
        rebuilds when history was rewritten), then has the search index take
        in everything queued. Waits for another writer of this process if one
        is busy. ``compared``: trees the caller compared already (a sync's
        findings read what entered ``main``), taken instead of a diff;
        ``parsed``: records the caller parsed already (a sync's checks), whose
        messages are taken instead of parsing their files again.
        """
        current = self._sync(tip, compared=compared, parsed=parsed)
        self._ensure_search()
        if self.meta.get_state("search_rebuild") == "1" or self._bulk_arrival():
            self._rebuild_search()
        self._drain()
        return current

    def _bulk_arrival(self) -> bool:
        """Whether so much arrived at once (a large sync) that a rebuild is the cheaper way in.

        A rebuild streams every document into one writer; taking a queue of
        this size in by updates costs more per message than that.
        """
        pending = self.meta.pending_count()
        return pending >= BULK_REBUILD_MIN and pending >= BULK_REBUILD_SHARE * self.meta.message_count()

    def _sync(self, tip: str | None = None, *, compared: Comparisons | None = None,
              parsed: Parsed | None = None) -> str | None:
        target = tip or self.archive.tip()
        generation = self.meta.generation_now()
        if target == self._known_tip and generation == self._known_generation:
            return target
        with self._sync_lock:
            if generation != self._known_generation:  # the store started afresh: it reflects nothing yet
                self._known_tip, self._known_generation = None, generation
                self._memo, self._memo_tip = {}, None
            try:
                reached = self._sync_locked(target, compared, parsed)
            except MetaCorrupt as exc:
                reached = self._recover(exc, target)
            moved, self._known_tip = reached != self._known_tip, reached
        if moved:
            with self._changed:
                self._version += 1
                self._changed.notify_all()
                listeners = list(self._listeners)
            for listener in listeners:
                try:
                    listener()
                except Exception:  # noqa: BLE001 - a listener's failure must not stop a catch-up
                    _log.exception("an index listener of %s failed", self.archive.path)
        return reached

    def _recover(self, exc: Exception, target: str | None) -> str | None:
        """Start the metadata store afresh after damage (call with the sync lock held)."""
        _log.warning("index metadata of %s is damaged (%s); rebuilding", self.archive.path, exc)
        self.meta.reset()
        self._memo, self._memo_tip = {}, None
        reached = self._sync_locked(target)
        self.meta.set_state("search_rebuild", "1")
        return reached

    def _sync_locked(self, target: str | None, compared: Comparisons | None = None,
                     parsed: Parsed | None = None) -> str | None:
        repo = self.archive.repo
        for _ in range(8):
            watermark = self.meta.watermark()
            if watermark == target:
                return target
            known = (watermark, target) if watermark and target and watermark in repo else None
            extra = None
            if known and is_ancestor(repo, *known):
                recorded = recorded_changes(self.archive, repo, *known)
                if recorded is None:
                    recorded = compared_changes(compared, repo, *known)
                changes = recorded if recorded is not None else diff(repo, watermark, target, trees=self._trees)
                full = False
            elif known and is_ancestor(repo, known[1], known[0]):
                return watermark  # asked for an older commit than we already reflect
            else:
                changes, full = listing(repo, target), True
                if watermark:
                    extra = {"search_rebuild": "1"}
            if self.meta.apply(repo, watermark, target, changes, seen_ts=self._now_ts(), full=full, extra_state=extra,
                               parsed=parsed):
                return target
        raise MetaCorrupt("the watermark kept moving under us")

    def _ensure_search(self, progress: Progress | None = None) -> None:
        """Check the search index once per process; rebuild it if it is missing or damaged."""
        if self._search_ready:
            return
        with self._ensure_lock:
            if not self._search_ready:
                if self.search_index.ensure(progress):
                    self.meta.set_state("search_rebuild", "0")
                self._search_ready = True

    def rebuild_progress(self) -> tuple[int, int] | None:
        """(messages indexed, of) while this process rebuilds the search index; None otherwise."""
        search = self._search_index
        return search.building if search is not None else None

    def _rebuild_search(self, progress: Progress | None = None) -> int:
        count = self.search_index.rebuild(progress)
        self.meta.set_state("search_rebuild", "0")
        return count

    def reindex(self, progress: Progress | None = None, records_progress: Progress | None = None) -> int:
        """Resynchronize the metadata from the full tree and rebuild the search index.

        Sequence numbers of records still present are kept. Returns how many
        messages the new search index holds.
        """
        with self._sync_lock:
            repo = self.archive.repo
            for _ in range(8):
                tip, watermark = self.archive.tip(), self.meta.watermark()
                if self.meta.apply(repo, watermark, tip, listing(repo, tip), seen_ts=self._now_ts(), full=True,
                                   progress=records_progress):
                    break
            else:
                raise MetaCorrupt("other processes kept moving the watermark during a reindex; run it again")
            self._known_tip = tip
        self._search_ready = True
        return self._rebuild_search(progress)

    def wait(self, timeout: float, *, after_seq: int | None = None, poll: float = 0.25) -> int:
        """Wait until the sequence passes ``after_seq`` (default: its value now).

        Returns the high watermark. Commits made by this process wake waiters
        at once; changes from elsewhere (pushes, other processes) are noticed
        within ``poll`` seconds.
        """
        start = self.high_watermark() if after_seq is None else after_seq
        deadline = time.monotonic() + timeout
        while True:
            with self._changed:
                seen = self._version
            current = self.high_watermark()
            remaining = deadline - time.monotonic()
            if current > start or remaining <= 0:
                return current
            with self._changed:
                if self._version == seen:  # nothing moved since we looked: sleep until something does
                    self._changed.wait(min(poll, remaining))

    def subscribe(self, listener: Callable[[], None]) -> Callable[[], None]:
        """Call ``listener`` each time the metadata store moves, from the thread that moved it; returns the undo.

        What :meth:`wait` does for a thread, this does for a waiter that
        holds none (an asyncio task hands the call to its event loop). The
        store moves when a read or the background catch-up takes in a new
        tip: a commit of this process at once, an outside one once someone
        looks (a read, :meth:`high_watermark`, the watcher's poke).
        """
        with self._changed:
            self._listeners.append(listener)

        def unsubscribe() -> None:
            with self._changed:
                if listener in self._listeners:
                    self._listeners.remove(listener)

        return unsubscribe

    def _catch_up_history(self) -> None:
        with self._history_lock:
            try:
                self.history.catch_up(self.archive.repo, self.archive.tip(), recorded=self.archive.changes_of)
            except MetaCorrupt as exc:
                with self._sync_lock:
                    self._known_tip = self._recover(exc, self.archive.tip())

    def file_history(self, paths: list[str], limit: int = MAX_ROWS) -> list[dict[str, Any]]:
        """The commits that changed any of ``paths``, newest first, from the derived history (see :mod:`.history`).

        Each has ``commit``, ``author``, ``email``, ``time`` (epoch seconds),
        ``summary`` and ``files`` (``path``, ``old_blob``, ``new_blob``).
        """
        def read() -> list[dict[str, Any]]:
            self._catch_up_history()
            return self.history.of_paths(paths, limit)

        return self._guarded(read)

    def commits_by(self, author: str, limit: int) -> list[dict[str, Any]]:
        """The latest ``limit`` commits authored by ``author``, newest first, from the derived history.

        Each has ``commit``, ``summary`` and ``time`` (epoch seconds).
        """
        def read() -> list[dict[str, Any]]:
            self._catch_up_history()
            return self.history.by_author(author, limit)

        return self._guarded(read)

    # -- the cache of hot reads -----------------------------------------------
    def _guarded(self, read: Callable[[], T]) -> T:
        """Run a read; damage found on the way is repaired and the read tried once more.

        A store that stays unusable (busy beyond its timeout, or damaged again
        right away) raises IndexUnavailable, which callers that can answer
        from the repository do.
        """
        try:
            return read()
        except MetaCorrupt as exc:
            try:
                with self._sync_lock:
                    self._known_tip = self._recover(exc, self.archive.tip())
                return read()
            except (MetaCorrupt, MetaBusy) as again:
                raise IndexUnavailable(str(again)) from None
        except MetaBusy as exc:
            raise IndexUnavailable(str(exc)) from None

    def _cached(self, key: Any, compute: Callable[[], Any], *, shared: bool = False) -> Any:
        """The answer memoized under ``key`` for the archive's tip, computed on a miss; the caller's own copy,
        or with ``shared`` the memoized answer itself, for callers that only look at it."""
        def read() -> Any:
            tip = self._sync()
            if self._memo_tip != tip or len(self._memo) > MEMO_ENTRIES:
                self._memo, self._memo_tip = {}, tip
            memo = self._memo
            try:
                return memo[key]
            except KeyError:
                value = memo[key] = compute()
                return value

        value = self._guarded(read)
        return value if shared else _fresh(value)

    def _body(self, blob: str) -> str:
        return parse.body_of(self._blob(blob))

    def inbox(self, agent: str, *, since_ts: str | None = None, urgent_only: bool = False, unread_only: bool = False,
              topic: str | None = None, unacked_only: bool = False, older_than: str | None = None, limit: int = 20,
              include_bodies: bool = False) -> list[dict[str, Any]]:
        """An agent's inbox page, newest first, in the mail domain's shape (see :func:`reads.inbox`)."""
        since = reads.normalize_ts(since_ts, "since_ts")
        older = reads.normalize_ts(older_than, "older_than")
        reads.check_limit(limit)
        key = ("inbox", agent, since, bool(urgent_only), bool(unread_only), (topic or "").lower(), bool(unacked_only),
               older, limit, bool(include_bodies))
        return self._cached(key, lambda: reads.inbox(self.meta, agent, since_ts=since, urgent_only=urgent_only,
                                                     unread_only=unread_only, topic=topic, unacked_only=unacked_only,
                                                     older_than=older, limit=limit,
                                                     body_of=self._body if include_bodies else None))

    def unacked(self, *, older_than: str, after: tuple[str, str, str] | None = None,
                limit: int = 500) -> list[dict[str, Any]]:
        """Acknowledgements owed on messages older than ``older_than``, by anyone (see :func:`reads.unacked`)."""
        older = reads.normalize_ts(older_than, "older_than")
        assert older is not None
        return self._cached(("unacked", older, after, limit),
                            lambda: reads.unacked(self.meta, older_than=older, after=after, limit=limit))

    def thread(self, thread_id: str, *, limit: int = reads.MAX_LIMIT, include_bodies: bool = True,
               after: str | None = None) -> list[dict[str, Any]]:
        """The messages of one thread, oldest first, in the mail domain's shape; with ``after`` (the ID of one
        of them), only those that come after it."""
        reads.check_limit(limit)

        def read() -> list[dict[str, Any]]:
            start = None
            if after is not None:
                found = reads.place(self.meta, after)
                if found is None or thread_id not in (found[1], found[2]):
                    raise invalid(f"after={after!r} is not a message of thread {thread_id!r}: pass the next_after "
                                  "of the previous page", field="after")
                start = (found[0], found[1])
            return reads.thread(self.meta, thread_id, limit=limit, after=start,
                                body_of=self._body if include_bodies else None)

        return self._cached(("thread", thread_id, limit, bool(include_bodies), after), read)

    def bodies(self, rows: Sequence[Mapping[str, Any]]) -> list[str]:
        """The Markdown body of each message row of this index's reads, from the blob the row names.

        A row and its blob were read at one tip, so a page's bodies match its
        heads without finding each file in the tree again. Bodies are never
        kept; a blob no longer here (an archive that joined with a window never
        fetched it) reads as an empty body.
        """
        read, out = self.archive.repo.odb.read, []  # the object database: no object wrapper per blob
        for row in rows:
            try:
                kind, data = read(row["blob"])
            except KeyError:
                kind, data = None, b""
            out.append(parse.body_of(data) if kind == pygit2.GIT_OBJECT_BLOB else "")
        return out

    def body(self, message_id: str) -> str | None:
        """The Markdown body of one message, read from its blob each time (never kept), or None if there is none."""
        def read() -> str | None:  # the page's heads were read after catching up: no need to again
            found = reads.place(self.meta, message_id)
            return None if found is None else self._body(found[3])

        return self._guarded(read)

    def recent_threads(self, *, limit: int = 50, offset: int = 0) -> list[dict[str, Any]]:
        """Threads by their latest message, newest first (see :func:`reads.recent_threads`)."""
        reads.check_limit(limit)
        return self._cached(("threads", limit, offset), lambda: reads.recent_threads(self.meta, limit=limit,
                                                                                     offset=offset))

    def stats(self) -> dict[str, Any]:
        """Message and thread counts and the latest message time."""
        return self._cached(("stats",), lambda: reads.stats(self.meta))

    def agent_counts(self, agent: str) -> dict[str, int]:
        """An agent's received, unread, unacknowledged and sent counts."""
        return self._cached(("counts", agent), lambda: reads.agent_counts(self.meta, agent))

    def urgent_unread(self, *, limit: int = 50) -> list[dict[str, Any]]:
        """Urgent messages not yet read, per recipient, newest first (see :func:`oversight.urgent_unread`)."""
        reads.check_limit(limit)
        return self._cached(("urgent-unread", limit), lambda: oversight.urgent_unread(self.meta, limit=limit))

    def listing(self, where: oversight.Filter, *, limit: int) -> list[dict[str, Any]]:
        """Messages passing ``where``, newest first (see :func:`oversight.listing`)."""
        reads.check_limit(limit)
        return self._cached(("listing", where, limit), lambda: oversight.listing(self.meta, where, limit=limit))

    def ack_states(self, message_ids: list[str]) -> dict[str, str]:
        """``owed`` or ``done`` for each message that asks for acknowledgements (see :func:`oversight.ack_states`)."""
        ids = tuple(message_ids)
        return self._cached(("ack-states", ids), lambda: oversight.ack_states(self.meta, list(ids)))

    def receipts(self, message_ids: list[str]) -> dict[str, dict[str, Any]]:
        """Who got each message and when they read and acknowledged it (see :func:`oversight.receipts`)."""
        ids = tuple(message_ids)
        return self._cached(("receipts", ids), lambda: oversight.receipts(self.meta, list(ids)))

    def outbox(self, agent: str, *, since_ts: str | None = None, limit: int = 20,
               include_bodies: bool = False) -> list[dict[str, Any]]:
        """What ``agent`` sent, newest first, with bcc (see :func:`reads.outbox`)."""
        since = reads.normalize_ts(since_ts, "since_ts")
        reads.check_limit(limit)
        return self._cached(("outbox", agent, since, limit, bool(include_bodies)),
                            lambda: reads.outbox(self.meta, agent, since_ts=since, limit=limit,
                                                 body_of=self._body if include_bodies else None))

    def topic(self, topic: str, *, viewer: str | None = None, since_ts: str | None = None, unread_only: bool = False,
              limit: int = 50, include_bodies: bool = True) -> list[dict[str, Any]]:
        """Messages with a topic, newest first (see :func:`reads.topic`)."""
        since = reads.normalize_ts(since_ts, "since_ts")
        reads.check_limit(limit)
        key = ("topic", topic.lower(), viewer if unread_only else None, since, bool(unread_only), limit,
               bool(include_bodies))
        return self._cached(key, lambda: reads.topic(self.meta, topic, viewer=viewer, since_ts=since,
                                                     unread_only=unread_only, limit=limit,
                                                     body_of=self._body if include_bodies else None))

    def referencing(self, sha256: str, *, limit: int = 50) -> tuple[list[dict[str, Any]], bool]:
        """Messages carrying the file with this hash, newest first, and whether more do (:func:`reads.referencing`)."""
        return self._cached(("referencing", sha256, limit), lambda: reads.referencing(self.meta, sha256, limit))

    def message(self, message_id: str, *, viewer: str | None = None) -> dict[str, Any] | None:
        """One message with its body (``bcc`` too for its sender as ``viewer``), or None if the tip has none."""
        return self._cached(("message", message_id, viewer),
                            lambda: reads.message(self.meta, message_id, self._body, viewer))

    def imported(self, imported_id: str) -> list[str]:
        """The IDs of the messages that had ``imported_id`` in the store they were imported from."""
        return self._cached(("imported", imported_id), lambda: reads.imported(self.meta, imported_id))

    def message_ids_below(self, below: str, *, commit: str | None) -> list[str]:
        """IDs of the messages at ``commit`` that sort before ``below`` (older ones: IDs sort by time), oldest first.

        Moves the metadata store to ``commit`` first (a transaction asks at
        exactly the snapshot it commits onto); if the store already reflects
        a later commit, it answers for that one.
        """
        if commit is None:
            return []
        self._sync(commit)
        return [row[0] for row in self.meta.read("SELECT id FROM messages WHERE id < ? ORDER BY id", (below,))]

    def window(self, start_ts: str, end_ts: str, *, limit: int, include_bodies: bool = True) -> list[dict[str, Any]]:
        """Up to ``limit`` messages created in (start_ts, end_ts], newest first (see :func:`reads.window`)."""
        start, end = reads.normalize_ts(start_ts, "start_ts"), reads.normalize_ts(end_ts, "end_ts")
        if start is None or end is None:
            raise invalid("a window needs both ends", field="start_ts" if start is None else "end_ts")
        return self._cached(("window", start, end, limit, bool(include_bodies)),
                            lambda: reads.window(self.meta, start, end, limit,
                                                 self._body if include_bodies else None))

    def agents(self) -> list[Agent]:
        """Every agent's profile, by name (the agent directory); token hashes are not kept here."""
        return self._cached(("agents",), lambda: [agent for fields in reads.agents(self.meta)
                                                  if (agent := parse.record_from_fields(Agent, fields)) is not None])

    def reservations(self) -> list[Reservation]:
        """Every reservation record, released and expired ones included (the audit trail), oldest first."""
        return self._cached(("reservations",), lambda: [
            entry[1].record for fields in reads.reservations(self.meta) if (entry := record_entry(fields)) is not None])

    def active_reservations(self, snapshot: Snapshot, at: dt.datetime, *, held_by: str | None = None,
                            blocking: str | None = None, compared: Comparisons | None = None,
                            parsed: Parsed | None = None) -> list[Reservation]:
        """The reservations in force at ``at`` in exactly what ``snapshot`` sees (its queued edits included).

        ``held_by``: only that agent's. ``blocking``: only the exclusive ones
        of every other agent (what that agent's new reservations must not
        overlap). Served from :class:`.reservations.ActiveReservations`, which
        moves from commit to commit by the diff of the reservations subtree
        and keeps each holder's reservations (and the exclusive ones) apart,
        so a transaction asks at a cost that grows with neither the history
        nor the reservations of others.
        ``compared``, ``parsed``: what the caller compared and parsed already (see :meth:`catch_up`).
        """
        if not self.open_reservations.loaded:
            # Once per process: start from a current watermark, however long nobody followed.
            self._sync(compared=compared, parsed=parsed)
        moment = at.timestamp()
        held = self.open_reservations.at(snapshot, moment)
        entries = (held.held_by(held_by) if held_by is not None
                   else held.blocking(blocking) if blocking is not None else held.entries())
        return [e.record for e in entries if e.active_at(moment)]

    # -- cursors --------------------------------------------------------------
    def messages_after(self, agent: str, after_seq: int = 0, limit: int = 100, *,
                       include_sent: bool = False, shared: bool = False) -> list[dict[str, Any]]:
        """Messages that reached ``agent`` after the cursor ``after_seq``, oldest seen first.

        Each entry carries ``seq``; pass the last one back as the next cursor.
        The rows are the caller's to change, or with ``shared`` the ones every
        reader of this tip is handed, which must not be changed: a page read
        only looks at them, and copying 200 rows was a good part of its time.
        Each row names its file's ``blob`` (:meth:`bodies` reads them).
        """
        reads.check_limit(limit)
        if not isinstance(after_seq, int) or isinstance(after_seq, bool) or after_seq < 0:
            raise invalid(f"after_seq must be a non-negative whole number; got {after_seq!r}", field="after_seq")
        return self._cached(("after", agent, after_seq, limit, include_sent),
                            lambda: reads.messages_after(self.meta, agent, after_seq, limit, include_sent),
                            shared=shared)

    def newest_arrivals(self, agent: str, count: int = 8) -> tuple[list[dict[str, Any]], bool]:
        """The last ``count`` arrivals in ``agent``'s inbox by sequence, oldest first, and whether older exist.

        Each row names its file's ``blob``, as :meth:`messages_after`'s do.
        """
        reads.check_limit(count, "count")
        return self._cached(("newest", agent, count), lambda: reads.newest_arrivals(self.meta, agent, count))

    # -- channels ---------------------------------------------------------------
    def channels(self) -> list[dict[str, Any]]:
        """Every channel's definition (its fields as in the file) and ``posts``, its post count, by name."""
        return self._cached(("channels",), lambda: reads.channels(self.meta))

    def channel_posts(self, channel: str, after: int, limit: int) -> tuple[list[dict[str, Any]], int]:
        """Posts numbered after ``after`` (``seq``, ``id``, ``from``, ``created_ts``), and the newest number.

        Both come from one commit's state, so the number never runs ahead of
        the posts a reader was shown.
        """
        reads.check_limit(limit)
        return self._cached(("posts", channel, after, limit), lambda: (
            reads.channel_posts(self.meta, channel, after, limit), reads.channel_high(self.meta, channel)))

    def newest_posts(self, channel: str, count: int) -> tuple[list[dict[str, Any]], bool, int]:
        """The last ``count`` posts (oldest first), whether older exist, and the newest number."""
        reads.check_limit(count, "count")

        def read() -> tuple[list[dict[str, Any]], bool, int]:
            rows, older = reads.newest_posts(self.meta, channel, count)
            return rows, older, reads.channel_high(self.meta, channel)

        return self._cached(("newest posts", channel, count), read)

    def post_number(self, channel: str, post_id: str) -> int:
        """A post's number in its channel as of the tip (0: no such post)."""
        return self._cached(("post number", channel, post_id), lambda: reads.post_number(self.meta, channel, post_id))

    def high_watermark(self) -> int:
        """The highest sequence number handed out in this project so far."""
        def read() -> int:
            self._sync()
            return self.meta.high_watermark()

        return self._guarded(read)

    # -- search ---------------------------------------------------------------
    def search(self, query: str, limit: int = 20, agent: str | None = None, *,
               exhaustive: bool = False) -> list[dict[str, Any]]:
        """Messages matching ``query``, best first; scoped to ``agent`` if given.

        Ranks the newest matches only (each hit's ``bounded`` says whether
        older ones were left out) unless ``exhaustive``: see
        :meth:`.search.SearchIndex.search`.
        """
        from .query import parse_query
        from .search import OVERLAY_MAX

        parsed = parse_query(query)
        reads.check_limit(limit)

        def read() -> list[dict[str, Any]]:
            self._sync()
            self._ensure_search()
            if self.meta.get_state("search_rebuild") == "1":
                self.worker.poke()  # rebuilt in the background; answer from the old generation meanwhile
            elif self.meta.pending_count() > OVERLAY_MAX and self.search_index.drain(wait=False):
                self.merger.poke()  # more is queued than a search merges in from memory (never waits for a writer)
            if agent is not None and not reads.known_agent(self.meta, agent):
                raise not_found(f"no agent named {agent!r} in this project; register it first or check the "
                                "spelling", agent=agent)
            return self.search_index.search(parsed, limit, agent, exhaustive=exhaustive)

        return self._guarded(read)

    def close(self) -> None:
        self.worker.stop()
        self.drainer.stop()
        self.merger.stop()
        if self._search_index is not None:
            self._search_index.close()


def _remove_other_versions(derived_dir: str) -> None:
    """Old index formats are never read; delete them."""
    if not os.path.isdir(derived_dir):
        return
    for name in os.listdir(derived_dir):
        if name.startswith("index-v") and name != VERSION_DIR:
            shutil.rmtree(os.path.join(derived_dir, name), ignore_errors=True)
