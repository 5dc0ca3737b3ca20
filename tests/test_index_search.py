"""Search semantics: operators, field filters, dates, scoping, snippets, bad queries."""

from __future__ import annotations

import datetime as dt
import json
import os
import threading

import pytest
from whoosh import index as windex
from whoosh import query as wq

from gitmail import GitmailError, Store
from gitmail.index import indexer_for, search_messages
from gitmail.index.schema import SCHEMA, document
from gitmail.index.search import _Overlay
from gitmail.model.errors import INVALID_ARGUMENT, NOT_FOUND

from .index_helpers import message, register, send, send_many

PROJECT = "/work/projects/search"
UTC = dt.UTC
DAY1 = dt.datetime(2026, 11, 2, 9, 0, tzinfo=UTC)
DAY2 = dt.datetime(2026, 11, 20, 15, 30, tzinfo=UTC)


@pytest.fixture
def corpus(store):
    archive = store.archive(PROJECT, create=True)
    register(archive, "Blue", "Green", "Red", "Gray")
    msgs = {
        "plan": message("Blue", ["Green"], "Build plan for the release", "The build plan covers the database "
                        "migration and the new users table.", when=DAY1, thread_id="TKT-1", topic="release"),
        "users": message("Green", ["Blue"], "Re: Build plan", "Plan looks fine but users need a backfill first.",
                         cc=("Gray",), when=DAY1 + dt.timedelta(hours=1), thread_id="TKT-1", topic="release"),
        "outage": message("Red", ["Blue", "Green"], "Deployment outage", "Production deployment failed; rolling "
                          "back now.", importance="urgent", when=DAY2, topic="ops"),
        "secret": message("Gray", ["Green"], "Quiet note", "The migrations dashboard password rotates Friday.",
                          bcc=("Red",), importance="high", when=DAY2 + dt.timedelta(minutes=5)),
    }
    send_many(archive, list(msgs.values()))
    return {key: msg.id for key, msg in msgs.items()}


def ids(results):
    return {r["id"] for r in results}


def search(store, query, **kw):
    return search_messages(store, PROJECT, query, **kw)


def test_terms_are_anded_and_case_insensitive(store, corpus):
    assert ids(search(store, "PLAN")) == {corpus["plan"], corpus["users"]}
    assert ids(search(store, "plan backfill")) == {corpus["users"]}
    assert ids(search(store, "plan AND backfill")) == {corpus["users"]}


def test_or_not_and_grouping(store, corpus):
    assert ids(search(store, "backfill OR outage")) == {corpus["users"], corpus["outage"]}
    assert ids(search(store, "plan NOT backfill")) == {corpus["plan"]}
    assert ids(search(store, "plan -backfill")) == {corpus["plan"]}
    assert ids(search(store, "(backfill OR outage) AND users")) == {corpus["users"]}
    everything_but = ids(search(store, "NOT plan"))
    assert everything_but == {corpus["outage"], corpus["secret"]}


def test_phrase_differs_from_words(store, corpus):
    assert ids(search(store, '"build plan"')) == {corpus["plan"], corpus["users"]}
    assert ids(search(store, '"plan build"')) == set()
    assert ids(search(store, '"users table"')) == {corpus["plan"]}


def test_prefix(store, corpus):
    assert ids(search(store, "migrat*")) == {corpus["plan"], corpus["secret"]}
    assert ids(search(store, "deploy*")) == {corpus["outage"]}


def test_words_inside_markdown_emphasis_are_found(store, corpus):
    marked = message("Blue", ["Green"], "Friday", "Run **deploy** after the _freeze_ ends, then __tag__ it; "
                     "`snake_case` stays *one* name.")
    send_many(store.archive(PROJECT), [marked])
    for word in ("deploy", "freeze", "tag", "one", "**deploy**", "_freeze_", "snake_case", '"snake case"',
                 "snake_ca*", "subject:friday"):
        assert ids(search(store, word)) == {marked.id}, word
    [hit] = search(store, "freeze")
    assert "_**freeze**_" in hit["snippet"]  # the word marked inside its emphasis
    assert ids(search(store, "deploy*")) == {marked.id, corpus["outage"]}


