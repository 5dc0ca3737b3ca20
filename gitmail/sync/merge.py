"""How two versions of an archive become one: the merge rules, per record type.

Every machine that merges the same two commits computes the same tree, so
archives converge however their syncs interleave. The rules follow what each
record means (see :func:`merge_file`); files changed on one side only take
that side, exactly as git's own three-way merge would, so a plain ``git pull``
with the gitmail merge driver (which calls :func:`merge_file` for the files
changed on both sides) and ``gitmail sync`` build the same tree.

Nothing is dropped. When two different files meet at a path that no rule can
settle (two versions of an immutable message, say) the version with the
smaller blob id stays at the path on every machine and the other one is
parked in a :class:`~gitmail.model.records.Conflict` record under ``conflicts/``,
which the sync reports.

Tombstones make purges stick: a message named by a tombstone (its canonical
file, every inbox and outbox copy, every receipt) is removed from the merged tree, even
when the other side still had it or has just brought in a copy.
"""

from __future__ import annotations

import base64
import dataclasses
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import pygit2

from gitmail.model.clock import HLC
from gitmail.model.errors import GitmailError
from gitmail.model.records import (
    AGENTS,
    CARD_FIELDS,
    LAYOUT,
    TOMBSTONES,
    Agent,
    BuildSlot,
    Channel,
    Conflict,
    Contact,
    Escalation,
    FileRecord,
    HeldMessage,
    IdempotencyKey,
    MemoryDoc,
    Node,
    OrgContext,
    ProductLink,
    Project,
    Receipt,
    Record,
    Relay,
    Reservation,
    Seat,
    Window,
    message_files,
    placed,
    role_of,
    tombstone_path,
)
from gitmail.storage.handles import tree_entry, tree_has
from gitmail.storage.layout import Comparisons, changed_records
from gitmail.storage.objects import BLOB, object_id
from gitmail.storage.snapshot import blob_data, blob_in, tree_layout

# Roles whose records carry a hybrid logical clock that merges must observe.
CLOCKED_ROLES = frozenset({"project", "org_context", "agent", "receipt", "contact", "reservation", "seat", "window",
                           "product", "relay", "build_slot", "memory"})
# Files a tombstone removes: the message, its copies and its receipts, named by the message id.
_MESSAGE_ROLES = frozenset({"message", "inbox", "outbox", "receipt"})
_HLC_LINE = re.compile(rb"^hlc: *['\"]?([^'\"\n]+)['\"]?\s*$", re.MULTILINE)


def blob_hex(data: bytes) -> str:
    """The id git gives a file with these bytes."""
    return object_id(BLOB, data).hex()


def clock_of(data: bytes | None) -> HLC | None:
    """The hybrid clock reading in a clocked record's bytes, without a full parse."""
    if not data:
        return None
    match = _HLC_LINE.search(data)
    if not match:
        return None
    try:
        return HLC.parse(match.group(1).decode("utf-8", "replace").strip())
    except ValueError:
        return None


@dataclass
class FileMerge:
    """The merged content of one path (None: the file is gone) and a conflict record to add, if any."""

    content: bytes | None
    conflict: Conflict | None = None


# -- one file -------------------------------------------------------------------

def merge_file(path: str, base: bytes | None, ours: bytes | None, theirs: bytes | None) -> FileMerge:
    """Merge three versions of the file at ``path``; None means absent.

    The same arguments give the same answer on every machine, and swapping
    ``ours`` and ``theirs`` gives the same content (commutative), which is
    what makes syncs in any order converge.
    """
    if ours == theirs:
        return FileMerge(ours)
    if ours == base:
        return FileMerge(theirs)
    if theirs == base:
        return FileMerge(ours)
    role = role_of(path)
    if ours is None or theirs is None:
        # Changed on one side, deleted on the other. A held message disappears
        # when it is delivered, and delivery is final; anything else keeps the
        # version that still exists, so no write is lost.
        if role == "held":
            return FileMerge(None)
        return FileMerge(ours if ours is not None else theirs)
    if role == "agent":
        clash = _identity_clash(path, ours, theirs)
        if clash is not None:
            return clash
    resolver = _RESOLVERS.get(role or "")
    if resolver is not None:
        try:
            merged = resolver(path, base, ours, theirs)
        except GitmailError:
            merged = None  # a side does not parse: fall back to keeping both
        if merged is not None:
            return FileMerge(merged)
    return _keep_both(path, ours, theirs)


