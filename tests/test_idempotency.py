"""Idempotency keys on send and reply: stored in the archive, honoured at least 24 hours."""

from __future__ import annotations

import dataclasses
import datetime as dt
import threading

from gitmail import Change, Store
from gitmail.mail.facade import Mail, SendOptions
from gitmail.model.clock import format_ts
from gitmail.model.records import IdempotencyKey

from .conftest import fails_cleanly, tip
from .mail_helpers import PROJECT, make_mail, open_agents, register


def key_records(store):
    snap = store.archive(PROJECT).snapshot()
    return [(path, snap.load(path, IdempotencyKey)) for path in snap.walk("agents") if "/idempotency/" in path]


def test_identical_retry_returns_the_original(store):
    mail = make_mail(store)
    open_agents(mail, "GreenCastle", "BlueLake")
    first = mail.send_message(PROJECT, "GreenCastle", ["BlueLake"], "s", "b",
                              options=SendOptions(idempotency_key="req-1"))
    head = tip(store, PROJECT)
    again = mail.send_message(PROJECT, "GreenCastle", ["BlueLake"], "s", "b",
                              options=SendOptions(idempotency_key="req-1"))
    assert first["created"] is True and again["created"] is False
    assert again["deliveries"] == first["deliveries"]
    assert tip(store, PROJECT) == head
    assert len(mail.fetch_inbox(PROJECT, "BlueLake")) == 1
    [(path, record)] = key_records(store)
    assert path.startswith("agents/GreenCastle/idempotency/")
    assert record.message_id == first["deliveries"][0]["payload"]["id"]
    assert "req-1" not in path  # the key is stored as a hash


def test_same_key_different_content_conflicts(store):
    mail = make_mail(store)
    open_agents(mail, "GreenCastle", "BlueLake")
    mail.send_message(PROJECT, "GreenCastle", ["BlueLake"], "s", "b", options=SendOptions(idempotency_key="req-1"))
    with fails_cleanly(store, "IDEMPOTENCY_CONFLICT", PROJECT) as info:
        mail.send_message(PROJECT, "GreenCastle", ["BlueLake"], "s", "different body",
                          options=SendOptions(idempotency_key="req-1"))
    assert info.value.data["message_id"]
    with fails_cleanly(store, "IDEMPOTENCY_CONFLICT", PROJECT):
        mail.reply_message(PROJECT, info.value.data["message_id"], "GreenCastle", "b",
                           options=SendOptions(idempotency_key="req-1"))
    with fails_cleanly(store, "INVALID_ARGUMENT", PROJECT):
        mail.send_message(PROJECT, "GreenCastle", ["BlueLake"], "s", "b", options=SendOptions(idempotency_key=""))
    # keys belong to a sender: another agent may use the same text
    assert mail.send_message(PROJECT, "BlueLake", ["GreenCastle"], "s", "b",
                             options=SendOptions(idempotency_key="req-1"))["created"]


def test_keys_survive_a_restart(home):
    mail = make_mail(Store(home, background=False))
    open_agents(mail, "GreenCastle", "BlueLake")
    first = mail.send_message(PROJECT, "GreenCastle", ["BlueLake"], "s", "b", options=SendOptions(idempotency_key="k"))
    fresh = Mail(Store(home, background=False))
    again = fresh.send_message(PROJECT, "GreenCastle", ["BlueLake"], "s", "b", options=SendOptions(idempotency_key="k"))
    assert again["created"] is False and again["deliveries"] == first["deliveries"]


def _age_key(store, days: int) -> None:
    """Refile the only key record as if it had been used ``days`` ago."""
    [(path, record)] = key_records(store)
    older = dataclasses.replace(record, created_at=format_ts(store.clock.now() - dt.timedelta(days=days)))
    store.archive(PROJECT).transact(lambda snap: Change("age key").delete(path).put_record(older))


def test_key_from_yesterday_is_honoured_and_older_ones_expire(store):
    mail = make_mail(store)
    open_agents(mail, "GreenCastle", "BlueLake")
    mail.send_message(PROJECT, "GreenCastle", ["BlueLake"], "s", "b", options=SendOptions(idempotency_key="k"))
    _age_key(store, 1)
    assert mail.send_message(PROJECT, "GreenCastle", ["BlueLake"], "s", "b",
                             options=SendOptions(idempotency_key="k"))["created"] is False
    _age_key(store, 2)
    assert mail.send_message(PROJECT, "GreenCastle", ["BlueLake"], "s", "b",
                             options=SendOptions(idempotency_key="k"))["created"] is True


def test_reply_with_key(store):
    mail = make_mail(store)
    open_agents(mail, "GreenCastle", "BlueLake")
    original = mail.send_message(PROJECT, "GreenCastle", ["BlueLake"], "s", "b")["deliveries"][0]["payload"]
    first = mail.reply_message(PROJECT, original["id"], "BlueLake", "ok", options=SendOptions(idempotency_key="r"))
    again = mail.reply_message(PROJECT, original["id"], "BlueLake", "ok", options=SendOptions(idempotency_key="r"))
    assert again["created"] is False and again["id"] == first["id"] and again["subject"] == "Re: s"


def test_concurrent_retries_create_one_message(store):
    mail = make_mail(store)
    open_agents(mail, "GreenCastle", "BlueLake")
    results = []

    def go():
        results.append(mail.send_message(PROJECT, "GreenCastle", ["BlueLake"], "s", "b",
                                         options=SendOptions(idempotency_key="race")))

    threads = [threading.Thread(target=go) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(r["created"] for r in results) == [False] * 5 + [True]
    assert len({r["deliveries"][0]["payload"]["id"] for r in results}) == 1
    assert len(mail.fetch_inbox(PROJECT, "BlueLake")) == 1


def test_held_send_retry_and_delivery(store):
    mail = make_mail(store)
    register(mail, "GreenCastle", "BlueLake")
    held = mail.send_message(PROJECT, "GreenCastle", ["BlueLake"], "s", "b",
                             options=SendOptions(hold_if_blocked=True, idempotency_key="h"))
    again = mail.send_message(PROJECT, "GreenCastle", ["BlueLake"], "s", "b",
                              options=SendOptions(hold_if_blocked=True, idempotency_key="h"))
    assert again["held"] is True and again["created"] is False and again["held_message_id"] == held["held_message_id"]
    delivered = mail.respond_contact(PROJECT, "BlueLake", "GreenCastle", accept=True)["delivered_held"][0]
    after = mail.send_message(PROJECT, "GreenCastle", ["BlueLake"], "s", "b",
                              options=SendOptions(hold_if_blocked=True, idempotency_key="h"))
    assert after["created"] is False and after["deliveries"][0]["payload"]["id"] == delivered["message_id"]
