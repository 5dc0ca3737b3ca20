"""Reading mail: inbox filters, outbox, mailbox, views, topic; reads never write."""

from __future__ import annotations

from .conftest import fails_cleanly, tip
from .mail_helpers import PROJECT, make_mail, open_agents, send


def test_inbox_filters_and_reads_do_not_change_state(store, wall):
    mail = make_mail(store)
    open_agents(mail, "GreenCastle", "BlueLake")
    first = send(mail, "GreenCastle", ["BlueLake"], subject="one", importance="low")
    wall.advance(seconds=1)
    middle = store.clock.now_ts()
    wall.advance(seconds=1)
    second = send(mail, "GreenCastle", ["BlueLake"], subject="two", importance="urgent", topic="build")
    wall.advance(seconds=1)
    third = send(mail, "GreenCastle", ["BlueLake"], subject="three", importance="high")
    head = tip(store, PROJECT)
    listed = mail.fetch_inbox(PROJECT, "BlueLake")
    assert [m["subject"] for m in listed] == ["three", "two", "one"]
    item = listed[0]
    for key in ("id", "subject", "from", "created_ts", "importance", "ack_required", "kind", "read_at"):
        assert key in item
    assert item["read_at"] is None and item["kind"] == "to" and "body_md" not in item
    assert mail.fetch_inbox(PROJECT, "BlueLake", include_bodies=True)[0]["body_md"] == "Body text"
    assert [m["id"] for m in mail.fetch_inbox(PROJECT, "BlueLake", urgent_only=True)] == [third["id"], second["id"]]
    assert [m["id"] for m in mail.fetch_inbox(PROJECT, "BlueLake", since_ts=middle)] == [third["id"], second["id"]]
    # strictly newer: a message's own timestamp excludes it
    assert mail.fetch_inbox(PROJECT, "BlueLake", since_ts=third["created_ts"]) == []
    assert [m["id"] for m in mail.fetch_inbox(PROJECT, "BlueLake", topic="BUILD")] == [second["id"]]
    assert [m["id"] for m in mail.fetch_inbox(PROJECT, "BlueLake", limit=1)] == [third["id"]]
    assert tip(store, PROJECT) == head  # none of these reads committed anything
    mail.mark_message_read(PROJECT, "BlueLake", first["id"])
    unread = mail.fetch_inbox(PROJECT, "BlueLake", unread_only=True)
    assert [m["id"] for m in unread] == [third["id"], second["id"]]
    assert mail.fetch_inbox(PROJECT, "GreenCastle") == []  # the sender's inbox is not the outbox


def test_since_ts_accepts_epoch_seconds(store, wall):
    mail = make_mail(store)
    open_agents(mail, "GreenCastle", "BlueLake")
    send(mail, "GreenCastle", ["BlueLake"])
    assert len(mail.fetch_inbox(PROJECT, "BlueLake", since_ts=0)) == 1
    assert mail.fetch_inbox(PROJECT, "BlueLake", since_ts=wall() + 60) == []


def test_inbox_errors(store):
    mail = make_mail(store)
    open_agents(mail, "BlueLake")
    with fails_cleanly(store, "NOT_FOUND", PROJECT):
        mail.fetch_inbox(PROJECT, "Nobody")
    with fails_cleanly(store, "INVALID_ARGUMENT", PROJECT):
        mail.fetch_inbox(PROJECT, "BlueLake", since_ts="yesterday")
    with fails_cleanly(store, "INVALID_ARGUMENT", PROJECT):
        mail.fetch_inbox(PROJECT, "BlueLake", limit=0)
    with fails_cleanly(store, "INVALID_ARGUMENT", PROJECT):
        mail.fetch_inbox(PROJECT, "BlueLake", topic="no spaces")
    with fails_cleanly(store, "INVALID_ARGUMENT", PROJECT):
        mail.get_message(PROJECT, "not-an-id")
    with fails_cleanly(store, "NOT_FOUND", PROJECT):
        mail.get_message(PROJECT, "0" * 23)
    with fails_cleanly(store, "INVALID_ARGUMENT", PROJECT):
        mail.fetch_topic(PROJECT, "t", unread_only=True)


