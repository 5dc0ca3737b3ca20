"""Machines for the sync tests: each is a store in its own folder writing records offline.

Records are written straight through ``Archive.transact`` with the record
types, the way the mail domain writes them, so the tests exercise exactly the
files that travel between machines.
"""

from __future__ import annotations

import os
from collections import Counter

from gitmail import Store
from gitmail.mail.facade import Mail
from gitmail.model.records import (
    LAYOUT,
    Agent,
    Message,
    Project,
    Receipt,
    Reservation,
    inbox_path,
    outbox_path,
    receipt_path,
    reservation_path,
)
from gitmail.storage.engine import Change
from gitmail.storage.store import slug_for

PROJECT = "/data/projects/shared"
AGENTS = ("BlueLake", "GreenCastle", "RedStone")


class Machine:
    """One store (one machine) holding a copy of the shared project."""

    def __init__(self, root: str, name: str):
        self.name = name
        os.makedirs(os.path.join(root, name), exist_ok=True)
        with open(os.path.join(root, name, "node"), "w", encoding="utf-8") as handle:
            handle.write(name + "\n")
        self.store = Store(os.path.join(root, name), background=False, durable=False)
        self.sent: list[str] = []

    @property
    def archive(self):
        return self.store.archive(PROJECT, create=True)

    def write(self, message: str, author: str | None, records) -> str | None:
        def fn(snapshot):
            change = Change(message, author=author)
            for record in records(snapshot):
                if isinstance(record, tuple):
                    change.put(*record)
                else:
                    change.put_record(record)
            return change

        return self.archive.transact(fn).commit

    def create_project(self, layout: int = LAYOUT) -> None:
        stamp = self.store.clock.now_ts()
        hlc = self.store.clock.tick()
        self.write("project created", None, lambda snap: [
            Project(id=self.store.clock.new_id(), slug=slug_for(PROJECT), human_key=PROJECT, created_at=stamp, hlc=hlc,
                    layout=layout),
            *[Agent(id=self.store.clock.new_id(), name=name, program="test", model="m", inception_ts=stamp, hlc=hlc)
              for name in AGENTS],
        ])

    def register(self, name: str) -> None:
        """Register agent ``name`` here, bound to this machine's node (only its key may write in its name)."""
        stamp = self.store.clock.now_ts()
        self.write(f"Register agent {name}", name, lambda snap: [
            Agent(id=self.store.clock.new_id(), name=name, program="test", model="m", inception_ts=stamp,
                  hlc=self.store.clock.tick(), contact_policy="open", node=self.name)])

    def send(self, sender: str, to: list[str], subject: str) -> str:
        message = Message(id=self.store.clock.new_id(), thread_id="t-" + subject[:8].replace(" ", "-"), sender=sender,
                          subject=subject, created_ts=self.store.clock.now_ts(), to=to,
                          body=f"{subject} from {self.name}\n")

        def records(snap):
            canonical = message.public_copy()
            out = [canonical, (outbox_path(sender, message.id), message.to_bytes())]
            out += [(inbox_path(name, message.id), canonical.to_bytes()) for name in to]
            return out

        self.write(f"{sender} sent {message.id}", sender, records)
        self.sent.append(message.id)
        return message.id

    def ack(self, agent: str, message_id: str, when: str | None = None) -> Receipt:
        """Acknowledge (and read, if not yet read) a message; returns the receipt written."""
        stamp = when or self.store.clock.now_ts()
        hlc = self.store.clock.tick()
        written: list[Receipt] = []

        def records(snap):
            old = snap.load(receipt_path(agent, message_id), Receipt)
            read_at = old.read_at if old and old.read_at else stamp
            acked_at = old.acked_at if old and old.acked_at else stamp  # the first acknowledgement stands
            written[:] = [Receipt(message_id=message_id, agent=agent, hlc=hlc, read_at=read_at, acked_at=acked_at)]
            return written

        self.write(f"{agent} acknowledged {message_id}", agent, records)
        return written[0]

    def edit_profile(self, name: str, **fields) -> None:
        hlc = self.store.clock.tick()

        def records(snap):
            profile = snap.load(f"agents/{name}/profile.yaml", Agent)
            for key, value in fields.items():
                setattr(profile, key, value)
            profile.hlc = hlc
            return [profile]

        self.write(f"{name} updated its profile", name, records)

    def reserve(self, agent: str, pattern: str) -> str:
        reservation = Reservation(id=self.store.clock.new_id(), agent=agent, path_pattern=pattern,
                                  created_ts=self.store.clock.now_ts(),
                                  expires_ts="2099-01-01T00:00:00.000Z", hlc=self.store.clock.tick())
        self.write(f"{agent} reserved {pattern}", agent, lambda snap: [reservation])
        return reservation.id

    def release(self, agent: str, reservation_id: str) -> None:
        hlc = self.store.clock.tick()
        stamp = self.store.clock.now_ts()

        def records(snap):
            record = snap.load(reservation_path(reservation_id), Reservation)
            record.released_ts, record.hlc = stamp, hlc
            return [record]

        self.write(f"{agent} released {reservation_id}", agent, records)