def test_an_index_of_words_cut_otherwise_is_rebuilt_and_the_metadata_kept(store, corpus, wall):
    index = indexer_for(store).project(PROJECT)
    marked = message("Blue", ["Green"], "Friday", "Run **deploy** now.")
    send_many(store.archive(PROJECT), [marked])
    assert ids(index.search("deploy")) == {marked.id}
    live = index.search_index.live_dir()
    with open(os.path.join(live, "info.json"), encoding="utf-8") as handle:
        info = json.load(handle)
    info["format"] = "7"  # as an index whose words were cut with the asterisks kept wrote it
    with open(os.path.join(live, "info.json"), "w", encoding="utf-8") as handle:
        json.dump(info, handle)
    high = index.meta.high_watermark()
    reopened = Store(store.home, background=False, wall=wall)  # a new process, as after an upgrade
    try:
        again = indexer_for(reopened).project(PROJECT)
        assert ids(again.search("deploy")) == {marked.id}
        assert again.search_index.live_dir() != live  # a new generation, built beside the old one
        assert again.meta.high_watermark() == high  # sequence numbers (agents' cursors) unchanged
    finally:
        indexer_for(reopened).close()


def test_field_filters(store, corpus):
    assert ids(search(store, "from:green")) == {corpus["users"]}
    assert ids(search(store, "to:Blue")) == {corpus["users"], corpus["outage"]}
    assert ids(search(store, "to:gray")) == {corpus["users"]}  # cc counts as a recipient
    assert ids(search(store, "to:red")) == set()  # bcc is never exposed through to:
    assert ids(search(store, "subject:plan")) == {corpus["plan"], corpus["users"]}
    assert ids(search(store, "subject:backfill")) == set()
    assert ids(search(store, 'body:"rolling back"')) == {corpus["outage"]}
    assert ids(search(store, "thread:tkt-1")) == {corpus["plan"], corpus["users"]}
    assert ids(search(store, "topic:ops")) == {corpus["outage"]}
    assert ids(search(store, "importance:urgent")) == {corpus["outage"]}
    assert ids(search(store, "importance:high OR importance:urgent")) == {corpus["outage"], corpus["secret"]}
    assert ids(search(store, "from:gr*")) == {corpus["users"], corpus["secret"]}  # Green and Gray


def test_date_ranges(store, corpus):
    early = {corpus["plan"], corpus["users"]}
    late = {corpus["outage"], corpus["secret"]}
    assert ids(search(store, "created:2026-11-02")) == early
    assert ids(search(store, "created:2026-11")) == early | late
    assert ids(search(store, "created:>2026-11-02")) == late
    assert ids(search(store, "created:>=2026-11-02")) == early | late
    assert ids(search(store, "created:<2026-11-20")) == early
    assert ids(search(store, "created:<=2026-11-20")) == early | late
    assert ids(search(store, "created:[2026-11-01 TO 2026-11-10]")) == early
    assert ids(search(store, "created:2026-11-15..2026-12")) == late
    assert ids(search(store, "created:2026-11-20T15:30:00Z")) == {corpus["outage"]}
    assert ids(search(store, "plan created:2026-11-20")) == set()


def test_results_are_ranked_and_shaped(store, corpus):
    dense = message("Blue", ["Green"], "Kiwi harvest plan", "Kiwi kiwi: the kiwi crop is in.")
    sparse = message("Green", ["Blue"], "Weekly notes", "Many words about many things, " * 20 + "and one kiwi.")
    send_many(store.archive(PROJECT), [sparse, dense])
    ranked = search(store, "kiwi")
    assert [r["id"] for r in ranked] == [dense.id, sparse.id]
    assert ranked[0]["score"] > ranked[1]["score"]
    results = search(store, "plan")
    first = next(r for r in results if r["id"] == corpus["plan"])
    assert set(first) >= {"id", "subject", "importance", "ack_required", "created_ts", "thread_id", "from", "snippet"}
    assert first["subject"] == "Build plan for the release"
    assert first["thread_id"] == "TKT-1" and first["from"] == "Blue"
    assert "**plan**" in first["snippet"] and len(first["snippet"]) < 300
    assert search(store, "plan", limit=1) == results[:1]


def test_snippet_without_body_match_shows_the_start(store, corpus):
    [hit] = search(store, "subject:outage")
    assert hit["snippet"].startswith("Production deployment failed")


