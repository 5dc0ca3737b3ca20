"""gitmail: mail and coordination for coding agents, stored in git.

The public API is what this module exports (``__all__``, kept exact by a
test); everything else is internal and may change. The subpackages are the
layers, from the bottom: ``model`` (records and paths), ``storage`` (the
repository engine, :class:`Archive`, and the store of projects,
:class:`Store`), ``gitmail.index`` (derived state), ``coord`` and ``mail`` (the
domain, behind :class:`Mail`), ``sync``, then the MCP server and the CLI on
top; docs/architecture.md says what each may import.

Each export is imported on first use (a module-level ``__getattr__``), so
``import gitmail`` and every ``gitmail.*`` import stay cheap: the CLI answers
``--help`` without loading git, search or the MCP server.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from gitmail.model.version import __version__

__all__ = [
    "Agent",
    "Archive",
    "Change",
    "Committed",
    "Contact",
    "GitmailError",
    "HLC",
    "HybridClock",
    "JournalEntry",
    "Mail",
    "Message",
    "Project",
    "Receipt",
    "Record",
    "Reservation",
    "Seat",
    "Snapshot",
    "Store",
    "__version__",
    "new_id",
    "slug_for",
]

# Where each export lives: module -> the public names it defines.
_SOURCES = {
    "gitmail.mail.facade": ("Mail",),
    "gitmail.model.clock": ("HLC", "HybridClock"),
    "gitmail.model.errors": ("GitmailError",),
    "gitmail.model.ids": ("new_id",),
    "gitmail.model.records": ("Agent", "Contact", "JournalEntry", "Message", "Project", "Receipt", "Record",
                              "Reservation", "Seat"),
    "gitmail.storage.engine": ("Archive", "Change", "Committed"),
    "gitmail.storage.snapshot": ("Snapshot",),
    "gitmail.storage.store": ("Store", "slug_for"),
}
_EXPORTS = {name: module for module, names in _SOURCES.items() for name in names}

if TYPE_CHECKING:  # what type checkers and editors see; at run time __getattr__ serves these
    from gitmail.mail.facade import Mail
    from gitmail.model.clock import HLC, HybridClock
    from gitmail.model.errors import GitmailError
    from gitmail.model.ids import new_id
    from gitmail.model.records import (
        Agent,
        Contact,
        JournalEntry,
        Message,
        Project,
        Receipt,
        Record,
        Reservation,
        Seat,
    )
    from gitmail.storage.engine import Archive, Change, Committed
    from gitmail.storage.snapshot import Snapshot
    from gitmail.storage.store import Store, slug_for


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'gitmail' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
