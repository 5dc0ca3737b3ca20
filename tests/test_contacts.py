"""Contact policies, requests and responses, and held delivery."""

from __future__ import annotations

import datetime as dt

from gitmail import Change
from gitmail.mail.facade import SendOptions
from gitmail.model.clock import parse_ts
from gitmail.model.records import Contact, HeldMessage, Reservation, contact_path, inbox_path

from .conftest import fails_cleanly, tip
from .mail_helpers import PROJECT, make_mail, open_agents, register, send


def reserve(store, agent: str, pattern: str) -> None:
    reservation = Reservation(id=store.clock.new_id(), agent=agent, path_pattern=pattern,
                              created_ts=store.clock.now_ts(),
                              expires_ts="2999-01-01T00:00:00.000Z", hlc=store.clock.tick())
    store.archive(PROJECT).transact(lambda snap: Change(f"{agent} reserved {pattern}", author=agent)
                                    .put_record(reservation))


def test_auto_policy_refuses_cold_mail(store):
    mail = make_mail(store)
    register(mail, "GreenCastle", "BlueLake")
    with fails_cleanly(store, "CONTACT_REQUIRED", PROJECT) as info:
        mail.send_message(PROJECT, "GreenCastle", ["BlueLake"], "hi", "cold")
    assert info.value.data["recipients"] == ["BlueLake"]
    assert "request_contact" in info.value.message


def test_request_approve_then_send(store):
    mail = make_mail(store)
    register(mail, "GreenCastle", "BlueLake")
    request = mail.request_contact(PROJECT, "GreenCastle", "BlueLake", reason="API contract changes")
    assert request["status"] == "pending" and request["from"] == "GreenCastle" and request["to"] == "BlueLake"
    intro = mail.fetch_inbox(PROJECT, "BlueLake", include_bodies=True)
    assert len(intro) == 1 and intro[0]["id"] == request["intro_message_id"] and intro[0]["ack_required"] is True
    assert "API contract changes" in intro[0]["body_md"]
    assert [(c["direction"], c["status"]) for c in mail.list_contacts(PROJECT, "BlueLake")] == [("incoming", "pending")]
    listed = mail.list_contacts(PROJECT, "GreenCastle")
    assert [(c["direction"], c["status"]) for c in listed] == [("outgoing", "pending")]
    with fails_cleanly(store, "CONTACT_REQUIRED", PROJECT):  # pending is not approved
        mail.send_message(PROJECT, "GreenCastle", ["BlueLake"], "hi", "still cold")
    answer = mail.respond_contact(PROJECT, "BlueLake", "GreenCastle", accept=True)
    assert answer["approved"] is True and answer["status"] == "approved" and answer["expires_ts"]
    assert send(mail, "GreenCastle", ["BlueLake"])["to"] == ["BlueLake"]
    assert send(mail, "BlueLake", ["GreenCastle"])["to"] == ["GreenCastle"]  # a link works both ways


def test_denied_contact_blocks(store):
    mail = make_mail(store)
    register(mail, "GreenCastle", "BlueLake")
    mail.request_contact(PROJECT, "GreenCastle", "BlueLake")
    denied = mail.respond_contact(PROJECT, "BlueLake", "GreenCastle", accept=False)
    assert denied["approved"] is False and denied["status"] == "denied"
    with fails_cleanly(store, "CONTACT_BLOCKED", PROJECT):
        mail.send_message(PROJECT, "GreenCastle", ["BlueLake"], "hi", "again")
    with fails_cleanly(store, "CONTACT_BLOCKED", PROJECT):  # a refusal is not turned into a held message
        mail.send_message(PROJECT, "GreenCastle", ["BlueLake"], "hi", "again",
                          options=SendOptions(auto_contact_if_blocked=True))


def test_contacts_only_and_block_all(store):
    mail = make_mail(store)
    register(mail, "GreenCastle", "BlueLake", "Hermit")
    mail.set_contact_policy(PROJECT, "BlueLake", "open")
    mail.set_contact_policy(PROJECT, "GreenCastle", "contacts_only")
    with fails_cleanly(store, "CONTACT_REQUIRED", PROJECT):
        mail.send_message(PROJECT, "BlueLake", ["GreenCastle"], "hi", "x")
    first = send(mail, "GreenCastle", ["BlueLake"])  # BlueLake is open
    reply = mail.reply_message(PROJECT, first["id"], "BlueLake", "answering you is fine")
    assert reply["to"] == ["GreenCastle"]
    result = mail.set_contact_policy(PROJECT, "Hermit", "block_all")
    assert result == {"agent": "Hermit", "policy": "block_all"}
    with fails_cleanly(store, "CONTACT_BLOCKED", PROJECT):
        mail.send_message(PROJECT, "BlueLake", ["Hermit"], "hi", "x")
    with fails_cleanly(store, "CONTACT_BLOCKED", PROJECT):
        mail.request_contact(PROJECT, "BlueLake", "Hermit")
    with fails_cleanly(store, "INVALID_ARGUMENT", PROJECT):
        mail.set_contact_policy(PROJECT, "Hermit", "friends")


