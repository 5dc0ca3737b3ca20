"""Importing an mcp_agent_mail store: what maps to what, history, idempotence, old ids, bad input.

The store is the committed one of a newer release (``tests/agent_mail_v032``,
built by :mod:`tests.agent_mail_fixture`); the import runs in process on a
real store. A store written by a real 0.1.0 server, imports killed midway and
the MCP tools after an import are in ``test_import_agent_mail_processes.py``.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
import shutil
import sqlite3

import pygit2
import pytest

from gitmail import Mail
from gitmail.coord.lookup import ts_of_hlc
from gitmail.importers.agentmail import import_agent_mail
from gitmail.importers.agentmail_map import SOURCE, gid
from gitmail.index import indexer_for
from gitmail.mail.delivery import remove_message
from gitmail.mail.tokens import token_matches
from gitmail.model.clock import HLC
from gitmail.model.ids import id_time
from gitmail.model.records import (
    Agent,
    Contact,
    Message,
    ProductLink,
    Receipt,
    Relay,
    Reservation,
    Summary,
    Window,
    contact_path,
    inbox_path,
    outbox_path,
    product_path,
    profile_path,
    receipt_path,
    relay_path,
    window_path,
)
from gitmail.storage.engine import Change
from gitmail.storage.fsck import check_archive
from gitmail.storage.snapshot import Snapshot
from gitmail.storage.store import slug_for

from .agent_mail_fixture import ARCHIVE, ATTACHMENT, BACK, DATABASE, FILE_ATTACHMENT, FRONT, TOKENS
from .conftest import fails_cleanly

FRONT_SLUG, BACK_SLUG = slug_for(FRONT), slug_for(BACK)


def messages_by_old_id(snap: Snapshot) -> dict[int, Message]:
    """Every message of a snapshot, by the id it had in the source."""
    out = {}
    for path in snap.walk("messages"):
        message = snap.load(path, Message)
        assert message is not None
        out[message.extra["x-agent-mail-id"]] = message
    return out


def at(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text).replace(tzinfo=dt.UTC)


@pytest.fixture
def imported(store):
    report = import_agent_mail(store, DATABASE, archive=ARCHIVE, catch_up=False)
    return report, store.archive(FRONT).snapshot(), store.archive(BACK).snapshot()


def test_agents_keep_their_tokens_retirement_and_last_activity(imported):
    report, front, back = imported
    alice, bob, carol = (front.load(profile_path(name), Agent) for name in ("Alice", "Bob", "Carol"))
    dave = back.load(profile_path("Dave"), Agent)
    assert token_matches(TOKENS["Alice"], alice.token_hash) and token_matches(TOKENS["Dave"], dave.token_hash)
    assert not token_matches(TOKENS["Bob"], alice.token_hash)
    assert TOKENS["Alice"] not in front.read(profile_path("Alice")).decode()  # only the hash is kept
    assert carol.token_hash is None and carol.attachments_policy == "file" and carol.contact_policy == "open"
    assert (bob.status, bob.retired_at, bob.contact_policy) == ("retired", "2026-01-07T09:00:00.000Z", "contacts_only")
    assert alice.inception_ts == "2026-01-05T09:00:00.000Z" and ts_of_hlc(alice.hlc) == "2026-01-07T17:30:00.000Z"
    assert (alice.program, alice.model, alice.task_description) == ("claude-code", "opus-4.1", "the checkout page")
    assert alice.extra == {"x-agent-mail-id": 1} and alice.id == gid("agent", at("2026-01-05 09:00:00"), FRONT, 1)
    assert front.load(profile_path("Overseer"), Agent) is None  # the name gitmail keeps for the human
    assert report.problems["agent_name_not_allowed"].examples == ["agent 4: 'Overseer'"]
    counts = {project.human_key: project.counts for project in report.projects}
    assert counts[FRONT]["tokens"].imported == 2 and counts[BACK]["tokens"].imported == 1


def test_messages_keep_their_parties_threads_times_and_attachments(imported):
    _, front, _ = imported
    by_old = messages_by_old_id(front)
    assert sorted(by_old) == [1, 2, 3, 4, 5, 7, 9]  # 6 came from the agent left out, 8 belongs to the backend
    plan = by_old[1]
    assert (plan.sender, plan.to, plan.cc, plan.thread_id, plan.topic) == ("Alice", ["Bob"], ["Carol"], "1",
                                                                           "release-1.2")
    assert (plan.importance, plan.ack_required, plan.subject) == ("high", True, "Release plan")
    assert plan.created_ts == "2026-01-05T10:00:00.250Z" == id_time(plan.id).isoformat(timespec="milliseconds")[
        :23] + "Z"
    [attachment] = plan.attachments
    digest = hashlib.sha256(ATTACHMENT).hexdigest()
    assert attachment["sha256"] == digest and front.read(attachment["path"]) == ATTACHMENT
    assert attachment["path"] in plan.body and FILE_ATTACHMENT["path"] not in plan.body
    assert by_old[2].thread_id == by_old[9].thread_id == "1" and by_old[5].thread_id == "TKT-7"
    assert by_old[5].topic is None and by_old[7].attachments == []  # an invalid topic, a file that is gone
    budget = by_old[3]
    assert budget.bcc == [] and front.load(outbox_path("Carol", budget.id), Message).bcc == ["Bob"]
    assert front.exists(inbox_path("Bob", budget.id)) and front.exists(inbox_path("Alice", budget.id))
    for old, message in by_old.items():
        for name in message.to + message.cc:
            if "@" not in name:
                assert front.read(inbox_path(name, message.id)) == front.read(message.path()), (old, name)


def test_a_message_across_projects_is_kept_in_both_archives(imported):
    _, front, back = imported
    here, there = messages_by_old_id(front)[4], messages_by_old_id(back)[4]
    assert here.id == there.id and here.created_ts == "2026-01-06T09:00:00.000Z"
    assert (here.sender, here.to) == (f"Dave@{BACK_SLUG}", ["Alice"])
    assert (there.sender, there.to) == ("Dave", [f"Alice@{FRONT_SLUG}"])
    assert back.exists(outbox_path("Dave", there.id)) and front.exists(inbox_path("Alice", here.id))
    relay = back.load(relay_path(FRONT_SLUG, there.id), Relay)
    assert relay is not None and relay.delivered_at == here.created_ts
    contact = front.load(contact_path(f"Dave@{BACK_SLUG}", "Alice"), Contact)
    assert contact.status == "approved" and contact.responded_at == "2026-01-05T14:05:00.000Z"


def test_receipts_contacts_reservations_products_windows_and_summaries(imported):
    _, front, back = imported
    by_old = messages_by_old_id(front)
    bob = front.load(receipt_path("Bob", by_old[1].id), Receipt)
    assert (bob.read_at, bob.acked_at) == ("2026-01-05T10:30:00.000Z", "2026-01-05T10:31:00.000Z")
    carol = front.load(receipt_path("Carol", by_old[1].id), Receipt)
    assert (carol.read_at, carol.acked_at) == ("2026-01-05T11:00:00.000Z", None)
    assert front.load(receipt_path("Bob", by_old[3].id), Receipt).read_at == "2026-01-06T08:00:00.000Z"  # a bcc
    assert not front.exists(receipt_path("Alice", by_old[3].id))  # never read
    assert front.load(contact_path("Carol", "Alice"), Contact).status == "approved"
    assert front.load(contact_path("Bob", "Carol"), Contact).status == "pending"
    reservations = {r.extra["x-agent-mail-id"]: r for p in front.walk("reservations")
                    if (r := front.load(p, Reservation)) is not None}
    assert (reservations[1].agent, reservations[1].path_pattern, reservations[1].released_ts,
            reservations[1].expires_ts) == ("Alice", "src/checkout/*.ts", None, "2099-01-01T00:00:00.000Z")
    assert reservations[2].released_ts == "2026-01-05T15:00:00.000Z"
    assert reservations[3].released_ts is None and reservations[3].exclusive is False  # expired, never released
    for snap in (front, back):
        link = snap.load(product_path("a1b2c3d4e5f6a7b8c9d0"), ProductLink)  # "Team Shop" is no key: the uid is
        assert link is not None and link.name == "Team Shop"
    window = front.load(window_path("3f2b6c1e-8a4d-4b7e-9c1a-2d5e6f7a8b9c"), Window)
    assert window.display_name == "Alice" and window.expires_ts == "2026-02-06T17:30:00.000Z"  # last use + 30 days
    [summary] = [front.load(p, Summary) for p in front.walk("summaries")]
    assert (summary.message_count, summary.thread_count, summary.start_ts) == (3, 2, "2026-01-05T00:00:00.000Z")
    assert summary.key_points == ["Release 1.2 ships Thursday", "Payments are ready", "TODO: update the docs"]
    assert summary.extra["x-agent-mail-llm-model"] == "gpt-5-mini" and "ships Thursday" in summary.extra[
        "x-agent-mail-text"]


def test_the_report_counts_every_kind_and_names_every_row_left_out(imported, store):
    report, _, _ = imported
    totals = report.totals()
    assert {kind: totals[kind].imported for kind in ("projects", "agents", "messages", "receipts", "attachments",
                                                     "contacts", "products", "windows", "summaries")} == {
        "projects": 2, "agents": 6, "messages": 9, "receipts": 6, "attachments": 1, "contacts": 3, "products": 2,
        "windows": 1, "summaries": 1}
    assert totals["reservations"].imported == 4  # three taken, one of them released later
    found = {key: (problem.count, problem.examples) for key, problem in report.problems.items()}
    assert found["archive_file_missing"] == (1, ["message 9: 'Re: Release plan'"])
    assert found["attachment_unreadable"][0] == 1 and "message 7" in found["attachment_unreadable"][1][0]
    assert found["project_key_invalid"] == (1, ["project 3: 'scratch'"])
    assert found["value_dropped"] == (1, ["message 5: topic 'bad topic!'"])
    assert found["table_not_imported"] == (1, ["project_sibling_suggestions"])
    assert report.lost_rows()
    for project in (FRONT, BACK):
        assert check_archive(store.archive(project)) == []


def test_history_is_written_in_time_order_by_the_agents_who_acted(imported, store):
    _, front, _ = imported
    repo = store.archive(FRONT).repo
    commits = list(repo.walk(repo.references["refs/heads/main"].target, pygit2.enums.SortMode.TOPOLOGICAL))[::-1]
    days = [dt.datetime.fromtimestamp(c.author.time, dt.UTC).date() for c in commits]
    assert days == sorted(days) and len(set(days)) == 3
    assert commits[0].message.startswith("Import 1 project") and SOURCE in commits[0].message
    first_messages = next(c for c in commits if "message" in c.message.splitlines()[0])
    assert (first_messages.author.name, first_messages.author.time) == ("Alice", int(at("2026-01-05 10:00:00.25")
                                                                                  .timestamp()))
    assert {c.author.name for c in commits if "receipt" in c.message.splitlines()[0]} == {"Alice", "Bob", "Carol"}
    for commit in commits:  # every commit's tree is whole: a receipt or a copy never comes before its message
        snap = Snapshot(repo, str(commit.id))
        for path in snap.walk("agents"):
            if "/receipts/" in path or "/inbox/" in path:
                assert snap.exists(f"messages/{path.split('/', 3)[3]}".replace(".yaml", ".md")), (commit.message,
                                                                                                  path)


def test_old_message_ids_resolve_wherever_a_message_id_is_accepted(imported, store):
    _, front, _ = imported
    by_old = messages_by_old_id(front)
    mail = Mail(store)
    assert indexer_for(store).project(FRONT).imported("1") == [by_old[1].id]
    assert mail.get_message(FRONT, 1)["id"] == mail.get_message(FRONT, "1")["id"] == by_old[1].id
    reply = mail.reply_message(FRONT, 1, "Carol", "Docs are linked.")
    assert reply["thread_id"] == "1" and reply["reply_to"] == by_old[1].id
    assert [m["id"] for m in mail.get_thread(FRONT, "1")["messages"]] == [
        by_old[1].id, by_old[2].id, by_old[9].id, reply["id"]]
    assert mail.mark_message_read(FRONT, "Alice", 3)["read_at"]
    assert mail.acknowledge_message(FRONT, "Alice", "9")["acknowledged"] is True
    with fails_cleanly(store, "NOT_FOUND", FRONT) as info:
        mail.get_message(FRONT, 8)  # a message of the backend's archive
    assert "imported from mcp_agent_mail with the id 8" in info.value.message
    with fails_cleanly(store, "INVALID_ARGUMENT", FRONT):
        mail.mark_message_read(FRONT, "Alice", "1e3")


def test_running_it_again_imports_nothing_twice(imported, store):
    before = {key: store.archive(key).tip() for key in (FRONT, BACK)}
    again = import_agent_mail(store, DATABASE, archive=ARCHIVE, catch_up=False)
    assert {key: store.archive(key).tip() for key in (FRONT, BACK)} == before
    totals = again.totals()
    assert sum(t.imported for t in totals.values()) == 0 and totals["messages"].present == 9
    assert sum(project.commits for project in again.projects) == 0


def test_a_second_run_brings_what_the_source_gained_since(imported, store, tmp_path):
    database = shutil.copy(DATABASE, tmp_path / "storage.sqlite3")
    with sqlite3.connect(database) as db:
        db.execute("UPDATE message_recipients SET ack_ts = '2026-01-08 09:00:00' WHERE message_id = 1 AND agent_id = 3")
        db.execute("UPDATE file_reservations SET released_ts = '2026-01-08 10:00:00' WHERE id = 1")
        db.execute("INSERT INTO messages VALUES (10, 1, 1, '1', NULL, 'Shipped', 'Done.', 'normal', 0, "
                   "'2026-01-08 11:00:00', '[]')")
        db.execute("INSERT INTO message_recipients VALUES (10, 3, 'to', NULL, NULL)")
    report = import_agent_mail(store, str(database), archive=ARCHIVE, catch_up=False)
    front = store.archive(FRONT).snapshot()
    by_old = messages_by_old_id(front)
    assert front.load(receipt_path("Carol", by_old[1].id), Receipt).acked_at == "2026-01-08T09:00:00.000Z"
    released = [r for p in front.walk("reservations") if (r := front.load(p, Reservation)).extra[
        "x-agent-mail-id"] == 1]
    assert released[0].released_ts == "2026-01-08T10:00:00.000Z"
    assert by_old[10].subject == "Shipped"
    counts = report.projects[0].counts
    assert (counts["messages"].imported, counts["receipts"].imported, counts["reservations"].imported) == (1, 1, 1)


def test_a_dry_run_counts_and_writes_nothing(store):
    report = import_agent_mail(store, DATABASE, archive=ARCHIVE, dry_run=True)
    assert store.slugs() == [] and report.dry_run
    assert report.totals()["messages"].imported == 9 and report.totals()["agents"].imported == 6


def test_one_project_then_the_other(store):
    import_agent_mail(store, DATABASE, archive=ARCHIVE, project=FRONT, catch_up=False)
    assert store.slugs() == [FRONT_SLUG]
    copy = messages_by_old_id(store.archive(FRONT).snapshot())[4]
    assert copy.sender == f"Dave@{BACK_SLUG}"
    import_agent_mail(store, DATABASE, archive=ARCHIVE, project="data-team-backend", catch_up=False)
    back = store.archive(BACK).snapshot()
    relay = back.load(relay_path(FRONT_SLUG, copy.id), Relay)
    assert relay.delivered_at == copy.created_ts  # the copy was there already


def test_bad_sources_are_refused_with_advice_and_create_nothing(store, tmp_path):
    (tmp_path / "notes.txt").write_text("not a database")
    empty = tmp_path / "empty.sqlite3"
    sqlite3.connect(empty).close()
    for database, code, words in ((str(tmp_path / "gone.sqlite3"), "NOT_FOUND", "DATABASE_URL"),
                                  (str(tmp_path / "notes.txt"), "INVALID_ARGUMENT", "SQLite"),
                                  (str(empty), "INVALID_ARGUMENT", "not an mcp_agent_mail database")):
        with fails_cleanly(store, code, FRONT) as info:
            import_agent_mail(store, database)
        assert words in info.value.message
    with fails_cleanly(store, "NOT_FOUND", FRONT) as info:
        import_agent_mail(store, DATABASE, archive=str(tmp_path / "nowhere"))
    assert "STORAGE_ROOT" in info.value.message
    with fails_cleanly(store, "NOT_FOUND", FRONT) as info:
        import_agent_mail(store, DATABASE, project="/data/elsewhere")
    assert FRONT in info.value.message
    assert store.slugs() == []


def test_a_locked_database_is_refused_until_its_writer_is_done(store, tmp_path):
    database = shutil.copy(DATABASE, tmp_path / "storage.sqlite3")
    writer = sqlite3.connect(database, isolation_level=None)
    writer.execute("BEGIN EXCLUSIVE")
    try:
        with fails_cleanly(store, "SOURCE_LOCKED", FRONT) as info:
            import_agent_mail(store, str(database), busy_seconds=0.05)
        assert "stop the mcp_agent_mail server" in info.value.message
        assert store.slugs() == []
    finally:
        writer.execute("ROLLBACK")
        writer.close()
    assert import_agent_mail(store, str(database), catch_up=False).totals()["messages"].imported == 9


def test_unknown_tables_and_columns_are_reported_and_bad_rows_left_out(store, tmp_path):
    database = shutil.copy(DATABASE, tmp_path / "storage.sqlite3")
    with sqlite3.connect(database) as db:
        db.execute("ALTER TABLE agents ADD COLUMN mood VARCHAR(16)")
        db.execute("CREATE TABLE agent_badges (id INTEGER PRIMARY KEY, agent_id INTEGER)")
        db.execute("DROP TABLE message_summaries")
        db.execute("CREATE TABLE message_summaries (id INTEGER PRIMARY KEY, project_id INTEGER, summary_text TEXT)")
        db.execute("UPDATE messages SET created_ts = 'last tuesday' WHERE id = 3")
    report = import_agent_mail(store, str(database), catch_up=False)
    found = {key: problem.examples for key, problem in report.problems.items()}
    assert found["column_not_imported"] == ["agents.mood"]
    assert found["table_not_imported"] == ["agent_badges", "project_sibling_suggestions"]
    assert found["table_unusable"] == ["message_summaries (no end_ts, start_ts)"]
    assert found["unreadable_timestamp"] == ["message 3: unreadable time 'last tuesday'"]
    assert "attachment_unreadable" in found  # no archive folder given: the attachment's bytes are not at hand
    assert sorted(messages_by_old_id(store.archive(FRONT).snapshot())) == [1, 2, 4, 5, 7, 9]
    assert check_archive(store.archive(FRONT)) == []


def test_names_already_taken_in_gitmail_keep_their_owner(store):
    mail = Mail(store)
    mail.ensure_project(FRONT)
    mine = mail.register_agent(FRONT, "cli", "human", name="alice")
    report = import_agent_mail(store, DATABASE, archive=ARCHIVE, catch_up=False)
    front = store.archive(FRONT).snapshot()
    kept = front.load(profile_path("alice"), Agent)
    assert kept.id == mine["id"] and not front.exists(profile_path("Alice"))
    assert token_matches(mine["registration_token"], kept.token_hash)
    assert report.problems["agent_name_taken"].examples == ["agent 1: Alice (gitmail's alice kept)"]
    assert messages_by_old_id(front)[1].sender == "alice"
    assert check_archive(store.archive(FRONT)) == []


def test_imported_records_are_the_records_gitmail_writes(imported):
    """Every imported file parses strictly and re-serializes to its own bytes (canonical, like gitmail's own)."""
    _, front, _ = imported
    from gitmail.model.records import parse_path

    for path in front.walk(""):
        if path.startswith("attachments/"):
            continue
        data = front.read(path)
        record = parse_path(path, data)
        assert record.to_bytes() == data or isinstance(record, Message), path
        assert dataclasses.is_dataclass(record)


def test_the_index_knows_imported_ids_through_rebuilds_and_removals(imported, store):
    _, front, _ = imported
    by_old = messages_by_old_id(front)
    index = indexer_for(store).project(FRONT)
    assert index.imported("4") == [by_old[4].id] and index.imported("8") == []
    index.reindex()  # derived state rebuilt from the archive alone
    assert index.imported("4") == [by_old[4].id]
    archive = store.archive(FRONT)

    def purge(snap: Snapshot) -> Change:
        change = Change("remove message 4")
        remove_message(snap, change, by_old[4], reason="retention", stamp=by_old[9].created_ts,
                       hlc=HLC(1, 0, "test"))
        return change

    archive.transact(purge)
    assert index.imported("4") == [] and index.imported("1") == [by_old[1].id]


def test_attachments_are_read_only_from_inside_the_archive_folder(store, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("not for the archive")
    archive = shutil.copytree(ARCHIVE, tmp_path / "archive")
    folder = archive / "projects" / "data-team-frontend"
    (folder / "attachments" / "link.webp").symlink_to(secret)
    database = shutil.copy(DATABASE, tmp_path / "storage.sqlite3")
    refs = [str(secret), "../secret.txt", "projects/data-team-frontend/../../../secret.txt",
            "projects/data-team-frontend/attachments/link.webp"]
    with sqlite3.connect(database) as db:
        db.execute("UPDATE messages SET attachments = ? WHERE id = 3",
                   (json.dumps([{"type": "file", "media_type": "image/webp", "path": ref} for ref in refs]),))
    report = import_agent_mail(store, str(database), archive=str(archive), catch_up=False)
    front = store.archive(FRONT).snapshot()
    assert messages_by_old_id(front)[3].attachments == []
    assert not any(b"not for the archive" == front.read(path) for path in front.walk("attachments"))
    examples = " ".join(report.problems["attachment_unreadable"].examples)
    assert report.problems["attachment_unreadable"].count == 5  # the four refused here, and message 7's lost file
    assert "is not a path inside the archive" in examples and "is not in the archive folder" in examples
