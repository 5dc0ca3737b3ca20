"""The write path: transactions, compare-and-swap, group commit, plain-git output."""

from __future__ import annotations

import dataclasses
import os
import threading
import time

import pygit2
import pytest

from gitmail import Archive, Change, GitmailError, HybridClock, Message, new_id
from gitmail.model.errors import INVALID_ARGUMENT, RETRY_EXHAUSTED
from gitmail.model.records import Agent, inbox_path, outbox_path
from gitmail.storage.engine import MAX_ATTEMPTS
from gitmail.storage.snapshot import Snapshot

from .conftest import git, wait_until

CLOCK = HybridClock("node-a")  # records written straight through the engine, as any writer would


@pytest.fixture
def archive(tmp_path):
    return Archive.init(str(tmp_path / "archive.git"))


def _message(sender="BlueLake", to=("GreenCastle",), body="hello\n"):
    return Message(id=new_id(), thread_id="t-1", sender=sender, subject="Hi", created_ts=CLOCK.now_ts(),
                   to=list(to), body=body)


def _send(message):
    def fn(snap):
        change = Change(f"{message.sender} sent {message.id}", author=message.sender, result=message.id)
        change.put_record(message)
        for name in message.to:
            change.put(inbox_path(name, message.id), message)
        change.put(outbox_path(message.sender, message.id), message)
        return change
    return fn


def _wait_for_queue(archive, depth):
    wait_until(lambda: archive.queue_depth() >= depth, f"{depth} writers to queue")


def _object_count(archive):
    out = git("--git-dir", archive.git_dir, "count-objects", "-v")
    counts = dict(line.split(": ") for line in out.splitlines())
    return int(counts["count"]) + int(counts["in-pack"])


def test_first_commit_creates_main_and_git_reads_it(archive):
    message = _message()
    done = archive.transact(_send(message))
    assert done.result == message.id and done.commit == archive.tip()
    shown = git("--git-dir", archive.git_dir, "show", f"main:{message.path()}")
    assert shown.encode() == message.to_bytes()
    assert git("--git-dir", archive.git_dir, "log", "--format=%an", "--", message.path()).split() == ["BlueLake"]
    assert git("--git-dir", archive.git_dir, "log", "--format=%s").strip() == f"BlueLake sent {message.id}"
    git("--git-dir", archive.git_dir, "fsck", "--strict")


def test_copies_share_one_blob(archive):
    message = _message(to=("GreenCastle", "RedStone"))
    archive.transact(_send(message))
    listing = git("--git-dir", archive.git_dir, "ls-tree", "-r", "main")
    blob_ids = {line.split()[2] for line in listing.splitlines()}
    assert len(blob_ids) == 1 and len(listing.splitlines()) == 4


def test_snapshot_reads_without_a_work_tree(archive):
    first = _message()
    archive.transact(_send(first))
    old_tip = archive.tip()
    second = _message(body="second\n")
    archive.transact(_send(second))
    snap_old, snap_new = archive.snapshot(old_tip), archive.snapshot()
    assert snap_old.exists(first.path()) and not snap_old.exists(second.path())
    assert snap_new.load(second.path(), Message) == second
    assert snap_new.listdir("agents") == ["BlueLake", "GreenCastle"]
    assert sorted(snap_new.walk("messages")) == sorted([first.path(), second.path()])
    assert snap_new.read("no/such/file") is None
    assert not os.path.exists(os.path.join(archive.git_dir, "index"))


def test_a_peeked_record_is_shared_and_a_loaded_one_is_the_callers_own(archive):
    message = _message(body="shared\n")
    archive.transact(_send(message))
    snap = archive.snapshot()
    peeked = snap.peek(message.path(), Message)
    assert peeked == message and snap.peek(message.path(), Message) is peeked  # parsed once, then shared
    mine = snap.load(message.path(), Message)
    assert mine == message and mine is not peeked
    mine.subject = "changed by its caller"
    assert archive.snapshot().peek(message.path(), Message).subject == message.subject
    assert snap.peek("messages/no/such.md", Message) is None


