"""Coordination wired into the mail domain: attachments on send, role addressing, sleep, seat fencing."""

from __future__ import annotations

import hashlib
import io

import pytest
from PIL import Image

from gitmail.mail.attachments import read_attachment
from gitmail.mail.facade import NO_OPTIONS, SendOptions
from gitmail.model.records import Message, contact_path, inbox_path, message_path, outbox_path, profile_path
from gitmail.storage.fsck import check_archive

from .conftest import fails_cleanly, git_run
from .mail_helpers import PROJECT, make_mail, open_agents, send


def png(color=(10, 200, 10), size=24) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (size, size), color).save(out, format="PNG")
    return out.getvalue()


@pytest.fixture
def mail(store):
    mail = make_mail(store)
    open_agents(mail, "Blue", "Green", "Red")
    return mail


@pytest.fixture
def roots(tmp_path, monkeypatch):
    root = tmp_path / "shared"
    root.mkdir()
    monkeypatch.setenv("GITMAIL_ATTACHMENT_ROOTS", str(root))
    return root


def test_send_stores_attachments_and_inlines_small_images(mail, store, roots):
    (roots / "diagram.png").write_bytes(png())
    (roots / "log.txt").write_text("line 1\n")
    payload = send(mail, "Blue", ["Green"], body=f"Flow:\n\n![flow]({roots / 'diagram.png'})\n",
                   attachment_paths=[str(roots / "log.txt")])
    kinds = {a["media_type"]: a for a in payload["attachments"]}
    assert set(kinds) == {"image/webp", "text/plain"}
    assert kinds["image/webp"]["type"] == "inline" and "data:image/webp;base64," in payload["body_md"]
    snap = store.archive(PROJECT).snapshot()
    stored = snap.load(inbox_path("Green", payload["id"]), Message)
    for entry in stored.attachments:
        assert read_attachment(snap, entry["path"], entry["sha256"])
    assert read_attachment(snap, kinds["text/plain"]["path"]) == b"line 1\n"
    assert check_archive(store.archive(PROJECT), run_git=False) == []
    fetched = mail.get_attachment(PROJECT, kinds["text/plain"]["path"])
    assert fetched["sha256"] == kinds["text/plain"]["sha256"]


def test_per_agent_and_per_call_policy(mail, store, roots):
    (roots / "a.png").write_bytes(png())
    mail.set_attachments_policy(PROJECT, "Blue", "file")
    by_agent = send(mail, "Blue", ["Green"], body=f"![a]({roots / 'a.png'})")
    assert "data:" not in by_agent["body_md"] and by_agent["attachments"][0]["type"] == "file"
    assert by_agent["body_md"] == f"![a]({by_agent['attachments'][0]['path']})"
    by_call = send(mail, "Blue", ["Green"], body=f"![a]({roots / 'a.png'})", attachments_policy="inline")
    assert by_call["attachments"][0]["type"] == "inline"
    with fails_cleanly(store, "INVALID_ARGUMENT", PROJECT):
        mail.set_attachments_policy(PROJECT, "Blue", "sometimes")


@pytest.mark.parametrize("kwargs, code", [
    ({"attachment_paths": ["/etc/passwd"]}, "PATH_NOT_ALLOWED"),
    ({"attachment_paths": ["nope.png"]}, "PATH_NOT_ALLOWED"),
    ({"attachment_paths": ["attachments/00/" + "0" * 64 + ".png"]}, "NOT_FOUND"),
    ({"body": "![x](data:image/png;base64,aGVsbG8=)"}, "ATTACHMENT_UNDECODABLE"),
    ({"attachments_policy": "always"}, "INVALID_ARGUMENT"),
])
def test_bad_attachments_write_nothing(mail, store, roots, kwargs, code):
    body = kwargs.pop("body", "hello")
    with fails_cleanly(store, code, PROJECT):
        mail.send_message(PROJECT, "Blue", ["Green"], "Subject", body, SendOptions(**kwargs))


