"""Who may write what: the one rule ``gitmail verify`` and every door judge a commit by.

Every commit gitmail writes is signed by its machine's key (a *node*,
``nodes/<node>.yaml``). A commit is accepted when its signature checks, the
key is one of the project's nodes and not revoked, and its signer may write
each record it adds or changes:

- a record in an agent's name (its messages with their inbox copies and held
  copies, its outbox, receipts, seat, journal, idempotency keys,
  reservations, the records of the files it uploaded, the channels it
  makes and its posts to them, the project's defaults and memory folder
  files it last wrote, and its profile) must be signed by the node the agent is
  bound to: the ``node`` its profile names, set when it is registered (the
  commit adding a profile must be signed by the node it names) and moved
  only by a change its current node signs (a handover);
- what a record rule lets another agent or the operator do needs any node of
  the project: deleting records (purges leave tombstones, deleted agents take
  their files along, repairs), releasing someone's reservation, retiring or
  orphaning an agent (status and hierarchy fields of a profile), and every
  record kept in no agent's name (contacts, tombstones, repairs, conflicts,
  relays, windows, summaries, nodes, revocations, adoptions, the layout);
  mail from another project (``Name@<slug>``, a relay) and the overseer's
  records are written wherever the operator works, so any node may write
  them too;
- a person's own key (``gitmail nodes add --human``) signs the operator's
  hand edits, which the record checker alone judges (whoever holds such a
  key acts as the operator: revoke it when it is lost);
- a merge commit holds what the merge rules compute from its parents: each
  record it changes over its first parent is the second parent's version,
  or the merged version the rules compute (given by the caller, who knows
  them); anything else in it is judged as a write of its signer;
- a record a rule derives from others, the same wherever it is computed (a
  notice of overlapping reservations, in the name of one holder; the notice
  and the claim a ``claim`` escalation files for the operations agent), may
  be written by any node;
- an agent bound to a lost node (every key it had revoked) may be handed
  over to another node by any node;
- an agent whose profile names no node (written before agents were bound)
  may be written for by any node.

Which keys are known comes from the archive (:func:`gitmail.storage.nodes.keyring`);
a node never seen before is trusted on first use when its record arrives in
a commit its own key signs, or in a commit a known key signs (``gitmail
nodes add``: a person's key and its first commits may arrive together),
unless this machine pinned another key for that name. The caller decides
what a refusal does: ``verify`` reports it, a push is refused, a fetch keeps
the commit out of ``main``.

In an archive that joined shallow (:mod:`.boundary`), a boundary commit
(one whose parents this machine never fetched) cannot be judged by what it
changes: one fetched from the hub this machine pinned is trusted as that
hub's history and neither it nor what lies below it is judged; any other is
refused as ``unpinned-boundary``.

History written before commits were signed comes in through a door when an
adoption at the tip vouches for it (:func:`adoption_excuses`), and a door
honours a revocation arriving in the range it judges
(:func:`_revocations_arriving`).
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import re
import subprocess
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass, field

import pygit2

from gitmail.model import sshsig
from gitmail.model.errors import GitmailError
from gitmail.model.records import (
    ADOPTIONS,
    AGENTS,
    LAYOUT,
    NODES,
    PROJECT_PATH,
    REVOCATIONS,
    Adoption,
    Agent,
    Channel,
    FileRecord,
    MemoryDoc,
    Node,
    OrgContext,
    Record,
    Repair,
    Reservation,
    Revocation,
    adoption_path,
    classify,
    placed,
    profile_path,
    role_of,
)

from .handles import tree_entry
from .layout import changed_records
from .nodes import Keyring, keyring
from .objects import split_signature
from .rawdiff import NO_ID, read_raw
from .recordcheck import Rejection
from .snapshot import Snapshot, blob_in, records_in, tree_layout

UNSIGNED, BAD, SIGNED = 0, 1, 2  # a commit's signature verdict
NO_KEY = bytes(32)
NOT_ALLOWED = "not-allowed-writer"
UNPINNED_BOUNDARY = "unpinned-boundary"
BUILDS_ON_REFUSED = "builds-on-refused"
# Ranges of this many commits or more take every commit's changes from one `git log --raw` (a process
# of its own, which diffs trees in C and skips equal folders by id) instead of reading trees here.
BATCH_FROM = 64
PARALLEL_FROM = 4096  # fewer unchecked signatures than this are checked in this process (a pool costs more to start)
# Roles whose records are in the name of the agent whose folder holds them.
_FOLDER_OWNED = frozenset({"outbox", "receipt", "seat", "journal", "idempotency"})
# Roles holding a message (or a channel post) whose sender it is written for.
_SENT = frozenset({"message", "inbox", "held", "post"})
# Profile fields other agents and the operator change by rule: retiring, deregistering, orphaning.
_OPERATOR_FIELDS = frozenset({"status", "retired_at", "hlc", "parent", "parent_id", "orphaned_from",
                              "orphaned_from_id", "asleep", "sleep_until"})
_RELEASE_FIELDS = frozenset({"released_ts", "hlc"})  # a force-release by another agent
_KEY_FIELDS = frozenset({"key_hash", "key_expires_at", "refresh_window_s"})  # a headless key, deleted on leaving
_HANDOVER_FIELDS = frozenset({"node", "hlc"})
_AGENTS_FOLDER, _PROFILE_FILE = AGENTS + "/", "/profile.yaml"

Verdict = tuple[int, bytes]  # (UNSIGNED | BAD | SIGNED, the signer's raw key or NO_KEY)
# The merged version of each record the merge rules compute for a merge (first parent, second parent),
# by path at the newest layout (None: deleted); supplied by the layer that knows the merge rules.
MergeRule = Callable[[pygit2.Repository, str, str], Mapping[str, bytes | None]]
# Whether a record is one a rule derives from others in the tree (a notice of overlapping reservations):
# any node may write it, being the same wherever it is computed.
DerivedRule = Callable[[pygit2.Repository, pygit2.Tree, Record], bool]


@dataclass(frozen=True)
class Rules:
    """The record rules the judging needs from the layer that knows them: merges, and derived records."""

    merged: MergeRule | None = None
    derived: DerivedRule | None = None


NO_RULES = Rules()  # merges and derived records judged as any other write

ADVICE = {
    "unsigned": ("sign your commits: the operator registers your git signing key with `gitmail nodes add PROJECT "
                 "NAME --key 'ssh-ed25519 ...' --human`; then `git config gpg.format ssh`, `git config user.signingkey "
                 "<your key>` and `git commit --amend -S` (gitmail's own commits are always signed)"),
    "bad-signature": "the commit was changed after it was signed: drop it and write the change again",
    "unknown-key": ("the key that signed it is none of this project's nodes: register it with `gitmail nodes add "
                    "PROJECT NAME --key KEY --human`, or let that machine sync once so its node record arrives first"),
    "revoked-key": ("that key was revoked (`gitmail nodes list PROJECT`); write from a machine whose key is "
                    "current"),
    UNPINNED_BOUNDARY: ("this machine joined shallow and trusts cut-off history only from the hub it pinned: sync "
                        "with that hub, or fetch the rest of the history (`gitmail deepen PROJECT --since all`)"),
}


def signature_verdict(raw: bytes) -> Verdict:
    """Whether a commit object's bytes carry a signature that checks, and whose key made it."""
    signature, payload = split_signature(raw)
    if signature is None:
        return UNSIGNED, NO_KEY
    try:
        return SIGNED, sshsig.signer_of(signature, payload)
    except sshsig.SignatureError:
        return BAD, NO_KEY


