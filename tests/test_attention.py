"""What needs the overseer: owed acknowledgements, urgent unread mail, pending contacts, expiring leases,
held slots, the overseer's unread mail, and who read and acknowledged each message."""

from __future__ import annotations

import pytest

from gitmail import GitmailError
from gitmail.mail.attention import Delivery, ExpiringReservation, HeldSlot, OwedAck, PendingContact
from gitmail.mail.facade import SendOptions

from .conftest import tip
from .mail_helpers import PROJECT, make_mail, open_agents, register, send


def test_owed_acknowledgements_oldest_first_with_how_overdue(store, wall):
    mail = make_mail(store)
    open_agents(mail, "BlueLake", "GreenHill", "RedStone")
    first = send(mail, "BlueLake", ["GreenHill", "RedStone"], "First", ack_required=True)["id"]
    wall.advance(minutes=10)
    second = send(mail, "RedStone", ["GreenHill"], "Second", ack_required=True)["id"]
    send(mail, "RedStone", ["GreenHill"], "No ack asked")
    wall.advance(minutes=25)  # the first is 35 minutes old: 5 past the default 30; the second 5 before due
    owed = mail.owed_acknowledgements(PROJECT)
    assert [(o.message_id, o.agent, o.overdue_seconds) for o in owed.items] == [
        (first, "GreenHill", 300), (first, "RedStone", 300), (second, "GreenHill", -300)]
    assert isinstance(owed.items[0], OwedAck) and owed.items[0].sender == "BlueLake" and not owed.more
    mail.acknowledge_message(PROJECT, "RedStone", first)
    assert [(o.message_id, o.agent) for o in mail.owed_acknowledgements(PROJECT).items] == [
        (first, "GreenHill"), (second, "GreenHill")]
    bounded = mail.owed_acknowledgements(PROJECT, limit=1)
    assert [o.agent for o in bounded.items] == ["GreenHill"] and bounded.more


def test_urgent_unread_per_recipient_until_read(store):
    mail = make_mail(store)
    open_agents(mail, "BlueLake", "GreenHill", "RedStone")
    urgent = send(mail, "BlueLake", ["GreenHill", "RedStone"], "Fire", importance="urgent")["id"]
    send(mail, "BlueLake", ["GreenHill"], "Merely high", importance="high")
    assert {(u.message_id, u.agent) for u in mail.urgent_unread(PROJECT).items} == {
        (urgent, "GreenHill"), (urgent, "RedStone")}
    mail.mark_message_read(PROJECT, "GreenHill", urgent)
    assert [(u.agent, u.subject, u.sender) for u in mail.urgent_unread(PROJECT).items] == [
        ("RedStone", "Fire", "BlueLake")]


def test_pending_contacts_until_answered_or_lapsed(store, wall):
    mail = make_mail(store)
    register(mail, "BlueLake", "GreenHill", "RedStone")
    mail.request_contact(PROJECT, "BlueLake", "GreenHill", reason="schema review")
    wall.advance(seconds=1)
    mail.request_contact(PROJECT, "RedStone", "GreenHill", reason="deploy", ttl_seconds=3600)
    found = mail.pending_contacts(PROJECT).items
    assert [(c.requester, c.target, c.reason) for c in found] == [
        ("BlueLake", "GreenHill", "schema review"), ("RedStone", "GreenHill", "deploy")]
    assert all(isinstance(c, PendingContact) for c in found)
    mail.respond_contact(PROJECT, "GreenHill", "BlueLake", True)
    assert [c.requester for c in mail.pending_contacts(PROJECT).items] == ["RedStone"]
    wall.advance(hours=1)  # RedStone's request lapses
    assert mail.pending_contacts(PROJECT).items == []


def test_expiring_reservations_soonest_first_within_the_window(store, wall):
    mail = make_mail(store)
    register(mail, "BlueLake", "GreenHill")
    late = mail.file_reservation_paths(PROJECT, "BlueLake", ["docs/**"], ttl_seconds=7200)["granted"][0]["id"]
    soon = mail.file_reservation_paths(PROJECT, "GreenHill", ["src/**"], ttl_seconds=900)["granted"][0]["id"]
    sooner = mail.file_reservation_paths(PROJECT, "BlueLake", ["a.py"], ttl_seconds=600)["granted"][0]["id"]
    gone = mail.file_reservation_paths(PROJECT, "BlueLake", ["b.py"], ttl_seconds=300)["granted"][0]["id"]
    mail.release_file_reservations(PROJECT, "BlueLake", file_reservation_ids=[gone])
    found = mail.expiring_reservations(PROJECT).items
    assert [(r.reservation_id, r.seconds_left) for r in found] == [(sooner, 600), (soon, 900)]
    assert isinstance(found[0], ExpiringReservation) and found[0].path_pattern == "a.py"
    assert late not in [r.reservation_id for r in mail.expiring_reservations(PROJECT, within_seconds=3600).items]
    wall.advance(seconds=700)  # the sooner one ran out: no longer in force
    assert [r.reservation_id for r in mail.expiring_reservations(PROJECT).items] == [soon]