def tree_files(store: Store) -> dict[str, bytes]:
    """Every file at the tip of the shared project, with its bytes."""
    snap = store.archive(PROJECT).snapshot()
    return {path: snap.read(path) for path in snap.walk()}


def tree_id(store: Store) -> str:
    archive = store.archive(PROJECT)
    return str(archive.repo[archive.tip()].peel(2).id) if archive.tip() else ""


def message_counts(files: dict[str, bytes]) -> Counter:
    """How many canonical files each message id has (must be exactly one)."""
    return Counter(path.rsplit("/", 1)[1][:-3] for path in files if path.startswith("messages/"))



def person_key(archive, folder: str, person: str = "person") -> str:
    """A person's signing key, registered in ``archive`` (``gitmail nodes add --human``); the private key's path."""
    from gitmail.storage import nodes
    from gitmail.storage.nodekey import NodeKey

    key = NodeKey(folder, person)
    nodes.add(archive, name=person, key=key.public_line, human=True, by=archive.node, now="2026-12-01T00:00:00.000Z")
    return key.path


def signed_clone(source: str, clone: str, key: str) -> None:
    """A checkout of ``source`` whose commits git signs with the person's ``key`` (through ``ssh-keygen``)."""
    from .conftest import git

    git("clone", "-q", source, clone)
    for name, value in (("gpg.format", "ssh"), ("user.signingkey", key), ("commit.gpgsign", "true")):
        git("config", name, value, cwd=clone)


def write_unsigned(machine: Machine, write) -> None:
    """Run ``write`` on ``machine`` as gitmail did before signing: unsigned commits, no node record published."""
    archive = machine.archive
    saved = archive.signer, archive.publish
    archive.signer, archive.publish = None, None
    try:
        write()
    finally:
        archive.signer, archive.publish = saved


def bare_hub(path: str, *, checked: bool) -> str:
    """A bare hub at ``path`` on main, with gitmail's pre-receive check when ``checked``; its URL."""
    from gitmail.sync.hookinstall import install_hub

    from .conftest import git_run

    assert git_run("init", "-q", "--bare", "--initial-branch=main", path).returncode == 0
    if checked:
        install_hub(path)
    return "file://" + path


def hub_pair(root: str) -> tuple[str, Machine, Machine]:
    """A checked hub (gitmail's pre-receive installed) at ``root/hub.git`` and two machines sharing the project.

    ``node-a`` creates the project; both add the hub as ``hub`` and sync once.
    """
    from gitmail.sync.hookinstall import install_hub
    from gitmail.sync.remotes import add_remote
    from gitmail.sync.syncer import sync_project

    from .conftest import git_run

    hub = os.path.join(root, "hub.git")
    assert git_run("init", "-q", "--bare", "--initial-branch=main", hub).returncode == 0
    install_hub(hub)
    a, b = Machine(os.path.join(root, "m"), "node-a"), Machine(os.path.join(root, "m"), "node-b")
    a.create_project()
    for machine in (a, b):
        add_remote(machine.store, PROJECT, "hub", "file://" + hub)
        sync_project(machine.store, PROJECT)
    return hub, a, b


def mail_machine(root, name: str) -> Mail:
    """A machine's mail domain: a store in ``root/name`` whose node is ``name``."""
    home = os.path.join(str(root), name)
    os.makedirs(home)
    with open(os.path.join(home, "node"), "w", encoding="utf-8") as handle:
        handle.write(name + "\n")
    return Mail(Store(home, background=False, durable=False))

