"""Agents: registration and tokens, directory, retirement, deletion."""

from __future__ import annotations

import datetime as dt
import re

from gitmail import HLC, Change
from gitmail.model.clock import format_ts
from gitmail.model.ids import new_id
from gitmail.model.records import Agent, Reservation
from gitmail.storage.fsck import check_archive
from gitmail.storage.store import slug_for

from .conftest import fails_cleanly, git, sign_commits, tip
from .mail_helpers import PROJECT, make_mail, register

GENERATED = re.compile(r"^[A-Z][a-z]+[A-Z][a-z]+\d*$")


def archive_dir(store):
    return store.paths(slug_for(PROJECT)).archive


def test_register_generates_adjective_noun_name_and_returns_profile(store):
    mail = make_mail(store)
    agent = mail.register_agent(PROJECT, "codex-cli", "gpt5-codex", task_description="Auth refactor")
    assert GENERATED.match(agent["name"]), agent["name"]
    for key in ("id", "name", "program", "model", "task_description", "inception_ts", "last_active_ts", "project_id"):
        assert key in agent
    assert agent["project_id"] == mail.ensure_project(PROJECT)["id"]
    assert agent["task_description"] == "Auth refactor" and agent["status"] == "active"
    log = git("--git-dir", archive_dir(store), "log", "-1", "--format=%an|%s")
    assert log.strip() == f"{agent['name']}|Register agent {agent['name']} (codex-cli, gpt5-codex)"


def test_token_is_returned_once_and_only_its_hash_is_stored(store):
    mail = make_mail(store)
    first = mail.register_agent(PROJECT, "claude-code", "opus", name="BlueLake")
    token = first["registration_token"]
    assert mail.verify_agent_token(PROJECT, "BlueLake", token)
    assert mail.verify_agent_token(PROJECT, "bluelake", token)  # names are case-insensitive
    assert not mail.verify_agent_token(PROJECT, "BlueLake", token + "x")
    assert not mail.verify_agent_token(PROJECT, "BlueLake", "")
    assert not mail.verify_agent_token(PROJECT, "Nobody", token)
    assert not mail.verify_agent_token("/data/none", "BlueLake", token)
    assert git("--git-dir", archive_dir(store), "grep", "-c", token, "main", check=False) == ""
    profile = git("--git-dir", archive_dir(store), "show", "main:agents/BlueLake/profile.yaml")
    assert "token_hash: sha256:" in profile
    again = mail.register_agent(PROJECT, "claude-code", "opus-2", name="BlueLake")
    assert "registration_token" not in again
    assert mail.verify_agent_token(PROJECT, "BlueLake", token)  # the old token still works


def test_reset_token_replaces_the_old_one(store):
    mail = make_mail(store)
    old = register(mail, "BlueLake")["BlueLake"]
    new = mail.reset_agent_token(PROJECT, "BlueLake")["registration_token"]
    assert mail.verify_agent_token(PROJECT, "BlueLake", new)
    assert not mail.verify_agent_token(PROJECT, "BlueLake", old)


def test_register_same_name_updates_case_insensitively(store):
    mail = make_mail(store)
    first = mail.register_agent(PROJECT, "codex-cli", "m1", name="BlueLake", task_description="a")
    head = tip(store, PROJECT)
    same = mail.register_agent(PROJECT, "codex-cli", "m1", name="BlueLake", task_description="a")
    assert tip(store, PROJECT) == head  # nothing changed, nothing committed
    assert same["id"] == first["id"]
    updated = mail.register_agent(PROJECT, "claude-code", "m2", name="bluelake", task_description="b")
    assert updated["name"] == "BlueLake" and updated["id"] == first["id"]
    assert (updated["program"], updated["model"], updated["task_description"]) == ("claude-code", "m2", "b")
    assert [a["name"] for a in mail.list_agents(PROJECT)] == ["BlueLake"]


