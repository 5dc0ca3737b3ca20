"""Machines on two layouts, through a checked hub: the side still on layout 1 moves on, nothing lost or doubled.

The hub is a bare repository whose ``pre-receive`` runs the record checker;
the machines push and fetch with the real ``git``. Three ways in: a machine
still on layout 1 syncing with a hub already moved, a moved machine syncing
with a hub still on layout 1 (which its push moves on), and both writing
meanwhile (messages, acknowledgements of one message on both sides, a
reservation released on the old side). Every way ends with the machines and
the hub holding the same tree at layout 2, every message once, and each
machine's index holding each arrival once. A hub poisoned at layout 1 is
repaired from a machine at layout 2.
"""

from __future__ import annotations

import os

import pytest

from gitmail.index import indexer_for
from gitmail.model.records import (
    Message,
    Receipt,
    Reservation,
    inbox_path,
    message_path,
    outbox_path,
    path_layout,
    placed,
    receipt_path,
)
from gitmail.storage.fsck import check_archive
from gitmail.storage.layout import migrate
from gitmail.storage.recordcheck import file_problem
from gitmail.sync.hookinstall import install_hub
from gitmail.sync.remotes import add_remote
from gitmail.sync.repair import repair
from gitmail.sync.syncer import sync_project

from .conftest import git, git_run, sign_commits
from .sync_helpers import PROJECT, Machine, message_counts, tree_files, tree_id

pytestmark = pytest.mark.slow  # git runs the hub's pre-receive hook, which starts gitmail


@pytest.fixture
def hub(tmp_path) -> str:
    path = str(tmp_path / "hub.git")
    assert git_run("init", "-q", "--bare", "--initial-branch=main", path).returncode == 0
    install_hub(path)
    return path


def _pair(tmp_path, hub: str) -> tuple[Machine, Machine, str]:
    """Two machines sharing a layout-1 project through the hub, with one message between them."""
    a, b = Machine(str(tmp_path / "m"), "node-a"), Machine(str(tmp_path / "m"), "node-b")
    a.create_project(layout=1)
    for machine in (a, b):
        add_remote(machine.store, PROJECT, "hub", "file://" + hub)
    first = a.send("BlueLake", ["GreenCastle", "RedStone"], "kickoff")
    for machine in (a, b):
        _sync(machine)
    assert b.archive.snapshot().layout == 1
    return a, b, first


def _sync(machine: Machine) -> dict:
    """Sync with the hub; it must go through with nothing refused on either side."""
    result = sync_project(machine.store, PROJECT).results[0]
    assert result.error is None and not result.quarantined, result.to_dict()
    return result.to_dict()


def _converged(hub: str, machines: list[Machine], sent: list[str]) -> dict[str, bytes]:
    """The machines and the hub hold one tree at layout 2 with every message once; it is returned."""
    assert len({tree_id(machine.store) for machine in machines}) == 1
    assert git("rev-parse", "main^{tree}", cwd=hub).strip() == tree_id(machines[0].store)
    files = tree_files(machines[0].store)
    assert b"layout: 2" in files["project.yaml"]
    assert all(path_layout(path) in (None, 2) for path in files)
    counts = message_counts(files)
    assert set(counts) == set(sent) and set(counts.values()) == {1}  # nothing lost, nothing doubled
    for message_id in sent:
        message = Message.from_bytes(files[message_path(message_id)], message_path(message_id))
        assert outbox_path(message.sender, message_id) in files
        assert all(files[inbox_path(name, message_id)] == files[message_path(message_id)] for name in message.to)
    for machine in machines:
        assert check_archive(machine.archive) == []
        index = indexer_for(machine.store).project(PROJECT)
        for name in ("BlueLake", "GreenCastle", "RedStone"):
            arrived = [row["id"] for row in index.messages_after(name, 0, 1000)]
            assert len(arrived) == len(set(arrived)), (machine.name, name)  # each arrival once in each feed
            expected = {mid for mid in sent if name in Message.from_bytes(files[message_path(mid)]).to}
            assert expected <= set(arrived), (machine.name, name)
    return files


def test_a_machine_on_layout_1_syncing_with_a_hub_moved_on_migrates_itself_first(tmp_path, hub):
    a, b, first = _pair(tmp_path, hub)
    assert migrate(a.archive).commit is not None
    sent = [first, a.send("GreenCastle", ["BlueLake"], "after the move")]
    _sync(a)  # the hub's checks accept the move: every record where it was, with the same content
    sent.append(b.send("RedStone", ["BlueLake"], "written at layout 1"))
    indexer_for(b.store).project(PROJECT).catch_up()  # b's index knew its layout-1 paths

    outcome = _sync(b)

    assert outcome["migrated"]["layout_before"] == 1 and outcome["migrated"]["moved"] > 0
    assert (outcome["records_in"], outcome["messages_in"]) == (1, 1)  # the move itself brought nothing in
    _sync(a)
    _converged(hub, [a, b], sent)


