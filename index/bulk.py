"""Bulk builds of the search index: every message of a project into new segments, in parallel.

A rebuild (``gitmail reindex``, a damaged or rewritten index, a large
arrival from a sync) writes every message at once. Whoosh's writer does
that through its general path, which costs a rebuild most of its time:

- every posting is a tuple in an external sort (runs pickled to disk past
  the writer's memory limit, then merged), although documents arrive in
  number order, so each term's postings are already in order: only the
  terms need sorting;
- writing a term's postings looks every posting's field length up in the
  segment's length column, one column read each.

:class:`SegmentBuilder` is Whoosh's ``SegmentWriter`` with an in-memory
posting table in place of the sorting pool and the field lengths read once
per field; the segment it writes is the one Whoosh writes for the same
documents (``tests/test_index_bulk.py`` compares them file by file). A
segment is cut every SEGMENT_POSTINGS postings, so memory stays bounded
whatever the archive's size.

:func:`build` splits the messages into parts by sequence number and builds
each part's segments in a worker process (on a machine with several cores
the parts run at once, and the calling process, often a server, only waits);
the caller lists the segments in document order in one commit, so document
numbers keep the order in which this machine first saw the messages, which
the newest-first ranking relies on.
"""

from __future__ import annotations

import base64
import json
import os
import pickle
import subprocess
import sys
import threading
from array import array
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from itertools import chain
from typing import Any, TypeAlias

from whoosh import index as windex
from whoosh.codec.whoosh3 import LENGTHS_COLUMN, W3TermInfo, _lenfield
from whoosh.fields import DATETIME, NUMERIC
from whoosh.system import pack_ushort
from whoosh.util.numeric import byte_to_length, length_to_byte, to_sortable
from whoosh.writing import SegmentWriter

from gitmail.storage.handles import open_repository
from gitmail.storage.snapshot import blob_data

from . import parse
from .meta import Meta
from .postings import Codec
from .schema import REPEATING, WordPositions, document

SEGMENT_POSTINGS = 24_000_000  # postings held in memory before a segment is written (about 330k messages)
PART_MIN = 4_000  # messages below which a build runs in the calling process, without workers
ANALYZED_KEPT = 100_000  # values of repeating fields whose postings a builder remembers
PROGRESS_EVERY = 500  # documents between progress reports
NICENESS = 5  # workers' scheduling priority below the caller's (a server answers meanwhile)

Progress = Callable[[int, int], None]
# One term's postings: its documents, weights and values (None for a posting without one).
Postings: TypeAlias = "tuple[array[int], array[float], list[bytes | None]]"
# A term's entry in the term table made by the caller, given the postings file (where it may write the postings).
Entry: TypeAlias = Callable[[Any], bytes]
TERM_INFO = W3TermInfo._struct  # noqa: SLF001 - the layout of Whoosh's term statistics


class _Table:
    """The posting lists of the segment being built, in memory, by field and term.

    Documents are added in number order, so each term's list is in order as
    it grows; only the terms are sorted, once, when the segment is written.
    A posting costs an array slot for its document, one for its weight, and
    a reference to its value (equal values are often one object, see
    :class:`.schema.WordPositions`). It stands in for Whoosh's posting pool,
    whose ``cleanup`` the writer calls.
    """

    def __init__(self) -> None:
        # field -> term (bytes, or text in the text fields) -> (documents, weights, values)
        self.fields: dict[str, dict[Any, tuple[array[int], array[float], list[bytes | None]]]] = {}
        self.count = 0

    def cleanup(self) -> None:
        self.fields = {}


def _lengths(perdoc: Any, fieldnames: Iterable[str]) -> dict[str, list[int]]:
    """Every document's length in each of ``fieldnames``, read from the segment's length columns once."""
    table = {}
    for name in fieldnames:
        reader = perdoc._cached_reader(_lenfield(name), LENGTHS_COLUMN)  # noqa: SLF001 - Whoosh's own reader
        if reader is not None:
            table[name] = [byte_to_length(b) if b else 0 for b in reader]
    return table