def test_role_recipients_reach_every_active_agent_with_the_capability(mail, store):
    mail.publish_capabilities(PROJECT, "Green", ["review"])
    mail.publish_capabilities(PROJECT, "Red", ["review", "db"])
    mail.publish_capabilities(PROJECT, "Blue", ["review"])
    payload = send(mail, "Blue", ["role:review"], subject="Please review")
    assert payload["to"] == ["Green", "Red"]  # the sender is left out of its own role
    snap = store.archive(PROJECT).snapshot()
    assert snap.exists(inbox_path("Green", payload["id"])) and snap.exists(inbox_path("Red", payload["id"]))
    mail.retire_agent(PROJECT, "Red")
    assert send(mail, "Blue", ["role:review"])["to"] == ["Green"]
    with fails_cleanly(store, "NOT_FOUND", PROJECT):
        mail.send_message(PROJECT, "Blue", ["role:db"], "S", "b")
    with fails_cleanly(store, "INVALID_ARGUMENT", PROJECT):
        mail.send_message(PROJECT, "Blue", ["role:bad cap"], "S", "b")


def test_asleep_agents_receive_but_cannot_send(mail, store):
    mail.sleep_agent(PROJECT, None, target="Red")  # the operator
    payload = send(mail, "Blue", ["Red"])
    assert store.archive(PROJECT).snapshot().exists(inbox_path("Red", payload["id"]))
    with fails_cleanly(store, "AGENT_ASLEEP", PROJECT):
        mail.send_message(PROJECT, "Red", ["Blue"], "S", "b")
    with fails_cleanly(store, "AGENT_ASLEEP", PROJECT):
        mail.reply_message(PROJECT, payload["id"], "Red", "answer")
    with fails_cleanly(store, "AGENT_ASLEEP", PROJECT):
        mail.file_reservation_paths(PROJECT, "Red", ["src/"])
    mail.wake_agent(PROJECT, None, "red")  # names compare without case
    assert mail.reply_message(PROJECT, payload["id"], "Red", "answer")["count"] == 1


def test_sends_are_fenced_by_the_sender_seat(mail, store):
    first = mail.take_seat(PROJECT, "blue", holder="tab 1")
    assert first["agent"] == "Blue"
    token = first["seat"]["token"]
    with fails_cleanly(store, "SEAT_HELD", PROJECT):
        mail.send_message(PROJECT, "Blue", ["Green"], "S", "b")
    assert send(mail, "Blue", ["Green"], seat=token)["from"] == "Blue"
    newer = mail.take_over(PROJECT, "Blue", holder="tab 2")["seat"]["token"]
    with fails_cleanly(store, "STALE_EPOCH", PROJECT):
        mail.send_message(PROJECT, "Blue", ["Green"], "S", "b", options=SendOptions(seat=token))
    assert send(mail, "Blue", ["Green"], seat=newer)
    mail.journal(PROJECT, "Blue", "Handed over to tab 2 after a crash.", seat=newer)
    mail.release_seat(PROJECT, "Blue", newer)
    assert mail.take_seat(PROJECT, "Blue")["journal"][-1]["entry"].startswith("Handed over")


def test_force_release_notice_is_ordinary_mail(mail, store):
    import datetime as dt

    from gitmail import Change, Reservation
    from gitmail.model.clock import format_ts

    at = store.clock.now() - dt.timedelta(minutes=10)
    record = Reservation(id=store.clock.new_id(), agent="Green", path_pattern="api/", created_ts=format_ts(at),
                         expires_ts=format_ts(at + dt.timedelta(minutes=2)), hlc=store.clock.tick())
    store.archive(PROJECT).transact(lambda s: Change("old reservation").put_record(record))
    out = mail.force_release_file_reservation(PROJECT, "Blue", record.id, note="merging now")
    inbox = mail.fetch_inbox(PROJECT, "Green", include_bodies=True)
    assert inbox[0]["id"] == out["notified"] and "merging now" in inbox[0]["body_md"]
    assert check_archive(store.archive(PROJECT), run_git=False) == []


def test_receipts_are_writes_too(mail, store):
    payload = send(mail, "Blue", ["Green"])
    token = mail.take_seat(PROJECT, "Green")["seat"]["token"]
    with fails_cleanly(store, "SEAT_HELD", PROJECT):
        mail.acknowledge_message(PROJECT, "Green", payload["id"])
    assert mail.acknowledge_message(PROJECT, "Green", payload["id"], seat=token)["acknowledged"] is True
    mail.release_seat(PROJECT, "Green", token)
    second = send(mail, "Blue", ["Green"])
    with fails_cleanly(store, "SEAT_REQUIRED", PROJECT):  # given up, the seat is still how Green writes
        mail.mark_message_read(PROJECT, "Green", second["id"])
    mail.sleep_agent(PROJECT, "Green", seat=mail.take_seat(PROJECT, "Green")["seat"]["token"])
    with fails_cleanly(store, "AGENT_ASLEEP", PROJECT):
        mail.mark_message_read(PROJECT, "Green", second["id"])


