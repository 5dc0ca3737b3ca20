"""The search index's posting lists: blocks read without unpickling, a table of block ends to leap by.

Whoosh's own format (``whoosh3``) pickles each block of 128 postings as one
tuple (document numbers, weights, values) and compresses it. Reading a
single document number out of a block then unpickles every value in it (a
position list per posting in the text fields): in an intersection of a rare
word with a common one, that was most of the search. Every posting also
costs Python calls to encode and decode, most of the time a build spends
writing a segment, and each term with a single posting (a message ID, a
timestamp) got a block of its own.

:class:`Codec` is Whoosh's codec with another posting list format; terms,
stored fields, lengths and columns are written as before, and everything
above the postings (queries, matchers, scoring) is Whoosh's:

- a block keeps its document numbers (as differences, one to four bytes
  each), its weights (none when all are 1, one byte each when they are
  small whole numbers) and its values (compressed) in separate byte runs,
  each read by one C call and only when asked for;
- after the blocks, a table lists each block's last document and where it
  starts, so ``skip_to`` finds the block holding a document by bisection
  instead of reading every block header on the way;
- terms with fewer than INLINE postings keep them in the term table
  (Whoosh's inlining, which its own codec never uses).

Matchers answer exactly what Whoosh's would for the same postings
(``tests/test_index_postings.py``), so scores and order are unchanged.
"""

from __future__ import annotations

import struct
import zlib
from array import array
from bisect import bisect_left
from itertools import accumulate
from operator import sub
from typing import Any

from whoosh.codec.whoosh3 import W3Codec, W3LeafMatcher, W3PostingsWriter
from whoosh.matching import ListMatcher, ReadTooFar
from whoosh.util.numeric import byte_to_length, length_to_byte

BLOCK = 128  # postings per block
INLINE = 4  # terms with fewer postings than this keep them in the term table
COMPRESS_AT = 64  # value runs from this many bytes are compressed

# A block: count, first and last document, highest weight, shortest and longest
# field length (as Whoosh's length bytes), how the differences, weights and
# values are stored, the weight shared by every posting (weights kind 1), and
# the byte lengths of the three runs that follow.
_HEAD = struct.Struct("<HIIfBBBBBxfIII")
_DELTA_CODES = "BHI"
_W_ONES, _W_SAME, _W_BYTES, _W_FLOATS = range(4)
_V_NONE, _V_FIXED, _V_SHORT, _V_LONG = range(4)  # values: none, fixed size, lengths as 'H' or 'I' then the bytes
_V_COMPRESSED = 8  # flag added to the values kind
_FOOT = struct.Struct("<I")
_FIRST_LAST = struct.Struct("<II")  # a block's first and last document, after its count


def encode_block(ids: Any, weights: Any, values: list[bytes], fixedsize: int | None, minlength: int | None,
                 maxlength: int, maxweight: float) -> bytes:
    """One block's bytes: header, document differences, weights, values."""
    count = len(ids)
    if count > 1:
        deltas = list(map(sub, ids[1:], ids[:-1]))
        widest = max(deltas)
        code = 0 if widest < 0x100 else 1 if widest < 0x10000 else 2
        id_bytes = array(_DELTA_CODES[code], deltas).tobytes()
    else:
        code, id_bytes = 0, b""
    same = 0.0
    w_bytes = b""
    if weights.count(1.0) == count:
        w_kind = _W_ONES
    elif weights.count(weights[0]) == count:
        w_kind, same = _W_SAME, weights[0]
    else:
        w_kind, w_bytes = _weight_bytes(weights)
    v_kind, v_bytes = _value_bytes(values, fixedsize)
    head = _HEAD.pack(count, ids[0], ids[-1], maxweight, length_to_byte(minlength), length_to_byte(maxlength),
                      code, w_kind, v_kind, same, len(id_bytes), len(w_bytes), len(v_bytes))
    return b"".join((head, id_bytes, w_bytes, v_bytes))


def _weight_bytes(weights: Any) -> tuple[int, bytes]:
    floats = weights if isinstance(weights, array) and weights.typecode == "f" else array("f", weights)
    try:
        small = array("B", map(int, floats))
    except (OverflowError, ValueError):
        return _W_FLOATS, floats.tobytes()
    if array("f", small) == floats:
        return _W_BYTES, small.tobytes()
    return _W_FLOATS, floats.tobytes()


def _value_bytes(values: list[bytes], fixedsize: int | None) -> tuple[int, bytes]:
    if fixedsize == 0:
        return _V_NONE, b""
    if fixedsize is not None and fixedsize > 0:
        kind, raw = _V_FIXED, b"".join(values)
    else:
        lengths = array("H")
        try:
            lengths.extend(map(len, values))
            kind = _V_SHORT
        except OverflowError:
            lengths, kind = array("I", map(len, values)), _V_LONG
        raw = b"".join((_FOOT.pack(len(values)), lengths.tobytes(), *values))
    if len(raw) >= COMPRESS_AT:
        return kind | _V_COMPRESSED, zlib.compress(raw, 1)
    return kind, raw


