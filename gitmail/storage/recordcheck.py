"""The record checker: what a commit made elsewhere may change in an archive.

Data enters an archive by three doors: the engine's own writes (built from
the record types, so valid by construction), a ``git push`` (from the human
checkout into the archive, or from a machine into a shared hub) and a fetch
during ``gitmail sync``. The last two bring commits that anything may have
made. The archive's and the hub's ``pre-receive`` hooks and the sync's fetch
all ask this module, and ``gitmail fsck`` judges each file at the tip with
the same :func:`file_problem`, so one set of rules holds at every door:

- every entry is a plain file (mode 100644): never a submodule link, a
  symbolic link (whatever it points to) or an executable file;
- an added or changed file sits at a path gitmail keeps records at and
  parses as the record kept there, with no NUL character in any field or
  body; an attachment's bytes hash to its name and stay within
  :data:`~gitmail.model.limits.MAX_ATTACHMENT_BYTES`; ``.gitattributes``
  holds only gitmail's own lines (and comments);
- an immutable record (:data:`~gitmail.model.records.IMMUTABLE_ROLES`) never
  changes, unless the merge that replaced it parked the other version under
  ``conflicts/``, or a repair record puts back the version it had before;
- a build slot's epoch never goes down (its fencing would fail);
- a file record (``files/``) names bytes the archive holds, of the size it
  states, at an attachment path named by the same SHA-256 as the record;
  it never changes, but for what a merge of two uploads of the same content
  does: the earlier upload replaces the later (:func:`file_refusal`);
- the project's defaults (``org_context.yaml``) and its memory folders
  (``memory/<name>/``) name as their writer an agent whose profile grants
  ``manager@*``; by hand a memory file changes only its text and writer,
  or is marked removed (``removed: true``, no text) by one;
- an agent profile never changes hands: a profile whose ``id`` (its
  registration) changes is another registration taking the name, accepted
  only with the old one parked under ``conflicts/`` and the new one the
  earlier of the two, as the merge decides a clash (see
  :func:`edit_refusal`); nor does it move in the hierarchy: its ``parent``
  and the parent's registration (``parent_id``) are fixed when it is
  spawned, and are dropped only when that registration is deleted in the
  same change (the agent is *orphaned*, naming what it was orphaned from);
- a human profile (the overseer) never carries a token hash: no token may
  ever prove a person (:func:`record_problem`);
- an agent's folder never differs from another's only in case: names are
  unique without regard to case, so ``agents/bluelake/`` beside
  ``agents/BlueLake/`` would be a second agent under the same name;
- a record sits where the archive's layout (``project.yaml``) keeps it: in an
  archive moved to a newer layout, a new record at an older layout's path is
  refused, naming the path it belongs at; a record moved by a migration with
  its content unchanged is no change at all (see
  :func:`gitmail.storage.layout.changed_records`), and the layout never goes
  back;
- nothing is deleted without the record that explains it: a tombstone purges
  a message with its copies and receipts; a deleted profile takes its agent's
  folder, contacts and reservations along; held messages and idempotency
  keys come and go; a repair record takes out a file that breaks the rules;
  an entry that is not a plain file may always go.

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
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import pygit2

from gitmail.model import sshsig
from gitmail.model.controls import printable
from gitmail.model.errors import GitmailError
from gitmail.model.limits import MAX_ATTACHMENT_BYTES
from gitmail.model.records import (
    AGENTS,
    ATTACHMENT_RE,
    ATTACHMENTS,
    CONFLICTS,
    GITATTRIBUTES,
    GITATTRIBUTES_PATH,
    IMMUTABLE_ROLES,
    LAYOUT,
    PLAIN_FILES,
    ROTATION_NAMESPACE,
    Agent,
    BuildSlot,
    Channel,
    ChannelPost,
    Contact,
    FileRecord,
    MemoryDoc,
    Node,
    OrgContext,
    Project,
    Record,
    Relay,
    Repair,
    Reservation,
    Revocation,
    channel_path,
    classify,
    conflict_path,
    is_extra_key,
    layout_forms,
    path_layout,
    placed,
    profile_path,
    role_of,
    rotation_statement,
    tombstone_path,
)

from .handles import tree_entry
from .layout import Comparisons, record_delta
from .parsed import Parsed
from .snapshot import blob_data, blob_in, tree_layout

DOORS = ("hub", "archive", "fetch")  # a shared hub's push, a push into an archive, a sync's fetch
_ID_STEM = re.compile(r"/([0-9a-z]{23})\.(?:md|yaml)$")
_PURGEABLE = frozenset({"message", "inbox", "outbox", "receipt"})
_AGENT_PROFILE = re.compile(r"^agents/([^/]+)/profile\.yaml$")
FILE_MODE = 0o100644  # the one kind of entry an archive holds besides folders: a plain, not executable, file
# Entries of other kinds, as git names them by mode: what each is, and how a human takes it out.
_NOT_FILES = {
    0o160000: ("a submodule link", "take it out (git rm --cached {path}) and commit; an archive holds no "
               "submodules or repositories of its own"),
    0o120000: ("a symbolic link", "replace the link by the file itself (git rm --cached {path}, put the file "
               "there, git add it) and commit; a link is refused whatever it points to"),
    0o100755: ("an executable file", "clear the executable bit (git update-index --chmod=-x {path}) and commit"),
}
_OWN_ATTRIBUTES = [line for line in GITATTRIBUTES.decode().split("\n") if line and not line.startswith("#")]


@dataclass(frozen=True)
class Rejection:
    """One change the rules refuse: the file, why, and what to do instead."""

    path: str
    reason: str
    advice: str
    blob: str | None = None  # the incoming version (None: the change deletes the file)
    code: str | None = None  # who-may-write refusals name theirs (gitmail.storage.authorship); the record rules none

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
_CHANNEL = "; to say more about a channel, post to it (post_channel)"
_ORG = "set the project's defaults through gitmail (org_context), as an agent holding manager@*"
_MEMORY = ("write or remove the project's memory files through gitmail (write_memory, gitmail memory), or by hand "
           "naming in written_by an agent holding manager@*")
_UNWRITE = (_RESTORE + "; a memory file is removed by a version that says so, in a manager's name: write_memory with "
            "remove=true (gitmail memory rm), or by hand keep the file with no text, removed: true and written_by "
            "an agent holding manager@*")
_POST = "make the channel first (create_channel) and post through gitmail (post_channel), as a registered agent"
_STRAY = "keep notes outside the archive, or remove the file from the commit"
_ATTRIBUTES = ("keep only gitmail's lines (" + "; ".join(_OWN_ATTRIBUTES) + ") and comments, or " + _RESTORE
               + "; attributes of your own belong in your clone's .git/info/attributes")
_SEND = "store attachments through gitmail (send_message)"
_UPLOAD = "store files through gitmail (upload_file, or the server's HTTP file endpoint)"
_TOO_LARGE = ("take the file out and share it another way (a link in a message): no door takes a larger "
              "attachment, send_message included")
_TAKEOVER = ("register the agent under another name; a profile's id names one registration, and replacing it would "
             "hand the agent's mail to someone else")
_SPELLING = ("register the agent under another name (names are unique without regard to case), or move these files "
             "into the existing agent's folder")
_HUMAN = ("remove token_hash: the overseer acts through the CLI and the web view of the server's machine, never with "
          "a token")
# What a human may change by hand in a record pushed into an archive, by record kind
# (``extra`` is the fields of their own, ``x-team``; ``hlc`` is the clock merges order writes by):
_HAND_EDITABLE: dict[type[Record], frozenset[str]] = {
    Agent: frozenset({"task_description", "contact_policy", "attachments_policy", "capabilities", "program", "model"}),
    Contact: frozenset({"status", "reason", "expires_at", "responded_at"}),
    Reservation: frozenset({"released_ts"}),
    MemoryDoc: frozenset({"body", "written_by", "updated_at", "removed"}),  # its text, by a person naming a manager
}
_ALWAYS_EDITABLE = frozenset({"extra", "hlc"})
_THROUGH_GITMAIL = {
    "agent": "gitmail register, gitmail sleep / wake, gitmail agents reset-token",
    "reservation": "gitmail release, gitmail renew, gitmail reserve",
    "seat": "gitmail seat", "receipt": "gitmail read --as, gitmail ack", "project": "gitmail migrate for its layout",
}


def mode_problem(mode: int) -> str | None:
    """Why an entry of git file mode ``mode`` cannot sit in an archive (None for a plain file)."""
    return None if mode == FILE_MODE else _not_a_file(mode)[0]


def _not_a_file(mode: int) -> tuple[str, str]:
    """Why an entry of ``mode``, not a plain file's, is refused, and how a person takes it out."""
    kind, advice = _NOT_FILES.get(mode, ("an entry that is not a plain file", "replace it by a plain file "
                                         "(mode 100644) and commit"))
    return f"{kind} (mode {mode:o}), where an archive keeps only plain files (mode {FILE_MODE:o})", advice