def test_auto_allows_shared_thread(store):
    mail = make_mail(store)
    open_agents(mail, "Coordinator", "Stranger")
    register(mail, "GreenCastle", "BlueLake")
    mail.set_contact_policy(PROJECT, "GreenCastle", "open")
    mail.set_contact_policy(PROJECT, "BlueLake", "open")
    kickoff = send(mail, "Coordinator", ["GreenCastle"], cc=["BlueLake"], subject="Kickoff")
    mail.set_contact_policy(PROJECT, "BlueLake", "auto")
    with fails_cleanly(store, "CONTACT_REQUIRED", PROJECT):
        mail.send_message(PROJECT, "GreenCastle", ["BlueLake"], "side", "no thread given")
    in_thread = send(mail, "GreenCastle", ["BlueLake"], thread_id=kickoff["id"])
    assert in_thread["thread_id"] == kickoff["id"]
    with fails_cleanly(store, "CONTACT_REQUIRED", PROJECT):  # naming a thread one is not part of does not help
        mail.send_message(PROJECT, "Stranger", ["BlueLake"], "x", "y", options=SendOptions(thread_id=kickoff["id"]))


def test_auto_allows_recent_mail_and_overlapping_reservations(store):
    mail = make_mail(store)
    register(mail, "GreenCastle", "BlueLake", "RedStone")
    mail.set_contact_policy(PROJECT, "GreenCastle", "open")
    send(mail, "BlueLake", ["GreenCastle"])  # BlueLake wrote to GreenCastle recently
    assert send(mail, "GreenCastle", ["BlueLake"])["to"] == ["BlueLake"]
    reserve(store, "GreenCastle", "src/api/*.py")
    reserve(store, "RedStone", "docs/*")
    with fails_cleanly(store, "CONTACT_REQUIRED", PROJECT):
        mail.send_message(PROJECT, "GreenCastle", ["RedStone"], "x", "no overlap")
    reserve(store, "RedStone", "src/api/users.py")
    assert send(mail, "GreenCastle", ["RedStone"])["to"] == ["RedStone"]


def test_blocked_message_is_held_and_delivered_on_approval(store):
    mail = make_mail(store)
    register(mail, "GreenCastle", "BlueLake", "RedStone")
    mail.set_contact_policy(PROJECT, "RedStone", "open")
    result = mail.send_message(PROJECT, "GreenCastle", ["BlueLake", "RedStone"], "Plan", "The full plan",
                               options=SendOptions(hold_if_blocked=True))
    assert result["held"] is True and result["count"] == 0 and result["awaiting"] == ["BlueLake"]
    assert "delivered" in result["note"]
    held_id = result["held_message_id"]
    snap = store.archive(PROJECT).snapshot()
    held_files = list(snap.walk("agents/GreenCastle/held"))
    assert len(held_files) == 1 and snap.load(held_files[0], HeldMessage).body == "The full plan"
    assert snap.load(contact_path("GreenCastle", "BlueLake"), Contact).status == "pending"
    assert [m["subject"] for m in mail.fetch_inbox(PROJECT, "BlueLake")] == ["Contact request from GreenCastle"]
    assert mail.fetch_inbox(PROJECT, "RedStone") == []  # nobody gets it before the contact is settled
    assert [h["held_id"] for h in mail.list_held(PROJECT, "GreenCastle")] == [held_id]
    answer = mail.respond_contact(PROJECT, "BlueLake", "GreenCastle", accept=True)
    assert [d["held_id"] for d in answer["delivered_held"]] == [held_id]
    delivered_id = answer["delivered_held"][0]["message_id"]
    for name in ("BlueLake", "RedStone"):
        assert delivered_id in [m["id"] for m in mail.fetch_inbox(PROJECT, name)]
    assert mail.get_message(PROJECT, delivered_id)["body_md"] == "The full plan"
    assert mail.list_held(PROJECT, "GreenCastle") == []
    assert not list(store.archive(PROJECT).snapshot().walk("agents/GreenCastle/held"))