def claimed_verdict(raw: bytes) -> Verdict:
    """The verdict a commit's bytes claim before its signature is checked: SIGNED by the key the signature names.

    Unsigned and malformed signatures are final here; a well-formed one may
    still fail :func:`signature_verdict` (bytes changed after signing).
    """
    signature, _ = split_signature(raw)
    if signature is None:
        return UNSIGNED, NO_KEY
    try:
        return SIGNED, sshsig.claimed_signer(signature)
    except sshsig.SignatureError:
        return BAD, NO_KEY


def _verdicts(raws: list[bytes]) -> list[Verdict]:
    return [signature_verdict(raw) for raw in raws]


class _SignatureChecks:
    """Signatures being checked: in a pool of processes from ``parallel_from`` of them, else here when asked.

    A signature costs some 100 microseconds to check, nearly all of it the
    ed25519 verification, so a long range is split between processes; while
    they work (``pending``), the caller's own process is free to judge by
    the keys the signatures name (:func:`claimed_verdict`).
    """

    def __init__(self, raws: list[bytes], *, workers: int, parallel_from: int):
        self.raws = raws
        self.pool: ProcessPoolExecutor | None = None
        self.parts: list[Future[list[Verdict]]] = []
        if len(raws) >= parallel_from and workers >= 2:
            size = -(-len(raws) // (workers * 4))
            # forkserver: a server's threads are never forked mid-flight
            self.pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("forkserver"))
            self.parts = [self.pool.submit(_verdicts, raws[i:i + size]) for i in range(0, len(raws), size)]

    @property
    def pending(self) -> bool:
        return self.pool is not None

    def result(self) -> list[Verdict]:
        """Every verdict, in order (waiting for the pool's)."""
        if self.pool is None:
            return _verdicts(self.raws)
        return [verdict for part in self.parts for verdict in part.result()]

    def __enter__(self) -> _SignatureChecks:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.pool is not None:
            self.pool.shutdown(cancel_futures=True)


@dataclass(frozen=True)
class Refusal:
    """One thing a commit may not do: its code (stable), the file (None: the commit as a whole), why, what to do."""

    commit: str
    code: str  # unsigned | bad-signature | unknown-key | revoked-key | not-allowed-writer
    path: str | None
    node: str | None  # the node whose key signed it, when known
    reason: str
    advice: str
    blob: str | None = None


@dataclass
class Judged:
    """A range of commits judged oldest first: what each may not do, and which build on a refused one."""

    order: list[str] = field(default_factory=list)
    refusals: list[Refusal] = field(default_factory=list)
    refused: set[str] = field(default_factory=set)  # commits with a refusal of their own
    tainted: set[str] = field(default_factory=set)  # refused commits and every commit built on one
    checked: dict[bytes, Verdict] = field(default_factory=dict)  # signatures checked while judging, by raw id
    # Commits refused as signed by a revoked key that lie below the commit adding its revocation: made before it.
    before_revocation: set[str] = field(default_factory=set)

    def acceptable(self) -> list[str]:
        """The commits judged that neither are refused nor build on a refused one, oldest first."""
        return [commit for commit in self.order if commit not in self.tainted]