def shifted(buf: bytes, base: int) -> bytes:
    """A posting list's bytes (blocks, then the table of block ends) with every document number raised by ``base``.

    Blocks keep their documents as differences from the first, so only the
    block headers and the table change: a merge copies a term found in one
    segment this way instead of decoding and encoding it again.
    """
    if not base:
        return buf
    out = bytearray(buf)
    blocks = _FOOT.unpack_from(buf, len(buf) - _FOOT.size)[0]
    table = len(buf) - _FOOT.size - 8 * blocks
    at = 0
    while at < table:
        _, first, last, *_, id_len, w_len, v_len = _HEAD.unpack_from(buf, at)
        _FIRST_LAST.pack_into(out, at + 2, first + base, last + base)
        at += _HEAD.size + id_len + w_len + v_len
    lasts = array("I")
    lasts.frombytes(buf[table:table + 4 * blocks])
    out[table:table + 4 * blocks] = array("I", map(base.__add__, lasts)).tobytes()
    return bytes(out)


class Block:
    """One decoded block header, and its runs decoded on demand."""

    __slots__ = ("count", "first", "last", "maxweight", "minlength", "maxlength", "_code", "_w_kind", "_v_kind",
                 "_same", "_buf", "_ids_at", "_w_at", "_v_at", "_end")

    def __init__(self, buf: bytes, at: int = 0) -> None:
        (self.count, self.first, self.last, self.maxweight, minlen, maxlen, self._code, self._w_kind, self._v_kind,
         self._same, id_len, w_len, v_len) = _HEAD.unpack_from(buf, at)
        self.minlength = byte_to_length(minlen)
        self.maxlength = byte_to_length(maxlen)
        self._buf = buf
        self._ids_at = at + _HEAD.size
        self._w_at = self._ids_at + id_len
        self._v_at = self._w_at + w_len
        self._end = self._v_at + v_len

    def ids(self) -> list[int]:
        if self.count == 1:
            return [self.first]
        deltas = array(_DELTA_CODES[self._code])
        deltas.frombytes(self._buf[self._ids_at:self._w_at])
        return list(accumulate(deltas, initial=self.first))

    def weights(self) -> Any:
        kind = self._w_kind
        if kind == _W_ONES:
            return [1.0] * self.count
        if kind == _W_SAME:
            return [self._same] * self.count
        run = array("B" if kind == _W_BYTES else "f")
        run.frombytes(self._buf[self._w_at:self._v_at])
        return list(map(float, run)) if kind == _W_BYTES else run

    def values(self, fixedsize: int | None) -> tuple[Any, ...]:
        kind = self._v_kind
        if kind == _V_NONE:
            return (None,) * self.count
        raw = self._buf[self._v_at:self._end]
        if kind & _V_COMPRESSED:
            raw = zlib.decompress(raw)
            kind &= ~_V_COMPRESSED
        if kind == _V_FIXED:
            assert fixedsize is not None
            return tuple(raw[i:i + fixedsize] for i in range(0, len(raw), fixedsize))
        # As many values as postings that have one (Whoosh keeps none for an empty value), then their lengths.
        stored = _FOOT.unpack_from(raw)[0]
        lengths = array("H" if kind == _V_SHORT else "I")
        top = _FOOT.size + stored * lengths.itemsize
        lengths.frombytes(raw[_FOOT.size:top])
        ends = list(accumulate(lengths, initial=top))
        return tuple(raw[start:end] for start, end in zip(ends, ends[1:], strict=False))


class PostingsWriter(W3PostingsWriter):
    """Whoosh's postings writer with this module's block format and table of block ends."""

    _terminfo: Any

    def start_postings(self, format_: Any, terminfo: Any) -> None:
        super().start_postings(format_, terminfo)
        self._fixedsize = format_.fixed_value_size()
        self._lasts = array("I")
        self._starts = array("I")

    def _write_block(self, last: bool = False) -> None:
        self._terminfo.add_block(self)
        postfile = self._postfile
        self._starts.append(postfile.tell() - self._startoffset)
        self._lasts.append(self._ids[-1])
        postfile.write(encode_block(self._ids, self._weights, self._values, self._fixedsize, self._minlength,
                                    self._maxlength, self._maxweight))
        self._blockcount += 1
        self._new_block()

    def finish_postings(self) -> Any:
        terminfo = self._terminfo
        if not self.written() and len(self) < self._inlinelimit:
            terminfo.add_block(self)
            terminfo.set_inlined(self._ids, self._weights, self._values)
        else:
            if self._ids:
                self._write_block(last=True)
            postfile = self._postfile
            postfile.write(self._lasts.tobytes() + self._starts.tobytes() + _FOOT.pack(len(self._lasts)))
            terminfo.set_extent(self._startoffset, postfile.tell() - self._startoffset)
        self._terminfo = None
        return terminfo


