"""The records one operation parsed, by blob: each file parsed once, read by every later step.

A sync parses every file it takes in to check it (the fetch door's record
checks, :class:`~.recordcheck.Checker`); the index's catch-up then needs
the same messages' fields. The sync hands one :class:`Parsed` from the
check to the catch-up, so a message that came in is parsed once per sync,
not once per step. It is a value of the operation, never a cache of the
process: it goes when the operation ends, and what no later step reads goes
before (:meth:`Parsed.retain`, :meth:`Parsed.take`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from gitmail.model.records import Record

Outcome = Record | str  # the record a file holds, or why it is not one

Parser = Callable[[type[Record], bytes], Outcome]  # (record type, the file's bytes) -> outcome


class Parsed:
    """The outcome of parsing each blob as a record type, parsed on first ask only.

    Outcomes are keyed by (record type, blob id): an inbox copy is the same
    blob as its message, so it shares the message's. ``parses`` counts the
    parses run per blob id, for a caller (or a test) to see that none ran
    twice; ``reused`` counts the asks answered without one.
    """

    def __init__(self) -> None:
        self.parses: Counter[bytes] = Counter()
        self.reused = 0
        self._outcomes: dict[tuple[type[Record], bytes], Outcome] = {}

    def outcome(self, record_type: type[Record], blob: bytes, data: Callable[[], bytes], parser: Parser) -> Outcome:
        """What blob ``blob`` (raw id) holds as a ``record_type``: ``parser`` runs on ``data()`` the first time only."""
        key = (record_type, blob)
        found = self._outcomes.get(key)
        if found is None:
            found = self._outcomes[key] = parser(record_type, data())
            self.parses[blob] += 1
        else:
            self.reused += 1
        return found

    def known(self, record_type: type[Record], blob: bytes) -> Outcome | None:
        """The outcome of a parse already run of ``blob`` as a ``record_type`` (None: not parsed yet)."""
        found = self._outcomes.get((record_type, blob))
        if found is not None:
            self.reused += 1
        return found

    def take(self, record_type: type[Record], blob: bytes) -> Outcome | None:
        """As :meth:`known`, for the last step that reads the outcome: it is not kept after."""
        found = self._outcomes.pop((record_type, blob), None)
        if found is not None:
            self.reused += 1
        return found

    def retain(self, record_type: type[Record]) -> None:
        """Drop every outcome but those of ``record_type``: the steps still to come read only those."""
        self._outcomes = {key: outcome for key, outcome in self._outcomes.items() if key[0] is record_type}

    def __len__(self) -> int:
        return len(self._outcomes)
