"""Fields of a human's own (``x-...``) survive every later update of a record."""

from __future__ import annotations

import pytest

from gitmail import GitmailError
from gitmail.model.records import Agent, profile_path

from .mail_helpers import PROJECT, make_mail, register


def _edit_profile(store, name: str, text: str) -> None:
    from gitmail.storage.engine import Change

    archive = store.archive(PROJECT)
    path = profile_path(name)

    def fn(snap):
        return Change("hand edit", author="human").put(path, snap.read(path) + text.encode())

    archive.transact(fn)


def test_an_x_field_survives_profile_updates(store):
    mail = make_mail(store)
    register(mail, "BlueLake")
    _edit_profile(store, "BlueLake", "x-team: payments\nx-oncall:\n  - mon\n  - tue\n")
    mail.set_contact_policy(PROJECT, "BlueLake", "open")
    mail.publish_capabilities(PROJECT, "BlueLake", ["review"])
    mail.register_agent(PROJECT, "other-cli", "other-model", name="BlueLake")
    profile = store.archive(PROJECT).snapshot().load(profile_path("BlueLake"), Agent)
    assert profile is not None
    assert profile.extra == {"x-team": "payments", "x-oncall": ["mon", "tue"]}
    assert profile.contact_policy == "open" and profile.program == "other-cli"
    text = store.archive(PROJECT).snapshot().read(profile_path("BlueLake")).decode()
    assert "x-team: payments" in text


def test_a_field_without_the_prefix_is_refused_with_advice():
    data = b"id: 01abc\nname: BlueLake\nteam: payments\n"
    with pytest.raises(GitmailError) as caught:
        Agent.from_bytes(data, "agents/BlueLake/profile.yaml")
    assert caught.value.code == "CORRUPT_RECORD"
    assert "x-" in caught.value.message and "team" in caught.value.message
