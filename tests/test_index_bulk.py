"""Bulk builds of the search index: the same index, whichever way it was built.

A rebuild writes its segments with :mod:`gitmail.index.bulk`, in worker
processes once the archive is large enough. Whatever the split into parts
and segments, the index must answer exactly what one index written by
Whoosh's own writer answers: the same messages, scores and order, scoped or
not, ranked over the newest matches or over all; messages arriving after the
build, and deletions, must reach every part; and a build that fails half way
leaves the live index as it was until one succeeds.
"""

from __future__ import annotations

import datetime as dt
import glob
import hashlib
import json
import os
import random
import shutil
import signal
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from whoosh import index as windex
from whoosh.codec.whoosh3 import LENGTHS_COLUMN
from whoosh.formats import Positions
from whoosh.util.numeric import byte_to_length

from gitmail import Change
from gitmail.index import bulk, indexer_for, parse_query
from gitmail.index import search as search_module
from gitmail.index.postings import Codec
from gitmail.index.schema import SCHEMA, TEXT_ANALYZER, document
from gitmail.index.search import GENERATION_FORMAT, SearchIndex, newest_matches
from gitmail.mail.delivery import put_message
from gitmail.model.records import message_files

from .index_helpers import message, register, send, send_many

PROJECT = "/work/projects/bulk"
AGENTS = ["Blue", "Green", "Red", "Gray", "Teal", "Plum"]
START = dt.datetime(2026, 9, 1, 8, 0, tzinfo=dt.UTC)
WORDS = ["alpha", "bravo", "delta", "echo", "kilo", "lima", "oscar", "tango", "zulu", "deploy", "rollback",
         "Datenbank", "naïve", "café", "ÉCOLE", "x.y.z", "v2.0", "snake_case"]
QUERIES = ["plan", "quasar", '"build plan"', "migrat*", "from:Red plan", "to:Green migrat*",
           "(plan OR rollback) AND NOT from:Blue", "subject:deploy", "topic:ops", "importance:urgent",
           "created:2026-09", "café", "ÉCOLE", "datenbank OR lima", "x.y.z", "-plan alpha"]
COUNT = 240


def corpus(store) -> list[str]:
    """COUNT messages over 40 days among six agents, with the words the queries ask for; their IDs."""
    rng = random.Random(11)
    archive = store.archive(PROJECT, create=True)
    register(archive, *AGENTS)
    msgs = []
    for i in range(COUNT):
        sender = rng.choice(AGENTS)
        to = rng.sample([a for a in AGENTS if a != sender], rng.randint(1, 2))
        others = [a for a in AGENTS if a != sender and a not in to]
        body = rng.choices(WORDS, k=rng.randint(5, 40))
        for word, share in (("plan", 0.3), ("build plan", 0.05), ("migration", 0.1), ("quasar", 0.02)):
            if rng.random() < share:
                body.insert(rng.randrange(len(body) + 1), word)
        msgs.append(message(sender, to, " ".join(rng.choices(WORDS, k=rng.randint(1, 5))), " ".join(body),
                            cc=tuple(rng.sample(others, 1)) if rng.random() < 0.2 else (),
                            bcc=tuple(rng.sample(others, 1)) if rng.random() < 0.1 else (),
                            importance=rng.choice(["normal", "normal", "high", "urgent"]),
                            topic="ops" if rng.random() < 0.2 else None,
                            when=START + dt.timedelta(hours=4 * i)))
    for start in range(0, COUNT, 60):  # four commits, so sequence numbers come in several catch-ups
        send_many(archive, msgs[start:start + 60])
    return [msg.id for msg in msgs]


def whoosh_built(index, root: str) -> SearchIndex:
    """A search index over the same metadata, written document by document by Whoosh's own writer."""
    gen = os.path.join(root, "gen-reference")
    os.makedirs(os.path.join(gen, "whoosh"))
    ix = windex.create_in(os.path.join(gen, "whoosh"), SCHEMA)
    writer = ix.writer()
    for source in index.meta.sources():
        writer.add_document(**bulk.message_document(index._blob, *source))  # noqa: SLF001
    writer.commit(optimize=True)
    with open(os.path.join(gen, "info.json"), "w", encoding="utf-8") as handle:
        json.dump({"format": GENERATION_FORMAT, "watermark": index.meta.watermark()}, handle)
    os.symlink("gen-reference", os.path.join(root, "current"))
    return SearchIndex(root, index.meta, index._blob)  # noqa: SLF001


def answers(search: SearchIndex) -> list:
    out = []
    for text in QUERIES:
        query = parse_query(text)
        for agent in (None, "Green"):
            for exhaustive in (False, True):
                out.append([(hit["id"], hit["score"], hit["snippet"], hit["bounded"])
                            for hit in search.search(query, 1000, agent, exhaustive=exhaustive)])
    return out


