"""Hot reads from derived state: inbox pages, directory, reservations, receipts, cursors."""

from __future__ import annotations

import datetime as dt
import os
import threading
import time

import pytest

from gitmail import Change, GitmailError, Receipt, Reservation, new_id
from gitmail.index import indexer_for
from gitmail.index.meta import PAGE_CACHE_KIB, Meta
from gitmail.model.clock import HLC, format_ts
from gitmail.model.errors import INVALID_ARGUMENT

from .conftest import git, wait_until
from .index_helpers import hand_written, land_outside, message, register, send, send_many

PROJECT = "/work/projects/cache"
UTC = dt.UTC
T0 = dt.datetime(2026, 11, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def setup(store):
    archive = store.archive(PROJECT, create=True)
    register(archive, "Blue", "Green", "Red")
    msgs = [
        message("Blue", ["Green"], "first", "a", when=T0),
        message("Red", ["Green"], "second", "b", when=T0 + dt.timedelta(hours=1), importance="urgent", topic="ops"),
        message("Blue", ["Red"], "third", "c", cc=("Green",), when=T0 + dt.timedelta(hours=2), importance="high"),
        message("Red", ["Blue"], "fourth", "d", bcc=("Green",), when=T0 + dt.timedelta(hours=3), topic="ops"),
    ]
    send_many(archive, msgs)
    return archive, indexer_for(store).project(PROJECT), msgs


def subjects(rows):
    return [row["subject"] for row in rows]


def mark_read(archive, agent, message_id, *, acked=False):
    stamp = format_ts(dt.datetime.fromtimestamp(archive.wall(), dt.UTC))
    receipt = Receipt(message_id=message_id, agent=agent, hlc=HLC(1, 0, "t"), read_at=stamp,
                      acked_at=stamp if acked else None)
    return archive.transact(lambda snap: Change("read", author=agent).put_record(receipt)).commit


def test_inbox_pages_newest_first_with_filters(setup):
    archive, index, msgs = setup
    assert subjects(index.inbox("Green")) == ["fourth", "third", "second", "first"]
    assert [row["kind"] for row in index.inbox("Green")] == ["bcc", "cc", "to", "to"]
    assert subjects(index.inbox("Green", limit=2)) == ["fourth", "third"]
    assert subjects(index.inbox("Green", urgent_only=True)) == ["third", "second"]
    assert subjects(index.inbox("Green", topic="ops")) == ["fourth", "second"]
    assert subjects(index.inbox("Green", since_ts=format_ts(T0 + dt.timedelta(hours=1)))) == ["fourth", "third"]
    assert subjects(index.inbox("Green", since_ts="2026-11-01T13:00:00+00:00")) == ["fourth", "third"]
    assert subjects(index.inbox("Blue")) == ["fourth"]
    assert index.inbox("Nobody") == []
    row = index.inbox("Green")[0]
    assert row["from"] == "Red" and row["to"] == ["Blue"] and row["cc"] == []  # bcc stays hidden in copies
    assert row["read_at"] is None and row["acknowledged_at"] is None
    assert "body_md" not in row and row["attachments"] == []
    assert subjects(index.inbox("Green", topic="OPS")) == ["fourth", "second"]  # topics compare without case
    assert [row["body_md"] for row in index.inbox("Green", include_bodies=True)] == ["d", "c", "b", "a"]


def test_unread_only_follows_receipts(setup):
    archive, index, msgs = setup
    mark_read(archive, "Green", msgs[3].id)
    mark_read(archive, "Green", msgs[0].id, acked=True)
    mark_read(archive, "Blue", msgs[2].id)  # someone else's receipt changes nothing for Green
    assert subjects(index.inbox("Green", unread_only=True)) == ["third", "second"]
    read = {row["subject"]: row["read_at"] for row in index.inbox("Green")}
    assert read["fourth"] and read["first"] and read["third"] is None
    assert {row["subject"]: row["acknowledged_at"] for row in index.inbox("Green")}["first"]


def test_outbox_shows_bcc_to_the_sender_only(setup):
    archive, index, msgs = setup
    [sent] = [row for row in index.outbox("Red") if row["subject"] == "fourth"]
    assert sent["bcc"] == ["Green"]
    assert subjects(index.outbox("Blue")) == ["third", "first"]


def test_bad_arguments_are_refused(setup):
    archive, index, msgs = setup
    for call in (lambda: index.inbox("Green", since_ts="yesterday"), lambda: index.inbox("Green", limit=0),
                 lambda: index.messages_after("Green", -1), lambda: index.messages_after("Green", 0, limit=5000)):
        with pytest.raises(GitmailError) as info:
            call()
        assert info.value.code == INVALID_ARGUMENT


def test_answers_follow_each_commit_and_are_private_copies(setup):
    archive, index, msgs = setup
    page = index.inbox("Green")
    page[0]["subject"] = "changed by the caller"
    page[0]["to"].append("Mallory")
    assert index.inbox("Green")[0]["subject"] == "fourth"
    assert index.inbox("Green")[0]["to"] == ["Blue"]
    late = message("Blue", ["Green"], "fifth", "e", when=T0 + dt.timedelta(hours=4))
    send(archive, late)
    assert subjects(index.inbox("Green", limit=1)) == ["fifth"]  # the next read reflects the commit at once


def test_hot_reads_are_answered_from_the_cache_until_the_tip_moves(setup, monkeypatch):
    """A repeated read costs a dictionary lookup (its time: benchmarks/bench_index.py)."""
    from gitmail.index import reads

    archive, index, msgs = setup
    computed = []
    inbox = reads.inbox
    monkeypatch.setattr(reads, "inbox", lambda *args, **kwargs: computed.append(1) or inbox(*args, **kwargs))
    first = index.inbox("Green")
    for _ in range(200):
        assert index.inbox("Green") == first
    assert len(computed) == 1
    send(archive, message("Blue", ["Green"], "fifth", "e"))
    assert len(index.inbox("Green")) == len(first) + 1 and len(computed) == 2


def test_agent_directory_hides_secrets(setup):
    archive, index, msgs = setup
    names = [agent.name for agent in index.agents()]
    assert names == ["Blue", "Green", "Red"]
    assert all(agent.token_hash is None for agent in index.agents())


def test_active_reservations(setup):
    archive, index, msgs = setup
    now = dt.datetime.fromtimestamp(archive.wall(), UTC)

    def reservation(pattern, expires, released=None):
        return Reservation(id=new_id(), agent="Blue", path_pattern=pattern, created_ts=format_ts(now),
                           expires_ts=format_ts(expires), hlc=HLC(1, 0, "t"), released_ts=released)

    live = reservation("src/**", now + dt.timedelta(hours=1))
    expired = reservation("docs/*", now - dt.timedelta(minutes=1))
    released = reservation("tests/*", now + dt.timedelta(hours=1), released=format_ts(now))

    def fn(snap):
        change = Change("reserve", author="Blue")
        for r in (live, expired, released):
            change.put_record(r)
        return change

    archive.transact(fn)
    assert [r.path_pattern for r in index.active_reservations(archive.snapshot(), now)] == ["src/**"]
    assert [r.path_pattern for r in index.reservations()] == [r.path_pattern for r in sorted(
        (live, expired, released), key=lambda r: r.id)]


def test_sequences_are_monotonic_and_cursor_reads_page(setup):
    archive, index, msgs = setup
    high = index.high_watermark()
    rows = index.messages_after("Green", 0, 100)
    assert [row["subject"] for row in rows] == ["first", "second", "third", "fourth"]  # tree order at first sight
    seqs = [row["seq"] for row in rows]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs) and seqs[-1] <= high
    page1 = index.messages_after("Green", 0, 2)
    page2 = index.messages_after("Green", page1[-1]["seq"], 2)
    assert [r["id"] for r in page1 + page2] == [r["id"] for r in rows]
    assert index.messages_after("Green", high, 10) == []
    later = []
    for i in range(3):
        msg = message("Red", ["Green"], f"later {i}", "x")
        send(archive, msg)
        later.append(msg.id)
        new_high = index.high_watermark()
        assert new_high > high
        high = new_high
    assert [r["id"] for r in index.messages_after("Green", seqs[-1], 10)] == later
    assert [r["id"] for r in index.messages_after("Red", 0, 10, include_sent=True)][-3:] == later
    newest, older = index.newest_arrivals("Green", 2)
    assert [r["id"] for r in newest] == later[-2:] and older


