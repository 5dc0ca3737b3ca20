"""Read and acknowledgement receipts: per recipient, idempotent, stored in git."""

from __future__ import annotations

from gitmail.model.records import Receipt, receipt_path

from .conftest import fails_cleanly, tip
from .mail_helpers import PROJECT, make_mail, open_agents, send


def test_mark_read_is_per_recipient_and_keeps_the_first_time(store):
    mail = make_mail(store)
    open_agents(mail, "GreenCastle", "BlueLake", "RedStone")
    msg = send(mail, "GreenCastle", ["BlueLake", "RedStone"])
    first = mail.mark_message_read(PROJECT, "BlueLake", msg["id"])
    assert first == {"message_id": msg["id"], "read": True, "read_at": first["read_at"]} and first["read_at"]
    head = tip(store, PROJECT)
    assert mail.mark_message_read(PROJECT, "bluelake", msg["id"]) == first
    assert tip(store, PROJECT) == head  # repeating commits nothing
    receipt = store.archive(PROJECT).snapshot().load(receipt_path("BlueLake", msg["id"]), Receipt)
    assert receipt.read_at == first["read_at"] and receipt.acked_at is None
    assert mail.fetch_inbox(PROJECT, "RedStone")[0]["read_at"] is None  # others are unaffected
    assert mail.fetch_inbox(PROJECT, "BlueLake")[0]["read_at"] == first["read_at"]


def test_acknowledge_marks_read_and_is_idempotent(store):
    mail = make_mail(store)
    open_agents(mail, "GreenCastle", "BlueLake")
    msg = send(mail, "GreenCastle", ["BlueLake"], ack_required=True)
    read = mail.mark_message_read(PROJECT, "BlueLake", msg["id"])
    ack = mail.acknowledge_message(PROJECT, "BlueLake", msg["id"])
    assert ack["acknowledged"] is True and ack["acknowledged_at"] and ack["read_at"] == read["read_at"]
    head = tip(store, PROJECT)
    assert mail.acknowledge_message(PROJECT, "BlueLake", msg["id"]) == ack
    assert tip(store, PROJECT) == head
    other = send(mail, "GreenCastle", ["BlueLake"], ack_required=True)
    direct = mail.acknowledge_message(PROJECT, "BlueLake", other["id"])
    assert direct["read_at"] == direct["acknowledged_at"]


def test_receipt_errors(store):
    mail = make_mail(store)
    open_agents(mail, "GreenCastle", "BlueLake", "RedStone")
    msg = send(mail, "GreenCastle", ["BlueLake"])
    with fails_cleanly(store, "NOT_FOUND", PROJECT):
        mail.mark_message_read(PROJECT, "RedStone", msg["id"])  # not a recipient
    with fails_cleanly(store, "NOT_FOUND", PROJECT):
        mail.acknowledge_message(PROJECT, "GreenCastle", msg["id"])  # the sender is not a recipient
    with fails_cleanly(store, "INVALID_ARGUMENT", PROJECT):
        mail.mark_message_read(PROJECT, "BlueLake", "no-such-id")
    with fails_cleanly(store, "NOT_FOUND", PROJECT):  # a number names a message imported from mcp_agent_mail
        mail.mark_message_read(PROJECT, "BlueLake", "42")
    with fails_cleanly(store, "NOT_FOUND", PROJECT):
        mail.acknowledge_message(PROJECT, "Nobody", msg["id"])
