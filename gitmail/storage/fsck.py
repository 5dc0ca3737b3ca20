"""Consistency checks over an archive's tip, plus git's own ``fsck``.

What is checked: every file passes the record checker's file rules
(:func:`gitmail.storage.recordcheck.inspect_file`, the same that pushes and
fetches pass: a plain file, not a submodule link, symbolic link or
executable; a path gitmail knows, at the archive's layout, parsing as the
record that lives there, IDs and names agreeing with the path, no NUL in a
record; attachments matching their hash and within their size limit);
every inbox and outbox copy is the canonical message (the outbox copy may add
the sender's bcc list); every copy's owner is a party of the message; and
references (reply, thread, attachments, the message an escalation is about)
resolve; a reference to a message removed on purpose (one with a tombstone)
counts as resolved; no two agents' names differ only in case; and the agent
hierarchy holds together: every ``parent`` is an agent of the project, and
the very registration that spawned the child (not a later one of the same
name), no chain of parents loops, and no agent outlives the agent above it;
every channel post sits in a channel the archive defines and is by an agent
of the project.
A message that came from another project (its sender is ``Name@slug``) may
refer to the thread and reply it belongs to there, so only its attachments
are checked; every relay record (a copy owed to another
project) names a message of this archive that names that project; every
file record's bytes are in the archive, of its size, hashing to its
SHA-256 (the file's ID). In an archive that joined with a window
(:mod:`.boundary`), the records whose files were never fetched are not
read (they were checked where they were made), and references to them
resolve.
"""

from __future__ import annotations

import hashlib
import subprocess
from dataclasses import dataclass, field

import pygit2

from gitmail.model.clock import parse_ts
from gitmail.model.errors import GitmailError
from gitmail.model.ids import is_id
from gitmail.model.records import (
    ATTACHMENTS,
    MEMORY,
    ORG_CONTEXT_PATH,
    Agent,
    ChannelPost,
    Escalation,
    FileRecord,
    MemoryDoc,
    Message,
    OrgContext,
    Record,
    Relay,
    Tombstone,
    channel_path,
    classify,
    message_path,
    placed,
    profile_path,
    role_of,
)

from .boundary import is_partial, present
from .engine import Archive
from .recordcheck import inspect_file, misplaced, mode_problem, path_problem
from .snapshot import Snapshot


@dataclass(frozen=True)
class Problem:
    path: str
    reason: str

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


def check_archive(archive: Archive, *, run_git: bool = True) -> list[Problem]:
    """All problems found at the tip of ``archive`` (empty when healthy)."""
    snap = archive.snapshot()
    if snap.commit is None:
        return []
    tip = _read_tip(archive, snap)
    problems = tip.problems
    problems.extend(_copy_problems(snap, tip.messages, tip.copies, tip.unfetched))
    problems.extend(_relay_problems(tip))
    problems.extend(_message_problems(snap, tip))
    problems.extend(_hierarchy_problems(tip.agents))
    problems.extend(_file_problems(snap, tip.files))
    problems.extend(_post_problems(snap, tip.posts, {agent.name for agent in tip.agents}))
    problems.extend(_org_problems(snap, tip.agents))
    problems.extend(_escalation_problems(snap, tip))
    if run_git:
        problems.extend(_git_fsck(archive.git_dir))
    return problems