def _identity_clash(path: str, ours: bytes, theirs: bytes) -> FileMerge | None:
    """Two registrations of one name (made apart, say on two machines offline): the first keeps the name.

    Profiles of one agent merge field by field; profiles of two different
    agents (different ids) must not, or one would silently take over the
    other's name and token. The earlier registration (by inception time,
    then id) stays at the path on every machine; the other is parked under
    ``conflicts/``, where the sync reports it and the agent it belonged to
    is told how to go on.
    """
    try:
        mine, other = _parse(Agent, path, ours, theirs)
    except GitmailError:
        return None
    if mine.id == other.id:
        return None
    if (mine.inception_ts, mine.id) <= (other.inception_ts, other.id):
        return _park(path, ours, theirs)
    return _park(path, theirs, ours)


def _keep_both(path: str, ours: bytes, theirs: bytes) -> FileMerge:
    """The smaller blob stays at the path; the other is parked in a conflict record."""
    return _park(path, ours, theirs) if blob_hex(ours) < blob_hex(theirs) else _park(path, theirs, ours)


def _park(path: str, kept: bytes, other: bytes) -> FileMerge:
    """``kept`` stays at the path; ``other`` is parked in a conflict record."""
    kept_id, other_id = blob_hex(kept), blob_hex(other)
    try:
        text, encoding = other.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        text, encoding = "", "base64"
    conflict = Conflict(file=path, kept_blob=kept_id, other_blob=other_id, encoding=encoding, content=text)
    if encoding == "utf-8":
        try:
            if Conflict.from_bytes(conflict.to_bytes(), conflict.path()).content != text:
                raise ValueError("text does not survive YAML")
        except (GitmailError, ValueError):
            conflict.encoding = "base64"
    if conflict.encoding == "base64":
        conflict.content = base64.b64encode(other).decode("ascii")
    return FileMerge(kept, conflict)


def _parse(record_type: type[Record], path: str, *versions: bytes | None) -> list[Any]:
    return [None if data is None else record_type.from_bytes(data, path) for data in versions]


class _Clocked(Protocol):
    hlc: HLC


def _later(ours: _Clocked, ours_bytes: bytes, theirs: _Clocked, theirs_bytes: bytes) -> bool:
    """True when ours is the later write: higher clock, then larger bytes (a total order)."""
    return (ours.hlc, ours_bytes) > (theirs.hlc, theirs_bytes)


def _last_writer(record_type: type[Record]) -> Callable[..., bytes]:
    def resolve(path: str, base: bytes | None, ours: bytes, theirs: bytes) -> bytes:
        mine, other = _parse(record_type, path, ours, theirs)
        return ours if _later(mine, ours, other, theirs) else theirs
    return resolve


def _per_field(record_type: type[Record]) -> Callable[..., bytes]:
    """Last writer wins per field: a field changed on one side only keeps that change."""

    def resolve(path: str, base: bytes | None, ours: bytes, theirs: bytes) -> bytes:
        old, mine, other = _parse(record_type, path, base, ours, theirs)
        ours_later = _later(mine, ours, other, theirs)
        values = {}
        for f in dataclasses.fields(record_type):
            a, b = getattr(mine, f.name), getattr(other, f.name)
            if f.name == "hlc":
                values[f.name] = max(a, b)
            elif a == b:
                values[f.name] = a
            elif old is not None and a == getattr(old, f.name):
                values[f.name] = b
            elif old is not None and b == getattr(old, f.name):
                values[f.name] = a
            else:
                values[f.name] = a if ours_later else b
        return record_type(**values).to_bytes()

    return resolve


def _earliest(a: str | None, b: str | None) -> str | None:
    present = [value for value in (a, b) if value]
    return min(present) if present else None


def _receipt(path: str, base: bytes | None, ours: bytes, theirs: bytes) -> bytes:
    """The earliest read and the earliest acknowledgement win."""
    mine, other = _parse(Receipt, path, ours, theirs)
    merged = dataclasses.replace(mine, hlc=max(mine.hlc, other.hlc),
                                 read_at=_earliest(mine.read_at, other.read_at),
                                 acked_at=_earliest(mine.acked_at, other.acked_at))
    return merged.to_bytes()