def segment_count(search: SearchIndex) -> int:
    return search.segment_count()


@pytest.fixture
def small_parts(monkeypatch):
    """Parts and segments small enough that the test corpus is split into several of each."""
    monkeypatch.setattr(bulk, "PART_MIN", 50)
    monkeypatch.setattr(bulk, "SEGMENT_POSTINGS", 1500)


def test_a_parallel_build_answers_exactly_as_one_whoosh_index(store, tmp_path, small_parts):
    corpus(store)
    index = indexer_for(store).project(PROJECT)
    index.reindex()
    built = index.search_index
    assert segment_count(built) >= 4, "the build was meant to be split into parts and segments"
    reference = whoosh_built(index, str(tmp_path / "reference"))
    try:
        assert segment_count(reference) == 1
        expected = answers(reference)
        assert any(len(hits) > 50 for hits in expected) and all(expected[1:2])
        assert answers(built) == expected
    finally:
        reference.close()


def test_bulk_segments_are_whoosh_segments(store, tmp_path):
    """The term and posting files are Whoosh's byte for byte; the per-document columns hold the same values.

    (Whoosh's own writer does not write the column file byte for byte the
    same twice, so it is compared by what it holds.)
    """
    corpus(store)
    index = indexer_for(store).project(PROJECT)
    index.catch_up()
    docs = [bulk.message_document(index._blob, *source) for source in index.meta.sources()]  # noqa: SLF001
    whoosh, ours = (_written(tmp_path / name, write, docs) for name, write in (("whoosh", _whoosh_writes),
                                                                                   ("bulk", _bulk_writes)))
    assert whoosh == ours



def _written(folder, write, docs):
    """What ``write`` leaves for ``docs`` in a new index in ``folder``: its files' digests and each document."""
    folder.mkdir()
    ix = windex.create_in(str(folder), SCHEMA)
    write(ix, docs)
    return _digests(folder), _per_document(ix)

@pytest.mark.parametrize("seed", [1, 2, 3])
def test_terms_of_a_few_postings_are_written_as_whoosh_writes_them(tmp_path, seed):
    """Terms with fewer postings than a block keeps apart live in the term table: the same bytes as Whoosh's.

    Words drawn from a large vocabulary, in documents of very different
    lengths, give many terms of one to three postings with different field
    lengths and weights (the statistics such a term's entry records).
    """
    rng = random.Random(seed)
    vocabulary = [f"w{i}" for i in range(400)]
    docs = []
    for i in range(120):
        created = START + dt.timedelta(minutes=37 * i)
        summary = {"id": f"m{i:04d}", "subject": " ".join(rng.choices(vocabulary, k=rng.randint(1, 6))),
                   "from": rng.choice(AGENTS), "to": rng.sample(AGENTS, 2), "cc": [], "thread_id": f"t{i % 7}",
                   "importance": "normal", "ack_required": False, "topic": None,
                   "created_ts": created.strftime("%Y-%m-%dT%H:%M:%S.000Z")}
        body = " ".join(rng.choices(vocabulary, k=rng.choice([1, 3, 30, 300])))
        docs.append(document(summary, f"{i:040x}", body, []))
    whoosh, ours = (_written(tmp_path / name, write, docs) for name, write in (("whoosh", _whoosh_writes),
                                                                                   ("bulk", _bulk_writes)))
    assert whoosh == ours


def _whoosh_writes(ix, docs) -> None:
    writer = ix.writer(compound=False, codec=Codec())
    for doc in docs:
        writer.add_document(**doc)
    writer.commit()


def _bulk_writes(ix, docs) -> None:
    segments = bulk.write_segments(ix, docs)
    writer = ix.writer(compound=False)
    writer.commit(mergetype=lambda _writer, existing: existing + segments)


def _digests(folder) -> dict[str, str]:
    """The term and posting files' digests (their names hold random segment names)."""
    found = {}
    for path in glob.glob(str(folder / "*.trm")) + glob.glob(str(folder / "*.pst")):
        with open(path, "rb") as handle:
            found[path.rsplit(".", 1)[1]] = hashlib.sha256(handle.read()).hexdigest()
    assert set(found) == {"trm", "pst"}
    return found


def _per_document(ix) -> list:
    """Every document's stored fields, field lengths and sortable values, as a reader sees them."""
    with ix.searcher() as searcher:
        reader = searcher.reader()
        scored = [name for name, field in SCHEMA.items() if field.scorable]
        created = reader.column_reader("created")
        return [(reader.stored_fields(docnum), [reader.doc_field_length(docnum, name) for name in scored],
                 created[docnum]) for docnum in range(reader.doc_count_all())]


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("abcXYZ éÉİıßẞ_*.-'0123456789\n\t\u0301ΣςΑ")), max_size=120))
def test_text_is_analyzed_as_whoosh_analyzes_it(text):
    field = SCHEMA["text"]
    assert list(field.format.word_values(text, TEXT_ANALYZER, mode="index")) == \
        list(Positions.word_values(field.format, text, TEXT_ANALYZER, mode="index"))