class SegmentBuilder(SegmentWriter):
    """A Whoosh segment writer for a build from scratch: postings in memory, lengths read once.

    It takes no index lock (the caller holds the search index's writer lock)
    and commits nothing: :meth:`finish` writes the segment and returns it
    for the caller to list in the index.
    """

    def __init__(self, ix: windex.Index) -> None:
        super().__init__(ix, _lk=False, compound=False, codec=Codec())
        if any(field.vector or field.separate_spelling() for _, field in self.schema.items()):
            raise ValueError("a bulk build writes no term vectors or spelling fields")
        self.pool.cleanup()
        self.pool: Any = _Table()
        self._analyzed: dict[tuple[str, Any], list[Any]] = {}

    def add_document(self, **fields: Any) -> None:
        """Whoosh's ``SegmentWriter.add_document`` for documents without boosts, vectors or spelling fields.

        The same calls to the per-document writer in the same order, and the
        same postings, straight into the posting table.
        """
        docnum, perdoc, schema, table = self.docnum, self.perdocwriter, self.schema, self.pool.fields
        perdoc.start_doc(docnum)
        added = 0
        for name in sorted(fields):
            value = fields[name]
            if value is None:
                continue
            field = schema[name]
            length = 0
            if field.indexed:
                terms = table.get(name)
                if terms is None:
                    terms = table[name] = {}
                scorable = field.scorable
                for text, freq, weight, data in self._postings_of(name, field, value):
                    entry = terms.get(text)
                    if entry is None:
                        entry = terms[text] = (array("I"), array("f"), [])
                    entry[0].append(docnum)
                    entry[1].append(weight)
                    entry[2].append(data)
                    added += 1
                    if scorable:
                        length += freq
            perdoc.add_field(name, field, value if field.stored else None, length)
            if field.column_type:
                perdoc.add_column_value(name, field.column_type, field.to_column_value(value))
        perdoc.finish_doc()
        self.pool.count += added
        self._added = True
        self.docnum += 1

    def _postings_of(self, name: str, field: Any, value: Any) -> Iterable[tuple[Any, int, float, Any]]:
        """A field value's (term, frequency, weight, value) postings, as Whoosh's ``field.index`` gives them.

        Words of the text fields are kept as text (encoded once per term when
        written); the values of REPEATING fields are analyzed once per build.
        """
        if isinstance(field.format, WordPositions):
            return field.format.word_values(value, field.analyzer, mode="index")
        if isinstance(field, NUMERIC) and field.shift_step and not isinstance(value, (list, tuple, bytes)):
            return _tiered(field, value)
        if name not in REPEATING:
            return field.index(value)
        key = (name, value)
        items = self._analyzed.get(key)
        if items is None:
            items = list(field.index(value))
            if len(self._analyzed) < ANALYZED_KEPT:
                self._analyzed[key] = items
        return items

    def postings(self) -> int:
        """Postings held so far."""
        return int(self.pool.count)

    def _flush_segment(self) -> None:
        """Write the posting lists term by term, a block at a time (Whoosh's writer goes posting by posting)."""
        self.perdocwriter.close()
        perdoc = self.per_document_reader()
        try:
            lengths = _lengths(perdoc, [name for name, field in self.schema.items() if field.scorable])
        finally:
            perdoc.close()
        writer = self.fieldwriter
        for name, terms in self._posting_lists():
            write_field(writer, name, self.schema[name], terms, lengths.get(name))
        writer.close()

    def _posting_lists(self) -> Iterator[tuple[str, Iterator[tuple[bytes, Postings | Entry]]]]:
        """Each field with postings (by name) and its terms in byte order (text sorts as its UTF-8 bytes do)."""
        for name in sorted(self.pool.fields):
            terms = self.pool.fields[name]
            yield name, ((text.encode("utf-8") if isinstance(text, str) else text, terms[text])
                         for text in sorted(terms))

    def _finish(self) -> None:
        # Every writer of an index keeps its temporary files in one folder and deletes the folder when it
        # ends; builders in other processes may still be using it. The commit listing the segments removes it.
        self.is_closed = True

    def finish(self) -> Any:
        """Write the segment; the Whoosh segment object (None if no document was added)."""
        try:
            segment = self._finalize_segment() if self._added else None
            if segment is None:
                self._close_segment()
        finally:
            self._finish()
        return segment


def write_field(writer: Any, name: str, field: Any, terms: Iterable[tuple[bytes, Postings | Entry]],
                lengths: list[int] | None) -> None:
    """Write one field's terms (in byte order) through Whoosh's field writer, a block at a time.

    Whoosh's writer goes posting by posting; this hands each term's
    postings over a block at a time, and puts terms of fewer than a block's
    inline limit straight into the term table, to the same bytes. A term
    given as an :data:`Entry` (a merge copying a posting list) is written by it.
    ``lengths`` are the new segment's field lengths by document (None for a
    field without them).
    """
    terms = iter(terms)
    first = next(terms, None)
    if first is None:  # Whoosh's writer never starts a field without postings
        return
    table = writer._tindex  # noqa: SLF001 - the term table Whoosh's field writer adds each term to
    writer.start_field(name, field)
    postings = writer._postwriter  # noqa: SLF001 - the field's postings writer
    prefix, inline = pack_ushort(writer._fieldid), postings._inlinelimit  # noqa: SLF001
    for btext, term in chain([first], terms):
        if callable(term):
            table.add(prefix + btext, term(writer._postfile))  # noqa: SLF001 - the segment's postings file
            continue
        docs, weights, values = term
        if len(docs) < inline:
            table.add(prefix + btext, _inlined_term(docs, weights, values, lengths))
            continue
        writer.start_term(btext)
        _fill(postings, docs, weights, values, lengths)
        writer.finish_term()
    writer.finish_field()