@dataclass
class _Tip:
    """The records at an archive's tip, sorted by kind for the checks across files, and each file's own problems."""

    problems: list[Problem] = field(default_factory=list)
    messages: dict[str, Message] = field(default_factory=dict)
    removed: set[str] = field(default_factory=set)  # messages deleted from the tip on purpose (tombstones)
    copies: list[tuple[str, str, Message]] = field(default_factory=list)
    escalations: list[tuple[str, Escalation]] = field(default_factory=list)
    relays: list[tuple[str, Relay]] = field(default_factory=list)
    attachments: set[str] = field(default_factory=set)
    agents: list[Agent] = field(default_factory=list)
    files: list[tuple[str, FileRecord]] = field(default_factory=list)
    posts: list[tuple[str, ChannelPost]] = field(default_factory=list)
    unfetched: set[str] = field(default_factory=set)  # messages of a window join whose files were never fetched

    def keep(self, path: str, record: Record | None) -> None:
        """File ``record`` (read from ``path``) with the records of its kind."""
        role = role_of(path)
        # Each role's path holds one record type: a message and its copies parse as Message.
        if isinstance(record, Tombstone):
            self.removed.add(record.message_id)
        elif isinstance(record, Agent):
            self.agents.append(record)
        elif isinstance(record, Relay):
            self.relays.append((path, record))
        elif isinstance(record, Message) and role == "message":
            self.messages[record.id] = record
        elif isinstance(record, Message) and role in ("inbox", "outbox"):
            self.copies.append((path, role, record))
        elif isinstance(record, Escalation):
            self.escalations.append((path, record))
        elif isinstance(record, FileRecord):
            self.files.append((path, record))
        elif isinstance(record, ChannelPost):
            self.posts.append((path, record))


def _read_tip(archive: Archive, snap: Snapshot) -> _Tip:
    """Every file at the tip checked on its own and, when sound, its record kept for the checks across files.

    In a partial clone, a file this machine never fetched is not read; a
    message among them counts as present, so references to it resolve.
    """
    tip = _Tip()
    partial = is_partial(archive.repo)
    for path, mode in snap.entries():
        if partial and _unfetched(archive, snap, path, mode):
            if role_of(path) == "message":
                tip.unfetched.add(path.rsplit("/", 1)[1][:-3])  # outside the window: references to it resolve
            continue
        problem = mode_problem(mode) or path_problem(path)  # checked before reading, which a gitlink would fail
        wrong = misplaced(path, snap.layout)
        if problem is None and wrong is not None:
            problem = f"{wrong[0]}; {wrong[1]}"
        if problem is not None:
            tip.problems.append(Problem(path, problem))
            continue
        record, problem = inspect_file(path, snap.read(path) or b"")
        if path.startswith(ATTACHMENTS + "/"):
            tip.attachments.add(path)  # a message may still name it; a hash mismatch is reported either way
        if problem is not None:
            tip.problems.append(Problem(path, problem))
            continue
        tip.keep(path, record)
    tip.removed |= tip.unfetched  # a reference to a message outside the window resolves where the message is held
    return tip


def _relay_problems(tip: _Tip) -> list[Problem]:
    """Each relay record names a message of the archive (or one removed on purpose) addressed to its project."""
    problems = []
    for path, relay in tip.relays:
        relayed = tip.messages.get(relay.message_id)
        if relayed is None:
            if relay.message_id not in tip.removed:
                problems.append(Problem(path, f"relays message {relay.message_id}, which is not in the archive"))
        elif not any(name.endswith("@" + relay.project) for name in relayed.to + relayed.cc):
            problems.append(Problem(path, f"message {relay.message_id} has no recipient in {relay.project}"))
    return problems


def _message_problems(snap: Snapshot, tip: _Tip) -> list[Problem]:
    """Each message's reply, thread and attachments resolve, and each attachment has the hash the message records.

    A message copied from another project is checked for its attachments
    only: its thread and the message it replies to live there.
    """
    problems = []
    messages, removed = tip.messages, tip.removed
    for message in messages.values():
        path = placed(message_path(message.id), snap.layout)
        local = "@" not in message.sender  # a copy from another project: its thread and reply live there
        if local and message.reply_to and message.reply_to not in messages and message.reply_to not in removed:
            problems.append(Problem(path, f"reply_to {message.reply_to} is not in the archive"))
        if (local and is_id(message.thread_id) and message.thread_id not in messages
                and message.thread_id != message.id and message.thread_id not in removed):
            problems.append(Problem(path, f"thread_id {message.thread_id} names a message that is not in the archive"))
        for item in message.attachments:
            stored = item.get("path")
            if not isinstance(stored, str) or stored not in tip.attachments:
                problems.append(Problem(path, f"attachment {stored!r} is not in the archive"))
                continue
            digest = hashlib.sha256(snap.read(stored) or b"").hexdigest()
            if item.get("sha256") != digest:
                problems.append(Problem(stored, f"sha256 is {digest}, but {path} records {item.get('sha256')}"))
    return problems


