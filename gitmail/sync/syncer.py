"""Syncing a project's archive with its git remotes: fetch, check, merge by the record rules, push.

Transport is the system ``git`` (so ssh keys, credential helpers and any URL
git understands just work); checking is the record checker
(:mod:`gitmail.sync.quarantine`); merging is :mod:`gitmail.sync.merge`; the
local ``main`` only ever moves by compare-and-swap, through the engine, so a
sync never loses a write that raced with it. One sync with one remote:

1. ``git fetch <remote>``: its ``main`` into ``refs/remotes/<remote>/main``,
   and every machine's own ref (``refs/gitmail/nodes/<node>``) into
   ``refs/remotes/<remote>/nodes/``;
2. check each fetched tip: every commit it brings must be signed by a node
   allowed to write what it writes (a forged or unsigned commit, and what
   builds on it, stays out; the rest comes in as the remote signed it), and
   what it adds over the local ``main`` passes the same record checks as a
   push; refused changes are kept aside in the quarantine ref and reported,
   and only the valid part goes on;
3. bring each valid tip in: fast-forward when it contains ours, nothing
   when ours contains it, otherwise a merge commit (two parents) whose tree
   the record rules computed against the current tip;
4. tell the holders of overlapping reservations that arrived (see
   :mod:`gitmail.sync.findings`);
5. ``git push <remote> main`` (never forced). When another machine moved the
   remote's ``main`` in the meantime, push to this machine's own ref
   ``refs/gitmail/nodes/<node>`` instead: nobody else writes it, and a checked
   hub judges it by what it adds over the last ``main`` it merged, so that
   push goes through; every other machine merges it on its next sync (and
   carries it into ``main`` with its own push). A sync therefore takes one
   round however many machines sync at once; nobody retries in a loop.

Every remote is synced on its own: one that fails (unreachable, refusing)
is reported in its own result, with its state kept by
:mod:`gitmail.sync.status`, and the others still sync. When records came in,
the project's index takes them in before :func:`sync_project` returns, so a
search right after a sync finds them; if another process is writing the
search index just then, the report says how many messages search still lacks.

A project's report carries an exit code, the same for the CLI and the MCP
tool: 0 when every remote synced cleanly, 1 when it synced with something to
look at (conflicts, refused changes kept aside, overlapping reservations), 2
when at least one remote failed (the others still synced).
"""

from __future__ import annotations

import logging
import random
import subprocess
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pygit2

from gitmail.coord.context import Context
from gitmail.index import indexer_for
from gitmail.mail import relay
from gitmail.mail.relay import RelayOutcome
from gitmail.model.errors import NOT_FOUND, RETRY_EXHAUSTED, SYNC_FAILED, SYNC_REJECTED, GitmailError, coded
from gitmail.model.records import Message, role_of
from gitmail.model.results import OMIT_NONE, Result, result
from gitmail.storage.authorship import Trust, file_rejections, judge_range
from gitmail.storage.boundary import is_partial, pinned_boundaries, shallow_commits
from gitmail.storage.engine import MAIN, Archive, Change
from gitmail.storage.handles import reference
from gitmail.storage.layout import Comparisons, changed_records, migrate
from gitmail.storage.nodes import read_pins, trusted_keyring
from gitmail.storage.parsed import Parsed
from gitmail.storage.recordcheck import Checker, Rejection
from gitmail.storage.snapshot import Snapshot, blob_data, tree_layout
from gitmail.storage.store import Store
from gitmail.storage.verify import VerdictCache

from .findings import (
    SYNC_RULES,
    arrived_reservations,
    conflicts_entered,
    overlap_view,
    overlapping_reservations,
    send_notices,
)
from .hookinstall import ensure_gitattributes
from .merge import CLOCKED_ROLES, TreeMerge, clock_of, merge_commits
from .partial import fetch_options, joined_from, prepare
from .pushcheck import commit_of
from .quarantine import Checked, check_tip, keep_aside
from .remotes import NODE_REFS, git, list_remotes, node_ref, tracking_nodes, tracking_ref
from .status import record_attempt, record_outcome