def path_problem(path: str) -> str | None:
    """Why no file may sit at ``path`` in an archive, whatever it holds (None when one may)."""
    if path in PLAIN_FILES or path.startswith(ATTACHMENTS + "/"):
        return None
    kind = classify(path)
    return "not a path where gitmail keeps records" if kind is None or kind[1] is None else None


def inspect_file(path: str, data: bytes) -> tuple[Record | None, str | None]:
    """The record the file ``data`` holds at ``path``, and why it cannot sit there (None when it can)."""
    if path in PLAIN_FILES:
        return None, (_gitattributes_problem(data) if path == GITATTRIBUTES_PATH else None)
    if path.startswith(ATTACHMENTS + "/"):
        return None, _attachment_problem(path, len(data), lambda: data)
    kind = classify(path)
    if kind is None or kind[1] is None:
        return None, path_problem(path)
    parsed = _parse(kind[1], data, path)
    return (None, parsed) if isinstance(parsed, str) else (parsed, record_problem(parsed))


def record_problem(record: Record) -> str | None:
    """Why a record that parses may still not sit in an archive (None when it may)."""
    if isinstance(record, Agent) and record.human and record.token_hash:
        return (f"{record.name} is a human profile (human: true) and carries a token_hash; a person is never proved "
                "by a token")
    if isinstance(record, Node):
        return _node_problem(record)
    if isinstance(record, Revocation):
        try:
            raw = sshsig.parse_public_line(record.key)
        except sshsig.SignatureError as exc:
            return f"key: {exc}"
        if sshsig.key_id(raw) != record.key_id:
            return f"key_id: {record.key_id} is not the SHA-256 of the key it revokes ({sshsig.key_id(raw)})"
    return None


