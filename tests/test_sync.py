"""Sync between machines through a shared hub repository, with the real git binary.

Three stores ("machines") write offline, then sync in varied orders until
nothing moves; every machine must end with the same tree, every record once,
and the merge rules applied (earliest receipts, per-field profiles, final
releases, sticky purges, conflicts kept rather than dropped).
"""

from __future__ import annotations

import os
import socket
import subprocess

import pytest

from gitmail.model.errors import GitmailError
from gitmail.model.records import (
    Agent,
    Conflict,
    Message,
    Receipt,
    Reservation,
    Tombstone,
    inbox_path,
    message_path,
    outbox_path,
    receipt_path,
    reservation_path,
    tombstone_path,
)
from gitmail.sync.remotes import add_remote, list_remotes, remove_remote
from gitmail.sync.syncer import sync_project

from .conftest import git_run, wait_until
from .mcp_harness import free_port
from .sync_helpers import AGENTS, PROJECT, Machine, message_counts, tree_files, tree_id


def _accepts(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
    except OSError:
        return False
    return True


@pytest.fixture
def hub_dir(tmp_path):
    path = tmp_path / "hubs" / "shared.git"
    path.parent.mkdir()
    assert git_run("init", "-q", "--bare", "--initial-branch=main", str(path)).returncode == 0
    return str(path)


@pytest.fixture(params=["file", pytest.param("daemon", marks=pytest.mark.slow)])  # daemon: a git daemon process
def hub_url(request, hub_dir):
    """The hub as a file:// URL, or served by a real `git daemon` on 127.0.0.1."""
    if request.param == "file":
        yield "file://" + hub_dir
        return
    port = free_port()
    base = os.path.dirname(hub_dir)
    daemon = subprocess.Popen(["git", "daemon", "--reuseaddr", f"--base-path={base}", "--export-all",
                               "--enable=receive-pack", "--listen=127.0.0.1", f"--port={port}", base],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: _accepts(port), "git daemon to listen")
        yield f"git://127.0.0.1:{port}/shared.git"
    finally:
        daemon.terminate()
        daemon.wait(10)


def _machines(tmp_path, url: str, count: int = 3) -> list[Machine]:
    machines = [Machine(str(tmp_path / "m"), f"node{i}") for i in range(count)]
    machines[0].create_project()
    for machine in machines:
        add_remote(machine.store, PROJECT, "hub", url)
    for machine in machines:
        sync_project(machine.store, PROJECT)
    return machines


def _sync_until_quiet(machines: list[Machine], order: list[int], limit: int = 6) -> int:
    """Sync in the given order, round after round, until one full round moves nothing."""
    for round_no in range(1, limit + 1):
        moved = 0
        for index in order:
            for result in sync_project(machines[index].store, PROJECT).results:
                moved += result.records_in + result.records_out + result.fast_forwards + result.merges
        if moved == 0:
            return round_no
    raise AssertionError(f"still moving after {limit} rounds")


def test_three_machines_converge_with_every_rule(tmp_path, hub_url):
    a, b, c = _machines(tmp_path, hub_url)
    first = a.send("BlueLake", ["GreenCastle", "RedStone"], "kickoff")
    held = a.reserve("BlueLake", "src/api/*.py")
    for machine in (a, b, c):
        sync_project(machine.store, PROJECT)
    assert tree_id(a.store) == tree_id(b.store) == tree_id(c.store)

    # Offline: everyone writes.
    sent = [a.send("BlueLake", ["GreenCastle"], f"from a {i}") for i in range(3)]
    sent += [b.send("GreenCastle", ["BlueLake", "RedStone"], f"from b {i}") for i in range(2)]
    sent += [c.send("RedStone", ["BlueLake"], f"from c {i}") for i in range(2)]
    b.ack("GreenCastle", first, when="2026-12-01T10:00:05.000Z")
    c.ack("GreenCastle", first, when="2026-12-01T10:00:01.000Z")  # earlier: must win everywhere
    a.ack("RedStone", first, when="2026-12-01T11:00:00.000Z")
    a.edit_profile("BlueLake", task_description="written on a")
    b.edit_profile("BlueLake", contact_policy="open")
    c.edit_profile("BlueLake", task_description="written on c, later")
    b.release("BlueLake", held)
    c.edit_reservation = None
    renewed = c.archive.snapshot().load(reservation_path(held), Reservation)
    renewed.expires_ts, renewed.hlc = "2099-06-01T00:00:00.000Z", c.store.clock.tick()
    c.write("renewed", "BlueLake", lambda snap: [renewed])  # a later renewal does not undo a release

    rounds = _sync_until_quiet([a, b, c], [1, 0, 2])
    assert rounds <= 3
    trees = [tree_files(m.store) for m in (a, b, c)]
    assert trees[0] == trees[1] == trees[2]
    assert tree_id(a.store) == tree_id(b.store) == tree_id(c.store)
    files = trees[0]
    counts = message_counts(files)
    assert set(counts) == set(sent + [first]) and set(counts.values()) == {1}
    for message_id in sent:
        message = Message.from_bytes(files[message_path(message_id)], message_path(message_id))
        assert outbox_path(message.sender, message_id) in files
        for name in message.to:
            assert files[inbox_path(name, message_id)] == files[message_path(message_id)]
    receipt = Receipt.from_bytes(files[receipt_path("GreenCastle", first)], receipt_path("GreenCastle", first))
    assert receipt.read_at == receipt.acked_at == "2026-12-01T10:00:01.000Z"
    assert receipt_path("RedStone", first) in files
    profile = Agent.from_bytes(files["agents/BlueLake/profile.yaml"], "agents/BlueLake/profile.yaml")
    assert profile.task_description == "written on c, later" and profile.contact_policy == "open"
    reservation = Reservation.from_bytes(files[reservation_path(held)], reservation_path(held))
    assert reservation.released_ts is not None
    assert not any(path.startswith("conflicts/") for path in files)
    # Clocks moved past everything observed: a new write on a sorts after c's profile edit.
    assert a.store.clock.tick() > profile.hlc


def test_purge_sticks_and_true_conflicts_keep_both(tmp_path, hub_dir):
    a, b = _machines(tmp_path, "file://" + hub_dir, count=2)
    doomed = a.send("BlueLake", ["GreenCastle"], "to be purged")
    for machine in (a, b):
        sync_project(machine.store, PROJECT)

    def purge(snap):
        message = snap.load(message_path(doomed), Message)
        return [(message_path(doomed), None), (inbox_path("GreenCastle", doomed), None),
                (outbox_path("BlueLake", doomed), None),
                Tombstone(message_id=doomed, deleted_at="2026-12-01T12:00:00.000Z", reason="retention",
                          hlc=a.store.clock.tick())] if message else []

    def fn(snap):
        from gitmail.storage.engine import Change
        change = Change("purge", author="BlueLake")
        for item in purge(snap):
            if isinstance(item, tuple):
                change.delete(item[0]) if item[1] is None else change.put(*item)
            else:
                change.put_record(item)
        return change

    a.archive.transact(fn)
    b.ack("GreenCastle", doomed)  # offline, b still has the message and acknowledges it

    # Both machines write different files at one new immutable path (a message written by hand on each, say).
    for machine in (a, b):
        sync_project(machine.store, PROJECT)
    clash = a.store.clock.new_id()
    original = Message(id=clash, thread_id=clash, sender="BlueLake", subject="original", to=["GreenCastle"],
                       created_ts="2026-12-01T10:00:00.000Z", body="written by hand\n").to_bytes()
    edited = original.replace(b"written by hand", b"written by pen")
    a.write("hand edit", None, lambda snap: [(message_path(clash), original)])
    b.write("other hand edit", None, lambda snap: [(message_path(clash), edited)])

    results = [sync_project(m.store, PROJECT).results[0] for m in (a, b, a)]
    conflicts = [item for result in results for item in result.conflicts]
    assert conflicts and conflicts[0]["path"] == message_path(clash)
    files_a, files_b = tree_files(a.store), tree_files(b.store)
    assert files_a == files_b
    for path in (message_path(doomed), inbox_path("GreenCastle", doomed), receipt_path("GreenCastle", doomed)):
        assert path not in files_a
    assert tombstone_path(doomed) in files_a
    parked = [Conflict.from_bytes(data, path) for path, data in files_a.items() if path.startswith("conflicts/")]
    assert len(parked) == 1
    versions = {files_a[message_path(clash)], parked[0].content.encode()}
    assert versions == {original, edited}  # both kept, neither dropped


def test_remotes_and_errors(tmp_path, hub_dir):
    (a,) = _machines(tmp_path, "file://" + hub_dir, count=1)
    assert list_remotes(a.store, PROJECT) == {"hub": "file://" + hub_dir}
    before = a.archive.tip()
    for bad_name, code in (("bad name", "INVALID_ARGUMENT"), ("hub", "ALREADY_EXISTS")):
        with pytest.raises(GitmailError) as info:
            add_remote(a.store, PROJECT, bad_name, "file:///nowhere")
        assert info.value.code == code
    with pytest.raises(GitmailError) as info:
        sync_project(a.store, PROJECT, "nope")
    assert info.value.code == "NOT_FOUND" and "gitmail remote add" in info.value.message
    add_remote(a.store, PROJECT, "gone", "file://" + str(tmp_path / "missing.git"))
    report = sync_project(a.store, PROJECT, "gone")
    error = report.results[0].error
    assert report.exit_code == 2 and error["code"] == "SYNC_FAILED" and "missing.git" in error["message"]
    remove_remote(a.store, PROJECT, "gone")
    assert list(list_remotes(a.store, PROJECT)) == ["hub"]
    assert a.archive.tip() == before


def test_concurrent_writer_during_sync_loses_nothing(tmp_path, hub_dir):
    """A write racing a merge is re-merged, not overwritten (the merge runs through CAS)."""
    import threading

    a, b = _machines(tmp_path, "file://" + hub_dir, count=2)
    for i in range(5):
        b.send("GreenCastle", ["BlueLake"], f"b {i}")
    sync_project(b.store, PROJECT)
    a.send("BlueLake", ["GreenCastle"], "a first")
    stop = threading.Event()

    def writer():
        while not stop.is_set():
            a.send("BlueLake", ["RedStone"], "racing")

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        for _ in range(3):
            sync_project(a.store, PROJECT)
    finally:
        stop.set()
        thread.join()
    sync_project(a.store, PROJECT)
    sync_project(b.store, PROJECT)
    files = tree_files(a.store)
    assert files == tree_files(b.store)
    assert set(message_counts(files)) == set(a.sent + b.sent)


def test_interval_syncer_brings_in_remote_writes_and_reports_failures(tmp_path, hub_dir):
    from gitmail.sync.interval import IntervalSyncer

    a, b = _machines(tmp_path, "file://" + hub_dir, count=2)
    syncer = IntervalSyncer(a.store, interval=0.1).start()
    try:
        written = b.send("GreenCastle", ["BlueLake"], "picked up on an interval")
        sync_project(b.store, PROJECT)
        wait_until(lambda: a.archive.snapshot().exists(message_path(written)), "the interval syncer to bring it in")
    finally:
        syncer.stop()
    assert syncer.rounds >= 1
    add_remote(a.store, PROJECT, "gone", "file://" + str(tmp_path / "missing.git"))
    (report,) = syncer.sync_now(PROJECT)
    assert report["exit_code"] == 2
    assert [r["error"]["code"] for r in report["results"] if r["error"]] == ["SYNC_FAILED"]


def test_merge_driver_keeps_both_versions_of_an_immutable_file(tmp_path):
    from gitmail.sync import mergedriver

    files = {}
    sides = (("base", b""), ("ours", b"---\nversion: ours\n---\n"), ("theirs", b"---\nversion: theirs\n---\n"))
    for name, text in sides:
        files[name] = tmp_path / name
        files[name].write_bytes(text)
    work = tmp_path / "work"
    work.mkdir()
    git_run("init", "-q", str(work))
    path = "messages/2026/12/01/01m8r3w8fe573chhyy6wrgf.md"
    cwd = os.getcwd()
    os.chdir(work)
    try:
        code, advice = mergedriver.run(str(files["base"]), str(files["ours"]), str(files["theirs"]), path)
    finally:
        os.chdir(cwd)
    assert code == 1 and "git add conflicts/" in advice
    kept = files["ours"].read_bytes()
    parked = list((work / "conflicts").rglob("*.yaml"))
    assert len(parked) == 1
    record = Conflict.from_bytes(parked[0].read_bytes(), str(parked[0].relative_to(work)))
    assert {kept, record.content.encode()} == {b"---\nversion: ours\n---\n", b"---\nversion: theirs\n---\n"}


def test_machines_that_created_the_project_independently_converge(tmp_path, hub_dir):
    """Unrelated histories (no common commit) merge like any other: the rules need no ancestor.

    Both machines registered the same three names: each is an identity
    clash, where the earlier registration keeps the name and the other is
    parked, the same way on both machines.
    """
    a, b = Machine(str(tmp_path / "m"), "first"), Machine(str(tmp_path / "m"), "second")
    a.create_project()
    b.create_project()
    mine = a.send("BlueLake", ["GreenCastle"], "from a")
    theirs = b.send("GreenCastle", ["BlueLake"], "from b")
    for machine in (a, b):
        add_remote(machine.store, PROJECT, "hub", "file://" + hub_dir)
    for machine in (a, b, a):
        sync_project(machine.store, PROJECT)
    files = tree_files(a.store)
    assert files == tree_files(b.store)
    assert set(message_counts(files)) == {mine, theirs}
    parked = sorted(path.split("/")[2] for path in files if path.startswith("conflicts/"))
    assert parked == sorted(AGENTS)
    for name in AGENTS:  # the earlier registration kept the name everywhere
        kept = Agent.from_bytes(files[f"agents/{name}/profile.yaml"], f"agents/{name}/profile.yaml")
        assert kept.hlc.node == "first"


def test_simultaneous_syncs_finish_in_one_round_through_machine_refs(tmp_path, hub_dir):
    """Two machines push at once; the loser's push goes to its own ref instead of retrying, and nothing is lost."""
    import threading

    a, b = _machines(tmp_path, "file://" + hub_dir, count=2)
    hook = os.path.join(hub_dir, "hooks", "pre-receive")
    with open(hook, "w", encoding="utf-8") as handle:
        handle.write("#!/bin/sh\ncat >/dev/null\nsleep 1\n")  # a slow hub: both pushes overlap
    os.chmod(hook, 0o755)
    sent = {a.send("BlueLake", ["GreenCastle"], "from a"), b.send("GreenCastle", ["BlueLake"], "from b")}
    results = {}

    def run(machine):
        results[machine.name] = sync_project(machine.store, PROJECT).results[0]

    threads = [threading.Thread(target=run, args=(m,)) for m in (a, b)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(r.pushed_to for r in results.values()) == ["main", "node"]
    assert all(r.rounds == 1 for r in results.values())
    loser = a if results[a.name].pushed_to == "node" else b
    assert git_run("rev-parse", f"refs/gitmail/nodes/{loser.name}", cwd=hub_dir).stdout.strip() == loser.archive.tip()
    os.unlink(hook)
    _sync_until_quiet([a, b], [0, 1])
    files = tree_files(a.store)
    assert files == tree_files(b.store) and set(message_counts(files)) >= sent
    hub_tree = git_run("rev-parse", "main^{tree}", cwd=hub_dir).stdout.strip()
    assert hub_tree == tree_id(a.store)