_log = logging.getLogger("gitmail.sync")

MAX_ROUNDS = 4
MAX_INTEGRATE_TRIES = 100
MAX_PAUSE = 2.0  # seconds: the longest pause before another round
_jitter = random.Random()  # pauses drawn from a generator of our own: the shared one is the application's to seed

OK, ATTENTION, FAILED = 0, 1, 2  # exit codes of a sync

Progress = Callable[[str, str], None]  # (remote, step): step is fetch, check, merge, push or index


# -- results -----------------------------------------------------------------------------

@result
class RemoteSync(Result):
    """What one sync with one remote did, as answered (the fields of :class:`SyncResult` and its exit code)."""

    project: str
    remote: str
    records_in: int
    records_out: int
    messages_in: int
    messages_out: int
    conflicts: list[dict[str, Any]]
    quarantined: list[dict[str, Any]]
    quarantine_ref: str | None
    migrated: dict[str, Any] | None
    overlaps: list[dict[str, Any]]
    fast_forwards: int
    merges: int
    rejected_pushes: int
    rounds: int
    pushed: bool
    pushed_to: str | None
    tip: str | None
    seconds: float
    error: dict[str, Any] | None
    exit_code: int


@result
class ProjectSync(Result):
    """One sync of a project, as answered: its exit code and status, each remote's result, the index, the relays."""

    project: str
    exit_code: int
    status: str
    results: list[RemoteSync]
    index: dict[str, Any]
    relayed: list[RelayOutcome] | None = field(default=None, metadata=OMIT_NONE)


@dataclass
class SyncResult:
    """What one sync of one project with one remote did (``error`` is set when it failed)."""

    project: str
    remote: str
    records_in: int = 0
    records_out: int = 0
    messages_in: int = 0
    messages_out: int = 0
    conflicts: list[dict[str, Any]] = field(default_factory=list)  # conflict records that entered main
    quarantined: list[dict[str, Any]] = field(default_factory=list)  # incoming changes refused and kept aside
    quarantine_ref: str | None = None
    migrated: dict[str, Any] | None = None  # the migration this sync made of the local archive (see integrate)
    overlaps: list[dict[str, Any]] = field(default_factory=list)  # overlapping exclusive reservations that arrived
    fast_forwards: int = 0
    merges: int = 0
    rejected_pushes: int = 0
    rounds: int = 0
    pushed: bool = False
    pushed_to: str | None = None  # "main", or "node" when main had moved and this machine's own ref took the push
    tip: str | None = None
    seconds: float = 0.0
    error: dict[str, Any] | None = None  # {code, message, data} when this remote failed

    @property
    def exit_code(self) -> int:
        if self.error is not None:
            return FAILED
        return ATTENTION if self.conflicts or self.quarantined or self.overlaps else OK

    def to_result(self) -> RemoteSync:
        """What this sync did, as its typed answer."""
        return RemoteSync(**{key: getattr(self, key) for key in self.__dataclass_fields__}, exit_code=self.exit_code)

    def to_dict(self) -> dict[str, Any]:
        return self.to_result().wire()

    def outcome(self) -> dict[str, Any]:
        """The counts the sync state keeps of this sync."""
        return {"records_in": self.records_in, "records_out": self.records_out, "conflicts": len(self.conflicts),
                "quarantined": len(self.quarantined), "overlaps": len(self.overlaps), "pushed_to": self.pushed_to,
                "seconds": self.seconds}

    def lines(self) -> list[str]:
        """The summary for a human: one line, then one per thing to look at."""
        head = f"{self.project} <-> {self.remote}: "
        if self.error is not None:
            return [head + f"FAILED [{self.error['code']}] {self.error['message']}"]
        text = (head + f"{self.records_in} records in ({self.messages_in} messages), "
                f"{self.records_out} out ({self.messages_out} messages)")
        if self.pushed_to == "node":
            text += "; pushed to this machine's own ref (main had just moved; others merge it on their next sync)"
        out = [text]
        if self.migrated is not None:
            out.append(f"  moved this archive to layout {self.migrated['layout']} first, as the remote's is "
                       f"({self.migrated['moved']} files moved, none changed; what gitmail migrate does)")
        for item in self.conflicts:
            if item["kind"] == "identity":
                kept, parked = item.get("kept", {}), item.get("parked", {})
                out.append(f"  identity clash: agent {item['agent']} was registered on two machines apart; the "
                           f"registration from {kept.get('node', '?')} ({kept.get('inception_ts', '?')}) keeps the "
                           f"name, the one from {parked.get('node', '?')} is parked in {item['record']}; that agent "
                           "must register under another name")
            else:
                out.append(f"  conflict: {item['path']} (the other version is kept in {item['record']})")
        for item in self.overlaps:
            first, second = item["reservations"]
            out.append(f"  overlapping reservations: {first['agent']} holds {first['path_pattern']!r} and "
                       f"{second['agent']} holds {second['path_pattern']!r}, granted apart; both were notified")
        for item in self.quarantined:
            out.append(f"  refused from {item['source']}: {item['path']}: {item['reason']}")
        if self.quarantine_ref:
            out.append(f"  the refused changes are kept aside in {self.quarantine_ref}; once the remote is fixed "
                       f"they go away, or run `gitmail repair {self.project} --remote {self.remote}`")
        return out


