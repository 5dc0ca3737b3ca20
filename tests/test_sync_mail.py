"""Sync end to end through the mail domain: two machines, a hub with its checks, real git."""

from __future__ import annotations

import os

from gitmail.mail.projects import CONFIRMATION_PHRASE
from gitmail.model.records import inbox_path, message_path, receipt_path, tombstone_path
from gitmail.storage import nodes
from gitmail.storage.fsck import check_archive
from gitmail.sync.hookinstall import install_hub
from gitmail.sync.remotes import add_remote
from gitmail.sync.syncer import sync_project

from .conftest import git_run
from .sync_helpers import mail_machine

PROJECT = "/data/projects/mailsync"


def test_two_machines_through_a_checked_hub(tmp_path):
    hub = str(tmp_path / "hub.git")
    assert git_run("init", "-q", "--bare", "--initial-branch=main", hub).returncode == 0
    install_hub(hub)  # every push below must also pass the hub's record checks
    a, b = mail_machine(tmp_path, "laptop"), mail_machine(tmp_path, "desktop")
    a.ensure_project(PROJECT)
    for name in ("BlueLake", "GreenCastle", "RedStone"):
        a.register_agent(PROJECT, "test", "model", name=name)
        a.set_contact_policy(PROJECT, name, "open")
    # GreenCastle works on the desktop from now on: the laptop, where it was registered, hands it over.
    nodes.handover(a.store.archive(PROJECT), agent="GreenCastle", to="desktop", hlc=a.store.clock.tick())
    sent = a.send_message(PROJECT, "RedStone", ["GreenCastle"], "Build broke", "Look at CI please")
    doomed = _message_id(sent)
    for mail in (a, b):
        add_remote(mail.store, PROJECT, "hub", "file://" + hub)
        sync_project(mail.store, PROJECT)
    assert [item["id"] for item in b.fetch_inbox(PROJECT, "GreenCastle", limit=10)] == [doomed]

    # Offline: a deletes RedStone (its messages go, with tombstones); b reads that message and writes more.
    a.hard_delete_agent(PROJECT, "RedStone", confirmation=CONFIRMATION_PHRASE)
    from_a = _message_id(a.send_message(PROJECT, "BlueLake", ["GreenCastle"], "Standup", "At ten"))
    b.mark_message_read(PROJECT, "GreenCastle", doomed)
    b.acknowledge_message(PROJECT, "GreenCastle", doomed)
    from_b = _message_id(b.send_message(PROJECT, "GreenCastle", ["BlueLake"], "Re: standup", "Fine by me"))

    for mail in (b, a, b):
        sync_project(mail.store, PROJECT)
    snaps = [mail.store.archive(PROJECT).snapshot() for mail in (a, b)]
    assert snaps[0].commit == snaps[1].commit == git_run("rev-parse", "main", cwd=hub).stdout.strip()
    snap = snaps[0]
    assert not snap.exists(message_path(doomed)) and not snap.exists(inbox_path("GreenCastle", doomed))
    assert not snap.exists(receipt_path("GreenCastle", doomed))  # the offline receipt went with the purge
    assert snap.exists(tombstone_path(doomed))
    assert snap.exists(message_path(from_a)) and snap.exists(message_path(from_b))
    assert {item["id"] for item in b.fetch_inbox(PROJECT, "BlueLake", limit=10)} == {from_b}
    assert {item["id"] for item in a.fetch_inbox(PROJECT, "GreenCastle", limit=10)} == {from_a}
    for mail in (a, b):
        assert check_archive(mail.store.archive(PROJECT), run_git=False) == []
    assert os.path.exists(os.path.join(hub, "hooks", "pre-receive"))


def _message_id(sent: dict) -> str:
    return sent["deliveries"][0]["payload"]["id"]
