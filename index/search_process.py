"""Search-index writes in a helper process, off the server's interpreter.

Taking queued messages into Whoosh and merging its segments is pure Python
work that holds the interpreter lock for as long as it runs; in a server
that also answers every MCP call from one interpreter, it competes with
those calls. A :class:`SearchWriter` hands each drain and merge to one child
process instead (running :func:`main` below) and waits for
it without holding the lock.

Nothing about the index changes: the child writes the same generation under
the same writer lock, takes the same queue off the metadata store, and a
search notices its commits as it would another process's. Every request
opens the project afresh (a few milliseconds against a drain's hundreds),
so a metadata store or generation replaced by the owner is never written
through a stale handle. A child found dead is replaced at the next write; if
the child fails or dies during a write, the caller does the write itself.
The queue is only emptied by a finished write, so nothing is lost either way.

A child's memory only ever grows: a drain builds its postings in Python
objects (a merge joins posting lists a term at a time, see :mod:`.merge`),
and the interpreter rarely hands freed arenas back to the system, so the
largest write so far sets the child's size for good. Once
its resident memory passes :data:`RSS_LIMIT` after a write, the child is
stopped between writes and the next write starts a fresh one (a few hundred
milliseconds of start-up, once in many merges), which bounds the helper's
memory whatever the server's uptime.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import threading
from typing import TYPE_CHECKING, Any

from gitmail.storage.handles import open_repository
from gitmail.storage.snapshot import blob_data

from .meta import Meta

if TYPE_CHECKING:
    from .search import SearchIndex

_log = logging.getLogger("gitmail.index")

OPERATIONS = ("drain", "merge")
_CHILD = "from gitmail.index.search_process import main; main()"
NICENESS = 10  # the helper's scheduling priority below the server's, as for pack consolidation
RSS_LIMIT = 96 << 20  # a child above this resident size after a write is replaced before the next one


class SearchWriterFailed(Exception):
    """The child could not do the write (it said why, or it is gone)."""


class SearchWriter:
    """One child process doing search-index writes for every project of a store, one at a time."""

    def __init__(self, command: list[str] | None = None, *, rss_limit: int = RSS_LIMIT) -> None:
        """``command`` is the child's command line (default: this interpreter running :func:`main`).

        ``rss_limit`` is the resident size in bytes above which a child is replaced after its write.
        """
        self.command = command or [sys.executable, "-c", _CHILD]
        self.rss_limit = rss_limit
        self.replaced = 0  # children stopped for their size, for reports and benchmarks
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        """The child's process id, or None before the first write (and after it died)."""
        proc = self._proc
        return proc.pid if proc is not None and proc.poll() is None else None

    def run(self, op: str, *, git_dir: str, search_root: str, meta_path: str) -> Any:
        """Do ``op`` (drain or merge) on one project's search index in the child; its result.

        A child kept from an earlier write may have died since (killed, out
        of memory) without this process noticing yet: then a new child is
        started and does this write. Raises SearchWriterFailed if the child
        reports an error, or if a child started for this write dies too.
        """
        if op not in OPERATIONS:
            raise ValueError(f"unknown search-index operation {op!r}")
        request = json.dumps({"op": op, "git_dir": git_dir, "search_root": search_root,
                              "meta_path": meta_path}).encode() + b"\n"
        with self._lock:
            kept = self._proc is not None and self._proc.poll() is None  # believed alive
            try:
                line = self._ask(request)
            except SearchWriterFailed:
                if not kept:
                    raise
                line = self._ask(request)  # a write may run twice: the queue empties only when one finishes
            self._replace_if_large()
        reply = json.loads(line)
        if not reply["ok"]:
            raise SearchWriterFailed(reply["error"])
        return reply["result"]

    def _ask(self, request: bytes) -> bytes:
        """Send one request to the child (started if there is none) and read its reply line."""
        proc = self._child()
        try:
            assert proc.stdin is not None and proc.stdout is not None
            proc.stdin.write(request)
            proc.stdin.flush()
            line = proc.stdout.readline()
        except OSError as exc:
            self._discard()
            raise SearchWriterFailed(f"the search writer process is gone ({exc})") from exc
        if not line:
            self._discard()
            raise SearchWriterFailed("the search writer process exited")
        return line

    def _replace_if_large(self) -> None:
        """Stop the child (idle now: it has answered) if it grew past the limit; the next write starts another."""
        proc = self._proc
        if proc is None or _resident_bytes(proc.pid) <= self.rss_limit:
            return
        self._proc = None
        self.replaced += 1
        _stop(proc, timeout=30.0)

    def _child(self) -> subprocess.Popen[bytes]:
        if self._proc is not None and self._proc.poll() is not None:
            self._discard()  # gone: release its pipes before starting the next
        if self._proc is None:
            self._proc = subprocess.Popen(self.command,
                                          stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        return self._proc

    def _discard(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            proc.kill()
            proc.wait()
            for pipe in (proc.stdin, proc.stdout):
                if pipe is not None:
                    pipe.close()

    def close(self, timeout: float = 30.0) -> None:
        """Let the child finish the write in hand, then stop it."""
        with self._lock:
            proc, self._proc = self._proc, None
        if proc is not None:
            _stop(proc, timeout)


def _stop(proc: subprocess.Popen[bytes], timeout: float) -> None:
    """End a child between requests: closing its input ends its loop (killed if it does not exit in time)."""
    assert proc.stdin is not None
    try:
        proc.stdin.close()
        proc.wait(timeout)
    except (OSError, subprocess.TimeoutExpired):
        proc.kill()
        proc.wait()
    finally:
        if proc.stdout is not None:
            proc.stdout.close()


def _resident_bytes(pid: int) -> int:
    """A process's resident memory (0 if it is gone)."""
    try:
        with open(f"/proc/{pid}/statm") as handle:
            return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (FileNotFoundError, ProcessLookupError, IndexError, ValueError):
        return 0


def write(index: SearchIndex, op: str, *, refresh: bool = True) -> Any:
    """Do ``op`` on ``index`` here: a drain (waiting for the writer lock) or a merge; its result."""
    if op == "drain":
        return index.drain(wait=True, refresh=refresh)
    if op == "merge":
        return index.consolidate(refresh=refresh)
    raise ValueError(f"unknown search-index operation {op!r}")


def _serve_one(request: dict[str, Any]) -> Any:
    from .search import SearchIndex

    repo = open_repository(request["git_dir"])
    index = SearchIndex(request["search_root"], Meta(request["meta_path"], check=False),
                        lambda oid: blob_data(repo, oid))
    try:
        return write(index, request["op"], refresh=False)
    finally:
        index.close()


def main() -> None:
    """The child: one JSON request per line on stdin, one JSON reply per line on stdout, until EOF."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # an interrupted server stops its child by closing stdin
    os.nice(NICENESS)  # background work: on a busy machine the server's answers come first
    out = sys.stdout.buffer
    for line in sys.stdin.buffer:
        try:
            reply = {"ok": True, "result": _serve_one(json.loads(line))}
        except Exception as exc:  # noqa: BLE001 - reported to the parent, which writes itself instead
            _log.exception("search-index write failed")
            reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        out.write(json.dumps(reply).encode() + b"\n")
        out.flush()
