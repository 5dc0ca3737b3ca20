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

import json
from collections.abc import Callable, Sequence
from typing import Any

from gitmail.model.errors import invalid
from gitmail.model.limits import READ_BUDGET_DEFAULT, READ_BUDGET_MAX, READ_BUDGET_MIN

MARKER_BYTES = 256  # kept free on a newest-first page for its first item's ``more``
BodyOf = Callable[[dict[str, Any]], "str | None"]  # the body of the message a head describes (None: gone)


def check_budget(value: object, field: str = "max_bytes") -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not READ_BUDGET_MIN <= value <= READ_BUDGET_MAX:
        raise invalid(f"{field} must be a whole number of bytes from {READ_BUDGET_MIN} to {READ_BUDGET_MAX} "
                      f"(default {READ_BUDGET_DEFAULT})", field=field)
    return value


def item_bytes(item: dict[str, Any]) -> int:
    """What one message adds to a page: its JSON text in UTF-8, and a separator."""
    return len(json.dumps(item, ensure_ascii=False, separators=(",", ":")).encode("utf-8")) + 1


def fill(heads: Sequence[dict[str, Any]], body_of: BodyOf, max_bytes: int) -> list[dict[str, Any]]:
    """The messages of ``heads`` (in that order) that go on a page of ``max_bytes``, each with its body or
    ``body_omitted`` (see the module's rules)."""
    page: list[dict[str, Any]] = []
    used = 0
    for head in heads:
        body = body_of(head) or ""
        item = {**head, "body_md": body}
        size = item_bytes(item)
        if used + size <= max_bytes:
            page.append(item)
            used += size
            continue
        if page and head.get("created_ts") != page[-1].get("created_ts"):
            break
        short = {key: value for key, value in head.items() if key != "body_md"}
        short.update(body_omitted=True, body_bytes=len(body.encode("utf-8")))
        page.append(short)
        used += item_bytes(short)
    return page


def newest_first(heads: Sequence[dict[str, Any]], body_of: BodyOf, max_bytes: int) -> list[dict[str, Any]]:
    """A newest-first list within ``max_bytes``, filled from its oldest message; ``more`` on the first item
    when newer ones were left out."""
    page = fill(list(reversed(heads)), body_of, max_bytes - MARKER_BYTES)
    page.reverse()
    left_out = len(heads) - len(page)
    if left_out and page:
        since = page[0]["created_ts"]
        page[0]["more"] = {"left_out": left_out, "since_ts": since,
                           "hint": f"{left_out} newer message{'s' if left_out != 1 else ''} did not fit in "
                                   f"max_bytes={max_bytes}: call again with since_ts={since!r} to read "
                                   f"{'them' if left_out != 1 else 'it'}"}
    return page


def oldest_first(heads: Sequence[dict[str, Any]], body_of: BodyOf, max_bytes: int) -> tuple[list[dict[str, Any]], bool]:
    """An oldest-first list within ``max_bytes``, and whether it ended before the last of ``heads``."""
    page = fill(heads, body_of, max_bytes)
    return page, len(page) < len(heads)


def kept_body(item: dict[str, Any]) -> str | None:
    """A :data:`BodyOf` for heads that already hold their body."""
    return item.get("body_md")