@dataclass
class Trust:
    """The keys a door trusts while it judges: the archive's keyring, extended by nodes trusted on first use."""

    ring: Keyring
    pins: Mapping[str, str] = field(default_factory=dict)  # node -> the public line this machine pinned
    learned: dict[bytes, str] = field(default_factory=dict)
    humans: set[str] = field(default_factory=set)  # learned nodes that are people's keys
    # Keys whose revocation arrives in the range judged, by raw key: the commits of the range below that revocation
    # (made before it, so accepted then, and held by every machine that took the revocation in).
    revoked_after: dict[bytes, set[str]] = field(default_factory=dict)
    shallow: frozenset[str] = frozenset()  # boundary commits of a shallow archive (parents never fetched)
    pinned: frozenset[str] = frozenset()  # those of them fetched from the pinned hub: trusted, not judged

    def fork(self) -> Trust:
        """A copy whose learning leaves this one as it is (a judging that may be thrown away)."""
        return dataclasses.replace(self, learned=dict(self.learned), humans=set(self.humans),
                                   revoked_after={key: set(below) for key, below in self.revoked_after.items()})

    def take(self, other: Trust) -> None:
        """Hold what ``other`` (a :meth:`fork` of this one) learned."""
        self.learned, self.humans, self.revoked_after = other.learned, other.humans, other.revoked_after

    def node_of(self, key: bytes) -> str | None:
        return self.ring.keys.get(key) or self.learned.get(key)

    def state(self, key: bytes, commit: str | None = None) -> str:
        """``known``, ``unknown`` or ``revoked`` (a key revoked in the range: for ``commit`` when made after it)."""
        below = self.revoked_after.get(key)
        if key in self.ring.revoked or (below is not None and commit not in below):
            return "revoked"
        return "known" if self.node_of(key) is not None else "unknown"

    def first_use(self, repo: pygit2.Repository, commit: pygit2.Commit, key: bytes,
                  profiles: _Profiles | None = None) -> None:
        """Trust ``key`` if ``commit`` adds the record of a node never seen before that names it."""
        if key not in self.ring.revoked:
            self._learn(repo, commit, only=key, profiles=profiles)

    def registered(self, repo: pygit2.Repository, commit: pygit2.Commit, listed: Changes | None = None,
                   profiles: _Profiles | None = None) -> None:
        """Trust the keys of new nodes ``commit`` registers (``gitmail nodes add``), it being signed by a known key.

        So a person's key and the first commit it signs may arrive in one
        push or fetch; any node may register a key, so this trusts no one
        that a node could not have made a node of its own by first use.
        ``listed``: the commit's changes as git listed them, when it did;
        ``profiles``: the judging's, which then compares the commit with its
        parent once for this and for what it writes.
        """
        if listed is not None:
            changed = any(path.startswith(NODES + "/") for path in listed)
        else:
            changed = _subtree(commit.tree, NODES) != _subtree(commit.parents[0].tree if commit.parents else None,
                                                               NODES)
        if changed:
            self._learn(repo, commit, only=None, profiles=profiles)

    def _learn(self, repo: pygit2.Repository, commit: pygit2.Commit, *, only: bytes | None,
               profiles: _Profiles | None) -> None:
        """Learn the keys of node records ``commit`` adds for names never seen (only ``only``'s, when given).

        A node's record sits at one path in every layout, so the changes as
        ``profiles`` names them (at the newest layout), kept for judging the
        commit's writes, list the same node records.
        """
        parent = commit.parents[0].tree if commit.parents else None
        names = set(self.ring.keys.values()) | set(self.learned.values())
        changes = (profiles.kept_changes(parent, commit.tree, profiles.listed.get(commit.id.raw))
                   if profiles is not None else changed_records(parent, commit.tree))
        for path, blob in changes.items():
            if blob is None or role_of(path) != "node" or blob_in(parent, path) is not None:
                continue
            data = _blob_bytes(repo, blob)
            if data is None:
                continue
            try:
                record = Node.from_bytes(data, path)
                raw = sshsig.parse_public_line(record.key)
            except (GitmailError, sshsig.SignatureError):
                continue
            pinned = self.pins.get(record.node)
            if ((only is None or raw == only) and raw not in self.ring.revoked and record.node not in names
                    and (pinned is None or pinned == record.key)):
                self.learned[raw] = record.node
                if record.kind == "human":
                    self.humans.add(record.node)

    def is_human(self, node: str) -> bool:
        """Whether ``node`` is a person's key (``nodes add --human``): its commits are hand edits."""
        return node in self.ring.humans or node in self.humans


def _subtree(tree: pygit2.Tree | None, name: str) -> pygit2.Oid | None:
    """The id of ``tree``'s entry ``name`` (None: no such entry)."""
    if tree is None:
        return None
    entry = tree_entry(tree, name)
    return None if entry is None else entry.id


def as_rejection(refusal: Refusal) -> Rejection:
    """A refusal as the doors report it: by file, or by commit when the commit as a whole is refused."""
    return Rejection(refusal.path or f"commit {refusal.commit}", f"[{refusal.code}] {refusal.reason}",
                     refusal.advice, refusal.blob, refusal.code)


def tainted_rejections(judged: Judged) -> list[Rejection]:
    """One rejection for each commit left out only because it builds on a refused one."""
    return [Rejection(f"commit {commit}", f"[{BUILDS_ON_REFUSED}] commit {commit[:12]} builds on a refused commit",
                      "its records come in once they are written again on history every door accepts", None,
                      BUILDS_ON_REFUSED)
            for commit in judged.order if commit in judged.tainted and commit not in judged.refused]


def judge_range(repo: pygit2.Repository, tip: str, hide: list[str], trust: Trust, *,
                verdicts: Mapping[bytes, Verdict] | None = None, rules: Rules = NO_RULES,
                workers: int = 2, parallel_from: int = PARALLEL_FROM) -> Judged:
    """Judge every commit of ``tip`` that no commit of ``hide`` reaches, oldest first (see the module docs).

    ``verdicts`` holds signature verdicts known already, by raw commit id;
    the rest are checked here (in ``workers`` processes when there are
    ``parallel_from`` or more) and returned in ``Judged.checked`` for the caller to remember.
    What an accepted adoption at ``tip`` vouches for is accepted
    (:func:`adoption_excuses`), and a revocation arriving in the range
    counts (:func:`_revocations_arriving`): ``verify`` and every door
    judge by this one function.

    While a pool checks the signatures, this process judges the range by
    the keys they name (:func:`claimed_verdict`), on a fork of ``trust``.
    That judging stands only when every signature then checks as it
    claimed; otherwise the range is judged again from the checked verdicts,
    so a bad signature is refused whichever finished first.
    """
    walker = repo.walk(pygit2.Oid(hex=tip), pygit2.enums.SortMode.TOPOLOGICAL | pygit2.enums.SortMode.REVERSE)
    hidden = [*hide, *(trust.pinned & trust.shallow)]  # a pinned boundary and what lies below it are not judged
    for hexsha in hidden:
        walker.hide(pygit2.Oid(hex=hexsha))
    commits = list(walker)
    known = verdicts if verdicts is not None else {}
    profiles = _Profiles(repo)
    early: tuple[dict[bytes, Verdict], Trust, Judged] | None = None
    with ThreadPoolExecutor(1) as lister:  # git lists the changes while the signatures are checked
        listing = lister.submit(listed_changes, repo, tip, hidden) if len(commits) >= BATCH_FROM else None
        new = [commit for commit in commits if commit.id.raw not in known]
        raws = [commit.read_raw() for commit in new]
        ids = [commit.id.raw for commit in new]
        with _SignatureChecks(raws, workers=workers, parallel_from=parallel_from) as checks:
            if listing is not None:
                profiles.listed = listing.result()
            if checks.pending:
                claimed = dict(zip(ids, map(claimed_verdict, raws), strict=True))
                forked = trust.fork()
                early = (claimed, forked, _judge_found(repo, tip, hidden, commits, _found(commits, claimed, known),
                                                       forked, profiles=profiles, rules=rules))
            checked = dict(zip(ids, checks.result(), strict=True))
    if early is not None and early[0] == checked:  # every signature checked as it claimed: that judging stands
        trust.take(early[1])
        early[2].checked = checked
        return early[2]
    judged = _judge_found(repo, tip, hidden, commits, _found(commits, checked, known), trust, profiles=profiles,
                          rules=rules)
    judged.checked = checked
    return judged