def test_high_watermark_never_goes_back_after_a_delete(setup, store, tmp_path):
    archive, index, msgs = setup
    high = index.high_watermark()
    work = str(tmp_path / "clone")
    git("clone", "-q", store.paths(store.resolve(PROJECT)).archive, work)
    git("rm", "-q", "-r", "--", *[p for p in git("ls-files", cwd=work).split() if msgs[3].id in p], cwd=work)
    land_outside(work, "drop")
    assert index.high_watermark() == high
    assert msgs[3].id not in {r["id"] for r in index.messages_after("Green", 0, 100)}


def test_wait_wakes_on_a_commit_in_this_process(setup):
    archive, index, msgs = setup
    high = index.high_watermark()
    woke = {}
    # An hour's timeout and poll: only the commit can end this wait while the test runs.
    thread = threading.Thread(target=lambda: woke.update(high=index.wait(3600, after_seq=high, poll=3600)))
    thread.start()
    wait_until(lambda: index._changed._waiters, "the reader to wait")  # noqa: SLF001 - it is asleep on the condition
    send(archive, message("Blue", ["Green"], "wake up", "now"))
    thread.join(60)
    assert not thread.is_alive() and woke["high"] > high


def test_wait_notices_outside_pushes_and_times_out(setup, store, tmp_path):
    archive, index, msgs = setup
    high = index.high_watermark()
    start = time.monotonic()
    assert index.wait(0.3, after_seq=high) == high
    assert time.monotonic() - start >= 0.3  # it waited out its timeout
    work = str(tmp_path / "clone")
    git("clone", "-q", store.paths(store.resolve(PROJECT)).archive, work)
    with open(f"{work}/notes.txt", "w", encoding="utf-8") as handle:
        handle.write("not a record, but the tip moves\n")
    msg = message("Red", ["Green"], "pushed", "from elsewhere")
    hand_written(work, msg, ["Green"])
    timer = threading.Timer(0.2, lambda: land_outside(work, "outside"))
    timer.start()
    assert index.wait(60, after_seq=high, poll=0.1) > high
    timer.join()
    assert index.messages_after("Green", high, 10)[0]["id"] == msg.id


