"""Derived state for a whole store: one :class:`ProjectIndex` per project.

``indexer_for(store)`` gives the store's :class:`Indexer` (one per Store
object). Asking it for a project opens that project's derived state and
attaches it to the archive, so every commit this process makes is taken in
by a background catch-up moments later.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

from gitmail.storage.store import Store

from .project import ProjectIndex
from .search_process import SearchWriter


class Indexer:
    """Opens and keeps each project's derived state in step with its archive."""

    def __init__(self, store: Store):
        self.store = store
        self._projects: dict[str, ProjectIndex] = {}
        self._lock = threading.Lock()
        self._search_writer: SearchWriter | None = None

    def write_search_in_child(self) -> None:
        """Run background search-index writes in a helper process from now on (for a server).

        Those writes hold the interpreter for as long as they run; in a
        helper process they no longer delay the answers to other calls.
        """
        with self._lock:
            if self._search_writer is None:
                self._search_writer = SearchWriter()
            for index in self._projects.values():
                index.search_writer = self._search_writer

    def project(self, project_key: str) -> ProjectIndex:
        """The derived state of a project (NOT_FOUND if there is no such project)."""
        slug = self.store.resolve(project_key)
        with self._lock:
            index = self._projects.get(slug)
            if index is None:
                archive = self.store.archive(project_key)
                index = ProjectIndex(archive, self.store.paths(slug).derived, self._search_writer)
                archive.add_listener(index.on_commit)
                self._projects[slug] = index
            return index

    def attach_all(self) -> list[str]:
        """Open every project of the store (for a server that serves them all)."""
        slugs = self.store.slugs()
        for slug in slugs:
            self.project(slug)
        return slugs

    def search_messages(self, project_key: str, query: str, limit: int = 20,
                        agent_name: str | None = None, *, exhaustive: bool = False) -> list[dict[str, Any]]:
        """Search a project's messages; see :meth:`ProjectIndex.search`."""
        return self.project(project_key).search(query, limit, agent_name, exhaustive=exhaustive)

    def rebuilds(self) -> dict[str, tuple[int, int]]:
        """The search-index rebuilds running in this process: project slug -> (messages indexed, of)."""
        with self._lock:
            projects = dict(self._projects)
        return {slug: progress for slug, index in projects.items() if (progress := index.rebuild_progress())}

    def flush(self, timeout: float = 60.0) -> None:
        """Wait until every project's background catch-up is idle."""
        with self._lock:
            projects = list(self._projects.values())
        for index in projects:
            index.flush(timeout)

    def close(self) -> None:
        with self._lock:
            projects, self._projects = list(self._projects.values()), {}
            writer, self._search_writer = self._search_writer, None
        for index in projects:
            index.close()
        if writer is not None:
            writer.close()


_indexers: weakref.WeakKeyDictionary[Store, Indexer] = weakref.WeakKeyDictionary()
_indexers_lock = threading.Lock()


def indexer_for(store: Store) -> Indexer:
    """The one :class:`Indexer` of ``store``."""
    with _indexers_lock:
        indexer = _indexers.get(store)
        if indexer is None:
            indexer = _indexers[store] = Indexer(store)
        return indexer


def search_messages(store: Store, project_key: str, query: str, limit: int = 20,
                    agent_name: str | None = None, *, exhaustive: bool = False) -> list[dict[str, Any]]:
    """Search a project's messages: best first, each ``{id, subject, importance,
    ack_required, created_ts, thread_id, from, topic, score, snippet, bounded}``.

    The newest matches are ranked (``bounded`` says whether older ones were
    left out) unless ``exhaustive``.
    """
    return indexer_for(store).search_messages(project_key, query, limit, agent_name, exhaustive=exhaustive)