def test_replace_and_delete(archive):
    archive.transact(lambda s: Change("add").put("notes/a.yaml", b"a: 1\n").put("notes/b.yaml", b"b: 1\n"))
    archive.transact(lambda s: Change("edit").put("notes/a.yaml", b"a: 2\n").delete("notes/b.yaml"))
    snap = archive.snapshot()
    assert snap.read("notes/a.yaml") == b"a: 2\n" and not snap.exists("notes/b.yaml")
    archive.transact(lambda s: Change("drop").delete("notes/a.yaml"))
    assert archive.snapshot().listdir("") == []  # empty folders vanish, as in git
    git("--git-dir", archive.git_dir, "fsck", "--strict")


def test_change_without_edits_commits_nothing(archive):
    archive.transact(lambda s: Change("add").put("a.yaml", b"a: 1\n"))
    tip = archive.tip()
    done = archive.transact(lambda s: Change("nothing", result="same"))
    assert done.commit is None and done.result == "same" and archive.tip() == tip


def test_domain_error_leaves_repository_unchanged(archive):
    archive.transact(lambda s: Change("add").put("a.yaml", b"a: 1\n"))
    tip, objects = archive.tip(), _object_count(archive)

    def refuse(snap):
        raise GitmailError(INVALID_ARGUMENT, "no")

    with pytest.raises(GitmailError) as info:
        archive.transact(refuse)
    assert info.value.code == INVALID_ARGUMENT
    assert archive.tip() == tip and _object_count(archive) == objects


@pytest.mark.parametrize("path", ["", "/abs", "a//b", "a/../b", ".git/config", "a/./b", "a\\b", "nul\0l"])
def test_unsafe_paths_are_refused(archive, path):
    with pytest.raises(GitmailError) as info:
        archive.transact(lambda s: Change("bad").put(path, b"x"))
    assert info.value.code == INVALID_ARGUMENT and archive.tip() is None


def test_file_and_folder_clash_is_refused(archive):
    archive.transact(lambda s: Change("add").put("a/b", b"x"))
    tip = archive.tip()
    with pytest.raises(GitmailError) as info:
        archive.transact(lambda s: Change("clash").put("a/b/c", b"y"))
    assert info.value.code == INVALID_ARGUMENT and archive.tip() == tip


def test_lost_race_reruns_the_function_on_the_new_tip(archive, tmp_path):
    """An outside commit (real git) lands between our read and our swap."""
    archive.transact(lambda s: Change("seed").put("counter", b"0"))
    clone = str(tmp_path / "clone")
    git("clone", "-q", archive.git_dir, clone)
    seen = []

    def increment(snap):
        value = int(snap.read("counter"))
        seen.append(value)
        if len(seen) == 1:  # first run: someone else commits meanwhile
            with open(os.path.join(clone, "counter"), "w") as handle:
                handle.write("10")
            git("commit", "-qam", "outside", cwd=clone)
            git("push", "-q", "origin", "main", cwd=clone)
        return Change("increment").put("counter", str(value + 1).encode())

    done = archive.transact(increment)
    assert seen == [0, 10] and done.attempts == 2
    assert archive.snapshot().read("counter") == b"11"
    assert archive.retries == 1
    log = git("--git-dir", archive.git_dir, "log", "--format=%s").split("\n")
    assert log[:3] == ["increment", "outside", "seed"]


def test_retries_are_bounded_with_a_clear_error(archive, tmp_path):
    archive.transact(lambda s: Change("seed").put("n", b"0"))
    other = Archive(archive.path)
    calls = []

    def always_loses(snap):
        calls.append(1)
        # Move main underneath every attempt through a second handle.
        parent = other.repo.head.target
        tree = other.repo[parent].tree_id
        sig = pygit2.Signature("x", "x@example.org")
        other.repo.create_commit("refs/heads/main", sig, sig, f"move {len(calls)}", tree, [parent])
        return Change("never").put("n", b"1")

    with pytest.raises(GitmailError) as info:
        archive.transact(always_loses)
    assert info.value.code == RETRY_EXHAUSTED and "retried" in info.value.message
    assert len(calls) == MAX_ATTEMPTS
    assert archive.snapshot().read("n") == b"0"


def test_stale_main_lock_is_cleared(archive):
    archive.transact(lambda s: Change("seed").put("a", b"1"))
    lock = os.path.join(archive.git_dir, "refs", "heads", "main.lock")
    with open(lock, "w"):
        pass
    old = time.time() - 60
    os.utime(lock, (old, old))
    archive.transact(lambda s: Change("after crash").put("a", b"2"))
    assert archive.snapshot().read("a") == b"2" and not os.path.exists(lock)


