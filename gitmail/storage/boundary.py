"""A partial archive: the shallow boundary a machine joined from, the hub it trusts it from, the records it lacks.

A machine that joins with ``gitmail clone URL --since 7d`` (see
:mod:`gitmail.sync.join`) holds the history of the last days only: git's
shallow fetch cuts it at *boundary* commits, whose parents this machine
never saw, and the records older than the window are listed in its trees
but their files were never fetched. What a boundary commit changed over its
parents cannot be judged here, so it is trusted only as the history of the
hub this machine *pinned* when it joined: the pin, kept in the archive's git
directory (``gitmail/boundary.yaml``, local state that never travels),
names the hub's URL, the first day of the window and every boundary commit
fetched from that hub. Every commit after a pinned boundary is judged by the
who-may-write rule as usual; a boundary that did not come from the pinned
hub is refused like an unsigned commit (:mod:`.authorship`).

Readers that walk a whole tree (the index's listing, ``fsck``) leave out
the records whose files this machine has not fetched: :func:`present`
tells them apart, and only costs a look-up when the archive is partial.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import pygit2

from gitmail.model import codec
from gitmail.model.records import holds_day_folders, is_day_folder

PIN_FILE = os.path.join("gitmail", "boundary.yaml")
# Dated folders a window holds whole: a record filed on any day may still be in force (a reservation renewed
# ever since, an escalation or a held message still waiting, the journal entry a seat hands on).
_IN_FORCE = re.compile(r"^(?:reservations|escalations|agents/[^/]+/(?:held|journal))$")
SHALLOW_FILE = "shallow"


@dataclass
class BoundaryPin:
    """The hub a shallow archive trusts its boundary from: remote name, URL, first day, the boundary commits."""

    remote: str
    url: str
    since: str  # the first day of the history fetched (``YYYY-MM-DD``), or ``all`` once deepened to the root
    pinned_at: str
    commits: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        return {"remote": self.remote, "url": self.url, "since": self.since, "pinned_at": self.pinned_at,
                "commits": sorted(set(self.commits))}


def read_pin(git_dir: str) -> BoundaryPin | None:
    """The archive's boundary pin, or None when it joined whole (or never from a hub)."""
    try:
        with open(os.path.join(git_dir, PIN_FILE), "rb") as handle:
            data = codec.load_yaml(handle.read())
    except FileNotFoundError:
        return None
    return BoundaryPin(remote=str(data["remote"]), url=str(data["url"]), since=str(data["since"]),
                       pinned_at=str(data["pinned_at"]), commits=[str(item) for item in data.get("commits") or []])


def write_pin(git_dir: str, pin: BoundaryPin) -> None:
    """Keep the pin (atomically: a reader sees the old one or the new one)."""
    path = os.path.join(git_dir, PIN_FILE)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "wb") as handle:
        handle.write(codec.dump_yaml(pin.to_dict()))
    os.replace(tmp, path)


def shallow_commits(git_dir: str) -> frozenset[str]:
    """The repository's boundary commits (git's ``shallow`` file): commits whose parents it does not hold."""
    try:
        with open(os.path.join(git_dir, SHALLOW_FILE), encoding="ascii") as handle:
            return frozenset(line.strip() for line in handle if line.strip())
    except FileNotFoundError:
        return frozenset()


def pinned_boundaries(git_dir: str) -> frozenset[str]:
    """The boundary commits the archive holds now that came from its pinned hub (trusted as that hub's history)."""
    pin = read_pin(git_dir)
    if pin is None:
        return frozenset()
    return shallow_commits(git_dir) & frozenset(pin.commits)


def is_partial(repo: pygit2.Repository) -> bool:
    """Whether some files of the archive's trees were left unfetched (a join with a window)."""
    try:
        return bool(repo.config["extensions.partialclone"])
    except KeyError:
        return False


def present(repo: pygit2.Repository, blob: str) -> bool:
    """Whether the file ``blob`` names is on this machine."""
    return pygit2.Oid(hex=blob) in repo.odb



def window_entries(repo: pygit2.Repository, tree: pygit2.Tree, first: str | None,
                   boundaries: Sequence[pygit2.Tree] | None = None) -> Iterator[tuple[str, pygit2.Oid]]:
    """The files of ``tree`` a window from day ``first`` (``YYYY-MM-DD``; None: every day) holds, as (path, id).

    Undated folders are listed whole, and so are the dated folders whose
    records may be in force whatever their day (reservations, escalations,
    held messages, journals); other folders that keep day folders only
    from ``first`` on. Without ``boundaries`` the days before the window are
    left out; with them (the trees the window's history starts from), a
    year, month or day before the window is entered only where it differs
    from that folder in each of them: there, the records the window's own
    commits changed. So the cost follows the window and the number of day
    folders, not the number of records the archive ever held.
    """
    yield from _window(repo, tree, first, boundaries, "", None)


def _window(repo: pygit2.Repository, tree: pygit2.Tree, first: str | None, boundaries: Sequence[pygit2.Tree] | None,
            prefix: str, day: str | None) -> Iterator[tuple[str, pygit2.Oid]]:
    """:func:`window_entries` below ``prefix``; ``day`` is the date the folders above named, below a dated folder."""
    for entry in tree:
        name = entry.name or ""
        if entry.type_str == "blob":
            yield prefix + name, entry.id
            continue
        if entry.type_str != "tree":
            continue
        path, when = prefix + name, None
        if day is not None:  # below a folder that keeps day folders: a year, a month, a day, then its fan-out
            when = day if len(day) == 10 else (f"{day}-{name}" if day else name)
            if first is not None and when < first[:len(when)]:
                if boundaries is not None:
                    yield from _changed(repo, entry, path, boundaries)
                continue
        elif holds_day_folders(path) and is_day_folder(f"{path}/2000/01/01") and not _IN_FORCE.match(path):
            when = ""
        yield from _window(repo, repo[entry.id].peel(pygit2.Tree), first, boundaries, path + "/", when)


def _changed(repo: pygit2.Repository, entry: pygit2.Object, path: str,
             boundaries: Sequence[pygit2.Tree]) -> Iterator[tuple[str, pygit2.Oid]]:
    """The files at or below ``entry`` (at ``path``) that differ from the same path in each of ``boundaries``."""
    for boundary in boundaries:
        try:
            if boundary[path].id == entry.id:
                return
        except KeyError:
            continue
    if entry.type_str == "blob":
        yield path, entry.id
    elif entry.type_str == "tree":
        for inner in repo[entry.id].peel(pygit2.Tree):
            yield from _changed(repo, inner, f"{path}/{inner.name}", boundaries)
