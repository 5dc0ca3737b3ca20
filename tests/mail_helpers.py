"""Helpers shared by the mail domain tests."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from gitmail import GitmailError, Store
from gitmail.mail.facade import Mail

PROJECT = "/data/projects/backend"


def make_mail(store: Store) -> Mail:
    mail = Mail(store)
    mail.ensure_project(PROJECT)
    return mail


def tip(store: Store, project: str = PROJECT) -> str | None:
    return store.archive(project).tip()


@contextmanager
def fails_cleanly(store: Store, code: str, project: str = PROJECT) -> Iterator[pytest.ExceptionInfo]:
    """Expect a GitmailError with ``code`` that leaves the project's tip where it was."""
    try:
        before = tip(store, project) if store.exists(project) else None
    except GitmailError:  # not even a valid project key
        before = None
    with pytest.raises(GitmailError) as info:
        yield info
    assert info.value.code == code, info.value.to_dict()
    assert info.value.message
    if before is not None:
        assert tip(store, project) == before


def register(mail: Mail, *names: str) -> dict[str, str]:
    """Register agents by name; return name -> registration token."""
    return {name: mail.register_agent(PROJECT, "test-cli", "test-model", name=name)["registration_token"]
            for name in names}


def open_agents(mail: Mail, *names: str) -> None:
    """Register agents that accept mail from anyone in the project."""
    register(mail, *names)
    for name in names:
        mail.set_contact_policy(PROJECT, name, "open")


def send(mail: Mail, sender: str, to: list[str], subject: str = "Hello", body: str = "Body text", **kwargs):
    """Send and return the delivered payload."""
    result = mail.send_message(PROJECT, sender, to, subject, body, **kwargs)
    return result["deliveries"][0]["payload"]
