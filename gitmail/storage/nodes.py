"""The nodes of a project: which keys may sign its commits, and the operator's hand on them.

Each machine publishes its own key as ``nodes/<node>.yaml`` (the engine adds
it to the first commit the machine makes in an archive, signed by that key);
this module reads those records and makes the operator's changes behind
``gitmail nodes``:

- ``export``: git's allowed-signers file for every key not revoked, so plain
  ``git verify-commit`` and ``git log --show-signature`` check gitmail's
  commits (principal ``gitmail@<node>``, the committer every node writes);
- ``pin``: remember a node's key on this machine (``keys/pins.yaml``), so a
  different key under that name later is reported rather than trusted on
  first use;
- ``add``: register a key that no machine of ours holds (a person's own git
  signing key, ``--human``), as a new record;
- ``sign_checkout``: have plain ``git commit`` in the human checkout sign
  with such a registered key (``gitmail checkout PROJECT --sign-with KEY``);
- ``rotate``: this machine moves to a new key; every project's record names
  the old key and carries the old key's signature of the move, in a commit
  the old key signs, before the new key is put in place;
- ``revoke``: any node marks a key as no longer trusted
  (``revocations/<key id>.yaml``, final);
- ``handover``: the node an agent is bound to moves it to another node (its
  profile names the new one, in a commit the old one signs), so the agent's
  records are written from there on (see :mod:`gitmail.storage.authorship`).
"""

from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass

import pygit2
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from gitmail.model import codec, sshsig
from gitmail.model.clock import HLC
from gitmail.model.errors import INVALID_ARGUMENT, NOT_FOUND, GitmailError
from gitmail.model.records import (
    AGENTS,
    NODES,
    REVOCATIONS,
    ROTATION_NAMESPACE,
    Agent,
    Node,
    Revocation,
    node_path,
    profile_path,
    revocation_path,
    rotation_statement,
)
from gitmail.model.results import Result, result

from .boundary import pinned_boundaries
from .engine import Archive, Change
from .nodekey import KEYS
from .signers import SIGNERS_FILE, signers_at, write_signers
from .snapshot import Snapshot, records_in
from .store import Store

PINS = "pins.yaml"
NODE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


@result
class NodeView(Result):
    """One key allowed to sign: its node, its kind, whether it is revoked here or pinned on this machine."""

    node: str
    kind: str
    key: str
    fingerprint: str
    created_at: str
    previous_key: str | None = None
    rotated_at: str | None = None
    added_by: str | None = None
    revoked: bool = False
    pinned: str | None = None  # "same" or "different" when this machine pinned a key for the node, else None
    this_machine: bool = False


@dataclass(frozen=True)
class Keyring:
    """Every key an archive names at one commit: by raw key, the node it belongs to; and those revoked."""

    keys: dict[bytes, str]
    revoked: dict[bytes, str]  # raw key -> when it was revoked
    humans: frozenset[str] = frozenset()  # the nodes that are a person's own key (``nodes add --human``)

    def lost(self, node: str) -> bool:
        """Whether every key ``node`` ever had here is revoked (the machine is gone): any node may take its agents."""
        held = [raw for raw, name in self.keys.items() if name == node]
        return bool(held) and all(raw in self.revoked for raw in held)

    def state(self, raw: bytes) -> str:
        """``known``, ``revoked`` or ``unknown``."""
        if raw in self.revoked:
            return "revoked"
        return "known" if raw in self.keys else "unknown"


def read_nodes(snap: Snapshot) -> list[Node]:
    """Every node record at the snapshot, by name."""
    return records_in(snap, NODES, Node)


def read_revocations(snap: Snapshot) -> list[Revocation]:
    """Every revocation record at the snapshot."""
    return records_in(snap, REVOCATIONS, Revocation)


def keyring(snap: Snapshot) -> Keyring:
    """The keys the archive names at ``snap`` (current and previous of every node) and the revoked ones."""
    keys: dict[bytes, str] = {}
    nodes = read_nodes(snap)
    for node in nodes:
        for line in (node.previous_key, node.key):
            if line:
                keys[_raw(line)] = node.node
    revoked = {_raw(item.key): item.revoked_at for item in read_revocations(snap)}
    return Keyring(keys, revoked, frozenset(node.node for node in nodes if node.kind == "human"))