def test_outbox_and_mailbox_carry_commit_details(store):
    mail = make_mail(store)
    open_agents(mail, "GreenCastle", "BlueLake")
    sent = send(mail, "GreenCastle", ["BlueLake"], subject="out", bcc=["BlueLake"])
    got = send(mail, "BlueLake", ["GreenCastle"], subject="in")
    outbox = mail.fetch_outbox(PROJECT, "GreenCastle")
    assert outbox["agent"] == "GreenCastle" and outbox["count"] == 1 and outbox["project"] == PROJECT
    entry = outbox["messages"][0]
    assert entry["id"] == sent["id"] and entry["commit"]["author"] == "GreenCastle"
    assert entry["commit"]["summary"].startswith(f"GreenCastle sent {sent['id']}")
    box = mail.fetch_mailbox(PROJECT, "GreenCastle")
    assert [(m["id"], m["direction"]) for m in box["messages"]] == [(got["id"], "inbound"), (sent["id"], "outbound")]
    assert box["messages"][0]["commit"]["author"] == "BlueLake"


def test_views_urgent_unread_ack_required_and_overdue(store, wall):
    mail = make_mail(store)
    open_agents(mail, "GreenCastle", "BlueLake")
    urgent = send(mail, "GreenCastle", ["BlueLake"], importance="urgent")
    ack = send(mail, "GreenCastle", ["BlueLake"], ack_required=True)
    send(mail, "GreenCastle", ["BlueLake"])
    assert [m["id"] for m in mail.view_urgent_unread(PROJECT, "BlueLake")["messages"]] == [urgent["id"]]
    assert [m["id"] for m in mail.view_ack_required(PROJECT, "BlueLake")["messages"]] == [ack["id"]]
    wall.advance(minutes=59)
    assert mail.view_ack_overdue(PROJECT, "BlueLake", ttl_minutes=60)["messages"] == []
    wall.advance(minutes=1, milliseconds=1)
    assert [m["id"] for m in mail.view_ack_overdue(PROJECT, "BlueLake", ttl_minutes=60)["messages"]] == [ack["id"]]
    mail.mark_message_read(PROJECT, "BlueLake", urgent["id"])
    mail.acknowledge_message(PROJECT, "BlueLake", ack["id"])
    assert mail.view_urgent_unread(PROJECT, "BlueLake")["count"] == 0
    assert mail.view_ack_required(PROJECT, "BlueLake")["count"] == 0
    assert mail.view_ack_overdue(PROJECT, "BlueLake", ttl_minutes=0)["count"] == 0
    with fails_cleanly(store, "INVALID_ARGUMENT", PROJECT):
        mail.view_ack_overdue(PROJECT, "BlueLake", ttl_minutes=-1)


def test_fetch_topic_across_the_project(store, wall):
    mail = make_mail(store)
    open_agents(mail, "GreenCastle", "BlueLake", "RedStone")
    a = send(mail, "GreenCastle", ["BlueLake"], topic="Deploy")
    wall.advance(seconds=1)
    b = send(mail, "RedStone", ["GreenCastle"], topic="deploy")
    send(mail, "RedStone", ["BlueLake"], topic="other")
    everything = mail.fetch_topic(PROJECT, "DEPLOY")
    assert [m["id"] for m in everything] == [b["id"], a["id"]]
    assert everything[0]["body_md"] == "Body text" and everything[0]["topic"] == "deploy"
    # every agent of the project sees every message with the topic; the reader only decides what is unread
    assert [m["id"] for m in mail.fetch_topic(PROJECT, "deploy", agent_name="BlueLake")] == [b["id"], a["id"]]
    assert [m["id"] for m in mail.fetch_topic(PROJECT, "deploy", agent_name="BlueLake", unread_only=True)] == [a["id"]]
    mail.mark_message_read(PROJECT, "BlueLake", a["id"])
    assert mail.fetch_topic(PROJECT, "deploy", agent_name="BlueLake", unread_only=True) == []
    assert [m["id"] for m in mail.fetch_topic(PROJECT, "deploy", since_ts=a["created_ts"])] == [b["id"]]