def test_fresh_main_lock_is_waited_for_not_removed(archive):
    archive.transact(lambda s: Change("seed").put("a", b"1"))
    lock = os.path.join(archive.git_dir, "refs", "heads", "main.lock")
    with open(lock, "w"):
        pass
    threading.Timer(0.3, os.unlink, [lock]).start()  # its owner finishes shortly
    archive.transact(lambda s: Change("later").put("a", b"2"))
    assert archive.snapshot().read("a") == b"2"


def test_group_commit_folds_queued_writes(archive):
    archive.transact(lambda s: Change("seed").put("seed", b"x"))
    gate = threading.Event()
    release = threading.Event()

    def slow(snap):
        gate.set()
        release.wait(30)
        return Change("slow", author="A").put("slow", b"x")

    leader = threading.Thread(target=archive.transact, args=(slow,))
    leader.start()
    assert gate.wait(30)
    results = []
    followers = [threading.Thread(target=lambda i=i: results.append(
        archive.transact(lambda s, i=i: Change(f"w{i}", author="B").put(f"w/{i}", b"x")))) for i in range(6)]
    for thread in followers:
        thread.start()
    _wait_for_queue(archive, 6)  # all queued behind the commit in flight
    release.set()
    leader.join()
    for thread in followers:
        thread.join()
    assert len({r.commit for r in results}) == 1, "queued writes share one commit"
    assert len(archive.snapshot().listdir("w")) == 6
    log = git("--git-dir", archive.git_dir, "log", "--format=%an|%s").splitlines()
    assert log[0].startswith("B|B: 6 changes") and log[1] == "A|slow"


def test_a_queued_change_sees_the_edits_queued_before_it(archive):
    """Validation inside a batch runs against the state the batch will commit."""
    archive.transact(lambda s: Change("seed").put("seed", b"x"))
    gate, release = threading.Event(), threading.Event()

    def blocker(snap):
        gate.set()
        release.wait(30)
        return Change("blocker").put("b", b"x")

    def claim(snap):
        if snap.exists("claimed"):
            raise GitmailError("CONFLICT", "taken")
        return Change("claim", result="won").put("claimed", b"x")

    first = threading.Thread(target=archive.transact, args=(blocker,))
    first.start()
    assert gate.wait(30)
    outcomes = []

    def attempt():
        try:
            outcomes.append(archive.transact(claim).result)
        except GitmailError as exc:
            outcomes.append(exc.code)

    racers = [threading.Thread(target=attempt) for _ in range(4)]
    for thread in racers:
        thread.start()
    _wait_for_queue(archive, 4)
    release.set()
    first.join()
    for thread in racers:
        thread.join()
    assert sorted(outcomes) == ["CONFLICT"] * 3 + ["won"]


def test_consecutive_authors_get_their_own_commits(archive):
    archive.transact(lambda s: Change("seed").put("seed", b"x"))
    gate, release = threading.Event(), threading.Event()

    def blocker(snap):
        gate.set()
        release.wait(30)
        return Change("blocker", author="Z").put("z", b"x")

    first = threading.Thread(target=archive.transact, args=(blocker,))
    first.start()
    assert gate.wait(30)
    threads = []
    for i, author in enumerate(["A", "B", "A"]):
        threads.append(threading.Thread(target=archive.transact,
                                        args=(lambda s, i=i, a=author:
                                              Change(f"{a} wrote {i}", author=a).put(f"f{i}", b"x"),)))
        threads[-1].start()
        _wait_for_queue(archive, i + 1)
    release.set()
    first.join()
    for thread in threads:
        thread.join()
    authors = git("--git-dir", archive.git_dir, "log", "--format=%an").split()
    assert authors[:4] == ["A", "B", "A", "Z"]
    assert "A" in git("--git-dir", archive.git_dir, "log", "--author=A", "--format=%an")