def test_scoping_to_an_agent(store, corpus):
    # Red sent the outage and is a bcc recipient of the secret note.
    assert ids(search(store, "migrations OR outage", agent_name="Red")) == {corpus["outage"], corpus["secret"]}
    # Blue sent the plan and received users and outage; never saw the secret note.
    assert ids(search(store, "migrat* OR plan OR outage", agent_name="Blue")) == {
        corpus["plan"], corpus["users"], corpus["outage"]}
    # Gray got users by cc and sent the secret note.
    assert ids(search(store, "plan OR quiet", agent_name="Gray")) == {corpus["users"], corpus["secret"]}
    with pytest.raises(GitmailError) as info:
        search(store, "plan", agent_name="Nobody")
    assert info.value.code == NOT_FOUND


@pytest.mark.parametrize("query, column, words", [
    ('"unclosed phrase', 1, "never closed"),
    ("(plan OR users", 1, "never closed"),
    ("plan)", 5, "no matching"),
    ("plan AND", 6, "needs something after"),
    ("OR plan", 1, "needs a term before"),
    ("plan OR OR users", 9, "needs a term before"),
    ("colour:red", 1, "unknown field"),
    ("from:", 1, "needs a value"),
    ("created:2026-13-40", 1, "not a date"),
    ("created:[2026-01-01 2026-02-01]", 1, "date range"),
    ("created:[2026-01-01 TO", 9, "never closed"),
    ("p*", 1, "prefix"),
    ("mi*d", 1, "only at the end"),
    ("()", 1, "empty parentheses"),
    ("subject:[2026 TO 2027]", 1, "only with created"),
    ("plan ...", 6, "no letters or digits"),
])
def test_malformed_queries_say_where(store, corpus, query, column, words):
    with pytest.raises(GitmailError) as info:
        search(store, query)
    assert info.value.code == INVALID_ARGUMENT
    assert f"column {column}" in info.value.message, info.value.message
    assert words in info.value.message
    assert info.value.data["column"] == column


@pytest.mark.parametrize("query", ["", "   "])
def test_empty_query_is_refused(store, corpus, query):
    with pytest.raises(GitmailError) as info:
        search(store, query)
    assert info.value.code == INVALID_ARGUMENT and "empty" in info.value.message


@pytest.mark.parametrize("limit", [0, -1, 1001, "5", True])
def test_bad_limit_is_refused(store, corpus, limit):
    with pytest.raises(GitmailError) as info:
        search(store, "plan", limit=limit)
    assert info.value.code == INVALID_ARGUMENT and "limit" in info.value.message


def test_unknown_project_is_not_found(store):
    with pytest.raises(GitmailError) as info:
        search_messages(store, "/no/such/project", "plan")
    assert info.value.code == NOT_FOUND


def test_a_sent_message_is_searchable_without_waiting(store, corpus):
    archive = store.archive(PROJECT)
    index = indexer_for(store).project(PROJECT)
    index.search("plan")
    msg = message("Blue", ["Green"], "Zebra crossing", "Fresh words: quokka")
    send(archive, msg)
    # With no other writer busy, a search takes in what is queued before answering.
    assert ids(index.search("quokka")) == {msg.id}