def _found(commits: list[pygit2.Commit], new: Mapping[bytes, Verdict],
           known: Mapping[bytes, Verdict]) -> dict[bytes, Verdict]:
    """Each commit's verdict by raw id: from this range's ``new`` ones, or else the ``known`` ones."""
    return {commit.id.raw: new.get(commit.id.raw) or known[commit.id.raw] for commit in commits}


def _judge_found(repo: pygit2.Repository, tip: str, hidden: list[str], commits: list[pygit2.Commit],
                 found: Mapping[bytes, Verdict], trust: Trust, *, profiles: _Profiles, rules: Rules) -> Judged:
    """Judge ``commits`` given each one's signature verdict in ``found`` (see :func:`judge_range`)."""
    judged = Judged()
    for commit in commits:  # a node whose record arrives signed by its own key (first use) or by a known one
        verdict = found[commit.id.raw]
        state = trust.state(verdict[1]) if verdict[0] == SIGNED else None
        if state == "unknown":
            trust.first_use(repo, commit, verdict[1], profiles)
        elif state == "known":
            trust.registered(repo, commit, profiles.listed.get(commit.id.raw) if profiles.listed else None, profiles)
    _revocations_arriving(repo, tip, hidden, commits, found, trust)
    _judge_each(repo, commits, found, trust, judged, profiles=profiles, rules=rules)
    codes = {refusal.code for refusal in judged.refusals}
    if "revoked-key" in codes:
        judged.before_revocation = _before_revocation(repo, tip, hidden, commits, found, trust)
    if codes & {"unsigned", "revoked-key"}:
        excused = adoption_excuses(repo, tip, hidden, commits, found, judged)
        if excused:
            again = Judged(before_revocation=judged.before_revocation)
            _judge_each(repo, commits, found, trust, again, profiles=profiles, rules=rules, excused=excused)
            return again
    return judged


def _revocations_arriving(repo: pygit2.Repository, tip: str, hidden: list[str], commits: list[pygit2.Commit],
                          found: Mapping[bytes, Verdict], trust: Trust) -> None:
    """Make the door refuse what a key signed after its revocation, when the revocation arrives in this range.

    A machine that joins (or has not yet seen a revocation) would otherwise
    judge by the keys it held before the fetch. A revocation counts when
    the commit of the range that adds it is signed by a known key that is
    not the revoked one (a forged revocation cannot make a door refuse
    honest commits); the revoked key's commits below that commit stay
    accepted, as every machine that took the revocation in holds them
    (``verify`` still reports them, for the operator to adopt or repair).
    """
    for record in records_in(Snapshot(repo, tip), REVOCATIONS, Revocation):
        try:
            raw = sshsig.parse_public_line(record.key)
        except sshsig.SignatureError:
            continue
        if raw in trust.ring.revoked or raw in trust.revoked_after:
            continue
        path = record.path()
        adding = next((commit for commit in commits if blob_in(commit.tree, path) is not None), None)
        if adding is None:
            continue
        state, signer = found[adding.id.raw]
        if state != SIGNED or signer == raw or trust.state(signer) != "known":
            continue
        trust.revoked_after[raw] = _history(repo, str(adding.id), hidden)


def _judge_each(repo: pygit2.Repository, commits: list[pygit2.Commit], found: Mapping[bytes, Verdict], trust: Trust,
                judged: Judged, *, profiles: _Profiles, rules: Rules, excused: frozenset[str] = frozenset()) -> None:
    """Judge ``commits`` (oldest first) into ``judged``; those in ``excused`` are accepted as they are."""
    for commit in commits:
        hexsha = str(commit.id)
        judged.order.append(hexsha)
        refusals = [] if hexsha in excused else judge_commit(repo, commit, found[commit.id.raw], trust,
                                                              profiles=profiles, rules=rules)
        judged.refusals += refusals
        if refusals:
            judged.refused.add(hexsha)
        if refusals or (any(str(parent) in judged.tainted for parent in commit.parent_ids)
                        and not _mends(repo, commit, judged.tainted)):
            judged.tainted.add(hexsha)


def adoption_excuses(repo: pygit2.Repository, tip: str, hidden: list[str], commits: list[pygit2.Commit],
                     found: Mapping[bytes, Verdict], judged: Judged) -> frozenset[str]:
    """The refused commits of the range an adoption at ``tip`` vouches for: the one rule of verify and every door.

    ``gitmail adopt [--commit C]`` records that history up to ``C`` is
    trusted as it is. Such a record (``adoptions/<C>.yaml`` at ``tip``)
    counts when the commit that adds it is accepted by itself (signed by a
    known key that may write it, or by a revoked key before its
    revocation), and then vouches, among the commits of ``C``'s history,
    only for

    - unsigned commits with no signed commit below them: the history from
      before the project signed anything; and
    - commits signed by a key revoked at ``tip`` that lie below the commit
      adding its revocation: what a lost machine signed before it was
      revoked, which the operator vouches for up to ``C`` (the theft came
      after ``C``).

    Anything else in ``C``'s history is judged as ever: an unsigned commit
    made on signed history, or a revoked key's commit made after its
    revocation, is refused whatever adoption names it, so a node (any node
    may write an adoption) cannot launder a forgery with one.
    """
    adoptions = records_in(Snapshot(repo, tip), ADOPTIONS, Adoption)
    if not adoptions:
        return frozenset()
    order = [str(commit.id) for commit in commits]
    coverable = _before_signing(repo, commits, found) | judged.before_revocation
    excused: set[str] = set()
    for record in adoptions:
        path = adoption_path(record.commit)
        adding = next((commit for commit in commits if blob_in(commit.tree, path) is not None), None)
        if (adding is None or record.commit not in repo
                or (str(adding.id) in judged.refused and str(adding.id) not in judged.before_revocation)
                or not repo.descendant_of(adding.id, pygit2.Oid(hex=record.commit))):
            continue
        excused |= _history(repo, record.commit, hidden) & coverable
    return frozenset(hexsha for hexsha in order if hexsha in excused)