def _reservation(path: str, base: bytes | None, ours: bytes, theirs: bytes) -> bytes:
    """Last writer wins, except that a release is final."""
    mine, other = _parse(Reservation, path, ours, theirs)
    if bool(mine.released_ts) != bool(other.released_ts):
        return ours if mine.released_ts else theirs
    return ours if _later(mine, ours, other, theirs) else theirs


def _seat(path: str, base: bytes | None, ours: bytes, theirs: bytes) -> bytes:
    """The highest epoch wins (fencing); equal epochs fall back to the clock."""
    mine, other = _parse(Seat, path, ours, theirs)
    if mine.epoch != other.epoch:
        return ours if mine.epoch > other.epoch else theirs
    return ours if _later(mine, ours, other, theirs) else theirs


def _relay(path: str, base: bytes | None, ours: bytes, theirs: bytes) -> bytes:
    """A delivered relay is final, and the earliest delivery wins (both machines may complete it)."""
    mine, other = _parse(Relay, path, ours, theirs)
    delivered = _earliest(mine.delivered_at, other.delivered_at)
    return dataclasses.replace(mine, hlc=max(mine.hlc, other.hlc), delivered_at=delivered).to_bytes()


def _grant_order(holding: dict[str, Any]) -> tuple[str, str, int]:
    return holding["acquired_ts"], holding["agent"], holding["epoch"]


def _build_slot(path: str, base: bytes | None, ours: bytes, theirs: bytes) -> bytes:
    """Holdings merge one by one; an ended holding stays ended; over capacity, the earliest grants keep the slot.

    A holding is named by its agent and epoch. One that the base had and a
    side no longer has was released or taken over there, which is final; a
    holding on both sides keeps the later expiry (renewals never shorten). The
    terms (exclusive, maximum) are the later writer's. When two machines
    granted the slot apart and the holders now exceed the terms, the holdings
    granted first stay and the others are over: their holders' next renew or
    release is refused with STALE_EPOCH, which is how they learn of it.
    """
    old, mine, other = _parse(BuildSlot, path, base, ours, theirs)
    terms = mine if _later(mine, ours, other, theirs) else other
    ended = {(h["agent"], h["epoch"]) for h in old.holders} if old is not None else set()
    sides = [{(h["agent"], h["epoch"]): h for h in record.holders} for record in (mine, other)]
    merged: dict[tuple[str, int], dict[str, Any]] = {}
    for key in set(sides[0]) | set(sides[1]):
        versions = [side[key] for side in sides if key in side]
        if key in ended and len(versions) < 2:
            continue
        merged[key] = max(versions, key=lambda h: (h["expires_ts"], sorted(h.items())))
    holders: list[dict[str, Any]] = []
    for holding in sorted(merged.values(), key=_grant_order):
        if all(h["agent"] != holding["agent"] for h in holders):  # one holding per agent: its first grant
            holders.append(holding)
    holders = holders[:terms.max_holders]
    return dataclasses.replace(terms, epoch=max(mine.epoch, other.epoch), hlc=max(mine.hlc, other.hlc),
                               holders=holders).to_bytes()


def _escalation(path: str, base: bytes | None, ours: bytes, theirs: bytes) -> bytes:
    """Two machines escalated one overdue acknowledgement: a claim beats a log entry, then the earliest wins."""
    mine, other = _parse(Escalation, path, ours, theirs)
    return ours if (mine.mode != "claim", mine.escalated_ts, ours) <= (other.mode != "claim", other.escalated_ts,
                                                                       theirs) else theirs


def _node(path: str, base: bytes | None, ours: bytes, theirs: bytes) -> bytes:
    """A node's record moves only by rotation: the side whose key was rotated from the other's key wins.

    Only the node itself writes its record, so two versions differ only when
    one side has seen a rotation the other has not (or, after a stolen key,
    two rotations that fork: then every machine keeps the same one, the
    smaller file, and ``gitmail verify`` shows both keys' commits).
    """
    mine, other = _parse(Node, path, ours, theirs)
    if other.previous_key == mine.key:
        return theirs
    if mine.previous_key == other.key:
        return ours
    return min(ours, theirs)