def test_a_moved_machine_syncing_with_a_hub_on_layout_1_moves_the_hub_on(tmp_path, hub):
    a, b, first = _pair(tmp_path, hub)
    assert migrate(b.archive).commit is not None
    sent = [first, b.send("GreenCastle", ["BlueLake"], "after the move")]
    sent.append(a.send("RedStone", ["BlueLake"], "written at layout 1"))
    _sync(a)  # the hub is still on layout 1 and takes a's layout-1 records

    outcome = _sync(b)  # b takes them in at layout 2, and its push moves the hub on

    assert outcome["migrated"] is None and (outcome["records_in"], outcome["messages_in"]) == (1, 1)
    assert b"layout: 2" in git_run("show", "main:project.yaml", cwd=hub).stdout.encode()
    assert _sync(a)["fast_forwards"] == 1  # a moves on by taking the hub's main
    _converged(hub, [a, b], sent)


def test_machines_on_both_layouts_writing_meanwhile_converge_with_nothing_lost(tmp_path, hub):
    a, b, first = _pair(tmp_path, hub)
    held = a.reserve("RedStone", "src/**")
    _sync(a)
    _sync(b)
    assert migrate(b.archive).commit is not None
    sent = [first]
    for i in range(3):  # both write, each at its own layout, syncing in turns
        sent.append(a.send("BlueLake", ["GreenCastle"], f"from a {i}"))
        sent.append(b.send("GreenCastle", ["BlueLake", "RedStone"], f"from b {i}"))
        if i == 0:
            a.ack("GreenCastle", first, when="2026-12-01T10:00:05.000Z")  # at layout 1...
            b.ack("GreenCastle", first, when="2026-12-01T10:00:01.000Z")  # ...and 2: the earlier one wins
            a.release("RedStone", held)  # a release at layout 1 is final at layout 2 too
            b.ack("RedStone", first)
        _sync(a if i % 2 else b)
    _sync(a)
    _sync(b)
    _sync(a)

    files = _converged(hub, [a, b], sent)
    receipt = Receipt.from_bytes(files[receipt_path("GreenCastle", first)])
    assert receipt.acked_at == "2026-12-01T10:00:01.000Z"
    reservation = next(Reservation.from_bytes(data) for path, data in files.items() if held in path)
    assert reservation.released_ts is not None
    assert not any(path.startswith("conflicts/") for path in files)


def test_a_hub_poisoned_at_layout_1_is_repaired_from_a_machine_at_layout_2(tmp_path):
    hub = str(tmp_path / "hub.git")
    assert git_run("init", "-q", "--bare", "--initial-branch=main", hub).returncode == 0
    a, b, first = _pair(tmp_path, hub)  # no checks on the hub yet
    kept = a.send("BlueLake", ["GreenCastle"], "kept")
    _sync(a)
    _sync(b)
    clone = str(tmp_path / "poisoner")  # damage at layout-1 paths, pushed while the hub had no checks
    assert git_run("clone", "-q", hub, clone).returncode == 0
    sign_commits(clone, a.store.home)  # by a node: the record rules are what refuse it
    with open(os.path.join(clone, placed(message_path(kept), 1)), "rb") as handle:
        edited = handle.read().replace(b"kept from", b"edited from")
    with open(os.path.join(clone, placed(message_path(kept), 1)), "wb") as handle:
        handle.write(edited)
    os.unlink(os.path.join(clone, placed(message_path(first), 1)))
    assert git_run("commit", "-q", "-am", "damage", cwd=clone).returncode == 0
    assert git_run("push", "-q", "origin", "main", cwd=clone).returncode == 0
    install_hub(hub)
    assert migrate(b.archive).commit is not None

    refused = sync_project(b.store, PROJECT).results[0]
    assert sorted(item["path"] for item in refused.quarantined) == sorted(
        placed(message_path(mid), 1) for mid in (first, kept))  # named where the hub holds them
    report = repair(b.store, PROJECT)

    assert report.to_dict()["exit_code"] == 0, report.lines()
    assert sorted(item["action"] for item in report.repaired) == ["put back", "restored"]
    hub_files = {name: git_run("show", f"main:{name}", cwd=hub).stdout.encode()
                 for name in git_run("ls-tree", "-r", "--name-only", "main", cwd=hub).stdout.split()}
    assert not [path for path, data in hub_files.items() if file_problem(path, data)]
    original = tree_files(a.store)
    for mid in (first, kept):
        assert hub_files[message_path(mid)] == original[placed(message_path(mid), 1)]  # back, at layout 2
    _sync(a)
    _sync(b)
    _converged(hub, [a, b], [first, kept])