def _history(repo: pygit2.Repository, start: str, hidden: list[str]) -> set[str]:
    """``start`` and every commit below it that no commit of ``hidden`` reaches."""
    walker = repo.walk(pygit2.Oid(hex=start))
    for hexsha in hidden:
        walker.hide(pygit2.Oid(hex=hexsha))
    return {str(commit.id) for commit in walker}


def _before_revocation(repo: pygit2.Repository, tip: str, hidden: list[str], commits: list[pygit2.Commit],
                       found: Mapping[bytes, Verdict], trust: Trust) -> set[str]:
    """The commits of the range signed by a key revoked at ``tip`` that lie below the commit adding its revocation."""
    by_key: dict[bytes, set[str]] = {}
    for commit in commits:
        state, key = found[commit.id.raw]
        if state == SIGNED and trust.state(key, str(commit.id)) == "revoked":
            by_key.setdefault(key, set()).add(str(commit.id))
    if not by_key:
        return set()
    out: set[str] = set()
    for record in records_in(Snapshot(repo, tip), REVOCATIONS, Revocation):
        try:
            signed = by_key.get(sshsig.parse_public_line(record.key), set())
        except sshsig.SignatureError:
            continue
        path = record.path()
        adding = next((commit for commit in commits if blob_in(commit.tree, path) is not None), None)
        if signed and adding is not None:
            out |= signed & _history(repo, str(adding.id), hidden)
    return out


def _before_signing(repo: pygit2.Repository, commits: list[pygit2.Commit],
                    found: Mapping[bytes, Verdict]) -> set[str]:
    """The commits of the range (oldest first) that are unsigned and have no signed commit below them."""
    in_range = {str(commit.id) for commit in commits}
    out: set[str] = set()
    outside: dict[str, bool] = {}  # a parent outside the range (hidden): whether all its history is unsigned
    for commit in commits:
        if found[commit.id.raw][0] != UNSIGNED:
            continue
        parents = [str(parent) for parent in commit.parent_ids]
        if all(parent in out if parent in in_range else _all_unsigned(repo, parent, outside) for parent in parents):
            out.add(str(commit.id))
    return out


def _all_unsigned(repo: pygit2.Repository, start: str, memo: dict[str, bool]) -> bool:
    """Whether ``start`` and every commit below it are unsigned (remembered in ``memo``)."""
    if start not in memo:
        memo[start] = all(split_signature(commit.read_raw())[0] is None for commit in repo.walk(pygit2.Oid(hex=start)))
    return memo[start]


def _mends(repo: pygit2.Repository, commit: pygit2.Commit, tainted: set[str]) -> bool:
    """Whether ``commit`` is a repair that merges refused commits and takes in nothing of them.

    ``gitmail repair`` mends a hub whose ``main`` took a refused commit: it
    merges that ``main`` into an accepted one, and its tree is its first
    parent's but for the repair records and the files they name. Such a
    merge brings no refused record along, so what builds on it is accepted.
    """
    if len(commit.parent_ids) < 2 or str(commit.parent_ids[0]) in tainted:
        return False
    changes = changed_records(commit.parents[0].tree, commit.tree, named_at=LAYOUT)
    named: set[str] = set()
    for path, blob in changes.items():
        if blob is not None and role_of(path) == "repair":
            record = _parse(repo, path, blob)
            if isinstance(record, Repair):
                named.add(placed(record.file, LAYOUT))
    return bool(named) and all(role_of(path) == "repair" or path in named for path in changes)


def mended(repo: pygit2.Repository, judged: Judged, tip: str) -> set[str]:
    """The refused commits of ``judged`` whose taint no longer reaches ``tip``: a repair took nothing of them.

    A refused commit taints what builds on it, except through a repair
    merge that takes in none of its records (:func:`_mends`); so a refused
    commit still in effect at ``tip`` is one from which a chain of tainted
    commits leads to it. The others stay in the history, mended.
    """
    live: set[str] = set()
    todo = [tip] if tip in judged.tainted else []
    while todo:
        hexsha = todo.pop()
        if hexsha in live:
            continue
        live.add(hexsha)
        todo += [parent for parent in map(str, repo[hexsha].peel(pygit2.Commit).parent_ids)
                 if parent in judged.tainted]
    return judged.refused - live


def file_rejections(repo: pygit2.Repository, judged: Judged) -> list[Rejection]:
    """What a fetch keeps aside, by file: every record a refused commit changes, each under a refusal.

    A refused commit is left out whole, so each record it changes over its
    first parent is listed: under its own refusal when it has one, else
    under the commit's. ``gitmail repair`` then takes each out (or puts back
    what it deleted) the way it mends any refused file.
    """
    out: list[Rejection] = []
    by_commit: dict[str, list[Refusal]] = {}
    for refusal in judged.refusals:
        by_commit.setdefault(refusal.commit, []).append(refusal)
    for hexsha, refusals in by_commit.items():
        own = {refusal.path: refusal for refusal in refusals if refusal.path is not None}
        first = refusals[0]
        commit = repo[hexsha].peel(pygit2.Commit)
        changes = changed_records(commit.parents[0].tree if commit.parents else None, commit.tree)
        for path, blob in sorted(changes.items()):
            if path in own:
                out.append(as_rejection(own[path]))
                continue
            out.append(Rejection(path, f"[{first.code}] written by commit {hexsha[:12]}, refused: {first.reason}",
                                 first.advice, None if blob is None else str(blob), first.code))
        if not changes:
            out.append(as_rejection(first))
    return out + tainted_rejections(judged)


