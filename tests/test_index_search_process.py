"""Search-index writes in a helper process: same index, same queue, nothing lost if the helper fails."""

from __future__ import annotations

import logging
import os
import signal
import sys

import pytest
from whoosh import index as windex
from whoosh.writing import SegmentWriter

from gitmail.index import indexer_for
from gitmail.index.search import WRITER_MB
from gitmail.index.search_process import NICENESS, SearchWriter, SearchWriterFailed, write
from gitmail.storage.maintenance import consolidate

from .conftest import wait_until
from .index_helpers import message, register, send, send_many
from .mcp_harness import call, run
from .test_mcp_mail import pair

pytestmark = pytest.mark.slow  # search-index helper processes (and a real server)

PROJECT = "/work/projects/helper"


@pytest.fixture
def archive(store):
    archive = store.archive(PROJECT, create=True)
    register(archive, "Blue", "Green")
    return archive


def paths(index) -> dict[str, str]:
    return {"git_dir": index.archive.git_dir, "search_root": index.search_index.root, "meta_path": index.meta.path}


def test_background_drains_and_merges_run_in_the_helper_and_every_message_is_found(store, archive):
    indexer = indexer_for(store)
    indexer.write_search_in_child()
    index = indexer.project(PROJECT)
    index.catch_up()
    sent = []
    for i in range(6):
        msg = message("Green", ["Blue"], f"Helper {i}", f"pangolin number{i}")
        send(archive, msg)
        sent.append(msg.id)
        index.catch_up()  # one search-index commit each: segments for the merger
    assert index.flush(60)
    assert index.search_writer.pid is not None
    assert index.search_index.commits == 0 and index.search_index.merges == 0, "this process wrote nothing"
    assert index.meta.pending_count() == 0
    assert {hit["id"] for hit in index.search("pangolin", limit=50)} == set(sent)
    assert index.search_index.segment_count() <= 2, "the helper merged the segments"
    pid = index.search_writer.pid
    assert _niceness(pid) == os.nice(0) + NICENESS, "background work yields to the server"
    indexer.close()
    assert _gone(pid), "closing the indexer stops its helper"


def test_a_search_sees_what_another_process_wrote_without_being_told(store, archive):
    index = indexer_for(store).project(PROJECT)
    index.catch_up()
    assert index.search("wombat") == []  # the shared searcher is open now
    index.worker.stop()  # no background catch-up: this test moves the metadata by hand
    index.drainer.stop()
    msg = message("Blue", ["Green"], "Outside", "a wombat appeared")
    send(archive, msg)
    index._sync()  # noqa: SLF001 - queue the message without draining it here
    writer = SearchWriter()
    try:
        assert writer.run("drain", **paths(index)) == 1
    finally:
        writer.close()
    assert index.meta.pending_count() == 0, "the queue is empty: only the index can answer"
    assert [hit["id"] for hit in index.search("wombat")] == [msg.id]
    assert index.search_index.commits == 0


def test_a_dead_helper_is_replaced_before_the_next_write(store, archive):
    indexer = indexer_for(store)
    indexer.write_search_in_child()
    index = indexer.project(PROJECT)
    send(archive, message("Green", ["Blue"], "First", "echidna one"))
    index.catch_up()
    first = index.search_writer.pid
    assert first is not None
    os.kill(first, signal.SIGKILL)
    os.waitid(os.P_PID, first, os.WEXITED | os.WNOWAIT)  # dead (not yet reaped): the next write must notice
    send_many(archive, [message("Green", ["Blue"], f"Later {i}", f"echidna later{i}") for i in range(3)])
    index.catch_up()
    assert index.search_writer.pid not in (None, first)
    assert index.search_index.commits == 0
    assert len(index.search("echidna", limit=50)) == 4
    indexer.close()


_SERVES_ONE = ("import sys; sys.stdin.readline(); print('{\"ok\": true, \"result\": 1}', flush=True); "
               "sys.stdin.readline()")  # answers one request, then dies on reading the next


def test_a_helper_that_died_unnoticed_is_replaced_for_the_write_at_hand():
    writer = SearchWriter([sys.executable, "-c", _SERVES_ONE])
    request = {"git_dir": "g", "search_root": "s", "meta_path": "m"}
    try:
        assert writer.run("drain", **request) == 1
        first = writer.pid
        assert writer.run("drain", **request) == 1  # the first child died on this one; a new child did it
        assert writer.pid not in (None, first)
    finally:
        writer.close()


