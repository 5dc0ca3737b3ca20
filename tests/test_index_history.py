"""The derived history: which commits changed which files, answered without walking git log."""

from __future__ import annotations

from gitmail.index import indexer_for
from gitmail.model.records import message_path, profile_path

from .conftest import git_run, tip
from .mail_helpers import PROJECT, make_mail, open_agents, send


def test_a_profile_history_lists_each_version_with_its_blobs(store):
    mail = make_mail(store)
    open_agents(mail, "BlueLake")
    mail.set_contact_policy(PROJECT, "BlueLake", "contacts_only")
    found = indexer_for(store).project(PROJECT).file_history([profile_path("BlueLake")])
    assert [c["summary"].split(" ")[0] for c in found] == ["BlueLake", "BlueLake", "Register"][: len(found)]
    git_dir = store.archive(PROJECT).git_dir
    logged = git_run("--git-dir", git_dir, "log", "--format=%H", "main", "--", profile_path("BlueLake")).stdout.split()
    assert [c["commit"] for c in found] == logged
    newest = found[0]["files"][0]
    assert newest["old_blob"] and newest["new_blob"] and newest["old_blob"] != newest["new_blob"]
    assert found[-1]["files"][0]["old_blob"] is None


def test_a_message_history_follows_new_commits(store):
    mail = make_mail(store)
    open_agents(mail, "BlueLake", "GreenHill")
    index = indexer_for(store).project(PROJECT)
    first = send(mail, "BlueLake", ["GreenHill"], "one")
    assert [c["author"] for c in index.file_history([message_path(first["id"])])] == ["BlueLake"]
    second = send(mail, "GreenHill", ["BlueLake"], "two")
    found = index.file_history([message_path(first["id"]), message_path(second["id"])])
    assert [c["author"] for c in found] == ["GreenHill", "BlueLake"]
    assert index.history.tip() == tip(store, PROJECT)


def test_rewritten_history_starts_the_table_afresh(store):
    mail = make_mail(store)
    open_agents(mail, "BlueLake", "GreenHill")
    index = indexer_for(store).project(PROJECT)
    base = tip(store, PROJECT)
    gone = send(mail, "BlueLake", ["GreenHill"], "rewritten away")
    assert index.file_history([message_path(gone["id"])])
    git_run("--git-dir", store.archive(PROJECT).git_dir, "update-ref", "refs/heads/main", base)
    assert index.file_history([message_path(gone["id"])]) == []
    assert index.history.tip() == base


def test_a_limit_counts_commits_however_many_files_each_changed(store):
    mail = make_mail(store)
    open_agents(mail, "BlueLake", "GreenHill", "RedStone", "GoldPond")
    sent = [send(mail, "BlueLake", ["GreenHill", "RedStone", "GoldPond"], "one"),
            send(mail, "GreenHill", ["BlueLake", "RedStone", "GoldPond"], "two")]
    paths = [path for m in sent for path in mail.record_paths(PROJECT, "message", m["id"])]
    whole = mail.history(PROJECT, paths, limit=10)
    assert [len(c["files"]) for c in whole] == [5, 5]  # the message, the sender's copy, three recipients' copies
    assert [(c["commit"], len(c["files"])) for c in mail.history(PROJECT, paths, limit=1)] == \
        [(whole[0]["commit"], 5)]
    assert [c["commit"] for c in mail.history(PROJECT, paths, limit=1, offset=1)] == [whole[1]["commit"]]