@dataclass
class SyncReport:
    """One sync of one project: a result per remote, and how far the index is."""

    project: str
    results: list[SyncResult]
    index: dict[str, Any] = field(default_factory=dict)
    relayed: list[RelayOutcome] = field(default_factory=list)  # cross-project copies completed after it

    @property
    def exit_code(self) -> int:
        return max((result.exit_code for result in self.results), default=OK)

    def to_result(self) -> ProjectSync:
        """This sync, as its typed answer."""
        return ProjectSync(project=self.project, exit_code=self.exit_code, status=_STATUS[self.exit_code],
                           results=[result.to_result() for result in self.results], index=self.index,
                           relayed=self.relayed or None)

    def to_dict(self) -> dict[str, Any]:
        return self.to_result().wire()

    def lines(self) -> list[str]:
        out = [line for result in self.results for line in result.lines()]
        if self.index.get("search_behind"):
            out.append(f"  search is still taking in {self.index['search_behind']} message(s); inbox reads "
                       "already see them")
        if self.relayed:
            out.append(f"  completed {len(self.relayed)} cross-project cop(ies) owed by this store's projects")
        return out


_STATUS = {OK: "ok", ATTENTION: "attention", FAILED: "failed"}


# -- merging one fetched commit --------------------------------------------------------------

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
    partial = is_partial(repo)  # a window join: records outside the window were never fetched (nor are newer)
    for path, blob in changes.items():
        if blob is not None and role_of(path) in CLOCKED_ROLES and not (partial and blob not in repo.odb):
            seen = clock_of(blob_data(repo, blob))
            if seen is not None and (newest is None or seen > newest):
                newest = seen
    if newest is not None:
        store.clock.observe(newest)


