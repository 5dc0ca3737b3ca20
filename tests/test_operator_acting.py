"""A person acting through a door: every commit made inside ``acting_as_operator`` names that person."""

from __future__ import annotations

from gitmail.model.names import OVERSEER
from gitmail.storage.operator import acting_as_operator

from .conftest import git_run, tip
from .mail_helpers import PROJECT, make_mail, open_agents, send


def _last_commit(store) -> tuple[str, str]:
    git_dir = store.archive(PROJECT).git_dir
    done = git_run("--git-dir", git_dir, "log", "-1", "--format=%an <%ae>%n%B", tip(store, PROJECT))
    author, message = done.stdout.split("\n", 1)
    return author, message.strip()


def test_writes_inside_the_block_name_the_operator_and_the_door(store, monkeypatch):
    monkeypatch.setenv("GIT_AUTHOR_NAME", "Dana Operator")
    monkeypatch.setenv("GIT_AUTHOR_EMAIL", "dana@example.org")
    mail = make_mail(store)
    open_agents(mail, "BlueLake", "GreenHill")
    mail.request_contact(PROJECT, "BlueLake", "GreenHill", reason="review")
    with acting_as_operator("the web view", fallback_name=OVERSEER, node=store.node) as who:
        assert who == ("Dana Operator", "dana@example.org")
        mail.respond_contact(PROJECT, "GreenHill", "BlueLake", True)
        approved = "GreenHill approved contact from BlueLake (by Dana Operator through the web view)"
        assert _last_commit(store) == ("Dana Operator <dana@example.org>", approved)
        mail.retire_agent(PROJECT, "BlueLake")
        assert _last_commit(store)[0] == "Dana Operator <dana@example.org>"
    mail.unretire_agent(PROJECT, "BlueLake")  # outside the block: the agent's own name, as before
    assert _last_commit(store) == ("BlueLake <BlueLake@gitmail>", "Restore agent BlueLake")


def test_a_write_that_changes_nothing_is_not_credited(store, monkeypatch):
    monkeypatch.setenv("GIT_AUTHOR_NAME", "Dana Operator")
    mail = make_mail(store)
    open_agents(mail, "BlueLake", "GreenHill")
    before = tip(store, PROJECT)
    with acting_as_operator("the web view", fallback_name=OVERSEER, node=store.node):
        mail.set_contact_policy(PROJECT, "BlueLake", "open")  # already open: no commit at all
    assert tip(store, PROJECT) == before
    send(mail, "BlueLake", ["GreenHill"])
    assert _last_commit(store)[0] == "BlueLake <BlueLake@gitmail>"
