"""Git objects built in memory and written durably as one pack per commit.

The engine does not let libgit2 write loose objects: a message would leave
some twenty small files behind, each needing its own fsync to be durable.
Instead it hashes the blobs, trees and commit of a change here, streams them
into a single pack file with its index, and makes that pack durable with a
fixed number of fsyncs whatever the change contains. Git and libgit2 read the
result like any other pack; background maintenance folds the small packs
together (see :mod:`gitmail.storage.maintenance`).
"""

from __future__ import annotations

import bisect
import hashlib
import os
import struct
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from gitmail.model.controls import printable

COMMIT, TREE, BLOB = 1, 2, 3
OFS_DELTA = 6
_TYPE_NAMES = {COMMIT: b"commit", TREE: b"tree", BLOB: b"blob"}
MODE_TREE = 0o040000
MODE_BLOB = 0o100644


def object_id(kind: int, data: bytes) -> bytes:
    """The 20-byte SHA-1 git gives an object of this kind and content."""
    header = _TYPE_NAMES[kind] + b" " + str(len(data)).encode() + b"\0"
    return hashlib.sha1(header + data).digest()


class Tree:
    """A tree's entries kept with their encoded lines in git's canonical order.

    A day folder holds an entry per message, and a busy day's folder is
    rewritten by every commit. Re-sorting and re-encoding it each time would
    cost in proportion to the whole folder; here an edit splices one line in
    and encoding joins the lines that are already in order.

    A tree also remembers which lines changed since :meth:`mark`, so that a
    new version of a large folder can be written as a few bytes of delta
    against the version marked (:meth:`delta_since_mark`) instead of in full.
    """

    __slots__ = ("_entries", "_keys", "_lines", "_width", "_since")

    def __init__(self, entries: dict[str, tuple[int, bytes]] | None = None):
        self._entries: dict[str, tuple[int, bytes]] = {}
        self._keys: list[bytes] = []
        self._lines: list[bytes] = []
        self._width: int | None = 0  # the length of every line (0: no lines yet; None: lines differ)
        self._since: tuple[int, int | None, int, int] | None = None  # see mark()
        if entries:
            items = sorted((_sort_key(name, mode), _line(name, mode, oid)) for name, (mode, oid) in entries.items())
            self._keys = [key for key, _ in items]
            self._lines = [line for _, line in items]
            self._entries = dict(entries)
            self._measure()

    def _measure(self) -> None:
        widths = {len(line) for line in self._lines}
        self._width = widths.pop() if len(widths) == 1 else (0 if not widths else None)

    def mark(self) -> None:
        """Remember this version: later edits are tracked against it (see :meth:`delta_since_mark`)."""
        count = len(self._lines)
        # (lines then, their width then, first line touched since, lines at the end untouched since)
        self._since = (count, self._width, count, count)

    def _touched(self, at: int, untouched_after: int) -> None:
        if self._since is not None:
            count, width, first, tail = self._since
            self._since = (count, width, min(first, at), min(tail, untouched_after))

    def delta_since_mark(self, encoded: bytes) -> bytes | None:
        """A git delta from the marked version to ``encoded`` (this version), or None if there is none to make.

        Day folders hold names of one length, so every line has the same
        width and the lines untouched at the start and the end are found by
        arithmetic; a folder with lines of different widths is written in full.
        """
        if self._since is None:
            return None
        count, width, first, tail = self._since
        if not width or width != self._width:
            return None
        old_size, new_size = count * width, len(encoded)
        prefix = first * width
        suffix = min(tail * width, old_size - prefix, new_size - prefix)
        return delta_bytes(old_size, new_size, prefix, encoded[prefix:new_size - suffix], suffix)

    @classmethod
    def decode(cls, data: bytes) -> Tree:
        """Read a tree as git stores it (already in canonical order)."""
        tree = cls()
        entries, keys, lines = tree._entries, tree._keys, tree._lines
        pos, end = 0, len(data)
        while pos < end:
            space = data.index(b" ", pos)
            nul = data.index(b"\0", space)
            mode = int(data[pos:space], 8)
            raw = data[space + 1 : nul]
            entries[raw.decode("utf-8", "surrogateescape")] = (mode, data[nul + 1 : nul + 21])
            keys.append(raw + b"/" if mode == MODE_TREE else raw)
            lines.append(data[pos : nul + 21])
            pos = nul + 21
        tree._measure()
        return tree

    def copy(self) -> Tree:
        """An independent copy, marked (its edits are tracked against this version)."""
        tree = Tree()
        tree._entries, tree._keys, tree._lines = dict(self._entries), list(self._keys), list(self._lines)
        tree._width = self._width
        tree.mark()
        return tree

    def get(self, name: str) -> tuple[int, bytes] | None:
        return self._entries.get(name)

    def entries(self) -> Mapping[str, tuple[int, bytes]]:
        """``name -> (mode, oid)``, read-only."""
        return MappingProxyType(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def set(self, name: str, mode: int, oid: bytes) -> None:
        old = self._entries.get(name)
        if old is not None and old[0] != mode:
            self.pop(name)
        key = _sort_key(name, mode)
        at = bisect.bisect_left(self._keys, key)
        line = _line(name, mode, oid)
        if at < len(self._keys) and self._keys[at] == key:
            self._lines[at] = line
        else:
            self._keys.insert(at, key)
            self._lines.insert(at, line)
        self._entries[name] = (mode, oid)
        if self._width == 0:
            self._width = len(line)
        elif self._width != len(line):
            self._width = None
        self._touched(at, len(self._lines) - at - 1)

    def pop(self, name: str) -> None:
        old = self._entries.pop(name, None)
        if old is not None:
            at = bisect.bisect_left(self._keys, _sort_key(name, old[0]))
            del self._keys[at], self._lines[at]
            self._touched(at, len(self._lines) - at)

    def encode(self) -> bytes:
        return b"".join(self._lines)


def _sort_key(name: str, mode: int) -> bytes:
    # git orders a folder as if its name ended in "/"; names are unique, so
    # no two entries share a key.
    raw = name.encode("utf-8", "surrogateescape")
    return raw + b"/" if mode == MODE_TREE else raw


def _line(name: str, mode: int, oid: bytes) -> bytes:
    return b"%o %s\0%s" % (mode, name.encode("utf-8", "surrogateescape"), oid)


def delta_bytes(old_size: int, new_size: int, prefix: int, middle: bytes, suffix: int) -> bytes:
    """A git delta: the base's first ``prefix`` bytes, then ``middle``, then the base's last ``suffix`` bytes."""
    out = bytearray(_varint(old_size) + _varint(new_size))
    _copy(out, 0, prefix)
    for at in range(0, len(middle), 127):  # an insert instruction carries at most 127 bytes
        chunk = middle[at : at + 127]
        out.append(len(chunk))
        out += chunk
    _copy(out, old_size - suffix, suffix)
    return bytes(out)


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _copy(out: bytearray, offset: int, size: int) -> None:
    """Copy instructions for ``size`` bytes of the base from ``offset`` (at most 0xffffff each)."""
    while size > 0:
        step = min(size, 0xFFFFFF)
        op, args = 0x80, bytearray()
        for i in range(4):
            byte = (offset >> (8 * i)) & 0xFF
            if byte:
                op |= 1 << i
                args.append(byte)
        for i in range(3):
            byte = (step >> (8 * i)) & 0xFF
            if byte:
                op |= 1 << (4 + i)
                args.append(byte)
        out.append(op)
        out += args
        offset, size = offset + step, size - step


@dataclass(frozen=True)
class Signature:
    name: str
    email: str
    when: int  # seconds since the epoch, UTC

    def encode(self) -> bytes:
        name = printable(self.name.replace("<", "").replace(">", "").replace("\n", " "), multiline=False)
        email = printable(self.email.replace("<", "").replace(">", "").replace("\n", ""), multiline=False)
        return f"{name} <{email}> {self.when} +0000".encode()


CommitSigner = Callable[[bytes], str]  # a commit's bytes without the signature -> its armored ``gpgsig``


def encode_commit(tree: bytes, parents: list[bytes], author: Signature, committer: Signature, message: str,
                  *, sign: CommitSigner | None = None) -> bytes:
    """A commit object; control characters in ``message`` are written escaped (git history stays printable).

    With ``sign``, the commit carries the signature of its own bytes in a
    ``gpgsig`` header after the committer line, where git puts it (and
    where ``git verify-commit`` takes it out again before checking).
    """
    message = printable(message)
    lines = [b"tree " + tree.hex().encode()]
    lines += [b"parent " + parent.hex().encode() for parent in parents]
    lines.append(b"author " + author.encode())
    lines.append(b"committer " + committer.encode())
    text = (message if message.endswith("\n") else message + "\n").encode("utf-8")
    if sign is None:
        return b"\n".join(lines) + b"\n\n" + text
    armored = sign(b"\n".join(lines) + b"\n\n" + text)
    lines.append(b"gpgsig " + armored.rstrip("\n").replace("\n", "\n ").encode("ascii"))
    return b"\n".join(lines) + b"\n\n" + text


def split_signature(raw: bytes) -> tuple[bytes | None, bytes]:
    """A commit object's ``gpgsig`` value (None when unsigned) and the bytes it signs (the commit without it)."""
    end = raw.find(b"\n\n")
    header = raw if end < 0 else raw[:end + 1]
    at = header.find(b"\ngpgsig ")
    if at < 0:
        return None, raw
    stop = at + 1
    lines: list[bytes] = []
    for line in header[at + 1:].split(b"\n"):
        if lines and not line.startswith(b" "):
            break
        lines.append(line[7:] if not lines else line[1:])
        stop += len(line) + 1
    return b"\n".join(lines) + b"\n", raw[:at + 1] + raw[stop:]


class PackBuffer:
    """New objects of one change, deduplicated, in the order they were added.

    An object may come with a delta against an earlier object of the same
    pack (a tree's previous version in a chain of commits): it is then
    written as git's offset delta, a few bytes where the object itself may
    be a megabyte.
    """

    def __init__(self) -> None:
        # oid -> (kind, data, base, delta); data is None when the object is kept as its delta only
        self._objects: dict[bytes, tuple[int, bytes | None, bytes | None, bytes | None]] = {}

    def add(self, kind: int, data: bytes, *, base: bytes | None = None, delta: bytes | None = None) -> bytes:
        """Add an object; with ``base`` (an object added before) and ``delta``, store it as that delta."""
        oid = object_id(kind, data)
        if oid not in self._objects:
            if base is not None and delta is not None and base in self._objects and base != oid:
                self._objects[oid] = (kind, None, base, delta)
            else:
                self._objects[oid] = (kind, data, None, None)
        return oid

    def __len__(self) -> int:
        return len(self._objects)

    def __contains__(self, oid: bytes) -> bool:
        return oid in self._objects

    def write(self, pack_dir: str, *, durable: bool = True) -> str:
        """Write the objects as ``pack-<sha>.pack`` + ``.idx``; return the pack name.

        Durable writes cost three fsyncs: the pack, the index, the directory.
        The index is renamed into place last, because readers discover packs
        by their index file.
        """
        entries = []  # (oid, offset, crc32)
        offsets: dict[bytes, int] = {}
        chunks = [b"PACK", struct.pack(">II", 2, len(self._objects))]
        offset = 12
        for oid, (kind, data, base, delta) in self._objects.items():
            if data is None:
                assert base is not None and delta is not None
                header = _pack_header(OFS_DELTA, len(delta)) + _base_distance(offset - offsets[base])
                body = zlib.compress(delta, 1)
            else:
                header = _pack_header(kind, len(data))
                body = _deflate(kind, data)
            offsets[oid] = offset
            entries.append((oid, offset, zlib.crc32(body, zlib.crc32(header))))
            chunks.append(header)
            chunks.append(body)
            offset += len(header) + len(body)
        pack = b"".join(chunks)
        pack_sha = hashlib.sha1(pack).digest()
        pack += pack_sha
        index = _encode_index(entries, pack_sha)
        name = "pack-" + pack_sha.hex()
        final_pack = os.path.join(pack_dir, name + ".pack")
        final_index = os.path.join(pack_dir, name + ".idx")
        # Temporary names must not end in .pack or .idx: git and libgit2 take
        # every *.idx in this folder for a pack, and ``git repack`` fails on
        # one that is renamed away while it runs.
        tmp_pack = os.path.join(pack_dir, f"tmp_gm_{os.getpid()}_{name}_pack")
        tmp_index = os.path.join(pack_dir, f"tmp_gm_{os.getpid()}_{name}_idx")
        _write_file(tmp_pack, pack, durable)
        _write_file(tmp_index, index, durable)
        os.replace(tmp_pack, final_pack)
        os.replace(tmp_index, final_index)
        if durable:
            fsync_dir(pack_dir)
        return name


def _base_distance(distance: int) -> bytes:
    """How far back an offset delta's base starts, in git's encoding (big-endian, each byte but the last +1)."""
    out = [distance & 0x7F]
    distance >>= 7
    while distance:
        distance -= 1
        out.append(0x80 | (distance & 0x7F))
        distance >>= 7
    return bytes(reversed(out))


def _deflate(kind: int, data: bytes) -> bytes:
    """The zlib stream of one packed object.

    Small trees and commits (some dozen per commit, each a few hundred bytes
    at most) are stored uncompressed: every ``zlib.compress`` call hands the
    interpreter lock to another thread and waits to get it back, which under
    load cost more than compressing them saves. Large trees (busy day
    folders, up to tens of thousands of entries and a megabyte and more) are
    stored too: compressing one took up to 20 ms per commit, and names and
    ids compress by a third at most; pack consolidation writes them compactly
    (as deltas) soon after. Blobs and trees in between are compressed.
    """
    if kind == BLOB or _STORE_AT_MOST < len(data) < _STORE_FROM:
        return zlib.compress(data, 1)
    # A zlib header (no compression), stored deflate blocks of at most 65535 bytes, the Adler-32 checksum.
    blocks = [b"\x78\x01"]
    for at in range(0, max(len(data), 1), 0xFFFF):
        chunk = data[at : at + 0xFFFF]
        final = 1 if at + 0xFFFF >= len(data) else 0
        blocks.append(struct.pack("<BHH", final, len(chunk), 0xFFFF ^ len(chunk)))
        blocks.append(chunk)
    blocks.append(struct.pack(">I", zlib.adler32(data)))
    return b"".join(blocks)


_STORE_AT_MOST = 1024  # bytes: smaller trees and commits are stored uncompressed...
_STORE_FROM = 32 * 1024  # ...and so are trees from this size on (a busy agent's day folder holds a few hundred)


def _pack_header(kind: int, size: int) -> bytes:
    byte = (kind << 4) | (size & 0x0F)
    size >>= 4
    out = bytearray()
    while size:
        out.append(byte | 0x80)
        byte = size & 0x7F
        size >>= 7
    out.append(byte)
    return bytes(out)


def _encode_index(entries: list[tuple[bytes, int, int]], pack_sha: bytes) -> bytes:
    entries = sorted(entries)
    fanout = [0] * 256
    for oid, _, _ in entries:
        fanout[oid[0]] += 1
    total = 0
    for i in range(256):
        total += fanout[i]
        fanout[i] = total
    small: list[int] = []
    large: list[int] = []
    for _, offset, _ in entries:
        if offset < 0x80000000:
            small.append(offset)
        else:
            small.append(0x80000000 | len(large))
            large.append(offset)
    parts = [
        b"\xfftOc",
        struct.pack(">I", 2),
        struct.pack(">256I", *fanout),
        b"".join(oid for oid, _, _ in entries),
        struct.pack(f">{len(entries)}I", *(crc for _, _, crc in entries)),
        struct.pack(f">{len(small)}I", *small),
        struct.pack(f">{len(large)}Q", *large),
        pack_sha,
    ]
    body = b"".join(parts)
    return body + hashlib.sha1(body).digest()


def _write_file(path: str, data: bytes, durable: bool) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o444)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
