"""The `gitmail` command as a shell user meets it: real processes on a private store."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from gitmail.cli import cli
from gitmail.mail.facade import Mail
from gitmail.storage.store import Store

from .conftest import git
from .mcp_harness import ROOT, child_env

PROJECT = "/work/cli/project"


def gitmail(home: str, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gitmail", *args], env=child_env(home), input=stdin,
                          capture_output=True, text=True, timeout=120)


def ok(home: str, *args: str, stdin: str | None = None) -> dict | list:
    proc = gitmail(home, *args, "--json", stdin=stdin)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    return json.loads(proc.stdout)


def test_every_command_has_help_and_a_row_in_the_readme():
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as handle:
        readme = handle.read()
    missing_help = [name for name, command in cli.commands.items() if not (command.help or "").strip()]
    missing_row = [name for name in cli.commands if f"`gitmail {name}" not in readme]
    assert not missing_help, f"commands without help text: {missing_help}"
    assert not missing_row, f"commands missing from README.md: {missing_row}"


@pytest.mark.slow  # a process per command
def test_mail_round_trip_from_the_shell(tmp_path):
    home = str(tmp_path / "home")
    project = ok(home, "init", PROJECT)
    assert os.path.isdir(project["archive"])
    ok(home, "register", PROJECT, "--name", "BlueLake", "--policy", "open")
    green = ok(home, "register", PROJECT, "--name", "GreenCastle", "--policy", "open")
    assert green["registration_token"] and green["contact_policy"] == "open"
    assert [p["slug"] for p in ok(home, "projects")] == [project["slug"]]
    assert [a["name"] for a in ok(home, "agents", PROJECT)] == ["BlueLake", "GreenCastle"]

    sent = ok(home, "send", PROJECT, "--from", "BlueLake", "--to", "GreenCastle", "--subject", "Schema plan",
              "--ack", stdin="Add an **email** column, please.")
    message_id = sent["deliveries"][0]["payload"]["id"]
    inbox = ok(home, "inbox", PROJECT, "GreenCastle")
    assert [m["id"] for m in inbox] == [message_id] and inbox[0]["read_at"] is None
    text = gitmail(home, "inbox", PROJECT, "GreenCastle").stdout
    assert "* Schema plan" in text  # unread marker

    shown = ok(home, "read", PROJECT, message_id, "--as", "GreenCastle")
    assert shown["body_md"].strip() == "Add an **email** column, please." and shown["receipt"]["read"] is True
    reply = ok(home, "reply", PROJECT, message_id, "--from", "GreenCastle", "--body", "Done in migration 42.")
    acked = ok(home, "ack", PROJECT, "GreenCastle", message_id)
    assert acked["acknowledged"] is True
    hits = ok(home, "search", PROJECT, "migration")
    assert [h["id"] for h in hits] == [reply["id"]]
    thread = ok(home, "thread", PROJECT, reply["thread_id"])
    assert [m["id"] for m in thread["messages"]] == [message_id, reply["id"]]

    history = ok(home, "log", PROJECT, message_id)
    subjects = [c["subject"] for c in history["commits"]]
    assert len(subjects) >= 3 and any("Schema plan" in s for s in subjects)  # sent, read, acknowledged
    assert {c["author"] for c in history["commits"]} >= {"BlueLake", "GreenCastle"}
    whole = ok(home, "log", PROJECT, reply["thread_id"], "--thread")
    assert len(whole["commits"]) > len(history["commits"])
    # The same history through plain git.
    archive = os.path.join(home, "projects", project["slug"], "archive.git")
    plain = git("--git-dir", archive, "log", "--format=%H", "--", f":(glob)**/{message_id}.*").split()
    assert plain == [c["commit"] for c in history["commits"]]


@pytest.mark.slow  # a process per command
def test_catch_up_and_feed_from_the_shell(tmp_path):
    home = str(tmp_path / "home")
    ok(home, "init", PROJECT)
    ok(home, "register", PROJECT, "--name", "BlueLake", "--policy", "open")
    ok(home, "register", PROJECT, "--name", "GreenCastle", "--policy", "open")
    ids = [ok(home, "send", PROJECT, "--from", "BlueLake", "--to", "GreenCastle", "--subject", f"step {i}",
              "--body", f"do step {i}")["deliveries"][0]["payload"]["id"] for i in range(3)]

    caught = ok(home, "catch-up", PROJECT, "GreenCastle", "--limit", "2")
    assert [m["id"] for m in caught["messages"]] == ids[1:] and caught["older_messages"] is True
    assert caught["messages"][0]["body_md"] == "do step 1"
    text = gitmail(home, "catch-up", PROJECT, "GreenCastle").stdout
    assert f"gitmail feed {PROJECT} GreenCastle --after {caught['next_after']}" in text

    first = ok(home, "feed", PROJECT, "GreenCastle", "--limit", "2")
    assert [m["id"] for m in first["messages"]] == ids[:2] and first["has_more"] is True
    rest = gitmail(home, "feed", PROJECT, "GreenCastle", "--after", str(first["next_after"]))
    assert rest.returncode == 0 and "do step 2" in rest.stdout and "do step 0" not in rest.stdout
    assert f"cursor {caught['next_after']}" in rest.stdout
    ahead = gitmail(home, "feed", PROJECT, "GreenCastle", "--after", str(caught["next_after"] + 1))
    assert ahead.returncode == 2 and ahead.stderr.startswith("error [CURSOR_AHEAD]")


@pytest.mark.slow  # a process per command
def test_shell_errors_exit_2_with_a_code_and_change_nothing(tmp_path):
    home = str(tmp_path / "home")
    project = ok(home, "init", PROJECT)
    ok(home, "register", PROJECT, "--name", "BlueLake")
    archive = os.path.join(home, "projects", project["slug"], "archive.git")
    before = git("--git-dir", archive, "rev-parse", "main")
    proc = gitmail(home, "send", PROJECT, "--from", "BlueLake", "--to", "Nobody", "--subject", "s", "--body", "b")
    assert proc.returncode == 2 and proc.stderr.startswith("error [") and "Nobody" in proc.stderr
    relative = gitmail(home, "init", "relative/path", "--json")
    assert relative.returncode == 2 and json.loads(relative.stdout)["error"]["code"] == "INVALID_ARGUMENT"
    assert git("--git-dir", archive, "rev-parse", "main") == before


@pytest.mark.slow  # a process per command
def test_the_operator_issues_a_lost_token_anew(tmp_path):
    from gitmail import Store
    from gitmail.mail.facade import Mail

    home = str(tmp_path / "home")
    ok(home, "init", PROJECT)
    first = ok(home, "register", PROJECT, "--name", "BlueLake")["registration_token"]
    issued = ok(home, "agents", "reset-token", PROJECT, "BlueLake")
    assert issued["agent"] == "BlueLake" and issued["registration_token"] != first
    text = gitmail(home, "agents", "reset-token", PROJECT, "BlueLake").stdout
    latest = text.strip().splitlines()[-1]
    mail = Mail(Store(home, background=False))
    assert mail.verify_agent_token(PROJECT, "BlueLake", latest)
    assert not mail.verify_agent_token(PROJECT, "BlueLake", first)
    assert not mail.verify_agent_token(PROJECT, "BlueLake", issued["registration_token"])
    assert [a["name"] for a in ok(home, "agents", PROJECT)] == ["BlueLake"]  # listing works as before


@pytest.mark.slow  # a process per command
def test_registering_again_changes_only_the_options_given(tmp_path):
    home = str(tmp_path / "home")
    ok(home, "init", PROJECT)
    ok(home, "register", PROJECT, "--name", "BlueLake", "--program", "codex-cli", "--model", "gpt5",
       "--task", "auth")
    again = gitmail(home, "register", PROJECT, "--name", "BlueLake", "--task", "docs")
    assert again.returncode == 0 and "gitmail agents reset-token" in again.stdout
    (agent,) = ok(home, "agents", PROJECT)
    assert (agent["program"], agent["model"], agent["task_description"]) == ("codex-cli", "gpt5", "docs")


@pytest.mark.slow
def test_send_as_overseer_reaches_a_closed_agent_and_reads_the_reply(tmp_path):
    home = str(tmp_path / "home")
    ok(home, "init", PROJECT)
    ok(home, "register", PROJECT, "--name", "BlueLake")
    ok(home, "send", PROJECT, "--as-overseer", "--to", "BlueLake", "--subject", "Status?", "--importance", "high",
       "--ack", "--body", "Where are we?")
    inbox = ok(home, "inbox", PROJECT, "BlueLake")
    assert [(m["from"], m["importance"], m["ack_required"]) for m in inbox] == [("Overseer", "high", True)]
    ok(home, "reply", PROJECT, inbox[0]["id"], "--from", "BlueLake", "--body", "Almost done")
    assert [m["from"] for m in ok(home, "inbox", PROJECT, "Overseer")] == ["BlueLake"]
    neither = gitmail(home, "send", PROJECT, "--to", "BlueLake", "--subject", "s", "--body", "b")
    assert neither.returncode == 2 and "--as-overseer" in neither.stderr
    # The overseer attaches files like any sender.
    roots = tmp_path / "files"
    roots.mkdir()
    (roots / "plan.txt").write_text("the overseer's plan\n")
    proc = subprocess.run([sys.executable, "-m", "gitmail", "send", PROJECT, "--as-overseer", "--to", "BlueLake",
                           "--subject", "plan", "--body", "see attached", "--attach", str(roots / "plan.txt"),
                           "--json"],
                          env=dict(child_env(home), GITMAIL_ATTACHMENT_ROOTS=str(roots)), capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    payload = json.loads(proc.stdout)["deliveries"][0]["payload"]
    assert [a["size"] for a in payload["attachments"]] == [len("the overseer's plan\n")]
    (received,) = [m for m in ok(home, "inbox", PROJECT, "BlueLake", "--bodies") if m["subject"] == "plan"]
    assert received["attachments"] == payload["attachments"]


@pytest.mark.slow  # a process per command
def test_errors_name_commands_the_shell_has_and_send_can_broadcast_and_attach(tmp_path):
    home = str(tmp_path / "home")
    missing = gitmail(home, "inbox", "/work/cli/nowhere", "BlueLake")
    assert missing.returncode == 2 and "`gitmail init`" in missing.stderr and "ensure_project" not in missing.stderr
    ok(home, "init", PROJECT)
    for name in ("BlueLake", "GreenCastle", "RedStone"):
        ok(home, "register", PROJECT, "--name", name, "--policy", "open")
    unknown = gitmail(home, "send", PROJECT, "--from", "BlueLake", "--to", "Nobody", "--subject", "s", "--body", "b")
    assert "`gitmail agents PROJECT`" in unknown.stderr and "list_agents" not in unknown.stderr
    nobody = gitmail(home, "send", PROJECT, "--from", "BlueLake", "--subject", "s", "--body", "b")
    assert nobody.returncode == 2 and "--broadcast" in nobody.stderr and "--to" in nobody.stderr
    everyone = ok(home, "send", PROJECT, "--from", "BlueLake", "--broadcast", "--subject", "all", "--body", "hi")
    assert everyone["deliveries"][0]["payload"]["to"] == ["GreenCastle", "RedStone"]
    roots = tmp_path / "files"
    roots.mkdir()
    (roots / "notes.txt").write_text("attached words\n")
    env = dict(child_env(home), GITMAIL_ATTACHMENT_ROOTS=str(roots))
    proc = subprocess.run([sys.executable, "-m", "gitmail", "send", PROJECT, "--from", "BlueLake", "--to", "RedStone",
                           "--subject", "file", "--body", "see attached", "--attach", str(roots / "notes.txt"),
                           "--importance", "blocker", "--json"], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    payload = json.loads(proc.stdout)["deliveries"][0]["payload"]
    assert payload["importance"] == "blocker" and payload["attachments"][0]["size"] == len("attached words\n")


@pytest.mark.slow  # a process per command
def test_files_are_listed_shown_and_saved_from_the_shell(tmp_path):
    home = str(tmp_path / "home")
    ok(home, "init", PROJECT)
    ok(home, "register", PROJECT, "--name", "BlueLake", "--policy", "open")
    mail = Mail(Store(home, background=False))
    ids = [mail.upload_file(PROJECT, "BlueLake", f"notes {i}\n".encode(), name=f"notes{i}.txt").file.file_id
           for i in range(3)]
    first = ok(home, "files", "list", PROJECT, "--limit", "2")
    second = ok(home, "files", "list", PROJECT, "--limit", "2", "--cursor", first["next_cursor"])
    newest_first = [f.file_id for f in mail.list_files(PROJECT).files]
    assert sorted(newest_first) == sorted(ids) and "next_cursor" not in second
    assert [f["file_id"] for f in first["files"] + second["files"]] == newest_first
    assert f"--cursor {first['next_cursor']}" in gitmail(home, "files", "list", PROJECT, "--limit", "2").stdout
    shown = ok(home, "files", "show", PROJECT, ids[0])
    assert shown["file"]["name"] == "notes0.txt" and shown["referenced_by"] == []
    out = tmp_path / "saved.txt"
    saved = ok(home, "files", "get", PROJECT, ids[0], "-o", str(out))
    assert out.read_bytes() == b"notes 0\n" and saved["sha256"] == ids[0] and saved["size"] == 8
    again = gitmail(home, "files", "get", PROJECT, ids[0], "-o", str(out))
    assert again.returncode == 2 and "ALREADY_EXISTS" in again.stderr and out.read_bytes() == b"notes 0\n"
    missing = gitmail(home, "files", "show", PROJECT, "0" * 64)
    assert missing.returncode == 2 and "FILE_NOT_FOUND" in missing.stderr