def _node_problem(node: Node) -> str | None:
    """A node's key must read, and a rotated key must carry the old key's signature of the rotation."""
    try:
        sshsig.parse_public_line(node.key)
    except sshsig.SignatureError as exc:
        return f"key: {exc}"
    if node.previous_key is None and node.rotation_sig is None and node.rotated_at is None:
        return None
    if node.previous_key is None or node.rotation_sig is None or node.rotated_at is None:
        return "a rotated node names previous_key, rotated_at and rotation_sig together (gitmail nodes rotate)"
    try:
        old = sshsig.parse_public_line(node.previous_key)
        signer = sshsig.signer_of(node.rotation_sig, rotation_statement(node.node, node.key, node.rotated_at),
                                  namespace=ROTATION_NAMESPACE)
    except sshsig.SignatureError as exc:
        return f"rotation_sig: {exc}; only the holder of the previous key can rotate (gitmail nodes rotate)"
    if signer != old:
        return "rotation_sig: not signed by previous_key; only the holder of the previous key can rotate"
    return None


def node_refusal(old: Node, new: Node) -> tuple[str, str] | None:
    """A node's record keeps its kind and its first day; its key changes only by a rotation from the key it had."""
    if (old.kind, old.created_at) != (new.kind, new.created_at):
        return f"changes the kind or creation of node {old.node}, which are fixed", _RESTORE
    if old.key != new.key and new.previous_key != old.key:
        return (f"replaces node {old.node}'s key without a rotation signed by its key; only that node can move "
                "to a new key (gitmail nodes rotate), and another node may only revoke it (gitmail nodes revoke)"),\
            _RESTORE
    if old.key == new.key and _own_fields(old) != _own_fields(new):
        return (f"changes node {old.node}'s record without moving its key; a node's record changes only by a "
                "rotation (fields of your own named x-something excepted)"), _RESTORE
    return None