def test_a_group_of_transactions_is_one_move_of_main_with_a_commit_per_author_and_date(archive):
    seen = []
    archive.add_listener(lambda old, new: seen.append(new))

    def by(author, when, path, sees=None):
        def fn(snap):
            assert sees is None or snap.read(sees) == b"x"  # each function sees the edits queued before it
            return Change(f"{author} wrote {path}", author=author, when=when, result=path).put(path, b"x")
        return fn

    done = archive.transact_many([by("A", 1_600_000_000, "a1"), by("A", 1_600_000_000, "a2", sees="a1"),
                                  by("A", 1_600_000_100, "a3"), by("B", None, "b1", sees="a3")])
    assert [item.result for item in done] == ["a1", "a2", "a3", "b1"]
    assert seen == [archive.tip()] and done[-1].commit == archive.tip()  # one compare-and-swap for all four
    log = git("--git-dir", archive.git_dir, "log", "--format=%an %at %ct").splitlines()
    assert [line.split()[:2] for line in log[1:]] == [["A", "1600000100"], ["A", "1600000000"]]
    author, authored, committed = log[0].split()
    assert author == "B" and authored == committed  # no date of its own: the time of the commit
    assert archive.transact_many([]) == []


def test_a_link_puts_a_held_file_without_packing_it_again_and_later_transactions_read_it(archive):
    archive.transact(lambda s: Change("first").put("kept/one", b"held bytes"))
    blob = archive.repo[archive.tip()].peel(pygit2.Tree)["kept/one"].id
    packs = set(os.listdir(os.path.join(archive.git_dir, "objects", "pack")))

    def reader(snap):
        assert snap.read("linked/two") == b"held bytes"  # queued before it in the same group
        return Change("reader").put("seen", b"yes")

    done = archive.transact_many([lambda s: Change("link", links={"linked/two": blob.raw}), reader])
    assert done[-1].commit == archive.tip()
    tree = archive.repo[archive.tip()].peel(pygit2.Tree)
    assert tree["linked/two"].id == blob and tree["linked/two"].filemode == pygit2.GIT_FILEMODE_BLOB
    (pack,) = {name for name in os.listdir(os.path.join(archive.git_dir, "objects", "pack"))
               if name.endswith(".pack")} - packs
    listed = git("verify-pack", "-v", os.path.join(archive.git_dir, "objects", "pack", pack))
    assert str(blob) not in listed  # the held file was linked, not written again
    assert git("--git-dir", archive.git_dir, "fsck", "--strict").strip() == ""


def test_a_link_to_a_path_under_a_file_is_refused_and_nothing_changes(archive):
    archive.transact(lambda s: Change("add").put("a/b", b"x"))
    tip, blob = archive.tip(), archive.repo[archive.tip()].peel(pygit2.Tree)["a/b"].id
    with pytest.raises(GitmailError) as info:
        archive.transact(lambda s: Change("clash", links={"a/b/c": blob.raw}))
    assert info.value.code == INVALID_ARGUMENT and archive.tip() == tip


def test_unexpected_exception_reaches_only_its_caller(archive):
    def broken(snap):
        raise RuntimeError("bug")

    with pytest.raises(RuntimeError):
        archive.transact(broken)
    assert archive.transact(lambda s: Change("fine").put("ok", b"1")).commit


def test_merge_parent_makes_a_two_parent_commit(archive):
    first = archive.transact(lambda s: Change("one").put("a", b"1")).commit
    archive.transact(lambda s: Change("two").put("b", b"2"))
    merged = archive.transact(lambda s: Change("merge", merge_parent=first).put("c", b"3")).commit
    parents = [str(p) for p in archive.repo[merged].parent_ids]
    assert len(parents) == 2 and parents[1] == first


def test_commit_listeners_see_each_new_tip(archive):
    seen = []
    archive.add_listener(lambda old, new: seen.append((old, new)))
    assert archive.tip() is None
    first = archive.transact(lambda s: Change("one").put("a", b"1")).commit
    second = archive.transact(lambda s: Change("two").put("a", b"2")).commit
    assert seen == [(None, first), (first, second)]


def test_writes_land_in_packs_not_loose_objects(archive):
    for i in range(5):
        archive.transact(_send(_message(body=f"m{i}\n")))
    counts = dict(line.split(": ") for line in git("--git-dir", archive.git_dir, "count-objects", "-v").splitlines())
    assert counts["count"] == "0" and int(counts["in-pack"]) > 0


def _bad_agent(snap):
    return Change("bad").put_record(_message(sender="not a name"))


