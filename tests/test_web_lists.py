"""Long lists in the web view, in a real headless Chromium: every list that can pass a page pages, and all mail.

One ``gitmail serve`` over more than fifty projects: a crowded one with
more than fifty of everything the view lists (agents, threads, an inbox,
search hits, acknowledgements owed, urgent mail, reservations, a thread's
history, a journal), a small one, and quiet ones that only fill the list
of projects. Each test walks a list page by page through its
own links and checks that it met every item once; all mail is filtered and
searched across both projects through its form.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from gitmail import Store
from gitmail.mail.facade import Mail, SendOptions

from . import axe, test_web
from .mcp_harness import ServerProcess
from .test_web import base

browser, page = test_web.browser, test_web.page  # the fixtures of test_web: one Chromium, a checked tab

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]  # a server and Chromium; the seed writes ~300 commits

CROWD = "/work/lists/crowd"
SMALL = "/work/lists/small"
MANY = 55  # of each kind of item: more than fifty
EXTRA = [f"Helper{i:02d}" for i in range(MANY)]
QUIET = [f"/work/lists/quiet{i:02d}" for i in range(MANY)]  # projects with nothing in them


def crowd_seed(home: str) -> dict[str, object]:
    """More than fifty of each list in CROWD, a few messages in SMALL, more than fifty projects."""
    store = Store(home, background=False)
    mail = Mail(store)
    for key in QUIET:
        mail.ensure_project(key)
    for key in (CROWD, SMALL):
        mail.ensure_project(key)
        for name in ("BlueLake", "GreenHill"):
            mail.register_agent(key, "claude-code", "opus", name=name)
            mail.set_contact_policy(key, name, "open")
    for name in EXTRA:
        mail.register_agent(CROWD, "codex", "gpt", name=name)
        mail.set_contact_policy(CROWD, name, "open")  # a broadcast reaches them all
    sent = [mail.send_message(CROWD, "BlueLake", ["GreenHill"], f"Crowd item {i}", f"Step {i}: run **deploy**.",
                              SendOptions(importance="urgent", ack_required=True))["deliveries"][0]["payload"]
            for i in range(MANY)]
    for message in sent[:2]:  # acknowledged by every recipient
        mail.acknowledge_message(CROWD, "GreenHill", message["id"])
    root = mail.send_message(CROWD, "GreenHill", ["BlueLake"], "A long thread", "It starts here.")
    thread = root["deliveries"][0]["payload"]
    for i in range(MANY):
        mail.reply_message(CROWD, thread["id"], "BlueLake" if i % 2 else "GreenHill", f"Turn {i}.")
    broadcast = mail.reply_message(CROWD, thread["id"], "BlueLake", "A note for all.", to=["GreenHill", *EXTRA])
    mail.file_reservation_paths(CROWD, "BlueLake", [f"src/module_{i:02d}.py" for i in range(MANY)],
                                ttl_seconds=1700, reason="refactor")  # within the dashboard's half hour
    for name in EXTRA:  # more than fifty holders of one file, and of one build slot
        mail.file_reservation_paths(CROWD, name, ["docs/**"], ttl_seconds=7200, exclusive=False, reason="review")
        mail.acquire_build_slot(CROWD, name, "ci", exclusive=False, max_holders=64, reason="tests")
    for i in range(MANY):
        mail.journal(CROWD, "BlueLake", f"Journal entry number {i}.")
    small = [mail.send_message(SMALL, "GreenHill", ["BlueLake"], f"Small note {i}", "Please **deploy** it.",
                               SendOptions(importance="high"))["deliveries"][0]["payload"]["id"] for i in range(3)]
    return {"slug": store.resolve(CROWD), "small": store.resolve(SMALL), "thread": thread["thread_id"],
            "acked": {m["id"] for m in sent[:2]}, "small_ids": set(small),
            "broadcast": broadcast["deliveries"][0]["payload"]["id"]}


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Iterator[tuple[ServerProcess, dict[str, object]]]:
    home = str(tmp_path_factory.mktemp("listshome"))
    seeded = crowd_seed(home)
    server = ServerProcess(home)
    yield server, seeded
    server.stop()


def mail_of(server: ServerProcess) -> Mail:
    return Mail(Store(server.home, background=False))


def row_key(row) -> str:  # noqa: ANN001 - a Playwright locator
    """What tells a row apart: its links and its text."""
    return row.evaluate("r => Array.from(r.querySelectorAll('a')).map(a => a.getAttribute('href')).join(' ') + '|' "
                        "+ r.textContent.replace(/\\s+/g, ' ')")


def walk(tab, url: str, items: str, pager: str) -> list[list[str]]:  # noqa: ANN001
    """Every page of one list, from ``url`` on through its pager's next link: each page's row keys."""
    tab.goto(url)
    pages = []
    while True:
        found = tab.locator(items)
        pages.append([row_key(found.nth(i)) for i in range(found.count())])
        following = tab.get_by_role("navigation", name=pager).locator("a[rel=next]")
        if following.count() == 0:
            return pages
        assert len(pages) < 20, "the pages never end"
        following.click()
        tab.wait_for_load_state()


LISTS = ("agents", "threads", "inbox", "outbox", "search", "owed", "urgent", "expiring", "reservations", "seats",
         "history", "journal", "journal tabs", "projects", "dashboards",
         "all mail", "recipients", "file holders", "slot holders", "files of a commit")


def lists(server: ServerProcess, seeded: dict[str, object]) -> dict[str, tuple[str, str, str, int, int]]:
    """Each list by name: (address, its rows, its pager's name, how many it holds now, how many a page shows)."""
    mail, slug = mail_of(server), str(seeded["slug"])
    p = f"/p/{slug}"
    green, blue = mail.agent_counts(slug, "GreenHill"), mail.agent_counts(slug, "BlueLake")
    every = sum(mail.project_stats(s)["messages"] for s in (slug, str(seeded["small"])))
    thread = mail.history(slug, mail.record_paths(slug, "thread", str(seeded["thread"])), limit=200)
    broadcast = str(seeded["broadcast"])
    commit = mail.history(slug, mail.record_paths(slug, "message", broadcast), limit=200)[-1]
    sent, files = commit["commit"][:12], commit["files"]

    def needing(which: str) -> int:
        return len(mail.attention_list(slug, which, limit=500).items)

    return dict(zip(LISTS, [
        (p, "table[data-live=agents] tbody tr", "Pages of agents", 2 + MANY, 25),
        (p, "table[data-live=threads] tbody tr", "Pages of threads", MANY + 1, 25),
        (f"{p}/agents/GreenHill", "table[data-live=messages] tbody tr", "Pages of this list", green["inbox"], 25),
        (f"{p}/agents/BlueLake?view=outbox", "table[data-live=messages] tbody tr", "Pages of this list",
         blue["sent"], 25),
        (f"{p}/search?q=deploy", "ol.hits > li", "Pages of hits", MANY, 25),
        (f"{p}/dashboard", "table[data-list=owed] tbody tr", f"Pages of acknowledgements owed in {CROWD}",
         needing("owed"), 20),
        (f"{p}/dashboard", "table[data-list=urgent] tbody tr", f"Pages of urgent unread mail in {CROWD}",
         needing("urgent"), 20),
        (f"{p}/dashboard", "table[data-list=expiring] tbody tr", f"Pages of reservations about to expire in {CROWD}",
         MANY, 20),
        (f"{p}/board", "table[data-live=reservations] tbody tr", "Pages of reservations", 2 * MANY, 25),
        (f"{p}/board", "table[data-live=seats] tbody tr", "Pages of seats", 2 + MANY, 25),
        (f"{p}/history?kind=thread&key={seeded['thread']}", "article.commit", "Pages of commits", len(thread), 25),
        (f"{p}/journals?agent=BlueLake", "div[data-live=journal] article", "Pages of the journal", MANY, 25),
        (f"{p}/journals?agent=BlueLake", "nav.tabs a", "Pages of agents", 2 + MANY, 25),
        ("/", "table[data-live=projects] tbody tr", "Pages of projects", len(mail.list_projects(include_archived=True)),
         25),
        ("/dashboard", "section.board", "Pages of projects", len(mail.list_projects()), 10),
        ("/mail", "table[data-live=mail] tbody tr", "Pages of mail", every, 25),
        (f"{p}/recipients/{broadcast}", "ul.deliveries > li", "Pages of recipients", 1 + MANY, 25),
        (f"{p}/board?path=docs/guide.md", "#holders li", "Pages of holders", MANY, 25),
        (f"{p}/slot/ci", "table[data-live=slot-holders] tbody tr", "Pages of holders", MANY, 25),
        (f"{p}/history?kind=message&key={broadcast}", f"#commit-{sent} details", f"Pages of files in commit {sent}",
         len(files), 25),
    ], strict=True))


@pytest.mark.parametrize("name", LISTS)
def test_a_list_longer_than_fifty_pages_through_all_of_it(site, page, name):
    server, seeded = site
    url, items, pager, total, per = lists(server, seeded)[name]
    assert total > 50
    pages = walk(page, base(server) + url, items, pager)
    every = [key for keys in pages for key in keys]
    assert (len(pages[0]), len(every), len(set(every))) == (per, total, total)


@pytest.mark.parametrize(**axe.WIDTHS)
def test_a_paged_list_has_no_serious_accessibility_violation_and_fits_a_phone(site, browser, viewport):
    server, seeded = site

    def second_page(url: str, pager: str) -> Callable[[Any], None]:
        def reach(tab: Any) -> None:
            tab.goto(base(server) + url)
            tab.get_by_role("navigation", name=pager).locator("a[rel=next]").click()  # a page with both links
            tab.wait_for_load_state()
        return reach

    def sideways(tab: Any) -> list[dict[str, Any]]:
        width = tab.evaluate("() => [document.documentElement.scrollWidth, window.innerWidth]")
        return [{"rule": "no sideways scroll", "widths": width}] if width[0] > width[1] else []

    pages = {name: second_page(url, pager) for name, (url, _, pager, _, _) in lists(server, seeded).items()}
    found = axe.audit(browser, viewport, pages, sideways)
    assert found == {}, json.dumps(found, indent=1)


def test_the_dashboard_across_projects_leads_to_the_next_page_of_a_list(site, page):
    server, seeded = site
    page.goto(base(server) + "/dashboard")
    owed = page.get_by_role("navigation", name=f"Pages of acknowledgements owed in {CROWD}")
    owed.locator("a[rel=next]").click()
    page.wait_for_url(re.compile(rf".*/p/{seeded['slug']}/dashboard\?owed=2$"))
    assert page.locator("table[data-list=owed] tbody tr").count() == 20
    assert page.get_by_role("navigation", name=f"Pages of acknowledgements owed in {CROWD}") \
        .locator("a[rel=prev]").count() == 1


def test_all_mail_pages_stay_put_while_mail_arrives(site, page):
    server, seeded = site
    page.goto(base(server) + "/mail")
    first = [row_key(r) for r in page.locator("table[data-live=mail] tbody tr").all()]
    mail_of(server).send_message(CROWD, "GreenHill", ["BlueLake"], "Arrived between two pages", "new")
    page.get_by_role("navigation", name="Pages of mail").locator("a[rel=next]").click()
    page.wait_for_load_state()
    second = [row_key(r) for r in page.locator("table[data-live=mail] tbody tr").all()]
    assert len(second) == 25 and not set(first) & set(second)
    assert all("Arrived between two pages" not in key for key in second)
    page.get_by_role("navigation", name="Pages of mail").get_by_role("link", name="Newest").click()
    page.locator("table[data-live=mail]").get_by_role("link", name="Arrived between two pages").wait_for()


def rows(tab) -> list[dict[str, str]]:  # noqa: ANN001
    """The all-mail table's rows: project, sender, recipients, subject, flags, and where the subject leads."""
    out = []
    for row in tab.locator("table[data-live=mail] tbody tr").all():
        cells = row.locator("td").all_inner_texts()
        if len(cells) == 6:
            out.append({"project": cells[0], "from": cells[2], "to": cells[3], "subject": cells[4].split("\n")[0],
                        "flags": cells[5], "href": row.locator("a.subject").get_attribute("href") or ""})
    return out


def submit(tab, **fields: str) -> None:  # noqa: ANN001
    """Fill the all-mail form (selects by value) and send it."""
    form = tab.locator("#mail-filters")
    for name, value in fields.items():
        field = form.locator(f"[name={name}]")
        if field.evaluate("e => e.tagName") == "SELECT":
            field.select_option(value)
        else:
            field.fill(value)
    form.get_by_role("button", name="Show").click()
    tab.wait_for_load_state()


def test_all_mail_filters_by_sender_recipient_importance_acknowledgements_and_dates(site, page):
    server, seeded = site
    page.goto(base(server) + "/mail")
    submit(page, **{"from": "greenhill", "importance": "high"})
    found = rows(page)
    assert {r["subject"] for r in found} == {f"Small note {i}" for i in range(3)}
    assert {r["project"] for r in found} == {SMALL} and all(r["href"].startswith(f"/ui/p/{seeded['small']}/thread/")
                                                           for r in found)
    page.goto(base(server) + "/mail")
    submit(page, ack="done")
    assert {r["href"].rsplit("#m-", 1)[1] for r in rows(page)} == seeded["acked"]
    assert all("acknowledged" in r["flags"] for r in rows(page))
    page.goto(base(server) + "/mail")
    submit(page, to="BlueLake", ack="owed")  # GreenHill's messages to BlueLake ask for none
    assert rows(page) == []
    today = dt.datetime.now(dt.UTC).date()
    page.goto(base(server) + f"/mail?from=GreenHill&importance=high&since={today}&until={today}")
    assert len(rows(page)) == 3
    page.goto(base(server) + f"/mail?from=GreenHill&importance=high&since={today + dt.timedelta(days=1)}")
    assert rows(page) == []


def test_all_mail_searches_every_project_with_the_filters_as_query_terms(site, page):
    server, seeded = site
    page.goto(base(server) + "/mail")
    submit(page, q="deploy", **{"from": "GreenHill"})
    assert page.locator("#searched code").inner_text() == "(deploy) from:GreenHill"
    found = rows(page)
    assert {r["subject"] for r in found} == {f"Small note {i}" for i in range(3)}
    assert {r["to"] for r in found} == {"BlueLake"}
    assert page.locator("table[data-live=mail] mark").all_inner_texts() == ["deploy"] * 3  # GreenHill unmarked
    submit(page, **{"from": ""})
    every = [key for keys in walk(page, page.url, "table[data-live=mail] tbody tr", "Pages of mail") for key in keys]
    assert len(every) == len(set(every)) == MANY + 3
    assert {CROWD, SMALL} <= {key.split("|")[1].split()[0] for key in every}
    page.goto(page.url.split("&page=")[0])
    page.locator("table[data-live=mail] a.subject").first.click()  # back to the message's own project page
    page.wait_for_url(re.compile(r".*/ui/p/.*/thread/.*#m-.*"))
    assert page.locator("article.message").count() >= 1


def test_a_filter_the_page_cannot_read_is_shown_beside_the_form(site, page):
    server, seeded = site
    answer = page.goto(base(server) + "/mail?since=2026-13-01&q=deploy")
    assert answer.status == 200
    assert "since must be a date" in page.locator("#mail-error").inner_text()
    assert page.locator("#mail-filters [name=q]").input_value() == "deploy"
    page.goto(base(server) + "/mail?q=%22open")
    assert "never closed" in page.locator("#mail-error").inner_text()
    assert page.get_by_role("link", name="All mail").get_attribute("aria-current") == "page"


def test_a_thread_and_the_board_show_the_first_of_a_long_list_and_lead_to_all_of_it(site, page):
    server, seeded = site
    p = f"/p/{seeded['slug']}"
    page.goto(base(server) + f"{p}/thread/{seeded['thread']}")
    message = page.locator(f"#m-{seeded['broadcast']}")
    assert message.locator("ul.deliveries > li").count() == 10
    message.get_by_role("link", name=f"and {1 + MANY - 10} more: every recipient").click()
    page.wait_for_url(re.compile(rf".*/recipients/{seeded['broadcast']}$"))
    assert page.locator("ul.deliveries > li").count() == 25
    page.goto(base(server) + f"{p}/board")
    slots = page.locator("table[data-live=build-slots]")
    assert slots.locator("tbody tr").count() == 6  # five holders and the way to the rest
    slots.get_by_role("link", name=f"and {MANY - 5} more: every holder of ci").click()
    page.wait_for_url(re.compile(r".*/slot/ci$"))
    assert page.locator("table[data-live=slot-holders] tbody tr").count() == 25


def test_an_unknown_slot_or_message_is_a_page_that_says_so(site, browser):
    server, seeded = site
    p = f"/p/{seeded['slug']}"
    context = browser.new_context()  # a 404 is logged in the console, which the checked tab refuses
    tab = context.new_page()
    try:
        answer = tab.goto(base(server) + f"{p}/slot/nope")
        assert answer.status == 404 and "no build slot 'nope'" in tab.locator("main").inner_text()
        assert tab.goto(base(server) + f"{p}/recipients/01m90dpxk77736ng7zz36q6").status == 404
    finally:
        context.close()