def judge_commit(repo: pygit2.Repository, commit: pygit2.Commit, verdict: Verdict, trust: Trust, *,
                 profiles: _Profiles | None = None, rules: Rules = NO_RULES) -> list[Refusal]:
    """What one commit may not do: its signature first, then each record it writes."""
    hexsha = str(commit.id)
    if hexsha in trust.shallow:  # not a pinned one: those are never walked (judge_range hides them)
        return [Refusal(hexsha, UNPINNED_BOUNDARY, None, None, f"commit {hexsha[:12]} is a shallow boundary (its "
                        "parents were never fetched) that did not come from the pinned hub", ADVICE[UNPINNED_BOUNDARY])]
    state, key = verdict
    code = {UNSIGNED: "unsigned", BAD: "bad-signature"}.get(state)
    if code is None and trust.state(key, hexsha) != "known":
        code = trust.state(key, hexsha) + "-key"
    node = trust.node_of(key) if state == SIGNED else None
    if code is not None:
        reason = {"unsigned": "carries no signature", "bad-signature": "carries a signature that does not match "
                  "its bytes", "unknown-key": "is signed by a key that is none of this project's nodes",
                  "revoked-key": f"is signed by the revoked key of node {node}"}[code]
        return [Refusal(hexsha, code, None, node, f"commit {hexsha[:12]} {reason}", ADVICE[code])]
    assert node is not None
    human = trust.is_human(node)
    return _write_refusals(repo, commit, node, human, profiles or _Profiles(repo), rules)


def _write_refusals(repo: pygit2.Repository, commit: pygit2.Commit, node: str, human: bool, profiles: _Profiles,
                    rules: Rules) -> list[Refusal]:
    parents = commit.parents
    exempt: Callable[[str, pygit2.Oid | None], bool] = lambda path, blob: False  # noqa: E731
    if len(parents) > 1:
        exempt = _merge_exemption(repo, commit, rules.merged)
    if human:
        return []  # the operator's hand edit: the record checker alone judges it
    return writes_refused(repo, parents[0].tree if parents else None, commit.tree, node, commit=str(commit.id),
                          profiles=profiles, rules=rules, exempt=exempt, listed=profiles.listed.get(commit.id.raw))


def writes_refused(repo: pygit2.Repository, before: pygit2.Tree | None, after: pygit2.Tree, node: str, *,
                   commit: str = "", profiles: _Profiles | None = None, rules: Rules = NO_RULES,
                   exempt: Callable[[str, pygit2.Oid | None], bool] | None = None,
                   listed: Changes | None = None) -> list[Refusal]:
    """The records that change from ``before`` to ``after`` which node ``node`` may not write (the rule itself).

    Also asked before a commit is made: a sync keeps out of the valid part
    it builds what this machine's node may not sign. ``listed``: the
    changes as git listed them (:func:`listed_changes`), used when both
    trees are at the newest layout.
    """
    profiles = profiles or _Profiles(repo)
    refusals = []
    for path, blob in sorted(profiles.changes(before, after, listed).items()):
        if blob is None or (exempt is not None and exempt(path, blob)):
            continue  # deletions follow the record rules, which let any node make them
        owner = _owner(repo, path, blob, before, after, profiles)
        if owner is None or owner[1] == node or _derived(repo, path, blob, after, rules):
            continue  # anyone's to write, written by the agent's own node, or derived the same everywhere
        agent, bound = owner
        refusals.append(Refusal(
            commit, NOT_ALLOWED, path, node,
            f"signed by node {node}, which may not write it: it is in the name of {agent}, bound to {bound}",
            f"write in {agent}'s name only from {bound} (its server or CLI there); to move the agent to another "
            f"machine, {bound} hands it over (`gitmail nodes handover PROJECT {agent} NODE`)", str(blob)))
    return refusals


def _merge_exemption(repo: pygit2.Repository, commit: pygit2.Commit,
                     merge_rule: MergeRule | None) -> Callable[[str, pygit2.Oid | None], bool]:
    """Which of a merge's changes the merge rules account for: the second parent's versions and the merged ones."""
    second = commit.parents[1].tree
    layout = tree_layout(second)
    merged = merge_rule(repo, str(commit.parent_ids[0]), str(commit.parent_ids[1])) if merge_rule else {}

    def exempt(path: str, blob: pygit2.Oid | None) -> bool:
        theirs = blob_in(second, placed(path, layout))
        if theirs is not None and theirs.id == blob:
            return True
        data = merged.get(path)
        return data is not None and blob is not None and _blob_bytes(repo, blob) == data

    return exempt


def _owner(repo: pygit2.Repository, path: str, blob: pygit2.Oid, before: pygit2.Tree | None,
           after: pygit2.Tree, profiles: _Profiles) -> tuple[str, str] | None:
    """(agent, node) when ``path``'s new version is in the name of an agent bound to a node; None: any node may."""
    role = role_of(path)
    if role in _FOLDER_OWNED and role != "outbox":
        return profiles.bound(path.split("/")[1], before, after)
    if role in _SENT or role == "outbox":
        return _mail_owner(repo, path, blob, role, before, after, profiles)
    record = _parse(repo, path, blob)
    if record is None:
        return None  # the record checker refuses what does not parse
    old = blob_in(before, placed(path, profiles.layout(before))) if before is not None else None
    previous = _parse(repo, path, old.id) if old is not None else None
    if isinstance(record, Agent):
        if record.human:
            return None
        if not isinstance(previous, Agent):
            return (record.name, record.node) if record.node else None
        if previous.node is None or _differs_only(previous, record, _OPERATOR_FIELDS) or _retired_keyless(
                previous, record) or _taken_from_lost(repo, previous, record, after):
            return None
        return record.name, previous.node
    if isinstance(record, FileRecord):
        return profiles.bound(record.uploaded_by, before, after)  # a merge's earlier upload is exempt as merged
    if isinstance(record, OrgContext):  # the manager's who set it last (a merge's fields are judged as the merge)
        return profiles.bound(record.set_by, before, after)
    if isinstance(record, MemoryDoc):  # the manager's who wrote it last (a merge keeps one side's whole version)
        return profiles.bound(record.written_by, before, after)
    if isinstance(record, Channel):  # its creator's (a merge's earlier definition is judged as the merge)
        return profiles.bound(record.created_by, before, after)
    if isinstance(record, Reservation):
        if isinstance(previous, Reservation) and _differs_only(previous, record, _RELEASE_FIELDS):
            return None
        return profiles.bound(record.agent, before, after)
    return None


_PLAIN_SENDER = re.compile(r"^from: ([A-Za-z0-9][A-Za-z0-9._-]{0,127})$", re.M)


