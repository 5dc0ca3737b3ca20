"""The record checker: what a commit made elsewhere may change in an archive.

Data enters an archive by three doors: the engine's own writes (built from
the record types, so valid by construction), a ``git push`` (from the human
checkout into the archive, or from a machine into a shared hub) and a fetch
during ``gitmail sync``. The last two bring commits that anything may have
made. The archive's and the hub's ``pre-receive`` hooks and the sync's fetch
all ask this module, and ``gitmail fsck`` judges each file at the tip with
the same :func:`file_problem`, so one set of rules holds at every door:

- an added or changed file sits at a path gitmail keeps records at and
  parses as the record kept there (an attachment's bytes hash to its name);
- an immutable record (:data:`~gitmail.model.records.IMMUTABLE_ROLES`) never
  changes, unless the merge that replaced it parked the other version under
  ``conflicts/``, or a repair record puts back the version it had before;
- a build slot's epoch never goes down (its fencing would fail);
- an agent profile never changes hands: a profile whose ``id`` changes is
  another registration taking the name, accepted only with the old one
  parked under ``conflicts/`` (see :func:`edit_refusal`); nor does it move
  in the hierarchy: its ``parent`` is fixed when it is spawned;
- nothing is deleted without the record that explains it: a tombstone purges
  a message with its copies and receipts; a deleted profile takes its agent's
  folder, contacts and reservations along; held messages and idempotency
  keys come and go; a repair record takes out a file that breaks the rules.

A change is measured from a base: the commit the incoming tip shares with
the ``main`` it would join (their merge base), so exactly what the incoming
side adds is judged, and records that reached ``main`` meanwhile never look
deleted. The doors differ only in what a refusal does (a push is refused, a
fetch keeps the change aside); the decision is made here, once.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from dataclasses import asdict, dataclass
from typing import Any

import pygit2

from gitmail.model.errors import GitmailError
from gitmail.model.records import (
    AGENTS,
    ATTACHMENT_RE,
    ATTACHMENTS,
    CONFLICTS,
    IMMUTABLE_ROLES,
    PLAIN_FILES,
    Agent,
    BuildSlot,
    Contact,
    Record,
    Relay,
    Repair,
    Reservation,
    classify,
    conflict_path,
    role_of,
    tombstone_path,
)

from .snapshot import blob_data, blob_in, tree_changes

DOORS = ("hub", "archive", "fetch")  # a shared hub's push, a push into an archive, a sync's fetch
_ID_STEM = re.compile(r"/([0-9a-z]{23})\.(?:md|yaml)$")
_PURGEABLE = frozenset({"message", "inbox", "outbox", "receipt"})
_AGENT_PROFILE = re.compile(r"^agents/([^/]+)/profile\.yaml$")


@dataclass(frozen=True)
class Rejection:
    """One change the rules refuse: the file, why, and what to do instead."""

    path: str
    reason: str
    advice: str
    blob: str | None = None  # the incoming version (None: the change deletes the file)

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


_RESTORE = "put the file back as it was (git checkout {before} -- {path}) and commit"
_REDO = (_RESTORE + "; a {role} never changes once written: to correct or add to it, write a new one "
         "(gitmail send or gitmail reply for mail, gitmail journal for a journal entry)")
_FIX = "correct the line or field named, or " + _RESTORE
_PURGE = (_RESTORE + "; records leave the archive only by a purge, which leaves a tombstone under tombstones/ "
          "(the purge_old_messages tool), or with their agent (the hard_delete_agent tool); if a git revert "
          "removed it, revert only the files you meant to change")
_STRAY = "keep notes outside the archive, or remove the file from the commit"
_TAKEOVER = ("register the agent under another name; a profile's id names one registration, and replacing it would "
             "hand the agent's mail to someone else")
# What a human may change by hand in a record pushed into an archive, by record kind
# (``extra`` is the fields of their own, ``x-team``; ``hlc`` is the clock merges order writes by):
_HAND_EDITABLE: dict[type[Record], frozenset[str]] = {
    Agent: frozenset({"task_description", "contact_policy", "attachments_policy", "capabilities", "program", "model"}),
    Contact: frozenset({"status", "reason", "expires_at", "responded_at"}),
    Reservation: frozenset({"released_ts"}),
}
_ALWAYS_EDITABLE = frozenset({"extra", "hlc"})
_THROUGH_GITMAIL = {
    "agent": "gitmail register, gitmail sleep / wake, gitmail agents reset-token",
    "reservation": "gitmail release, gitmail renew, gitmail reserve",
    "seat": "gitmail seat", "receipt": "gitmail read --as, gitmail ack",
}


def path_problem(path: str) -> str | None:
    """Why no file may sit at ``path`` in an archive, whatever it holds (None when one may)."""
    if path in PLAIN_FILES or path.startswith(ATTACHMENTS + "/"):
        return None
    kind = classify(path)
    return "not a path where gitmail keeps records" if kind is None or kind[1] is None else None


def inspect_file(path: str, data: bytes) -> tuple[Record | None, str | None]:
    """The record the file ``data`` holds at ``path``, and why it cannot sit there (None when it can)."""
    if path in PLAIN_FILES:
        return None, None
    if path.startswith(ATTACHMENTS + "/"):
        return None, _attachment_problem(path, data)
    kind = classify(path)
    if kind is None or kind[1] is None:
        return None, path_problem(path)
    try:
        return kind[1].from_bytes(data, path), None
    except GitmailError as exc:
        return None, exc.message.removeprefix(path + ": ")


def file_problem(path: str, data: bytes) -> str | None:
    """Why the file ``data`` cannot sit at ``path`` in an archive (None when it can)."""
    return inspect_file(path, data)[1]


def _attachment_problem(path: str, data: bytes) -> str | None:
    match = ATTACHMENT_RE.match(path)
    if not match:
        return "not a valid attachment name (attachments/<xx>/<sha256>.<ext>)"
    digest = hashlib.sha256(data).hexdigest()
    if digest != match.group(3) or not digest.startswith(match.group(2)):
        return f"content hash is {digest}, not the one in the file name"
    return None


def edit_refusal(door: str, role: str | None, path: str, old: Record | None,
                 new: Record) -> tuple[str, str] | None:
    """Why changing the mutable record at ``path`` from ``old`` to ``new`` is refused at ``door``, and what to do.

    The one place that decides which edits of mutable records are
    legitimate (profiles, contacts, reservations, seats, receipts, the
    project); both versions parse, and ``door`` is one of :data:`DOORS`.
    At every door a profile keeps its registration and a relay's delivery
    is final. A push into an archive comes from a human's clone, never from
    a machine (machines sync through a hub), so there an edit may change
    only what a person may decide by hand: a profile's description,
    policies, capabilities, program and model; a contact link's answer; a
    reservation's release (a release is final); and anywhere, fields of the
    person's own (``x-``).
    """
    if isinstance(old, Agent) and isinstance(new, Agent) and old.id != new.id:
        return (f"replaces the registration of agent {old.name} (id {old.id}) with another (id {new.id}) "
                "without parking the old one under conflicts/"), _TAKEOVER
    if isinstance(old, Relay) and isinstance(new, Relay) and old.delivered_at and not new.delivered_at:
        return (f"marks message {old.message_id} as not yet delivered to {old.project}, which it already was "
                "(a delivery is final)"), _RESTORE
    if isinstance(old, Agent) and isinstance(new, Agent) and old.parent != new.parent:
        return (f"moves agent {old.name} in the hierarchy (parent {old.parent} to {new.parent}); an agent's parent "
                "is fixed when it is spawned"), _RESTORE + "; spawn a new agent under the other parent instead"
    if isinstance(old, BuildSlot) and isinstance(new, BuildSlot) and new.epoch < old.epoch:
        return (f"lowers build slot {old.slot}'s epoch from {old.epoch} to {new.epoch}, which would let a holding "
                "that is over count again"), _RESTORE
    if door != "archive" or old is None or type(old) is not type(new):
        return None
    allowed = _HAND_EDITABLE.get(type(old), frozenset()) | _ALWAYS_EDITABLE
    changed = [f.name for f in dataclasses.fields(old) if getattr(old, f.name) != getattr(new, f.name)]
    fixed = [name for name in changed if name not in allowed]
    if isinstance(old, Reservation) and "released_ts" in changed and old.released_ts is not None:
        return ("changes a reservation that was already released (a release is final)",
                _RESTORE + "; to hold the files again, reserve them anew (gitmail reserve)")
    if not fixed:
        return None
    kind = type(old).KIND
    editable = sorted(_HAND_EDITABLE.get(type(old), frozenset()))
    fields = ", ".join(_field_key(type(old), name) for name in fixed)
    advice = _RESTORE
    if editable:
        advice += f"; by hand a {kind} may change only " + ", ".join(_field_key(type(old), n) for n in editable)
    if kind in _THROUGH_GITMAIL:
        advice += f"; change the rest through gitmail ({_THROUGH_GITMAIL[kind]})"
    advice += ", and fields of your own named x-something"
    return f"changes {fields} of this {kind}, which only gitmail changes", advice


def _field_key(record_type: type[Record], name: str) -> str:
    """How field ``name`` of ``record_type`` is written in the file."""
    for f in dataclasses.fields(record_type):
        if f.name == name:
            return str(f.metadata.get("key") or name)
    return name


class Checker:
    """Checks changes to one repository; parses each blob once however many paths hold it.

    An inbox copy is the same blob as its message, so a sync of many
    messages parses each message once, not once per copy.
    """

    def __init__(self, repo: pygit2.Repository, door: str):
        if door not in DOORS:
            raise ValueError(f"unknown door {door!r}")
        self.repo = repo
        self.door = door
        self._parsed: dict[tuple[type[Record], bytes], Record | str] = {}

    # -- whole commits -----------------------------------------------------------
    def base_of(self, new: str, main: str | None) -> str | None:
        """The commit ``new`` shares with ``main`` (None: nothing in common, every file is new)."""
        if main is None:
            return None
        base = self.repo.merge_base(new, main)
        return str(base) if base is not None else None

    def check_commit(self, new: str, main: str | None) -> list[Rejection]:
        """What commit ``new`` adds over its merge base with ``main``, judged by the rules."""
        base = self.base_of(new, main)
        return self.check_trees(self._tree(base), self._tree(new), new_commit=new,
                                before=base[:12] if base else "<the commit before>")

    def _tree(self, commit: str | None) -> pygit2.Tree | None:
        return self.repo[commit].peel(pygit2.Tree) if commit else None

    # -- trees ------------------------------------------------------------------
    def check_trees(self, base: pygit2.Tree | None, new: pygit2.Tree | None, *, new_commit: str | None = None,
                    before: str = "<the commit before>") -> list[Rejection]:
        """The refused changes from tree ``base`` to tree ``new``, by path.

        ``new_commit`` is the commit holding ``new`` (repairs that restore an
        earlier version are checked against its history); ``before`` names
        the base in the advice given.
        """
        changes = tree_changes(base, new)
        repairs = self._repairs(changes, new_commit)
        removed_agents = {match.group(1) for path, blob in changes.items()
                          if blob is None and (match := _AGENT_PROFILE.match(path))}
        problems: list[Rejection] = []
        for path, blob in sorted(changes.items()):
            old = _entry(base, path)
            problem = (self._deletion(path, old, base, new, removed_agents, repairs) if blob is None
                       else self._addition(path, blob, old, new, repairs))
            if problem is not None:
                reason, advice = problem
                problems.append(Rejection(path, reason, advice.format(path=path, before=before),
                                          None if blob is None else str(blob)))
        return problems

    def _addition(self, path: str, blob: pygit2.Oid, old: pygit2.Oid | None, new: pygit2.Tree | None,
                  repairs: dict[str, Repair]) -> tuple[str, str] | None:
        role = role_of(path)
        if old is not None and role in IMMUTABLE_ROLES:
            if _parked(new, path, old) or _repaired(repairs, path, old, blob):
                return self._content(path, blob, role)
            return f"a {role} record is immutable and this changes it", _REDO.replace("{role}", role or "record")
        problem = self._content(path, blob, role)
        if problem is not None or old is None:
            return problem
        was, now = self._record(path, old), self._record(path, blob)
        if isinstance(now, Record):
            refusal = edit_refusal(self.door, role, path, was if isinstance(was, Record) else None, now)
            if refusal is not None and not _parked_any(new, path):
                return refusal
        return None

    def _content(self, path: str, blob: pygit2.Oid, role: str | None) -> tuple[str, str] | None:
        if path in PLAIN_FILES:
            return None
        if role == "attachment":
            problem = _attachment_problem(path, blob_data(self.repo, blob))
            return None if problem is None else (problem, "store attachments through gitmail (send_message)")
        record = self._record(path, blob)
        if isinstance(record, str):
            return record, (_STRAY if record.startswith("not a path") else _FIX)
        return None

    def _record(self, path: str, blob: pygit2.Oid) -> Record | str:
        """The record at ``path`` with blob ``blob``, or why it is not one."""
        kind = classify(path)
        if kind is None or kind[1] is None:
            return "not a path where gitmail keeps records"
        key = (kind[1], blob.raw)
        parsed = self._parsed.get(key)
        if parsed is None:
            try:
                parsed = kind[1].from_bytes(blob_data(self.repo, blob))
            except GitmailError as exc:
                parsed = exc.message.removeprefix("<record>: ")
            self._parsed[key] = parsed
        if isinstance(parsed, str):
            return parsed
        return parsed.misplaced(path) or parsed

    def _deletion(self, path: str, old: pygit2.Oid | None, base: pygit2.Tree | None, new: pygit2.Tree | None,
                  removed_agents: set[str], repairs: dict[str, Repair]) -> tuple[str, str] | None:
        role = role_of(path)
        if role in ("held", "idempotency"):
            return None  # a held message leaves when delivered; idempotency keys expire
        if role in _PURGEABLE:
            match = _ID_STEM.search(path)
            if match and _entry(new, tombstone_path(match.group(1))) is not None:
                return None
        if old is not None and _repaired(repairs, path, old, None):
            return None
        parts = path.split("/")
        if removed_agents:
            if parts[0] == AGENTS and parts[1] in removed_agents:
                return None  # the whole agent was deleted (its profile went in the same change)
            if role == "contact" and (parts[1] in removed_agents or parts[2].removesuffix(".yaml") in removed_agents):
                return None
            if role == "reservation" and old is not None:
                record = self._record(path, old)
                if isinstance(record, Reservation) and record.agent in removed_agents:
                    return None
        return "deleted without a tombstone", _PURGE

    # -- repairs ----------------------------------------------------------------
    def _repairs(self, changes: dict[str, pygit2.Oid | None], new_commit: str | None) -> dict[str, Repair]:
        """Repair records this change adds that hold up, by the file they repair.

        A repair may take out a file that breaks the rules, or put an
        immutable record back to a version ``main`` held before (named by
        ``restored_from``, which must be in the new commit's history).
        """
        out: dict[str, Repair] = {}
        for path, blob in changes.items():
            if blob is None or role_of(path) != "repair":
                continue
            record = self._record(path, blob)
            if isinstance(record, Repair) and self._repair_holds(record, new_commit):
                out[record.file] = record
        return out

    def _repair_holds(self, repair: Repair, new_commit: str | None) -> bool:
        if repair.removed_blob is None:
            return False  # putting a deleted file back needs no repair record to be accepted
        try:
            removed = self.repo[repair.removed_blob]
        except (KeyError, ValueError):
            return False
        if not isinstance(removed, pygit2.Blob):
            return False
        if file_problem(repair.file, removed.data) is not None:
            return True  # the version taken out breaks the rules by itself
        if repair.restored_blob is None or repair.restored_from is None or new_commit is None:
            return False
        try:
            if not self.repo.descendant_of(new_commit, repair.restored_from):
                return False
            earlier = _entry(self._tree(repair.restored_from), repair.file)
        except (KeyError, ValueError, pygit2.GitError):
            return False
        return earlier is not None and str(earlier) == repair.restored_blob


def _entry(tree: pygit2.Tree | None, path: str) -> pygit2.Oid | None:
    """The blob id at ``path`` in ``tree``, or None."""
    blob = blob_in(tree, path)
    return blob.id if blob is not None else None


def _parked(tree: pygit2.Tree | None, path: str, old: pygit2.Oid) -> bool:
    """Whether a merge parked the version ``old`` of ``path`` under ``conflicts/`` in ``tree``."""
    return _entry(tree, conflict_path(path, str(old))) is not None


def _parked_any(tree: pygit2.Tree | None, path: str) -> bool:
    """Whether some version of ``path`` is parked under ``conflicts/`` in ``tree`` (a clash made visible)."""
    if tree is None:
        return False
    try:
        return tree[f"{CONFLICTS}/{path}"].type == pygit2.GIT_OBJECT_TREE
    except KeyError:
        return False


def _repaired(repairs: dict[str, Repair], path: str, old: pygit2.Oid, new: pygit2.Oid | None) -> bool:
    repair = repairs.get(path)
    return (repair is not None and repair.removed_blob == str(old)
            and repair.restored_blob == (None if new is None else str(new)))