class BlockMatcher(W3LeafMatcher):
    """Whoosh's leaf matcher over this module's posting lists.

    ``skip_to`` leaps to the block holding the target by the table of block
    ends, then bisects within the block; ``all_ids`` (what Whoosh asks for
    when only the matching documents matter, not their scores) reads the
    document numbers of every block in one read, without the weights and
    values.
    """

    _ids: Any
    _values: Any

    def _read_header(self) -> None:
        postfile, start, length = self._postfile, self._startoffset, self._length
        count = _FOOT.unpack(postfile.get(start + length - _FOOT.size, _FOOT.size))[0]
        table = postfile.get(start + length - _FOOT.size - 8 * count, 8 * count)
        self._lasts = array("I")
        self._lasts.frombytes(table[:4 * count])
        self._starts = array("I")
        self._starts.frombytes(table[4 * count:])
        self._table_at = length - _FOOT.size - 8 * count
        self._blocks = count

    def reset(self) -> None:
        self._atend = False
        self._load(0)

    def _span(self, first: int, last: int) -> bytes:
        """The bytes of blocks ``first`` to ``last`` (inclusive), in one read."""
        end = self._starts[last + 1] if last + 1 < self._blocks else self._table_at
        return self._postfile.get(self._startoffset + self._starts[first], end - self._starts[first])

    def _load(self, number: int) -> None:
        block = Block(self._span(number, number))
        self._block, self._number = block, number
        self._blocklength, self._maxid, self._maxweight = block.count, block.last, block.maxweight
        self._minlength, self._maxlength = block.minlength, block.maxlength
        self._lastblock = number == self._blocks - 1
        self._ids = self._weights = self._values = None
        self._i = 0

    def _next_block(self) -> None:
        if self._atend:
            raise ValueError("no next block")
        if self._lastblock:
            self._atend = True
        else:
            self._load(self._number + 1)

    def _read_ids(self) -> None:
        self._ids = self._block.ids()

    def _read_weights(self) -> None:
        self._weights = self._block.weights()

    def _read_values(self) -> None:
        self._values = self._block.values(self._fixedsize)

    def skip_to(self, targetid: int) -> None:
        if not self.is_active():
            raise ReadTooFar
        if targetid <= self.id():
            return
        if targetid > self._maxid:
            number = bisect_left(self._lasts, targetid, self._number + 1)
            if number >= self._blocks:
                self._atend = True
                return
            self._load(number)
        if self._ids is None:
            self._read_ids()
        self._i = bisect_left(self._ids, targetid, self._i)

    def all_ids(self) -> Any:
        return iter(self.ids_between(0, 0xFFFFFFFF + 1))

    def ids_between(self, low: int, high: int) -> list[int]:
        """The documents in [low, high) of this posting list, in order (the matcher's position is kept)."""
        lasts = self._lasts
        first = bisect_left(lasts, low)
        if first >= self._blocks:
            return []
        last = min(bisect_left(lasts, high), self._blocks - 1)
        buf = self._span(first, last)
        found: list[int] = []
        at = 0
        while at < len(buf):
            block = Block(buf, at)
            at = block._end  # noqa: SLF001 - the next block starts where this one ends
            if block.first >= high:
                break
            ids = block.ids()
            if block.first < low or block.last >= high:
                ids = ids[bisect_left(ids, low):bisect_left(ids, high)]
            found += ids
        return found


class InlineMatcher(ListMatcher):
    """Whoosh's matcher of postings kept in the term table, answering None for a posting without a value.

    Whoosh's answers '' (text) there, where its block matcher answers None;
    a merge hands each value on to the postings writer, which takes bytes or
    None only. Whoosh's own format never keeps postings in the term table.
    """

    def value(self) -> Any:
        return super().value() if self._values else None


class Codec(W3Codec):
    """Whoosh's codec with this module's posting lists (see the module's docstring)."""

    def __init__(self) -> None:
        super().__init__(blocklimit=BLOCK, inlinelimit=INLINE)

    def postings_writer(self, dbfile: Any, byteids: bool = False) -> Any:
        if byteids:  # term vectors, which the schema has none of
            return super().postings_writer(dbfile, byteids=byteids)
        return PostingsWriter(dbfile, blocklimit=self._blocklimit, inlinelimit=self._inlinelimit)

    def postings_reader(self, dbfile: Any, terminfo: Any, format_: Any, term: Any = None, scorer: Any = None) -> Any:
        if terminfo.is_inlined():
            ids, weights, values = terminfo.inlined_postings()
            return InlineMatcher(ids, weights, values, format_, scorer=scorer, term=term, terminfo=terminfo)
        offset, length = terminfo.extent()
        if isinstance(length, tuple):  # as read back from the term table, Whoosh leaves it in a 1-tuple
            length = length[0]
        return BlockMatcher(dbfile, offset, length, format_, term=term, scorer=scorer)
