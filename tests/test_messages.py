"""Sending and replying: recipients, flags, threads, copies, commits, errors."""

from __future__ import annotations

from gitmail.mail.facade import SendOptions
from gitmail.model.records import Message, inbox_path, message_path, outbox_path
from gitmail.storage.store import slug_for

from .conftest import fails_cleanly, git, tip
from .mail_helpers import PROJECT, make_mail, open_agents, register, send


def archive_dir(store):
    return store.paths(slug_for(PROJECT)).archive


def test_send_writes_canonical_inbox_and_outbox_copies_in_one_commit(store):
    mail = make_mail(store)
    open_agents(mail, "GreenCastle", "BlueLake", "RedStone")
    before = tip(store, PROJECT)
    result = mail.send_message(PROJECT, "GreenCastle", ["BlueLake"], "Plan for /api/users", "See **below**.",
                               options=SendOptions(cc=["RedStone"], importance="high", ack_required=True,
                                                   topic="br-abc.1"))
    assert result["count"] == 1 and result["created"] is True
    assert result["deliveries"][0]["project"] == PROJECT
    payload = result["deliveries"][0]["payload"]
    assert payload["from"] == "GreenCastle" and payload["to"] == ["BlueLake"] and payload["cc"] == ["RedStone"]
    assert payload["importance"] == "high" and payload["ack_required"] is True and payload["topic"] == "br-abc.1"
    assert payload["thread_id"] == payload["id"] and payload["body_md"] == "See **below**."
    snap = store.archive(PROJECT).snapshot()
    blob = snap.blob_id(message_path(payload["id"]))
    assert snap.blob_id(inbox_path("BlueLake", payload["id"])) == blob
    assert snap.blob_id(inbox_path("RedStone", payload["id"])) == blob
    assert snap.blob_id(outbox_path("GreenCastle", payload["id"])) == blob
    log = git("--git-dir", archive_dir(store), "log", "--format=%an|%s", f"{before}..main")
    assert log.strip() == f"GreenCastle|GreenCastle sent {payload['id']} to BlueLake, RedStone: Plan for /api/users"


def test_bcc_is_only_in_the_senders_copy(store):
    mail = make_mail(store)
    open_agents(mail, "GreenCastle", "BlueLake", "Hidden")
    payload = send(mail, "GreenCastle", ["BlueLake"], bcc=["Hidden"])
    assert payload["bcc"] == ["Hidden"]
    snap = store.archive(PROJECT).snapshot()
    canonical = snap.load(message_path(payload["id"]), Message)
    assert canonical.bcc == []
    assert snap.read(inbox_path("Hidden", payload["id"])) == snap.read(message_path(payload["id"]))
    assert snap.load(outbox_path("GreenCastle", payload["id"]), Message).bcc == ["Hidden"]
    assert "bcc" not in mail.fetch_inbox(PROJECT, "BlueLake")[0]
    assert mail.fetch_inbox(PROJECT, "Hidden")[0]["kind"] == "bcc"
    assert mail.get_message(PROJECT, payload["id"])["to"] == ["BlueLake"]
    assert "bcc" not in mail.get_message(PROJECT, payload["id"])
    assert mail.get_message(PROJECT, payload["id"], agent_name="GreenCastle")["bcc"] == ["Hidden"]


def test_recipient_names_are_case_insensitive_and_deduplicated(store):
    mail = make_mail(store)
    open_agents(mail, "GreenCastle", "BlueLake", "RedStone")
    payload = send(mail, "greencastle", ["bluelake", "BlueLake"], cc=["BLUELAKE", "redstone"])
    assert payload["from"] == "GreenCastle"
    assert payload["to"] == ["BlueLake"] and payload["cc"] == ["RedStone"]