def test_overlapping_reservations_count_as_shared_context(store):
    from .mail_helpers import register

    mail = make_mail(store)
    register(mail, "Ann", "Bob")  # default policy: auto
    with fails_cleanly(store, "CONTACT_REQUIRED", PROJECT):
        mail.send_message(PROJECT, "Ann", ["Bob"], "Hi", "no shared context yet")
    mail.file_reservation_paths(PROJECT, "Ann", ["src/**/*.py"], exclusive=False)
    mail.file_reservation_paths(PROJECT, "Bob", ["src/api/*"], exclusive=False)
    assert send(mail, "Ann", ["Bob"])["to"] == ["Bob"]


def test_lists_beyond_their_caps_are_refused_at_the_librarys_door_too(mail, store):
    from gitmail.coord.reservations import MAX_PATHS
    from gitmail.mail.attachments import MAX_ATTACHMENTS
    from gitmail.mail.sending import MAX_RECIPIENTS

    for field in ("to", "cc", "bcc"):
        with fails_cleanly(store, "INVALID_ARGUMENT", PROJECT) as info:
            many = ["Green"] * (MAX_RECIPIENTS + 1)
            mail.send_message(PROJECT, "Blue", many if field == "to" else ["Green"], "S", "b",
                              SendOptions(**{field: many}) if field != "to" else NO_OPTIONS)
        assert f"at most {MAX_RECIPIENTS}" in info.value.message
    with fails_cleanly(store, "INVALID_ARGUMENT", PROJECT):
        mail.send_message(PROJECT, "Blue", ["Green"], "S", "b",
                          options=SendOptions(attachment_paths=["x"] * (MAX_ATTACHMENTS + 1)))
    with fails_cleanly(store, "INVALID_ARGUMENT", PROJECT):
        mail.release_file_reservations(PROJECT, "Blue", file_reservation_ids=["0" * 23] * (MAX_PATHS + 1))


def spellings(path: str) -> list[str]:
    """Ways to name ``path`` of the archive as a relative attachment path."""
    return [path, f"./{path}", f"attachments/../{path}", f"attachments/ab/../../{path}", path.replace("/", "\\"),
            path.upper(), path.lower(), f"attachments/{path}", f"attachments/./../{path}"]


def test_no_record_of_the_archive_is_an_attachment_however_its_path_is_spelled(mail, store, roots):
    (roots / "notes.txt").write_text("shared notes\n")
    first = send(mail, "Blue", ["Green"], bcc=["Red"], attachment_paths=[str(roots / "notes.txt")])
    mail.request_contact(PROJECT, "Green", "Red", reason="pairing")
    records = [outbox_path("Blue", first["id"]), inbox_path("Green", first["id"]), message_path(first["id"]),
               profile_path("Blue"), contact_path("Green", "Red"), "project.yaml"]
    snap = store.archive(PROJECT).snapshot()
    assert all(snap.exists(path) for path in records)
    for path in records:
        for ref in spellings(path):
            for how in ({"attachment_paths": [ref]}, {"body": f"![x]({ref})"}):
                body = how.get("body", "hello")
                with fails_cleanly(store, "PATH_NOT_ALLOWED", PROJECT) as info:
                    mail.send_message(PROJECT, "Green", ["Blue"], "S", body,
                                      options=SendOptions(attachments_policy="file",
                                                          attachment_paths=how.get("attachment_paths")))
                assert "GITMAIL_ATTACHMENT_ROOTS" in info.value.message and "attachments/" in info.value.message
            with fails_cleanly(store, "INVALID_ARGUMENT", PROJECT):
                mail.get_attachment(PROJECT, ref)
    # A stored attachment carries on, however its path is spelled, and stays one file.
    stored = first["attachments"][0]["path"]
    again = send(mail, "Green", ["Blue"], attachment_paths=[f"./{stored}"], body=f"![again](attachments/../{stored})")
    assert [a["path"] for a in again["attachments"]] == [stored]
    assert mail.get_attachment(PROJECT, stored)["content_base64"]