def file_refusal(old: FileRecord, new: FileRecord) -> tuple[str, str] | None:
    """A file record changes only as a merge of two uploads of its content does: to the earlier upload."""
    if new.size == old.size and new.order() < old.order():
        return None
    return (f"changes the record of file {old.sha256}; a file's record never changes once written (only a merge of "
            "two uploads of the same bytes keeps the earlier one)"), _RESTORE


def _own_fields(record: Record) -> dict[str, Any]:
    return {key: value for key, value in record.to_fields().items() if not is_extra_key(key)}


def _agent_spellings(tree: pygit2.Tree | None) -> dict[str, list[str]]:
    """The agent folders of ``tree`` by lower-cased name (more than one spelling: a collision)."""
    out: dict[str, list[str]] = {}
    try:
        folder = tree[AGENTS] if tree is not None else None
    except KeyError:
        folder = None
    if isinstance(folder, pygit2.Tree):
        for entry in folder:
            if entry.type == pygit2.GIT_OBJECT_TREE:
                out.setdefault(str(entry.name).lower(), []).append(str(entry.name))
    return out


def file_problem(path: str, data: bytes) -> str | None:
    """Why the file ``data`` cannot sit at ``path`` in an archive (None when it can)."""
    return inspect_file(path, data)[1]


def _parse(record_type: type[Record], data: bytes, path: str) -> Record | str:
    """The record ``data`` holds, or why it is not one (a record holds no NUL, though gitmail still reads one)."""
    try:
        record = record_type.from_bytes(data, path)
    except GitmailError as exc:
        return exc.message.removeprefix(path + ": ")
    where = record.nul_field()
    return record if where is None else f"{where} contains a NUL character (\\0), which no record may hold"


def _parse_record(record_type: type[Record], data: bytes) -> Record | str:
    """As :func:`_parse`, for a file not yet placed (its place is checked apart)."""
    return _parse(record_type, data, "<record>")


def _attachment_problem(path: str, size: int, data: Callable[[], bytes]) -> str | None:
    """Why the ``size`` bytes ``data()`` returns cannot be the attachment at ``path`` (read only if in bounds)."""
    match = ATTACHMENT_RE.match(path)
    if not match:
        return "not a valid attachment name (attachments/<xx>/<yy>/<sha256>.<ext>)"
    if size > MAX_ATTACHMENT_BYTES:
        return f"{size} bytes, over the limit of {MAX_ATTACHMENT_BYTES} bytes for an attachment"
    digest = hashlib.sha256(data()).hexdigest()
    if digest != match.group(3) or not digest.startswith(match.group(2).replace("/", "")):
        return f"content hash is {digest}, not the one in the file name"
    return None


def _gitattributes_problem(data: bytes) -> str | None:
    """Why ``data`` cannot be the archive's ``.gitattributes``: each line is blank, a comment or one of gitmail's."""
    for number, line in enumerate(data.decode("utf-8", "replace").split("\n"), 1):
        line = line.strip()
        if line and not line.startswith("#") and line not in _OWN_ATTRIBUTES:
            return (f"line {number} ({printable(line[:80], multiline=False)}) is not one gitmail writes: the "
                    "archive's attributes decide how every record merges")
    return None


def edit_refusal(door: str, role: str | None, path: str, old: Record | None, new: Record, *,
                 gone: frozenset[str] = frozenset()) -> tuple[str, str] | None:
    """Why changing the mutable record at ``path`` from ``old`` to ``new`` is refused at ``door``, and what to do.

    The one place that decides which edits of mutable records are
    legitimate (profiles, contacts, reservations, seats, receipts, the
    project); both versions parse, and ``door`` is one of :data:`DOORS`.
    At every door a profile keeps its registration and its place in the
    hierarchy (see :func:`identity_refusal`; ``gone`` holds the ids of the
    registrations the same change deletes), its card version never goes
    back, and a relay's delivery is final.
    A push into an archive comes from a human's clone, never from a machine
    (machines sync through a hub), so there an edit may change only what a
    person may decide by hand: a profile's description, policies,
    capabilities, program and model; a contact link's answer; a
    reservation's release (a release is final); and anywhere, fields of the
    person's own (``x-``).
    """
    if isinstance(old, Agent) and isinstance(new, Agent):
        refusal = identity_refusal(old, new, gone)
        if refusal is not None:
            return refusal
    if isinstance(old, Relay) and isinstance(new, Relay) and old.delivered_at and not new.delivered_at:
        return (f"marks message {old.message_id} as not yet delivered to {old.project}, which it already was "
                "(a delivery is final)"), _RESTORE
    if isinstance(old, Project) and isinstance(new, Project) and new.layout < old.layout:
        return (f"moves the archive back from layout {old.layout} to layout {new.layout}; an archive's layout only "
                "moves forward (gitmail migrate)"), _RESTORE
    if isinstance(old, Node) and isinstance(new, Node):
        return node_refusal(old, new)
    if isinstance(old, FileRecord) and isinstance(new, FileRecord):
        return file_refusal(old, new)
    if isinstance(old, Channel) and isinstance(new, Channel) and not new.earlier_than(old):
        return (f"changes the definition of channel {old.name}, which is fixed once made (two made apart merge to "
                "the earlier one, and only that change is taken)"), _RESTORE + _CHANNEL
    if isinstance(old, Agent) and isinstance(new, Agent) and new.card_version < old.card_version:
        return (f"lowers {old.name}'s card version from {old.card_version} to {new.card_version}; a card's version "
                "only rises (set_card publishes the next one)"), _RESTORE
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


