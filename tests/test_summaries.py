"""Summaries without a model: threads, digests, recent windows, stored summaries."""

from __future__ import annotations

from .conftest import fails_cleanly, tip
from .mail_helpers import PROJECT, make_mail, open_agents, send

PLAN = """# Migration plan

We decided to move the users table first.

- split the read path
- keep the old columns for a week

- [ ] write the backfill script
- [x] review the schema

```
TODO: this is code, not a task
```
"""

ANSWER = """@GreenCastle please confirm the cutover window.
TODO: update the runbook
Risk: the backfill may take an hour.
"""


def test_summarize_single_thread(store):
    mail = make_mail(store)
    open_agents(mail, "GreenCastle", "BlueLake", "RedStone")
    first = send(mail, "GreenCastle", ["BlueLake"], subject="Migration", body=PLAN, cc=["RedStone"])
    mail.reply_message(PROJECT, first["id"], "BlueLake", ANSWER)
    result = mail.summarize_thread(PROJECT, first["id"], include_examples=True)
    summary = result["summary"]
    assert result["thread_id"] == first["id"]
    assert summary["participants"] == ["BlueLake", "GreenCastle", "RedStone"]
    assert summary["message_count"] == 2 and summary["subject"] == "Migration"
    assert "Migration plan" in summary["key_points"]
    assert "We decided to move the users table first." in summary["key_points"]
    assert "split the read path" in summary["key_points"]
    assert "done: review the schema" in summary["key_points"]
    assert "Risk: the backfill may take an hour." in summary["key_points"]
    assert "write the backfill script" in summary["action_items"]
    assert "update the runbook" in summary["action_items"]
    assert "@GreenCastle please confirm the cutover window." in summary["action_items"]
    assert not any("this is code" in item for item in summary["action_items"] + summary["key_points"])
    assert [m["id"] for m in result["examples"]][:1] == [first["id"]] and len(result["examples"]) == 2
    assert "examples" not in mail.summarize_thread(PROJECT, first["id"])


def test_digest_across_threads(store):
    mail = make_mail(store)
    open_agents(mail, "GreenCastle", "BlueLake")
    a = send(mail, "GreenCastle", ["BlueLake"], subject="A", body="- [ ] ship A\n@BlueLake owns it", thread_id="TKT-1")
    send(mail, "BlueLake", ["GreenCastle"], subject="B", body="TODO: ship B with BlueLake", thread_id="TKT-2")
    digest = mail.summarize_thread(PROJECT, "TKT-1, TKT-2,TKT-404")
    assert [t["thread_id"] for t in digest["threads"]] == ["TKT-1", "TKT-2", "TKT-404"]
    assert digest["threads"][0]["summary"]["action_items"] == ["ship A"]
    assert digest["threads"][2]["summary"]["message_count"] == 0
    aggregate = digest["aggregate"]
    assert aggregate["action_items"] == ["ship A", "ship B with BlueLake"]
    assert aggregate["top_mentions"][0] == {"name": "BlueLake", "count": 2}
    assert a["thread_id"] == "TKT-1"


def test_summarize_thread_errors(store):
    mail = make_mail(store)
    with fails_cleanly(store, "NOT_FOUND", PROJECT):
        mail.summarize_thread(PROJECT, "TKT-missing")
    with fails_cleanly(store, "INVALID_ARGUMENT", PROJECT):
        mail.summarize_thread(PROJECT, " , ")
    with fails_cleanly(store, "INVALID_ARGUMENT", PROJECT):
        mail.summarize_thread(PROJECT, "TKT-1", per_thread_limit=0)


def test_summarize_recent_is_stored_and_reused(store):
    mail = make_mail(store)
    open_agents(mail, "GreenCastle", "BlueLake")
    send(mail, "GreenCastle", ["BlueLake"], subject="One", body="- [ ] task one")
    send(mail, "BlueLake", ["GreenCastle"], subject="Two", body="We agreed on Friday.")
    before = tip(store, PROJECT)
    recent = mail.summarize_recent(PROJECT, since_hours=1)
    assert recent["message_count"] == 2 and recent["thread_count"] == 2 and recent["cached"] is False
    assert recent["action_items"] == ["task one"] and recent["key_points"] == ["We agreed on Friday."]
    assert [t["subject"] for t in recent["threads"]] == ["One", "Two"]
    assert tip(store, PROJECT) != before  # stored as a record
    stored_at = tip(store, PROJECT)
    again = mail.summarize_recent(PROJECT, since_hours=1)
    assert again["cached"] is True and again["id"] == recent["id"]
    assert tip(store, PROJECT) == stored_at
    fetched = mail.fetch_summary(PROJECT)
    assert [s["id"] for s in fetched] == [recent["id"]]
    assert mail.fetch_summary(PROJECT, since_hours=24, limit=1)[0]["action_items"] == ["task one"]
    with fails_cleanly(store, "INVALID_ARGUMENT", PROJECT):
        mail.summarize_recent(PROJECT, since_hours=0)
    with fails_cleanly(store, "INVALID_ARGUMENT", PROJECT):
        mail.fetch_summary(PROJECT, limit=0)


def test_summarize_recent_with_no_mail_stores_nothing(store):
    mail = make_mail(store)
    head = tip(store, PROJECT)
    empty = mail.summarize_recent(PROJECT, since_hours=2)
    assert empty["message_count"] == 0 and tip(store, PROJECT) == head
    assert mail.fetch_summary(PROJECT) == []
