"""Retention: purging old messages leaves tombstones, history keeps the content."""

from __future__ import annotations

from gitmail import Change
from gitmail.mail.facade import SendOptions
from gitmail.model.ids import new_id
from gitmail.model.records import IdempotencyKey, Tombstone, inbox_path, message_path, tombstone_path
from gitmail.storage.fsck import check_archive
from gitmail.storage.store import slug_for

from .conftest import fails_cleanly, git, tip
from .mail_helpers import PROJECT, make_mail, open_agents, send


def test_purge_removes_old_messages_and_keeps_history(store, wall):
    mail = make_mail(store)
    open_agents(mail, "GreenCastle", "BlueLake")
    ancient = send(mail, "GreenCastle", ["BlueLake"], body="ancient phrase zebra")["id"]
    mail.mark_message_read(PROJECT, "BlueLake", ancient)
    wall.advance(days=180)
    assert mail.purge_old_messages(PROJECT, max_age_days=180, dry_run=True)["purged"] == 0  # not older than that
    wall.advance(days=20)
    recent = send(mail, "GreenCastle", ["BlueLake"])
    reply = mail.reply_message(PROJECT, ancient, "BlueLake", "replying to something old")
    with fails_cleanly(store, "INVALID_ARGUMENT", PROJECT):
        mail.purge_old_messages(PROJECT, max_age_days=0)
    head = tip(store, PROJECT)
    dry = mail.purge_old_messages(PROJECT, max_age_days=180, dry_run=True)
    assert dry["purged"] == 1 and dry["message_ids"] == [ancient] and dry["commit"] is None
    assert tip(store, PROJECT) == head
    result = mail.purge_old_messages(PROJECT, max_age_days=180)
    assert result["purged"] == 1 and result["commit"] and "history" in result["note"]
    snap = store.archive(PROJECT).snapshot()
    assert not snap.exists(message_path(ancient)) and not snap.exists(inbox_path("BlueLake", ancient))
    assert not list(p for p in snap.walk("agents/BlueLake/receipts") if ancient in p)
    assert snap.load(tombstone_path(ancient), Tombstone).reason == "retention"
    assert snap.exists(message_path(recent["id"])) and snap.exists(message_path(reply["id"]))
    archive_dir = store.paths(slug_for(PROJECT)).archive
    assert git("--git-dir", archive_dir, "grep", "-l", "ancient phrase zebra", "main", check=False) == ""
    assert "ancient phrase zebra" in git("--git-dir", archive_dir, "log", "-p", "--format=%s")
    assert check_archive(store.archive(PROJECT)) == []  # the reply's target is tombstoned, not dangling
    with fails_cleanly(store, "NOT_FOUND", PROJECT) as info:
        mail.get_message(PROJECT, ancient)
    assert "removed" in info.value.message
    again = mail.purge_old_messages(PROJECT, max_age_days=180)
    assert again["purged"] == 0 and again["commit"] is None


def test_purge_drops_expired_idempotency_keys(store):
    mail = make_mail(store)
    open_agents(mail, "GreenCastle", "BlueLake")
    mail.send_message(PROJECT, "GreenCastle", ["BlueLake"], "s", "b", options=SendOptions(idempotency_key="fresh"))
    stale = "agents/GreenCastle/idempotency/2001/01/01/aa/aa/" + "a" * 64 + ".yaml"
    record = IdempotencyKey(key_hash="a" * 64, agent="GreenCastle", operation="send_message",
                            request_hash="b" * 64, created_at="2001-01-01T00:00:00.000Z", message_id=new_id())
    assert record.path() == stale
    store.archive(PROJECT).transact(lambda snap: Change("old key").put_record(record))
    result = mail.purge_old_messages(PROJECT, max_age_days=30)
    assert result["purged"] == 0 and result["expired_keys_removed"] == 1
    snap = store.archive(PROJECT).snapshot()
    assert not snap.exists(stale)
    assert len([p for p in snap.walk("agents/GreenCastle/idempotency")]) == 1
