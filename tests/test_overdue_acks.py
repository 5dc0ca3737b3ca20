"""Overdue acknowledgements: the settings, the scan, and escalation that happens once per message and recipient."""

from __future__ import annotations

import logging

import pytest

from gitmail import Change, Store
from gitmail.mail.ackscanner import AckScanner
from gitmail.mail.acksettings import AckSettings
from gitmail.mail.facade import Mail, SendOptions
from gitmail.model.errors import GitmailError
from gitmail.model.records import Escalation, Reservation, escalation_path, parse_path, reservation_path
from gitmail.storage.fsck import check_archive
from gitmail.sync.merge import merge_file

from .conftest import tip

KEY = "/work/acks"
LOG = AckSettings(enabled=True, ttl_seconds=600, escalation_enabled=True, escalation_mode="log")
CLAIM = AckSettings(enabled=True, ttl_seconds=600, escalation_enabled=True, escalation_mode="claim",
                    claim_holder="ops", claim_ttl_seconds=7200)


def _mail(store: Store, settings: AckSettings) -> Mail:
    return Mail(store, ack=settings)


@pytest.fixture
def sent(store):
    mail = Mail(store)
    mail.ensure_project(KEY)
    for name in ("Alice", "Bob", "Carol", "Ops"):
        mail.register_agent(KEY, "p", "m", name=name)
        mail.set_contact_policy(KEY, name, "open")
    out = mail.send_message(KEY, "Alice", ["Bob", "Carol"], "Freeze the schema", "Please acknowledge.",
                            options=SendOptions(ack_required=True))
    mail.send_message(KEY, "Alice", ["Bob"], "FYI", "No acknowledgement needed.")
    return out["deliveries"][0]["payload"]["id"]


# -- settings ---------------------------------------------------------------------------------------

def test_settings_from_the_environment():
    assert AckSettings.from_env({}) == AckSettings()
    got = AckSettings.from_env({"GITMAIL_ACK_TTL_ENABLED": "true", "GITMAIL_ACK_TTL_SECONDS": "900",
                                "GITMAIL_ACK_TTL_SCAN_INTERVAL_SECONDS": "30",
                                "GITMAIL_ACK_ESCALATION_ENABLED": "1", "GITMAIL_ACK_ESCALATION_MODE": "Claim",
                                "GITMAIL_ACK_ESCALATION_CLAIM_TTL_SECONDS": "120",
                                "GITMAIL_ACK_ESCALATION_CLAIM_EXCLUSIVE": "yes",
                                "GITMAIL_ACK_ESCALATION_CLAIM_HOLDER_NAME": "OpsBot"})
    assert got == AckSettings(enabled=True, ttl_seconds=900, scan_interval_seconds=30, escalation_enabled=True,
                              escalation_mode="claim", claim_ttl_seconds=120, claim_exclusive=True,
                              claim_holder="OpsBot")


@pytest.mark.parametrize("env, variable", [
    ({"GITMAIL_ACK_TTL_SECONDS": "soon"}, "GITMAIL_ACK_TTL_SECONDS"),
    ({"GITMAIL_ACK_TTL_SECONDS": "5"}, "GITMAIL_ACK_TTL_SECONDS"),
    ({"GITMAIL_ACK_TTL_ENABLED": "maybe"}, "GITMAIL_ACK_TTL_ENABLED"),
    ({"GITMAIL_ACK_ESCALATION_MODE": "page"}, "GITMAIL_ACK_ESCALATION_MODE"),
    ({"GITMAIL_ACK_ESCALATION_ENABLED": "1", "GITMAIL_ACK_ESCALATION_MODE": "claim"},
     "GITMAIL_ACK_ESCALATION_CLAIM_HOLDER_NAME"),
    ({"GITMAIL_ACK_ESCALATION_CLAIM_HOLDER_NAME": "no such/name"}, "GITMAIL_ACK_ESCALATION_CLAIM_HOLDER_NAME"),
])
def test_bad_settings_name_their_variable(env, variable):
    with pytest.raises(GitmailError) as info:
        AckSettings.from_env(env)
    assert info.value.code == "INVALID_ARGUMENT" and variable in info.value.message


# -- the scan ----------------------------------------------------------------------------------------

def test_an_ack_is_overdue_after_the_ttl_and_not_once_given(store, wall, sent):
    mail = _mail(store, AckSettings(ttl_seconds=600))
    before = tip(store, KEY)
    assert mail.scan_overdue_acks(KEY)["overdue"] == []
    wall.advance(601)
    scan = mail.scan_overdue_acks(KEY)
    assert [(o["message_id"], o["agent"], o["escalated"]) for o in scan["overdue"]] == \
        [(sent, "Bob", False), (sent, "Carol", False)]
    assert scan["escalation"] == "off" and scan["escalated"] == [] and tip(store, KEY) == before
    mail.acknowledge_message(KEY, "Carol", sent)
    assert [o["agent"] for o in mail.scan_overdue_acks(KEY)["overdue"]] == ["Bob"]
    # the ack-overdue view's age defaults to the same TTL
    assert [m["id"] for m in mail.view_ack_overdue(KEY, "Bob")["messages"]] == [sent]


