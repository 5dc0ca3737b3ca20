"""Catch-up from the repository: outside commits, rewritten history, rebuilds, damage."""

from __future__ import annotations

import datetime as dt
import os
import shutil
import threading
from pathlib import Path

import pygit2
import pytest
from whoosh import index as windex

from gitmail import Store
from gitmail.index import indexer_for, parse_query
from gitmail.model.records import message_path
from gitmail.storage.background import Debounced

from .conftest import SteppedTime, git, wait_until
from .index_helpers import hand_written, land_outside, message, register, send, send_many

PROJECT = "/work/projects/catchup"
QUERIES = ["plan", "release OR outage", '"build plan"', "migrat*", "from:blue", "to:green", "importance:urgent",
           "created:>2026-01-01", "NOT plan", "topic:ops", "thread:t-1"]


def clone(store, tmp_path):
    work = str(tmp_path / "clone")
    git("clone", "-q", store.paths(store.resolve(PROJECT)).archive, work)
    return work


@pytest.fixture
def project(store):
    archive = store.archive(PROJECT, create=True)
    register(archive, "Blue", "Green", "Red")
    send_many(archive, [
        message("Blue", ["Green"], "Build plan", "The build plan covers the migration.", thread_id="t-1"),
        message("Green", ["Blue"], "Re: Build plan", "Release after the migration.", thread_id="t-1"),
        message("Red", ["Blue", "Green"], "Outage", "Rolling back.", importance="urgent", topic="ops"),
    ])
    index = indexer_for(store).project(PROJECT)
    index.catch_up()
    return archive, index


@pytest.fixture
def reopen(home):
    """Open the project's derived state afresh, as another process would; closed after the test."""
    opened = []

    def open_again():
        opened.append(indexer_for(Store(home, background=False)))
        return opened[-1].project(PROJECT)

    yield open_again
    for indexer in opened:
        indexer.close()


# Whoosh leaves the file open when it fails to read a damaged table of contents or segment file (it
# raises before closing it); the file is released with the exception, which Python reports as a leak.
whoosh_leaks_damaged_files = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")


def ids(results):
    return {r["id"] for r in results}


def test_outside_commit_is_searchable_after_catch_up(store, project, tmp_path):
    archive, index = project
    work = clone(store, tmp_path)
    msg = message("Green", ["Blue"], "Handmade", "Typed by a human: wombat.")
    hand_written(work, msg, ["Blue"])
    land_outside(work, "a message written by hand")
    index.catch_up()
    assert ids(index.search("wombat")) == {msg.id}
    assert msg.id in ids(index.inbox("Blue"))
    assert msg.id in ids(index.outbox("Green"))


def test_outside_change_and_delete_are_applied(store, project, tmp_path):
    archive, index = project
    target = index.search("outage")[0]["id"]
    work = clone(store, tmp_path)
    path = os.path.join(work, message_path(target))
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text.replace("Rolling back.", "Rolling forward with a platypus."))
    land_outside(work, "edit a message")
    index.catch_up()
    assert ids(index.search("platypus")) == {target}
    assert target not in ids(index.search('"rolling back"'))

    git("rm", "-q", "-r", "--", *[p for p in tracked(work) if target in p], cwd=work)
    land_outside(work, "delete a message")
    index.catch_up()
    assert index.search("platypus") == []
    assert target not in ids(index.inbox("Blue"))
    assert target not in ids(index.search("NOT nothinglikethis"))


def tracked(work: str) -> list[str]:
    return git("ls-files", cwd=work).split()


def answers(index):
    """Search results and inbox pages; sequence numbers are local history, so left out."""
    inboxes = {"inbox:" + name: [{k: v for k, v in entry.items() if k != "seq"}
                                 for entry in index.inbox(name, limit=100)]
               for name in ("Blue", "Green", "Red")}
    return {q: sorted((r["id"], r["snippet"]) for r in index.search(q, limit=100)) for q in QUERIES} | inboxes