def test_a_symlink_at_an_attachment_path_is_not_an_attachment(mail, store, tmp_path):
    """A link committed behind gitmail's back (as a hostile sync could bring it) is served as nothing."""
    target = f"../../{profile_path('Blue')}"
    digest = hashlib.sha256(target.encode()).hexdigest()
    link_path = f"attachments/{digest[:2]}/{digest}.yaml"
    git_dir = store.archive(PROJECT).git_dir
    (tmp_path / "target").write_text(target)
    env = {"GIT_INDEX_FILE": str(tmp_path / "index")}

    def plumbing(*args: str) -> str:
        proc = git_run("--git-dir", git_dir, *args, env=env)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout.strip()

    blob = plumbing("hash-object", "-w", str(tmp_path / "target"))
    plumbing("read-tree", "main")
    plumbing("update-index", "--add", "--cacheinfo", f"120000,{blob},{link_path}")
    commit = plumbing("commit-tree", plumbing("write-tree"), "-p", "main", "-m", "a link")
    plumbing("update-ref", "refs/heads/main", commit)
    assert store.archive(PROJECT).snapshot().read(link_path) == target.encode()  # the link itself is there
    with fails_cleanly(store, "NOT_FOUND", PROJECT):
        mail.get_attachment(PROJECT, link_path)
    with fails_cleanly(store, "NOT_FOUND", PROJECT):
        mail.send_message(PROJECT, "Green", ["Blue"], "S", "b", options=SendOptions(attachment_paths=[link_path]))


def test_reading_a_message_verifies_its_attachments(mail, store, roots):
    from gitmail import Change

    (roots / "notes.txt").write_text("original\n")
    payload = send(mail, "Blue", ["Green"], attachment_paths=[str(roots / "notes.txt")])
    shown = mail.get_message(PROJECT, payload["id"], agent_name="Green")
    assert [a["verified"] for a in shown["attachments"]] == [True]
    path = shown["attachments"][0]["path"]
    store.archive(PROJECT).transact(lambda s: Change("tamper").put(path, b"altered\n"))
    assert mail.get_message(PROJECT, payload["id"], agent_name="Green")["attachments"][0]["verified"] is False


def test_environment_settings_keep_originals_and_limit_sizes(mail, store, roots, monkeypatch):
    (roots / "a.png").write_bytes(png(size=40))
    monkeypatch.setenv("GITMAIL_KEEP_ORIGINAL_IMAGES", "1")
    monkeypatch.setenv("GITMAIL_INLINE_MAX_BYTES", "10")
    payload = send(mail, "Blue", ["Green"], body=f"![a]({roots / 'a.png'})")
    entry = payload["attachments"][0]
    assert entry["type"] == "file"  # over the 10-byte inline limit
    snap = store.archive(PROJECT).snapshot()
    assert snap.read(entry["original_path"]) == png(size=40)
    monkeypatch.setenv("GITMAIL_ATTACHMENT_MAX_BYTES", "50")
    with fails_cleanly(store, "ATTACHMENT_TOO_LARGE", PROJECT):
        mail.send_message(PROJECT, "Blue", ["Green"], "S", f"![a]({roots / 'a.png'})")


def test_contact_writes_are_fenced_too(store):
    from .mail_helpers import register

    mail = make_mail(store)
    register(mail, "Ann", "Bob")
    token = mail.take_seat(PROJECT, "Ann")["seat"]["token"]
    with fails_cleanly(store, "SEAT_HELD", PROJECT):
        mail.request_contact(PROJECT, "Ann", "Bob")
    with fails_cleanly(store, "SEAT_HELD", PROJECT):
        mail.set_contact_policy(PROJECT, "Ann", "open")
    mail.request_contact(PROJECT, "Ann", "Bob", seat=token)
    mail.sleep_agent(PROJECT, "Bob", until="woken")
    with fails_cleanly(store, "AGENT_ASLEEP", PROJECT):
        mail.respond_contact(PROJECT, "Bob", "Ann", True)
    ann_child = mail.spawn_agent(PROJECT, "Ann", ["viewer@*"], name="AnnHelper", seat=token)["name"]
    mail.sleep_agent(PROJECT, "Ann", target=ann_child, seat=token)  # the actor's seat fences it too
    with fails_cleanly(store, "SEAT_HELD", PROJECT):
        mail.wake_agent(PROJECT, "Ann", ann_child)
    mail.wake_agent(PROJECT, "Ann", ann_child, seat=token)
    mail.wake_agent(PROJECT, None, "Bob")
    assert mail.respond_contact(PROJECT, "Bob", "Ann", True)["status"] == "approved"