def integrate(store: Store, archive: Archive, theirs: str | None, label: str, result: SyncResult, *,
              compared: Comparisons | None = None) -> None:
    """Bring the commit ``theirs`` (named ``label`` in the merge commit) into the local main.

    When the two are at different layouts, the older side moves to the newer
    one: the local archive by a migration commit of its own before the merge
    (exactly what ``gitmail migrate`` makes), the other side within the merge,
    which takes what it wrote in at the newer layout's paths and so migrates
    it when pushed. ``compared`` holds the trees the sync's other steps
    compare (the check read what ``theirs`` adds; the findings read what
    enters ``main``).
    """
    repo = archive.repo
    compared = compared if compared is not None else Comparisons(repo.path)
    if theirs is None:
        return
    newer = tree_layout(_commit_tree(repo, theirs))
    for _ in range(MAX_INTEGRATE_TRIES):
        ours = archive.tip()
        if ours == theirs or (ours is not None and repo.descendant_of(ours, theirs)):
            return
        if ours is None or repo.descendant_of(theirs, ours):
            start = _entered_from(archive, ours, theirs)
            changes = changed_records(_commit_tree(repo, start), _commit_tree(repo, theirs), compared=compared)
            _observe(store, repo, changes)
            if archive.advance(ours, theirs):
                records, messages = _count(changes)
                result.records_in += records
                result.messages_in += messages
                result.fast_forwards += 1
                return
            continue  # main moved under us: look again
        if tree_layout(_commit_tree(repo, ours)) < newer:
            moved = migrate(archive)
            if moved.commit is not None:
                result.migrated = moved.to_dict()
            continue

        def merge(snapshot: Snapshot) -> Change:
            tip, here = snapshot.commit, snapshot.repo  # fn may run in another writer's thread
            if (tip == theirs or tip is None or here.descendant_of(tip, theirs) or here.descendant_of(theirs, tip)
                    or snapshot.layout < newer):
                return Change("nothing to merge", result=None)  # settled by the caller's next look
            merged = merge_commits(here, tip, theirs, compared=compared)
            subject = f"Merge {label}: {sum(merged.incoming.values())} files in"
            if merged.conflicts:
                subject += f", {len(merged.conflicts)} conflict(s) kept under conflicts/"
            # The paths come from git trees; the engine's tree editor checks each one as it applies it.
            return Change(subject, edits=merged.edits, links={path: blob.raw for path, blob in merged.taken.items()},
                          result=merged, merge_parent=theirs)

        committed = archive.transact(merge)
        merged: TreeMerge | None = committed.result
        if merged is None:
            continue
        if committed.commit is not None:  # what entered main is what the merge wrote: findings and index read it
            compared.learn_commit(archive.repo, committed.commit, archive.changes_of(committed.commit))
        if merged.newest_clock is not None:
            store.clock.observe(merged.newest_clock)
        records, messages = _count({**{path: "" if data is not None else None for path, data in merged.edits.items()},
                                    **dict.fromkeys(merged.taken, "")})
        result.records_in += records
        result.messages_in += messages
        result.merges += 1
        return
    raise GitmailError(RETRY_EXHAUSTED, "local writers kept moving main while the sync tried to merge; "
                       "nothing was lost, sync again in a moment", {"from": label})


# -- talking to the remote ----------------------------------------------------------------------

def _push(archive: Archive, project: str, remote: str, target: str = MAIN) -> str:
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
        reason = "; ".join(line for line in remote_lines if line.startswith("gitmail: refused")) or text.strip()
        raise GitmailError(SYNC_REJECTED, f"the remote refused the push: {reason}; these records in this machine's "
                           f"archive break the record rules: `gitmail fsck {project}` lists them and "
                           f"`gitmail repair {project} --remote {remote}` takes them out",
                           {"remote": remote, "details": remote_lines})
    if "[rejected]" in text or "fetch first" in text or "non-fast-forward" in text:
        return "behind"
    raise GitmailError(SYNC_FAILED, f"git push to {remote!r} failed: {_one_line(text)}; check the remote's URL and "
                       "your access to it", {"remote": remote, "exit_code": proc.returncode})


def _one_line(text: str) -> str:
    """git's message on one line (it wraps addresses and hints over several)."""
    return " ".join(text.split())


def _ref(repo: pygit2.Repository, name: str) -> str | None:
    ref = reference(repo, name)
    return None if ref is None else str(ref.resolve().target)