def test_rebuilt_and_incremental_indexes_answer_alike(store, project, tmp_path, home):
    archive, index = project
    for i in range(12):  # one commit each: the incremental path, many small segments
        send(archive, message("Blue", ["Green", "Red"][: 1 + i % 2], f"Update {i}", f"Progress on the plan, step {i}.",
                              importance="urgent" if i % 5 == 0 else "normal", topic="ops" if i % 3 == 0 else None))
        index.catch_up()
    work = clone(store, tmp_path)
    git("rm", "-q", "-r", "--", *[p for p in tracked(work) if "Update 3" in Path(work, p).read_text()], cwd=work)
    land_outside(work, "drop a message")
    index.catch_up()
    incremental = answers(index)
    assert index.search_index.commits >= 12

    index.flush()  # let the background merge finish before deleting the folder under it
    fresh_store = Store(home, background=False)
    shutil.rmtree(fresh_store.paths(fresh_store.resolve(PROJECT)).derived)
    rebuilt = indexer_for(fresh_store).project(PROJECT)
    rebuilt.catch_up()
    assert answers(rebuilt) == incremental
    assert len(incremental["plan"]) == 13  # 2 originals + 11 updates left


def test_rewritten_history_rebuilds_beside_the_old_generation(store, project):
    archive, index = project
    before = index.search_index.live_dir()
    keep = ids(index.search("plan"))
    repo = archive.repo
    tip = repo[archive.tip()]
    # Rewrite: same tree as the tip, but a different parentless commit.
    sig = pygit2.Signature("Human", "human@example.org")
    orphan = repo.create_commit(None, sig, sig, "rewritten history", tip.tree_id, [])
    git("--git-dir", archive.git_dir, "update-ref", "refs/heads/main", str(orphan))
    index.catch_up()
    after = index.search_index.live_dir()
    assert after != before and not os.path.exists(before)
    assert ids(index.search("plan")) == keep
    assert index.meta.watermark() == str(orphan)


def corrupt_files(folder: str) -> int:
    count = 0
    for root, _, files in os.walk(folder):
        for name in files:
            if name == "readers.lock":
                continue
            with open(os.path.join(root, name), "wb") as handle:
                handle.write(b"\x00garbage" * 7)
            count += 1
    return count


@whoosh_leaks_damaged_files
def test_corrupt_search_index_is_rebuilt_on_open(store, project, reopen):
    archive, index = project
    expected = answers(index)
    assert corrupt_files(os.path.join(index.search_index.live_dir(), "whoosh")) > 0
    index.close()
    reopened = reopen()
    assert answers(reopened) == expected


@whoosh_leaks_damaged_files
def test_corrupt_search_index_is_rebuilt_while_open(store, project):
    archive, index = project
    expected = answers(index)
    index.search_index.close()
    corrupt_files(os.path.join(index.search_index.live_dir(), "whoosh"))
    assert answers(index) == expected


def test_corrupt_metadata_is_rebuilt_with_nothing_lost(store, project, reopen):
    archive, index = project
    expected = answers(index)
    index.close()
    with open(index.meta.path, "wb") as handle:
        handle.write(b"this is not a database" * 100)
    reopened = reopen()
    assert answers(reopened) == expected


def test_old_format_and_deleted_state_are_rebuilt(store, project, reopen):
    archive, index = project
    expected = answers(index)
    derived = store.paths(store.resolve(PROJECT)).derived
    index.flush()
    index.close()
    os.makedirs(os.path.join(derived, "index-v0", "junk"))
    shutil.rmtree(index.root)
    reopened = reopen()
    assert answers(reopened) == expected
    assert sorted(os.listdir(derived)) == [os.path.basename(index.root)]


def test_commits_are_taken_in_by_the_background_indexer(store, project):
    archive, index = project
    msg = message("Blue", ["Green"], "Background", "echidna")
    send(archive, msg)
    assert index.flush(10)
    assert not index.meta.has_pending()
    assert index.meta.watermark() == archive.tip()
    # Asked directly (no catch-up on the way), the search index already has it.
    assert ids(index.search_index.search(parse_query("echidna"), 5, None)) == {msg.id}


