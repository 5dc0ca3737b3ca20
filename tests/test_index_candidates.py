"""Intersections read from posting lists' document numbers: the same matches and scores as the leapfrog.

:mod:`gitmail.index.candidates` narrows each window of the newest-first scan
to the documents every required part of a query holds; the matcher then
scores only those. Over indexes of several segments (with deletions, words
from a large vocabulary, phrases), every query, alone and scoped to one
agent's visible mail, must rank the same documents with the same scores
whether the scan narrows or not.
"""

from __future__ import annotations

import os
import random
import tempfile

from hypothesis import given, settings
from hypothesis import strategies as st
from whoosh import index as windex
from whoosh import query as wq

from gitmail.index import candidates, parse_query
from gitmail.index import search as search_module
from gitmail.index.search import newest_matches

from .test_index_merge import QUERIES, _build

MORE = ["to:Green w1*", "from:Red to:Blue", "w1* w2*", '"build plan" to:Red', "plan -from:Blue w3",
        "(w1 OR w2) to:Teal", "nosuchword to:Red", "w1* AND NOT to:Blue"]


def _answers(searcher, narrow: bool) -> list:
    search_module.PREFILTER = narrow
    try:
        out = []
        for text in QUERIES + MORE:
            query = parse_query(text)
            for scoped in (query, wq.Require(query, wq.Term("visible", "red"))):
                for newest in (5, 1000):
                    out.append((text, newest, newest_matches(searcher, scoped, newest)))
        return out
    finally:
        search_module.PREFILTER = True


@settings(max_examples=4, deadline=None)
@given(seed=st.integers(0, 10**6))
def test_narrowed_windows_rank_what_the_leapfrog_ranks(seed):
    with tempfile.TemporaryDirectory() as root:
        folder = os.path.join(root, "ix")
        _build(folder, random.Random(seed))
        with windex.open_dir(folder).searcher() as searcher:
            assert _answers(searcher, True) == _answers(searcher, False)


def test_which_queries_narrow_and_what_they_read():
    assert candidates.intersects(parse_query("to:Green w1*"))
    assert candidates.intersects(parse_query("(w1 OR w2) from:Red"))
    assert not candidates.intersects(parse_query('"build plan" from:Red'))  # words alone leapfrog fast
    assert not candidates.intersects(parse_query("plan"))  # one part: the matcher alone is as fast
    assert not candidates.intersects(parse_query("plan -from:Blue"))  # a negation reads nothing
    assert candidates.intersects(wq.Require(parse_query("w1*"), wq.Term("visible", "red")))


def test_the_candidates_of_an_intersection_are_exactly_its_matches_without_negations(tmp_path):
    folder = str(tmp_path / "ix")
    _build(folder, random.Random(5))
    with windex.open_dir(folder).searcher() as searcher:
        for text in ("to:Green w1*", "from:Red to:Blue", "(w1 OR w2) to:Teal", "nosuchword to:Red"):
            query = parse_query(text)
            for leaf, _ in searcher.leaf_searchers():  # each leaf numbers its documents from 0
                size = leaf.doc_count_all()
                found = candidates.candidates(query, leaf.reader(), size // 3, size)
                matched = [hit.docnum for hit in leaf.search(query, limit=None) if hit.docnum >= size // 3]
                deleted = {docnum for docnum in range(size) if leaf.reader().is_deleted(docnum)}
                assert [docnum for docnum in found if docnum not in deleted] == sorted(matched), text