def fetch_remote(archive: Archive, remote: str) -> tuple[str | None, dict[str, str]]:
    """Fetch the remote's main and machine refs: (main's tip or None while empty, node -> tip)."""
    specs = [f"+{MAIN}:{tracking_ref(remote)}", f"+{NODE_REFS}/*:{tracking_nodes(remote)}/*"]
    cut = fetch_options(archive)  # an archive that joined shallow keeps its window (gitmail.sync.partial)
    proc = git(archive.git_dir, "fetch", "--quiet", "--no-tags", "--prune", *cut, remote, *specs, check=False)
    if proc.returncode != 0 and "no commits selected" in proc.stderr:
        # Every commit that came is dated before the window (a machine whose clock is behind): fetch them uncut.
        cut = [option for option in cut if not option.startswith("--shallow-since")]
        proc = git(archive.git_dir, "fetch", "--quiet", "--no-tags", "--prune", *cut, remote, *specs, check=False)
    has_main = True
    if proc.returncode != 0 and "couldn't find remote ref" in proc.stderr:
        has_main = False  # an empty remote (or one that only has machine refs): the first push fills main
        proc = git(archive.git_dir, "fetch", "--quiet", "--no-tags", *cut, remote, specs[1], check=False)
    if proc.returncode != 0:
        raise GitmailError(SYNC_FAILED, f"git fetch from {remote!r} failed: {_one_line(proc.stderr)}; check the "
                           "remote's URL and your access to it, then sync again", {"remote": remote})
    repo = archive.repo
    prefix = tracking_nodes(remote) + "/"
    nodes = {name[len(prefix):]: tip for name in repo.references
             if name.startswith(prefix) and (tip := _ref(repo, name)) is not None}
    return (_ref(repo, tracking_ref(remote)) if has_main else None), nodes


# -- one project ------------------------------------------------------------------------------

def sync_project(store: Store, project: str, remote: str | None = None, *, max_rounds: int = MAX_ROUNDS,
                 progress: Progress | None = None, catch_up_index: bool = True) -> SyncReport:
    """Sync one project with one remote (or each of its remotes, one after the other); one result per remote.

    A remote that fails does not stop the others: its result carries the
    error. With ``catch_up_index`` (the default), the project's index takes
    in what came before this returns (see the module documentation).
    """
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
    slug = store.resolve(project)
    compared = Comparisons(archive.git_dir)  # every step of this sync compares each pair of trees once
    parsed = Parsed()  # and parses each file that comes in once: the check's records feed the index
    results = [_sync_recorded(store, archive, slug, name, max_rounds, progress, compared=compared, parsed=parsed)
               for name in names]
    report = SyncReport(slug, results)
    # What came in may hold relays still owed (a send cut short here or elsewhere), or bring a project they
    # were waiting for: complete them now, by their message ids, so nothing is lost or doubled.
    report.relayed = relay.recover(Context(store))
    if catch_up_index and any(result.records_in for result in results):
        if progress is not None:
            progress("", "index")
        report.index = catch_up(store, slug, compared=compared, parsed=parsed)
    return report


def catch_up(store: Store, project: str, *, compared: Comparisons | None = None,
             parsed: Parsed | None = None) -> dict[str, Any]:
    """Have the project's index take in the tip now; how long it took, and what search still lacks.

    ``compared``: the trees the sync compared; what entered ``main`` is read from there, not compared again.
    ``parsed``: the records the sync's checks parsed; the messages among them are not parsed again.
    """
    started = time.monotonic()
    index = indexer_for(store).project(project)
    tip = index.catch_up(compared=compared, parsed=parsed)
    behind = index.meta.pending_count()
    out: dict[str, Any] = {"tip": tip, "caught_up": behind == 0, "seconds": round(time.monotonic() - started, 4)}
    if behind:
        out["search_behind"] = behind
    return out