def test_held_message_skips_a_recipient_who_declines(store):
    mail = make_mail(store)
    register(mail, "GreenCastle", "BlueLake", "RedStone")
    result = mail.send_message(PROJECT, "GreenCastle", ["BlueLake", "RedStone"], "Plan", "body",
                               options=SendOptions(hold_if_blocked=True))
    assert result["awaiting"] == ["BlueLake", "RedStone"]
    first = mail.respond_contact(PROJECT, "BlueLake", "GreenCastle", accept=False)
    assert first["delivered_held"] == []
    [still] = mail.list_held(PROJECT, "GreenCastle")
    assert still["awaiting"] == ["RedStone"] and still["denied"] == ["BlueLake"]
    second = mail.respond_contact(PROJECT, "RedStone", "GreenCastle", accept=True)
    delivered_id = second["delivered_held"][0]["message_id"]
    message = mail.get_message(PROJECT, delivered_id)
    assert message["to"] == ["RedStone"]
    assert not store.archive(PROJECT).snapshot().exists(inbox_path("BlueLake", delivered_id))


def test_held_message_declined_by_everyone_is_kept(store):
    mail = make_mail(store)
    register(mail, "GreenCastle", "BlueLake")
    mail.send_message(PROJECT, "GreenCastle", ["BlueLake"], "Plan", "keep me",
                      options=SendOptions(hold_if_blocked=True))
    mail.respond_contact(PROJECT, "BlueLake", "GreenCastle", accept=False)
    [kept] = mail.list_held(PROJECT, "GreenCastle")
    assert kept["awaiting"] == [] and kept["denied"] == ["BlueLake"]


def test_contact_errors(store):
    mail = make_mail(store)
    register(mail, "GreenCastle", "BlueLake")
    with fails_cleanly(store, "NOT_FOUND", PROJECT):
        mail.respond_contact(PROJECT, "BlueLake", "GreenCastle", accept=True)  # nothing was requested
    with fails_cleanly(store, "NOT_FOUND", PROJECT):
        mail.request_contact(PROJECT, "GreenCastle", "Ghost")
    with fails_cleanly(store, "INVALID_ARGUMENT", PROJECT):
        mail.request_contact(PROJECT, "GreenCastle", "GreenCastle")
    with fails_cleanly(store, "INVALID_ARGUMENT", PROJECT):
        mail.request_contact(PROJECT, "GreenCastle", "BlueLake", ttl_seconds=5)
    with fails_cleanly(store, "INVALID_ARGUMENT", PROJECT):
        mail.respond_contact(PROJECT, "BlueLake", "GreenCastle", accept="yes")
    with fails_cleanly(store, "NOT_FOUND", PROJECT):
        mail.list_contacts(PROJECT, "Ghost")


def test_approved_link_is_left_alone_by_a_new_request(store):
    mail = make_mail(store)
    register(mail, "GreenCastle", "BlueLake")
    mail.request_contact(PROJECT, "GreenCastle", "BlueLake")
    mail.respond_contact(PROJECT, "BlueLake", "GreenCastle", accept=True)
    head = tip(store, PROJECT)
    again = mail.request_contact(PROJECT, "GreenCastle", "BlueLake")
    assert again["status"] == "approved" and again["intro_message_id"] is None
    assert tip(store, PROJECT) == head


def test_deleting_an_awaited_agent_releases_held_mail(store):
    mail = make_mail(store)
    register(mail, "GreenCastle", "BlueLake", "RedStone")
    mail.set_contact_policy(PROJECT, "RedStone", "open")
    mail.send_message(PROJECT, "GreenCastle", ["BlueLake", "RedStone"], "Plan", "for both",
                      options=SendOptions(hold_if_blocked=True))
    mail.hard_delete_agent(PROJECT, "BlueLake", confirmation="I UNDERSTAND")
    assert mail.list_held(PROJECT, "GreenCastle") == []
    [delivered] = mail.fetch_inbox(PROJECT, "RedStone")
    assert delivered["to"] == ["RedStone"] and delivered["subject"] == "Plan"


def test_contact_ttls_and_expiry(store, wall):
    mail = make_mail(store)
    register(mail, "GreenCastle", "BlueLake")
    request = mail.request_contact(PROJECT, "GreenCastle", "BlueLake")
    assert parse_ts(request["expires_ts"]) - wall.now() == dt.timedelta(days=7)
    wall.advance(hours=1)
    approved = mail.respond_contact(PROJECT, "BlueLake", "GreenCastle", accept=True, ttl_seconds=3600)
    assert parse_ts(approved["expires_ts"]) - wall.now() == dt.timedelta(hours=1)
    # the approval runs out: the link is shown as expired and mail needs contact again
    wall.advance(hours=1)
    [shown] = mail.list_contacts(PROJECT, "GreenCastle")
    assert shown["status"] == "approved" and shown["expired"] is True
    with fails_cleanly(store, "CONTACT_REQUIRED", PROJECT):
        mail.send_message(PROJECT, "GreenCastle", ["BlueLake"], "hi", "after expiry")
