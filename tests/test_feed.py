"""An agent's feed through the library: catch-up, cursor pages, the cursor rule and long-poll timeouts."""

from __future__ import annotations

import pytest

from gitmail.model.clock import format_ts

from .conftest import fails_cleanly
from .mail_helpers import PROJECT, make_mail, open_agents, send


@pytest.fixture
def mail(store):
    mail = make_mail(store)
    open_agents(mail, "BlueLake", "GreenCastle", "RedStone")
    return mail


def test_catch_up_shows_the_newest_arrivals_oldest_first_with_a_cursor(mail):
    sent = [send(mail, "BlueLake", ["GreenCastle"], f"note {i}", f"body {i}") for i in range(5)]
    send(mail, "BlueLake", ["RedStone"], "not for Green")
    caught = mail.catch_up(PROJECT, "greencastle", limit=3)  # names compare without case
    assert caught["agent"] == "GreenCastle"
    assert [m["id"] for m in caught["messages"]] == [m["id"] for m in sent[2:]]
    assert [m["body_md"] for m in caught["messages"]] == ["body 2", "body 3", "body 4"]
    seqs = [m["seq"] for m in caught["messages"]]
    assert seqs == sorted(seqs) and caught["older_messages"] is True
    assert caught["next_after"] == caught["high_watermark"] >= seqs[-1]  # Red's message is skipped too
    assert mail.read_messages(PROJECT, "GreenCastle", after=caught["next_after"])["messages"] == []


def test_cursor_pages_continue_where_the_last_one_stopped(mail):
    sent = [send(mail, "BlueLake", ["GreenCastle"], f"note {i}") for i in range(3)]
    send(mail, "GreenCastle", ["RedStone"], "Green's own mail is not in its feed")
    first = mail.read_messages(PROJECT, "GreenCastle", after=0, limit=2)
    assert [m["id"] for m in first["messages"]] == [m["id"] for m in sent[:2]]
    assert first["has_more"] is True and first["next_after"] == first["messages"][-1]["seq"]
    rest = mail.read_messages(PROJECT, "GreenCastle", after=first["next_after"], limit=2)
    assert [m["id"] for m in rest["messages"]] == [sent[2]["id"]]
    assert rest["has_more"] is False and rest["next_after"] == rest["high_watermark"]  # skips other agents' records
    later = send(mail, "BlueLake", ["GreenCastle"], "later")
    assert [m["id"] for m in mail.read_messages(PROJECT, "GreenCastle", after=rest["next_after"])["messages"]] == [
        later["id"]]


def test_a_page_is_the_readers_own_though_the_index_shares_its_rows(mail):
    send(mail, "BlueLake", ["GreenCastle", "RedStone"], "to two")
    first = mail.read_messages(PROJECT, "GreenCastle", after=0)
    first.messages[0].to.append("Intruder")  # a caller changing what it was handed...
    again = mail.read_messages(PROJECT, "GreenCastle", after=0)  # ...the same page, from the index's memo
    assert again.messages[0].to == ["GreenCastle", "RedStone"] and again["messages"][0]["to"] == again.messages[0].to


def test_a_cursor_this_machine_never_handed_out_is_refused(store, mail):
    send(mail, "BlueLake", ["GreenCastle"])
    high = mail.catch_up(PROJECT, "GreenCastle")["high_watermark"]
    with fails_cleanly(store, "CURSOR_AHEAD", PROJECT) as info:
        mail.read_messages(PROJECT, "GreenCastle", after=high + 1)
    assert info.value.data == {"after": high + 1, "high_watermark": high}


@pytest.mark.parametrize("call, field", [
    (lambda mail: mail.catch_up(PROJECT, "GreenCastle", limit=13), "limit"),
    (lambda mail: mail.read_messages(PROJECT, "GreenCastle", limit=0), "limit"),
    (lambda mail: mail.read_messages(PROJECT, "GreenCastle", after=-1), "after"),
    (lambda mail: mail.read_messages(PROJECT, "GreenCastle", after="3"), "after"),
    (lambda mail: mail.read_messages(PROJECT, "GreenCastle", wait_seconds=26), "wait_seconds"),
])
def test_bad_arguments_name_the_field(store, mail, call, field):
    with fails_cleanly(store, "INVALID_ARGUMENT", PROJECT) as info:
        call(mail)
    assert info.value.data["field"] == field


def test_an_unknown_agent_is_not_found(store, mail):
    with fails_cleanly(store, "NOT_FOUND", PROJECT):
        mail.catch_up(PROJECT, "Nobody")


def test_a_wait_that_times_out_returns_an_empty_page(mail):
    send(mail, "BlueLake", ["GreenCastle"])
    start = mail.catch_up(PROJECT, "GreenCastle")["next_after"]
    page = mail.read_messages(PROJECT, "GreenCastle", after=start, wait_seconds=0.05)
    assert page["messages"] == [] and page["has_more"] is False and page["next_after"] == start


def test_reading_the_feed_counts_as_the_agents_activity(mail, wall):
    wall.advance(hours=3)
    mail.catch_up(PROJECT, "GreenCastle")
    assert mail.whois(PROJECT, "GreenCastle", include_recent_commits=False)["last_active_ts"] == format_ts(
        mail.store.clock.now())
    wall.advance(hours=1)
    mail.read_messages(PROJECT, "RedStone")
    assert mail.whois(PROJECT, "RedStone", include_recent_commits=False)["last_active_ts"] == format_ts(
        mail.store.clock.now())
