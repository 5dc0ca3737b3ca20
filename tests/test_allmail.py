"""All mail across projects (``Mail.all_mail``): the list newest first and its cursor, filters, search, bad input."""

from __future__ import annotations

import pytest

from gitmail.mail.facade import Mail, MailQuery, SendOptions

from .conftest import refused
from .mail_helpers import PROJECT, make_mail, open_agents

OTHER = "/data/projects/frontend"


@pytest.fixture
def mail(store, wall) -> Mail:
    """Two projects; messages a second apart, but pairs written in the same second (ties broken by ID and project)."""
    mail = make_mail(store)
    mail.ensure_project(OTHER)
    open_agents(mail, "BlueLake", "GreenHill")
    for name in ("BlueLake", "GreenHill"):
        mail.register_agent(OTHER, "test", "test", name=name)
        mail.set_contact_policy(OTHER, name, "open")
    for i in range(7):
        mail.send_message(PROJECT, "BlueLake", ["GreenHill"], f"Back {i}", f"plan {i}",
                          SendOptions(ack_required=i % 2 == 0, importance="urgent" if i % 3 == 0 else "normal"))
        mail.send_message(OTHER, "GreenHill", ["BlueLake"], f"Front {i}", f"plan {i}", SendOptions(cc=["GreenHill"]))
        if i % 2:
            wall.advance(seconds=1)
    mail.acknowledge_message(PROJECT, "GreenHill", mail.fetch_inbox(PROJECT, "GreenHill", limit=1)[0]["id"])
    return mail


def walk(mail: Mail, query: MailQuery, per: int) -> list[tuple[str, str]]:
    """Every page of a listing through its cursors: (project slug, subject) newest first."""
    seen, after = [], None
    while True:
        found = mail.all_mail(query, after=after, limit=per)
        seen += [(item.project_slug, item.subject) for item in found.items]
        if found.cursor is None:
            assert not found.more
            return seen
        after = found.cursor


@pytest.mark.parametrize("per", [1, 3, 14])
def test_every_project_newest_first_through_the_cursors(mail, per):
    seen = walk(mail, MailQuery(), per)
    everything = [(item.project_slug, item.subject) for item in mail.all_mail(MailQuery(), limit=100).items]
    assert seen == everything and len(everything) == 14 and len(set(everything)) == 14
    assert [subject for _, subject in everything[:2]] in (["Back 6", "Front 6"], ["Front 6", "Back 6"])


def test_the_filters_and_the_same_search_agree(mail):
    for fields in ({"sender": "bluelake"}, {"recipient": "GreenHill"}, {"importance": "urgent"},
                   {"sender": "GreenHill", "recipient": "GreenHill"}, {"since": "2000-01-01", "until": "2999-12-31"}):
        listed = {(i.project_slug, i.id, tuple(i.to), tuple(i.cc), i.ack_state)
                  for i in mail.all_mail(MailQuery(**fields), limit=100).items}
        searched = {(i.project_slug, i.id, tuple(i.to), tuple(i.cc), i.ack_state)
                    for i in mail.all_mail(MailQuery(text="plan", **fields), limit=100).items}
        assert listed == searched and listed, fields


def test_acknowledgement_states(mail):
    asked = mail.all_mail(MailQuery(ack="asked"), limit=100).items
    assert sorted(i.subject for i in asked) == ["Back 0", "Back 2", "Back 4", "Back 6"]
    done = mail.all_mail(MailQuery(ack="done"), limit=100).items
    assert [i.subject for i in done] == ["Back 6"] and done[0].ack_state == "done"
    assert sorted(i.subject for i in mail.all_mail(MailQuery(text="plan", ack="owed"), limit=100).items) == \
        ["Back 0", "Back 2", "Back 4"]


def test_a_name_no_agent_of_a_project_has_leaves_that_project_out(mail):
    assert mail.all_mail(MailQuery(sender="Nobody"), limit=10).items == []


@pytest.mark.parametrize("fields, field", [
    ({"importance": "huge"}, "importance"),
    ({"ack": "maybe"}, "ack"),
    ({"since": "2026-13-01"}, "since"),
    ({"until": "yesterday"}, "until"),
    ({"since": "2026-12-02", "until": "2026-12-01"}, "since"),
    ({"sender": "two words"}, "sender"),
    ({"recipient": "a:b"}, "recipient"),
])
def test_a_filter_that_cannot_be_read_is_refused_naming_it(mail, store, fields, field):
    error = refused(store, PROJECT, "INVALID_ARGUMENT", mail.all_mail, MailQuery(**fields))
    assert error.data["field"] == field and field in error.message


def test_a_bad_cursor_limit_or_query_is_refused(mail, store):
    assert refused(store, PROJECT, "INVALID_ARGUMENT", mail.all_mail, MailQuery(), after="nonsense").data["field"] \
        == "after"
    assert "limit" in refused(store, PROJECT, "INVALID_ARGUMENT", mail.all_mail, MailQuery(), limit=0).message
    error = refused(store, PROJECT, "INVALID_ARGUMENT", mail.all_mail, MailQuery(text='"open', sender="BlueLake"))
    assert error.data["column"] == 1  # the column in the words as typed