def _raw(line: str) -> bytes:
    try:
        return sshsig.parse_public_line(line)
    except sshsig.SignatureError as exc:
        raise GitmailError(INVALID_ARGUMENT, f"not a usable public key: {exc}", {"key": line[:80]}) from None


def list_nodes(archive: Archive, home: str, this_node: str) -> list[NodeView]:
    """The archive's nodes at its tip, each with what this machine knows of it."""
    snap = archive.snapshot()
    revoked = {_raw(item.key) for item in read_revocations(snap)}
    pins = read_pins(home)
    views = []
    for node in read_nodes(snap):
        raw = _raw(node.key)
        pin = pins.get(node.node)
        views.append(NodeView(node=node.node, kind=node.kind, key=node.key, fingerprint=sshsig.fingerprint(raw),
                              created_at=node.created_at, previous_key=node.previous_key,
                              rotated_at=node.rotated_at, added_by=node.added_by, revoked=raw in revoked,
                              pinned=None if pin is None else ("same" if pin == node.key else "different"),
                              this_machine=node.node == this_node))
    return views


def show_node(archive: Archive, home: str, this_node: str, name: str) -> NodeView:
    for view in list_nodes(archive, home, this_node):
        if view.node == name:
            return view
    raise GitmailError(NOT_FOUND, f"no node {name!r} in this project; `gitmail nodes list PROJECT` shows its nodes",
                       {"node": name})


def allowed_signers(archive: Archive) -> str:
    """git's allowed-signers file for the archive's keys that are not revoked (``gpg.ssh.allowedSignersFile``)."""
    return signers_at(archive.snapshot())




def sign_checkout(archive: Archive, checkout_dir: str, key_file: str, *, project: str) -> Node:
    """Set the checkout's git to sign every commit with a person's registered key; the person's node record.

    ``key_file`` is the person's SSH key as ``user.signingkey`` names it: the
    private key (its public half read from ``<key_file>.pub``), or a public
    key whose private half an ``ssh-agent`` holds. The key must be a
    person's key of the project (``gitmail nodes add … --human``), not
    revoked; the checkout then gets ``gpg.format=ssh``, ``user.signingkey``,
    ``commit.gpgsign=true`` and ``gpg.ssh.allowedSignersFile`` (the export,
    written into its ``.git``, and kept current by every refresh of the
    checkout: :func:`.signers.refresh_signers`), so a hand edit the record checker
    allows is accepted at the archive and at every hub.
    """
    key_file = os.path.abspath(os.path.expanduser(key_file))
    public = _public_line(key_file)
    if not os.path.isdir(os.path.join(checkout_dir, ".git")):
        raise GitmailError(NOT_FOUND, f"{project} has no checkout to configure at {checkout_dir} (an archive "
                           "joined from a window has none until `gitmail deepen` fetched every file)",
                           {"checkout": checkout_dir})
    snap = archive.snapshot()
    raw = _raw(public)
    person = next((node for node in read_nodes(snap) if node.kind == "human" and _raw(node.key) == raw), None)
    if person is None:
        raise GitmailError(NOT_FOUND, f"the key in {key_file} is no person's key of {project}: the operator "
                           f"registers it once with `gitmail nodes add {project} NAME --key '{public}' --human`, "
                           "then run this again", {"key": public})
    if any(_raw(item.key) == raw for item in read_revocations(snap)):
        raise GitmailError(INVALID_ARGUMENT, f"the key of {person.node} was revoked in {project}; make a new key "
                           "and have the operator register it under another name (gitmail nodes add … --human)",
                           {"node": person.node})
    signers = os.path.join(checkout_dir, ".git", SIGNERS_FILE)
    write_signers(signers, allowed_signers(archive))
    config = pygit2.Repository(checkout_dir).config
    for name, value in (("gpg.format", "ssh"), ("user.signingkey", key_file), ("commit.gpgsign", "true"),
                        ("gpg.ssh.allowedSignersFile", signers)):
        config[name] = value
    return person


