"""Segment merges by joined posting lists: the segment Whoosh's merge writes, and the same answers.

:func:`gitmail.index.merge.merged_segment` writes a merge of segments without
Whoosh's sort of every posting. An index of several segments (written
document by document and by the bulk builder, with deletions in merged and
kept segments, every field of the schema, positions for phrases, stored
fields and length columns) is copied; one copy merges a choice of its
segments through Whoosh's ``add_reader``, the other through the merge
here. The merged segments' term and posting files must be the same bytes,
every document the same stored fields, lengths and sortable values, and
every query the same hits with the same scores in the same order.
"""

from __future__ import annotations

import datetime as dt
import glob
import hashlib
import os
import random
import shutil
import tempfile

from hypothesis import given, settings
from hypothesis import strategies as st
from whoosh import index as windex
from whoosh.reading import SegmentReader

from gitmail.index import bulk, parse_query
from gitmail.index import merge as merge_module
from gitmail.index import search as search_module
from gitmail.index.merge import merged_segment
from gitmail.index.postings import Codec
from gitmail.index.schema import SCHEMA, document
from gitmail.index.search import newest_matches
from gitmail.storage.maintenance import rollup_count

AGENTS = ["Blue", "Green", "Red", "Gray", "Teal", "Plum"]
START = dt.datetime(2026, 9, 1, 8, 0, tzinfo=dt.UTC)
QUERIES = ["plan", "w7", '"build plan"', '"w3 w4"', "w1*", "from:Red plan", "to:Green w2*",
           "(plan OR w9) AND NOT from:Blue", "subject:plan", "topic:ops", "importance:urgent",
           "created:2026-09", "thread:t3", "w250 OR w251 OR w252", "-plan w5"]


def _documents(rng: random.Random, count: int) -> list[dict]:
    """``count`` documents with words from a large vocabulary (many rare terms) and a few common ones."""
    vocabulary = [f"w{i}" for i in range(300)]
    docs = []
    for i in range(count):
        sender = rng.choice(AGENTS)
        created = START + dt.timedelta(minutes=37 * i)
        summary = {"id": f"m{i:05d}", "subject": " ".join(rng.choices(vocabulary + ["plan"], k=rng.randint(1, 5))),
                   "from": sender, "to": rng.sample(AGENTS, rng.randint(1, 2)),
                   "cc": rng.sample(AGENTS, 1) if rng.random() < 0.2 else [], "thread_id": f"t{i % 7}",
                   "importance": rng.choice(["normal", "normal", "high", "urgent"]), "ack_required": i % 3 == 0,
                   "topic": "ops" if rng.random() < 0.2 else None,
                   "created_ts": created.strftime("%Y-%m-%dT%H:%M:%S.000Z")}
        words = rng.choices(vocabulary[:20] if rng.random() < 0.5 else vocabulary, k=rng.choice([1, 3, 30, 200]))
        if rng.random() < 0.3:
            words.insert(rng.randrange(len(words) + 1), "build plan")
        docs.append(document(summary, f"{i:040x}", " ".join(words), rng.sample(AGENTS, rng.randint(0, 2))))
    return docs


def _build(folder: str, rng: random.Random) -> None:
    """An index of several segments, some written by Whoosh's writer, some by the bulk builder, with deletions."""
    os.makedirs(folder)
    ix = windex.create_in(folder, SCHEMA)
    docs = _documents(rng, rng.randint(150, 400))
    at = 0
    while at < len(docs):
        size = rng.choice([1, 2, 5, 20, 60, 150])
        part, at = docs[at:at + size], at + size
        writer = ix.writer(compound=False, codec=Codec())
        for mid in rng.sample([doc["id"] for doc in docs[:at - size]], min(at - size, rng.choice([0, 0, 1, 4]))):
            writer.delete_by_term("id", mid)
        if rng.random() < 0.3:
            built = bulk.write_segments(ix, part)
            writer.commit(mergetype=lambda _writer, existing, built=built: existing + built)
        else:
            for doc in part:
                writer.add_document(**doc)
            writer.commit(merge=False)


def _merge(folder: str, chosen: list[int], join) -> None:
    """Merge the segments at positions ``chosen`` (in that order) into one new last segment."""
    ix = windex.open_dir(folder)
    writer = ix.writer(compound=False, codec=Codec())

    def policy(writer, segments):
        picked = [segments[i] for i in chosen]
        return [seg for seg in segments if seg not in picked] + join(writer, picked)

    writer.commit(mergetype=policy)


