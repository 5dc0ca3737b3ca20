"""The human overseer: a reserved sender that passes contact policy and commits as the operator."""

from __future__ import annotations

import pytest

from gitmail import GitmailError
from gitmail.mail.facade import SendOptions
from gitmail.model.records import Agent, Message, message_path, profile_path

from .conftest import fails_cleanly, git_run, tip
from .mail_helpers import PROJECT, make_mail, register


@pytest.fixture
def operator(monkeypatch):
    monkeypatch.setenv("GIT_AUTHOR_NAME", "Dana Operator")
    monkeypatch.setenv("GIT_AUTHOR_EMAIL", "dana@example.org")


def test_overseer_reaches_an_agent_whose_policy_blocks_everyone(store, operator):
    mail = make_mail(store)
    register(mail, "BlueLake")
    mail.set_contact_policy(PROJECT, "BlueLake", "block_all")
    sent = mail.send_as_overseer(PROJECT, ["BlueLake"], "Stop the deploy", "Please **hold** it.",
                                 options=SendOptions(importance="urgent", ack_required=True))
    payload = sent["deliveries"][0]["payload"]
    assert payload["from"] == "Overseer"
    inbox = mail.fetch_inbox(PROJECT, "BlueLake")
    assert [m["subject"] for m in inbox] == ["Stop the deploy"]
    assert inbox[0]["importance"] == "urgent" and inbox[0]["ack_required"] is True
    snap = store.archive(PROJECT).snapshot()
    message = snap.load(message_path(payload["id"]), Message)
    assert message is not None and message.human is True
    profile = snap.load(profile_path("Overseer"), Agent)
    assert profile is not None and profile.human and profile.contact_policy == "open" and profile.token_hash is None


def test_the_commit_names_the_operator(store, operator):
    mail = make_mail(store)
    register(mail, "BlueLake")
    mail.send_as_overseer(PROJECT, ["BlueLake"], "Hello", "From a person")
    git_dir = store.archive(PROJECT).git_dir
    author = git_run("--git-dir", git_dir, "log", "-1", "--format=%an <%ae>", tip(store, PROJECT)).stdout.strip()
    assert author == "Dana Operator <dana@example.org>"


def test_agents_reply_to_the_overseer_and_it_reads_them(store, operator):
    mail = make_mail(store)
    tokens = register(mail, "BlueLake")
    mail.set_contact_policy(PROJECT, "BlueLake", "contacts_only")
    first = mail.send_as_overseer(PROJECT, ["BlueLake"], "Status?", "How far are you?")["deliveries"][0]["payload"]
    assert tokens
    answer = mail.reply_message(PROJECT, first["id"], "BlueLake", "Half way.")
    assert answer["to"] == ["Overseer"]
    assert [m["subject"] for m in mail.fetch_inbox(PROJECT, "Overseer")] == ["Re: Status?"]
    again = mail.reply_as_overseer(PROJECT, answer["id"], "Thanks")
    assert again["thread_id"] == first["id"] and again["to"] == ["BlueLake"]


def test_broadcast_from_the_overseer_reaches_every_active_agent(store, operator):
    mail = make_mail(store)
    register(mail, "BlueLake", "GreenHill")
    mail.set_contact_policy(PROJECT, "GreenHill", "block_all")
    sent = mail.send_as_overseer(PROJECT, None, "All hands", "Meeting at noon", options=SendOptions(broadcast=True))
    assert sorted(sent["deliveries"][0]["payload"]["to"]) == ["BlueLake", "GreenHill"]
    assert sent["broadcast_skipped"] == []


@pytest.mark.parametrize("name", ["Overseer", "overseer", "OVERSEER"])
def test_no_agent_may_register_the_overseer_name(store, name):
    mail = make_mail(store)
    before = tip(store, PROJECT)
    with pytest.raises(GitmailError) as caught:
        mail.register_agent(PROJECT, "cli", "model", name=name)
    assert caught.value.code == "INVALID_ARGUMENT" and "overseer" in caught.value.message
    with pytest.raises(GitmailError):
        mail.create_agent_identity(PROJECT, "cli", "model", name_hint=name)
    assert tip(store, PROJECT) == before


def test_no_token_proves_the_overseer(store, operator):
    mail = make_mail(store)
    register(mail, "BlueLake")
    mail.send_as_overseer(PROJECT, ["BlueLake"], "Hello", "x")
    assert not mail.verify_agent_token(PROJECT, "Overseer", "")
    assert not mail.verify_agent_token(PROJECT, "Overseer", "anything")


def test_the_operator_issues_no_token_for_the_overseer(store, operator):
    mail = make_mail(store)
    register(mail, "BlueLake")
    mail.send_as_overseer(PROJECT, ["BlueLake"], "Hello", "x")
    with fails_cleanly(store, "INVALID_ARGUMENT", PROJECT) as caught:
        mail.reset_agent_token(PROJECT, "overseer")
    assert "human overseer" in caught.value.message
    assert store.archive(PROJECT).snapshot().load(profile_path("Overseer"), Agent).token_hash is None
