"""`gitmail fsck`: what it finds, how it reports it, and git's own fsck."""

from __future__ import annotations

import dataclasses
import hashlib
import json

import pygit2
import pytest
from click.testing import CliRunner

from gitmail import Change, Message, new_id
from gitmail.cli import cli
from gitmail.model.records import inbox_path, message_path, outbox_path
from gitmail.storage.fsck import check_archive
from gitmail.storage.objects import COMMIT, TREE, PackBuffer, Signature, Tree, encode_commit

KEY = "/data/projects/fsck"


def _message(**fields):
    values = dict(id=new_id(), thread_id="t", sender="BlueLake", subject="s", created_ts="2026-03-01T12:00:00.000Z",
                  to=["RedFox"], body="b\n")
    values.update(fields)
    return Message(**values)


def _send(archive, message):
    def fn(snap):
        change = Change("send", author=message.sender).put_record(message.public_copy())
        for name in message.to + message.cc + message.bcc:
            change.put(inbox_path(name, message.id), message.public_copy())
        return change.put(outbox_path(message.sender, message.id), message)
    archive.transact(fn)


@pytest.fixture
def archive(store):
    archive = store.archive(KEY, create=True)
    first = _message()
    _send(archive, first)
    _send(archive, _message(reply_to=first.id, thread_id=first.id, bcc=["Quiet"], cc=["GreenCastle"]))
    return archive


def test_healthy_archive_has_no_problems(archive):
    assert check_archive(archive) == []


def _write(archive, path, data):
    archive.transact(lambda s: Change("tamper").put(path, data))


def _reasons(archive):
    return {p.path: p.reason for p in check_archive(archive, run_git=False)}


def test_unparsable_record_is_reported_with_field(archive):
    _write(archive, "agents/RedFox/profile.yaml", b"name: RedFox\n")
    reasons = _reasons(archive)
    assert "field 'id': is required" in reasons["agents/RedFox/profile.yaml"]


def test_unknown_path_is_reported(archive):
    _write(archive, "stray/file.txt", b"x")
    assert _reasons(archive)["stray/file.txt"] == "not a path where gitmail keeps records"


def test_copy_that_differs_from_the_canonical_message(archive):
    message = _message()
    _send(archive, message)
    tampered = dataclasses.replace(message, body="changed\n")
    _write(archive, inbox_path("RedFox", message.id), tampered.to_bytes())
    _write(archive, outbox_path("BlueLake", message.id), tampered.to_bytes())
    reasons = _reasons(archive)
    assert "differs from the canonical message" in reasons[inbox_path("RedFox", message.id)]
    assert "differs from the canonical message" in reasons[outbox_path("BlueLake", message.id)]


def test_copy_in_the_wrong_mailbox(archive):
    message = _message()
    _send(archive, message)
    _write(archive, inbox_path("Stranger", message.id), message.to_bytes())
    _write(archive, outbox_path("Stranger", message.id), message.to_bytes())
    reasons = _reasons(archive)
    assert "Stranger is not a recipient" in reasons[inbox_path("Stranger", message.id)]
    assert "the sender is BlueLake" in reasons[outbox_path("Stranger", message.id)]


def test_dangling_references(archive):
    orphan = _message()
    _write(archive, inbox_path("RedFox", orphan.id), orphan.to_bytes())
    missing = new_id()
    reply = _message(reply_to=missing, thread_id=missing,
                     attachments=[{"path": "attachments/ab/" + "ab" * 32 + ".webp", "sha256": "ab" * 32}])
    _send(archive, reply)
    reasons = _reasons(archive)
    assert "not in the archive" in reasons[inbox_path("RedFox", orphan.id)]
    assert f"reply_to {missing}" in check_archive_text(archive)
    assert f"thread_id {missing}" in check_archive_text(archive)
    assert "attachment 'attachments/ab/" in check_archive_text(archive)


def check_archive_text(archive):
    return "\n".join(str(p) for p in check_archive(archive, run_git=False))


def test_attachment_hash_is_verified(archive):
    data = b"not really an image"
    digest = hashlib.sha256(data).hexdigest()
    stored = f"attachments/{digest[:2]}/{digest}.bin"
    _write(archive, stored, data + b"!")
    _send(archive, _message(attachments=[{"path": stored, "sha256": digest, "size": len(data)}]))
    assert f"but {message_path}" not in check_archive_text(archive)
    assert stored in _reasons(archive) and "sha256 is" in _reasons(archive)[stored]


def test_git_fsck_problems_are_included(archive):
    repo = archive.repo
    pack = PackBuffer()
    missing_blob = hashlib.sha1(b"never written").digest()
    tree = pack.add(TREE, Tree({"lost.md": (0o100644, missing_blob)}).encode())  # points at nothing
    sig = Signature("x", "x@example.org", 1_700_000_000)
    commit = pack.add(COMMIT, encode_commit(tree, [repo.head.target.raw], sig, sig, "bad mode"))
    pack.write(archive.git_dir + "/objects/pack")
    repo.references["refs/heads/main"].set_target(pygit2.Oid(raw=commit))
    problems = check_archive(archive)
    assert any(p.path == "(git fsck)" and "missing" in p.reason for p in problems)


def test_cli_prints_path_reason_and_exits_nonzero(archive, home):
    runner = CliRunner()
    clean = runner.invoke(cli, ["fsck", KEY])
    assert clean.exit_code == 0 and "0 problem(s)" in clean.output
    _write(archive, "stray/file.txt", b"x")
    dirty = runner.invoke(cli, ["fsck", KEY])
    assert dirty.exit_code == 1
    assert "stray/file.txt: not a path where gitmail keeps records" in dirty.output
    as_json = runner.invoke(cli, ["fsck", KEY, "--json"])
    assert json.loads(as_json.output)["problems"] == 1 and as_json.exit_code == 1
    every = runner.invoke(cli, ["fsck"])
    assert every.exit_code == 1 and "1 project(s) checked" in every.output


def test_cli_unknown_project_is_a_clear_error(home):
    result = CliRunner().invoke(cli, ["fsck", "/no/such/project"])
    assert result.exit_code == 2 and "NOT_FOUND" in result.output + (result.stderr if result.stderr_bytes else "")
