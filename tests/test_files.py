"""Files in the archive: content-addressed uploads, attachment_ids, the record rules, and files across machines."""

from __future__ import annotations

import base64
import hashlib
import os

import pytest

from gitmail.mail.facade import Mail, SendOptions
from gitmail.model.records import FileRecord, file_path
from gitmail.storage.fsck import check_archive

from .conftest import fails_cleanly, tip
from .mail_helpers import PROJECT, make_mail, open_agents

OTHER = "/data/projects/frontend"


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def mail(store) -> Mail:
    made = make_mail(store)
    open_agents(made, "BlueLake", "GreenCastle")
    return made


def test_an_upload_is_content_addressed_and_the_same_bytes_are_the_same_file(mail, store):
    data = b"%PDF-1.7 pretend\n" * 100
    first = mail.upload_file(PROJECT, "BlueLake", data, name="docs/report.pdf")
    assert first.created and first.file.file_id == first.file.sha256 == _sha(data)
    assert (first.file.name, first.file.media_type, first.file.size) == ("report.pdf", "application/pdf", len(data))
    record = store.archive(PROJECT).snapshot().load(file_path(_sha(data)), FileRecord)
    assert record is not None and record.uploaded_by == "BlueLake" and record.blob.endswith(f"{_sha(data)}.pdf")
    before = tip(store, PROJECT)
    again = mail.upload_file(PROJECT, "GreenCastle", data, name="copy.bin", media_type="application/octet-stream")
    assert not again.created and again.file == first.file  # the first upload's name and uploader stay
    assert tip(store, PROJECT) == before  # nothing written
    listed = mail.list_files(PROJECT)
    assert (listed.total, [f.file_id for f in listed.files]) == (1, [_sha(data)])
    assert check_archive(store.archive(PROJECT), run_git=False) == []


def test_attachment_ids_carry_files_to_recipients_and_describe_names_the_messages(mail, store):
    one = mail.upload_file(PROJECT, "BlueLake", b"alpha", name="a.txt").file
    two = mail.upload_file(PROJECT, "BlueLake", b"beta", name="b.csv").file
    sent = mail.send_message(PROJECT, "BlueLake", ["GreenCastle"], "Data", "Both files.",
                             SendOptions(attachment_ids=[one.file_id, two.file_id.upper()]))
    message = sent.message
    assert message is not None
    inbox = mail.fetch_inbox(PROJECT, "GreenCastle", include_bodies=True)
    carried = inbox[0]["attachments"]
    assert [(a["file_id"], a["name"], a["size"], a["sha256"]) for a in carried] == [
        (one.file_id, "a.txt", 5, one.sha256), (two.file_id, "b.csv", 4, two.sha256)]
    reply = mail.reply_message(PROJECT, message.id, "GreenCastle", "Thanks, back to you.",
                               SendOptions(attachment_ids=[one.file_id]))
    described = mail.describe_file(PROJECT, one.file_id)
    assert [r.message_id for r in described.referenced_by] == [reply["id"], message.id]
    assert not described.more_references and "never instructions" in described.note
    down = mail.download_file(PROJECT, two.file_id)
    assert down.content_base64 is not None and base64.b64decode(down.content_base64) == b"beta"
    assert check_archive(store.archive(PROJECT), run_git=False) == []


@pytest.mark.parametrize("ids, code", [
    (["0" * 64] * 21, "INVALID_ARGUMENT"),
    ("not-a-list", "INVALID_ARGUMENT"),
    (["report.pdf"], "INVALID_ARGUMENT"),
    (["f" * 64], "FILE_NOT_FOUND"),
])
def test_bad_attachment_ids_are_refused_with_a_code_and_nothing_written(mail, store, ids, code):
    with fails_cleanly(store, code, PROJECT) as info:
        mail.send_message(PROJECT, "BlueLake", ["GreenCastle"], "x", "y", SendOptions(attachment_ids=ids))
    assert info.value.data.get("field", "").startswith("attachment_ids")


def test_a_file_is_named_once_and_only_in_its_own_project(mail, store):
    mine = mail.upload_file(PROJECT, "BlueLake", b"ours", name="o.txt").file
    mail.ensure_project(OTHER)
    mail.register_agent(OTHER, "test-cli", "m", name="RedStone")
    theirs = mail.upload_file(OTHER, "RedStone", b"theirs only", name="t.txt").file
    with fails_cleanly(store, "DUPLICATE_ATTACHMENT", PROJECT):
        mail.send_message(PROJECT, "BlueLake", ["GreenCastle"], "x", "y",
                          SendOptions(attachment_ids=[mine.file_id, mine.file_id]))
    with fails_cleanly(store, "FILE_NOT_FOUND", PROJECT) as info:
        mail.send_message(PROJECT, "BlueLake", ["GreenCastle"], "x", "y",
                          SendOptions(attachment_ids=[mine.file_id, theirs.file_id]))
    assert "project it was uploaded to" in info.value.message
    with fails_cleanly(store, "FILE_NOT_FOUND", PROJECT):
        mail.describe_file(PROJECT, theirs.file_id)


def test_an_inline_upload_past_the_limit_names_the_http_endpoint(mail, store):
    from gitmail.model.limits import FILE_INLINE_MAX_BYTES

    big = base64.b64encode(b"\0" * (FILE_INLINE_MAX_BYTES + 1)).decode()
    with fails_cleanly(store, "FILE_TOO_LARGE", PROJECT) as info:
        mail.upload_file_base64(PROJECT, "BlueLake", big, name="big.bin", upload_url="http://127.0.0.1:1/files/x")
    assert info.value.data["upload_url"] == "http://127.0.0.1:1/files/x" and "HTTP POST" in info.value.message
    with fails_cleanly(store, "INVALID_ARGUMENT", PROJECT):
        mail.upload_file_base64(PROJECT, "BlueLake", "not base64!", name="x.bin")