def test_register_rejects_invalid_names(store):
    mail = make_mail(store)
    for bad in ("", "-dash", "has space", "x" * 129, "../up", "a/b"):
        with fails_cleanly(store, "INVALID_ARGUMENT", PROJECT):
            mail.register_agent(PROJECT, "cli", "model", name=bad)
    with fails_cleanly(store, "INVALID_ARGUMENT", PROJECT):
        mail.register_agent(PROJECT, "cli\nsecond line", "model", name="Fine")
    with fails_cleanly(store, "NOT_FOUND", "/data/other"):
        mail.register_agent("/data/other", "cli", "model")
    assert mail.list_agents(PROJECT) == []


def test_create_agent_identity_never_updates(store):
    mail = make_mail(store)
    made = mail.create_agent_identity(PROJECT, "codex-cli", "gpt5", name_hint="GreenCastle")
    assert made["name"] == "GreenCastle" and made["registration_token"]
    with fails_cleanly(store, "ALREADY_EXISTS", PROJECT):
        mail.create_agent_identity(PROJECT, "other", "other", name_hint="greencastle")
    with fails_cleanly(store, "INVALID_ARGUMENT", PROJECT):
        mail.create_agent_identity(PROJECT, "cli", "m", name_hint="bad name")
    quiet = mail.create_agent_identity(PROJECT, "cli", "m", return_registration_token=False)
    assert "registration_token" not in quiet and quiet["name"] != "GreenCastle"
    assert mail.whois(PROJECT, "GreenCastle")["program"] == "codex-cli"


def test_whois_lists_recent_commits_from_git(store):
    mail = make_mail(store)
    register(mail, "BlueLake", "GreenCastle")
    mail.register_agent(PROJECT, "cli", "m2", name="BlueLake")
    info = mail.whois(PROJECT, "bluelake", commit_limit=5)
    assert info["name"] == "BlueLake"
    summaries = [c["summary"] for c in info["recent_commits"]]
    assert summaries == ["Update agent BlueLake (cli, m2)", "Register agent BlueLake (test-cli, test-model)"]
    assert all(len(c["hexsha"]) == 40 and c["authored_ts"].endswith("Z") for c in info["recent_commits"])
    assert "recent_commits" not in mail.whois(PROJECT, "BlueLake", include_recent_commits=False)
    with fails_cleanly(store, "NOT_FOUND", PROJECT):
        mail.whois(PROJECT, "Nobody")
    with fails_cleanly(store, "INVALID_ARGUMENT", PROJECT):
        mail.whois(PROJECT, "BlueLake", commit_limit=-1)


def test_whois_recent_commits_are_those_git_log_finds(store):
    """The derived history answers whois with the commits a walk of git's history finds, newest first.

    Both name the journals each commit wrote to, which whois shows only to
    the journal's agent and those above it.
    """
    from gitmail.mail.agents import recent_commits
    from gitmail.storage.history import commits_by

    mail = make_mail(store)
    register(mail, "BlueLake", "GreenCastle", "RedStone")
    mail.set_contact_policy(PROJECT, "RedStone", "open")
    for i in range(7):
        mail.send_message(PROJECT, "BlueLake" if i % 3 else "GreenCastle", ["RedStone"], f"note {i}", "body")
        if i == 4:
            mail.journal(PROJECT, "BlueLake", "a private note")
    archive = store.archive(PROJECT)
    for name in ("BlueLake", "GreenCastle", "RedStone"):
        for limit in (1, 2, 5, 100):
            walked = commits_by(archive, name, limit)
            assert recent_commits(mail.ctx, PROJECT, name, limit) == walked
            assert len(walked) == min(limit, {"BlueLake": 6, "GreenCastle": 4, "RedStone": 2}[name])
            shown = mail.whois(PROJECT, name, commit_limit=limit, readers=["GreenCastle"])["recent_commits"]
            assert [c["hexsha"] for c in shown] == [c["hexsha"] for c in walked]
            told = mail.whois(PROJECT, name, commit_limit=limit)["recent_commits"]  # the operator reads everything
            assert all(("private note" in c["summary"]) == (name == "BlueLake" and w["journals"] == ["BlueLake"])
                       for c, w in zip(told, walked, strict=True))
            assert not any("private note" in c["summary"] for c in shown)
    assert mail.whois(PROJECT, "BlueLake", commit_limit=0)["recent_commits"] == []


