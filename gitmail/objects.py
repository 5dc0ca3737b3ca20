"""Git objects built in memory and written durably as one pack per commit.

The engine does not let libgit2 write loose objects: a message would leave
some twenty small files behind, each needing its own fsync to be durable.
Instead it hashes the blobs, trees and commit of a change here, streams them
into a single pack file with its index, and makes that pack durable with a
fixed number of fsyncs whatever the change contains. Git and libgit2 read the
result like any other pack; background maintenance folds the small packs
together (see :mod:`gitmail.maintenance`).
"""

from __future__ import annotations

import hashlib
import os
import struct
import zlib
from dataclasses import dataclass

COMMIT, TREE, BLOB = 1, 2, 3
_TYPE_NAMES = {COMMIT: b"commit", TREE: b"tree", BLOB: b"blob"}
MODE_TREE = 0o040000
MODE_BLOB = 0o100644


def object_id(kind: int, data: bytes) -> bytes:
    """The 20-byte SHA-1 git gives an object of this kind and content."""
    header = _TYPE_NAMES[kind] + b" " + str(len(data)).encode() + b"\0"
    return hashlib.sha1(header + data).digest()


def encode_tree(entries: dict[str, tuple[int, bytes]]) -> bytes:
    """Serialize ``name -> (mode, oid)`` in git's canonical tree order."""

    items = []
    for name, (mode, oid) in entries.items():
        raw = name.encode("utf-8")
        # git orders a folder as if its name ended in "/"; names are unique,
        # so the sort never compares the encoded entries themselves.
        items.append((raw + b"/" if mode == MODE_TREE else raw, b"%o %s\0%s" % (mode, raw, oid)))
    items.sort()
    return b"".join([entry for _, entry in items])


def decode_tree(data: bytes) -> dict[str, tuple[int, bytes]]:
    entries: dict[str, tuple[int, bytes]] = {}
    pos, end = 0, len(data)
    while pos < end:
        space = data.index(b" ", pos)
        nul = data.index(b"\0", space)
        mode = int(data[pos:space], 8)
        name = data[space + 1 : nul].decode("utf-8", "surrogateescape")
        entries[name] = (mode, data[nul + 1 : nul + 21])
        pos = nul + 21
    return entries


@dataclass(frozen=True)
class Signature:
    name: str
    email: str
    when: int  # seconds since the epoch, UTC

    def encode(self) -> bytes:
        name = self.name.replace("<", "").replace(">", "").replace("\n", " ")
        email = self.email.replace("<", "").replace(">", "").replace("\n", "")
        return f"{name} <{email}> {self.when} +0000".encode("utf-8")


def encode_commit(tree: bytes, parents: list[bytes], author: Signature, committer: Signature, message: str) -> bytes:
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
            body = zlib.compress(data, 1)
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
    small, large = [], []
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