def test_queued_messages_of_several_projects_are_searched_at_once_without_clashing():
    """Each in-memory index of queued messages keeps its own temporary files (Whoosh shares one folder by default)."""
    def make_doc(mid: str) -> dict:
        summary = {"id": mid, "subject": f"queued {mid}", "from": "Blue", "to": ["Green"], "cc": [],
                   "thread_id": mid, "importance": "normal", "created_ts": "2026-01-02T03:04:05.000000Z",
                   "ack_required": False, "topic": None}
        return document(summary, "0" * 40, "waiting for the writer " * 50, ["Green"])

    failures: list[BaseException] = []

    def searcher(k: int) -> None:
        overlay, queued = _Overlay(), []
        try:
            for i in range(40):
                queued.append((i, f"m{k}-{i}"))
                hits = overlay.search(list(queued), make_doc, lambda s: list(s.search(wq.Term("text", "writer"),
                                                                                       limit=None)))
                assert len(hits) == i + 1
        except BaseException as exc:  # noqa: BLE001 - reported below
            failures.append(exc)

    threads = [threading.Thread(target=searcher, args=(k,)) for k in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []


def test_a_search_ranks_the_newest_matches_and_says_so(store, corpus, monkeypatch):
    """Only the newest NEWEST_RANKED matches are ranked by default; exhaustive ranks them all."""
    import gitmail.index.search as search_module

    archive = store.archive(PROJECT)
    # Twelve matches, the older ones denser in the word (so they would win an exhaustive ranking).
    batch = [message("Blue", ["Green"], f"Note {i}", "kiwi " * (12 - i) + "filler " * 30) for i in range(12)]
    for msg in batch:
        send(archive, msg)
    indexer_for(store).project(PROJECT).catch_up()
    monkeypatch.setattr(search_module, "NEWEST_RANKED", 5)
    monkeypatch.setattr(search_module, "FIRST_WINDOW", 1)  # several windows even on a tiny index
    every = search(store, "kiwi", exhaustive=True)
    assert [hit["id"] for hit in every[:3]] == [batch[0].id, batch[1].id, batch[2].id]
    assert not any(hit["bounded"] for hit in every)
    newest = search(store, "kiwi")
    assert [hit["id"] for hit in newest] == [msg.id for msg in batch[7:]]  # the newest five, best first
    assert all(hit["bounded"] for hit in newest)
    assert [hit["score"] for hit in newest] == [hit["score"] for hit in every if hit["id"] in ids(newest)]
    # Fewer matches than the bound: the same answer as an exhaustive search, not bounded.
    few = search(store, "plan OR outage", agent_name="Blue")
    assert few == search(store, "plan OR outage", agent_name="Blue", exhaustive=True)
    assert ids(few) == {corpus["plan"], corpus["users"], corpus["outage"]} and not any(h["bounded"] for h in few)
    # Scoping applies before the bound: Red sees none of the twelve, so its search is complete.
    assert search(store, "kiwi", agent_name="Red") == []


def test_a_segment_looks_for_a_field_without_lengths_once(store, corpus):
    """Whoosh asks a segment for each posting's field length while writing and merging; a field kept
    without lengths (IDs, keywords, dates) used to cost one file lookup per posting."""
    project = indexer_for(store).project(PROJECT)
    project.catch_up()
    index = project.search_index
    index.rebuild()  # one segment, written in one flush
    reader = windex.open_dir(os.path.join(index.live_dir(), "whoosh")).reader()
    try:
        perdoc = reader._perdoc  # the one segment's per-document reader, which answers field lengths
        looked: list[str] = []
        real = perdoc.has_column
        perdoc.has_column = lambda name: looked.append(name) or real(name)
        assert reader.doc_count() == len(corpus)
        lengths = [[reader.doc_field_length(doc, field) for field in ("id", "text", "from")]
                   for doc in range(reader.doc_count())]
    finally:
        reader.close()
    assert all(length[0] == 0 and length[1] > 0 for length in lengths)  # IDs keep no lengths; text does
    assert sorted(looked) == ["_from_len", "_id_len", "_text_len"]  # each field looked for once, not per doc


def test_phrases_match_where_whoosh_matches_them():
    """The phrase matcher finds the same places as Whoosh's span comparison, in every document."""
    import random

    from whoosh.filedb.filestore import RamStorage

    from gitmail.index.search import _phrase_spans, _whoosh_phrase_spans

    rng = random.Random(3)
    ix = RamStorage().create_index(SCHEMA)
    writer = ix.writer()
    for i in range(300):
        writer.add_document(id=f"m{i}", text=" ".join(rng.choices("abc", k=rng.randint(1, 12))))
    writer.commit()
    compared = matched = 0
    with ix.searcher() as searcher:
        for words in (["a", "b"], ["b", "b"], ["a", "b", "c"], ["c", "a", "a", "b"], ["a", "a", "a"]):
            matcher = wq.Phrase("text", words).matcher(searcher)
            both = matcher.child  # every document holding all the words, phrase or not
            while both.is_active():
                ours, whooshs = _phrase_spans(matcher), _whoosh_phrase_spans(matcher)
                assert ours == sorted(whooshs), (words, both.id())
                compared += 1
                matched += bool(ours)
                both.next()
    assert compared > matched > 50