def test_catch_up_to_an_older_commit_does_not_go_back(store, project):
    archive, index = project
    old = archive.tip()
    send(archive, message("Blue", ["Green"], "Newer", "numbat"))
    index.catch_up()
    index.catch_up(old)
    assert index.meta.watermark() == archive.tip()
    assert len(index.search("numbat")) == 1


def test_unreadable_record_is_skipped_not_fatal(store, project, tmp_path):
    archive, index = project
    work = clone(store, tmp_path)
    good = message("Green", ["Blue"], "Fine", "a readable quoll")
    hand_written(work, good, ["Blue"])
    bad = message("Green", ["Blue"], "Broken", "x")
    path = os.path.join(work, bad.path())
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write("---\nid: [unclosed\n---\nbody quoll\n")
    land_outside(work, "one good, one broken")
    index.catch_up()
    assert ids(index.search("quoll")) == {good.id}


def test_yesterday_message_pulled_today_is_new(store, project, tmp_path):
    archive, index = project
    first = message("Blue", ["Green"], "Today", "written today")
    send(archive, first)
    index.catch_up()
    cursor = index.messages_after("Green", 0, 100)[-1]["seq"]
    assert index.messages_after("Green", 0, 100)[-1]["id"] == first.id
    work = clone(store, tmp_path)
    yesterday = dt.datetime.now(dt.UTC) - dt.timedelta(days=1)
    old = message("Red", ["Green"], "Yesterday", "written offline yesterday", when=yesterday)
    hand_written(work, old, ["Green"])
    land_outside(work, "pulled from a teammate")
    index.catch_up()
    newer = index.messages_after("Green", cursor, 100)
    assert [m["id"] for m in newer] == [old.id]
    assert newer[0]["seq"] > cursor
    assert index.inbox("Green")[0]["id"] == first.id  # inbox order stays by creation time


def test_background_merge_keeps_answers_and_folds_segments(store, project):
    archive, index = project
    index.merger.stop()  # merge by hand below, at a moment the test chooses
    for i in range(10):
        send(archive, message("Green", ["Blue"], f"Note {i}", f"Plan item {i} for the release."))
        index.catch_up()
    before = answers(index)
    assert index.search_index.segment_count() > 2
    assert index.search_index.consolidate() is True
    assert index.search_index.segment_count() <= 2
    assert answers(index) == before


def test_a_search_never_waits_for_a_busy_writer_yet_sees_what_is_queued(store, project, tmp_path):
    archive, index = project
    live = index.search_index.live_dir()
    gone = index.search("outage")[0]["id"]
    other = windex.open_dir(os.path.join(live, "whoosh")).writer()  # stands for another process's writer
    try:
        msg = message("Blue", ["Green"], "Queued", "a bilby arrives")
        send(archive, msg)
        work = clone(store, tmp_path)
        git("rm", "-q", "-r", "--", *[p for p in tracked(work) if gone in p], cwd=work)
        land_outside(work, "delete the outage message")
        # Each search returns while the writer is held (one that waited would never return).
        assert ids(index.search("bilby")) == {msg.id}  # merged in from the queue, not from the index
        assert gone not in ids(index.search("outage OR bilby"))
        assert ids(index.search("bilby", agent="Red")) == set()  # scoping applies to queued messages too
        assert index.meta.has_pending()  # the index itself has not taken them in yet
    finally:
        other.cancel()
    assert index.flush()  # the background drain found the writer busy and tries again after each pause...
    assert not index.meta.has_pending()  # ...until the writer is free and it takes the queue in
    assert ids(index.search("bilby")) == {msg.id}


