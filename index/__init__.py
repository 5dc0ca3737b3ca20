"""Derived state of gitmail archives: search, hot-read cache, cursors.

Everything here is computed from the repository and may be deleted at any
time (``gitmail reindex`` or the next read rebuilds it). Installed as
``gitmail.index``.

Entry points:

- :func:`indexer_for` (``store``) → :class:`Indexer` (a server also calls
  ``.write_search_in_child()``, see :mod:`.search_process`); ``.project(key)`` →
  :class:`ProjectIndex` with ``search``, ``inbox``, ``outbox``, ``agents``,
  ``reservations``, ``active_reservations``, ``messages_after``,
  ``newest_arrivals``, ``high_watermark``, ``wait``, ``catch_up`` and
  ``reindex``.
- :func:`search_messages` (``store, project_key, query, limit, agent_name``).
- :func:`parse_query` checks a query without running it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .indexer import Indexer, indexer_for, search_messages
from .meta import IndexUnavailable
from .project import ProjectIndex

if TYPE_CHECKING:
    from .query import parse_query

__all__ = ["IndexUnavailable", "Indexer", "ProjectIndex", "indexer_for", "parse_query", "search_messages"]


def __getattr__(name: str) -> Any:
    # Whoosh loads with the query parser, on first use: inbox reads and the
    # catch-up never need it.
    if name == "parse_query":
        from .query import parse_query

        return parse_query
    raise AttributeError(f"module 'gitmail.index' has no attribute {name!r}")