def _escalation_problems(snap: Snapshot, tip: _Tip) -> list[Problem]:
    """Each escalation is about a message of the archive that its agent received."""
    problems = []
    received = {(path.split("/")[1], copy.id) for path, role, copy in tip.copies if role == "inbox"}
    for path, escalation in tip.escalations:
        if escalation.message_id not in tip.messages and escalation.message_id not in tip.removed:
            problems.append(Problem(path, f"escalates message {escalation.message_id}, which is not in the archive"))
        elif (escalation.message_id in tip.messages and (escalation.agent, escalation.message_id) not in received
              and snap.exists(profile_path(escalation.agent))):  # a deleted recipient took its copies along
            problems.append(Problem(path, f"{escalation.agent} did not receive {escalation.message_id}"))
    return problems


def _org_problems(snap: Snapshot, agents: list[Agent]) -> list[Problem]:
    """The project's defaults and memory folders name a writer holding manager@* (one deleted since is history)."""
    writers: list[tuple[str, str, str]] = []  # (path, verb, agent)
    for path in [ORG_CONTEXT_PATH, *snap.walk(MEMORY)]:
        try:
            kind = classify(path)
            record = snap.load(path, kind[1]) if kind is not None and kind[1] in (OrgContext, MemoryDoc) else None
        except GitmailError:
            continue  # reported as the file it is
        if isinstance(record, OrgContext):
            writers.append((path, "set", record.set_by))
        elif isinstance(record, MemoryDoc):
            writers.append((path, "written", record.written_by))
    by_name = {agent.name: agent for agent in agents}
    return [Problem(path, f"{verb} by {name}, who does not hold manager@*") for path, verb, name in writers
            if name in by_name and not by_name[name].manages_project()]


def _post_problems(snap: Snapshot, posts: list[tuple[str, ChannelPost]], agents: set[str]) -> list[Problem]:
    """Every post sits in a channel the archive defines and names an agent of the project as its author."""
    problems = []
    for path, post in posts:
        if not snap.exists(channel_path(post.channel)):
            problems.append(Problem(path, f"a post to channel {post.channel}, which the archive does not define"))
        if post.sender not in agents:
            problems.append(Problem(path, f"a post by {post.sender}, who is no agent of this project"))
    return problems


def _hierarchy_problems(profiles: list[Agent]) -> list[Problem]:
    """Names that differ only in case; parents that are missing or another registration, loops, outliving children."""
    problems = []
    agents: dict[str, Agent] = {}  # by lower-cased name
    for agent in profiles:
        if agent.name.lower() in agents:
            problems.append(Problem(profile_path(agent.name), f"agent {agent.name} differs only in case from the "
                                    f"agent {agents[agent.name.lower()].name}; names are unique without regard to "
                                    "case"))
        else:
            agents[agent.name.lower()] = agent
    for agent in agents.values():
        if agent.parent is None:
            continue
        path = profile_path(agent.name)
        parent = agents.get(agent.parent.lower())
        if parent is None:
            problems.append(Problem(path, f"parent {agent.parent} is not an agent of this project"))
            continue
        if not agent.spawned_by(parent):
            problems.append(Problem(path, f"parent {agent.parent} is now another registration (id {parent.id}) than "
                                    f"the one that spawned it ({agent.parent_id or 'registered before it'}); that "
                                    "agent is not above it"))
            continue
        if parent.expires_at is not None and (agent.expires_at is None
                                              or parse_ts(agent.expires_at) > parse_ts(parent.expires_at)):
            problems.append(Problem(path, f"expires after its parent {parent.name} ({parent.expires_at})"))
        seen: set[str] = {agent.name.lower()}
        current: Agent | None = parent
        while current is not None and current.parent is not None:
            if current.name.lower() in seen:
                problems.append(Problem(path, "its chain of parents loops"))
                break
            seen.add(current.name.lower())
            above = agents.get(current.parent.lower())
            current = above if above is not None and current.spawned_by(above) else None
    return problems