def test_send_errors_leave_the_archive_unchanged(store):
    mail = make_mail(store)
    open_agents(mail, "GreenCastle", "BlueLake")
    with fails_cleanly(store, "INVALID_ARGUMENT", PROJECT):
        mail.send_message(PROJECT, "GreenCastle", [], "s", "b")
    with fails_cleanly(store, "RECIPIENT_NOT_FOUND", PROJECT) as info:
        mail.send_message(PROJECT, "GreenCastle", ["BlueLake", "Ghost", "Phantom"], "s", "b")
    assert info.value.data["unknown"] == ["Ghost", "Phantom"] and "Ghost" in info.value.message
    with fails_cleanly(store, "NOT_FOUND", PROJECT):
        mail.send_message(PROJECT, "Nobody", ["BlueLake"], "s", "b")
    with fails_cleanly(store, "INVALID_ARGUMENT", PROJECT):
        mail.send_message(PROJECT, "GreenCastle", ["BlueLake"], "s", "b", options=SendOptions(importance="two\nlines"))
    with fails_cleanly(store, "INVALID_ARGUMENT", PROJECT):
        mail.send_message(PROJECT, "GreenCastle", ["BlueLake"], "two\nlines", "b")
    with fails_cleanly(store, "INVALID_ARGUMENT", PROJECT):
        mail.send_message(PROJECT, "GreenCastle", ["BlueLake"], "s", "b", options=SendOptions(topic="-bad"))
    with fails_cleanly(store, "INVALID_ARGUMENT", PROJECT):
        mail.send_message(PROJECT, "GreenCastle", ["BlueLake"], "s", "b", options=SendOptions(topic="x" * 65))
    with fails_cleanly(store, "INVALID_ARGUMENT", PROJECT):
        mail.send_message(PROJECT, "GreenCastle", ["bad name"], "s", "b")
    with fails_cleanly(store, "INVALID_ARGUMENT", PROJECT):
        mail.send_message(PROJECT, "GreenCastle", ["BlueLake"], "s", "x" * (1024 * 1024 + 1))
    with fails_cleanly(store, "INVALID_ARGUMENT", PROJECT):
        mail.send_message(PROJECT, "GreenCastle", ["BlueLake"], "s", "b", options=SendOptions(broadcast=True))
    with fails_cleanly(store, "NOT_FOUND", PROJECT):  # an ID-shaped thread must exist
        mail.send_message(PROJECT, "GreenCastle", ["BlueLake"], "s", "b", options=SendOptions(thread_id="0" * 23))
    mail.retire_agent(PROJECT, "BlueLake")
    with fails_cleanly(store, "AGENT_INACTIVE", PROJECT):
        mail.send_message(PROJECT, "GreenCastle", ["BlueLake"], "s", "b")
    with fails_cleanly(store, "AGENT_INACTIVE", PROJECT):
        mail.send_message(PROJECT, "BlueLake", ["GreenCastle"], "s", "b")
    with fails_cleanly(store, "NOT_FOUND", "/data/elsewhere"):
        mail.send_message("/data/elsewhere", "GreenCastle", ["BlueLake"], "s", "b")


def test_topic_rule_accepts_dots_and_thread_labels(store):
    mail = make_mail(store)
    open_agents(mail, "GreenCastle", "BlueLake")
    payload = send(mail, "GreenCastle", ["BlueLake"], topic="br-abc.1", thread_id="TKT-123")
    assert payload["topic"] == "br-abc.1" and payload["thread_id"] == "TKT-123"


def test_broadcast_reaches_active_agents_and_reports_skips(store):
    mail = make_mail(store)
    open_agents(mail, "GreenCastle", "BlueLake", "RedStone", "Retiree")
    register(mail, "Private")
    mail.set_contact_policy(PROJECT, "Private", "contacts_only")
    register(mail, "Hermit")
    mail.set_contact_policy(PROJECT, "Hermit", "block_all")
    mail.retire_agent(PROJECT, "Retiree")
    result = mail.send_message(PROJECT, "GreenCastle", [], "All hands", "Standup in 5",
                               options=SendOptions(broadcast=True))
    assert result["deliveries"][0]["payload"]["to"] == ["BlueLake", "RedStone"]
    skipped = {s["agent"]: s["reason"] for s in result["broadcast_skipped"]}
    assert set(skipped) == {"Private", "Hermit", "Retiree"}
    assert "retired" in skipped["Retiree"] and "block_all" in skipped["Hermit"]
    assert mail.list_contacts(PROJECT, "Private") == []  # no contact request for skipped agents
    mail.set_contact_policy(PROJECT, "BlueLake", "block_all")
    mail.set_contact_policy(PROJECT, "RedStone", "block_all")
    with fails_cleanly(store, "INVALID_ARGUMENT", PROJECT) as info:
        mail.send_message(PROJECT, "GreenCastle", [], "All hands", "again", options=SendOptions(broadcast=True))
    assert len(info.value.data["broadcast_skipped"]) == 5