def test_log_escalation_writes_one_record_per_recipient_once_across_restarts(store, wall, sent, caplog):
    wall.advance(601)
    with caplog.at_level(logging.WARNING, logger="gitmail.acks"):
        first = _mail(store, LOG).scan_overdue_acks(KEY)
    assert [(e["agent"], e["mode"], e["claim_id"]) for e in first["escalated"]] == [("Bob", "log", None),
                                                                                 ("Carol", "log", None)]
    assert sum("has not acknowledged" in r.getMessage() for r in caplog.records) == 2
    snap = store.archive(KEY).snapshot()
    record = snap.load(escalation_path(sent, "Bob"), Escalation)
    assert record is not None and record.sender == "Alice" and record.subject == "Freeze the schema"
    committed = tip(store, KEY)
    wall.advance(3600)
    again = _mail(Store(store.home, background=False, wall=wall), LOG).scan_overdue_acks(KEY)  # a restarted server
    assert again["escalated"] == [] and all(o["escalated"] for o in again["overdue"])
    assert tip(store, KEY) == committed
    assert check_archive(store.archive(KEY), run_git=False) == []
    assert [(m["id"], m["escalated"]) for m in Mail(store).view_ack_overdue(KEY, "Bob")["messages"]] == [(sent, True)]


def test_claim_escalation_files_a_reservation_and_a_notice_for_the_operations_agent(store, wall, sent):
    wall.advance(601)
    scan = _mail(store, CLAIM).scan_overdue_acks(KEY)
    bob = next(e for e in scan["escalated"] if e["agent"] == "Bob")
    assert (bob["mode"], bob["holder"]) == ("claim", "Ops")  # the setting's spelling, the profile's name
    snap = store.archive(KEY).snapshot()
    claim = snap.load(reservation_path(bob["claim_id"]), Reservation)
    assert claim is not None and claim.agent == "Ops" and claim.exclusive is False and sent in claim.path_pattern
    notices = Mail(store).fetch_inbox(KEY, "Ops", limit=10)
    assert {n["id"] for n in notices} == {e["notice_id"] for e in scan["escalated"]}
    assert {n["subject"] for n in notices} == {f"Overdue acknowledgement: {name} on Freeze the schema"
                                               for name in ("Bob", "Carol")}
    assert all(n["from"] == "Ops" and n["importance"] == "high" for n in notices)
    assert [r["id"] for r in Mail(store).list_file_reservations(KEY, "Ops")["file_reservations"]] == \
        sorted(e["claim_id"] for e in scan["escalated"])
    assert _mail(store, CLAIM).scan_overdue_acks(KEY)["escalated"] == []
    assert check_archive(store.archive(KEY), run_git=False) == []


def test_a_missing_operations_agent_leaves_a_log_escalation(store, wall, sent):
    wall.advance(601)
    nobody = AckSettings(ttl_seconds=600, escalation_enabled=True, escalation_mode="claim", claim_holder="Nobody")
    scan = _mail(store, nobody).scan_overdue_acks(KEY)
    assert scan["holder_missing"] is True and {e["mode"] for e in scan["escalated"]} == {"log"}


def test_the_scanner_scans_every_project_in_one_round(store, wall, sent):
    other = "/work/acks-other"
    mail = Mail(store)
    mail.ensure_project(other)
    wall.advance(601)
    scanner = AckScanner(_mail(store, LOG).ctx, LOG)
    reports = scanner.scan_now()
    assert scanner.rounds == 1 and len(reports) == 2
    assert sum(len(r["escalated"]) for r in reports) == 2


# -- the record -------------------------------------------------------------------------------------

def _escalation(mode: str, at: str, node: str) -> bytes:
    message_id = "0" * 23
    record = Escalation(message_id=message_id, agent="Bob", sender="Alice", subject="s",
                        sent_ts="2026-12-01T10:00:00.000Z", due_ts="2026-12-01T10:30:00.000Z", escalated_ts=at,
                        mode=mode, node=node)
    if mode == "claim":
        record.holder, record.claim_id, record.notice_id = "Ops", "1" * 23, "2" * 23
    return record.to_bytes()


def test_merge_keeps_one_escalation_and_prefers_the_claim():
    path = escalation_path("0" * 23, "Bob")
    early_log = _escalation("log", "2026-12-01T10:31:00.000Z", "laptop")
    late_claim = _escalation("claim", "2026-12-01T10:40:00.000Z", "desktop")
    early_claim = _escalation("claim", "2026-12-01T10:35:00.000Z", "laptop")
    for ours, theirs, kept in ((early_log, late_claim, late_claim), (late_claim, early_claim, early_claim)):
        one, two = merge_file(path, None, ours, theirs), merge_file(path, None, theirs, ours)
        assert one.content == two.content == kept and one.conflict is None
    assert parse_path(path, kept).node == "laptop"


def test_fsck_reports_an_escalation_of_a_message_that_is_not_there(store, sent):
    archive = store.archive(KEY)
    stray = Escalation(message_id="0" * 23, agent="Bob", sender="Alice", subject="s",
                       sent_ts="2026-12-01T10:00:00.000Z", due_ts="2026-12-01T10:30:00.000Z",
                       escalated_ts="2026-12-01T10:31:00.000Z", mode="log")
    archive.transact(lambda snap: Change("by hand").put_record(stray))
    problems = [str(p) for p in check_archive(archive, run_git=False)]
    assert problems == [f"{stray.path()}: escalates message {'0' * 23}, which is not in the archive"]


def test_escalations_stay_consistent_when_their_recipient_is_deleted(store, wall, sent):
    from gitmail.mail.projects import CONFIRMATION_PHRASE

    wall.advance(601)
    assert len(_mail(store, LOG).scan_overdue_acks(KEY)["escalated"]) == 2
    Mail(store).hard_delete_agent(KEY, "Carol", confirmation=CONFIRMATION_PHRASE)
    assert check_archive(store.archive(KEY), run_git=False) == []