def test_if_the_helper_dies_mid_write_this_process_writes_and_nothing_is_lost(store, archive, caplog):
    indexer = indexer_for(store)
    index = indexer.project(PROJECT)
    index.catch_up()
    dies = SearchWriter([sys.executable, "-c", "import sys; sys.stdin.readline()"])  # reads a request, exits
    index.search_writer = dies
    sent = [message("Green", ["Blue"], f"Lost? {i}", f"bilby number{i}") for i in range(3)]
    send_many(archive, sent)
    with caplog.at_level(logging.WARNING, logger="gitmail.index"):
        index.catch_up()
    assert "writing the search index in process" in caplog.text
    assert index.search_index.commits >= 1, "this process took the queue in itself"
    assert index.meta.pending_count() == 0
    assert {hit["id"] for hit in index.search("bilby", limit=50)} == {msg.id for msg in sent}
    indexer.close()
    dies.close()


def test_a_failed_request_is_reported_and_the_helper_serves_the_next(store, archive, tmp_path):
    index = indexer_for(store).project(PROJECT)
    index.catch_up()
    writer = SearchWriter()
    try:
        with pytest.raises(SearchWriterFailed, match="Repository"):
            writer.run("drain", git_dir=str(tmp_path / "no-such-repo"), search_root=str(tmp_path / "search"),
                       meta_path=str(tmp_path / "meta.sqlite"))
        pid = writer.pid
        index.worker.stop()
        index.drainer.stop()
        send(archive, message("Blue", ["Green"], "Next", "a numbat"))
        index._sync()  # noqa: SLF001
        assert writer.run("drain", **paths(index)) == 1
        assert writer.pid == pid
        with pytest.raises(ValueError, match="unknown"):
            writer.run("optimize", **paths(index))
    finally:
        writer.close()


def test_the_server_writes_its_search_index_in_a_helper(server):
    def hits(found):
        return [hit["subject"] for hit in (found["result"] if isinstance(found, dict) else found)]

    async def scenario():
        async with server.client() as client:
            blue, _ = await pair(client, PROJECT)
            # The first search builds the project's search index, empty, in the server itself (a search
            # must answer). What is sent after it is queued and taken in by a background drain.
            assert hits(await call(client, "search_messages", project_key=PROJECT, query="platypus")) == []
            await call(client, "send_message", project_key=PROJECT, sender_name="BlueLake", to=["GreenCastle"],
                       subject="Hello", body_md="a platypus", sender_token=blue["registration_token"])
            return await call(client, "search_messages", project_key=PROJECT, query="platypus")

    assert hits(run(scenario())) == ["Hello"]  # from the queue, before or after the drain
    helpers = wait_until(lambda: [pid for pid in _children(server.proc.pid)
                                  if b"gitmail.index.search_process" in _cmdline(pid)], "the drain's helper process")
    assert len(helpers) == 1


def _children(pid: int) -> list[int]:
    found = []
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/children") as handle:
            found += [int(p) for p in handle.read().split()]
    return found