def identity_refusal(old: Agent, new: Agent, gone: frozenset[str] = frozenset()) -> tuple[str, str] | None:
    """Why a profile's new version is not the same registration in the same place of the hierarchy (None: it is).

    Another registration at the path (another ``id``) is refused here; the
    checker accepts it only as a merge leaves it (:func:`replaced_by_merge`).
    The same registration keeps its ``parent`` and ``parent_id``, except that
    it is orphaned when the registration it names is in ``gone``: it then
    names that one as ``orphaned_from``.
    """
    if old.id != new.id:
        return (f"replaces the registration of agent {old.name} (id {old.id}) with another (id {new.id}) "
                "without parking the old one under conflicts/"), _TAKEOVER
    was = (old.parent, old.parent_id, old.orphaned_from, old.orphaned_from_id)
    now = (new.parent, new.parent_id, new.orphaned_from, new.orphaned_from_id)
    if was == now or _orphaned(old, new, gone):
        return None
    return (f"moves agent {old.name} in the hierarchy (parent {old.parent} [{old.parent_id}] to {new.parent} "
            f"[{new.parent_id}]); an agent's parent and the registration it names are fixed when it is spawned, "
            "and dropped only by deleting that parent"), _RESTORE + "; spawn a new agent under the other parent instead"


def _orphaned(old: Agent, new: Agent, gone: frozenset[str]) -> bool:
    """Whether ``new`` is ``old`` orphaned because the registration of its parent is deleted (its id in ``gone``)."""
    if old.parent is None or old.orphaned_from is not None or new.parent is not None:
        return False
    if new.orphaned_from is None or new.orphaned_from.lower() != old.parent.lower():
        return False
    return new.orphaned_from_id in gone and old.parent_id in (None, new.orphaned_from_id)