def _public_line(key_file: str) -> str:
    """The public key line of an SSH key file (a public key, or a private key with its ``.pub`` beside it)."""
    for candidate in (key_file, key_file + ".pub"):
        try:
            with open(candidate, encoding="utf-8") as handle:
                text = handle.read(16384).strip()
        except (OSError, UnicodeDecodeError):
            continue
        if text.startswith("ssh-"):
            line = " ".join(text.split()[:2])
            _raw(line)
            return line
    raise GitmailError(INVALID_ARGUMENT, f"found no SSH public key for {key_file}: give the private key with its "
                       "'.pub' beside it (as ssh-keygen writes them), or the public key file", {"key_file": key_file})


def read_pins(home: str) -> dict[str, str]:
    """The keys this machine pinned, by node name."""
    try:
        with open(os.path.join(home, KEYS, PINS), "rb") as handle:
            data = codec.load_yaml(handle.read())
    except FileNotFoundError:
        return {}
    return {str(name): str(key) for name, key in data.items()}


def pin(archive: Archive, home: str, name: str) -> NodeView:
    """Remember the node's current key on this machine: another key under its name is reported from now on."""
    pin_key(home, name, show_node(archive, home, "", name).key)
    return show_node(archive, home, "", name)


def pin_key(home: str, name: str, key: str) -> str:
    """Remember ``key`` for node ``name`` on this machine, before any archive here names it (a hub's machine).

    Every door on this machine then refuses another key under that name,
    a node trusted on first use included. Answers the key's fingerprint.
    """
    if not NODE_NAME.match(name):
        raise GitmailError(INVALID_ARGUMENT, f"{name!r} is not a node name (letters, digits, '.', '_' and '-')",
                           {"node": name})
    raw = _raw(key)
    pins = read_pins(home)
    pins[name] = " ".join(key.split()[:2])
    path = os.path.join(home, KEYS, PINS)
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "wb") as handle:
        handle.write(codec.dump_yaml(dict(sorted(pins.items()))))
    os.replace(tmp, path)
    return sshsig.fingerprint(raw)


def add(archive: Archive, *, name: str, key: str, human: bool, by: str, now: str) -> Node:
    """Register a key no machine of ours publishes (a person's git signing key with ``human``) as a new record."""
    if not NODE_NAME.match(name):
        raise GitmailError(INVALID_ARGUMENT, f"{name!r} is not a node name: letters, digits, '.', '_' and '-', "
                           "starting with a letter or digit, at most 128", {"node": name})
    _raw(key)
    record = Node(node=name, key=" ".join(key.split()[:2]), kind="human" if human else "node", created_at=now,
                  added_by=by)

    def fn(snap: Snapshot) -> Change:
        if snap.exists(node_path(name)):
            raise GitmailError(INVALID_ARGUMENT, f"node {name!r} is registered already; a node changes its key "
                               "only itself (gitmail nodes rotate on that machine)", {"node": name})
        return Change(f"Register the key of {name} ({record.kind})", author="gitmail").put_record(record)

    archive.transact(fn)
    return record


def rotation(node: str, old: Ed25519PrivateKey, new: Ed25519PrivateKey, created_at: str, now: str) -> Node:
    """The record of ``node`` moved from key ``old`` to key ``new``, signed by ``old``."""
    key = sshsig.public_line(sshsig.raw_public(new))
    statement = rotation_statement(node, key, now)
    return Node(node=node, key=key, kind="node", created_at=created_at,
                previous_key=sshsig.public_line(sshsig.raw_public(old)), rotated_at=now,
                rotation_sig=sshsig.sign(old, statement, namespace=ROTATION_NAMESPACE))


def rotate_in(archive: Archive, node: str, old: Ed25519PrivateKey, new: Ed25519PrivateKey, now: str) -> Node:
    """Write the rotated record of ``node`` into one archive (the commit is signed by the key still in place)."""

    def fn(snap: Snapshot) -> Change:
        current = snap.load(node_path(node), Node)
        created = current.created_at if current is not None else now
        if current is not None and current.key != sshsig.public_line(sshsig.raw_public(old)):
            raise GitmailError(INVALID_ARGUMENT, f"node {node}'s record names another key than this machine "
                               "holds; it can be rotated only by the holder of the key it names", {"node": node})
        return Change(f"Rotate the key of node {node}", author="gitmail").put_record(
            rotation(node, old, new, created, now))

    archive.transact(fn)
    loaded = archive.snapshot().load(node_path(node), Node)
    assert loaded is not None
    return loaded