def _tiered(field: NUMERIC, value: Any) -> list[tuple[bytes, int, float, bytes]]:
    """The postings of a number (or date) at every precision tier, as ``NUMERIC.index`` gives them.

    Whoosh prepares the value again for each of its eight tiers (for a date:
    a conversion to microseconds, a range check and the sortable form each
    time); this does it once.
    """
    number = field.prepare_datetime(value) if isinstance(field, DATETIME) else value
    sortable = to_sortable(field.numtype, field.bits, field.signed, field.prepare_number(number))
    return [(field.sortable_to_bytes(sortable, shift), 1, 1.0, b"") for shift in range(0, field.bits, field.shift_step)]


def _fill(postings: Any, docs: array[int], weights: array[float], values: list[bytes | None],
          lengths: list[int] | None) -> None:
    """Hand one term's postings to Whoosh's postings writer a block at a time, as its ``add_posting`` would.

    Whoosh writes a full block when the next posting arrives, and the last
    block (full or not) when the term is finished; each block records its
    highest weight and its shortest and longest document (zero lengths,
    in fields without lengths, count as none).
    """
    limit = postings._blocklimit  # noqa: SLF001
    count = len(docs)
    for start in range(0, count, limit):
        ids = docs[start:start + limit]
        block_weights = weights[start:start + limit]
        postings._ids, postings._weights = ids, block_weights  # noqa: SLF001
        postings._values = [value for value in values[start:start + limit] if value]  # noqa: SLF001
        postings._maxweight = max(0, max(block_weights))  # noqa: SLF001
        if lengths is not None:
            present = [length for length in (lengths[d] for d in ids) if length]
            postings._minlength = min(present) if present else None  # noqa: SLF001
            postings._maxlength = max(present) if present else 0  # noqa: SLF001
        if start + limit < count:
            postings._write_block()  # noqa: SLF001


def _inlined_term(docs: array[int], weights: array[float], values: list[bytes | None],
                  lengths: list[int] | None) -> bytes:
    """The term table entry of a term with its few postings kept in the table, as Whoosh's writer makes it.

    Most terms of a segment have one posting (a message ID, a timestamp at
    its finer tiers); Whoosh takes each through its postings writer and a
    term info object to the same bytes: the term's statistics, then its
    postings pickled.
    """
    present = [length for length in (lengths[d] for d in docs) if length] if lengths is not None else []
    head = TERM_INFO.pack(True, 0 + sum(weights), len(docs), length_to_byte(min(present)) if present else 0,
                           length_to_byte(max(present)) if present else 0, max(0, max(weights)), docs[0], docs[-1])
    return head + pickle.dumps((tuple(docs), tuple(weights), tuple(value for value in values if value)), 2)


def write_segments(ix: windex.Index, documents: Iterable[dict[str, Any]], tick: Callable[[int], None] | None = None,
                   *, segment_postings: int | None = None) -> list[Any]:
    """Write ``documents`` into new segments of ``ix`` (none listed in it yet), in order; the segments.

    A segment is cut every ``segment_postings`` postings (default SEGMENT_POSTINGS).
    """
    limit = segment_postings or SEGMENT_POSTINGS
    segments = []
    builder = SegmentBuilder(ix)
    try:
        for count, doc in enumerate(documents, 1):
            builder.add_document(**doc)
            if tick is not None and count % PROGRESS_EVERY == 0:
                tick(PROGRESS_EVERY)
            if builder.postings() >= limit:
                segments.append(builder.finish())
                builder = SegmentBuilder(ix)
    except BaseException:
        builder.cancel()
        raise
    last = builder.finish()
    return segments + ([last] if last is not None else [])


def documents(meta: Meta, read_blob: Callable[[str], bytes], after: int, upto: int | None) -> Iterator[dict[str, Any]]:
    """The search document of every message with a sequence number in (after, upto], in order."""
    for summary, blob, agents in meta.sources(after, upto):
        yield message_document(read_blob, summary, blob, agents)


def message_document(read_blob: Callable[[str], bytes], summary: dict[str, Any], blob: str,
                     agents: list[str]) -> dict[str, Any]:
    """The search document of one message (the metadata store parsed its file already; the body comes from git)."""
    try:
        body = parse.body_of(read_blob(blob))
    except KeyError:  # the blob is gone (history rewritten under us)
        body = ""
    return document(summary, blob, body, agents)


