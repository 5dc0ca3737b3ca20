"""The Whoosh search index of one project: generations, one writer, open searchers.

Layout under the project's derived folder::

    search/current -> gen-<stamp>     symlink naming the live generation
    search/gen-<stamp>/whoosh/        the Whoosh index (non-compound segments)
    search/gen-<stamp>/readers.lock   shared-locked by every process reading it
    search/gen-<stamp>/info.json      format and the watermark it reflects

A rebuild writes a new generation beside the live one and swaps the symlink
atomically; searches keep using the old generation meanwhile, and it is
deleted only once no process holds its ``readers.lock``.

One writer per index (``search/writer.lock``, across processes): a search
takes the writer lock only if it is free, so it never stands behind a commit;
if another thread or process is writing, the search answers from the searcher
it has. Searchers are opened fresh after
each commit rather than refreshed (whoosh-reloaded's ``refresh`` can keep
segments a merge already absorbed, giving duplicate hits).
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import random
import re
import shutil
import threading
import time
import uuid
from bisect import bisect_left
from collections.abc import Callable
from typing import Any

import whoosh.util
from whoosh import index as windex
from whoosh import query as wq
from whoosh.codec.whoosh3 import LENGTHS_COLUMN, W3LeafMatcher, W3PerDocReader, _lenfield
from whoosh.filedb.filestore import RamStorage
from whoosh.matching import ReadTooFar
from whoosh.query.spans import Span, SpanNear2
from whoosh.util.numeric import byte_to_length
from whoosh.writing import LockError

from gitmail.storage.maintenance import rollup_count

from . import bulk, candidates, merge, parse
from .meta import FORMAT, IndexUnavailable, Meta
from .postings import Codec
from .schema import SCHEMA, WORDS_FORMAT

_log = logging.getLogger("gitmail.index")

# A generation's format: derived state's, and its text analysis's. A live
# generation of another (words cut by an older analyzer) is rebuilt beside it
# at the first search, as a damaged one is; the metadata store is kept.
GENERATION_FORMAT = f"{FORMAT}.{WORDS_FORMAT}"

# Whoosh names every new segment file with the process's shared random
# generator. Whoever seeds that generator (an application, a test framework
# that reseeds it for each case) makes a later segment reuse an earlier name,
# and the writer then truncates a live segment's files under its readers.
# Whoosh's own draws come from a generator of its own instead.
whoosh.util.random = random.Random()


def _lengths_column(self: Any, fieldname: str, column: Any) -> Any:
    """A segment's reader of one field's length column, or None if the field has none; both remembered.

    Whoosh asks a segment for a field's length once per posting when it
    writes or merges a segment, and remembers only the columns it found: for
    every posting of a field kept without lengths (IDs, keywords, dates) it
    looked for the file again, one ``stat`` each, 150,000 of them in a
    10,000-message build. A segment's files never change once written.
    """
    try:
        return self._readers[fieldname]
    except KeyError:
        reader = self.column_reader(fieldname, column) if self.has_column(fieldname) else None
        self._readers[fieldname] = reader
        return reader


_BYTE_LENGTHS = [byte_to_length(code) for code in range(256)]


def _doc_field_length(self: Any, docnum: int, fieldname: str, default: Any = 0) -> Any:
    """A document's length in a field, from the segment's length column read into memory once.

    Scoring a match asks for it once per matched word; Whoosh read one byte
    from the file each time, a third of the cost of scoring a common word.
    The answers are Whoosh's, including None for a document without that field.
    """
    if docnum > self._doccount:
        raise IndexError(f"Asked for docnum {docnum} of {self._doccount}")
    tables = self.__dict__.setdefault("_length_tables", {})
    table = tables.get(fieldname, _ABSENT)
    if table is _ABSENT:
        reader = self._cached_reader(_lenfield(fieldname), LENGTHS_COLUMN)
        table = tables[fieldname] = None if reader is None else reader._dbfile.get(reader._basepos, reader._count)
    if table is None:
        return default
    code = table[docnum] if docnum < len(table) else 0
    return _BYTE_LENGTHS[code] if code else None


def _skip_to(self: Any, target: Any) -> None:
    """Move a posting list to its first document at or after ``target``, finding it in the block by bisection.

    Whoosh skips whole blocks by their last document, then stepped through
    the block one posting at a time through two method calls each: in an
    intersection of a rare word with a common one (``from:X plan``, a
    phrase) most of the search was spent stepping through the common
    word's postings.
    """
    if not self.is_active():
        raise ReadTooFar
    if target <= self.id():
        return
    if target > self.block_max_id():
        self._skip_to_block(lambda: target > self.block_max_id())
    if self.is_active():
        if self._ids is None:
            self._read_ids()
        self._i = bisect_left(self._ids, target, self._i)  # within the block: its last document is >= target


_whoosh_phrase_spans = SpanNear2.SpanNear2Matcher._get_spans


def _phrase_spans(self: Any) -> list[Span]:
    """The places in the current document where the words follow each other, as Whoosh's phrase matcher finds them.

    For a phrase (next to each other, in order) Whoosh turned every position
    of every word into a span object and compared them pairwise; this looks
    each next word's position up in a set. Same spans, same order; other
    span queries, and fields with character offsets, take Whoosh's way.
    """
    matchers = self.ms
    if (self.slop != 1 or not self.ordered or self.mindist != 1
            or not all(m.supports("positions") and not m.supports("characters") for m in matchers)):
        return list(_whoosh_phrase_spans(self))
    starts = matchers[0].value_as("positions")
    for offset, matcher in enumerate(matchers[1:], 1):
        if not starts:
            return []
        present = set(matcher.value_as("positions"))
        starts = [start for start in starts if start + offset in present]
    last = len(matchers) - 1
    return [Span(start, start + last) for start in sorted(set(starts))]


_ABSENT = object()
SpanNear2.SpanNear2Matcher._get_spans = _phrase_spans
W3PerDocReader._cached_reader = _lengths_column
W3PerDocReader.doc_field_length = _doc_field_length
W3LeafMatcher.skip_to = _skip_to

BATCH = 2000  # documents per incremental commit
BULK_AT = 500  # queued messages from which a commit writes them with the bulk builder
MERGE_AT = 8  # segments before an incremental commit also merges the smallest (see _merge_geometric)
SNIPPET_CHARS = 160
WRITER_MB = 32  # MB of postings a drain buffers before sorting runs to disk (Whoosh: 128; merges buffer none)
OVERLAY_MAX = 200  # queued messages a search merges in from memory while the writer is busy
NEWEST_RANKED = 1000  # a search ranks the newest this many matches unless asked for every match
FIRST_WINDOW = 2048  # documents the newest-first scan looks at first; each further window is WIDEN times wider
WIDEN = 4
PREFILTER = True  # intersections visit only the documents every part's posting list holds (see _window)

BlobReader = Callable[[str], bytes]
Progress = Callable[[int, int], None]


class IndexBroken(Exception):
    """The live generation cannot be read; it must be rebuilt."""


def highlight_pattern(query: wq.Query) -> re.Pattern[str] | None:
    """A regex for the words and prefixes a query looks for in the text (not those it excludes)."""
    words: set[str] = set()
    prefixes: set[str] = set()

    def visit(q: wq.Query) -> None:
        if isinstance(q, wq.Not):
            return
        if isinstance(q, (wq.Prefix, wq.Phrase, wq.Term)):
            if q.fieldname == "text":
                if isinstance(q, wq.Prefix):
                    prefixes.add(q.text)
                else:
                    words.update(q.words if isinstance(q, wq.Phrase) else [q.text])
            return
        for child in q.children():
            visit(child)

    visit(query)
    if not words and not prefixes:
        return None
    alternatives = [re.escape(w) for w in sorted(words, key=len, reverse=True)]
    alternatives += [re.escape(p) + r"[^\W_]*" for p in sorted(prefixes)]
    # Bounded as the analyzer cuts words: by anything but a letter or digit (``**deploy**``, ``_word_``).
    return re.compile(r"(?<![^\W_])(?:" + "|".join(alternatives) + r")(?![^\W_])", re.IGNORECASE)


def snippet(body: str, pattern: re.Pattern[str] | None) -> str:
    """About SNIPPET_CHARS of ``body`` around its first matched word, matches in **bold**."""
    first = pattern.search(body) if pattern is not None else None
    if pattern is None or first is None:
        flat = " ".join(body.split())
        return flat[:SNIPPET_CHARS] + ("…" if len(flat) > SNIPPET_CHARS else "")
    start = max(0, first.start() - SNIPPET_CHARS // 3)
    if start:
        space = body.find(" ", start, first.start())
        start = space + 1 if space >= 0 else start
    end = min(len(body), start + SNIPPET_CHARS)
    if end < len(body):
        space = body.rfind(" ", first.end(), end)
        end = space if space > 0 else end
    marked = pattern.sub(lambda m: f"**{m.group(0)}**", body[start:end])
    return ("…" if start else "") + " ".join(marked.split()) + ("…" if end < len(body) else "")


def _merge_geometric(writer: Any, segments: list[Any]) -> list[Any]:
    """A Whoosh merge policy: fold the smallest segments into a new one until the sizes at least double.

    Folding every segment but the largest rewrote, at each merge, everything
    since the last full merge: up to a quarter of the index every few
    seconds under a steady stream of sends, so the helper's cost per message
    grew with the index. Kept geometric, a segment's documents are rewritten
    about log2(n) times over its life and the segments number about log2(n).
    The merged segment is written by joining posting lists
    (:func:`.merge.merged_segment`), not by Whoosh's sort of every posting;
    a writer's own new documents follow it in a segment of their own.
    """
    ordered = sorted(segments, key=lambda seg: seg.doc_count_all())
    count = rollup_count([seg.doc_count_all() for seg in ordered])
    if not count:
        return segments
    # Documents are numbered in the order of the segment list, which newest-first ranking takes for the order of
    # arrival: the segments kept stay in their places, and the merged ones (the newest, as sizes double) go last.
    folded = {id(seg) for seg in ordered[:count]}
    kept = [seg for seg in segments if id(seg) not in folded]
    return kept + [merge.merged_segment(writer, [seg for seg in segments if id(seg) in folded])]


def newest_matches(searcher: Any, query: wq.Query, newest: int) -> tuple[list[tuple[float, int]], bool]:
    """Score the newest ``newest`` documents matching ``query``: ``[(score, docnum)]`` and whether that was bounded.

    Documents are numbered in the order this index took them in, so the
    highest numbers are the newest messages. The scan looks at windows of
    document numbers from the top down and stops once it holds ``newest``
    matches: the cost follows the matches ranked, not how many documents
    match in the whole index. The first window is sized from Whoosh's
    estimate of the matches (for an intersection, its rarest part: too
    many, so the window is too narrow rather than too wide), each further
    one from the share of documents that matched so far (at most WIDEN
    times the one before), so the scan scores few matches beyond the ones
    it keeps.
    Bounded is True when older documents were not looked at or matches
    beyond ``newest`` were left out (older matches may then exist).
    """
    context = searcher.context()
    total = searcher.doc_count_all()
    leaves = searcher.leaf_searchers()
    estimate = max(1, query.estimate_size(searcher.reader()))
    width = max(FIRST_WINDOW, newest * total // estimate * 5 // 4)
    found: list[tuple[int, float]] = []
    high = total
    low = total
    while high > 0 and len(found) < newest:
        low = max(0, high - width)
        found.extend(_window(query, context, leaves, low, high))  # newest first across windows
        scanned = total - low
        wanted = (newest - len(found)) * scanned / len(found) * 1.25 if found else width * WIDEN
        high, width = low, max(FIRST_WINDOW, min(width * WIDEN, int(wanted)))
    bounded = low > 0 or len(found) > newest
    return [(score, docnum) for docnum, score in found[:newest]], bounded


def _window(query: wq.Query, context: Any, leaves: list[tuple[Any, int]], low: int,
            high: int) -> list[tuple[int, float]]:
    """Every document numbered in [low, high) that matches, with its score, newest first.

    An intersection of parts that posting lists can answer visits only the
    documents every part holds (:mod:`.candidates`), not each step of a
    leapfrog between them.
    """
    window: list[tuple[int, float]] = []
    narrow = PREFILTER and candidates.intersects(query)
    for leaf, offset in leaves:
        size = leaf.doc_count_all()
        if offset + size <= low or offset >= high:
            continue
        matcher = query.matcher(leaf, context)
        start, stop = max(0, low - offset), high - offset
        visit = candidates.candidates(query, leaf.reader(), start, stop) if narrow else None
        if visit is not None:
            window += _visit(matcher, visit, offset)
            continue
        if start > 0 and matcher.is_active():
            matcher.skip_to(start)
        while matcher.is_active():
            docnum = matcher.id()
            if docnum >= stop:
                break
            window.append((docnum + offset, matcher.score()))
            matcher.next()
    window.sort(reverse=True)
    return window


def _visit(matcher: Any, docnums: list[int], offset: int) -> list[tuple[int, float]]:
    """The documents of ``docnums`` (ascending) that ``matcher`` matches, with their scores."""
    out: list[tuple[int, float]] = []
    for docnum in docnums:
        if not matcher.is_active():
            break
        if matcher.id() < docnum:
            matcher.skip_to(docnum)
            if not matcher.is_active():
                break
        if matcher.id() == docnum:
            out.append((docnum + offset, matcher.score()))
    return out


def _open_columns(searcher: Any) -> None:
    """Open every per-document file of every segment now, not on a search's first use.

    Whoosh opens a segment's stored fields, field lengths and sortable
    columns lazily, and a writer's merge deletes the files of the segments
    it absorbs. A searcher opened before a merge keeps what it has open
    (deleted files stay readable), but one that reached a segment's stored
    fields only afterwards found the file gone and failed (``'NoneType'
    object is not subscriptable``), which passed for a damaged index and
    started a full rebuild, again at every merge under a steady stream of
    messages.
    """
    for leaf, _ in searcher.leaf_searchers():
        reader = leaf.reader()
        if reader.doc_count_all() == 0:
            continue
        reader.stored_fields(0)
        for name, field in reader.schema.items():
            if field.scorable:
                reader.doc_field_length(0, name)
            if field.column_type is not None and reader.has_column(name):
                reader.column_reader(name)


def _toc_generation(gen_dir: str | None) -> int | None:
    """The number of the segment list Whoosh holds in ``gen_dir`` now (it grows with every commit and merge)."""
    try:
        return int(windex.open_dir(os.path.join(gen_dir, "whoosh")).latest_generation()) if gen_dir else None
    except Exception:  # noqa: BLE001 - no readable list: nothing to compare
        return None


class _Reader:
    """An open searcher on one generation, shared by searches until replaced."""

    def __init__(self, gen_dir: str):
        self.gen_dir = gen_dir
        self.lock_fd = _share(gen_dir)
        searcher = None
        try:
            self.ix = windex.open_dir(os.path.join(gen_dir, "whoosh"))
            self.searcher = searcher = self.ix.searcher()
            _open_columns(searcher)
        except BaseException:
            if searcher is not None:
                searcher.close()  # the files it did open
            os.close(self.lock_fd)
            raise
        self.refs = 0
        self.use = threading.Lock()  # one search at a time per searcher
        self.closed = False

    def current(self, live: str | None) -> bool:
        return live == self.gen_dir and self.searcher.up_to_date()

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        try:
            self.searcher.close()
        finally:
            os.close(self.lock_fd)


class _WriterLock:
    """The one writer of a project's search index, across threads and processes.

    A thread lock for this process plus an ``flock`` on ``search/writer.lock``
    for the others (released by the OS if a process dies). Held for every
    write: incremental commits, merges and rebuilds, so a rebuild never misses
    what another process took off the queue meanwhile.
    """

    def __init__(self, path: str):
        self.path = path
        self._thread = threading.Lock()
        self._fd = -1

    def acquire(self, blocking: bool) -> bool:
        if not self._thread.acquire(blocking=blocking):
            return False
        try:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)  # derived state may have been deleted
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            fcntl.flock(self._fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
            return True
        except OSError:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1
            self._thread.release()
            if blocking:
                raise
            return False

    def release(self) -> None:
        os.close(self._fd)  # closing drops the flock
        self._fd = -1
        self._thread.release()

    def __enter__(self) -> _WriterLock:
        self.acquire(blocking=True)
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _share(gen_dir: str) -> int:
    fd = os.open(os.path.join(gen_dir, "readers.lock"), os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_SH)
    return fd


class _Overlay:
    """An in-memory index of the messages queued for the search writer.

    Kept between searches and extended with what was queued since, so a
    search during a burst of commits indexes only the newest arrivals; it
    starts afresh once the writer has taken queued messages in.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: set[tuple[int, str]] = set()
        self._ram: windex.Index | None = None

    def search(self, queued: list[tuple[int, str]], make_doc: Callable[[str], dict[str, Any] | None],
               run: Callable[[Any], list[dict[str, Any]]]) -> list[dict[str, Any]]:
        """``run(searcher)`` over the queued messages ``queued`` ((stamp, id) pairs)."""
        wanted = set(queued)
        with self._lock:
            if self._ram is None or not self._items <= wanted:
                # Whoosh writes a RAM index's temporary files to <tmp>/<indexname>.tmp and
                # empties that folder when done: a name of its own keeps two overlays (in
                # two projects, or two processes) from deleting each other's files.
                name = f"gitmail-overlay-{os.getpid()}-{uuid.uuid4().hex}"
                self._ram, self._items = RamStorage().create_index(SCHEMA, indexname=name), set()
            new = sorted(wanted - self._items)
            if new:
                writer = self._ram.writer()
                for _, mid in new:
                    doc = make_doc(mid)
                    if doc is None:
                        writer.delete_by_term("id", mid)
                    else:
                        writer.update_document(**doc)
                writer.commit()
                self._items |= set(new)
            with self._ram.searcher() as searcher:
                return run(searcher)