def _file(path: str, base: bytes | None, ours: bytes, theirs: bytes) -> bytes:
    """Two machines recorded one content (same bytes, same file ID): the earlier upload is the file's record.

    The bytes are the same on both sides, so nothing but who uploaded them
    first, and under which name, is decided here.
    """
    mine, other = _parse(FileRecord, path, ours, theirs)
    return ours if (mine.order(), ours) <= (other.order(), theirs) else theirs


def _held(path: str, base: bytes | None, ours: bytes, theirs: bytes) -> bytes:
    """A held message only ever loses awaited recipients and gains refusals."""
    old, mine, other = _parse(HeldMessage, path, base, ours, theirs)
    order = (old or mine).awaiting
    awaiting = [name for name in order if name in mine.awaiting and name in other.awaiting]
    denied = sorted(set(mine.denied) | set(other.denied))
    return dataclasses.replace(mine, awaiting=awaiting, denied=denied).to_bytes()


def _agent(path: str, base: bytes | None, ours: bytes, theirs: bytes) -> bytes:
    """Last writer wins per field; an agent awake on the merged side has no sleep condition.

    Sleeping and waking each write ``asleep`` and ``sleep_until`` together,
    but field by field a wake on one side and a change of the condition on
    the other could leave an awake agent with a condition: it is dropped.
    The capability card (:data:`~gitmail.model.records.CARD_FIELDS`) is one
    unit: it comes whole from the side with the higher ``card_version`` (the
    later writer when both reached the same version apart), so a card never
    mixes fields of two versions and its version never goes back.
    A profile's ``parent`` and ``parent_id`` change only when it is orphaned
    (the record checker refuses anything else), which merges field by field
    like the rest.
    """
    merged = Agent.from_bytes(_per_field(Agent)(path, base, ours, theirs), path)
    card = _card_side(path, base, ours, theirs)
    if card is not None:
        merged = dataclasses.replace(merged, card_version=card.card_version,
                                     **{name: getattr(card, name) for name in CARD_FIELDS})
    if not merged.asleep and merged.sleep_until is not None:
        merged.sleep_until = None
    return merged.to_bytes()


def _card_side(path: str, base: bytes | None, ours: bytes, theirs: bytes) -> Agent | None:
    """The side whose whole card the merge keeps: the higher version, else the only side that changed it, else
    the later writer; None when both hold the same card."""
    old, mine, other = _parse(Agent, path, base, ours, theirs)

    def card(profile: Agent) -> tuple[object, ...]:
        return (profile.card_version, *(getattr(profile, name) for name in CARD_FIELDS))

    if card(mine) == card(other):
        return None
    if mine.card_version != other.card_version:
        return mine if mine.card_version > other.card_version else other
    if old is not None and card(old) in (card(mine), card(other)):
        return other if card(old) == card(mine) else mine
    return mine if _later(mine, ours, other, theirs) else other
def _org_context(path: str, base: bytes | None, ours: bytes, theirs: bytes) -> bytes:
    """Last writer wins per field, from the base or, for two defaults set apart, from the unset one.

    The unset default loads no folders and has folder hints on, so a field
    only one side set (the folders on one machine, the hints on the other)
    keeps that side's value; the setter and time are the later writer's.
    """
    old, mine, other = _parse(OrgContext, path, base, ours, theirs)
    later, earlier = (mine, other) if _later(mine, ours, other, theirs) else (other, mine)
    start = old if old is not None else OrgContext(set_by=later.set_by, updated_at=later.updated_at, hlc=later.hlc)
    values: dict[str, Any] = {}
    for name in ("loads", "folder_hints"):
        mine_now, other_now, was = getattr(later, name), getattr(earlier, name), getattr(start, name)
        values[name] = other_now if mine_now == was and other_now != was else mine_now
    return dataclasses.replace(later, hlc=max(mine.hlc, other.hlc), **values).to_bytes()


def _memory(path: str, base: bytes | None, ours: bytes, theirs: bytes) -> bytes:
    """A text merges whole, the later writer's (by clock); a removal made apart from a write gives way to the write.

    Whoever removed the file had not seen the text written meanwhile, which
    is newer guidance someone chose to give: keeping it loses nothing (a
    removal is easily made again once seen), where the removal winning
    would drop a text its writer never saw go.
    """
    mine, other = _parse(MemoryDoc, path, ours, theirs)
    if mine.removed != other.removed:
        return theirs if mine.removed else ours
    return ours if _later(mine, ours, other, theirs) else theirs