def test_reads_update_last_active_without_committing(store, wall):
    mail = make_mail(store)
    register(mail, "BlueLake")
    before = mail.whois(PROJECT, "BlueLake")["last_active_ts"]
    head = tip(store, PROJECT)
    wall.advance(seconds=1)
    mail.fetch_inbox(PROJECT, "BlueLake")  # a read counts as activity
    after = mail.whois(PROJECT, "BlueLake")["last_active_ts"]
    assert after == store.clock.now_ts() > before
    assert tip(store, PROJECT) == head


def test_retire_unretire_deregister(store):
    mail = make_mail(store)
    register(mail, "BlueLake", "GreenCastle")
    retired = mail.retire_agent(PROJECT, "BlueLake")
    assert retired["status"] == "retired" and retired["retired_at"]
    head = tip(store, PROJECT)
    assert mail.retire_agent(PROJECT, "BlueLake")["retired_at"] == retired["retired_at"]
    assert tip(store, PROJECT) == head
    assert [a["name"] for a in mail.list_agents(PROJECT)] == ["GreenCastle"]
    assert [a["name"] for a in mail.list_agents(PROJECT, active_only=False)] == ["BlueLake", "GreenCastle"]
    restored = mail.unretire_agent(PROJECT, "BlueLake")
    assert restored["status"] == "active" and restored["retired_at"] is None
    gone = mail.deregister_agent(PROJECT, "GreenCastle")
    assert gone["status"] == "deregistered"
    assert [a["name"] for a in mail.list_agents(PROJECT)] == ["BlueLake"]
    back = mail.register_agent(PROJECT, "cli", "m", name="GreenCastle")  # registering again reactivates
    assert back["status"] == "active"
    with fails_cleanly(store, "NOT_FOUND", PROJECT):
        mail.retire_agent(PROJECT, "Nobody")


def test_hard_delete_agent_needs_phrase_and_history_keeps_files(store):
    mail = make_mail(store)
    register(mail, "BlueLake", "GreenCastle")
    for name in ("BlueLake", "GreenCastle"):
        mail.set_contact_policy(PROJECT, name, "open")
    sent = mail.send_message(PROJECT, "BlueLake", ["GreenCastle"], "s", "b")["deliveries"][0]["payload"]
    mail.mark_message_read(PROJECT, "GreenCastle", sent["id"])
    kept = mail.reply_message(PROJECT, sent["id"], "GreenCastle", "reply stays")
    with fails_cleanly(store, "CONFIRMATION_REQUIRED", PROJECT):
        mail.hard_delete_agent(PROJECT, "BlueLake", confirmation="i understand")
    result = mail.hard_delete_agent(PROJECT, "BlueLake", confirmation="I UNDERSTAND")
    assert result["deleted"] is True and result["agent"] == "BlueLake"
    assert "history" in result["note"]
    tree = git("--git-dir", archive_dir(store), "ls-tree", "-r", "--name-only", "main")
    assert "agents/BlueLake/profile.yaml" not in tree
    old = git("--git-dir", archive_dir(store), "log", "--format=%H", "--", "agents/BlueLake/profile.yaml")
    assert old.strip()  # still in history
    assert [a["name"] for a in mail.list_agents(PROJECT, active_only=False)] == ["GreenCastle"]
    assert result["messages_removed"] == 1
    assert mail.fetch_inbox(PROJECT, "GreenCastle") == []  # BlueLake's message is gone from every inbox
    assert mail.get_message(PROJECT, kept["id"])["reply_to"] == sent["id"]  # others' mail stays
    assert check_archive(store.archive(PROJECT)) == []
    with fails_cleanly(store, "NOT_FOUND", PROJECT):
        mail.hard_delete_agent(PROJECT, "BlueLake", confirmation="I UNDERSTAND")