def _sync_recorded(store: Store, archive: Archive, slug: str, remote: str, max_rounds: int,
                   progress: Progress | None, *, compared: Comparisons, parsed: Parsed) -> SyncResult:
    """Sync with one remote, keeping its sync state; a failure becomes the result's error."""
    result = SyncResult(project=slug, remote=remote)
    started = time.monotonic()
    record_attempt(archive, remote, store.clock.now_ts())
    try:
        _sync_one(store, archive, remote, max_rounds, result, progress, compared=compared, parsed=parsed)
    except GitmailError as exc:
        result.error = exc.to_dict()
    except (OSError, subprocess.SubprocessError) as exc:
        result.error = GitmailError(SYNC_FAILED, f"syncing with {remote!r} failed: {exc}; check the remote and "
                                    "this machine's disk, then sync again", {"remote": remote}).to_dict()
    except Exception as exc:  # noqa: BLE001 - an unforeseen failure with one remote must not stop the others
        _log.exception("sync of %s with %s failed unexpectedly", slug, remote)
        result.error = coded(exc).to_dict()
    result.seconds = round(time.monotonic() - started, 4)
    if result.error is not None:
        _log.warning("sync of %s with %s failed: [%s] %s", slug, remote, result.error["code"],
                     result.error["message"])
    record_outcome(archive, remote, store.clock.now_ts(), error=result.error, result=result.outcome())
    return result


def _sync_one(store: Store, archive: Archive, remote: str, max_rounds: int, result: SyncResult,
              progress: Progress | None, *, compared: Comparisons, parsed: Parsed) -> None:
    repo = archive.repo
    before = archive.tip()

    def step(name: str) -> None:
        if progress is not None:
            progress(remote, name)

    for round_no in range(1, max_rounds + 1):
        result.rounds = round_no
        step("fetch")
        theirs, nodes = fetch_remote(archive, remote)
        step("check")
        tips = [(f"{remote}/main", MAIN, theirs)] if theirs else []
        tips += [(f"{remote}/nodes/{node}", node_ref(node), tip) for node, tip in sorted(nodes.items())
                 if node != store.node]
        commits, refused = _commits_only(repo, tips)
        theirs = commits.get(f"{remote}/main")
        prepare(archive, remote, list(commits.values()))
        repo = archive.repo  # a fetch into a shallow archive may have moved its boundary: a fresh handle
        pinned = pinned_boundaries(archive.git_dir)
        checker = Checker(repo, "fetch", boundaries=pinned, parsed=parsed)
        trust = Trust(trusted_keyring(archive), read_pins(store.home), shallow=shallow_commits(archive.git_dir),
                      pinned=pinned)
        verdicts = VerdictCache(store.paths(result.project).derived)  # shared with `gitmail verify`
        checked = [item for label, tip in commits.items()
                   for item in _check(archive, checker, trust, tip, label, verdicts, compared=compared)]
        step("merge")
        for item in checked:
            integrate(store, archive, item.merge, item.label, result, compared=compared)
        # What the checks compared and parsed was read last by the merge; the findings and the index read
        # what entered main, and the index the messages that came: nothing else is kept for them.
        after = archive.tip()
        start = _entered_from(archive, before, after)
        compared.retain(_commit_tree(archive.repo, start), _commit_tree(archive.repo, after))
        parsed.retain(Message)
        result.quarantine_ref = keep_aside(archive, remote, checked)
        result.quarantined = refused + [{**rejection.to_dict(), "source": item.label}
                                        for item in checked for rejection in item.rejected]
        _findings(store, archive, before, result, compared=compared, parsed=parsed)
        ours = archive.tip()
        result.tip = ours
        if ours is None or ours == theirs:
            return
        step("push")
        target = MAIN
        if _push(archive, result.project, remote) != "ok":
            result.rejected_pushes += 1
            target = node_ref(store.node)
            if nodes.get(store.node) != ours and _push(archive, result.project, remote, target) != "ok":
                # Our own ref moved on the remote: another store uses this node name. Merge it and go again.
                time.sleep(_jitter.uniform(0, MAX_PAUSE))
                continue
        changes = changed_records(_commit_tree(repo, theirs), _commit_tree(repo, ours), compared=compared, keep=False)
        result.records_out, result.messages_out = _count(changes)
        result.pushed, result.pushed_to = True, "main" if target == MAIN else "node"
        return
    raise GitmailError(RETRY_EXHAUSTED, f"this machine's own ref on {remote!r} kept moving during {max_rounds} "
                       "rounds (does another store share this node name?); nothing was lost locally",
                       {"remote": remote})