def test_metadata_damaged_while_open_is_rebuilt_on_the_next_read(setup):
    archive, index, msgs = setup
    expected = index.inbox("Green")
    generation = index.meta._generation
    for path in (index.meta.path, index.meta.path + "-journal"):  # a committed store is all in its main file
        if os.path.exists(path):
            size = os.path.getsize(path)
            with open(path, "r+b") as handle:
                handle.write(b"\x00damaged\x00" * (size // 9 + 1))
    send(archive, message("Blue", ["Red"], "unrelated", "moves the tip, so the next read misses the memo"))
    # A thread that had no connection yet reads the file from disk (this one may answer from its page cache).
    answer = {}
    reader = threading.Thread(target=lambda: answer.update(page=index.inbox("Green")))
    reader.start()
    reader.join(30)
    assert answer["page"] == expected
    assert index.meta._generation == generation + 1  # it was noticed, and the file started afresh
    assert index.inbox("Green") == expected


def test_attach_all_opens_every_project(setup, store):
    other = store.archive("/work/projects/other", create=True)
    register(other, "Solo")
    indexer = indexer_for(store)
    assert sorted(indexer.attach_all()) == sorted(store.slugs())
    assert indexer.project("/work/projects/other").agents()[0].name == "Solo"


def test_each_threads_metadata_connection_keeps_a_small_page_cache(tmp_path):
    meta = Meta(str(tmp_path / "meta.sqlite"))
    sizes: list[int] = []
    barrier = threading.Barrier(4)

    def connect() -> None:
        barrier.wait(timeout=30)  # all four threads hold their own connection at once
        sizes.append(meta.db.execute("PRAGMA cache_size").fetchone()[0])

    threads = [threading.Thread(target=connect) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert sizes == [-PAGE_CACHE_KIB] * 4  # negative: KiB, not pages
    assert PAGE_CACHE_KIB < 2000  # SQLite's default is 2,000 KiB a connection


def test_a_store_made_with_a_deleted_journal_is_kept_and_commits_truncate_it(tmp_path):
    path = str(tmp_path / "meta.sqlite")
    meta = Meta(path)
    meta.db.execute("INSERT INTO state VALUES ('probe', 'kept')")
    meta.db.execute("PRAGMA journal_mode=DELETE")  # how stores were written before
    meta.db.close()

    reopened = Meta(path)
    assert reopened.db.execute("SELECT value FROM state WHERE key = 'probe'").fetchone() == ("kept",)  # not rebuilt
    reopened.db.execute("INSERT INTO state VALUES ('second', 'x')")
    # The journal stays as an empty file between commits: no file created, deleted and its folder synced each time.
    assert os.path.getsize(path + "-journal") == 0


def _dump(meta: Meta) -> set[str]:
    return set(meta.db.iterdump())


def test_a_store_filled_from_nothing_builds_its_indexes_at_the_end_to_the_same_store(setup, tmp_path, monkeypatch):
    """A bulk load (indexes dropped, rebuilt after) and a row-by-row load leave identical stores, indexes included."""
    from gitmail.index import meta as meta_module
    from gitmail.index.changes import RecordChange, listing

    archive, _, _ = setup
    repo, tip = archive.repo, archive.tip()
    loaded = {}
    for name, smallest in (("rows", 10**9), ("bulk", 1)):
        monkeypatch.setattr(meta_module, "BULK_LOAD_MIN", smallest)
        loaded[name] = Meta(str(tmp_path / f"{name}.sqlite"))
        assert loaded[name].apply(repo, None, tip, listing(repo, tip), seen_ts="2026-11-02T00:00:00Z", full=True)
    assert _dump(loaded["bulk"]) == _dump(loaded["rows"])
    indexes = {row[0] for row in loaded["bulk"].db.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    assert {"copies_time", "copies_message", "messages_thread", "reservations_open"} <= indexes
    assert loaded["bulk"].db.execute("PRAGMA cache_size").fetchone()[0] == -PAGE_CACHE_KIB

    # A load that fails part-way leaves the store as it was: empty, every index in place, the usual cache.
    failing = Meta(str(tmp_path / "failing.sqlite"))
    before = _dump(failing)
    broken = [*listing(repo, tip), RecordChange(f"messages/2026/11/01/{new_id()}.md", "message", "0" * 40)]
    with pytest.raises(Exception):  # noqa: B017 - whatever the missing blob raises, nothing may be kept
        failing.apply(repo, None, tip, broken, seen_ts="2026-11-02T00:00:00Z", full=True)
    assert _dump(failing) == before
    assert failing.db.execute("PRAGMA cache_size").fetchone()[0] == -PAGE_CACHE_KIB


def test_bodies_are_read_from_the_blob_each_row_names(setup):
    archive, index, msgs = setup
    rows = index.messages_after("Green", 0, 100, shared=True)
    by_id = {m.id: m.body for m in msgs}
    assert index.bodies(rows) == [by_id[row["id"]] for row in rows]
    # A row whose blob this repository never received (a window join) reads as an empty body, not an error.
    missing = {**rows[0], "blob": "0" * 40}
    tree = {**rows[0], "blob": str(archive.repo.head.peel().tree.id)}  # an object, but not a blob
    assert index.bodies([missing, tree, rows[1]]) == ["", "", by_id[rows[1]["id"]]]
