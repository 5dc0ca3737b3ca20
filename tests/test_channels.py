"""Channels through the library: create (idempotent), list, post, read by sequence, and every refusal."""

from __future__ import annotations

import pytest

from gitmail.index import indexer_for
from gitmail.model.records import MAX_POST_BYTES, Channel, ChannelPost, channel_path, placed, post_path
from gitmail.storage.engine import Change

from .conftest import fails_cleanly
from .mail_helpers import PROJECT, make_mail, open_agents


@pytest.fixture
def mail(store):
    mail = make_mail(store)
    open_agents(mail, "BlueLake", "GreenCastle", "RedStone")
    return mail


def test_a_channel_is_made_once_and_an_identical_retry_returns_it_unchanged(store, mail):
    made = mail.create_channel(PROJECT, "BlueLake", "#Deploys", purpose="what ships", idempotency_key="k1")
    assert made["created"] is True
    assert made["channel"] == {"name": "deploys", "purpose": "what ships", "created_by": "BlueLake",
                               "created_ts": made["channel"]["created_ts"], "posts": 0}
    tip = store.archive(PROJECT).tip()
    again = mail.create_channel(PROJECT, "BlueLake", "deploys", purpose="what ships", idempotency_key="k1")
    assert again["created"] is False and again["channel"] == made["channel"]
    assert store.archive(PROJECT).tip() == tip  # a replay writes nothing
    record = store.archive(PROJECT).snapshot().load(channel_path("deploys"), Channel)
    assert record is not None and record.created_by == "BlueLake"


def test_a_key_reused_for_another_request_is_a_conflict(store, mail):
    mail.create_channel(PROJECT, "BlueLake", "deploys", idempotency_key="k1")
    with fails_cleanly(store, "IDEMPOTENCY_CONFLICT", PROJECT) as info:
        mail.create_channel(PROJECT, "BlueLake", "reviews", idempotency_key="k1")
    assert info.value.data["channel"] == "deploys"
    with fails_cleanly(store, "ALREADY_EXISTS", PROJECT):
        mail.create_channel(PROJECT, "GreenCastle", "deploys")


def test_posts_are_numbered_in_order_and_read_after_a_cursor(store, mail):
    mail.create_channel(PROJECT, "BlueLake", "deploys")
    posted = [mail.post_channel(PROJECT, name, "deploys", f"step {i}")
              for i, name in enumerate(["BlueLake", "GreenCastle", "RedStone", "BlueLake"])]
    assert [p["seq"] for p in posted] == [1, 2, 3, 4]
    record = store.archive(PROJECT).snapshot().load(post_path("deploys", posted[1]["id"]), ChannelPost)
    assert record is not None and record.sender == "GreenCastle" and record.body == "step 1"
    first = mail.read_channel(PROJECT, "RedStone", "deploys", after=0, limit=3)
    assert [p["body_md"] for p in first["posts"]] == ["step 0", "step 1", "step 2"]
    assert first["has_more"] is True and first["next_after"] == 3 and first["reader"] == "RedStone"
    rest = mail.read_channel(PROJECT, "RedStone", "deploys", after=first["next_after"])
    assert [(p["seq"], p["from"]) for p in rest["posts"]] == [(4, "BlueLake")]
    assert rest["has_more"] is False and rest["next_after"] == rest["high_watermark"] == 4
    listed = mail.list_channels(PROJECT, "GreenCastle")["channels"]
    assert [(c["name"], c["posts"]) for c in listed] == [("deploys", 4)]


def test_catch_up_shows_the_newest_posts_and_a_cursor_past_them(mail):
    mail.create_channel(PROJECT, "BlueLake", "deploys")
    for i in range(10):
        mail.post_channel(PROJECT, "BlueLake", "deploys", f"post {i}")
    caught = mail.catch_up_channel(PROJECT, "GreenCastle", "deploys")
    assert [p["seq"] for p in caught["posts"]] == list(range(3, 11))  # the newest 8, oldest first
    assert caught["older_posts"] is True and caught["next_after"] == 10
    assert mail.read_channel(PROJECT, "GreenCastle", "deploys", after=10)["posts"] == []


@pytest.mark.parametrize("call, code, field", [
    (lambda m: m.create_channel(PROJECT, "BlueLake", "no spaces"), "INVALID_ARGUMENT", "channel"),
    (lambda m: m.create_channel(PROJECT, "BlueLake", "x" * 65), "INVALID_ARGUMENT", "channel"),
    (lambda m: m.create_channel(PROJECT, "BlueLake", "ok", purpose="two\nlines"), "INVALID_ARGUMENT", "purpose"),
    (lambda m: m.post_channel(PROJECT, "BlueLake", "nowhere", "hi"), "NOT_FOUND", "channel"),
    (lambda m: m.post_channel(PROJECT, "BlueLake", "deploys", "x" * (MAX_POST_BYTES + 1)), "INVALID_ARGUMENT",
     "body_md"),
    (lambda m: m.post_channel(PROJECT, "BlueLake", "deploys", "  "), "INVALID_ARGUMENT", "body_md"),
    (lambda m: m.post_channel(PROJECT, "Stranger", "deploys", "hi"), "NOT_FOUND", "agent_name"),
    (lambda m: m.read_channel(PROJECT, "Stranger", "deploys"), "NOT_FOUND", "agent_name"),
    (lambda m: m.read_channel(PROJECT, "BlueLake", "nowhere"), "NOT_FOUND", "channel"),
    (lambda m: m.read_channel(PROJECT, "BlueLake", "deploys", after=-1), "INVALID_ARGUMENT", "after"),
    (lambda m: m.catch_up_channel(PROJECT, "BlueLake", "deploys", limit=13), "INVALID_ARGUMENT", "limit"),
])
def test_bad_requests_are_refused_with_a_code_and_change_nothing(store, mail, call, code, field):
    mail.create_channel(PROJECT, "BlueLake", "deploys")
    with fails_cleanly(store, code, PROJECT) as info:
        call(mail)
    assert info.value.data.get("field") == field