def _commits_only(repo: pygit2.Repository,
                  tips: list[tuple[str, str, str]]) -> tuple[dict[str, str], list[dict[str, Any]]]:
    """The fetched tips that name commits (a tag is followed), by label; a refusal for each that names no commit.

    ``tips`` holds (label, the ref on the remote, fetched id). A ref on a
    hostile or broken remote may name a blob or a tree, which nothing can
    merge: it is left out and reported, and the rest of the remote syncs.
    """
    commits: dict[str, str] = {}
    refused: list[dict[str, Any]] = []
    for label, ref, tip in tips:
        obj = repo[tip]
        commit = commit_of(obj)
        if commit is not None:
            commits[label] = str(commit.id)
            continue
        refused.append({**Rejection(ref, f"names a {obj.type_str}, not a commit",
                                    f"whoever can write to the remote deletes that ref there (git update-ref -d "
                                    f"{ref}) or points it at a commit; until then every sync leaves it out").to_dict(),
                        "source": label})
    return commits, refused


def _check(archive: Archive, checker: Checker, trust: Trust, tip: str, label: str,
           verdicts: VerdictCache, *, compared: Comparisons) -> list[Checked]:
    """A fetched tip, checked unless the local main has it already: what of it may come in, and what may not.

    Every commit it brings is judged first by who signed it
    (:mod:`gitmail.storage.authorship`): when one is refused, what comes in
    is the newest commits that neither are refused nor build on one, each as
    the remote made and signed it, and the refused ones are kept aside.
    Signature verdicts are remembered by commit id, as ``gitmail verify``
    remembers them.
    """
    ours = archive.tip()
    repo = archive.repo
    if ours is not None and (ours == tip or repo.descendant_of(ours, tip)):
        return [Checked(label, tip, tip, None)]
    judged = judge_range(repo, tip, [ours] if ours else [], trust, verdicts=verdicts.known, rules=SYNC_RULES)
    verdicts.add(judged.checked.items())
    if tip not in judged.tainted:  # nothing refused, or only commits a repair merge mended
        return [check_tip(archive, checker, tip, label, rules=SYNC_RULES, compared=compared)]
    good = judged.acceptable()
    parents = {str(parent) for commit in good for parent in repo[commit].peel(pygit2.Commit).parent_ids}
    heads = [commit for commit in good if commit not in parents]
    out = [check_tip(archive, checker, head, label, rules=SYNC_RULES, compared=compared) for head in heads]
    last = judged.order[-1]
    out.append(Checked(label, last, checker.base_of(last, ours), None, file_rejections(repo, judged)))
    return out


def _entered_from(archive: Archive, before: str | None, after: str | None) -> str | None:
    """The commit what entered main between ``before`` and ``after`` is counted from: ``before``, or, in an
    archive that had nothing before (a window join), the boundary it joined at."""
    return before if before is not None or after is None else joined_from(archive, after)


def _findings(store: Store, archive: Archive, before: str | None, result: SyncResult, *,
              compared: Comparisons, parsed: Parsed) -> None:
    """Conflicts and overlapping reservations among what entered main since ``before``; notices for the latter."""
    repo = archive.repo
    after = archive.tip()
    if after == before or after is None:
        return
    start = _entered_from(archive, before, after)
    entered = changed_records(_commit_tree(repo, start), _commit_tree(repo, after), compared=compared)
    result.conflicts = conflicts_entered(repo, entered)
    arrived = arrived_reservations(entered)
    if not arrived:
        return
    in_force = indexer_for(store).project(result.project).active_reservations(archive.snapshot(after),
                                                                              store.clock.now(), compared=compared,
                                                                              parsed=parsed)
    pairs = overlapping_reservations(in_force, arrived)
    result.overlaps = [overlap_view(pair) for pair in pairs]
    send_notices(archive, pairs)