def _mail_owner(repo: pygit2.Repository, path: str, blob: pygit2.Oid, role: str | None, before: pygit2.Tree | None,
                after: pygit2.Tree, profiles: _Profiles) -> tuple[str, str] | None:
    """Whose name a message file is written in: its sender's (an outbox copy: its folder's agent's)."""
    sender = profiles.plain_sender(blob)
    if sender is None:  # anything but the plain form gitmail writes: read it as the record it is
        if _blob_bytes(repo, blob) is None:
            return None  # not a file (a gitlink): the record checker refuses it as what it is
        record = _parse(repo, path, blob)
        if record is None:
            return profiles.bound(path.split("/")[1], before, after) if role == "outbox" else None
        if "@" in getattr(record, "sender", "") or getattr(record, "human", False):
            return None  # mail relayed from another project, or the overseer's
        sender = getattr(record, "sender", "")
    return profiles.bound(path.split("/")[1] if role == "outbox" else sender, before, after)


def _blob_bytes(repo: pygit2.Repository, oid: pygit2.Oid) -> bytes | None:
    """A blob's bytes; None when ``oid`` names no blob here (a gitlink's commit, say)."""
    obj = repo.get(oid)
    return obj.read_raw() if isinstance(obj, pygit2.Blob) else None


def _plain_sender(data: bytes) -> str | None:
    """The sender of a message file whose front matter names it in one plain line and says nothing of a person.

    The fast path for what gitmail itself writes; any other form (quoted,
    repeated, a relay's ``Name@<slug>``, the overseer's) is left to the
    record parser, so both read the same sender.
    """
    end = data.find(b"\n---\n", 3)
    if not data.startswith(b"---\n") or end < 0:
        return None
    try:
        header = data[4:end + 1].decode("utf-8")
    except UnicodeDecodeError:
        return None
    if "\nhuman:" in "\n" + header or header.count("from:") != 1:
        return None
    found = _PLAIN_SENDER.findall(header)
    return found[0] if len(found) == 1 else None


def _derived(repo: pygit2.Repository, path: str, blob: pygit2.Oid, after: pygit2.Tree, rules: Rules) -> bool:
    """Whether a rule derives the record from others in ``after`` (asked only of a write that would be refused)."""
    if rules.derived is None:
        return False
    record = _parse(repo, path, blob)
    return record is not None and rules.derived(repo, after, record)


def _retired_keyless(old: Agent, new: Agent) -> bool:
    """Whether ``new`` is ``old`` retired (or deregistered) by rule, its headless key deleted with it.

    Leaving deletes the key (``Agent.leave``), so a retirement another node
    writes changes the key fields too; it may only clear them, never set one.
    """
    return (new.status != "active" and new.key_hash is None and new.key_expires_at is None
            and new.refresh_window_s is None and _differs_only(old, new, _OPERATOR_FIELDS | _KEY_FIELDS))


def _taken_from_lost(repo: pygit2.Repository, old: Agent, new: Agent, after: pygit2.Tree) -> bool:
    """Whether ``new`` only moves ``old`` off a node whose every key ``after`` revokes (a lost machine's agent).

    The revocation is read from the tree the handover writes, so one push
    or fetch may bring both.
    """
    if new.node == old.node or old.node is None or not _differs_only(old, new, _HANDOVER_FIELDS):
        return False
    return keyring(Snapshot(repo, str(after.id))).lost(old.node)


def _differs_only(old: Record, new: Record, fields: frozenset[str]) -> bool:
    return all(getattr(old, f.name) == getattr(new, f.name) for f in dataclasses.fields(old) if f.name not in fields)


def _parse(repo: pygit2.Repository, path: str, blob: pygit2.Oid) -> Record | None:
    kind = classify(path)
    if kind is None or kind[1] is None:
        return None
    data = _blob_bytes(repo, blob)
    try:
        return kind[1].from_bytes(data, path) if data is not None else None
    except (GitmailError, ValueError):
        return None


Changes = dict[str, pygit2.Oid | None]  # files that differ between two trees, by path (None: gone)


def listed_changes(repo: pygit2.Repository, tip: str, hide: list[str]) -> dict[bytes, Changes]:
    """Each commit of ``tip`` that no commit of ``hide`` reaches: the files it changes over its first parent.

    One ``git log --raw`` for the whole range, by raw commit id; paths as
    the commit's trees name them. Empty when git cannot list them (the
    caller then reads the trees itself).
    """
    listed = subprocess.run(["git", "--git-dir", repo.path, "log", "--format=%x00%H", "-z", "--raw", "-r", "--root",
                             "--no-abbrev", "--no-renames", "--diff-merges=first-parent", tip,
                             *[f"^{commit}" for commit in hide]], capture_output=True)
    if listed.returncode != 0:
        return {}
    out: dict[bytes, Changes] = {}
    current: Changes = {}
    for item in read_raw(listed.stdout):
        if isinstance(item, str):  # a commit id: the changes that follow are its
            current = out.setdefault(bytes.fromhex(item), {})
        else:
            current[item.path] = None if item.new_id == NO_ID else pygit2.Oid(hex=item.new_id)
    return out


def _walk(repo: pygit2.Repository, before: pygit2.Tree | None, after: pygit2.Tree | None, prefix: str,
          out: Changes) -> Changes:
    """Files that differ between two trees (None: gone), reading only the folders whose ids differ."""
    old = {entry.name: entry for entry in before} if before is not None else {}
    for entry in after if after is not None else ():
        was = old.pop(entry.name or "", None)
        if was is not None and was.id == entry.id and was.filemode == entry.filemode:
            continue
        path = f"{prefix}{entry.name}"
        was_tree = repo[was.id] if was is not None and was.type_str == "tree" else None
        if entry.type_str == "tree":
            _walk(repo, was_tree, repo[entry.id], path + "/", out)  # type: ignore[arg-type]
            continue
        if was_tree is not None:
            _walk(repo, was_tree, None, path + "/", out)  # type: ignore[arg-type]
        out[path] = entry.id
    for name, was in old.items():
        if was.type_str == "tree":
            _walk(repo, repo[was.id], None, f"{prefix}{name}/", out)  # type: ignore[arg-type]
        else:
            out[f"{prefix}{name}"] = None
    return out