def test_searches_keep_working_during_a_rebuild_and_old_readers_keep_their_generation(store, project):
    archive, index = project
    send_many(archive, [message("Blue", ["Green"], f"Bulk {i}", f"wallaby number {i}") for i in range(520)])
    index.catch_up()
    old = index.search_index.live_dir()
    building, go = threading.Event(), threading.Event()

    def progress(done, total):
        if done < total and not building.is_set():
            building.set()
            go.wait(30)

    rebuild = threading.Thread(target=index.search_index.rebuild, args=(progress,))
    rebuild.start()
    try:
        assert building.wait(30)
        # Answered from the old generation while the rebuild is held (a search that waited never would be).
        assert len(index.search("wallaby", limit=1000)) == 520
        held = index.search_index._acquire()  # a search still running on the old generation
    finally:
        go.set()
        rebuild.join(60)
    assert index.search_index.live_dir() != old
    assert os.path.isdir(old)  # kept: a reader still has it open
    index.search_index._release(held)
    index.search_index.collect()
    assert not os.path.exists(old)
    assert len(index.search("wallaby", limit=1000)) == 520


@whoosh_leaks_damaged_files
@pytest.mark.parametrize("suffixes", [(".pst",), (".trm",), ("_stored.col",), ("_len.col",), ("created.col",),
                                      (".toc",)])
def test_one_damaged_segment_file_is_noticed_and_rebuilt(store, project, suffixes, reopen):
    archive, index = project
    expected = answers(index)
    index.flush()
    index.close()
    whoosh_dir = os.path.join(index.search_index.live_dir(), "whoosh")
    damaged = [name for name in os.listdir(whoosh_dir) if name.endswith(suffixes)]
    assert damaged
    for name in damaged:
        with open(os.path.join(whoosh_dir, name), "r+b") as handle:
            size = os.path.getsize(handle.name)
            handle.write(b"\xff" * max(size, 1))
    reopened = reopen()
    assert answers(reopened) == expected


def test_the_background_merger_folds_segments_after_a_burst(store, project):
    archive, index = project
    for i in range(8):
        send(archive, message("Green", ["Blue"], f"Burst {i}", f"dingo {i}"))
        index.catch_up()
    assert index.flush(60)
    assert index.search_index.segment_count() <= 2
    assert len(index.search("dingo")) == 8


def test_a_bulk_arrival_is_taken_in_by_a_rebuild(store, project, monkeypatch):
    """A large sync lands as one new generation, not as thousands of updates."""
    from gitmail.index import project as index_project

    archive = store.archive(PROJECT)
    indexer = indexer_for(store)
    index = indexer.project(PROJECT)
    index.catch_up()
    before = index.search_index.live_dir()
    monkeypatch.setattr(index_project, "BULK_REBUILD_MIN", 5)
    send_many(archive, [message("Blue", ["Green"], f"Bulk {i}", f"arrived in bulk number{i}") for i in range(3)])
    index.catch_up()
    assert index.search_index.live_dir() == before, "a small arrival is taken in by updates"
    send_many(archive, [message("Green", ["Red"], f"Bulk {i}", f"arrived in bulk number{i}") for i in range(3, 12)])
    index.catch_up()
    assert index.search_index.live_dir() != before, "a large arrival builds a new generation"
    assert len(index.search("bulk", limit=50)) == 12
    assert [hit["subject"] for hit in index.search("number11")] == ["Bulk 11"]
    indexer.close()


def test_a_burst_of_commits_costs_one_search_index_commit_yet_every_message_is_found(store, project):
    """The metadata follows each commit; the search index takes a burst in as one batch."""
    from gitmail.index.project import DRAIN_MAX_WAIT, DRAIN_QUIET

    archive, index = project
    assert index.flush(30)
    timer = SteppedTime()  # the drainer as the index makes it, with pauses this test ends
    index.drainer = Debounced("drainer", index._drain, delay=DRAIN_QUIET, max_wait=DRAIN_MAX_WAIT, timer=timer)
    before = index.search_index.commits
    sent = []
    for i in range(30):  # commits arrive one by one, as from agents, all within one pause of the drainer
        msg = message("Green", ["Blue"], f"Numbat {i}", f"numbat sighting {i}")
        send(archive, msg)
        sent.append(msg.id)
        if i % 10 == 9:  # searches in the middle of the burst see every message sent so far
            assert ids(index.search("numbat", limit=100)) == set(sent)
    assert index.worker.wait_idle(60)  # the metadata holds all 30, queued for the search index
    assert index.meta.pending_count() == 30 and index.search_index.commits == before
    # End the drainer's pauses (it takes at most DRAIN_MAX_WAIT of them) until it has drained.
    def next_step() -> str | None:
        return "pause" if timer.paused() else None if index.meta.has_pending() else "drained"

    while wait_until(next_step, "the drainer to pause or drain") == "pause":
        timer.end_pause(timer.next_pause())
    assert timer.now <= DRAIN_MAX_WAIT + DRAIN_QUIET
    assert index.flush(30)
    assert not index.meta.has_pending()
    assert index.search_index.commits - before == 1  # not one per commit
    assert ids(index.search_index.search(parse_query("numbat"), 100, None)) == set(sent)


