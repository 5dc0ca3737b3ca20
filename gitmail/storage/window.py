"""The human checkout's window: which folders of an archive a sparse checkout holds, chosen by day.

At a million messages an archive holds millions of files, and ``git status``
in a checkout of all of them takes seconds. A checkout therefore holds a
window of recent days when the archive is large: git's sparse checkout in
cone mode, with a sparse index, so git itself (``status``, ``grep``, ``log``
in the checkout) only ever looks at the files of the window.

**What the window holds.** Cone mode selects whole folders. Every folder that
keeps dated records (``messages``, ``reservations``, each agent's ``inbox``,
``outbox``, ``receipts`` and the other day-sharded folders, see
:func:`gitmail.model.records.holds_day_folders`) contributes its day folders
from the window's first day on; a day folder takes its two fan-out folders
and every record below them along. Every other folder (``contacts``,
``products``, ``attachments``, ...) is held whole, and cone mode keeps the
files that sit beside a held folder (``project.yaml``, each agent's
``profile.yaml`` and ``seat.yaml``). Each agent's inbox folder of the first
day is listed even before it has records, so an agent with nothing in the
window still shows its profile.

**Which days.** A window is one of: the newest ``N`` days (``7d``: counted
back from the newest day the archive holds, not from the clock, so the
window of a quiet archive stays full and the choice needs no clock); every
day from a fixed first day on (``2026-11-01``); or everything (``all``, a
plain checkout). A window of ``N`` days slides when records of a newer day
arrive: the folders of the days that left go, once a day. A checkout made
without a choice holds everything while the archive has at most
:data:`BUDGET` files, else the newest days that fit in it (at least one).
Its ``git status`` lists no untracked files (``git status -u`` does): at
the archive's layout a window holds more folders than files, and looking
through each for new files is most of what a full ``git status`` costs.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterator
from dataclasses import dataclass

import pygit2

from gitmail.model.errors import invalid
from gitmail.model.records import AGENTS, INBOX, holds_day_folders, is_day_folder

from .objects import MODE_TREE
from .treeedit import read_tree

BUDGET = 50_000  # files a checkout holds at most when nobody chose its window (git status: about 0.3 s of CPU)
_DAYS = re.compile(r"^([1-9][0-9]{0,4})d$")
_DATE = re.compile(r"^(\d{4})-(\d{2})-(\d{2})$")
_DAY_OF = re.compile(r"^(.*?/\d{4}/\d{2}/\d{2})(?:/|$)")  # the day folder a dated path sits in


@dataclass(frozen=True)
class Window:
    """The days a checkout holds: the newest ``days``, every day from ``since`` on, or (neither) everything."""

    days: int | None = None
    since: str | None = None  # the first day held, ``YYYY/MM/DD``

    @classmethod
    def parse(cls, text: str) -> Window:
        """``7d``, ``2026-11-01`` or ``all`` (what ``gitmail checkout --since`` takes, and the config keeps)."""
        text = text.strip()
        if text == "all":
            return cls()
        days = _DAYS.match(text)
        if days is not None:
            return cls(days=int(days.group(1)))
        date = _DATE.match(text)
        if date is not None:
            try:
                dt.date(*(int(part) for part in date.groups()))
            except ValueError:
                date = None
        if date is None:
            raise invalid(f"window {text!r}: give a number of days (7d), a first day (2026-11-01) or all",
                          window=text)
        return cls(since=text.replace("-", "/"))

    @property
    def everything(self) -> bool:
        return self.days is None and self.since is None

    def text(self) -> str:
        if self.days is not None:
            return f"{self.days}d"
        return self.since.replace("/", "-") if self.since is not None else "all"

    def first_day(self, newest: str | None) -> str | None:
        """The first day held (``YYYY/MM/DD``), given the newest day the archive holds; None: every day."""
        if self.since is not None:
            return self.since
        if self.days is None or newest is None:
            return None
        last = dt.date(*(int(part) for part in newest.split("/")))
        return (last - dt.timedelta(days=self.days - 1)).strftime("%Y/%m/%d")


def day_of(path: str) -> str | None:
    """The day (``YYYY/MM/DD``) of the day folder that ``path`` sits in, or None for an undated path."""
    found = _DAY_OF.match(path)
    if found is None or not is_day_folder(found.group(1)):
        return None
    return found.group(1)[-10:]


def folder_for(path: str, first: str | None) -> str | None:
    """The folder a window from day ``first`` on holds ``path`` by, or None when it holds it already or never.

    A dated record is held by its day folder (None before ``first``); a file
    of an undated folder by that whole folder; an agent's own files
    (``profile.yaml``) by the window's first day of the agent's inbox, since
    cone mode shows the files beside a held folder; a file at the top is
    always held.
    """
    found = _DAY_OF.match(path)
    if found is not None and is_day_folder(found.group(1)):
        return found.group(1) if first is None or found.group(1)[-10:] >= first else None
    parts = path.split("/")
    for depth in range(1, len(parts)):
        if not holds_day_folders("/".join(parts[:depth])):
            return "/".join(parts[:depth])
    if len(parts) == 3 and parts[0] == AGENTS and first is not None:
        return _placeholder(f"{AGENTS}/{parts[1]}", first)
    return None


def _placeholder(agent_folder: str, first: str) -> str:
    """The folder that makes a window show an agent's own files: its inbox's first day, present or not."""
    return f"{agent_folder}/{INBOX}/{first}"


def _roots(repo: pygit2.Repository, oid: bytes, path: str = "") -> Iterator[tuple[str, bytes, bool]]:
    """The folders below tree ``oid`` at ``path`` a window selects from: (path, tree, whether it keeps days).

    A folder that keeps days holds year folders (``messages``,
    ``agents/<Name>/inbox``); an undated one is held whole (``contacts``).
    """
    for name, (mode, child) in read_tree(repo, oid, remember=False).entries().items():
        if mode != MODE_TREE:
            continue
        below = f"{path}/{name}" if path else name
        if not holds_day_folders(below):
            yield below, child, False
        elif is_day_folder(f"{below}/2000/01/01"):
            yield below, child, True
        else:
            yield from _roots(repo, child, below)  # the agents or relays folder, or one agent's


def _days(repo: pygit2.Repository, oid: bytes, root: str, first: str | None) -> Iterator[tuple[str, bytes]]:
    """The day folders of the dated folder ``root`` from day ``first`` on (all: None): (day, tree), newest first."""
    for year, (mode, year_tree) in sorted(read_tree(repo, oid, remember=False).entries().items(), reverse=True):
        if mode != MODE_TREE or (first is not None and year < first[:4]):
            continue
        for month, (mode, month_tree) in sorted(read_tree(repo, year_tree, remember=False).entries().items(),
                                                reverse=True):
            if mode != MODE_TREE or (first is not None and f"{year}/{month}" < first[:7]):
                continue
            for day, (mode, day_tree) in sorted(read_tree(repo, month_tree, remember=False).entries().items(),
                                                reverse=True):
                when = f"{year}/{month}/{day}"
                if mode == MODE_TREE and is_day_folder(f"{root}/{when}") and (first is None or when >= first):
                    yield when, day_tree


def folders(repo: pygit2.Repository, tree: bytes, first: str | None) -> list[str]:
    """The folders a window from day ``first`` on holds in ``tree`` (sorted), for ``git sparse-checkout set``."""
    out = []
    for root, oid, dated in _roots(repo, tree):
        if not dated:
            out.append(root)
            continue
        out += [f"{root}/{day}" for day, _ in _days(repo, oid, root, first)]
    if first is not None:
        agents = dict(read_tree(repo, tree, remember=False).entries()).get(AGENTS)
        if agents is not None and agents[0] == MODE_TREE:
            out += [_placeholder(f"{AGENTS}/{name}", first)
                    for name, (mode, _) in read_tree(repo, agents[1], remember=False).entries().items()
                    if mode == MODE_TREE]
    return sorted(set(out))


def newest_day(repo: pygit2.Repository, tree: bytes) -> str | None:
    """The newest day any dated folder of ``tree`` holds records of (``YYYY/MM/DD``), or None."""
    newest = None
    for root, oid, dated in _roots(repo, tree):
        if dated:
            day = next((day for day, _ in _days(repo, oid, root, newest)), None)
            if day is not None:
                newest = day
    return newest


def fitting(repo: pygit2.Repository, tree: bytes, budget: int = BUDGET) -> Window:
    """The window a checkout gets by default (see the module docs).

    Days are counted newest first across every dated folder, and the count
    stops at the first day that does not fit, so the cost follows the
    window, not the archive.
    """
    roots = list(_roots(repo, tree))
    total = sum(_files(repo, oid) for _, oid, dated in roots if not dated)
    streams = [_days(repo, oid, root, None) for root, oid, dated in roots if dated]
    heads = {position: head for position, head in enumerate(next(days, None) for days in streams) if head}
    newest = max((day for day, _ in heads.values()), default=None)
    held = 0
    while heads:
        day = max(when for when, _ in heads.values())
        for position in [position for position, (when, _) in heads.items() if when == day]:
            total += _files(repo, heads[position][1])
            head = next(streams[position], None)
            if head is None:
                del heads[position]
            else:
                heads[position] = head
        if total > budget:
            return Window(days=max(held, 1))
        held = _span(newest, day) if newest is not None else 0
    return Window()


def _span(newest: str, day: str) -> int:
    """Days from ``day`` to ``newest``, both counted."""
    last, first = (dt.date(*(int(part) for part in when.split("/"))) for when in (newest, day))
    return (last - first).days + 1


def _files(repo: pygit2.Repository, oid: bytes) -> int:
    """The files below tree ``oid``."""
    count = 0
    for _, (mode, child) in read_tree(repo, oid, remember=False).entries().items():
        count += _files(repo, child) if mode == MODE_TREE else 1
    return count