def _cmdline(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read().replace(b"\0", b" ")
    except FileNotFoundError:
        return b""


def _niceness(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as handle:
        return int(handle.read().rsplit(")", 1)[1].split()[16])


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    with open(f"/proc/{pid}/stat") as handle:
        return handle.read().rsplit(")", 1)[1].split()[0] == "Z"


def test_the_helper_lets_go_of_packs_consolidated_between_its_writes(store, archive):
    index = indexer_for(store).project(PROJECT)
    index.catch_up()
    index.worker.stop()  # the writes below go through the helper only
    index.drainer.stop()
    writer = SearchWriter()
    try:
        for i in range(6):  # a pack per message, each read by the helper's drain
            send(archive, message("Green", ["Blue"], f"Pack {i}", f"armadillo {i}"))
            index._sync()  # noqa: SLF001 - queue the message without draining it here
            assert writer.run("drain", **paths(index)) == 1
        assert consolidate(archive.git_dir, force=True)
        send(archive, message("Green", ["Blue"], "After", "armadillo after"))
        index._sync()  # noqa: SLF001
        assert writer.run("drain", **paths(index)) == 1
        pack_dir = os.path.join(archive.git_dir, "objects", "pack")
        with open(f"/proc/{writer.pid}/maps") as handle:
            held = [line for line in handle if pack_dir in line and "(deleted)" in line]
        assert held == []
    finally:
        writer.close()
    assert len(index.search("armadillo", limit=50)) == 7


def test_a_helper_grown_past_its_memory_limit_is_replaced_between_writes_and_nothing_is_lost(store, archive):
    index = indexer_for(store).project(PROJECT)
    index.catch_up()
    index.worker.stop()  # no background catch-up: this test moves the metadata by hand
    index.drainer.stop()
    writer = SearchWriter(rss_limit=1)  # any child is over the limit once it has written
    try:
        for i in range(2):
            send(archive, message("Blue", ["Green"], f"Big {i}", f"a numbat grew{i}"))
            index._sync()  # noqa: SLF001 - queue the message without draining it here
            assert writer.run("drain", **paths(index)) == 1
            assert writer.pid is None, "stopped after its write, before the next"
        assert writer.replaced == 2
    finally:
        writer.close()
    assert index.meta.pending_count() == 0
    assert len(index.search("numbat", limit=10)) == 2
    roomy = SearchWriter()
    try:
        send(archive, message("Blue", ["Green"], "Small", "a numbat stayed"))
        index._sync()  # noqa: SLF001
        assert roomy.run("drain", **paths(index)) == 1
        assert roomy.pid is not None and roomy.replaced == 0, "a child within the limit is kept"
    finally:
        roomy.close()


def test_drains_and_merges_buffer_a_bounded_share_of_postings_in_memory(store, archive, monkeypatch):
    seen = []
    built = SegmentWriter.__init__

    def spy(self, *args, **kwargs):
        seen.append((type(self).__name__, kwargs.get("limitmb")))
        built(self, *args, **kwargs)

    index = indexer_for(store).project(PROJECT)
    index.catch_up()
    index.worker.stop()
    index.drainer.stop()
    index.merger.stop()
    monkeypatch.setattr(SegmentWriter, "__init__", spy)
    for i in range(2):
        send(archive, message("Blue", ["Green"], f"Seg {i}", f"a quokka {i}"))
        index._sync()  # noqa: SLF001 - queue the message without draining it here
        assert write(index.search_index, "drain") == 1
    assert write(index.search_index, "merge") is True
    # The merge's own segment is written by joining posting lists a term at a time: it buffers no postings.
    assert [name for name, _ in seen] == ["SegmentWriter"] * 3 + ["SegmentMerger"]
    assert {limit for name, limit in seen if name == "SegmentWriter"} == {WRITER_MB} and WRITER_MB < 128  # Whoosh: 128
    assert len(index.search("quokka", limit=10)) == 2


def test_merges_keep_segment_sizes_doubling_and_leave_the_large_ones_alone(store, archive):
    index = indexer_for(store).project(PROJECT)
    index.catch_up()
    index.worker.stop()  # no background work: each drain below makes one segment
    index.drainer.stop()
    index.merger.stop()
    search = index.search_index
    n = 0
    for size in (16, 4, 1):
        send_many(archive, [message("Blue", ["Green"], f"Wallaby {n + k}", f"wallaby {n + k}") for k in range(size)])
        n += size
        index._sync()  # noqa: SLF001 - queue the messages without draining them here
        assert write(search, "drain") == size
    assert search.segment_count() == 3
    assert write(search, "merge") is False, "16, 4, 1 already double: nothing to rewrite"
    largest = max(segments(search), key=lambda seg: seg.doc_count_all()).segment_id()
    send(archive, message("Blue", ["Green"], "Wallaby last", "wallaby last"))
    index._sync()  # noqa: SLF001
    assert write(search, "drain") == 1
    assert write(search, "merge") is True
    assert sorted(seg.doc_count_all() for seg in segments(search)) == [2, 4, 16], "the two single ones were folded"
    assert largest in {seg.segment_id() for seg in segments(search)}, "the large segment was not rewritten"
    assert len(index.search("wallaby", limit=50)) == 22
    reader = windex.open_dir(os.path.join(search.live_dir(), "whoosh")).reader()
    try:
        arrived = [reader.stored_fields(docnum)["data"]["subject"] for docnum in range(reader.doc_count_all())]
    finally:
        reader.close()
    assert arrived == [f"Wallaby {k}" for k in range(21)] + ["Wallaby last"], "documents numbered as they arrived"


def segments(search) -> list:
    """The segments of the live generation of a search index."""
    return windex.open_dir(os.path.join(search.live_dir(), "whoosh"))._segments()  # noqa: SLF001


def _open_under(root: str) -> int:
    """How many of this process's descriptors are open on files under ``root``."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            count += os.readlink(f"/proc/self/fd/{fd}").startswith(root)
        except OSError:
            continue
    return count


def test_writes_nobody_searches_between_open_no_searcher_and_a_search_after_them_sees_them(store, archive):
    indexer = indexer_for(store)
    indexer.write_search_in_child()
    index = indexer.project(PROJECT)
    index.catch_up()
    root = os.path.realpath(index.search_index.root)
    sent = []
    for i in range(4):  # a burst of mail nobody searches: each helper write lets the old searcher go...
        msg = message("Green", ["Blue"], f"Quiet {i}", f"okapi number{i}")
        send(archive, msg)
        sent.append(msg.id)
        index.catch_up()
        assert index.flush(60)
        assert _open_under(root) == 0, "...and opens no new one"
    assert {hit["id"] for hit in index.search("okapi", limit=50)} == set(sent)  # the search opens one
    assert _open_under(root) > 0
    msg = message("Green", ["Blue"], "Seen", "okapi again")
    send(archive, msg)
    index.catch_up()
    assert index.flush(60)
    assert _open_under(root) > 0, "searched since the last write: the write opens the next searcher at once"
    assert msg.id in {hit["id"] for hit in index.search("okapi", limit=50)}
    indexer.close()
