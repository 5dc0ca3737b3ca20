"""Control characters: NUL refused at every door, commit messages printable, terminals never driven.

A NUL byte that reached a commit message would make ``git fsck`` fail for good
(and a hub checking objects refuse every later push); other control
characters may be stored in records, but git history stays printable and the
CLI shows them escaped.
"""

from __future__ import annotations

import subprocess
from urllib.parse import quote

import pytest

from gitmail import Mail
from gitmail.model.controls import printable
from gitmail.model.errors import INVALID_ARGUMENT, GitmailError

from .conftest import git, tip
from .mcp_harness import call, fail, run
from .test_cli_mail import gitmail

SHARES_SERVER = True  # each test makes a project of its own: the process's one server serves them all

PROJECT = "/work/projects/controls"
NUL = "\0"
ESCAPES = "\x1b]0;owned\x07\x1b[2J\x1b[31mred\x9b1m"  # retitle the window, clear the screen, colour, C1 CSI


@pytest.fixture
def mail(store):
    mail = Mail(store)
    mail.ensure_project(PROJECT)
    for name in ("Blue", "Green"):
        mail.register_agent(PROJECT, "test", "m", name=name)
        mail.set_contact_policy(PROJECT, name, "open")
    return mail


WRITES = {
    "subject": lambda m: m.send_message(PROJECT, "Blue", ["Green"], f"Hi{NUL}there", "body"),
    "body": lambda m: m.send_message(PROJECT, "Blue", ["Green"], "Hi", f"line{NUL}cut"),
    "program": lambda m: m.register_agent(PROJECT, f"code{NUL}x", "m", name="Blue"),
    "model": lambda m: m.register_agent(PROJECT, "test", f"m{NUL}", name="Red"),
    "task_description": lambda m: m.register_agent(PROJECT, "test", "m", name="Blue", task_description=NUL),
    "journal entry": lambda m: m.journal(PROJECT, "Blue", f"decided{NUL}\nmore"),
    "seat holder": lambda m: m.take_seat(PROJECT, "Blue", holder=f"session{NUL}"),
    "contact reason": lambda m: m.request_contact(PROJECT, "Blue", "Green", reason=f"please{NUL}"),
    "reservation reason": lambda m: m.file_reservation_paths(PROJECT, "Blue", ["src/*.py"], reason=f"x{NUL}"),
}


@pytest.mark.parametrize("field", sorted(WRITES))
def test_nul_is_refused_in_every_text_field_and_nothing_is_written(mail, field):
    before = tip(mail.store, PROJECT)
    with pytest.raises(GitmailError) as refused:
        WRITES[field](mail)
    assert refused.value.code == INVALID_ARGUMENT
    assert "NUL" in refused.value.message
    assert tip(mail.store, PROJECT) == before


def test_commit_messages_stay_printable_and_fsck_clean(mail):
    mail.register_agent(PROJECT, f"code{ESCAPES}", "m", name="Red")
    mail.journal(PROJECT, "Blue", f"first line {ESCAPES}\nsecond line")
    git_dir = mail.store.archive(PROJECT).git_dir
    messages = git("--git-dir", git_dir, "log", "--format=%B%x00")
    assert not any(ch in messages.replace("\0", "") for ch in "\x1b\x07\x9b"), "no control character in history"
    assert "code\\x1b]0;owned\\x07" in messages
    fsck = subprocess.run(["git", "--git-dir", git_dir, "fsck", "--strict"], capture_output=True, text=True)
    assert fsck.returncode == 0, fsck.stderr
    assert mail.whois(PROJECT, "Red", include_recent_commits=False)["program"] == f"code{ESCAPES}"  # data kept as given


def test_the_cli_shows_subjects_and_bodies_with_control_characters_escaped(home, mail):
    sent = mail.send_message(PROJECT, "Blue", ["Green"], f"Hello {ESCAPES}", f"body {ESCAPES}\n\tindented")
    mid = sent["deliveries"][0]["payload"]["id"]
    shown = gitmail(home, "read", PROJECT, mid)
    assert shown.returncode == 0, shown.stderr
    assert "\x1b" not in shown.stdout and "\x07" not in shown.stdout and "\x9b" not in shown.stdout
    assert f"subject:  Hello {printable(ESCAPES)}" in shown.stdout
    assert "\n\tindented" in shown.stdout, "newlines and tabs are layout, kept as they are"
    listed = gitmail(home, "inbox", PROJECT, "Green")
    assert listed.returncode == 0, listed.stderr
    assert "\x1b" not in listed.stdout and printable(ESCAPES) in listed.stdout


def test_tools_and_resources_refuse_nul_naming_the_argument(server):
    async def scenario():
        async with server.client() as client:
            await call(client, "ensure_project", human_key=PROJECT)
            await call(client, "register_agent", project_key=PROJECT, program="t", model="m", name="Blue")
            subject = await fail(client, "send_message", project_key=PROJECT, sender_name="Blue", to=["Blue"],
                                 subject=f"a{NUL}b", body_md="x")
            listed = await fail(client, "send_message", project_key=PROJECT, sender_name="Blue",
                                to=["Blue", f"Gr{NUL}een"], subject="ok", body_md="x")
            search = await fail(client, "search_messages", project_key=PROJECT, query=f"find{NUL}me")
            try:
                await client.read_resource(f"resource://agents/{quote(PROJECT, safe='')}%00")
            except Exception as exc:  # noqa: BLE001 - the error itself is what is checked
                resource_error = exc
            return subject, listed, search, resource_error

    subject, listed, search, resource_error = run(scenario())
    assert subject["code"] == INVALID_ARGUMENT and subject["data"] == {"argument": "subject"}
    assert listed["data"] == {"argument": "to[1]"}
    assert search["data"] == {"argument": "query"}
    body = resource_error.error.data
    assert body["code"] == INVALID_ARGUMENT and body["data"] == {"parameter": "project_key"}
