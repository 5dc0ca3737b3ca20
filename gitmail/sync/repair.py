"""The way back from a poisoned hub: ``gitmail repair``.

A hub without checks (most hosting) takes whatever is pushed. When a bad
change reached its ``main`` (a malformed record, an edited message, a
deletion without a tombstone), every checked machine keeps that change out
and aside (:mod:`gitmail.sync.quarantine`) and still exchanges mail through
its own machine ref, but ``main`` on the hub stays bad, and a checked hub
would refuse any machine that simply dropped the bad files.

:func:`repair` is the operator's fix, run on any one machine:

1. sync with the remote, so the local ``main`` holds everything valid from
   it and the quarantine ref lists what it refused;
2. commit, on top of both the local ``main`` and the remote's ``main``, a
   :class:`~gitmail.model.records.Repair` record for each refused change the
   remote still holds: its bad version goes (a bad file is taken out; an
   edited immutable record, or a profile replaced by garbage, gets back the
   version the local ``main`` kept, which ``restored_from`` names in the
   history), and a file it deleted without a tombstone is put back. Files
   at the local tip that break the rules (say, from before checks existed)
   get the same treatment, from the last version in history that held up;
3. push that commit to the remote's ``main``. The record checker (on the
   hub, and in every other machine's fetch) accepts exactly these removals
   and restorations because the repair records name them, so the hub is
   clean again and nothing valid was dropped on the way.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pygit2

from gitmail.model.errors import NOT_FOUND, GitmailError
from gitmail.model.records import LAYOUT, Repair, layout_forms, placed
from gitmail.storage.engine import Change
from gitmail.storage.recordcheck import inspect_file
from gitmail.storage.snapshot import Snapshot, blob_data, entry_id
from gitmail.storage.store import Store

from .quarantine import read_quarantine
from .remotes import list_remotes, tracking_ref
from .syncer import SyncReport, sync_project

HISTORY_LIMIT = 10_000  # commits searched back for the last sound version of a damaged file


@dataclass
class RepairReport:
    """What a repair took out or put back, and how the syncs around it went."""

    project: str
    remote: str
    repaired: list[dict[str, Any]] = field(default_factory=list)
    commit: str | None = None
    before: SyncReport | None = None
    after: SyncReport | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"project": self.project, "remote": self.remote, "repaired": self.repaired, "commit": self.commit,
                "exit_code": self.after.exit_code if self.after is not None else 0,
                "before": self.before.to_dict() if self.before else None,
                "after": self.after.to_dict() if self.after else None}

    def lines(self) -> list[str]:
        if not self.repaired:
            return [f"{self.project} <-> {self.remote}: nothing to repair"]
        out = [f"{self.project} <-> {self.remote}: repaired {len(self.repaired)} file(s) in {(self.commit or '')[:12]}"]
        out += [f"  {item['action']} {item['file']}: {item['reason']}" for item in self.repaired]
        if self.after is not None:
            out += self.after.lines()
        return out


def pick_remote(store: Store, project: str, remote: str | None) -> str:
    """The remote to repair: the one named, else the only one with refused changes, else the only one."""
    remotes = list_remotes(store, project)
    if remote is not None:
        if remote not in remotes:
            raise GitmailError(NOT_FOUND, f"project has no remote named {remote!r}; see `gitmail remote list "
                               f"{project}`", {"remote": remote})
        return remote
    archive = store.archive(project)
    flagged = [name for name in remotes if read_quarantine(archive, name)]
    candidates = flagged or list(remotes)
    if len(candidates) != 1:
        raise GitmailError(NOT_FOUND, "say which remote to repair with --remote (the project has "
                           f"{len(candidates)}: {', '.join(candidates) or 'none'})", {"remotes": list(remotes)})
    return candidates[0]


def repair(store: Store, project: str, remote: str | None = None) -> RepairReport:
    """Repair the remote's main (and the local tip) as the module documentation says."""
    name = pick_remote(store, project, remote)
    archive = store.archive(project)
    report = RepairReport(store.resolve(project), name)
    report.before = sync_project(store, project, name)
    _raise_on_failure(report.before)
    repo = archive.repo
    fetched = repo.references.get(tracking_ref(name))
    theirs = str(fetched.target) if fetched is not None else None
    refused = read_quarantine(archive, name)
    clock = store.clock

    def fn(snap: Snapshot) -> Change:
        change = Change("")
        repaired: list[dict[str, Any]] = []
        theirs_tree = repo[theirs].peel(pygit2.Tree) if theirs else None
        for entry in refused:
            path = entry["path"]
            removed = _blob_at(theirs_tree, path)
            if removed != entry.get("blob"):
                continue  # the remote no longer holds this version: nothing to repair there
            kept = snap.blob_id(placed(path, LAYOUT))  # ours, wherever our layout keeps that record
            restored_from = entry.get("base") if kept is not None and kept == _blob_at_commit(repo, entry.get("base"),
                                                                                            path) else None
            repaired.append(_record(change, clock, path, entry["reason"], removed, kept, restored_from,
                                    "put back" if removed is None else ("restored" if kept else "took out")))
        for path, reason in _damaged(snap):
            if any(item["file"] == path for item in repaired):
                continue
            good, commit = _last_sound(repo, snap.commit, path)
            if good is not None:
                change.put(path, blob_data(repo, good))
            else:
                change.delete(path)
            repaired.append(_record(change, clock, path, reason, snap.blob_id(path), good, commit,
                                    "restored" if good else "took out"))
        if not repaired:
            return Change("", result=[])
        change.message = f"Repair {len(repaired)} file(s) that break the record rules"
        change.result = repaired
        if theirs is not None and snap.commit not in (None, theirs) and not repo.descendant_of(snap.commit, theirs):
            change.merge_parent = theirs
        return change

    committed = archive.transact(fn)
    report.repaired, report.commit = committed.result, committed.commit
    report.after = sync_project(store, project, name)
    return report