def revoke(archive: Archive, *, name: str, reason: str, by: str, now: str) -> Revocation:
    """Revoke the current key of node ``name``: commits it signs are reported by ``gitmail verify``."""
    snap = archive.snapshot()
    node = snap.load(node_path(name), Node)
    if node is None:
        raise GitmailError(NOT_FOUND, f"no node {name!r} in this project; `gitmail nodes list PROJECT` shows its "
                           "nodes", {"node": name})
    raw = _raw(node.key)
    record = Revocation(key_id=sshsig.key_id(raw), key=" ".join(node.key.split()[:2]), node=name, revoked_at=now,
                        revoked_by=by, reason=reason)

    def fn(snap: Snapshot) -> Change:
        if snap.exists(revocation_path(record.key_id)):
            return Change("")  # revoked already: a revocation is final, and one file per key
        return Change(f"Revoke the key of node {name}", author="gitmail").put_record(record)

    archive.transact(fn)
    return record


@result
class Rotated(Result):
    """A rotation of this machine's key: the new key, and the projects whose record now names it."""

    node: str
    key: str
    previous_key: str
    projects: list[str]


def rotate_store(store: Store) -> Rotated:
    """Move this machine to a new key: every project's record first (signed by the old key), then the key itself.

    Should a project refuse the rotation, the error is raised before the new
    key is put in place; the projects rotated before it then name a key this
    machine does not sign with yet (``gitmail verify`` reports its commits
    there as signed by an unknown key), so mend that project and rotate again.
    """
    old, new = store.key.private, Ed25519PrivateKey.generate()
    now = store.clock.now_ts()
    done = []
    for slug in store.slugs():
        rotate_in(store.archive(slug), store.node, old, new, now)
        done.append(slug)
    store.key.install(new)
    return Rotated(node=store.node, key=store.key.public_line, previous_key=sshsig.public_line(sshsig.raw_public(old)),
                   projects=done)


def handover(archive: Archive, *, agent: str, to: str, hlc: HLC) -> Agent:
    """Bind ``agent`` to node ``to``: run on the node it is bound to, whose signature is what moves it.

    When that node is lost (every key it had is revoked: `gitmail nodes
    revoke`), any node of the project may move its agents instead.
    """
    if not NODE_NAME.match(to):
        raise GitmailError(INVALID_ARGUMENT, f"{to!r} is not a node name (letters, digits, '.', '_' and '-'); "
                           "`gitmail nodes list PROJECT` shows the project's nodes", {"node": to})

    def fn(snap: Snapshot) -> Change:
        wanted = agent.lower()
        names = [name for name in snap.listdir(AGENTS) if name.lower() == wanted]
        profile = snap.load(profile_path(names[0]), Agent) if names else None
        if profile is None:
            raise GitmailError(NOT_FOUND, f"no agent named {agent!r} in this project; `gitmail agents list "
                               "PROJECT` shows them", {"agent": agent})
        if profile.node not in (None, archive.node) and not keyring(snap).lost(profile.node):
            raise GitmailError(INVALID_ARGUMENT, f"agent {profile.name} is bound to node {profile.node}, not to this "
                               f"machine ({archive.node}): run the handover there, whose key must sign it; if that "
                               f"machine is lost, revoke its key first (`gitmail nodes revoke PROJECT "
                               f"{profile.node}`), after which any node may hand its agents over",
                               {"agent": profile.name, "node": profile.node})
        if profile.node == to:
            return Change("", result=profile)
        moved = dataclasses.replace(profile, node=to, hlc=hlc)
        return Change(f"Hand agent {profile.name} over to node {to}", author="gitmail", result=moved).put_record(moved)

    committed: Agent = archive.transact(fn).result
    return committed


def trusted_keyring(archive: Archive) -> Keyring:
    """The keys the archive names at its tip, and at each pinned boundary (the hub's history, trusted as it is).

    A machine that just joined has no tip of its own yet: the nodes whose
    commits it judges are named at the boundary it fetched.
    """
    rings = [keyring(archive.snapshot())] + [keyring(archive.snapshot(commit))
                                             for commit in sorted(pinned_boundaries(archive.git_dir))]
    keys = {raw: node for ring in rings for raw, node in ring.keys.items()}
    revoked = {raw: when for ring in rings for raw, when in ring.revoked.items()}
    return Keyring(keys, revoked, frozenset(node for ring in rings for node in ring.humans))