def test_a_retired_agent_is_no_member(store, mail):
    mail.create_channel(PROJECT, "BlueLake", "deploys")
    mail.retire_agent(PROJECT, "RedStone")
    with fails_cleanly(store, "AGENT_INACTIVE", PROJECT):
        mail.post_channel(PROJECT, "RedStone", "deploys", "hi")
    with fails_cleanly(store, "AGENT_INACTIVE", PROJECT):
        mail.read_channel(PROJECT, "RedStone", "deploys")


def test_a_cursor_beyond_the_channel_is_refused(store, mail):
    mail.create_channel(PROJECT, "BlueLake", "deploys")
    mail.post_channel(PROJECT, "BlueLake", "deploys", "one")
    with fails_cleanly(store, "CURSOR_AHEAD", PROJECT) as info:
        mail.read_channel(PROJECT, "BlueLake", "deploys", after=2)
    assert info.value.data == {"after": 2, "high_watermark": 1, "channel": "deploys"}


def test_a_late_older_post_is_numbered_after_the_cursor_and_no_number_moves(store, mail):
    """A post written offline before the others arrives last: a reader past them still reads it."""
    mail.create_channel(PROJECT, "BlueLake", "deploys")
    early = ChannelPost(id=store.clock.new_id(), channel="deploys", sender="GreenCastle",
                        created_ts=store.clock.now_ts(), body="written offline first")
    later = [mail.post_channel(PROJECT, "BlueLake", "deploys", f"post {i}")["id"] for i in range(3)]
    read = mail.read_channel(PROJECT, "BlueLake", "deploys")
    assert [p["seq"] for p in read["posts"]] == [1, 2, 3]
    store.archive(PROJECT).transact(lambda snap: Change("arrives late", author="GreenCastle").put_record(early))
    after = mail.read_channel(PROJECT, "BlueLake", "deploys", after=3)["posts"]
    assert [(p["seq"], p["id"]) for p in after] == [(4, early.id)]  # the cursor at 3 skips nothing
    numbered = [(p["seq"], p["id"]) for p in mail.read_channel(PROJECT, "BlueLake", "deploys")["posts"]]
    assert numbered == list(enumerate([*later, early.id], 1))  # the numbers given before stay
    indexer_for(store).project(PROJECT).reindex()  # a rebuild numbers every post afresh, each once
    again = [(p["seq"], p["id"]) for p in mail.read_channel(PROJECT, "BlueLake", "deploys")["posts"]]
    assert [seq for seq, _ in again] == [1, 2, 3, 4] and sorted(post for _, post in again) == sorted([early.id, *later])


def test_posts_of_an_archive_at_layout_1_move_with_migrate_and_keep_their_numbers(store):
    mail = make_mail(store, layout=1)
    open_agents(mail, "BlueLake")
    mail.create_channel(PROJECT, "BlueLake", "deploys")
    ids = [mail.post_channel(PROJECT, "BlueLake", "deploys", f"post {i}")["id"] for i in range(3)]
    snap = store.archive(PROJECT).snapshot()
    assert all(snap.exists(placed(post_path("deploys", i), 1)) for i in ids)  # where layout 1 keeps them
    assert mail.migrate_project(PROJECT)["migrated"] is True
    tree = store.archive(PROJECT).snapshot()
    assert all(tree.blob_id(post_path("deploys", i)) is not None for i in ids)
    assert [(p["seq"], p["id"]) for p in mail.read_channel(PROJECT, "BlueLake", "deploys")["posts"]] == \
        list(enumerate(ids, 1))


def test_search_finds_literal_text_by_the_channel_cursor_a_bounded_number_at_a_time(store, mail):
    mail.create_channel(PROJECT, "BlueLake", "deploys")
    posts = [ChannelPost(id=store.clock.new_id(), channel="deploys", sender="BlueLake", created_ts=store.clock.now_ts(),
                         body=f"deploy {i}" + (" — Needle (x)" if i in (5, 150, 151, 229) else ""))
             for i in range(230)]

    def write(snap):
        change = Change("230 posts at once", author="BlueLake")
        for post in posts:
            change.put_record(post)
        return change

    store.archive(PROJECT).transact(write)
    pages, after = [], 0
    while True:
        page = mail.search_channel(PROJECT, "GreenCastle", "deploys", "needle (X)", after=after)
        pages.append(([p["seq"] for p in page["posts"]], page["has_more"], page["next_after"]))
        after = page["next_after"]
        if not page["has_more"]:
            break
    assert pages == [([6], True, 100), ([151, 152], True, 200), ([230], False, 230)]  # 100 looked at per call
    first = mail.search_channel(PROJECT, "GreenCastle", "deploys", "needle", limit=1, after=100)
    assert ([p["seq"] for p in first["posts"]], first["has_more"], first["next_after"]) == ([151], True, 151)


def test_a_search_needs_a_query_of_literal_text(store, mail):
    mail.create_channel(PROJECT, "BlueLake", "deploys")
    for query in ("", "x" * 1001):
        with fails_cleanly(store, "INVALID_ARGUMENT", PROJECT) as info:
            mail.search_channel(PROJECT, "GreenCastle", "deploys", query)
        assert info.value.data["field"] == "query"
