"""Candidate documents of an intersection, from posting lists' document numbers alone.

Whoosh evaluates ``to:Agent07 migrat*`` by leapfrogging: the recipient's
posting list and the union of every ``migrat…`` word's lists skip to each
other's next document, and every skip of the union is a skip of each word in
it. When both sides are common but rarely together, that leapfrog walks a
large part of the index one document at a time.

Here each required part is read as a set of document numbers within one
window of the index (a term's list, a prefix's words' lists joined, a
phrase's words intersected), read a block at a time without weights or
positions, and the sets are intersected. The result is a superset of the
window's matches (negations, phrase positions and deletions are left to the
matcher), so the matcher then visits only those documents: what it answers
is what it would have answered alone.
"""

from __future__ import annotations

from typing import Any

from whoosh import query as wq
from whoosh.matching.wrappers import FilterMatcher
from whoosh.reading import TermNotFound


def intersects(query: wq.Query) -> bool:
    """Whether ``query`` requires a union (a prefix's words, an OR) and another part: what the leapfrog is slow at.

    Two single words intersect fast by leapfrog (a block skipped by its
    last document), faster than reading the commoner one's documents.
    """
    required = _required(query)
    return len(required) >= 2 and any(isinstance(part, (wq.Prefix, wq.Or)) for part in required)


def candidates(query: wq.Query, reader: Any, low: int, high: int) -> list[int] | None:
    """The documents in [low, high) of a segment that may match ``query``, in order; None when not known."""
    found = _ids(query, reader, low, high)
    return None if found is None else sorted(found)


def _required(query: wq.Query) -> list[wq.Query]:
    """The parts of a conjunction that every match has, as far as posting lists tell them."""
    if isinstance(query, wq.And):
        return [part for sub in query.subqueries for part in _required(sub)]
    if isinstance(query, wq.Require):
        return _required(query.a) + _required(query.b)
    if isinstance(query, (wq.AndNot, wq.AndMaybe)):
        return _required(query.a)
    if isinstance(query, (wq.Term, wq.Prefix, wq.Or, wq.Phrase)):
        return [query]
    return []


def _ids(query: wq.Query, reader: Any, low: int, high: int) -> set[int] | None:
    if isinstance(query, wq.Term):
        return _term_ids(reader, query.fieldname, query.text, low, high)
    if isinstance(query, wq.Prefix):
        out: set[int] = set()
        for fieldname, text in query.expanded_terms(reader):
            out |= _term_ids(reader, fieldname, text, low, high)
        return out
    if isinstance(query, wq.Or):
        parts = [_ids(sub, reader, low, high) for sub in query.subqueries]
        return None if any(part is None for part in parts) else set().union(*parts)  # type: ignore[arg-type]
    if isinstance(query, wq.Phrase):
        return _intersection([_term_ids(reader, query.fieldname, word, low, high) for word in query.words])
    return _intersection([part for part in (_ids(sub, reader, low, high) for sub in _required(query))
                          if part is not None])


def _intersection(parts: list[set[int]]) -> set[int] | None:
    if not parts:
        return None
    parts.sort(key=len)
    return parts[0].intersection(*parts[1:])


def _term_ids(reader: Any, fieldname: str, text: Any, low: int, high: int) -> set[int]:
    """The documents in [low, high) whose ``fieldname`` holds ``text`` (deleted ones included)."""
    try:
        matcher = reader.postings(fieldname, text)
    except TermNotFound:
        return set()
    if isinstance(matcher, FilterMatcher):
        matcher = matcher.child  # a segment with deletions wraps its lists in a filter: the matcher skips them
    if hasattr(matcher, "ids_between"):
        return set(matcher.ids_between(low, high))
    return {docnum for docnum in matcher.all_ids() if low <= docnum < high}