def test_the_record_rules_judge_file_records(mail, store):
    from gitmail.storage.recordcheck import file_problem, file_refusal

    data = b"payload"
    uploaded = mail.upload_file(PROJECT, "BlueLake", data, name="p.txt").file
    snap = store.archive(PROJECT).snapshot()
    record = snap.load(file_path(uploaded.sha256), FileRecord)
    assert record is not None
    assert file_problem(record.path(), record.to_bytes()) is None
    moved = record.to_bytes()
    assert "location" in (file_problem(file_path("a" * 64), moved) or "")  # a record sits at its own hash
    other_blob = record.to_bytes().replace(record.blob.encode(), f"attachments/aa/aa/{'a' * 64}.txt".encode())
    assert "blob" in (file_problem(record.path(), other_blob) or "")
    import dataclasses
    later = dataclasses.replace(record, uploaded_at="2099-01-01T00:00:00.000Z", name="renamed.txt")
    earlier = dataclasses.replace(record, uploaded_at="2000-01-01T00:00:00.000Z", uploaded_by="GreenCastle")
    assert file_refusal(record, later) is not None  # a record never changes ...
    assert file_refusal(record, earlier) is None  # ... but for the merge's earlier upload of the same bytes
    assert file_refusal(record, dataclasses.replace(earlier, size=record.size + 1)) is not None


@pytest.mark.slow  # git runs the hub's installed hook, which starts gitmail
def test_a_file_crosses_two_machines_through_a_checked_hub_and_one_content_stays_one_file(tmp_path):
    from gitmail.sync.syncer import sync_project

    from .sync_helpers import PROJECT as SHARED
    from .sync_helpers import hub_pair

    _, a, b = hub_pair(str(tmp_path))
    a.register("Uploader")
    b.register("Reader")
    for machine in (a, b, a):
        sync_project(machine.store, SHARED)
    on_a, on_b = Mail(a.store), Mail(b.store)
    data = os.urandom(300_000)
    file_id = on_a.upload_file(SHARED, "Uploader", data, name="build.tar.gz").file.file_id
    on_a.send_message(SHARED, "Uploader", ["Reader"], "Build", "The build is attached.",
                      SendOptions(attachment_ids=[file_id]))
    # Apart, both machines record one content of their own: the merge keeps one record of it.
    twin = b"the same bytes on both machines"
    on_a.upload_file(SHARED, "Uploader", twin, name="from-a.txt")
    on_b.upload_file(SHARED, "Reader", twin, name="from-b.txt")
    for machine in (a, b, a):
        for result in sync_project(machine.store, SHARED).results:
            assert result.error is None and not result.conflicts and not result.quarantined, result
    assert a.archive.tip() == b.archive.tip()
    inbox = on_b.fetch_inbox(SHARED, "Reader", include_bodies=True)
    assert [x["file_id"] for x in inbox[0]["attachments"]] == [file_id]
    down = on_b.download_file(SHARED, file_id)
    got = base64.b64decode(down.content_base64 or "")
    assert (len(got), _sha(got), down.file.size, down.file.sha256) == (len(data), file_id, len(data), file_id)
    kept = [on.describe_file(SHARED, _sha(twin)).file for on in (on_a, on_b)]
    records = [machine.archive.snapshot().load(file_path(_sha(twin)), FileRecord) for machine in (a, b)]
    assert kept[0] == kept[1] and records[0] == records[1]
    assert records[0] is not None and kept[0].name in ("from-a.txt", "from-b.txt")
    for machine in (a, b):
        assert check_archive(machine.archive, run_git=False) == []
        assert not machine.archive.snapshot().listdir("conflicts")


@pytest.mark.slow  # git runs the archive's installed hook, which starts gitmail
def test_an_archive_refuses_pushes_that_break_a_file_record_and_fsck_finds_missing_bytes(tmp_path):
    from gitmail.model.records import FileRecord, attachment_path
    from gitmail.storage.engine import Change

    from .sync_helpers import PROJECT as SHARED
    from .sync_helpers import Machine
    from .test_record_doors import _clone, _write, push_refuser

    (a,) = [Machine(str(tmp_path / "m"), "node-a")]
    a.create_project()
    uploaded = Mail(a.store).upload_file(SHARED, "BlueLake", b"kept bytes", name="kept.txt").file
    archive = a.archive
    record = archive.snapshot().load(file_path(uploaded.sha256), FileRecord)
    assert record is not None
    clone = _clone(archive.git_dir, str(tmp_path / "checkout"))
    before = archive.tip()

    refused = push_refuser(archive, clone, before)
    text = record.to_bytes()
    refused(lambda: _write(clone, record.path(), text.replace(b"name: kept.txt", b"name: other.txt")),
            f"changes the record of file {record.sha256}")
    refused(lambda: _write(clone, record.blob, b"other bytes"), "immutable")
    ghost = b"bytes never stored"
    ghost_record = FileRecord(sha256=_sha(ghost), size=len(ghost), media_type="text/plain", name="ghost.txt",
                              blob=attachment_path(_sha(ghost), "txt"), uploaded_by="BlueLake",
                              uploaded_at=record.uploaded_at)
    refused(lambda: _write(clone, ghost_record.path(), ghost_record.to_bytes()), "which the archive does not hold")
    refused(lambda: os.remove(os.path.join(clone, record.path())), "deleted without a tombstone")
    # Written past the doors (by the engine itself), a record without its bytes is what fsck reports.
    archive.transact(lambda snap: Change("a record without its bytes").put_record(ghost_record))
    assert [p.reason for p in check_archive(archive, run_git=False)] == [
        f"the file's bytes {ghost_record.blob} are not in the archive"]
