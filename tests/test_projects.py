"""Projects: ensure, archive/unarchive, hard delete, listing."""

from __future__ import annotations

import os

from gitmail.mail.facade import Mail
from gitmail.storage.store import slug_for

from .conftest import fails_cleanly, git, tip
from .mail_helpers import PROJECT, make_mail, register


def test_ensure_project_is_idempotent_and_commits_once(store):
    mail = Mail(store)
    first = mail.ensure_project(PROJECT)
    assert set(first) >= {"id", "slug", "human_key", "created_at"}
    assert first["slug"] == slug_for(PROJECT) and first["human_key"] == PROJECT
    head = tip(store, PROJECT)
    again = mail.ensure_project(PROJECT + "/")  # same directory written another way
    assert again == first
    assert tip(store, PROJECT) == head
    log = git("--git-dir", store.paths(first["slug"]).archive, "log", "--format=%s")
    assert log.strip() == f"Create project {PROJECT}"


def test_ensure_project_rejects_relative_key(store):
    mail = Mail(store)
    with fails_cleanly(store, "INVALID_ARGUMENT", "./backend"):
        mail.ensure_project("./backend")
    assert store.slugs() == []


def test_archive_hides_project_and_unarchive_restores(store):
    mail = make_mail(store)
    register(mail, "BlueLake")
    other = mail.ensure_project("/data/projects/frontend")
    archived = mail.archive_project(PROJECT)
    assert archived["archived_at"]
    assert [p["human_key"] for p in mail.list_projects()] == [other["human_key"]]
    assert {p["human_key"] for p in mail.list_projects(include_archived=True)} == {PROJECT, other["human_key"]}
    head = tip(store, PROJECT)
    assert mail.archive_project(PROJECT)["archived_at"] == archived["archived_at"]
    assert tip(store, PROJECT) == head  # archiving twice changes nothing
    assert [a["name"] for a in mail.list_agents(PROJECT)] == ["BlueLake"]  # nothing deleted
    assert mail.unarchive_project(PROJECT)["archived_at"] is None
    assert len(mail.list_projects()) == 2


def test_get_project_by_slug_lists_agents(store):
    mail = make_mail(store)
    register(mail, "BlueLake", "GreenCastle")
    view = mail.get_project(slug_for(PROJECT))
    assert view["human_key"] == PROJECT
    assert [a["name"] for a in view["agents"]] == ["BlueLake", "GreenCastle"]
    with fails_cleanly(store, "NOT_FOUND", "/nowhere"):
        mail.get_project("nowhere-000000000000")


def test_unknown_project_is_not_found(store):
    mail = Mail(store)
    with fails_cleanly(store, "NOT_FOUND", "/data/none"):
        mail.archive_project("/data/none")


def test_hard_delete_project_needs_exact_phrase(store):
    mail = make_mail(store)
    for wrong in ("", "i understand", "I UNDERSTAND ", "yes"):
        with fails_cleanly(store, "CONFIRMATION_REQUIRED", PROJECT):
            mail.hard_delete_project(PROJECT, confirmation=wrong)
    assert store.exists(PROJECT)
    result = mail.hard_delete_project(PROJECT, confirmation="I UNDERSTAND")
    assert result["deleted"] is True and "remote" in result["note"]
    assert not store.exists(PROJECT)
    assert not os.path.exists(os.path.dirname(store.paths(slug_for(PROJECT)).archive))
    assert mail.list_projects(include_archived=True) == []
    again = mail.ensure_project(PROJECT)  # the key can be used afresh
    assert again["id"] != result["project"]["id"]
