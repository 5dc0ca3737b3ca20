"""Mail between projects: contact asked across, a send in two archives, and a crash between the two commits."""

from __future__ import annotations

import pytest

from gitmail import GitmailError
from gitmail.mail import relay
from gitmail.mail.facade import Mail, SendOptions
from gitmail.model.records import Message, Relay, inbox_path, message_path, outbox_path, relay_path
from gitmail.storage.fsck import check_archive

from .conftest import git

FRONT, BACK = "/data/shop/frontend", "/data/shop/backend"


@pytest.fixture
def mail(store):
    mail = Mail(store)
    for key, names in ((FRONT, ("Alice",)), (BACK, ("Bob", "Carol", "Dave"))):
        mail.ensure_project(key)
        for name in names:
            mail.register_agent(key, "p", "m", name=name)
    mail.set_contact_policy(BACK, "Bob", "contacts_only")
    mail.set_contact_policy(BACK, "Carol", "open")
    mail.set_contact_policy(BACK, "Dave", "block_all")
    return mail


def _tips(store):
    return store.archive(FRONT).tip(), store.archive(BACK).tip()


def _approved(mail):
    mail.request_contact(FRONT, "Alice", "Bob", to_project=BACK, reason="api changes")
    mail.respond_contact(BACK, "Bob", f"Alice@{FRONT}", True)


def test_a_request_across_projects_lives_in_the_targets_archive(mail, store):
    front = store.resolve(FRONT)
    asked = mail.request_contact(FRONT, "Alice", "bob", to_project=BACK, reason="api changes")
    assert asked["from"] == f"Alice@{front}" and asked["to"] == "Bob" and asked["to_project"] == BACK
    intro = mail.fetch_inbox(BACK, "Bob", include_bodies=True)[0]
    assert intro["from"] == f"Alice@{front}" and f'from_agent="Alice@{front}"' in intro["body_md"]
    outgoing = mail.list_contacts(FRONT, "Alice")
    incoming = mail.list_contacts(BACK, "Bob")
    assert [(c["to"], c["status"], c["to_project"], c["direction"]) for c in outgoing] == [
        ("Bob", "pending", BACK, "outgoing")]
    assert [(c["from"], c["direction"]) for c in incoming] == [(f"Alice@{front}", "incoming")]
    answered = mail.respond_contact(BACK, "Bob", f"Alice@{front}", True)  # the project's slug, or its key
    assert answered["status"] == "approved"
    assert check_archive(store.archive(BACK)) == [] and check_archive(store.archive(FRONT)) == []


def test_a_send_across_needs_contact_per_recipient_and_a_refusal_writes_nothing(mail, store):
    before = _tips(store)
    refused = {}
    for name in ("Bob", "Dave"):
        with pytest.raises(GitmailError) as err:
            mail.send_message(FRONT, "Alice", [f"{name}@{BACK}"], "hello", "b")
        refused[name] = err.value.code
    assert refused == {"Bob": "CONTACT_REQUIRED", "Dave": "CONTACT_BLOCKED"}
    bad = {}
    for label, kwargs in {
        "bcc": dict(to=[], bcc=[f"Carol@{BACK}"]),
        "unknown agent": dict(to=[f"Nobody@{BACK}"]),
        "unknown project": dict(to=["Carol@/data/shop/nowhere"]),
        "hold": dict(to=[f"Bob@{BACK}"], hold_if_blocked=True),
    }.items():
        to = kwargs.pop("to")
        with pytest.raises(GitmailError) as err:
            mail.send_message(FRONT, "Alice", to, "hello", "b", SendOptions(**kwargs))
        bad[label] = err.value.code
    assert bad == {"bcc": "INVALID_ARGUMENT", "unknown agent": "RECIPIENT_NOT_FOUND",
                   "unknown project": "NOT_FOUND", "hold": "INVALID_ARGUMENT"}
    assert _tips(store) == before
    # an open recipient needs no request
    sent = mail.send_message(FRONT, "Alice", [f"Carol@{BACK}"], "hello", "b")
    assert [d["project"] for d in sent["deliveries"]] == [FRONT, BACK]


