"""The overseer acting from the web view, in a real headless Chromium: each job end to end, each write
committed under the operator's git identity.

The server is ``gitmail serve``'s application in this process
(:class:`tests.inprocess_server.InProcessServer`) over the test's store on a
hand-moved clock, so a holder falls idle with ``wall.advance``, never a sleep.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from gitmail.mail.facade import SendOptions
from gitmail.model.records import Contact, contact_path

from . import test_web
from .conftest import git_run, tip
from .inprocess_server import InProcessServer
from .mail_helpers import PROJECT, make_mail, open_agents, send

pytestmark = pytest.mark.slow

browser = test_web.browser  # one Chromium for the module
OPERATOR = "Dana Operator <dana@example.org>"


@pytest.fixture
def operator(monkeypatch):
    monkeypatch.setenv("GIT_AUTHOR_NAME", "Dana Operator")
    monkeypatch.setenv("GIT_AUTHOR_EMAIL", "dana@example.org")


@pytest.fixture
def site(store, operator) -> Iterator[tuple[InProcessServer, str]]:
    mail = make_mail(store)
    open_agents(mail, "BlueLake", "GreenHill", "RedStone")
    with InProcessServer(store, mail=mail) as server:
        yield server, store.resolve(PROJECT)


@pytest.fixture
def tab(browser) -> Iterator:  # noqa: ANN001 - Playwright's Browser
    context = browser.new_context()
    page = context.new_page()
    problems: list[str] = []
    page.on("console", lambda msg: problems.append(msg.text) if msg.type == "error" else None)
    page.on("pageerror", lambda exc: problems.append(str(exc)))
    yield page
    context.close()
    assert [p for p in problems if "status of 400" not in p] == []  # a refused action is a 400 page


def last_commit(store) -> tuple[str, str]:
    done = git_run("--git-dir", store.archive(PROJECT).git_dir, "log", "-1", "--format=%an <%ae>%n%s",
                   tip(store, PROJECT))
    author, subject = done.stdout.strip().split("\n", 1)
    return author, subject


def test_the_overseer_approves_a_contact_from_the_dashboard(site, tab, store):
    server, slug = site
    server.mail.request_contact(PROJECT, "BlueLake", "GreenHill", reason="schema review")
    server.mail.request_contact(PROJECT, "RedStone", "GreenHill", reason="spam")
    tab.goto(f"{server.base}/ui/p/{slug}/dashboard")
    contacts = tab.locator("table[data-list=contacts]")
    assert "schema review" in contacts.inner_text()
    contacts.get_by_role("button", name="Approve contact from BlueLake to GreenHill").click()
    tab.wait_for_url(re.compile(r".*/dashboard$"))
    assert "BlueLake" not in tab.locator("table[data-list=contacts]").inner_text()
    assert last_commit(store) == (OPERATOR, "GreenHill approved contact from BlueLake (by Dana Operator through "
                                            "the web view)")
    tab.locator("table[data-list=contacts]").get_by_role("button", name="Deny contact from RedStone to GreenHill") \
        .click()
    tab.wait_for_url(re.compile(r".*/dashboard$"))
    snap = store.archive(PROJECT).snapshot()
    statuses = {who: snap.load(contact_path(who, "GreenHill"), Contact).status for who in ("BlueLake", "RedStone")}
    assert statuses == {"BlueLake": "approved", "RedStone": "denied"}
    assert tab.locator("table[data-list=contacts]").count() == 0


def test_the_overseer_acknowledges_an_answer_across_all_projects(site, tab, store):
    server, slug = site
    note = server.mail.send_as_overseer(PROJECT, ["BlueLake"], "Status?", "Where are we?")["deliveries"][0]["payload"]
    answer = server.mail.reply_message(PROJECT, note["id"], "BlueLake", "Halfway; confirm the plan.",
                                       SendOptions(ack_required=True))
    tab.goto(f"{server.base}/ui/dashboard")
    inbox = tab.locator(f"#board-{slug} table[data-list=inbox]")
    assert "Re: Status?" in inbox.inner_text()
    inbox.get_by_role("button", name="Acknowledge: Re: Status?").click()
    tab.wait_for_url(re.compile(r".*/ui/dashboard$"))
    assert tab.locator(f"#board-{slug} table[data-list=inbox]").count() == 0
    receipt = server.mail.message_receipts(PROJECT, [answer["id"]])[answer["id"]][0]
    assert receipt.agent == "Overseer" and receipt.read_at and receipt.acked_at
    assert last_commit(store) == (OPERATOR, f"Overseer acknowledged {answer['id']} (by Dana Operator through the "
                                            "web view)")


def test_releasing_a_reservation_asks_first_and_follows_the_force_release_rules(site, tab, store, wall):
    server, slug = site
    held = server.mail.file_reservation_paths(PROJECT, "BlueLake", ["src/db/**"], ttl_seconds=7200,
                                              reason="migration")["granted"][0]["id"]
    tab.goto(f"{server.base}/ui/p/{slug}/board")
    tab.get_by_role("button", name="Release src/db held by BlueLake").click()
    assert "has expired or its holder has shown no activity" in tab.locator("#confirm-what").inner_text()
    before = tip(store, PROJECT)
    tab.fill("textarea[name=note]", "Taking over the migration.")
    tab.get_by_role("button", name="Confirm").click()
    assert "BlueLake is still active" in tab.locator("#error").inner_text()  # refused: the holder is busy
    assert tip(store, PROJECT) == before
    wall.advance(minutes=31)  # no sign of BlueLake for longer than the threshold
    tab.goto(f"{server.base}/ui/p/{slug}/board")
    tab.get_by_role("button", name="Release src/db held by BlueLake").click()
    tab.fill("textarea[name=note]", "Taking over the migration.")
    tab.get_by_role("button", name="Confirm").click()
    tab.wait_for_url(re.compile(r".*/board$"))
    assert "No reservation." in tab.locator("table[data-live=reservations]").inner_text()
    author, subject = last_commit(store)
    assert author == OPERATOR and subject.startswith("Overseer force-released BlueLake's reservation src/db:")
    notice = server.mail.fetch_inbox(PROJECT, "BlueLake", include_bodies=True)[0]
    assert notice["from"] == "Overseer" and "Taking over the migration." in notice["body_md"]
    assert server.mail.list_file_reservations(PROJECT)["file_reservations"] == []
    history = server.mail.list_file_reservations(PROJECT, active_only=False)["file_reservations"]
    assert [r["released_ts"] is not None for r in history if r["id"] == held] == [True]


def test_retiring_an_agent_asks_first_and_is_recorded_under_the_operator(site, tab, store):
    server, slug = site
    tab.goto(f"{server.base}/ui/p/{slug}/agents/RedStone")
    before = tip(store, PROJECT)
    tab.get_by_role("button", name="Retire…").click()
    assert "Retire RedStone" in tab.locator("#confirm-what").inner_text()
    assert tip(store, PROJECT) == before  # nothing happens before the confirmation
    tab.get_by_role("link", name="Cancel").click()
    tab.wait_for_url(re.compile(r".*/agents/RedStone$"))
    tab.get_by_role("button", name="Retire…").click()
    tab.get_by_role("button", name="Confirm").click()
    tab.wait_for_url(re.compile(r".*/agents/RedStone$"))
    assert "retired" in tab.locator("dl.profile").inner_text()
    assert last_commit(store) == (OPERATOR, "Retire agent RedStone (by Dana Operator through the web view)")
    tab.get_by_role("button", name="Restore…").click()
    tab.get_by_role("button", name="Confirm").click()
    tab.wait_for_url(re.compile(r".*/agents/RedStone$"))
    assert [a["status"] for a in server.mail.list_agents(PROJECT) if a["name"] == "RedStone"] == ["active"]


def test_a_file_holder_is_found_on_the_board(site, tab):
    server, slug = site
    server.mail.file_reservation_paths(PROJECT, "BlueLake", ["src/db/**"], reason="migration")
    server.mail.file_reservation_paths(PROJECT, "GreenHill", ["src/*.py"], exclusive=False)
    tab.goto(f"{server.base}/ui/p/{slug}/board")
    tab.get_by_label("Who holds this file?").fill("src/db/schema.py")
    tab.get_by_role("button", name="Look up").click()
    found = tab.locator("#holders")
    assert "BlueLake" in found.inner_text() and "exclusive" in found.inner_text()
    assert "GreenHill" not in found.inner_text()
    tab.get_by_label("Who holds this file?").fill("docs/intro.md")
    tab.get_by_role("button", name="Look up").click()
    assert "Nobody holds docs/intro.md" in tab.locator("#holders").inner_text()


def test_every_operator_form_needs_the_sessions_csrf_token(site, store):
    server, slug = site
    import httpx2 as httpx

    server.mail.request_contact(PROJECT, "BlueLake", "GreenHill")
    held = server.mail.file_reservation_paths(PROJECT, "BlueLake", ["a.py"])["granted"][0]["id"]
    message = send(server.mail, "BlueLake", ["GreenHill"])["id"]
    before = tip(store, PROJECT)
    with httpx.Client(base_url=server.base, timeout=60, follow_redirects=False) as client:
        client.get("/ui/")  # a session, whose token the forged forms below leave out
        for path, form in ((f"/ui/p/{slug}/contact", {"requester": "BlueLake", "target": "GreenHill",
                                                      "answer": "approve"}),
                           (f"/ui/p/{slug}/receipt/{message}", {"what": "ack"}),
                           (f"/ui/p/{slug}/agents/BlueLake/status", {"status": "retired", "confirmed": "yes"}),
                           (f"/ui/p/{slug}/release/{held}", {"confirmed": "yes"}),
                           (f"/ui/p/{slug}/archive", {"archived": "yes", "confirmed": "yes"})):
            for csrf in ({}, {"csrf": "forged"}):
                answer = client.post(path, data={**form, **csrf})
                assert answer.status_code == 403, (path, answer.status_code)
            answer = client.post(path, data=form, headers={"Origin": "http://evil.example"})
            assert answer.status_code in (403, 421), (path, answer.status_code)
    assert tip(store, PROJECT) == before


def test_a_thread_shows_each_recipient_apart_with_read_and_acknowledged(site, tab, wall):
    server, slug = site
    sent = send(server.mail, "BlueLake", ["GreenHill"], "Plan", cc=["RedStone"], ack_required=True)
    wall.advance(seconds=5)
    server.mail.acknowledge_message(PROJECT, "GreenHill", sent["id"])
    quiet = server.mail.send_as_overseer(PROJECT, ["GreenHill"], "Quiet", "x",
                                         SendOptions(thread_id=sent["thread_id"], bcc=["RedStone"])).message
    assert quiet is not None
    tab.goto(f"{server.base}/ui/p/{slug}/thread/{sent['thread_id']}")
    first = [" ".join(t.split()) for t in tab.locator(f"#m-{sent['id']} ul.deliveries li").all_inner_texts()]
    assert first[0].startswith("To GreenHill acknowledged ") and first[1:] == ["Cc RedStone unread"]
    assert tab.locator(f"#m-{quiet['id']} ul.deliveries li.bcc").inner_text().split() == ["Bcc", "RedStone",
                                                                                           "unread"]
    assert tab.locator(f"#m-{sent['id']} ul.deliveries li.bcc").count() == 0


def test_a_reply_with_changed_recipients_and_importance_after_a_preview(site, tab, store):
    server, slug = site
    sent = send(server.mail, "BlueLake", ["GreenHill"], "Plan", ack_required=True)
    tab.goto(f"{server.base}/ui/p/{slug}/thread/{sent['thread_id']}")
    reply = tab.locator(f"#m-{sent['id']} details.reply")
    reply.locator("summary").click()
    assert reply.get_by_label("To").input_value() == "BlueLake"  # the sender, unless changed
    assert reply.get_by_label("Importance").input_value() == "normal"
    assert reply.get_by_label("ask for an acknowledgement").is_checked()  # as the original asked
    reply.get_by_label("To").fill("RedStone")
    reply.get_by_label("Cc").fill("GreenHill")
    reply.get_by_label("Importance").select_option("urgent")
    reply.get_by_label("ask for an acknowledgement").uncheck()
    reply.get_by_label("Reply (Markdown)").fill("Take **over** <script>window.__owned=1</script>")
    reply.get_by_role("button", name="Preview").click()
    shown = reply.locator(".preview")
    shown.locator("strong").wait_for()
    assert shown.locator("strong").inner_text() == "over" and shown.locator("script").count() == 0
    reply.get_by_role("button", name="Send reply").click()
    tab.wait_for_url(re.compile(r".*/thread/.*#m-.*"))
    got = server.mail.fetch_inbox(PROJECT, "RedStone")[0]
    assert (got["from"], got["to"], got["cc"], got["importance"], got["ack_required"]) == (
        "Overseer", ["RedStone"], ["GreenHill"], "urgent", False)
    assert got["id"] not in [m["id"] for m in server.mail.fetch_inbox(PROJECT, "BlueLake")]  # its sender left out
    assert last_commit(store)[0] == OPERATOR


def test_compose_into_an_existing_thread_with_copies(site, tab):
    server, slug = site
    sent = send(server.mail, "BlueLake", ["GreenHill"], "Deploy window")
    tab.goto(f"{server.base}/ui/p/{slug}/compose")
    tab.get_by_label("To", exact=True).fill("GreenHill")
    tab.get_by_label("Cc", exact=True).fill("RedStone")
    tab.get_by_label("Thread").select_option(label="In: Deploy window")
    tab.get_by_label("Subject").fill("Window moved")
    tab.get_by_label("Message (Markdown)").fill("Friday instead.")
    tab.get_by_role("button", name="Send").click()
    tab.wait_for_url(re.compile(rf".*/thread/{sent['thread_id']}#m-.*"))
    got = server.mail.fetch_inbox(PROJECT, "RedStone")[0]
    assert (got["thread_id"], got["cc"], got["subject"]) == (sent["thread_id"], ["RedStone"], "Window moved")
