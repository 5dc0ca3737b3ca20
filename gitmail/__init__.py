"""gitmail: mail and coordination for coding agents, stored in git.

The public API is what this module exports; everything else is internal and
may change. Layers, from the bottom: records and paths, the repository engine
(:class:`Archive`), the store of projects (:class:`Store`), then the mail
domain, the MCP server and the CLI on top.
"""

from gitmail.mail.facade import Mail
from gitmail.model.clock import HLC, HybridClock
from gitmail.model.errors import GitmailError
from gitmail.model.ids import new_id
from gitmail.model.records import Agent, Contact, JournalEntry, Message, Project, Receipt, Record, Reservation, Seat
from gitmail.storage.engine import Archive, Change, Committed
from gitmail.storage.snapshot import Snapshot
from gitmail.storage.store import Store, slug_for

__version__ = "0.1.0"

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
    "new_id",
    "slug_for",
]
