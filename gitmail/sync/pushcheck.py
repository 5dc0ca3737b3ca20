"""What a hub accepts: the checks behind the hub's ``pre-receive`` hook.

A hub is a bare repository that several machines push one archive into. A
bad push there spreads to everyone on their next sync, so the hub refuses
pushes that would damage the archive, naming each file and the reason:

- a file that is not a record gitmail knows, or does not parse as one;
- a changed immutable record (messages and their copies, journal entries,
  tombstones, attachments, ...);
- a deleted file, unless a tombstone in the pushed tree purges it (a message,
  its copies and receipts), it belongs to an agent deleted in the same push
  (its profile, folder, contacts and reservations), or it is a delivered
  held message or an expired idempotency key;
- deleting ``main`` itself.

``refs/heads/main`` and the machines' own refs (``refs/gitmail/nodes/*``)
are checked: the tree the push would leave is compared with the tree the
ref has now (for a new machine ref, with ``main``'s).
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass

import pygit2

from gitmail.model.errors import GitmailError
from gitmail.model.records import AGENTS, ATTACHMENT_RE, ATTACHMENTS, Reservation, classify, tombstone_path
from gitmail.storage.snapshot import blob_data

from .merge import IMMUTABLE_ROLES, role_of, tree_changes

MAIN = "refs/heads/main"
NODE_PREFIX = "refs/gitmail/nodes/"  # each machine's own ref (see gitmail.sync.remotes)
ZERO = "0" * 40
PLAIN_FILES = frozenset({".gitattributes", ".gitignore", "README.md"})
_ID_STEM = re.compile(r"/([0-9a-z]{23})\.(?:md|yaml)$")
_PURGEABLE = frozenset({"message", "inbox", "outbox", "receipt"})
_AGENT_PROFILE = re.compile(r"^agents/[^/]+/profile\.yaml$")


@dataclass(frozen=True)
class Rejection:
    path: str
    reason: str

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


def open_receiving(git_dir: str) -> pygit2.Repository:
    """The repository as a pre-receive hook must see it: with the pushed objects still in quarantine."""
    repo = pygit2.Repository(git_dir)
    for variable in ("GIT_QUARANTINE_PATH", "GIT_OBJECT_DIRECTORY"):
        extra = os.environ.get(variable)
        if extra and os.path.isdir(extra):
            repo.odb.add_disk_alternate(os.path.abspath(extra))
    return repo


def check_update(repo: pygit2.Repository, old: str, new: str, ref: str) -> list[Rejection]:
    """Problems with moving ``ref`` from ``old`` to ``new`` (empty when acceptable)."""
    if ref != MAIN and not ref.startswith(NODE_PREFIX):
        return []
    if new == ZERO:
        if ref != MAIN:
            return []  # a machine's own ref may be dropped
        return [Rejection(ref, "deleting main would delete the whole archive for everyone; it is refused")]
    old_tree: pygit2.Tree | None
    if old != ZERO:
        old_tree = repo[old].peel(pygit2.Tree)
    else:  # a new ref: what it adds over main is what needs checking
        old_tree = repo[repo.references[MAIN].target].peel(pygit2.Tree) if MAIN in repo.references else None
    new_tree = repo[new].peel(pygit2.Tree)
    problems: list[Rejection] = []
    changes = tree_changes(repo, old_tree, new_tree)
    removed_agents = {path.split("/")[1] for path, blob in changes.items()
                      if blob is None and _AGENT_PROFILE.match(path)}
    for path, blob in sorted(changes.items()):
        role = role_of(path)
        if blob is None:
            assert old_tree is not None  # a deleted file was in the old tree
            if not _deletion_allowed(repo, old_tree, new_tree, path, role, removed_agents):
                problems.append(Rejection(path, "deleted without a purge tombstone; records are only removed by a "
                                          "purge (which leaves a tombstone under tombstones/) or with their agent"))
            continue
        if old_tree is not None and role in IMMUTABLE_ROLES and _exists(old_tree, path):
            problems.append(Rejection(path, f"a {role} record is immutable and was changed; "
                                      "write a new record instead of editing this one"))
            continue
        reason = _malformed(path, blob_data(repo, blob))
        if reason:
            problems.append(Rejection(path, reason))
    return problems


def _malformed(path: str, data: bytes) -> str | None:
    if path in PLAIN_FILES:
        return None
    if path.startswith(ATTACHMENTS + "/"):
        match = ATTACHMENT_RE.match(path)
        if not match:
            return "not a valid attachment name (attachments/<xx>/<sha256>.<ext>)"
        digest = hashlib.sha256(data).hexdigest()
        if digest != match.group(3) or not digest.startswith(match.group(2)):
            return f"content hash is {digest}, not the one in the file name"
        return None
    kind = classify(path)
    if kind is None or kind[1] is None:
        return "not a path where gitmail keeps records"
    try:
        kind[1].from_bytes(data, path)
    except GitmailError as exc:
        return exc.message.removeprefix(path + ": ")
    return None


def _deletion_allowed(repo: pygit2.Repository, old_tree: pygit2.Tree, new_tree: pygit2.Tree, path: str,
                      role: str | None, removed_agents: set[str]) -> bool:
    """Deletions a hub accepts: purges, delivered held messages, expired keys, a hard-deleted agent's files."""
    if role in ("held", "idempotency"):
        return True  # a held message leaves when delivered; idempotency keys expire
    if role in _PURGEABLE:
        match = _ID_STEM.search(path)
        if match and _exists(new_tree, tombstone_path(match.group(1))):
            return True
    if not removed_agents:
        return False
    parts = path.split("/")
    if parts[0] == AGENTS and parts[1] in removed_agents:
        return True  # the whole agent was deleted (its profile went in the same push)
    if role == "contact" and (parts[1] in removed_agents or parts[2].removesuffix(".yaml") in removed_agents):
        return True
    if role == "reservation":
        try:
            return Reservation.from_bytes(blob_data(repo, old_tree[path].id), path).agent in removed_agents
        except (GitmailError, KeyError):
            return False
    return False


def _exists(tree: pygit2.Tree, path: str) -> bool:
    try:
        tree[path]
    except KeyError:
        return False
    return True


def check_push(git_dir: str, lines: list[str]) -> list[Rejection]:
    """Check the ``<old> <new> <ref>`` lines a pre-receive hook reads."""
    repo = open_receiving(git_dir)
    problems: list[Rejection] = []
    for line in lines:
        parts = line.split()
        if len(parts) == 3:
            problems += check_update(repo, *parts)
    return problems
