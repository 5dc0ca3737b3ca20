"""Noticing outside changes to archives: a file watcher on their refs.

The engine tells its own listeners about every commit this process makes.
Everything else that moves an archive's ``main`` — a ``git push`` into it, a
``git pull`` or commit by a human, a sync or a write from another process —
shows up as a change under ``refs/`` or to ``packed-refs`` in the bare
repository (git writes a ref as a new file renamed into place). The archive
hooks in ``hooks/archive`` also touch ``gitmail.poke`` there, a cheap extra
nudge. :class:`Watcher` follows those files for every archive of a store and
calls ``on_change(slug)`` shortly after (debounced), from its own thread; the
callback is expected to wake an idempotent catch-up, such as the index's.

Only the folders where those files live are watched (the repository's own
folder and each folder under ``refs/``), not the object store: every commit
writes a pack there, and a consolidation rewrites dozens, events the watcher
would read and throw away while the server is busiest. A folder that appears
under ``refs/`` later (a first remote) is watched from the next round.

Between events the watcher looks for news every ``step_ms`` (25 ms), taking
the interpreter's lock each time to see whether it should stop; at 5 ms that
was 200 takes a second from a thread that mostly finds nothing, on a lock
the server's requests need. An outside move is reported about 25 to 50 ms
after it happened, well inside the time a push takes.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable

import watchfiles

from gitmail.storage.store import Store

_log = logging.getLogger("gitmail.sync.watch")

POKE_FILE = "gitmail.poke"
_RESCAN_MS = 1000  # how often a quiet watcher looks for projects created meanwhile


def ref_event(git_dir: str, path: str) -> bool:
    """Whether a file event at ``path``, inside ``git_dir``, says that a ref may have moved."""
    rel = path[len(git_dir) + len(os.sep):]
    if rel.endswith(".lock"):
        return False
    return rel.startswith("refs" + os.sep) or rel in ("packed-refs", POKE_FILE)


def ref_folders(git_dir: str) -> list[str]:
    """The folders whose files say where an archive's refs point: its own, then every one under ``refs/``."""
    return [git_dir] + sorted(folder for folder, _subfolders, _files in os.walk(os.path.join(git_dir, "refs")))


def _new_ref_folder(path: str, targets: dict[str, str], watched: list[str]) -> bool:
    """Whether ``path`` is a folder under some archive's ``refs/`` that is not watched yet."""
    return (path not in watched and any(path.startswith(os.path.join(git_dir, "refs", "")) for git_dir in targets)
            and os.path.isdir(path))


class Watcher:
    """Watches every archive of ``store`` and calls ``on_change(slug)`` after outside ref moves.

    ``start()`` runs it in a daemon thread, ``stop()`` ends it; both are
    idempotent, so a server can own one for its lifetime. Projects created
    after the start are picked up within about a second.
    """

    def __init__(self, store: Store, on_change: Callable[[str], None], *, step_ms: int = 25, debounce_ms: int = 50):
        self.store = store
        self.on_change = on_change
        self.step_ms = step_ms
        self.debounce_ms = debounce_ms
        self.events = 0  # ref changes seen, for reports and tests
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()

    def start(self) -> Watcher:
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name="gitmail-watch", daemon=True)
            self._thread.start()
            self._ready.wait(5)
        return self

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(timeout)

    def __enter__(self) -> Watcher:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _targets(self) -> dict[str, str]:
        return {self.store.paths(slug).archive: slug for slug in self.store.slugs()}

    def _folders(self, targets: dict[str, str]) -> list[str]:
        """The folders to watch: each archive's own and those under its ``refs/`` (else the projects folder)."""
        if not targets:
            return [os.path.join(self.store.home, "projects")]
        return [folder for git_dir in targets for folder in ref_folders(git_dir)]

    def _run(self) -> None:
        watched: dict[str, frozenset[str]] = {}  # each archive's folders as last watched
        while not self._stop.is_set():
            targets = self._targets()
            paths = self._folders(targets)
            for git_dir, slug in targets.items():
                folders = frozenset(ref_folders(git_dir))
                if watched.get(git_dir, folders) != folders:
                    self._notify(slug)  # a ref may have moved in a folder before it was watched
                watched[git_dir] = folders
            try:
                self._watch(targets, paths)
            except Exception:  # noqa: BLE001 - keep watching; a vanished project must not end the thread
                _log.exception("archive watcher failed; restarting")
                self._stop.wait(0.5)

    def _watch(self, targets: dict[str, str], paths: list[str]) -> None:
        self._ready.set()
        for changes in watchfiles.watch(*paths, watch_filter=None, step=self.step_ms, debounce=self.debounce_ms,
                                        stop_event=self._stop, rust_timeout=_RESCAN_MS, yield_on_timeout=True,
                                        recursive=False):
            if self._stop.is_set():
                return
            if not changes:
                if set(self._targets()) != set(targets) or self._folders(targets) != paths:
                    return  # a project, or a folder under refs/, appeared or vanished: watch the new set
                continue
            moved = set()
            for _change, path in changes:
                for git_dir, slug in targets.items():
                    if path.startswith(git_dir + os.sep) and ref_event(git_dir, path):
                        moved.add(slug)
            for slug in sorted(moved):
                self._notify(slug)
            if not targets or any(_new_ref_folder(path, targets, paths) for _change, path in changes):
                return  # the first project, or a new folder under refs/, appeared: watch the new set

    def _notify(self, slug: str) -> None:
        self.events += 1
        try:
            self.on_change(slug)
        except Exception:  # noqa: BLE001 - one failing callback must not stop the watcher
            _log.exception("watch callback failed for %s", slug)
