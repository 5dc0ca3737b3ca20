"""The view's lists a page at a time: page numbers read from the address, and links to the pages beside.

A list that can grow past a page (projects, agents, mailboxes, search
hits, the dashboard's lists, threads, reservations, the holders of a file
and of a build slot, a message's recipients, history and the files of each
of its commits, journals and their tabs of agents) is read with one more
item than the page shows, so the page knows whether another
follows without counting them all; every other parameter of the address is
kept in the links, so a filtered or sorted list pages as itself.
"""

from __future__ import annotations

import dataclasses
import urllib.parse
from collections.abc import Callable, Sequence
from typing import Any

from starlette.requests import Request

from gitmail.model.errors import INVALID_ARGUMENT, GitmailError

PAGE = 25  # items a page shows


def whole_number(request: Request, name: str, default: int, *, high: int = 10_000) -> int:
    """Query parameter ``name`` as a whole number from 1 to ``high`` (``default`` when absent or empty)."""
    raw = request.query_params.get(name, "")
    if raw == "":
        return default
    if not (raw.isascii() and raw.isdigit() and len(raw) <= 9 and 1 <= int(raw) <= high):
        raise GitmailError(INVALID_ARGUMENT, f"{name} must be a whole number from 1 to {high}, not {raw[:40]!r}",
                           {"parameter": name})
    return int(raw)


def link(request: Request, **changes: object) -> str:
    """This page's address (path and query) with ``changes`` to its parameters; None removes one."""
    params = {key: value for key, value in request.query_params.items() if key not in changes}
    params.update({key: str(value) for key, value in changes.items() if value is not None})
    query = urllib.parse.urlencode(params)
    return request.url.path + ("?" + query if query else "")


@dataclasses.dataclass(frozen=True)
class Paged:
    """One page of a list: its items, its number, and the links to the pages before and after (None at an end)."""

    items: list[Any]
    page: int
    newer: str | None
    older: str | None

    @property
    def more(self) -> bool:
        return self.older is not None


def paged(request: Request, fetch: Callable[[int, int], Sequence[Any]], *, name: str = "page", cap: int = 1000,
          per: int = PAGE) -> Paged:
    """The page parameter ``name`` asks for, of the list ``fetch(offset, count)`` reads (``count`` from ``offset``).

    ``cap`` is how far into the list ``fetch`` may read (the read's own
    bound): pages stop there.
    """
    page = whole_number(request, name, 1, high=max(1, cap // per))
    found = list(fetch((page - 1) * per, min(per + 1, cap - (page - 1) * per)))
    newer = link(request, **{name: page - 1 if page > 2 else None}) if page > 1 else None
    older = link(request, **{name: page + 1}) if len(found) > per else None
    return Paged(items=found[:per], page=page, newer=newer, older=older)


def head(read: Callable[[int], Sequence[Any]]) -> Callable[[int, int], Sequence[Any]]:
    """A ``fetch`` for :func:`paged` over a read that gives the first ``limit`` items of its list."""
    return lambda offset, count: list(read(offset + count))[offset:]


def sliced(items: Sequence[Any]) -> Callable[[int, int], Sequence[Any]]:
    """A ``fetch`` for :func:`paged` over a list read whole."""
    return lambda offset, count: items[offset:offset + count]