def _whoosh_join(writer, segments) -> list:
    for segment in segments:
        reader = SegmentReader(writer.storage, writer.schema, segment)
        writer.add_reader(reader)
        reader.close()
    return []  # Whoosh lists the writer's own new segment last


def _our_join(writer, segments) -> list:
    return [merged_segment(writer, segments)]


def _seen(folder: str) -> tuple:
    """The merged (last) segment's term and posting files' digests, every document, and every query's answers."""
    ix = windex.open_dir(folder)
    last = ix._segments()[-1]  # noqa: SLF001
    digests = {}
    for path in glob.glob(os.path.join(folder, f"*{last.segment_id()}*")):
        if path.endswith((".trm", ".pst")):
            with open(path, "rb") as handle:
                digests[path.rsplit(".", 1)[1]] = hashlib.sha256(handle.read()).hexdigest()
    assert set(digests) == {"trm", "pst"}
    with ix.searcher() as searcher:
        reader = searcher.reader()
        scored = [name for name, field in SCHEMA.items() if field.scorable]
        created = reader.column_reader("created")
        per_doc = [(reader.is_deleted(docnum) or reader.stored_fields(docnum),
                    [reader.doc_field_length(docnum, name) for name in scored], created[docnum])
                   for docnum in range(reader.doc_count_all())]
        answers = []
        for text in QUERIES:
            query = parse_query(text)
            answers.append([(hit.docnum, hit.score, hit["id"]) for hit in searcher.search(query, limit=None)])
            answers.append(newest_matches(searcher, query, 20))
        segments = [seg.doc_count() for seg in ix._segments()]  # noqa: SLF001
    return digests, per_doc, answers, segments


def _compare(seed: int, picks: list[int]) -> None:
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory() as root:
        original = os.path.join(root, "original")
        _build(original, rng)
        count = len(windex.open_dir(original)._segments())  # noqa: SLF001
        chosen = list(dict.fromkeys(pick % count for pick in picks)) or [0]
        seen = []
        for name, join in (("whoosh", _whoosh_join), ("ours", _our_join)):
            folder = os.path.join(root, name)
            shutil.copytree(original, folder)
            _merge(folder, chosen, join)
            seen.append(_seen(folder))
        whoosh, ours = seen
        assert any(whoosh[2]), "the queries were meant to find something"
        assert ours == whoosh


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10**6), picks=st.lists(st.integers(0, 50), min_size=1, max_size=8))
def test_a_joined_merge_writes_the_segment_whoosh_writes(seed, picks):
    _compare(seed, picks)


def test_every_segment_merged_with_deletions_in_each(monkeypatch):
    """All segments at once; the term tables read in chunks smaller than some of their entries."""
    monkeypatch.setattr(merge_module, "_CHUNK", 40)
    for seed in (1, 2, 3):
        _compare(seed, list(range(50)))


def test_the_index_merge_policy_joins_lists_and_writes_what_whoosh_writes(tmp_path, monkeypatch):
    """The search index's merge policy (consolidation, and a drain past MERGE_AT) goes through the join."""
    joined = []
    real = search_module.merge.merged_segment
    monkeypatch.setattr(search_module.merge, "merged_segment",
                        lambda writer, segments: joined.append(len(segments)) or real(writer, segments))

    def whoosh_geometric(writer, segments):  # the same choice, in the same order, merged by Whoosh
        ordered = sorted(segments, key=lambda seg: seg.doc_count_all())
        folded = ordered[:rollup_count([seg.doc_count_all() for seg in ordered])]
        kept = [seg for seg in segments if seg not in folded]
        return kept + _whoosh_join(writer, [seg for seg in segments if seg in folded])

    original = str(tmp_path / "original")
    _build(original, random.Random(5))
    seen = []
    for name, policy in (("whoosh", whoosh_geometric), ("ours", search_module._merge_geometric)):  # noqa: SLF001
        folder = str(tmp_path / name)
        shutil.copytree(original, folder)
        writer = windex.open_dir(folder).writer(compound=False, codec=Codec())
        writer.commit(mergetype=policy)
        seen.append(_seen(folder))
    assert joined and joined[0] > 1, "the geometric policy merged something"
    assert seen[1] == seen[0]