def _raise_on_failure(report: SyncReport) -> None:
    for result in report.results:
        if result.error is not None:
            raise GitmailError(result.error["code"], "the sync before the repair failed: "
                               f"{result.error['message']}", result.error.get("data"))


def _record(change: Change, clock: Any, path: str, reason: str, removed: str | None, restored: str | None,
            restored_from: str | None, action: str) -> dict[str, Any]:
    record = Repair(id=clock.new_id(), file=path, reason=reason[:4096], repaired_at=clock.now_ts(),
                    removed_blob=removed, restored_blob=restored, restored_from=restored_from)
    change.put_record(record)
    return {"file": path, "action": action, "reason": reason, "record": record.path(), "removed_blob": removed,
            "restored_blob": restored}


def _blob_at(tree: pygit2.Tree | None, path: str) -> str | None:
    """The id of the record at ``path`` in ``tree``, wherever the tree's layout keeps it (see :func:`entry_id`)."""
    found = next((oid for form in layout_forms(path) if (oid := entry_id(tree, form)) is not None), None)
    return str(found) if found is not None else None


def _blob_at_commit(repo: pygit2.Repository, commit: str | None, path: str) -> str | None:
    if not commit:
        return None
    try:
        return _blob_at(repo[commit].peel(pygit2.Tree), path)
    except (KeyError, ValueError):
        return None


def _damaged(snap: Snapshot) -> list[tuple[str, str]]:
    """Files at the tip that break the record rules by themselves: (path, reason)."""
    out = []
    for path in snap.walk():
        problem = inspect_file(path, snap.read(path) or b"")[1]
        if problem is not None:
            out.append((path, problem))
    return out


def _last_sound(repo: pygit2.Repository, tip: str | None, path: str) -> tuple[str | None, str | None]:
    """The newest version of ``path`` in the history of ``tip`` that holds up, and a commit holding it."""
    if tip is None:
        return None, None
    walker = repo.walk(tip, pygit2.enums.SortMode.TOPOLOGICAL)
    walker.simplify_first_parent()
    seen: set[str] = set()
    for count, commit in enumerate(walker):
        if count >= HISTORY_LIMIT:
            break
        blob = _blob_at(commit.tree, path)
        if blob is None or blob in seen:
            continue
        seen.add(blob)
        if inspect_file(path, blob_data(repo, blob))[1] is None:
            return blob, str(commit.id)
    return None, None