def test_reply_threads_prefixes_once_and_inherits_flags(store):
    mail = make_mail(store)
    open_agents(mail, "GreenCastle", "BlueLake", "RedStone")
    original = send(mail, "GreenCastle", ["BlueLake"], subject="Plan", importance="urgent", ack_required=True,
                    topic="plan")
    reply = mail.reply_message(PROJECT, original["id"], "BlueLake", "Questions: ...")
    assert reply["thread_id"] == original["id"] and reply["reply_to"] == original["id"]
    assert reply["subject"] == "Re: Plan" and reply["to"] == ["GreenCastle"]
    assert reply["importance"] == "urgent" and reply["ack_required"] is True and reply["topic"] == "plan"
    assert reply["created"] is True and reply["deliveries"][0]["payload"]["id"] == reply["id"]
    again = mail.reply_message(PROJECT, reply["id"], "GreenCastle", "Answers",
                               options=SendOptions(subject_prefix="RE:", cc=["RedStone"], importance="low",
                                                   ack_required=False))
    assert again["subject"] == "Re: Plan"  # the prefix is applied once, ignoring case
    assert again["thread_id"] == original["id"] and again["to"] == ["BlueLake"] and again["cc"] == ["RedStone"]
    assert again["importance"] == "low" and again["ack_required"] is False
    labelled = send(mail, "GreenCastle", ["BlueLake"], subject="Ticket", thread_id="TKT-9")
    assert mail.reply_message(PROJECT, labelled["id"], "BlueLake", "ok")["thread_id"] == "TKT-9"
    thread = mail.get_thread(PROJECT, original["id"])
    assert [m["id"] for m in thread["messages"]] == [original["id"], reply["id"], again["id"]]


def test_reply_errors(store):
    mail = make_mail(store)
    open_agents(mail, "GreenCastle", "BlueLake")
    original = send(mail, "GreenCastle", ["BlueLake"])
    with fails_cleanly(store, "INVALID_ARGUMENT", PROJECT):
        mail.reply_message(PROJECT, "12ab", "BlueLake", "x")
    with fails_cleanly(store, "NOT_FOUND", PROJECT):  # a number names a message imported from mcp_agent_mail
        mail.reply_message(PROJECT, "1234", "BlueLake", "x")
    with fails_cleanly(store, "NOT_FOUND", PROJECT):
        mail.reply_message(PROJECT, "0" * 23, "BlueLake", "x")
    with fails_cleanly(store, "NOT_FOUND", PROJECT):
        mail.reply_message(PROJECT, original["id"], "Nobody", "x")
    with fails_cleanly(store, "RECIPIENT_NOT_FOUND", PROJECT):
        mail.reply_message(PROJECT, original["id"], "BlueLake", "x", to=["Ghost"])
    with fails_cleanly(store, "INVALID_ARGUMENT", PROJECT):
        mail.reply_message(PROJECT, original["id"], "BlueLake", "x", options=SendOptions(subject_prefix="a\nb"))


def test_one_options_object_serves_send_and_reply_and_each_refuses_the_others_fields(store):
    mail = make_mail(store)
    open_agents(mail, "GreenCastle", "BlueLake")
    first = mail.send_message(PROJECT, "GreenCastle", ["BlueLake"], "Plan", "b",
                              SendOptions(importance="high", topic="plan"))
    assert first.message is not None and (first.message.importance, first.message.topic) == ("high", "plan")
    for name, value in (("thread_id", "TKT-1"), ("topic", "other"), ("broadcast", True)):
        with fails_cleanly(store, "INVALID_ARGUMENT", PROJECT) as info:
            mail.reply_message(PROJECT, first.message.id, "BlueLake", "b", SendOptions(**{name: value}))
        assert info.value.data == {"field": name} and "reply stays in its original's thread" in info.value.message
    with fails_cleanly(store, "INVALID_ARGUMENT", PROJECT) as info:
        mail.send_message(PROJECT, "GreenCastle", ["BlueLake"], "s", "b", SendOptions(subject_prefix="Fwd:"))
    assert info.value.data == {"field": "subject_prefix"}
    reply = mail.reply_message(PROJECT, first.message.id, "BlueLake", "ok", SendOptions(subject_prefix="Ans:"))
    assert reply.message is not None and reply.message.subject == "Ans: Plan"
    # the reply is the stored message followed by what the send did, as it always was on the wire
    assert list(reply)[:3] == ["id", "thread_id", "subject"] and reply["deliveries"][0]["payload"]["id"] == reply["id"]
    assert (reply.message.importance, reply.message.topic, reply.delivery.created) == ("high", "plan", True)