def _channel(path: str, base: bytes | None, ours: bytes, theirs: bytes) -> bytes:
    """One channel made on both sides apart: the earlier definition (by creation time, then id) is the channel.

    Nothing is parked: both sides meant the same channel, and every post
    made under either is filed under its name, so all of them are kept.
    """
    mine, other = _parse(Channel, path, ours, theirs)
    return ours if mine.earlier_than(other) else theirs


def _idempotency(path: str, base: bytes | None, ours: bytes, theirs: bytes) -> bytes:
    """A key's held message was delivered: the delivered version is final (ties: the smaller file)."""
    mine, other = _parse(IdempotencyKey, path, ours, theirs)
    if mine.held != other.held:
        return theirs if mine.held else ours
    return min(ours, theirs)


_RESOLVERS: dict[str, Callable[[str, bytes | None, bytes, bytes], bytes | None]] = {
    "project": _per_field(Project),
    "org_context": _org_context,
    "agent": _agent,
    "contact": _last_writer(Contact),
    "window": _last_writer(Window),
    "product": _per_field(ProductLink),
    "relay": _relay,
    "receipt": _receipt,
    "reservation": _reservation,
    "seat": _seat,
    "build_slot": _build_slot,
    "escalation": _escalation,
    "file": _file,
    "node": _node,
    "held": _held,
    "idempotency": _idempotency,
    "channel": _channel,
    "memory": _memory,
}


# -- whole trees ------------------------------------------------------------------

@dataclass
class TreeMerge:
    """A merge of ``theirs`` into ``ours``: edits to apply to ours, and what it found.

    ``edits`` holds what the rules wrote (merged content, conflict records)
    and what goes; ``taken`` holds the files only ``theirs`` changed, by the
    id of its version: the merge takes them as they are, without reading
    them (a bulk arrival is thousands of them). A path is in one or neither.
    """

    base: str | None
    edits: dict[str, bytes | None] = field(default_factory=dict)
    taken: dict[str, pygit2.Oid] = field(default_factory=dict)
    conflicts: list[Conflict] = field(default_factory=list)
    incoming: Counter = field(default_factory=Counter)  # files taken in, by role
    newest_clock: HLC | None = None

    def written(self) -> set[str]:
        """Every path the merge writes a file at (taken or by the rules)."""
        return {path for path, data in self.edits.items() if data is not None} | self.taken.keys()

    def remove(self, path: str) -> None:
        """Have the merge delete ``path`` whatever it would have written there."""
        self.taken.pop(path, None)
        self.edits[path] = None

    def observe(self, data: bytes | None) -> None:
        seen = clock_of(data)
        if seen is not None and (self.newest_clock is None or seen > self.newest_clock):
            self.newest_clock = seen


def _tree(repo: pygit2.Repository, commit: str | None) -> pygit2.Tree | None:
    return repo[commit].peel(pygit2.Tree) if commit else None


def _blob(tree: pygit2.Tree | None, path: str) -> bytes | None:
    blob = blob_in(tree, path)
    return blob.data if blob is not None else None


