"""Threads, topics, single messages and time windows from the index equal a walk over every message file.

Each oracle here reads the snapshot the slow way (every canonical message,
newest first by ID, as the day folders list them) and states what the read
means; the index must give exactly the same answer.
"""

from __future__ import annotations

import datetime as dt
import itertools

from gitmail.index import indexer_for
from gitmail.mail import mailbox
from gitmail.mail.delivery import MessageView
from gitmail.model.ids import id_time
from gitmail.model.records import MESSAGES, Message, inbox_path, outbox_path
from gitmail.storage.snapshot import Snapshot

from .mail_helpers import PROJECT, make_mail, open_agents, send


def every_message(snap: Snapshot, since: str | None = None) -> list[Message]:
    found = (snap.load(path, Message) for _, path in snap.day_files(MESSAGES, since))
    return [m for m in found if m is not None]


def thread_oracle(snap: Snapshot, thread_id: str, bodies: bool) -> list[dict]:
    found = sorted((m for m in every_message(snap) if thread_id in (m.thread_id, m.id)),
                   key=lambda m: (m.created_ts, m.id))
    return [MessageView.of(m, include_body=bodies) for m in found]


def topic_oracle(snap: Snapshot, topic: str, *, viewer: str | None, since: str | None, unread_only: bool,
                 limit: int, bodies: bool) -> list[dict]:
    out = []
    for m in every_message(snap, since):
        if (m.topic or "").lower() != topic.lower() or (since and m.created_ts <= since):
            continue
        if unread_only and viewer is not None:
            receipt = mailbox.receipt(snap, viewer, m.id)
            if not snap.exists(inbox_path(viewer, m.id)) or (receipt is not None and receipt.read_at):
                continue
        out.append(MessageView.of(m, include_body=bodies).wire())
    return out[:limit]


def message_oracle(snap: Snapshot, message_id: str, viewer: str | None) -> dict:
    for m in every_message(snap):
        if m.id == message_id:
            own = snap.load(outbox_path(m.sender, m.id), Message) if viewer == m.sender else None
            return MessageView.of(own, show_bcc=True) if own is not None else MessageView.of(m)
    raise AssertionError(f"no message {message_id}")


def window_oracle(snap: Snapshot, start: str, end: str, limit: int) -> list[dict]:
    return [MessageView.of(m) for m in every_message(snap) if start < m.created_ts <= end][:limit]


def _archive(store, wall):
    mail = make_mail(store)
    open_agents(mail, "BlueLake", "GreenCastle", "RedStone")
    sent = []
    first = send(mail, "BlueLake", ["GreenCastle"], "Kickoff", "## Plan\n- [ ] write the schema @GreenCastle")
    sent.append(first)
    for i in range(8):
        wall.advance(minutes=30)
        sent.append(send(mail, ["BlueLake", "GreenCastle", "RedStone"][i % 3], ["GreenCastle", "RedStone"][i % 2:],
                         f"Step {i}", f"Body {i}: we decided on step {i}.",
                         cc=["BlueLake"] if i % 2 else None, bcc=["BlueLake"] if i == 4 else None,
                         topic=["ops", "OPS", "build", None][i % 4], thread_id=first["id"] if i < 5 else None))
    wall.advance(days=2)
    sent.append(send(mail, "RedStone", ["GreenCastle"], "Later", "Later on ops", topic="ops"))
    mail.mark_message_read(PROJECT, "GreenCastle", sent[1]["id"])
    mail.mark_message_read(PROJECT, "RedStone", sent[2]["id"])
    return mail, sent


def test_threads_topics_messages_and_windows_match_a_walk_of_every_message(store, wall):
    mail, sent = _archive(store, wall)
    index = indexer_for(store).project(PROJECT)
    snap = store.archive(PROJECT).snapshot()

    threads = {m["thread_id"] for m in sent} | {"no-such-thread"}
    for thread_id, bodies in itertools.product(sorted(threads), [False, True]):
        assert index.thread(thread_id, include_bodies=bodies) == thread_oracle(snap, thread_id, bodies), thread_id
    assert len(index.thread(sent[0]["id"])) == 6

    since_values = [None, sent[3]["created_ts"], sent[-1]["created_ts"]]
    for topic, viewer, since, unread, limit, bodies in itertools.product(
            ["ops", "Ops", "build", "none"], [None, "GreenCastle", "RedStone"], since_values, [False, True], [1, 50],
            [False, True]):
        expected = topic_oracle(snap, topic, viewer=viewer, since=since, unread_only=unread, limit=limit,
                                bodies=bodies)
        got = index.topic(topic, viewer=viewer, since_ts=since, unread_only=unread, limit=limit,
                          include_bodies=bodies)
        assert got == expected, (topic, viewer, since, unread, limit, bodies)

    for payload, viewer in itertools.product(sent, [None, "BlueLake", "GreenCastle", "RedStone"]):
        assert index.message(payload["id"], viewer=viewer) == message_oracle(snap, payload["id"], viewer)
    assert index.message(sent[5]["id"], viewer=sent[5]["from"])["bcc"] == ["BlueLake"]
    assert index.message("0" * 23) is None

    times = sorted(m["created_ts"] for m in sent)
    for start, end, limit in [(times[0], times[-1], 500), (times[2], times[6], 3), (times[-1], times[-1], 5)]:
        assert index.window(start, end, limit=limit) == window_oracle(snap, start, end, limit)


