"""``gitmail serve`` over HTTP on a clock the benchmark moves, for soaks over simulated days.

Run: ``python benchmarks/serve_clocked.py PORT CLOCK_FILE`` with ``GITMAIL_HOME``
set. The server is the one ``gitmail serve`` runs (same parts and background
services); only its store's wall time differs: the system's time plus an
offset in seconds that the benchmark writes into ``CLOCK_FILE`` (eight bytes,
a little-endian double, read through a shared mapping so each reading costs
no system call). Moving the offset forward moves every timestamp, record ID,
commit time, expiry and day folder of the server together, as
``Store(home, wall=...)`` does in tests.
"""

from __future__ import annotations

import mmap
import os
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from gitmail.server.serve import serve_http
from gitmail.storage.store import Store

OFFSET = struct.Struct("<d")


class MappedOffsetClock:
    """Wall time: the system's plus the offset found in a file another process writes."""

    def __init__(self, path: str):
        with open(path, "rb") as handle:
            self._view = mmap.mmap(handle.fileno(), OFFSET.size, prot=mmap.PROT_READ)

    def __call__(self) -> float:
        return time.time() + OFFSET.unpack_from(self._view)[0]


def write_offset(path: str, seconds: float) -> None:
    """Set the offset the server's clock adds (creates the file the first time)."""
    with open(path, "r+b" if os.path.exists(path) else "wb") as handle:
        handle.write(OFFSET.pack(seconds))


def main() -> None:
    serve_http(Store(wall=MappedOffsetClock(sys.argv[2])), port=int(sys.argv[1]))


if __name__ == "__main__":
    main()