def _push_old_agent(store, tmp_path, name: str, seconds_ago: int) -> None:
    """Bring in an agent registered long ago (by the store's clock), the way a teammate's push would."""
    old_ms = int((store.clock.time() - seconds_ago) * 1000)
    stamp = format_ts(dt.datetime.fromtimestamp(old_ms / 1000, tz=dt.UTC))
    agent = Agent(id=new_id(), name=name, program="cli", model="m", inception_ts=stamp,
                  hlc=HLC(old_ms, 0, "elsewhere"))
    work = tmp_path / f"clone-{name}"
    git("clone", "-q", archive_dir(store), str(work))
    sign_commits(str(work), store.home)
    (work / "agents" / name).mkdir(parents=True)
    (work / "agents" / name / "profile.yaml").write_bytes(agent.to_bytes())
    git("add", ".", cwd=str(work))
    date = f"@{int(store.clock.time()) - seconds_ago} +0000"
    git("-c", f"user.name={name}", "-c", "user.email=x@y", "commit", "-q", "-m", f"Register agent {name}",
        "--date", date, cwd=str(work))
    git("push", "-q", "origin", "HEAD:main", cwd=str(work))


def test_retire_inactive_agents_rules(store, tmp_path):
    mail = make_mail(store)
    register(mail, "BlueLake", "FreshFox")
    _push_old_agent(store, tmp_path, "OldOwl", 3 * 3600)
    _push_old_agent(store, tmp_path, "BusyBee", 3 * 3600)
    _push_old_agent(store, tmp_path, "SleepyCaller", 3 * 3600)
    archive = store.archive(PROJECT)
    reservation = Reservation(id=store.clock.new_id(), agent="BusyBee", path_pattern="src/*.py",
                              created_ts=store.clock.now_ts(), expires_ts="2999-01-01T00:00:00.000Z",
                              hlc=store.clock.tick())
    archive.transact(lambda snap: Change("reserve", author="gitmail").put_record(reservation))

    with fails_cleanly(store, "INVALID_ARGUMENT", PROJECT):
        mail.retire_inactive_agents(PROJECT, "SleepyCaller", inactive_seconds=-5)
    with fails_cleanly(store, "NOT_FOUND", PROJECT):
        mail.retire_inactive_agents(PROJECT, "Nobody", inactive_seconds=3600)
    dry = mail.retire_inactive_agents(PROJECT, "SleepyCaller", inactive_seconds=3600, dry_run=True)
    assert [c["agent"] for c in dry["retired"]] == ["OldOwl"]
    assert mail.whois(PROJECT, "OldOwl")["status"] == "active"  # a dry run changes nothing
    floor = mail.retire_inactive_agents(PROJECT, "SleepyCaller", inactive_seconds=1, dry_run=True)
    assert floor["threshold_seconds"] == 60
    result = mail.retire_inactive_agents(PROJECT, "SleepyCaller", inactive_seconds=3600)
    assert [c["agent"] for c in result["retired"]] == ["OldOwl"]  # never the caller, never the fresh ones
    assert result["skipped"] == [{"agent": "BusyBee", "reason": "holds an active file reservation"}]
    assert mail.whois(PROJECT, "OldOwl")["status"] == "retired"
    assert mail.whois(PROJECT, "SleepyCaller")["status"] == "active"
    forced = mail.retire_inactive_agents(PROJECT, "SleepyCaller", inactive_seconds=3600, include_reserved=True)
    assert [c["agent"] for c in forced["retired"]] == ["BusyBee"]
    log = git("--git-dir", archive_dir(store), "log", "-1", "--format=%an|%s")
    assert log.strip() == "SleepyCaller|SleepyCaller retired 1 inactive agent(s): BusyBee"
