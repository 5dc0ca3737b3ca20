"""Byte budgets for reads that carry message bodies: a page holds at most ``max_bytes`` of messages.

A list of messages with their bodies (an inbox, outbox or topic with
``include_bodies``, a thread, a summary's examples, the web view's thread
page) is sized by its messages as JSON text in UTF-8, one at a time, and
bodies are read only as the page fills: neither the answer nor the memory a
read takes grows with what the caller asked for beyond the budget.

The rules, the same on every read:

* Messages go on the page in order while they fit; the page ends before the
  first that does not, except that a message is never left out when it is
  the first of the page (progress is always made) or was written in the same
  millisecond as the one before it (a ``since_ts`` read could not reach it
  afterwards). Such a message is listed without its body: ``body_omitted:
  true`` and ``body_bytes``; ``resource://message/{id}`` returns it whole.
* A newest-first list (:func:`newest_first`) is filled from its oldest
  message, so what does not fit is the newest part; its first item then
  carries ``more`` (how many were left out and the ``since_ts`` that reads
  them next). Calling again with that ``since_ts``, as a poller does anyway,
  loses nothing.
* An oldest-first list (:func:`oldest_first`, a thread) ends early; the
  caller continues after the last message it got.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Sequence
from typing import Any, Protocol, Self, TypeVar

from gitmail.model.errors import invalid
from gitmail.model.limits import READ_BUDGET_DEFAULT, READ_BUDGET_MAX, READ_BUDGET_MIN
from gitmail.model.results import Result, result

MARKER_BYTES = 256  # kept free on a newest-first page for its first item's ``more``


@result
class MoreMessages(Result):
    """On the first item of a newest-first page that left newer messages out: how many, and how to read them."""

    left_out: int
    since_ts: str
    hint: str


class Paged(Protocol):
    """A message a page can hold: a typed result that copies itself with its body, without it, or marked."""

    @property
    def id(self) -> str: ...
    @property
    def created_ts(self) -> str: ...
    @property
    def body_md(self) -> str | None: ...
    def with_body(self, body: str) -> Self: ...
    def without_body(self, body_bytes: int) -> Self: ...
    def marked(self, more: MoreMessages) -> Self: ...


class Bodied:
    """What a budgeted page needs of a message result declaring ``body_md``, ``body_omitted`` and ``body_bytes``
    (and ``more``, on a newest-first page): its copies with the body, without it, and with ``more``."""

    __slots__ = ()

    def with_body(self, body: str) -> Self:
        return _changed(self, body_md=body)

    def without_body(self, body_bytes: int) -> Self:
        return _changed(self, body_md=None, body_omitted=True, body_bytes=body_bytes)

    def marked(self, more: MoreMessages) -> Self:
        return _changed(self, more=more)


def _changed(item: Any, **changes: Any) -> Any:
    return dataclasses.replace(item, **changes)


P = TypeVar("P", bound=Paged)
BodyOf = Callable[[Paged], "str | None"]  # the body of the message a head describes (None: gone)


def check_budget(value: object, field: str = "max_bytes") -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not READ_BUDGET_MIN <= value <= READ_BUDGET_MAX:
        raise invalid(f"{field} must be a whole number of bytes from {READ_BUDGET_MIN} to {READ_BUDGET_MAX} "
                      f"(default {READ_BUDGET_DEFAULT})", field=field)
    return value


def item_bytes(item: object) -> int:
    """What one message adds to a page: its JSON text in UTF-8, and a separator."""
    return len(json.dumps(item, ensure_ascii=False, separators=(",", ":")).encode("utf-8")) + 1


def fill(heads: Sequence[P], body_of: Callable[[P], str | None], max_bytes: int) -> list[P]:
    """The messages of ``heads`` (in that order) that go on a page of ``max_bytes``, each with its body or
    ``body_omitted`` (see the module's rules)."""
    page: list[P] = []
    used = 0
    for head in heads:
        body = body_of(head) or ""
        item = head.with_body(body)
        size = item_bytes(item)
        if used + size <= max_bytes:
            page.append(item)
            used += size
            continue
        if page and head.created_ts != page[-1].created_ts:
            break
        short = head.without_body(len(body.encode("utf-8")))
        page.append(short)
        used += item_bytes(short)
    return page


def newest_first(heads: Sequence[P], body_of: Callable[[P], str | None], max_bytes: int) -> list[P]:
    """A newest-first list within ``max_bytes``, filled from its oldest message; ``more`` on the first item
    when newer ones were left out."""
    page = fill(list(reversed(heads)), body_of, max_bytes - MARKER_BYTES)
    page.reverse()
    left_out = len(heads) - len(page)
    if left_out and page:
        since = page[0].created_ts
        page[0] = page[0].marked(MoreMessages(
            left_out=left_out, since_ts=since,
            hint=f"{left_out} newer message{'s' if left_out != 1 else ''} did not fit in max_bytes={max_bytes}: "
                 f"call again with since_ts={since!r} to read {'them' if left_out != 1 else 'it'}"))
    return page


def oldest_first(heads: Sequence[P], body_of: Callable[[P], str | None], max_bytes: int) -> tuple[list[P], bool]:
    """An oldest-first list within ``max_bytes``, and whether it ended before the last of ``heads``."""
    page = fill(heads, body_of, max_bytes)
    return page, len(page) < len(heads)


def kept_body(item: Paged) -> str | None:
    """A :data:`BodyOf` for heads that already hold their body."""
    return item.body_md
