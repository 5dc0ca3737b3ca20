"""Merges of search-index segments that join posting lists instead of sorting them again.

Whoosh merges segments through its general writing path: every posting of
every segment merged becomes a tuple in its external sort (runs pickled to
disk past the writer's memory limit, then merged back), and is then written
again one posting at a time. Under a steady stream of messages, that sort
was most of the search helper's work. Yet each segment's posting lists are
in order already, and the merged segment holds the segments' documents one
segment after the other: a term's merged list is its list in the first
segment, then its list in the second with every document shifted by where
that segment starts, and so on (deleted documents dropped and the rest
renumbered, as Whoosh renumbers them).

:func:`merged_segment` writes that segment. The per-document files (stored
fields, field lengths, sortable columns) are written by Whoosh's own code;
each field's terms are read from the segments' term tables in one ordered
pass, and each term's joined postings are written a block at a time, as
:mod:`.bulk` writes a new segment. The term and posting files are the ones
Whoosh's merge of the same segments writes, byte for byte
(``tests/test_index_merge.py``), so every search answers the same.
"""

from __future__ import annotations

import heapq
import pickle
import struct
from array import array
from collections.abc import Iterator
from itertools import compress, groupby
from operator import itemgetter
from typing import Any

from whoosh import index as windex
from whoosh.reading import SegmentReader
from whoosh.system import _INT_SIZE, _LONG_SIZE, pack_int, pack_long, pack_ushort, unpack_int, unpack_long

from .bulk import TERM_INFO, Entry, Postings, SegmentBuilder
from .postings import _FOOT, Block, Codec, shifted

_LENGTHS = struct.Struct("!ii")  # a term table entry's key and value lengths (Whoosh's hash file)
_CHUNK = 1 << 16  # bytes of the term table read at once
_INFO = TERM_INFO.size  # where a term table entry's postings (or their place in the postings file) start


class _Source:
    """One segment being merged: its term table and postings, and how its documents are numbered anew."""

    def __init__(self, reader: SegmentReader, base: int, docmap: dict[int, int] | None) -> None:
        if not isinstance(reader.codec(), Codec):
            raise ValueError(f"segment {reader.segment().segment_id()} was not written with the index's codec")
        terms = reader._terms  # noqa: SLF001 - Whoosh's term table reader of the segment
        self.reader = reader
        self.fields: dict[str, int] = terms._fieldmap  # noqa: SLF001
        self._table = terms._tindex  # noqa: SLF001
        self._postfile = terms._postfile  # noqa: SLF001
        self._base = base
        self._docmap = docmap

    def terms(self, name: str, order: int) -> Iterator[tuple[bytes, int, bytes]]:
        """``(term, order, term table entry)`` for each term of field ``name`` here, in byte order."""
        fieldid = self.fields.get(name)
        if fieldid is None:
            return
        table = self._table
        start = table.closest_key_pos(pack_ushort(fieldid))  # a key is the field's number (2 bytes), then the term
        if start is None:
            return
        stop = table.closest_key_pos(pack_ushort(fieldid + 1))
        yield from _entries(table.dbfile, start, table.endofdata if stop is None else stop, order)

    def copied(self, info: bytes) -> Entry | None:
        """A term found only in this segment, as its merged segment's term table entry (None if it has deletions).

        Its postings stay as they are but for the document numbers, shifted
        by where this segment starts; the entry's statistics are unchanged
        but for its first and last document.
        """
        if self._docmap is not None:
            return None
        base = self._base
        flags, weight, df, minlength, maxlength, maxweight, minid, maxid = TERM_INFO.unpack_from(info)
        head = TERM_INFO.pack(flags, weight, df, minlength, maxlength, maxweight, minid + base, maxid + base)
        if flags:  # kept in the term table
            ids, weights, values = pickle.loads(info[_INFO:])  # noqa: S301 - a segment this index wrote
            return lambda _postfile: head + pickle.dumps((tuple(map(base.__add__, ids)), weights, values), 2)
        offset = unpack_long(info[_INFO:_INFO + _LONG_SIZE])[0]
        length = unpack_int(info[_INFO + _LONG_SIZE:_INFO + _LONG_SIZE + _INT_SIZE])[0]

        def entry(postfile: Any) -> bytes:
            start = postfile.tell()
            postfile.write(shifted(self._postfile.get(offset, length), base))
            return head + pack_long(start) + pack_int(length)

        return entry

    def postings(self, info: bytes, fixedsize: int | None) -> tuple[list[int], list[float], list[Any]]:
        """A term's documents (numbered in the merged segment), weights and values, from its term table entry.

        A posting without a value has None, as Whoosh's matchers answer it.
        """
        if info[0]:  # kept in the term table
            ids, weights, values = pickle.loads(info[_INFO:])  # noqa: S301 - a segment this index wrote
            docs, found, kept = list(ids), list(weights), list(values) if values else [None] * len(ids)
        else:
            offset = unpack_long(info[_INFO:_INFO + _LONG_SIZE])[0]
            length = unpack_int(info[_INFO + _LONG_SIZE:_INFO + _LONG_SIZE + _INT_SIZE])[0]
            docs, found, kept = _read_blocks(self._postfile.get(offset, length), fixedsize)
        docmap = self._docmap
        if docmap is None:
            return list(map(self._base.__add__, docs)), found, kept
        live = list(map(docmap.__contains__, docs))
        return list(map(docmap.__getitem__, compress(docs, live))), list(compress(found, live)), list(
            compress(kept, live))