def replaced_by_merge(old: Agent, new: Agent) -> bool:
    """Whether ``new`` may replace ``old`` as a merge of a clash does: the earlier registration keeps the name."""
    return (new.inception_ts, new.id) < (old.inception_ts, old.id)


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

    def __init__(self, repo: pygit2.Repository, door: str, *, boundaries: frozenset[str] = frozenset(),
                 parsed: Parsed | None = None):
        """``boundaries``: the pinned shallow boundaries of a partial archive (:mod:`.boundary`).

        ``parsed``: where the records read are kept, for the operation's later
        steps to read them without parsing again (a sync's index catch-up).
        """
        if door not in DOORS:
            raise ValueError(f"unknown door {door!r}")
        self.repo = repo
        self.door = door
        self.boundaries = boundaries
        self.parsed = parsed if parsed is not None else Parsed()

    # -- whole commits -----------------------------------------------------------
    def base_of(self, new: str, main: str | None) -> str | None:
        """The commit ``new`` shares with ``main`` (None: nothing in common, every file is new).

        In an archive that joined shallow, history that shares nothing with
        ``main`` here (the first fetch, or a branch cut at the window) is
        judged from the newest pinned boundary it holds: what lies below it
        is the pinned hub's, trusted as it is.
        """
        if main is not None:
            base = self.repo.merge_base(new, main)
            if base is not None:
                return str(base)
        if not self.boundaries:
            return None
        walker = self.repo.walk(pygit2.Oid(hex=new), pygit2.enums.SortMode.TIME)
        if main is not None:
            walker.hide(pygit2.Oid(hex=main))
        return next((str(commit.id) for commit in walker if str(commit.id) in self.boundaries), None)

    def check_commit(self, new: str, main: str | None) -> list[Rejection]:
        """What commit ``new`` adds over its merge base with ``main``, judged by the rules."""
        base = self.base_of(new, main)
        return self.check_trees(self._tree(base), self._tree(new), new_commit=new, main=self._tree(main),
                                before=base[:12] if base else "<the commit before>")

    def _tree(self, commit: str | None) -> pygit2.Tree | None:
        return self.repo[commit].peel(pygit2.Tree) if commit else None

    # -- trees ------------------------------------------------------------------
    def check_trees(self, base: pygit2.Tree | None, new: pygit2.Tree | None, *, new_commit: str | None = None,
                    main: pygit2.Tree | None = None, before: str = "<the commit before>",
                    compared: Comparisons | None = None) -> list[Rejection]:
        """The refused changes from tree ``base`` to tree ``new``, by path.

        ``new_commit`` is the commit holding ``new`` (repairs that restore an
        earlier version are checked against its history); ``main`` is the
        tree the change would join (an agent folder it adds must not differ
        only in case from one there either); ``before`` names the base in
        the advice given; ``compared``: the trees the caller's other steps
        compare (a sync's merge reads the same pair again).
        """
        # A door takes in whole ranges: git compares.
        delta = record_delta(base, new, git_dir=self.repo.path, compared=compared)
        changes = {path: blob for path, (blob, _) in delta.items()}
        repairs = self._repairs(changes, new_commit)
        removed_agents = {match.group(1) for path, blob in changes.items()
                          if blob is None and (match := _AGENT_PROFILE.match(path))}
        gone = self._gone_registrations(changes, base)
        spelled = self._second_spellings(base, new, main)
        was, layout = tree_layout(base), tree_layout(new)
        problems: list[Rejection] = []
        for path, blob in sorted(changes.items()):
            old, mode = _entry(base, placed(path, was)), delta[path][1]
            folder = path.split("/")[1] if path.startswith(AGENTS + "/") and path.count("/") > 1 else None
            if folder in spelled:
                problems.append(Rejection(path, f"the agent folder {folder} differs only in case from the agent "
                                          f"{spelled[folder]}; agent names are unique without regard to case",
                                          _SPELLING, None if blob is None else str(blob)))
                continue
            if mode != FILE_MODE:
                # Judged by what it is, not by what it holds (a gitlink holds nothing here); taking such an
                # entry out is always accepted: that is how a hub that took one is mended.
                problem = None if blob is None else _not_a_file(mode)
            elif blob is None:
                problem = self._deletion(path, old, base, new, removed_agents, repairs)
            else:
                problem = misplaced(path, layout) or self._addition(path, blob, old, new, repairs, gone)
            if problem is not None:
                reason, advice = problem
                problems.append(Rejection(path, reason, advice.format(path=path, before=before),
                                          None if blob is None else str(blob)))
        return problems

    def _addition(self, path: str, blob: pygit2.Oid, old: pygit2.Oid | None, new: pygit2.Tree | None,
                  repairs: dict[str, Repair], gone: frozenset[str]) -> tuple[str, str] | None:
        role = role_of(path)
        if old is not None and old != blob and role in IMMUTABLE_ROLES:  # the same blob: only its mode is mended
            if _parked(new, path, old) or _repaired(repairs, path, old, blob):
                return self._content(path, blob, role)
            return f"a {role} record is immutable and this changes it", _REDO.replace("{role}", role or "record")
        problem = self._content(path, blob, role)
        if problem is None and role == "file":
            problem = self._file_bytes(path, blob, new)
        if problem is None and old is None and role == "post":
            return self._post_problem(path, blob, new)
        if problem is None and role in ("org_context", "memory"):
            problem = self._org_problem(path, blob, new)
        if problem is not None or old is None:
            return problem
        was, now = self._record(path, old), self._record(path, blob)
        if not isinstance(now, Record):
            return None
        if isinstance(was, Agent) and isinstance(now, Agent):
            if was.id != now.id and _parked_any(new, path) and replaced_by_merge(was, now):
                return None  # a clash of registrations, settled as a merge settles it
            refusal = identity_refusal(was, now, gone)
            if refusal is not None:
                return refusal  # never excused by a conflict parked beside it: the registration is the same one
        refusal = edit_refusal(self.door, role, path, was if isinstance(was, Record) else None, now, gone=gone)
        if refusal is not None and not _parked_any(new, path):
            return refusal
        return None

    def _file_bytes(self, path: str, blob: pygit2.Oid, new: pygit2.Tree | None) -> tuple[str, str] | None:
        """A file record's bytes must be in the tree, of its size (their hash is checked as an attachment's)."""
        record = self._record(path, blob)
        if not isinstance(record, FileRecord):
            return None
        held = _entry(new, record.blob)
        if held is None:
            return f"names the bytes {record.blob}, which the archive does not hold", _UPLOAD
        size = self.repo.odb.read_header(held)[1]
        if size != record.size:
            return f"states {record.size} bytes, but {record.blob} holds {size}", _UPLOAD
        return None

    def _post_problem(self, path: str, blob: pygit2.Oid, new: pygit2.Tree | None) -> tuple[str, str] | None:
        """A new post belongs to a channel the tree defines, and is written by an agent the tree registers."""
        post = self._record(path, blob)
        if not isinstance(post, ChannelPost):
            return None
        if _entry(new, channel_path(post.channel)) is None:
            return f"a post to channel {post.channel}, which this archive does not define", _POST
        if _entry(new, profile_path(post.sender)) is None:
            return f"a post by {post.sender}, who is no agent of this project", _POST
        return None

    def _org_problem(self, path: str, blob: pygit2.Oid, new: pygit2.Tree | None) -> tuple[str, str] | None:
        """The project's defaults and its memory folders are written by an agent whose profile grants manager@*."""
        record = self._record(path, blob)
        if isinstance(record, OrgContext):
            writer, verb, advice = record.set_by, "set", _ORG
        elif isinstance(record, MemoryDoc):
            writer, verb, advice = record.written_by, "written", _MEMORY
        else:
            return None
        held = _entry(new, profile_path(writer))
        profile = self._record(profile_path(writer), held) if held is not None else None
        if not isinstance(profile, Agent) or not profile.manages_project():
            return f"{verb} by {writer}, who is no agent of this project holding manager@*", advice
        return None

    def _content(self, path: str, blob: pygit2.Oid, role: str | None) -> tuple[str, str] | None:
        if path == GITATTRIBUTES_PATH:
            problem = _gitattributes_problem(blob_data(self.repo, blob))
            return None if problem is None else (problem, _ATTRIBUTES)
        if path in PLAIN_FILES:
            return None
        if role == "attachment":
            size = self.repo.odb.read_header(blob)[1]  # a file over the limit is never read
            problem = _attachment_problem(path, size, lambda: blob_data(self.repo, blob))
            if problem is None:
                return None
            return problem, _TOO_LARGE if size > MAX_ATTACHMENT_BYTES else _SEND
        record = self._record(path, blob)
        if isinstance(record, str):
            return record, (_STRAY if record.startswith("not a path") else _FIX)
        problem = record_problem(record)
        return None if problem is None else (problem, _HUMAN)

    def _second_spellings(self, base: pygit2.Tree | None, new: pygit2.Tree | None,
                          main: pygit2.Tree | None) -> dict[str, str]:
        """Agent folders ``new`` adds whose name differs only in case from another's: each with the one kept.

        A spelling ``base`` or ``main`` already holds is kept (unless the
        change deletes it); among spellings that are all new, the earliest
        registration (as a merge decides a clash; a folder without a profile
        comes last).
        """
        now = _agent_spellings(new)
        before = {name for names in _agent_spellings(base).values() for name in names}
        removed = before - {name for names in now.values() for name in names}
        in_main = _agent_spellings(main)
        out = {}
        for lower, names in now.items():
            there = [name for name in in_main.get(lower, []) if name not in removed]
            spellings = sorted({*names, *there})
            if len(spellings) < 2:
                continue
            kept = [name for name in spellings if name in before or name in there]
            keeper = kept[0] if kept else min(spellings, key=lambda name: self._registered(new, name))
            out.update({name: keeper for name in names if name != keeper and name not in before})
        return out

    def _registered(self, tree: pygit2.Tree | None, name: str) -> tuple[bool, str, str, str]:
        """How early agent folder ``name`` of ``tree`` was registered, for ordering (no profile: last)."""
        blob = _entry(tree, profile_path(name))
        profile = self._record(profile_path(name), blob) if blob is not None else None
        if isinstance(profile, Agent):
            return False, profile.inception_ts, profile.id, name
        return True, "", "", name

    def _gone_registrations(self, changes: dict[str, pygit2.Oid | None], base: pygit2.Tree | None) -> frozenset[str]:
        """The ids of the registrations whose profile this change deletes or replaces with another registration."""
        out = set()
        for path, blob in changes.items():
            old = _entry(base, path) if _AGENT_PROFILE.match(path) else None
            was = self._record(path, old) if old is not None else None
            if not isinstance(was, Agent):
                continue
            now = self._record(path, blob) if blob is not None else None
            if not isinstance(now, Agent) or now.id != was.id:
                out.add(was.id)
        return frozenset(out)

    def _record(self, path: str, blob: pygit2.Oid) -> Record | str:
        """The record at ``path`` with blob ``blob``, or why it is not one."""
        kind = classify(path)
        if kind is None or kind[1] is None:
            return "not a path where gitmail keeps records"
        parsed = self.parsed.outcome(kind[1], blob.raw, lambda: blob_data(self.repo, blob), _parse_record)
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
            if match and _entry(new, placed(tombstone_path(match.group(1)), tree_layout(new))) is not None:
                return None
        if old is not None and _repaired(repairs, path, old, None):
            return None
        if role == "memory":
            return "a memory file deleted outright, which says neither that nor who removed it", _UNWRITE
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
                out[placed(record.file, LAYOUT)] = record  # the file it names, at whatever layout it was
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
            then = self._tree(repair.restored_from)
            earlier = next((found for form in layout_forms(repair.file) if (found := _entry(then, form))), None)
        except (KeyError, ValueError, pygit2.GitError):
            return False
        return earlier is not None and str(earlier) == repair.restored_blob