class SearchIndex:
    """The search side of one project's derived state."""

    def __init__(self, root: str, meta: Meta, read_blob: BlobReader, *, git_dir: str | None = None):
        """``git_dir`` (the archive's) lets a rebuild read messages in worker processes; without it, in this one."""
        self.root = root
        self.meta = meta
        self.read_blob = read_blob
        self.git_dir = git_dir
        self.building: tuple[int, int] | None = None  # (documents written, of) while a rebuild runs here
        os.makedirs(root, exist_ok=True)
        self._mu = threading.Lock()  # guards _reader
        self._reader: _Reader | None = None
        self._searched = False  # whether a search used the shared searcher since the last refresh
        self._write = _WriterLock(os.path.join(root, "writer.lock"))
        self.commits = 0  # incremental commits by this process (for tests and benchmarks)
        self.merges = 0  # segment merges by this process (likewise)
        self._overlay = _Overlay()

    # -- generations ----------------------------------------------------------
    @property
    def _link(self) -> str:
        return os.path.join(self.root, "current")

    def live_dir(self) -> str | None:
        try:
            return os.path.join(self.root, os.readlink(self._link))
        except OSError:
            return None

    def _check(self, gen_dir: str | None) -> None:
        """Raise IndexBroken unless ``gen_dir`` is a readable index of our format."""
        if gen_dir is None or not os.path.isdir(gen_dir):
            raise IndexBroken("no live generation")
        damage = None
        try:
            with open(os.path.join(gen_dir, "info.json"), encoding="utf-8") as handle:
                info = json.load(handle)
            if info.get("format") != GENERATION_FORMAT:
                raise IndexBroken(f"format {info.get('format')} is not {GENERATION_FORMAT}")
            ix = windex.open_dir(os.path.join(gen_dir, "whoosh"))
            with ix.searcher() as searcher:
                count = searcher.doc_count()
                # Touch the first and last document and one posting list; damage that
                # shows only later makes that search rebuild the index (see search()).
                reader = searcher.reader()
                if reader.doc_count_all():
                    reader.stored_fields(0)
                    reader.stored_fields(reader.doc_count_all() - 1)
                searcher.search(wq.Term("importance", "normal"), limit=1)
        except IndexBroken:
            raise
        except Exception as exc:  # noqa: BLE001 - whatever Whoosh raises on damaged files
            damage = f"{type(exc).__name__}: {exc}"
        if damage is not None:
            # Raised here, not in the handler, to keep no hold on Whoosh's frames and the files they left open.
            raise IndexBroken(damage)
        if not self.meta.has_pending() and count != self.meta.message_count():
            raise IndexBroken(f"holds {count} messages, the metadata {self.meta.message_count()}")

    def ensure(self, progress: Progress | None = None) -> bool:
        """Make sure a sound live generation exists; rebuild it if not (True then)."""
        try:
            self._check(self.live_dir())
            return False
        except IndexBroken as exc:
            if self.live_dir() is not None:
                _log.warning("search index %s needs a rebuild: %s", self.root, exc)
            self.rebuild(progress)
            return True

    def _new_generation(self) -> tuple[str, int]:
        """A new, empty generation folder, already share-locked so no collector deletes it."""
        name = f"gen-{time.time_ns():020d}-{os.getpid()}"
        building = os.path.join(self.root, "." + name)
        os.makedirs(os.path.join(building, "whoosh"))
        fd = _share(building)
        gen_dir = os.path.join(self.root, name)
        os.rename(building, gen_dir)  # the lock belongs to the file, which moves along
        return gen_dir, fd

    def _swap(self, gen_dir: str) -> None:
        tmp = f"{self._link}.{os.getpid()}.{threading.get_ident()}"
        os.symlink(os.path.basename(gen_dir), tmp)
        os.replace(tmp, self._link)

    def collect(self) -> None:
        """Delete generations that are not live and that no process reads."""
        live = self.live_dir()
        for name in os.listdir(self.root):
            path = os.path.join(self.root, name)
            if not name.startswith("gen-") or path == live:
                continue
            try:
                fd = os.open(os.path.join(path, "readers.lock"), os.O_RDWR | os.O_CREAT, 0o644)
            except OSError:
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                continue  # someone still reads (or builds) it
            try:
                shutil.rmtree(path, ignore_errors=True)
            finally:
                os.close(fd)

    # -- writing --------------------------------------------------------------
    def rebuild(self, progress: Progress | None = None) -> int:
        """Build a new generation from the metadata store and swap it in.

        The segments are written by :func:`.bulk.build` (in worker processes
        for a large archive) and listed in one commit; searches answer from
        the old generation meanwhile.
        """
        with self._write:
            gen_dir, lock_fd = self._new_generation()
            try:
                ix = windex.create_in(os.path.join(gen_dir, "whoosh"), SCHEMA)
                watermark, covered, total = self.meta.rebuild_point()
                self.building = (0, total)
                segments = bulk.build(ix, meta=self.meta, git_dir=self.git_dir, read_blob=self.read_blob,
                                      total=total, progress=self._built(progress),
                                      workers=None if self.git_dir else 1)
                writer = ix.writer(compound=False, limitmb=WRITER_MB, codec=Codec())
                try:
                    writer.commit(mergetype=lambda _writer, existing: existing + segments)
                except BaseException:
                    writer.cancel()
                    raise
                # What was queued before the snapshot is in the new generation already.
                self.meta.done_up_to(covered)
                self._apply_pending(ix)
                with ix.searcher() as searcher:
                    done = searcher.doc_count()
                self._write_info(gen_dir, watermark)
                self._swap(gen_dir)
                if progress:
                    progress(done, done)
            finally:
                self.building = None
                os.close(lock_fd)
        self.refresh()
        self.collect()
        return done

    def _built(self, progress: Progress | None) -> Progress:
        """A progress callback that also keeps :attr:`building` current."""
        def report(done: int, total: int) -> None:
            self.building = (done, total)
            if progress:
                progress(done, total)

        return report

    def _write_info(self, gen_dir: str, watermark: str | None) -> None:
        tmp = os.path.join(gen_dir, "info.json.tmp")
        with open(tmp, "w", encoding="utf-8") as handle:
            json.dump({"format": GENERATION_FORMAT, "watermark": watermark}, handle)
        os.replace(tmp, os.path.join(gen_dir, "info.json"))

    def _document(self, summary: dict[str, Any], blob: str, agents: list[str]) -> dict[str, Any]:
        return bulk.message_document(self.read_blob, summary, blob, agents)

    def _apply_pending(self, ix: windex.Index) -> int:
        """Take queued message changes into ``ix``, in batches; returns how many.

        A batch's messages are read in one pass; a batch of BULK_AT messages
        or more (a sync's arrival) is written as a segment of its own by the
        bulk builder, without merging (the background merge follows), so the
        documents keep their order.
        """
        applied = 0
        while True:
            items = self.meta.pending(BATCH)
            if not items:
                return applied
            sources = self.meta.search_sources([mid for _, mid in items])
            docs = [self._document(*sources[mid]) for _, mid in items if mid in sources]
            writer = ix.writer(compound=False, limitmb=WRITER_MB, codec=Codec())
            try:
                for _, mid in items:
                    writer.delete_by_term("id", mid)  # gone, or replaced below
                fold = len(ix._segments()) >= MERGE_AT  # noqa: SLF001 - Whoosh has no public segment count
                if len(docs) >= BULK_AT:
                    built = bulk.write_segments(ix, docs)
                    writer.commit(mergetype=lambda _writer, existing, built=built: existing + built)
                else:
                    for doc in docs:
                        writer.add_document(**doc)
                    writer.commit(mergetype=_merge_geometric if fold else None, merge=fold)
            except BaseException:
                writer.cancel()
                raise
            self.commits += 1
            self.meta.done(items)
            applied += len(items)

    def drain(self, *, wait: bool = False, refresh: bool = True) -> int | None:
        """Apply the queued changes to the live generation.

        Returns how many were applied, or None if another writer is busy
        (then it will apply them). Rebuilds the index if it is unreadable.
        ``refresh=False`` leaves this process's searcher as it was (for a
        process that only writes).
        """
        if not self._write.acquire(wait):
            return None
        rebuild = False
        try:
            gen_dir = self.live_dir()
            if gen_dir is None or not os.path.isdir(gen_dir):
                rebuild = True
            elif not self.meta.has_pending():
                return 0
            else:
                watermark = self.meta.watermark()
                try:
                    ix = windex.open_dir(os.path.join(gen_dir, "whoosh"))
                    applied = self._apply_pending(ix)
                except LockError:
                    return None  # another process writes this generation
                except Exception as exc:  # noqa: BLE001 - damaged files: rebuild below
                    _log.warning("search index %s failed while writing (%s); rebuilding", gen_dir, str(exc))
                    rebuild = True
                else:
                    self._write_info(gen_dir, watermark)
        finally:
            self._write.release()
        if rebuild:
            return self.rebuild()
        if refresh:
            self.refresh()
        return applied

    def consolidate(self, *, refresh: bool = True) -> bool | None:
        """Merge small segments so a query reads few of them (about log2 of the documents at most).

        Folds the smallest segments into one until their sizes at least
        double from one to the next (see :func:`_merge_geometric`). Meant
        for an idle moment in the background. Returns None if a writer is
        busy (try again later), False if there was nothing to merge.
        """
        if not self._write.acquire(False):
            return None
        try:
            gen_dir = self.live_dir()
            if gen_dir is None:
                return False
            ix = windex.open_dir(os.path.join(gen_dir, "whoosh"))
            sizes = sorted(seg.doc_count_all() for seg in ix._segments())  # noqa: SLF001
            if not rollup_count(sizes):
                return False
            try:
                writer = ix.writer(compound=False, limitmb=WRITER_MB, codec=Codec())
            except LockError:
                return None
            try:
                writer.commit(mergetype=_merge_geometric)
            except BaseException:
                writer.cancel()
                raise
            self.merges += 1
        finally:
            self._write.release()
        if refresh:
            self.refresh()
        return True

    # -- reading --------------------------------------------------------------
    def refresh(self) -> None:
        """After a write: a fresh shared searcher on the live generation, if searches used the last one.

        Searches notice another process's writes by themselves; refreshing
        right after one spares the next search the reopening. A server taking
        in a burst of mail that nobody searches meanwhile would open every
        segment again after each write for nothing (CPU, and descriptors that
        rise and fall with the segments): then the old searcher is only let
        go, and the next search opens one.
        """
        live = self.live_dir()
        if live is None:
            return
        with self._mu:
            wanted, self._searched = self._searched, False
        fresh = self._open_live(live) if wanted else None
        with self._mu:
            old, self._reader = self._reader, fresh
            if old is not None and old.refs == 0:
                old.close()

    def _open_live(self, live: str | None) -> _Reader:
        """A reader on the live generation, even if a swap or a merge moves it while we open it.

        Opening lists the generation's segments, then opens their files; a
        merge committed in between (by the search writer, in another process)
        deletes the files of the segments it absorbed. Opening again reads the
        new list. A generation that fails every time is damaged: the error
        goes up, and the caller rebuilds.
        """
        opened_toc = None
        for _ in range(5):
            if live is None:
                raise IndexBroken("no live generation")
            try:
                return _Reader(live)
            except Exception:  # noqa: BLE001 - gone under us? then the link or the segment list has moved on
                now_live, now_toc = self.live_dir(), _toc_generation(live)
                if now_live == live and now_toc == opened_toc:
                    raise
                live, opened_toc = now_live, now_toc
        raise IndexBroken("the live generation kept changing")

    def _acquire(self) -> _Reader:
        with self._mu:
            reader = self._reader
            live = self.live_dir()
            if reader is None or not reader.current(live):
                fresh = self._open_live(live)
                if reader is not None and reader.refs == 0:
                    reader.close()
                self._reader = reader = fresh
            reader.refs += 1
            self._searched = True
            return reader

    def _release(self, reader: _Reader) -> None:
        with self._mu:
            reader.refs -= 1
            if reader.refs == 0 and reader is not self._reader:
                reader.close()

    def search(self, query: wq.Query, limit: int, agent: str | None, *,
               exhaustive: bool = False) -> list[dict[str, Any]]:
        """Best matches first, each with a short highlighted snippet and ``bounded``.

        Unless ``exhaustive``, only the newest NEWEST_RANKED matches are
        ranked (see :func:`newest_matches`), so a search costs the same at
        any index size; each hit's ``bounded`` says whether older matches
        were left unranked. With ``exhaustive``, every match is ranked.

        Messages still queued for the writer (it takes them in batches, and a
        search never waits for it) are searched in a small in-memory index and
        merged in, so a search sees every message committed before it began.
        """
        queued = self.meta.pending(OVERLAY_MAX + 1)
        if len(queued) > OVERLAY_MAX:
            queued = []  # a backlog (a rebuild): answer from the index as it stands
        extra = len(queued)
        for attempt in (1, 2):
            try:
                reader = self._acquire()
                try:
                    with reader.use:
                        hits, bounded = self._run(reader.searcher, query, limit + extra, agent, exhaustive)
                finally:
                    self._release(reader)
                break
            except Exception as exc:  # noqa: BLE001 - a damaged index is rebuilt, then asked again
                if attempt == 2:
                    raise IndexUnavailable(f"search failed after a rebuild: {type(exc).__name__}: {exc}") from None
                # Logged as text: a log record holding the exception would keep Whoosh's frames, and the
                # files they left open, alive for as long as a handler keeps the record.
                _log.warning("search index %s failed to answer (%s: %s); rebuilding", self.root,
                             type(exc).__name__, str(exc))
                self.rebuild()
        if queued:
            ids = {mid for _, mid in queued}
            hits = [hit for hit in hits if hit["id"] not in ids]  # stale, or about to be
            hits += self._overlay.search(queued, self._queued_document,
                                         lambda s: self._run(s, query, limit, agent, True)[0])
            hits.sort(key=lambda hit: hit["score"], reverse=True)
        for hit in hits:
            hit["bounded"] = bounded
        return hits[:limit]

    def _queued_document(self, mid: str) -> dict[str, Any] | None:
        source = self.meta.search_source(mid)
        return None if source is None else self._document(*source)

    def _run(self, searcher: Any, query: wq.Query, limit: int, agent: str | None,
             exhaustive: bool) -> tuple[list[dict[str, Any]], bool]:
        """The best ``limit`` hits and whether ranking was bounded to the newest matches."""
        scoped = wq.Require(query, wq.Term("visible", agent.lower())) if agent else query
        if exhaustive:
            ranked = [(hit.score, hit.docnum) for hit in searcher.search(scoped, limit=limit)]
            bounded = False
        else:
            scored, bounded = newest_matches(searcher, scoped, NEWEST_RANKED)
            ranked = sorted(scored, key=lambda item: (-item[0], item[1]))[:limit]
        pattern = highlight_pattern(query)
        out = []
        for score, docnum in ranked:
            fields = searcher.stored_fields(docnum)
            data = fields["data"]
            try:
                body = parse.body_of(self.read_blob(data["blob"]))
            except KeyError:  # the blob is gone (history rewritten under us): no snippet
                body = ""
            out.append({
                "id": fields["id"], "subject": data["subject"], "importance": data["importance"],
                "ack_required": data["ack_required"], "created_ts": data["created_ts"],
                "thread_id": data["thread_id"], "from": data["from"], "topic": data["topic"],
                "score": round(float(score), 4), "snippet": snippet(body, pattern),
            })
        return out, bounded

    def segment_count(self) -> int:
        reader = self._acquire()
        try:
            return len(reader.ix._segments())  # noqa: SLF001
        finally:
            self._release(reader)

    def close(self) -> None:
        with self._mu:
            if self._reader is not None and self._reader.refs == 0:
                self._reader.close()
            self._reader = None