def _entries(dbfile: Any, pos: int, stop: int, order: int) -> Iterator[tuple[bytes, int, bytes]]:
    """``(term, order, entry)`` for the term table's entries from ``pos`` to ``stop``, read a chunk at a time.

    Whoosh's reader of the table reads each entry's lengths, key and value
    with a read each; a merge reads every entry.
    """
    want = _CHUNK
    while pos < stop:
        chunk = dbfile.get(pos, min(want, stop - pos))
        at, size = 0, len(chunk)
        while at + _LENGTHS.size <= size:
            keylen, datalen = _LENGTHS.unpack_from(chunk, at)
            value_at = at + _LENGTHS.size + keylen
            if value_at + datalen > size:
                break
            yield chunk[at + _LENGTHS.size + 2:value_at], order, chunk[value_at:value_at + datalen]
            at = value_at + datalen
        if at:
            pos += at
        else:  # an entry longer than the chunk
            want *= 2


def _read_blocks(buf: bytes, fixedsize: int | None) -> tuple[list[int], list[float], list[Any]]:
    """Every posting of one posting list written by :class:`.postings.PostingsWriter`, block by block."""
    blocks = _FOOT.unpack_from(buf, len(buf) - _FOOT.size)[0]
    end = len(buf) - _FOOT.size - 8 * blocks  # the table of block ends follows the blocks
    docs: list[int] = []
    weights: list[float] = []
    values: list[Any] = []
    at = 0
    while at < end:
        block = Block(buf, at)
        at = block._end  # noqa: SLF001 - the next block starts where this one ends
        docs += block.ids()
        weights += block.weights()
        values += block.values(fixedsize)
    return docs, weights, values


class SegmentMerger(SegmentBuilder):
    """A segment writer taking in whole segments: their documents in order, their posting lists joined."""

    def __init__(self, ix: windex.Index) -> None:
        super().__init__(ix)
        self._sources: list[_Source] = []

    def add_segment(self, segment: Any) -> None:
        """Append the live documents of ``segment`` (Whoosh's ``add_reader`` does the same per document)."""
        reader = SegmentReader(self.storage, self.schema, segment)
        try:
            base = self.docnum
            names = set(self.schema.names()) | {name for name in reader.indexed_field_names() if name in self.schema}
            docmap = self.write_per_doc(names, reader)
            self._sources.append(_Source(reader, base, docmap))
        except BaseException:
            reader.close()
            raise
        self._added = True

    def _posting_lists(self) -> Iterator[tuple[str, Iterator[tuple[bytes, Postings | Entry]]]]:
        names = sorted({name for source in self._sources for name in source.fields if name in self.schema})
        for name in names:
            yield name, self._joined(name, self.schema[name].format.fixed_value_size())

    def _joined(self, name: str, fixedsize: int | None) -> Iterator[tuple[bytes, Postings | Entry]]:
        """Each term of field ``name`` in byte order with its postings from every segment, in segment order.

        A term whose every posting was deleted is left out, as Whoosh's merge never sees it.
        """
        sources = self._sources
        streams = [source.terms(name, order) for order, source in enumerate(sources)]
        for btext, group in groupby(heapq.merge(*streams), key=itemgetter(0)):
            entries = list(group)
            if len(entries) == 1:
                _, order, info = entries[0]
                entry = sources[order].copied(info)
                if entry is not None:
                    yield btext, entry
                    continue
            docs, weights, values = array("I"), array("f"), []
            for _, order, info in entries:
                found = sources[order].postings(info, fixedsize)
                docs.extend(found[0])
                weights.extend(found[1])
                values += found[2]
            if docs:
                yield btext, (docs, weights, values)

    def close_sources(self) -> None:
        """Close the merged segments' readers."""
        for source in self._sources:
            source.reader.close()
        self._sources = []


def merged_segment(writer: Any, segments: list[Any]) -> Any:
    """A new segment of ``writer``'s index holding the live documents of ``segments``, in order.

    For a Whoosh merge policy (the ``mergetype`` its writers commit with): a
    policy returning the segments it keeps plus this one lists the same
    segment as one calling ``writer.add_reader`` on each of ``segments``,
    without the sort. The caller holds the index's writer lock.
    """
    merger = SegmentMerger(windex.FileIndex(writer.storage, writer.schema, writer.indexname))
    try:
        try:
            for segment in segments:
                merger.add_segment(segment)
        except BaseException:
            merger.cancel()
            raise
        return merger.finish()
    finally:
        merger.close_sources()