@dataclass(frozen=True)
class Part:
    """One worker's share of a build: the messages with a sequence number in (after, upto]."""

    after: int
    upto: int | None


def plan(meta: Meta, total: int, workers: int) -> list[Part]:
    """Split the messages into up to ``workers`` parts of about equal size, by sequence number.

    Parts have at least PART_MIN messages: a worker costs a process start.
    """
    count = max(1, min(workers, total // PART_MIN))
    bounds = []
    for k in range(1, count):
        rows = meta.read("SELECT seq FROM messages ORDER BY seq LIMIT 1 OFFSET ?", (k * total // count - 1,))
        if rows:
            bounds.append(rows[0][0])
    edges = [-1, *bounds]
    return [Part(after, upto) for after, upto in zip(edges, [*bounds, None], strict=True)]


def build(ix: windex.Index, *, meta: Meta, git_dir: str | None, read_blob: Callable[[str], bytes], total: int,
          progress: Progress | None = None, workers: int | None = None) -> list[Any]:
    """The segments of every message in ``meta`` (``total`` of them), in document order, not yet listed in ``ix``.

    With more than one part (see :func:`plan`; never without ``git_dir``),
    each part is built in a worker process of its own; otherwise here.
    """
    parts = plan(meta, total, (workers or os.cpu_count() or 1) if git_dir else 1)
    if len(parts) == 1:
        done = 0

        def tick(count: int) -> None:
            nonlocal done
            done += count
            if progress:
                progress(done, total)

        return write_segments(ix, documents(meta, read_blob, -1, None), tick)
    assert git_dir is not None
    workers_ = [_Worker({"whoosh_dir": ix.storage.folder, "meta_path": meta.path, "git_dir": git_dir,
                         "after": part.after, "upto": part.upto, "segment_postings": SEGMENT_POSTINGS})
                for part in parts]
    try:
        while True:
            if progress:
                progress(sum(worker.done for worker in workers_), total)
            if all(worker.finished.wait(0.2) for worker in workers_) or any(worker.error for worker in workers_):
                break
        failed = [worker.error for worker in workers_ if worker.error]
        if failed:
            raise BulkBuildFailed(failed[0])
        return [segment for worker in workers_ for segment in worker.segments]
    finally:
        for worker in workers_:
            worker.stop()


class BulkBuildFailed(Exception):
    """A worker process of a bulk build failed (it said why, or it died)."""


_WORKER = "from gitmail.index.bulk import worker_main; worker_main()"


class _Worker:
    """One worker process building one part, and a thread reading what it reports."""

    def __init__(self, request: dict[str, Any]) -> None:
        self.done = 0
        self.segments: list[Any] = []
        self.error: str | None = None
        self.finished = threading.Event()
        self.proc = subprocess.Popen([sys.executable, "-c", _WORKER], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE)
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(request).encode() + b"\n")
        self.proc.stdin.close()
        threading.Thread(target=self._read, name="gitmail-bulk-build", daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        try:
            for line in self.proc.stdout:
                report = json.loads(line)
                if "done" in report:
                    self.done += report["done"]
                elif "segments" in report:
                    self.segments = pickle.loads(base64.b64decode(report["segments"]))  # noqa: S301 - our own child
                else:
                    self.error = report.get("error", "unknown failure")
            if self.proc.wait() != 0 and self.error is None:
                self.error = f"the bulk build worker exited with {self.proc.returncode}"
        except (OSError, ValueError) as exc:
            self.error = f"the bulk build worker's report was unreadable: {exc}"
        finally:
            self.finished.set()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.finished.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def worker_main() -> None:
    """A worker process: one part's segments, as asked on stdin; progress and the result as JSON lines on stdout."""
    request = json.loads(sys.stdin.readline())
    out = sys.stdout

    def report(**fields: Any) -> None:
        out.write(json.dumps(fields) + "\n")
        out.flush()

    try:
        os.nice(NICENESS)
        repo = open_repository(request["git_dir"])
        meta = Meta(request["meta_path"], check=False)
        ix = windex.open_dir(request["whoosh_dir"])
        docs = documents(meta, lambda oid: blob_data(repo, oid), request["after"], request["upto"])
        segments = write_segments(ix, docs, lambda count: report(done=count),
                                  segment_postings=request["segment_postings"])
    except Exception as exc:  # noqa: BLE001 - reported to the parent, whose rebuild fails with it
        report(error=f"{type(exc).__name__}: {exc}")
        raise SystemExit(1) from None
    report(segments=base64.b64encode(pickle.dumps(segments)).decode())