def test_attention_gathers_everything_and_the_overseers_unread_mail(store, monkeypatch):
    monkeypatch.setenv("GIT_AUTHOR_NAME", "Dana Operator")
    mail = make_mail(store)
    open_agents(mail, "BlueLake", "GreenHill")
    quiet = mail.needs_attention(PROJECT)
    assert quiet.quiet and quiet.inbox.items == []  # no overseer yet, and nothing owed
    mail.acquire_build_slot(PROJECT, "GreenHill", "test-db", reason="run")
    note = mail.send_as_overseer(PROJECT, ["BlueLake"], "Status?", "Where are we?")["deliveries"][0]["payload"]
    answer = mail.reply_message(PROJECT, note["id"], "BlueLake", "Halfway.")
    seen = mail.needs_attention(PROJECT)
    assert [m["id"] for m in seen.inbox.items] == [answer["id"]]
    assert seen.slots.items == [HeldSlot(slot="test-db", agent="GreenHill", epoch=1,
                                         expires_ts=seen.slots.items[0].expires_ts, stale=False)]
    assert not seen.quiet and seen.human_key == PROJECT and seen.slug == store.resolve(PROJECT)
    mail.mark_message_read(PROJECT, "Overseer", answer["id"])
    assert mail.needs_attention(PROJECT).inbox.items == []


def test_receipts_say_who_read_and_acknowledged_and_bcc_only_to_its_sender(store, wall, monkeypatch):
    monkeypatch.setenv("GIT_AUTHOR_NAME", "Dana Operator")
    mail = make_mail(store)
    open_agents(mail, "BlueLake", "GreenHill", "RedStone")
    by_agent = send(mail, "BlueLake", ["GreenHill"], "Plan", cc=["RedStone"], ack_required=True)["id"]
    wall.advance(seconds=5)
    mail.mark_message_read(PROJECT, "GreenHill", by_agent)
    wall.advance(seconds=5)
    mail.acknowledge_message(PROJECT, "GreenHill", by_agent)
    by_overseer = mail.send_as_overseer(PROJECT, ["GreenHill"], "Quiet note", "x",
                                        SendOptions(bcc=["RedStone"]))["deliveries"][0]["payload"]["id"]
    found = mail.message_receipts(PROJECT, [by_agent, by_overseer, "0" * 23], viewer="Overseer")
    assert set(found) == {by_agent, by_overseer}  # an unknown ID is left out
    green, red = found[by_agent]
    assert (green.agent, green.kind, red.agent, red.kind) == ("GreenHill", "to", "RedStone", "cc")
    assert green.read_at is not None and green.acked_at is not None and green.read_at < green.acked_at
    assert red == Delivery(agent="RedStone", kind="cc", read_at=None, acked_at=None, delivered=True)
    assert [(d.agent, d.kind) for d in found[by_overseer]] == [("GreenHill", "to"), ("RedStone", "bcc")]
    blind = mail.message_receipts(PROJECT, [by_overseer], viewer="BlueLake")[by_overseer]
    assert [d.agent for d in blind] == ["GreenHill"]  # another viewer never learns of the blind copy


def test_holders_of_a_file_by_the_guards_glob_rules(store):
    mail = make_mail(store)
    open_agents(mail, "BlueLake", "GreenHill")
    shared = mail.file_reservation_paths(PROJECT, "GreenHill", ["src/*.py"], exclusive=False)["granted"][0]["id"]
    mine = mail.file_reservation_paths(PROJECT, "BlueLake", ["src/db/**"], reason="migration")["granted"][0]["id"]
    assert [(h.reservation_id, h.agent, h.exclusive) for h in mail.holders_of(PROJECT, "src/db/schema.py")] == [
        (mine, "BlueLake", True)]
    assert [h.reservation_id for h in mail.holders_of(PROJECT, "src/app.py")] == [shared]
    assert mail.holders_of(PROJECT, "docs/readme.md") == []
    for bad in ("", "   ", "x" * 1025, "a\nb"):
        with pytest.raises(GitmailError) as caught:
            mail.holders_of(PROJECT, bad)
        assert caught.value.code == "INVALID_ARGUMENT" and "path" in caught.value.message


def test_the_overseer_releases_an_expired_reservation_and_not_a_live_one(store, wall, monkeypatch):
    monkeypatch.setenv("GIT_AUTHOR_NAME", "Dana Operator")
    mail = make_mail(store)
    open_agents(mail, "BlueLake")
    held = mail.file_reservation_paths(PROJECT, "BlueLake", ["src/**"], ttl_seconds=600)["granted"][0]["id"]
    before = tip(store, PROJECT)
    with pytest.raises(GitmailError) as caught:
        mail.force_release_as_overseer(PROJECT, held)
    assert caught.value.code == "RESERVATION_NOT_STALE"
    assert tip(store, PROJECT) == before  # not even the overseer's profile, which a release would have made
    wall.advance(seconds=601)
    done = mail.force_release_as_overseer(PROJECT, held, note="Taking it over for the release.")
    assert done["released"] and done["notified"]
    notice = mail.fetch_inbox(PROJECT, "BlueLake", include_bodies=True)[0]
    assert notice["from"] == "Overseer" and "Taking it over" in notice["body_md"]