def test_the_mail_reads_agree_with_the_walk_and_follow_new_commits(store, wall):
    mail, sent = _archive(store, wall)
    snap = store.archive(PROJECT).snapshot()
    thread = mail.get_thread(PROJECT, sent[0]["id"])
    assert thread["messages"] == thread_oracle(snap, sent[0]["id"], True) and thread["count"] == 6
    got = mail.fetch_topic(PROJECT, "ops", agent_name="GreenCastle", unread_only=True)
    expected = topic_oracle(snap, "ops", viewer="GreenCastle", since=None, unread_only=True, limit=50, bodies=True)
    for item in expected:
        item.pop("attachments")
    assert got == expected and got
    one = mail.get_message(PROJECT, sent[5]["id"], agent_name=sent[5]["from"])
    assert one == {"project": PROJECT, **message_oracle(snap, sent[5]["id"], sent[5]["from"])}

    # A message committed after those reads is in the next ones (the index catches up first).
    reply = mail.reply_message(PROJECT, sent[0]["id"], "GreenCastle", "On it.")["deliveries"][0]["payload"]
    assert mail.get_thread(PROJECT, sent[0]["id"])["messages"][-1]["id"] == reply["id"]
    assert mail.get_message(PROJECT, reply["id"])["body_md"] == "On it."
    summary = mail.summarize_thread(PROJECT, sent[0]["id"])["summary"]
    assert summary["message_count"] == 7 and "write the schema @GreenCastle" in summary["action_items"]


def test_a_purged_message_reads_as_removed(store, wall):
    mail, sent = _archive(store, wall)
    wall.advance(days=3)
    mail.purge_old_messages(PROJECT, max_age_days=1)
    failure = None
    try:
        mail.get_message(PROJECT, sent[0]["id"])
    except Exception as exc:  # noqa: BLE001 - inspected below
        failure = exc
    assert failure is not None and getattr(failure, "code", None) == "NOT_FOUND"
    assert "removed from the archive" in str(failure)
    assert mail.get_thread(PROJECT, sent[0]["id"])["count"] == 0
    # The feed reads bodies by the blob its rows name: a purged message leaves the pages, body and all.
    for name in {m["to"][0] for m in sent}:
        page = mail.read_arrivals(PROJECT, name, after=0, limit=200)
        assert sent[0]["id"] not in {row["id"] for row in page.rows}
        assert sent[0]["body_md"] not in page.bodies
        assert not mail.read_messages(PROJECT, name, after=0, limit=200).messages


def test_purge_candidates_from_the_index_are_the_old_messages_of_the_tip(store, wall):
    mail, sent = _archive(store, wall)
    archive = store.archive(PROJECT)
    # A message the index has not seen yet (written straight through the engine): the purge still finds it.
    from .index_helpers import message as make_message
    from .index_helpers import send as commit_message

    late = make_message("BlueLake", ["GreenCastle"], "Straight in", "no index saw this",
                        when=wall.now() - dt.timedelta(days=40))
    commit_message(archive, late)
    wall.advance(days=1)
    snap = archive.snapshot()
    for days in (1, 2, 3, 30, 60):
        cutoff = wall.now() - dt.timedelta(days=days)
        expected = sorted(m.id for m in every_message(snap) if id_time(m.id) < cutoff)
        found = mail.purge_old_messages(PROJECT, max_age_days=days, dry_run=True)
        assert found["message_ids"] == expected and found["purged"] == len(expected), days
    assert mail.purge_old_messages(PROJECT, max_age_days=30, dry_run=True)["message_ids"] == [late.id]