def test_the_in_memory_queue_index_is_extended_then_dropped_after_a_drain(store, project):
    archive, index = project
    index.flush(30)
    index.drainer.stop()  # the test decides when the queue is taken in
    index.worker.stop()
    first = message("Blue", ["Green"], "Quokka one", "quokka first")
    send(archive, first)
    assert ids(index.search("quokka")) == {first.id}
    second = message("Green", ["Blue"], "Quokka two", "quokka second")
    send(archive, second)
    assert ids(index.search("quokka")) == {first.id, second.id}  # the queue index grew by one
    assert ids(index.search("quokka", agent="Red")) == set()
    index.search_index.drain(wait=True)
    assert not index.meta.has_pending()
    assert ids(index.search("quokka")) == {first.id, second.id}  # now from the index alone, without duplicates
    assert len(index.search("quokka")) == 2


def test_a_search_under_way_when_a_merge_deletes_its_segments_still_answers(store, project):
    """A merge deletes the files of the segments it absorbs; a searcher opened before it reads on."""
    from gitmail.index.search import MERGE_AT

    archive, index = project
    for i in range(3):  # small segments: one search-writer commit each
        send(archive, message("Blue", ["Green"], f"Early {i}", f"numbat{i}"))
        index.catch_up()
    held = index.search_index._acquire()  # a search under way on the segments as they are
    whoosh_dir = os.path.join(index.search_index.live_dir(), "whoosh")
    before = set(os.listdir(whoosh_dir))
    for i in range(MERGE_AT + 1):
        send(archive, message("Green", ["Blue"], f"Later {i}", f"quokka{i}"))
        index.catch_up()
    try:
        assert before - set(os.listdir(whoosh_dir)), "the segments were merged and their files deleted"
        hits, _ = index.search_index._run(held.searcher, parse_query("numbat0 OR numbat1"), 10, None, False)
    finally:
        index.search_index._release(held)
    assert sorted(hit["subject"] for hit in hits) == ["Early 0", "Early 1"]


def test_a_searcher_opened_while_a_merge_deletes_its_segments_opens_again(store, project, monkeypatch):
    """Opening lists the segments, then opens their files: a merge in between took some of them away."""
    from gitmail.index import search as search_module

    archive, index = project
    for i in range(3):  # small segments: one search-writer commit each
        send(archive, message("Blue", ["Green"], f"Early {i}", f"numbat{i}"))
        index.catch_up()
    whoosh_dir = os.path.join(index.search_index.live_dir(), "whoosh")
    before = set(os.listdir(whoosh_dir))
    assert index.search("numbat0")  # searched: the next refresh opens a searcher at once
    real_open_columns = search_module._open_columns
    merged: list[set[str]] = []
    opened = []

    def merge_between(searcher):
        opened.append(searcher)
        if len(opened) == 1:  # the first opening has listed the segments: a merge now absorbs them
            for i in range(search_module.MERGE_AT + 1):
                send(archive, message("Green", ["Blue"], f"Later {i}", f"quokka{i}"))
                index.catch_up()
            merged.append(before - set(os.listdir(whoosh_dir)))
        real_open_columns(searcher)

    monkeypatch.setattr(search_module, "_open_columns", merge_between)
    index.search_index.refresh()
    assert merged[0], "the segments the first opening listed were merged and their files deleted"
    assert {hit["subject"] for hit in index.search("numbat0 OR numbat1 OR quokka0")} == {"Early 0", "Early 1",
                                                                                         "Later 0"}