def _entry(tree: pygit2.Tree | None, path: str) -> pygit2.Oid | None:
    """The blob id at ``path`` in ``tree``, or None."""
    blob = blob_in(tree, path)
    return blob.id if blob is not None else None


def _parked(tree: pygit2.Tree | None, path: str, old: pygit2.Oid) -> bool:
    """Whether a merge parked the version ``old`` of ``path`` (at any layout) under ``conflicts/`` in ``tree``."""
    return any(_entry(tree, conflict_path(form, str(old))) is not None for form in layout_forms(path))


def _parked_any(tree: pygit2.Tree | None, path: str) -> bool:
    """Whether some version of ``path`` is parked under ``conflicts/`` in ``tree`` (a clash made visible)."""
    if tree is None:
        return False
    return any(isinstance(tree_entry(tree, f"{CONFLICTS}/{form}"), pygit2.Tree) for form in layout_forms(path))


def misplaced(path: str, layout: int) -> tuple[str, str] | None:
    """Why a file added at ``path`` is not where an archive at ``layout`` keeps it (None when it is).

    An attachment keeps the path its message names, so one from before a
    migration may still be added to an archive moved on since.
    """
    found = path_layout(path)
    if found is None or found == layout or (found < layout and path.startswith(ATTACHMENTS + "/")):
        return None
    belongs = placed(path, layout)
    move = f"move it there (mkdir -p {belongs.rsplit('/', 1)[0]} && git mv {path} {belongs}) and commit"
    if found < layout:
        return (f"sits where layout {found} kept records, but this archive is at layout {layout}, which keeps it at "
                f"{belongs}"), move
    return (f"sits where layout {found} keeps records, but this archive is still at layout {layout}, which keeps it "
            f"at {belongs}"), f"{move}, or move the archive to layout {found} first (gitmail migrate PROJECT)"


def _repaired(repairs: dict[str, Repair], path: str, old: pygit2.Oid, new: pygit2.Oid | None) -> bool:
    repair = repairs.get(placed(path, LAYOUT))
    return (repair is not None and repair.removed_blob == str(old)
            and repair.restored_blob == (None if new is None else str(new)))