def merge_commits(repo: pygit2.Repository, ours: str, theirs: str, *, compared: Comparisons | None = None) -> TreeMerge:
    """Merge commit ``theirs`` into commit ``ours`` by the record rules.

    The three trees may be at different layouts (a merge base from before a
    migration): records are compared wherever each tree keeps them, and the
    edits name them by the newest layout's paths (the engine writes them where
    ``ours`` keeps them), so records the other side wrote at an older layout's
    paths arrive at ours. ``ours`` must be at a layout at least as new as
    ``theirs`` (a sync migrates it first). ``compared``: the trees the
    caller's other steps compare (a sync's check read what ``theirs`` adds).
    """
    base_oid = repo.merge_base(ours, theirs)
    base = str(base_oid) if base_oid is not None else None
    base_tree, ours_tree, theirs_tree = _tree(repo, base), _tree(repo, ours), _tree(repo, theirs)
    if tree_layout(ours_tree) < tree_layout(theirs_tree):
        raise ValueError(f"{ours[:12]} is at an older layout than {theirs[:12]}: migrate it before merging")
    was, now = tree_layout(base_tree), tree_layout(ours_tree)
    compared = compared if compared is not None else Comparisons(repo.path)
    ours_changed = changed_records(base_tree, ours_tree, named_at=LAYOUT, compared=compared)
    theirs_changed = changed_records(base_tree, theirs_tree, named_at=LAYOUT, compared=compared)
    merge = TreeMerge(base)
    for path, theirs_id in theirs_changed.items():
        role = role_of(path)
        data: bytes | None = None
        if path not in ours_changed and theirs_id is not None:
            merge.taken[path] = theirs_id  # only theirs changed it: its version, not read unless clocked
            data = blob_data(repo, theirs_id) if role in CLOCKED_ROLES else None
        elif path not in ours_changed:
            merge.edits[path] = None
        else:
            if ours_changed[path] == theirs_id:
                continue
            theirs_data = blob_data(repo, theirs_id) if theirs_id else None
            here = placed(path, now)  # where ours keeps it: a conflict record names the file there
            ours_data = _blob(ours_tree, here)
            result = merge_file(here, _blob(base_tree, placed(path, was)), ours_data, theirs_data)
            if result.conflict is not None:
                merge.conflicts.append(result.conflict)
                conflict_path = result.conflict.path()
                if _blob(ours_tree, conflict_path) is None:
                    merge.edits[conflict_path] = result.conflict.to_bytes()
            if result.content == ours_data:
                continue
            merge.edits[path] = data = result.content
        merge.incoming[role or "other"] += 1
        if role in CLOCKED_ROLES:
            merge.observe(data)
    _apply_tombstones(merge, ours_tree, theirs_tree, ours_changed, theirs_changed)
    return merge


def _apply_tombstones(merge: TreeMerge, ours_tree: pygit2.Tree | None, theirs_tree: pygit2.Tree | None,
                      ours_changed: dict[str, pygit2.Oid | None], theirs_changed: dict[str, pygit2.Oid | None]) -> None:
    """Remove a tombstoned message, its copies and its receipts from the merged tree."""
    if not (_exists(ours_tree, TOMBSTONES) or _exists(theirs_tree, TOMBSTONES)
            or any(role_of(path) == "tombstone" for path in (*merge.edits, *merge.taken))):
        return  # nothing was ever purged: the common case costs three lookups

    ours_layout, theirs_layout = tree_layout(ours_tree), tree_layout(theirs_tree)

    def present(path: str) -> bool:
        if path in merge.edits:
            return merge.edits[path] is not None
        return path in merge.taken or _exists(ours_tree, placed(path, ours_layout))

    purged: set[str] = set()  # message ids
    for changed in (ours_changed, theirs_changed):
        for path, blob in changed.items():
            if blob is not None and role_of(path) == "tombstone":
                purged.add(_record_id(path))
    for path in merge.written():
        if role_of(path) not in _MESSAGE_ROLES:
            continue
        message_id = _record_id(path)
        if message_id not in purged:
            stone = tombstone_path(message_id)
            if present(stone) or _exists(theirs_tree, placed(stone, theirs_layout)):
                purged.add(message_id)
    if not purged:
        return
    agents = _folder_names(ours_tree, AGENTS) | _folder_names(theirs_tree, AGENTS)
    for message_id in purged:
        for path in message_files(message_id, agents):
            if present(path):
                merge.remove(path)


def _record_id(path: str) -> str:
    """The ID a day-sharded record file is named by."""
    return path.rsplit("/", 1)[1].split(".", 1)[0]


def _exists(tree: pygit2.Tree | None, path: str) -> bool:
    if tree is None:
        return False
    return tree_has(tree, path)


def _folder_names(tree: pygit2.Tree | None, folder: str) -> set[str]:
    if tree is None:
        return set()
    obj = tree_entry(tree, folder)
    if not isinstance(obj, pygit2.Tree):
        return set()
    return {entry.name for entry in obj if entry.name is not None}


def merged_records(repo: pygit2.Repository, ours: str, theirs: str) -> dict[str, bytes | None]:
    """What the merge rules write when merging commit ``theirs`` into ``ours``, by path at the newest layout.

    The rule :mod:`gitmail.storage.authorship` judges merge commits by: a
    merge holds only these versions and its parents' (empty when the two
    cannot be merged as they are, ``ours`` being at an older layout). The
    files it takes from ``theirs`` as they are are its second parent's
    versions, which that rule accepts by themselves: they are not listed.
    """
    try:
        return merge_commits(repo, ours, theirs).edits
    except ValueError:
        return {}