def _copy_problems(snap: Snapshot, messages: dict[str, Message], copies: list[tuple[str, str, Message]],
                   unfetched: set[str]) -> list[Problem]:
    """Each inbox and outbox copy: the canonical message, in a folder of one of its parties.

    A copy whose message lies outside the window this machine fetched
    (``unfetched``) is left unread.
    """
    problems = []
    for path, role, copy in copies:
        owner = path.split("/")[1]
        canonical_path = placed(message_path(copy.id), snap.layout)
        canonical = messages.get(copy.id)
        if canonical is None and copy.id in unfetched:
            continue
        if canonical is None:
            problems.append(Problem(path, f"copy of a message that is not in the archive ({canonical_path})"))
            continue
        same_blob = snap.blob_id(path) == snap.blob_id(canonical_path)
        if role == "inbox":
            if not same_blob:
                problems.append(Problem(path, f"differs from the canonical message {canonical_path}"))
            if owner not in canonical.to + canonical.cc and owner not in _bcc_of(copies, copy.id):
                problems.append(Problem(path, f"{owner} is not a recipient of this message"))
        else:
            if not same_blob and copy.public_copy().to_bytes() != snap.read(canonical_path):
                problems.append(Problem(path, f"differs from the canonical message {canonical_path}"))
            if owner != canonical.sender:
                problems.append(Problem(path, f"outbox copy in {owner}'s folder but the sender is {canonical.sender}"))
    return problems


def _file_problems(snap: Snapshot, files: list[tuple[str, FileRecord]]) -> list[Problem]:
    """Each file record's bytes: present, of the size it states, hashing to its SHA-256."""
    problems = []
    for path, record in files:
        data = snap.read_regular(record.blob)
        if data is None:
            problems.append(Problem(path, f"the file's bytes {record.blob} are not in the archive"))
        elif len(data) != record.size or hashlib.sha256(data).hexdigest() != record.sha256:
            problems.append(Problem(path, f"{record.blob} holds {len(data)} bytes hashing to "
                                    f"{hashlib.sha256(data).hexdigest()}, not the {record.size} bytes of the record"))
    return problems


def _bcc_of(copies: list[tuple[str, str, Message]], message_id: str) -> list[str]:
    for _, role, copy in copies:
        if role == "outbox" and copy.id == message_id:
            return copy.bcc
    return []


def _git_fsck(git_dir: str) -> list[Problem]:
    proc = subprocess.run(["git", "--git-dir", git_dir, "fsck", "--strict", "--no-progress"],
                          capture_output=True, text=True)
    lines = [line for line in (proc.stdout + proc.stderr).splitlines()
             if line.strip() and not line.startswith(("dangling ", "Checking "))]
    if proc.returncode == 0:
        return []
    return [Problem("(git fsck)", line) for line in lines] or [Problem("(git fsck)", f"exited with {proc.returncode}")]


def _unfetched(archive: Archive, snap: Snapshot, path: str, mode: int) -> bool:
    """Whether ``path`` is a file of a window join this machine has not fetched (it is checked where it was made)."""
    if mode == pygit2.enums.FileMode.COMMIT:
        return False
    blob = snap.blob_id(path)
    return blob is not None and not present(archive.repo, str(blob))