def _oversized(snap):
    return Change("big").put_record(_message(body="x" * (2 * 1024 * 1024)))


def _reads_corrupt(snap):
    Message.from_bytes(snap.read("messages/broken.md"), "messages/broken.md")
    return Change("never").put("x", b"x")


@pytest.mark.parametrize("fn, code", [(_bad_agent, INVALID_ARGUMENT), (_oversized, INVALID_ARGUMENT),
                                      (_reads_corrupt, "CORRUPT_RECORD")])
def test_bad_records_leave_the_repository_unchanged(archive, fn, code):
    archive.transact(lambda s: Change("seed").put("messages/broken.md", b"no front matter\n"))
    tip, objects = archive.tip(), _object_count(archive)
    with pytest.raises(GitmailError) as info:
        archive.transact(fn)
    assert info.value.code == code and info.value.message
    assert archive.tip() == tip and _object_count(archive) == objects


def test_git_itself_is_configured_to_write_durably(archive):
    assert git("--git-dir", archive.git_dir, "config", "core.fsync").strip() == "objects,derived-metadata,reference"
    assert git("--git-dir", archive.git_dir, "config", "core.fsyncMethod").strip() == "fsync"



def test_loaded_records_are_parsed_once_and_each_caller_gets_its_own_copy(archive, monkeypatch):
    parses = []
    parse = Agent.from_bytes.__func__
    monkeypatch.setattr(Agent, "from_bytes", classmethod(lambda cls, data, path="<record>": (
        parses.append(path), parse(cls, data, path))[1]))
    profile = Agent(id=new_id(), name="BlueLake", program="p", model="m", inception_ts=CLOCK.now_ts(),
                    hlc=CLOCK.tick())
    archive.transact(lambda s: Change("register").put_record(profile))
    snap = archive.snapshot()
    first = snap.load(profile.path(), Agent)
    first.task_description = "changed by one caller"
    first.capabilities.append("mutated")
    second = archive.snapshot().load(profile.path(), Agent)
    assert parses == [profile.path()]  # the second load, from a new snapshot, did not parse again
    assert second is not first
    assert second.task_description == "" and "mutated" not in second.capabilities
    # The same bytes at another path are checked against that path, not served from memory.
    archive.transact(lambda s: Change("copy").put("agents/Other/profile.yaml", profile.to_bytes()))
    with pytest.raises(GitmailError) as info:
        archive.snapshot().load("agents/Other/profile.yaml", Agent)
    assert "does not match the file's location" in info.value.message
    # An edit queued ahead in a group commit is read as queued, not from the remembered parse.
    queued = Snapshot(archive.repo, archive.tip(), {profile.path(): dataclasses.replace(profile, model="o").to_bytes()})
    assert queued.load(profile.path(), Agent).model == "o"


def test_the_folders_a_busy_day_writes_into_stay_decoded_for_the_next_commits(archive, monkeypatch):
    """A day spreads its files over thousands of fan-out folders: the next writes must not decode them again."""
    from gitmail.storage import objects

    folders = [f"{a}{b}" for a in "0123456789abcdefghjkmnpqrstvwxyz" for b in "0123456789abcdefghjkmnpqrstvwxyz"]
    folders = folders * 2  # 2,048 leaf folders under 64 middle ones: four times what the cache used to hold

    def fill(snap):
        change = Change("a busy day")
        for n, name in enumerate(folders):
            change.put(f"day/{n // 1024}/{name[0]}/{name[1]}/first.md", b"%d\n" % n)  # each folder its own
        return change

    archive.transact(fill)
    decoded = []
    real = objects.Tree.decode.__func__

    def counting(cls, data):
        decoded.append(len(data))
        return real(cls, data)

    monkeypatch.setattr(objects.Tree, "decode", classmethod(counting))
    for start in range(0, len(folders), 256):
        def more(snap, start=start):
            change = Change("more of the day")
            for n in range(start, start + 256):
                name = folders[n]
                change.put(f"day/{n // 1024}/{name[0]}/{name[1]}/second.md", b"y\n")
            return change

        archive.transact(more)
    assert decoded == []
    tip = archive.snapshot()
    assert {tip.read(f"day/{n // 1024}/{f[0]}/{f[1]}/second.md") for n, f in enumerate(folders)} == {b"y\n"}
