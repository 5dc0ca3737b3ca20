"""Byte budgets of catch-up windows and cursor pages, checked exactly."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from gitmail.server.pages import (
    BUDGET_MAX,
    PREVIEW_BYTES,
    PREVIEWS_TOTAL,
    Entry,
    catch_up_doc,
    compact_page,
    cursor_page,
    cut_utf8,
    dumps,
    wire_size,
)


def entry(seq: int, body: str) -> Entry:
    return Entry(seq, {"id": f"{seq:023d}", "from": "BlueLake", "created_ts": "2026-12-01T10:00:00.000Z",
                       "subject": f"message {seq}", "importance": "normal", "ack_required": False,
                       "thread_id": "t1"}, body)


def test_cut_utf8_never_splits_a_character():
    text = "é" * 10  # two bytes each
    cut, was_cut = cut_utf8(text, 5)
    assert (cut, was_cut) == ("éé", True)
    assert cut_utf8("abc", 3) == ("abc", False)


def test_catch_up_gives_the_newest_messages_the_budget_first():
    entries = [entry(seq, "ü" * 1500 + f" tail {seq}") for seq in range(1, 13)]  # 3000+ bytes each
    doc = catch_up_doc("proj", "BlueLake", entries, high_watermark=12, older=True, next_after=12)
    previews = [m["preview"].encode("utf-8") for m in doc["messages"]]
    assert [m["seq"] for m in doc["messages"]] == list(range(1, 13))  # ascending
    assert all(len(p) <= PREVIEW_BYTES for p in previews)
    assert sum(len(p) for p in previews) <= PREVIEWS_TOTAL
    assert [len(p) for p in previews[-4:]] == [PREVIEW_BYTES] * 4  # the newest four fill the budget
    assert all(len(p) == 0 for p in previews[:-4])
    for message in doc["messages"]:
        assert message["preview_truncated"] is True
        full = message["full_read"]
        assert full["tool"] == "read_messages"
        assert full["arguments"]["after"] == message["seq"] - 1 and full["arguments"]["limit"] == 1
    assert doc["next_after"] == 12 and doc["high_watermark"] == 12 and doc["older_messages"] is True


def test_a_cut_preview_names_a_read_that_returns_the_whole_message():
    entries = [entry(1, "x" * 5000)]
    doc = catch_up_doc("proj", "BlueLake", entries, high_watermark=1, older=False, next_after=1)
    args = doc["messages"][0]["full_read"]["arguments"]
    page = json.loads(cursor_page("proj", "BlueLake", args["after"], entries, False, 1, args["max_output_bytes"]))
    assert page["messages"][0]["body_md"] == "x" * 5000


def test_short_messages_are_shown_whole():
    doc = catch_up_doc("proj", "BlueLake", [entry(1, "hello"), entry(2, "world")], high_watermark=2, older=False,
                       next_after=2)
    assert [m["preview"] for m in doc["messages"]] == ["hello", "world"]
    assert not any("preview_truncated" in m for m in doc["messages"])


bodies = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=900)


@settings(max_examples=60, deadline=None)
@given(st.lists(bodies, min_size=1, max_size=25), st.integers(min_value=1024, max_value=20_000))
def test_a_cursor_page_fits_its_budget_exactly_and_is_as_full_as_possible(texts, budget):
    entries = [entry(seq, text) for seq, text in enumerate(texts, start=1)]
    text = cursor_page("proj", "BlueLake", 0, entries, False, len(entries), budget)
    page = json.loads(text)
    assert wire_size(text) <= budget
    shown = page["messages"]
    assert [m["body_md"] for m in shown] == texts[: len(shown)]  # whole bodies, in order, none skipped
    if shown:
        assert page["next_after"] == shown[-1]["seq"]
    if len(shown) < len(entries):
        assert page["has_more"] is True
        bigger = cursor_page("proj", "BlueLake", 0, entries[: len(shown) + 1], False, len(entries), budget)
        assert len(json.loads(bigger)["messages"]) == len(shown)  # the next message would not have fit
    else:
        assert page["has_more"] is False


awkward = st.text(alphabet=st.sampled_from(['"', "\\", "\n", "\x00", "\x1f", "\x7f", "é", "\u2028", "😀", "a", "/"]),
                  max_size=200)


@settings(max_examples=60, deadline=None)
@given(st.lists(awkward, min_size=1, max_size=10), st.sampled_from([cursor_page, compact_page]))
def test_a_page_fits_a_budget_of_its_own_size_and_not_one_byte_less(texts, make):
    # Pages are measured by counting what quoting adds to their JSON text: exact, escapes and all.
    entries = [entry(seq, text) for seq, text in enumerate(["x" * 1100, *texts], start=1)]
    whole = make("proj", "BlueLake", 0, entries, False, len(entries), BUDGET_MAX)
    size = wire_size(whole)
    assert make("proj", "BlueLake", 0, entries, False, len(entries), size) == whole
    fewer = json.loads(make("proj", "BlueLake", 0, entries, False, len(entries), size - 1))
    assert len(fewer["messages"]) == len(entries) - 1 and fewer["has_more"] is True


def test_a_message_larger_than_the_budget_keeps_the_cursor_and_explains_the_recovery():
    entries = [entry(7, "y" * 3000), entry(8, "z")]
    page = json.loads(cursor_page("proj", "BlueLake", 6, entries, False, 8, 1024))
    assert page["messages"] == [] and page["next_after"] == 6 and page["has_more"] is True
    recovery = page["recovery"]
    assert recovery["arguments"]["after"] == 6 and recovery["arguments"]["limit"] == 1
    budget = recovery["arguments"]["max_output_bytes"]
    retry = json.loads(cursor_page("proj", "BlueLake", 6, entries[:1], True, 8, budget))
    assert retry["messages"][0]["body_md"] == "y" * 3000


def test_a_message_beyond_the_largest_budget_points_at_the_message_resource():
    huge = [entry(3, "w" * (BUDGET_MAX + 10))]
    page = json.loads(cursor_page("proj", "BlueLake", 2, huge, False, 3, BUDGET_MAX))
    assert page["recovery"]["resource"].startswith("resource://message/")


def authored(seq: int, author: str, body: str, **extra: object) -> Entry:
    base = entry(seq, body)
    return Entry(seq, {**base.message, "from": author, **extra}, body)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["BlueLake", "GreenCastle", "RedStone"]), bodies), min_size=1,
                max_size=25), st.integers(min_value=1024, max_value=20_000))
def test_a_compact_page_keeps_the_cursor_rules_and_names_each_author_once(written, budget):
    entries = [authored(seq, author, text) for seq, (author, text) in enumerate(written, start=1)]
    text = compact_page("proj", "Reader", 0, entries, False, len(entries), budget)
    page = json.loads(text)
    assert wire_size(text) <= budget and page["reader"] == "Reader"
    shown = page["messages"]
    assert [(page["authors"][m["by"]], m["body"]) for m in shown] == written[: len(shown)]  # whole, in order
    assert sorted(page["authors"].values()) == sorted({page["authors"][m["by"]] for m in shown})  # once each
    if len(shown) < len(entries):
        bigger = compact_page("proj", "Reader", 0, entries[: len(shown) + 1], False, len(entries), budget)
        assert len(json.loads(bigger)["messages"]) == len(shown)  # the next message would not have fit
    else:
        assert page["has_more"] is False and page["next_after"] == len(entries)


def test_a_compact_page_is_smaller_than_the_full_page_and_leaves_usual_flags_out():
    entries = [authored(seq, "GreenCastle", f"note {seq}", importance="high" if seq == 2 else "normal",
                        ack_required=seq == 3) for seq in range(1, 31)]
    full = cursor_page("proj", "Reader", 0, entries, False, 30, BUDGET_MAX)
    compact = compact_page("proj", "Reader", 0, entries, False, 30, BUDGET_MAX)
    assert wire_size(compact) < 0.75 * wire_size(full)
    messages = json.loads(compact)["messages"]
    assert [m.get("imp") for m in messages[:3]] == [None, "high", None]
    assert [m.get("ack") for m in messages[:4]] == [None, None, True, None]


def test_a_compact_message_larger_than_the_budget_names_the_compact_recovery():
    entries = [authored(7, "GreenCastle", "y" * 3000), authored(8, "GreenCastle", "z")]
    page = json.loads(compact_page("proj", "Reader", 6, entries, False, 8, 1024))
    assert page["messages"] == [] and page["next_after"] == 6 and page["has_more"] is True
    recovery = page["recovery"]
    assert recovery["tool"] == "read_compact" and recovery["arguments"]["after"] == 6
    retry = compact_page("proj", "Reader", 6, entries[:1], True, 8, recovery["arguments"]["max_output_bytes"])
    assert json.loads(retry)["messages"][0]["body"] == "y" * 3000
    huge = [authored(3, "GreenCastle", "w" * (BUDGET_MAX + 10))]
    assert json.loads(compact_page("proj", "Reader", 2, huge, False, 3, BUDGET_MAX))["recovery"]["resource"]


heads = st.fixed_dictionaries(
    {"id": st.text(max_size=30), "from": st.text(min_size=1, max_size=20), "created_ts": st.text(max_size=30)},
    optional={"subject": st.one_of(st.none(), bodies), "thread_id": st.one_of(st.none(), st.text(max_size=30)),
              "importance": st.sampled_from([None, "low", "normal", "high", "urgent"]),
              "ack_required": st.booleans(), "topic": st.one_of(st.none(), st.text(max_size=20))})


@settings(max_examples=300, deadline=None)
@given(heads, bodies, st.integers(min_value=0, max_value=2**63 - 1))
def test_a_compact_message_is_written_exactly_as_its_object_serializes(head, body, seq):
    # A compact page writes each message's JSON out by hand for speed; the page's byte budget is computed
    # from those texts, so each must be the very text the encoder makes of the message's object.
    page = json.loads(compact_page("proj", "Reader", 0, [Entry(seq, head, body)], False, seq, BUDGET_MAX))
    (item,) = page["messages"] or [None]
    if item is None:  # too big for the largest budget: the recovery names the message resource
        assert "resource" in page["recovery"]
        return
    expected = {"seq": seq, "id": head["id"], "by": "a1", "ts": head["created_ts"]}
    expected.update({short: head[key] for key, short in (("subject", "subject"), ("thread_id", "thread"))
                     if key in head})
    if head.get("importance") not in (None, "normal"):
        expected["imp"] = head["importance"]
    if head.get("ack_required"):
        expected["ack"] = True
    if head.get("topic"):
        expected["topic"] = head["topic"]
    expected["body"] = body
    assert item == expected and list(item) == list(expected)
    assert page["authors"] == {"a1": head["from"]}
    text = compact_page("proj", "Reader", 0, [Entry(seq, head, body)], False, seq, BUDGET_MAX)
    assert dumps(json.loads(text)) == text  # byte for byte the encoder's own text


@settings(max_examples=300, deadline=None)
@given(heads, bodies, st.integers(min_value=0, max_value=2**63 - 1))
def test_a_cursor_page_message_is_written_exactly_as_its_object_serializes(head, body, seq):
    entry = Entry(seq, head, body)
    page = json.loads(cursor_page("proj", "Reader", 0, [entry], False, seq, BUDGET_MAX))
    (item,) = page["messages"] or [None]
    if item is None:
        assert "resource" in page["recovery"]
        return
    expected = {"seq": seq, **{key: head[key] for key in ("id", "from", "created_ts", "subject", "importance",
                                                          "ack_required", "thread_id", "topic")
                               if head.get(key) is not None}, "body_md": body}
    assert item == expected and list(item) == list(expected)
    text = cursor_page("proj", "Reader", 0, [entry], False, seq, BUDGET_MAX)
    assert dumps(json.loads(text)) == text