def test_an_approved_send_lands_in_both_archives_under_one_id(mail, store):
    _approved(mail)
    front, back = store.resolve(FRONT), store.resolve(BACK)
    sent = mail.send_message(FRONT, "Alice", [f"Bob@{BACK}"], "api v2", "the new endpoints",
                             options=SendOptions(cc=[f"Carol@{back}"]))
    assert sent["count"] == 2 and [d["project"] for d in sent["deliveries"]] == [FRONT, BACK]
    mine, theirs = (d["payload"] for d in sent["deliveries"])
    assert mine["id"] == theirs["id"]
    assert (mine["to"], mine["cc"]) == ([f"Bob@{back}"], [f"Carol@{back}"])
    assert (theirs["from"], theirs["to"], theirs["cc"]) == (f"Alice@{front}", ["Bob"], ["Carol"])
    a, b = store.archive(FRONT).snapshot(), store.archive(BACK).snapshot()
    mid = mine["id"]
    assert a.exists(message_path(mid)) and a.exists(outbox_path("Alice", mid))
    assert b.exists(message_path(mid)) and b.exists(inbox_path("Bob", mid)) and b.exists(inbox_path("Carol", mid))
    assert not b.exists(outbox_path(f"Alice@{front}", mid))
    assert a.load(relay_path(back, mid), Relay).delivered_at is not None
    for key in (FRONT, BACK):  # both histories show it
        log = git("--git-dir", store.paths(store.resolve(key)).archive, "log", "--format=%s", "--", message_path(mid))
        assert "api v2" in log
        assert check_archive(store.archive(key)) == []
    assert [m["id"] for m in mail.fetch_inbox(BACK, "Bob") if m["subject"] == "api v2"] == [mid]
    # Bob answers in his project; Alice gets it in hers
    answer = mail.reply_message(BACK, mid, "Bob", "looks good")
    assert [d["project"] for d in answer["deliveries"]] == [BACK, FRONT]
    got = [m for m in mail.fetch_inbox(FRONT, "Alice") if m["id"] == answer["id"]]
    assert got and got[0]["from"] == f"Bob@{back}" and got[0]["thread_id"] == mid


def test_a_crash_between_the_two_commits_is_completed_once(mail, store, monkeypatch):
    _approved(mail)
    back = store.resolve(BACK)

    class Crash(Exception):
        pass

    def crash(source: str, message_id: str) -> None:
        raise Crash(message_id)

    monkeypatch.setattr(relay, "FAULT_HOOK", crash)
    with pytest.raises(Crash) as stopped:
        mail.send_message(FRONT, "Alice", [f"Bob@{BACK}"], "cut short", "b", options=SendOptions(idempotency_key="k-1"))
    mid = str(stopped.value)
    a, b = store.archive(FRONT).snapshot(), store.archive(BACK).snapshot()
    assert a.load(message_path(mid), Message) is not None
    assert a.load(relay_path(back, mid), Relay).delivered_at is None  # owed
    assert not b.exists(message_path(mid))
    monkeypatch.setattr(relay, "FAULT_HOOK", None)
    done = mail.complete_relays()
    assert [(d["message_id"], d["written"]) for d in done] == [(mid, True)]
    assert mail.complete_relays() == []
    again = mail.send_message(FRONT, "Alice", [f"Bob@{BACK}"], "cut short", "b",
                              options=SendOptions(idempotency_key="k-1"))
    assert again["created"] is False and again["deliveries"][1]["payload"]["id"] == mid
    assert [m["id"] for m in mail.fetch_inbox(BACK, "Bob") if m["subject"] == "cut short"] == [mid]
    assert store.archive(FRONT).snapshot().load(relay_path(back, mid), Relay).delivered_at is not None
    assert check_archive(store.archive(BACK)) == [] and check_archive(store.archive(FRONT)) == []
