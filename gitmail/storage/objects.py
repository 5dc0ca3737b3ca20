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
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from gitmail.model.controls import printable

COMMIT, TREE, BLOB = 1, 2, 3
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
    """

    __slots__ = ("_entries", "_keys", "_lines")

    def __init__(self, entries: dict[str, tuple[int, bytes]] | None = None):
        self._entries: dict[str, tuple[int, bytes]] = {}
        self._keys: list[bytes] = []
        self._lines: list[bytes] = []
        if entries:
            items = sorted((_sort_key(name, mode), _line(name, mode, oid)) for name, (mode, oid) in entries.items())
            self._keys = [key for key, _ in items]
            self._lines = [line for _, line in items]
            self._entries = dict(entries)

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
        return tree

    def copy(self) -> Tree:
        tree = Tree()
        tree._entries, tree._keys, tree._lines = dict(self._entries), list(self._keys), list(self._lines)
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

    def pop(self, name: str) -> None:
        old = self._entries.pop(name, None)
        if old is not None:
            at = bisect.bisect_left(self._keys, _sort_key(name, old[0]))
            del self._keys[at], self._lines[at]

    def encode(self) -> bytes:
        return b"".join(self._lines)


def _sort_key(name: str, mode: int) -> bytes:
    # git orders a folder as if its name ended in "/"; names are unique, so
    # no two entries share a key.
    raw = name.encode("utf-8", "surrogateescape")
    return raw + b"/" if mode == MODE_TREE else raw


def _line(name: str, mode: int, oid: bytes) -> bytes:
    return b"%o %s\0%s" % (mode, name.encode("utf-8", "surrogateescape"), oid)


@dataclass(frozen=True)
class Signature:
    name: str
    email: str
    when: int  # seconds since the epoch, UTC

    def encode(self) -> bytes:
        name = printable(self.name.replace("<", "").replace(">", "").replace("\n", " "), multiline=False)
        email = printable(self.email.replace("<", "").replace(">", "").replace("\n", ""), multiline=False)
        return f"{name} <{email}> {self.when} +0000".encode()


def encode_commit(tree: bytes, parents: list[bytes], author: Signature, committer: Signature, message: str) -> bytes:
    """A commit object; control characters in ``message`` are written escaped (git history stays printable)."""
    message = printable(message)
    lines = [b"tree " + tree.hex().encode()]
    lines += [b"parent " + parent.hex().encode() for parent in parents]
    lines.append(b"author " + author.encode())
    lines.append(b"committer " + committer.encode())
    text = message if message.endswith("\n") else message + "\n"
    return b"\n".join(lines) + b"\n\n" + text.encode("utf-8")


class PackBuffer:
    """New objects of one change, deduplicated, in the order they were added."""

    def __init__(self) -> None:
        self._objects: dict[bytes, tuple[int, bytes]] = {}

    def add(self, kind: int, data: bytes) -> bytes:
        oid = object_id(kind, data)
        self._objects.setdefault(oid, (kind, data))
        return oid

    def __len__(self) -> int:
        return len(self._objects)

    def __contains__(self, oid: bytes) -> bool:
        return oid in self._objects

    def get(self, oid: bytes) -> tuple[int, bytes] | None:
        return self._objects.get(oid)

    def write(self, pack_dir: str, *, durable: bool = True) -> str:
        """Write the objects as ``pack-<sha>.pack`` + ``.idx``; return the pack name.

        Durable writes cost three fsyncs: the pack, the index, the directory.
        The index is renamed into place last, because readers discover packs
        by their index file.
        """
        entries = []  # (oid, offset, crc32)
        chunks = [b"PACK", struct.pack(">II", 2, len(self._objects))]
        offset = 12
        for oid, (kind, data) in self._objects.items():
            header = _pack_header(kind, len(data))
            body = _deflate(kind, data)
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


def _deflate(kind: int, data: bytes) -> bytes:
    """The zlib stream of one packed object.

    Small trees and commits (some dozen per commit, each a few hundred bytes
    at most) are stored uncompressed: every ``zlib.compress`` call hands the
    interpreter lock to another thread and waits to get it back, which under
    load cost more than compressing them saves. Blobs and large trees (a
    busy day folder) are compressed, so the archive stays as small.
    """
    if kind == BLOB or len(data) > _STORE_AT_MOST:
        return zlib.compress(data, 1)
    # A zlib header (no compression), one final stored deflate block, the Adler-32 checksum.
    header = b"\x78\x01" + struct.pack("<BHH", 1, len(data), 0xFFFF ^ len(data))
    return header + data + struct.pack(">I", zlib.adler32(data))


_STORE_AT_MOST = 1024  # bytes: larger trees and commits are compressed (one stored block holds 65535)


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