class _Profiles:
    """Agents' bindings as profiles in a tree name them, looked up by name without regard to case, remembered."""

    def __init__(self, repo: pygit2.Repository):
        self.repo = repo
        self._names: dict[int, dict[str, str]] = {}  # the folders of agents/ by name in lower case, by generation
        self._layouts: dict[pygit2.Oid | None, int] = {}  # by project.yaml blob
        # By tree: its layout, and its generation of agents (trees of one generation hold the same profiles
        # and folders under agents/), each carried from a commit's parent to the commit when it changes neither,
        # so a chain of commits reads them once.
        self._tree_layout: dict[pygit2.Oid, int] = {}
        self._generations: dict[pygit2.Oid, int] = {}
        self._bound: dict[tuple[int, str], tuple[str, str] | None] = {}  # by generation, name in lower case
        # The changes between two trees a commit's node records were read from, until its writes are judged.
        self._kept: dict[tuple[pygit2.Oid | None, pygit2.Oid], Changes] = {}
        self._parsed: dict[pygit2.Oid, tuple[str, str] | None] = {}  # by profile blob
        # Each message file's sender as its plain front matter names it, by blob: a message and its inbox and
        # outbox copies are one blob, read once.
        self._plain: dict[pygit2.Oid, str | None] = {}
        self.listed: dict[bytes, Changes] = {}  # each commit's changes as git listed them, by raw commit id

    def plain_sender(self, blob: pygit2.Oid) -> str | None:
        """:func:`_plain_sender` of a file, remembered by its id (None: another form, or not a file)."""
        if blob not in self._plain:
            data = _blob_bytes(self.repo, blob)
            self._plain[blob] = _plain_sender(data) if data is not None else None
        return self._plain[blob]

    def layout(self, tree: pygit2.Tree | None) -> int:
        """The tree's layout, remembered by the tree and by its ``project.yaml``."""
        if tree is not None and tree.id in self._tree_layout:
            return self._tree_layout[tree.id]
        project = blob_in(tree, PROJECT_PATH)
        key = project.id if project is not None else None
        if key not in self._layouts:
            self._layouts[key] = tree_layout(tree)
        if tree is not None:
            self._tree_layout[tree.id] = self._layouts[key]
        return self._layouts[key]

    def changes(self, before: pygit2.Tree | None, after: pygit2.Tree, listed: Changes | None = None) -> Changes:
        """Records that differ from ``before`` to ``after``, named at the newest layout.

        When both trees are at it, git's listing is taken as it is, or only
        the folders whose ids differ are read.
        """
        kept = self._kept.pop((before.id if before is not None else None, after.id), None) if self._kept else None
        if kept is not None:
            return kept
        if before is not None and listed is not None:
            self._carry(before, after, listed)
        if before is None or self.layout(before) != LAYOUT or self.layout(after) != LAYOUT:
            return changed_records(before, after, named_at=LAYOUT)
        if listed is None:
            listed = _walk(self.repo, before, after, "", {})
            self._carry(before, after, listed)
        return listed

    def kept_changes(self, before: pygit2.Tree | None, after: pygit2.Tree, listed: Changes | None) -> Changes:
        """:meth:`changes`, kept for the one later call that asks for the same two trees (a commit's writes)."""
        changes = self.changes(before, after, listed)
        self._kept[(before.id if before is not None else None, after.id)] = changes
        return changes

    def _carry(self, before: pygit2.Tree, after: pygit2.Tree, listed: Changes) -> None:
        """Know ``after``'s layout and generation of agents to be ``before``'s when ``listed`` (every file that
        differs between them as the trees name it) leaves them alone (see :meth:`_same_agents`)."""
        old, new = before.id, after.id
        if old in self._tree_layout and new not in self._tree_layout and PROJECT_PATH not in listed:
            self._tree_layout[new] = self._tree_layout[old]
        if new not in self._generations:
            generation = self._generation(before)  # the parent's, known or found: the chain starts here
            if self._same_agents(generation, listed):
                self._generations[new] = generation

    def _same_agents(self, generation: int, listed: Changes) -> bool:
        """Whether changing ``listed`` keeps every profile and every folder of ``agents/`` (the folders' names
        are what a name in another case is looked up by): no profile changes, nothing under ``agents/`` goes,
        and whatever comes there comes into a folder that was there."""
        names = self._names[generation]
        for path, blob in listed.items():
            if not path.startswith(_AGENTS_FOLDER):
                continue
            folder = path.split("/", 2)[1]
            if blob is None or path.endswith(_PROFILE_FILE) or names.get(folder.lower()) != folder:
                return False
        return True

    def bound(self, agent: str, before: pygit2.Tree | None, after: pygit2.Tree) -> tuple[str, str] | None:
        """The node ``agent`` is bound to: by its profile before the commit, or the one the commit adds.

        Remembered for each generation of agents (trees whose profiles and
        ``agents/`` folders are the same), so the commits of a chain that
        change neither look each agent up once.
        """
        for tree in (before, after):
            if tree is None:
                continue
            key = (self._generation(tree), agent.lower())
            if key not in self._bound:
                self._bound[key] = self._lookup(tree, agent, self._names[key[0]])
            if self._bound[key] is not None:
                return self._bound[key]
        return None

    def _generation(self, tree: pygit2.Tree) -> int:
        """The tree's generation of agents: a new one, unless a commit carried its parent's (:meth:`_carry`)."""
        generation = self._generations.get(tree.id)
        if generation is None:
            generation = self._generations[tree.id] = len(self._names)
            folder = _subtree(tree, AGENTS)
            entries = self.repo.get(folder) if folder is not None else None
            self._names[generation] = ({entry.name.lower(): entry.name for entry in entries if entry.name}
                                       if isinstance(entries, pygit2.Tree) else {})
        return generation

    def _lookup(self, tree: pygit2.Tree, agent: str, names: dict[str, str]) -> tuple[str, str] | None:
        name, profile = agent, blob_in(tree, profile_path(agent))
        if profile is None:  # another case of the name, maybe: look it up in the listing of agents/
            found = names.get(agent.lower())
            if found is None:
                return None
            name, profile = found, blob_in(tree, profile_path(found))
        if profile is None:
            return None
        if profile.id not in self._parsed:
            record = _parse(self.repo, profile_path(name), profile.id)
            self._parsed[profile.id] = (None if not isinstance(record, Agent) or record.human or not record.node
                                        else (record.name, record.node))
        return self._parsed[profile.id]

