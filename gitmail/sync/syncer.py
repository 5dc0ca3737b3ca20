"""Syncing a project's archive with git remotes: fetch, merge by the record rules, push.

Transport is the system ``git`` (so ssh keys, credential helpers and any URL
git understands just work); merging is :mod:`gitmail.sync.merge`; the local
``main`` only ever moves by compare-and-swap, through the engine, so a sync
never loses a write that raced with it. One sync:

1. ``git fetch <remote>``: its ``main`` into ``refs/remotes/<remote>/main``,
   and every machine's own ref (``refs/gitmail/nodes/<node>``) into
   ``refs/remotes/<remote>/nodes/``;
2. bring each fetched tip in: fast-forward when it contains ours, nothing
   when ours contains it, otherwise a merge commit (two parents) whose tree
   the record rules computed against the current tip;
3. ``git push <remote> main`` (never forced). When another machine moved the
   remote's ``main`` in the meantime, push to this machine's own ref
   ``refs/gitmail/nodes/<node>`` instead: nobody else writes it, so that push
   always goes through, and every other machine merges it on its next sync
   (and carries it into ``main`` with its own push). A sync therefore takes
   one round however many machines sync at once; nobody retries in a loop.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pygit2

from gitmail.model.errors import NOT_FOUND, RETRY_EXHAUSTED, SYNC_FAILED, SYNC_REJECTED, GitmailError
from gitmail.storage.engine import MAIN, Archive, Change
from gitmail.storage.snapshot import Snapshot, blob_data
from gitmail.storage.store import Store

from .hookinstall import ensure_gitattributes
from .merge import CLOCKED_ROLES, TreeMerge, clock_of, merge_commits, role_of, tree_changes
from .remotes import NODE_REFS, git, list_remotes, node_ref, tracking_nodes, tracking_ref

MAX_ROUNDS = 4
MAX_INTEGRATE_TRIES = 100
MAX_PAUSE = 2.0  # seconds: the longest pause before another round
_jitter = random.Random()  # pauses drawn from a generator of our own: the shared one is the application's to seed


# -- one sync -------------------------------------------------------------------------

@dataclass
class SyncResult:
    """What one sync of one project with one remote did."""

    project: str
    remote: str
    records_in: int = 0
    records_out: int = 0
    messages_in: int = 0
    messages_out: int = 0
    conflicts: list[dict[str, str]] = field(default_factory=list)
    fast_forwards: int = 0
    merges: int = 0
    rejected_pushes: int = 0
    rounds: int = 0
    pushed: bool = False
    pushed_to: str | None = None  # "main", or "node" when main had moved and this machine's own ref took the push
    tip: str | None = None
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {key: getattr(self, key) for key in self.__dataclass_fields__}

    def summary(self) -> str:
        parts = [f"{self.project} <-> {self.remote}: {self.records_in} records in ({self.messages_in} messages), "
                 f"{self.records_out} out ({self.messages_out} messages)"]
        if self.conflicts:
            parts.append(f", {len(self.conflicts)} conflict(s) kept under conflicts/")
        if self.pushed_to == "node":
            parts.append(", pushed to this machine's own ref (main had just moved; others merge it on their next sync)")
        return "".join(parts)


def _count(changes: Mapping[str, object]) -> tuple[int, int]:
    """(records, messages) among changed files; inbox and outbox copies are not records of their own."""
    roles = Counter(role_of(path) for path, blob in changes.items() if blob is not None)
    records = sum(n for role, n in roles.items() if role not in ("inbox", "outbox"))
    return records, roles.get("message", 0)


def _commit_tree(repo: pygit2.Repository, commit: str | None) -> pygit2.Tree | None:
    return repo[commit].peel(pygit2.Tree) if commit else None


def _observe(store: Store, repo: pygit2.Repository, changes: dict[str, pygit2.Oid | None]) -> None:
    """Move our clock past every clocked record that came in."""
    newest = None
    for path, blob in changes.items():
        if blob is not None and role_of(path) in CLOCKED_ROLES:
            seen = clock_of(blob_data(repo, blob))
            if seen is not None and (newest is None or seen > newest):
                newest = seen
    if newest is not None:
        store.clock.observe(newest)


def integrate(store: Store, archive: Archive, theirs: str | None, label: str, result: SyncResult) -> None:
    """Bring the fetched commit ``theirs`` (named ``label`` in the merge commit) into the local main."""
    repo = archive.repo
    for _ in range(MAX_INTEGRATE_TRIES):
        if theirs is None:
            return
        ours = archive.tip()
        if ours == theirs or (ours is not None and repo.descendant_of(ours, theirs)):
            return
        if ours is None or repo.descendant_of(theirs, ours):
            changes = tree_changes(repo, _commit_tree(repo, ours), _commit_tree(repo, theirs))
            _observe(store, repo, changes)
            if archive.advance(ours, theirs):
                records, messages = _count(changes)
                result.records_in += records
                result.messages_in += messages
                result.fast_forwards += 1
                return
            continue  # main moved under us: look again

        def merge(snapshot: Snapshot) -> Change:
            tip, here = snapshot.commit, snapshot.repo  # fn may run in another writer's thread
            if tip == theirs or tip is None or here.descendant_of(tip, theirs) or here.descendant_of(theirs, tip):
                return Change("nothing to merge", result=None)  # settled by the caller's next look
            merged = merge_commits(here, tip, theirs)
            subject = f"Merge {label}: {sum(merged.incoming.values())} files in"
            if merged.conflicts:
                subject += f", {len(merged.conflicts)} conflict(s) kept under conflicts/"
            # The paths come from git trees; the engine's tree editor checks each one as it applies it.
            return Change(subject, edits=merged.edits, result=merged, merge_parent=theirs)

        committed = archive.transact(merge)
        merged: TreeMerge | None = committed.result
        if merged is None:
            continue
        if merged.newest_clock is not None:
            store.clock.observe(merged.newest_clock)
        records, messages = _count({path: "" if data is not None else None for path, data in merged.edits.items()})
        result.records_in += records
        result.messages_in += messages
        result.merges += 1
        result.conflicts += [{"path": c.file, "kept_blob": c.kept_blob, "other_blob": c.other_blob,
                              "record": c.path()} for c in merged.conflicts]
        return
    raise GitmailError(RETRY_EXHAUSTED, "local writers kept moving main while the sync tried to merge; "
                       "nothing was lost, sync again in a moment", {"from": label})


def _push(archive: Archive, remote: str, target: str = MAIN) -> str:
    """Push main to ``target``; returns ``"ok"`` or ``"behind"`` (the remote ref moved: fetch and merge again)."""
    proc = git(archive.git_dir, "push", "--porcelain", remote, f"{MAIN}:{target}", check=False)
    text = proc.stdout + proc.stderr
    if proc.returncode == 0:
        return "ok"
    if "[remote rejected]" in text and ("cannot lock ref" in text or "incorrect old value" in text):
        return "behind"  # another machine's push won the race for the hub's ref
    if "[remote rejected]" in text:
        remote_lines = [line[len("remote:"):].strip() for line in proc.stderr.splitlines()
                        if line.startswith("remote:")]
        reason = "; ".join(line for line in remote_lines if line) or text.strip()
        raise GitmailError(SYNC_REJECTED, f"the remote refused the push: {reason}; fix or purge the named records "
                           "locally, then sync again", {"remote": remote, "details": remote_lines})
    if "[rejected]" in text or "fetch first" in text or "non-fast-forward" in text:
        return "behind"
    raise GitmailError(SYNC_FAILED, f"git push failed: {text.strip()}; check the remote's URL and your access",
                       {"remote": remote, "exit_code": proc.returncode})


def sync_project(store: Store, project: str, remote: str | None = None, *,
                 max_rounds: int = MAX_ROUNDS) -> list[SyncResult]:
    """Sync one project with one remote (or every remote it has); one result per remote."""
    archive = store.archive(project)
    remotes = list_remotes(store, project)
    if remote is not None:
        if remote not in remotes:
            known = ", ".join(sorted(remotes)) or "none"
            raise GitmailError(NOT_FOUND, f"project has no remote named {remote!r} (its remotes: {known}); the "
                               "operator names remotes on the machine with `gitmail remote add PROJECT NAME URL`",
                               {"remote": remote, "remotes": sorted(remotes)})
        names = [remote]
    else:
        if not remotes:
            raise GitmailError(NOT_FOUND, "project has no remotes; the operator names one on the machine with "
                               "`gitmail remote add PROJECT NAME URL`", {"project": project})
        names = list(remotes)
    ensure_gitattributes(archive)
    return [_sync_one(store, archive, store.resolve(project), name, max_rounds) for name in names]


def _sync_one(store: Store, archive: Archive, slug: str, remote: str, max_rounds: int) -> SyncResult:
    started = time.monotonic()
    result = SyncResult(project=slug, remote=remote)
    repo = archive.repo
    for round_no in range(1, max_rounds + 1):
        result.rounds = round_no
        theirs, nodes = fetch_remote(archive, remote)
        integrate(store, archive, theirs, f"{remote}/main", result)
        for node, tip in sorted(nodes.items()):
            if node != store.node:
                integrate(store, archive, tip, f"{remote}/nodes/{node}", result)
        ours = archive.tip()
        result.tip = ours
        if ours is None or ours == theirs:
            break
        target = MAIN
        if _push(archive, remote) != "ok":
            result.rejected_pushes += 1
            target = node_ref(store.node)
            if nodes.get(store.node) != ours and _push(archive, remote, target) != "ok":
                # Our own ref moved on the remote: another store uses this node name. Merge it and go again.
                time.sleep(_jitter.uniform(0, MAX_PAUSE))
                continue
        changes = tree_changes(repo, _commit_tree(repo, theirs), _commit_tree(repo, ours))
        result.records_out, result.messages_out = _count(changes)
        result.pushed, result.pushed_to = True, "main" if target == MAIN else "node"
        break
    else:
        raise GitmailError(RETRY_EXHAUSTED, f"this machine's own ref on {remote!r} kept moving during {max_rounds} "
                           "rounds (does another store share this node name?); nothing was lost locally",
                           result.to_dict())
    result.seconds = round(time.monotonic() - started, 4)
    return result


def _ref(repo: pygit2.Repository, name: str) -> str | None:
    try:
        return str(repo.references[name].resolve().target)
    except KeyError:
        return None


def fetch_remote(archive: Archive, remote: str) -> tuple[str | None, dict[str, str]]:
    """Fetch the remote's main and machine refs: (main's tip or None while empty, node -> tip)."""
    specs = [f"+{MAIN}:{tracking_ref(remote)}", f"+{NODE_REFS}/*:{tracking_nodes(remote)}/*"]
    proc = git(archive.git_dir, "fetch", "--quiet", "--no-tags", "--prune", remote, *specs, check=False)
    has_main = True
    if proc.returncode != 0 and "couldn't find remote ref" in proc.stderr:
        has_main = False  # an empty remote (or one that only has machine refs): the first push fills main
        proc = git(archive.git_dir, "fetch", "--quiet", "--no-tags", remote, specs[1], check=False)
    if proc.returncode != 0:
        raise GitmailError(SYNC_FAILED, f"git fetch from {remote!r} failed: {proc.stderr.strip()}; check the "
                           "remote's URL and your access to it, then sync again", {"remote": remote})
    repo = archive.repo
    prefix = tracking_nodes(remote) + "/"
    nodes = {name[len(prefix):]: str(repo.references[name].resolve().target)
             for name in repo.references if name.startswith(prefix)}
    return (_ref(repo, tracking_ref(remote)) if has_main else None), nodes