def test_messages_after_the_build_and_deletions_reach_every_part(store, small_parts):
    ids = corpus(store)
    archive = store.archive(PROJECT)
    index = indexer_for(store).project(PROJECT)
    index.reindex()
    assert segment_count(index.search_index) >= 4
    before = {hit["id"] for hit in index.search("plan", limit=1000, exhaustive=True)}
    # Matches in the first, a middle and the last part and segment built.
    matching = [mid for mid in ids if mid in before]
    gone = [matching[0], matching[len(matching) // 2], matching[-1]]

    def purge(snap):
        change = Change("remove three messages")
        for mid in gone:
            for path in message_files(mid, AGENTS):
                if snap.read(path) is not None:
                    change.delete(path)
        return change

    archive.transact(purge)
    late = message("Teal", ["Green"], "late plan", "plan after the build", when=START - dt.timedelta(days=3))
    send(archive, late)
    index.catch_up()
    after = index.search("plan", limit=1000, exhaustive=True)
    assert {hit["id"] for hit in after} == (before - set(gone)) | {late.id}
    # Taken in last, so the newest document: the first the newest-first ranking looks at.
    reader = index.search_index._acquire()  # noqa: SLF001
    try:
        scored, _ = newest_matches(reader.searcher, parse_query("plan"), 1)
        assert reader.searcher.stored_fields(scored[0][1])["id"] == late.id
    finally:
        index.search_index._release(reader)  # noqa: SLF001


def test_a_failed_build_leaves_the_live_index_and_the_next_one_completes(store, small_parts):
    corpus(store)
    index = indexer_for(store).project(PROJECT)
    index.reindex()
    expected = answers(index.search_index)
    live = index.search_index.live_dir()
    killed = []

    def kill_workers(done: int, total: int) -> None:
        if not killed:
            for pid in _children():
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)

    with pytest.raises(bulk.BulkBuildFailed):
        index.reindex(progress=kill_workers)
    assert len(killed) >= 2
    assert index.search_index.live_dir() == live
    assert answers(index.search_index) == expected  # still answered by the generation that was live
    index.reindex()
    assert index.search_index.live_dir() != live
    assert answers(index.search_index) == expected
    generations = [name for name in os.listdir(index.search_index.root) if "gen-" in name]
    assert generations == [os.path.basename(index.search_index.live_dir())], "a failed build's files were left"


def _children() -> list[int]:
    """This process's bulk-build workers (not its other children, such as multiprocessing's resource tracker)."""
    found = []
    for path in glob.glob(f"/proc/{os.getpid()}/task/*/children"):
        with open(path, encoding="ascii") as handle:
            found += [int(pid) for pid in handle.read().split()]
    return [pid for pid in found if _is_bulk_worker(pid)]


def _is_bulk_worker(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return b"worker_main" in handle.read()
    except FileNotFoundError:
        return False


def test_reads_answer_and_progress_shows_while_a_rebuild_runs(store, small_parts):
    """A rebuild holds no lock an inbox read needs, and says how far it got while it runs."""
    corpus(store)
    indexer = indexer_for(store)
    index = indexer.project(PROJECT)
    index.catch_up()
    assert indexer.rebuilds() == {}
    midway, answered = threading.Event(), threading.Event()
    seen: list[dict[str, tuple[int, int]]] = []

    def hold(done: int, total: int) -> None:
        if not midway.is_set() and done < total:
            seen.append(indexer.rebuilds())
            midway.set()
            assert answered.wait(60), "no inbox page was answered while the rebuild ran"

    rebuilding = threading.Thread(target=index.reindex, kwargs={"progress": hold})
    rebuilding.start()
    try:
        assert midway.wait(60)
        assert len(index.inbox("Green", limit=5)) == 5  # answered while the rebuild waits on us
        answered.set()
    finally:
        answered.set()
        rebuilding.join(120)
    slug = store.resolve(PROJECT)
    assert list(seen[0]) == [slug] and seen[0][slug][1] == COUNT
    assert indexer.rebuilds() == {}


def test_a_posting_list_skips_within_a_block_by_bisection(store):
    """``skip_to`` lands on the first document at or after the target without stepping through the block.

    (Whoosh stepped posting by posting: most of an intersection of a rare
    word with a common one.) Checked against the list read from start to end.
    """
    corpus(store)
    index = indexer_for(store).project(PROJECT)
    index.catch_up()
    reader = windex.open_dir(os.path.join(index.search_index.live_dir(), "whoosh")).reader()
    try:
        every = list(reader.postings("text", b"alpha").all_ids())
        assert len(every) > 128  # more than one block
        rng = random.Random(5)
        for _ in range(20):
            matcher = reader.postings("text", b"alpha")
            steps: list[int] = []
            matcher.next = lambda real=matcher.next, steps=steps: steps.append(1) or real()
            target = 0
            while True:
                target += rng.randint(1, 25)
                expected = next((doc for doc in every if doc >= target), None)
                if expected is None:
                    break
                matcher.skip_to(target)
                assert matcher.id() == expected
            assert steps == []
    finally:
        reader.close()


def test_field_lengths_are_read_from_the_column_once(store):
    corpus(store)
    index = indexer_for(store).project(PROJECT)
    index.catch_up()
    reader = windex.open_dir(os.path.join(index.search_index.live_dir(), "whoosh")).reader()
    try:
        perdoc = reader._perdoc  # noqa: SLF001 - the segment's per-document reader
        column = perdoc._cached_reader("_text_len", LENGTHS_COLUMN)  # noqa: SLF001
        expected = [byte_to_length(column[doc]) for doc in range(reader.doc_count_all())]
        reads = []
        real = column._dbfile.get
        column._dbfile.get = lambda *args: reads.append(args) or real(*args)
        lengths = [reader.doc_field_length(doc, "text") for doc in range(reader.doc_count_all())]
    finally:
        reader.close()
    assert lengths == expected and min(lengths) > 0
    assert len(reads) == 1  # the whole column, once


def test_a_large_arrival_is_taken_in_as_a_segment_and_answers_as_whoosh_updates_would(store, tmp_path,
                                                                                      monkeypatch):
    """A sync's arrival below the rebuild threshold goes in as a segment of its own; the index answers
    exactly as if Whoosh's writer had taken each queued message in, deletions included."""
    monkeypatch.setattr(search_module, "BULK_AT", 20)
    ids = corpus(store)
    archive = store.archive(PROJECT)
    index = indexer_for(store).project(PROJECT)
    for job in (index.worker, index.drainer, index.merger):
        job.stop()  # everything below happens in this thread: no background catch-up, drain or merge
    index.catch_up()
    search = index.search_index
    segments = segment_count(search)
    reference_root = tmp_path / "reference"
    shutil.copytree(search.live_dir(), reference_root / "gen-reference", ignore=shutil.ignore_patterns("*.lock"))
    os.symlink("gen-reference", reference_root / "current")
    rng = random.Random(2)
    later = [message(rng.choice(AGENTS), ["Green"], "later plan", f"plan {i} " + " ".join(rng.choices(WORDS, k=9)),
                     when=START + dt.timedelta(days=60, minutes=i)) for i in range(60)]

    def arrive(snap):
        change = Change("an arrival, and two messages gone")
        for msg in later:
            put_message(change, msg)
        for mid in ids[:2]:
            for path in message_files(mid, AGENTS):
                if snap.read(path) is not None:
                    change.delete(path)
        return change

    archive.transact(arrive)
    index._sync()  # noqa: SLF001 - the metadata moves; the search index has yet to take the queue in
    queued = index.meta.pending()
    assert len(queued) > 60
    ix = windex.open_dir(str(reference_root / "gen-reference" / "whoosh"))
    writer = ix.writer()
    for _, mid in queued:  # what the queue path did before: one update (or delete) per message, in queue order
        source = index.meta.search_source(mid)
        if source is None:
            writer.delete_by_term("id", mid)
        else:
            writer.update_document(**bulk.message_document(index._blob, *source))  # noqa: SLF001
    writer.commit(merge=False)
    index.catch_up()
    assert segment_count(search) == segments + 1  # the arrival's own segment, nothing merged
    reference = SearchIndex(str(reference_root), index.meta, index._blob)  # noqa: SLF001
    try:
        assert answers(search) == answers(reference)
    finally:
        reference.close()


def test_an_index_read_back_from_disk_analyzes_text_in_one_pass(tmp_path, monkeypatch):
    """Workers and catch-ups write through an index opened from disk, whose schema is a copy of ours.

    Its text analyzer is equal to the one the schema declares, not the same
    object; the one-pass analysis must still be taken (Whoosh's own is
    several times slower), with the same postings.
    """
    windex.create_in(str(tmp_path), SCHEMA)
    field = windex.open_dir(str(tmp_path)).schema["text"]
    assert field.analyzer is not TEXT_ANALYZER
    text = "Deploy the v1.2 build: deploy.sh, then snake_case **checks** café ÉCOLE deploy"
    expected = list(Positions.word_values(field.format, text, field.analyzer, mode="index"))

    def whoosh_analysis(*args, **kwargs):
        raise AssertionError("Whoosh's analysis was used for the text analyzer")

    monkeypatch.setattr(Positions, "word_values", whoosh_analysis)
    assert list(field.format.word_values(text, field.analyzer, mode="index")) == expected
