"""Helpers shared by the mail domain tests."""

from __future__ import annotations

from gitmail import Change, Project, Store
from gitmail.mail.facade import Mail, SendOptions
from gitmail.model.records import LAYOUT
from gitmail.storage.store import slug_for

PROJECT = "/data/projects/backend"


def make_mail(store: Store, *, layout: int = LAYOUT) -> Mail:
    """The facade over ``store`` with the project made; an older ``layout`` makes it as an earlier version did."""
    if layout != LAYOUT:
        project = Project(id=store.clock.new_id(), slug=slug_for(PROJECT), human_key=PROJECT,
                          created_at=store.clock.now_ts(), hlc=store.clock.tick(), layout=layout)
        store.archive(PROJECT, create=True).transact(lambda snap: Change("Create project").put_record(project))
    mail = Mail(store)
    mail.ensure_project(PROJECT)
    return mail


def register(mail: Mail, *names: str) -> dict[str, str]:
    """Register agents by name; return name -> registration token."""
    return {name: mail.register_agent(PROJECT, "test-cli", "test-model", name=name)["registration_token"]
            for name in names}


def open_agents(mail: Mail, *names: str) -> None:
    """Register agents that accept mail from anyone in the project."""
    register(mail, *names)
    for name in names:
        mail.set_contact_policy(PROJECT, name, "open")


def send(mail: Mail, sender: str, to: list[str], subject: str = "Hello", body: str = "Body text", **options):
    """Send (``options`` as :class:`SendOptions` takes them) and return the delivered payload."""
    result = mail.send_message(PROJECT, sender, to, subject, body, SendOptions(**options))
    return result["deliveries"][0]["payload"]


def two_agents_one_message(store: Store, project: str) -> Mail:
    """``project`` with BlueLake and GreenCastle (open to mail) and one message between them: a signed history."""
    mail = Mail(store)
    mail.ensure_project(project)
    mail.register_agent(project, "codex", "gpt", name="BlueLake")
    mail.register_agent(project, "codex", "gpt", name="GreenCastle")
    mail.set_contact_policy(project, "GreenCastle", "open")
    mail.send_message(project, "BlueLake", ["GreenCastle"], "Hi", "hello")
    return mail
