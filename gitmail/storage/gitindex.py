"""Entries written into a checkout's split git index without reading its shared part.

The human checkout keeps git's split index (``core.splitIndex``): a large
``sharedindex.<id>`` file holding most entries, and a small ``index`` file
holding the entries added or changed since, which names the shared one in
its ``link`` extension. git itself reads the whole shared part before every
update, a cost that grows with the archive. A refresh that only adds or
changes files needs none of it: when git loads the index, an entry of the
small part replaces the shared entry of the same path. So :func:`put_entries`
rewrites the small file alone, with the new entries merged in, under git's
own ``index.lock``.

It declines (returns ``"git"``) whenever the file is not the plain shape it
knows (not split, another format version, entries in conflict or with
extended flags, an extension git requires that is not ``link``), and the
caller lets ``git update-index`` do the work; when the small part has grown
past :data:`SPLIT_LIMIT` entries it says so (``"fold"``), and git is asked
to fold it into a new shared index, so the small part stays small.
Optional extensions (the cache tree, the untracked cache, offset tables)
are dropped: they describe the old entries, and git rebuilds them when it
needs them.
"""

from __future__ import annotations

import hashlib
import os
import stat
import struct

SPLIT_LIMIT = 5000  # entries in the small part before git folds them into a new shared index
_HEADER = struct.Struct(">4sLL")
_FIXED = struct.Struct(">10L20sH")  # ctime s/ns, mtime s/ns, dev, ino, mode, uid, gid, size; oid; flags
_NAME_MASK = 0x0FFF
_EXTENDED = 0x4000
_STAGE = 0x3000
_KEPT_EXTENSIONS = (b"link", b"REUC")  # REUC only records how conflicts were resolved: still true


class _Unknown(Exception):
    """The index is not in a shape this module writes; git should do the work."""


def put_entries(git_dir: str, entries: list[tuple[str, int, bytes, os.stat_result]]) -> str:
    """Add or replace ``entries`` (path, mode, raw object id, the file's stat) in the checkout's index.

    Returns ``"done"``; ``"git"`` when git should do it instead, or
    ``"fold"`` when it should also fold the small part into a new shared
    index (see the module's docstring); or ``"busy"`` when someone holds
    ``index.lock``.
    """
    path = os.path.join(git_dir, "index")
    try:
        with open(path, "rb") as handle:
            data = handle.read()
        version, kept, extensions = _parse(data)
    except (OSError, _Unknown, struct.error):
        return "git"
    link = next((body for sig, body in extensions if sig == b"link"), None)
    if link is None or not os.path.exists(os.path.join(git_dir, "sharedindex." + link[:20].hex())):
        return "git"
    replacements, added = kept
    for path_name, mode, oid, st in entries:
        added[path_name.encode()] = _entry(path_name.encode(), mode, oid, st)
    if len(added) > SPLIT_LIMIT:
        return "fold"
    body = bytearray(_HEADER.pack(b"DIRC", version, len(replacements) + len(added)))
    for raw in replacements:
        body += raw
    for name in sorted(added):
        body += added[name]
    for sig, ext in extensions:
        body += sig + struct.pack(">L", len(ext)) + ext
    body += hashlib.sha1(body).digest()  # noqa: S324 - git's own checksum of the file, not a security measure
    lock = path + ".lock"
    try:
        fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return "busy"
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(body)
        os.replace(lock, path)
    except BaseException:
        try:
            os.unlink(lock)
        except FileNotFoundError:
            pass
        raise
    return "done"


def _parse(data: bytes) -> tuple[int, tuple[list[bytes], dict[bytes, bytes]], list[tuple[bytes, bytes]]]:
    """(version, (replacement entries, added entries by name), kept extensions) of a small split index."""
    if len(data) < _HEADER.size + 20 or hashlib.sha1(data[:-20]).digest() != data[-20:]:  # noqa: S324
        raise _Unknown("short or damaged")
    signature, version, count = _HEADER.unpack_from(data)
    if signature != b"DIRC" or version not in (2, 3):
        raise _Unknown(f"index version {version}")
    offset = _HEADER.size
    replacements: list[bytes] = []
    added: dict[bytes, bytes] = {}
    for _ in range(count):
        flags = _FIXED.unpack_from(data, offset)[-1]
        if flags & (_EXTENDED | _STAGE):
            raise _Unknown("an entry in conflict or with extended flags")
        start = offset + _FIXED.size
        end = data.index(b"\0", start)
        name = data[start:end]
        size = (_FIXED.size + len(name) + 8) & ~7
        raw = data[offset:offset + size]
        if name:
            added[name] = raw
        else:
            replacements.append(raw)  # replaces the shared entry its bit names; kept in order, first
        offset += size
    extensions = []
    while offset < len(data) - 20:
        signature, length = struct.unpack_from(">4sL", data, offset)
        body = data[offset + 8:offset + 8 + length]
        offset += 8 + length
        if signature in _KEPT_EXTENSIONS:
            extensions.append((signature, body))
        elif not signature[:1].isupper():
            raise _Unknown(f"required extension {signature!r}")
    return version, (replacements, added), extensions


def _entry(name: bytes, mode: int, oid: bytes, st: os.stat_result) -> bytes:
    """One index entry (format 2) for a regular file with the stat data git records."""
    mask = 0xFFFFFFFF
    git_mode = stat.S_IFREG | (0o755 if mode & 0o111 else 0o644)
    fixed = _FIXED.pack(int(st.st_ctime) & mask, st.st_ctime_ns % 1_000_000_000, int(st.st_mtime) & mask,
                        st.st_mtime_ns % 1_000_000_000, st.st_dev & mask, st.st_ino & mask, git_mode,
                        st.st_uid & mask, st.st_gid & mask, st.st_size & mask, oid, min(len(name), _NAME_MASK))
    size = (_FIXED.size + len(name) + 8) & ~7
    return (fixed + name).ljust(size, b"\0")
