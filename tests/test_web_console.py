"""The overseer's console in a real headless Chromium: what a person running a team needs from the web view.

Each test drives a real ``gitmail serve`` (set up through the library from
this process, as an agent on the same machine would write) at laptop width
or at a phone's 390 px. The ``page`` fixture of :mod:`tests.test_web` fails a
test on any console error or uncaught page error.
"""

from __future__ import annotations

import json
import os
import re
import urllib.parse
from collections.abc import Iterator
from typing import Any

import pytest

from gitmail import Store
from gitmail.mail.facade import Mail, SendOptions

from . import axe, test_web
from .mcp_harness import ServerProcess
from .test_web import base

browser, page = test_web.browser, test_web.page  # the fixtures of test_web: one Chromium, a checked tab

pytestmark = pytest.mark.slow

PROJECT = "/work/console/project"
OTHER = "/work/console/other"
LONG_WORD = "sha256-" + "0123456789abcdef" * 8
TABLE = "| " + " | ".join(f"column {i} with words" for i in range(12)) + " |\n|" + "---|" * 12 + "\n| " + \
    " | ".join(f"value {i}" for i in range(12)) + " |"


def console_seed(home: str, files: str) -> dict[str, str]:
    """Two projects, agents who owe acknowledgements, urgent mail, a wide table, a long hash, a file, a slot."""
    store = Store(home, background=False)
    mail = Mail(store)
    for key in (PROJECT, OTHER):
        mail.ensure_project(key)
    for name in ("BlueLake", "GreenHill", "RedStone"):
        mail.register_agent(PROJECT, "claude-code", "opus", name=name)
        mail.set_contact_policy(PROJECT, name, "open")
    mail.register_agent(OTHER, "codex", "gpt", name="PinkCastle")
    attached = os.path.join(files, f"build-log-{LONG_WORD}.txt")
    with open(attached, "w") as handle:
        handle.write("a log\n")
    from PIL import Image

    Image.new("RGB", (40, 20), (200, 30, 30)).save(os.path.join(files, "diagram.png"))
    first = mail.send_message(
        PROJECT, "BlueLake", ["GreenHill"], "Schema migration plan",
        f"Three **steps**, in this table:\n\n{TABLE}\n\nThe artefact: {LONG_WORD}\n\n```\n{LONG_WORD * 2}\n```"
        f"\n\n- [ ] write the test\n- [x] plan it\n\n![diagram]({files}/diagram.png)",
        SendOptions(importance="high", ack_required=True, cc=["RedStone"], attachment_paths=[attached]),
    )["deliveries"][0]["payload"]
    mail.reply_message(PROJECT, first["id"], "GreenHill", "I take the **backfill**.")
    mail.send_message(PROJECT, "RedStone", ["BlueLake"], "Disk almost full", "The build host is at 97%.",
                      SendOptions(importance="urgent"))
    mail.file_reservation_paths(PROJECT, "BlueLake", ["src/db/**"], reason="migration", ttl_seconds=600)
    mail.acquire_build_slot(PROJECT, "GreenHill", "test-db", exclusive=False, max_holders=2, reason="backfill run")
    mail.journal(PROJECT, "BlueLake", f"Planned the migration.\n\n{TABLE}")
    mail.send_message(OTHER, "PinkCastle", ["PinkCastle"], "Note to self", "hello")
    logs = mail.upload_file(PROJECT, "BlueLake", b"disk usage: 97%\n", name="df.txt").file
    mail.send_message(PROJECT, "BlueLake", ["GreenHill"], "Usage log", "Attached.",
                      SendOptions(attachment_ids=[logs.file_id]))
    mail.write_memory(PROJECT, "BlueLake", folder="ops", file="AGENTS.md", text="# Ops\nPage the lead first.\n")
    mail.write_memory(PROJECT, "BlueLake", folder="ops", file="skills/rollback/SKILL.md", text="# Roll back\n")
    return {"slug": store.resolve(PROJECT), "other": store.resolve(OTHER), "thread": first["thread_id"],
            "message": first["id"]}


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Iterator[tuple[ServerProcess, dict[str, str]]]:
    home = str(tmp_path_factory.mktemp("consolehome"))
    files = str(tmp_path_factory.mktemp("consolefiles"))
    os.environ["GITMAIL_ATTACHMENT_ROOTS"] = files  # the seed's sender may attach files from there
    try:
        seeded = console_seed(home, files)
    finally:
        del os.environ["GITMAIL_ATTACHMENT_ROOTS"]
    server = ServerProcess(home, env={"GIT_AUTHOR_NAME": "Dana Operator", "GIT_AUTHOR_EMAIL": "dana@example.org",
                                      "GITMAIL_ATTACHMENT_ROOTS": files})
    yield server, seeded
    server.stop()


def mail_of(server: ServerProcess) -> Mail:
    return Mail(Store(server.home, background=False))


def every_page(seeded: dict[str, str]) -> list[str]:
    """A path of each kind of page the view serves, for the checks that hold on all of them."""
    p = f"/p/{seeded['slug']}"
    return ["/", p, f"{p}?page=1", f"{p}/agents/GreenHill", f"{p}/agents/GreenHill?view=ack",
            f"{p}/agents/BlueLake?view=outbox", f"{p}/agents/Overseer", f"{p}/thread/{seeded['thread']}",
            f"{p}/search?q=migration", f"{p}/search?q=%22unclosed", f"{p}/board", f"{p}/board?all=1",
            f"{p}/journals?agent=BlueLake", f"{p}/history?kind=thread&key={seeded['thread']}",
            f"{p}/history?kind=message&key={seeded['message']}", f"{p}/compose", f"/p/{seeded['other']}", "/mail",
            "/mail?q=migration&importance=high", "/mail?since=bad", f"{p}/files", f"{p}/memory"]


# -- the six broken items -------------------------------------------------------------------------------

def test_a_live_update_keeps_an_open_reply_draft(site, page):
    server, seeded = site
    page.goto(f"{base(server)}/p/{seeded['slug']}/thread/{seeded['thread']}")
    page.locator("body[data-live=on]").wait_for(state="attached")
    reply = page.locator(f"#m-{seeded['message']} details.reply")
    reply.locator("summary").click()
    box = reply.locator("textarea[name=body]")
    box.fill("Half-written answer that must survive")
    mail_of(server).reply_message(PROJECT, seeded["message"], "RedStone", "A reply arriving while you type")
    page.locator("[data-live=thread]").get_by_text("A reply arriving while you type").wait_for()
    reply = page.locator(f"#m-{seeded['message']} details.reply")
    assert reply.get_attribute("open") is not None
    assert reply.locator("textarea[name=body]").input_value() == "Half-written answer that must survive"
    page.reload()  # and a reload keeps it too
    assert page.locator(f"#m-{seeded['message']} details.reply textarea[name=body]").input_value() == \
        "Half-written answer that must survive"


def test_the_overseers_inbox_link_works_before_the_first_message(site, page):
    server, seeded = site
    page.goto(f"{base(server)}/p/{seeded['other']}/compose")
    with page.expect_response(re.compile(r".*/agents/Overseer$")) as answer:
        page.get_by_role("link", name="Overseer's inbox").click()
    assert answer.value.status == 200
    assert page.locator("h1").inner_text().startswith("Overseer")
    assert "Nothing here." in page.locator("table[data-live=messages]").inner_text()


def test_a_search_syntax_error_keeps_the_page_and_the_query(site, page):
    server, seeded = site
    page.goto(f"{base(server)}/p/{seeded['slug']}/search")
    page.fill("input[name=q]", '"unclosed phrase')
    with page.expect_response(re.compile(r".*/search\?q=.*")) as answer:
        page.press("input[name=q]", "Enter")
    assert answer.value.status == 200
    assert "closing" in page.locator("#query-error").inner_text()
    assert page.locator("input[name=q]").input_value() == '"unclosed phrase'
    assert page.get_by_role("link", name="Reservations & seats").count() == 1  # the navigation is still there


def test_search_snippets_show_no_markers(site, page):
    server, seeded = site
    page.goto(f"{base(server)}/p/{seeded['slug']}/search?q=host")
    snippet = page.locator("ol.hits p.snippet").first
    snippet.wait_for()
    assert snippet.inner_text() == "The build host is at 97%."
    assert snippet.locator("mark").all_inner_texts() == ["host"]
    page.goto(f"{base(server)}/p/{seeded['slug']}/search?q=take")  # the body's own emphasis: no markers either
    assert page.locator("ol.hits p.snippet").first.inner_text() == "I take the backfill."
    assert page.locator("ol.hits p.snippet").first.locator("mark").all_inner_texts() == ["take"]  # not backfill


def test_search_finds_a_word_inside_markdown_emphasis(site, page):
    server, seeded = site
    page.goto(f"{base(server)}/p/{seeded['slug']}/search?q=backfill")  # "I take the **backfill**."
    hit = page.locator("ol.hits li").first
    hit.wait_for()
    assert hit.locator("p.snippet").inner_text() == "I take the backfill."
    assert hit.locator("p.snippet mark").all_inner_texts() == ["backfill"]
    page.goto(f"{base(server)}/mail?q=steps")  # "Three **steps**", found from every project's search too
    assert page.locator("table[data-live=mail] a.subject").all_inner_texts() == ["Schema migration plan"]


def test_the_header_has_one_link_per_place(site, browser):
    server, seeded = site
    context = browser.new_context()
    tab = context.new_page()
    twice = {}
    try:
        for path in [*every_page(seeded), f"/p/{seeded['slug']}/dashboard", "/dashboard"]:
            tab.goto(base(server) + path)
            names = tab.locator("body > header a").all_inner_texts()
            if len(names) != len(set(names)) or names.count("Needs you") != 1:
                twice[path] = names
    finally:
        context.close()
    assert twice == {}


def test_no_page_scrolls_sideways_at_phone_width(site, browser):
    server, seeded = site
    context = browser.new_context(viewport=axe.PHONE)
    tab = context.new_page()
    wide = {}
    try:
        for path in every_page(seeded):
            tab.goto(base(server) + path)
            width = tab.evaluate("() => [document.documentElement.scrollWidth, window.innerWidth]")
            if width[0] > width[1]:
                wide[path] = width
    finally:
        context.close()
    assert wide == {}


def test_an_unknown_message_is_a_not_found_page_and_a_malformed_id_a_400(site, browser):
    server, seeded = site
    known = seeded["message"]
    unknown = known[:-4] + ("zzzz" if not known.endswith("zzzz") else "yyyy")
    context = browser.new_context()
    tab = context.new_page()
    try:
        answer = tab.goto(f"{base(server)}/p/{seeded['slug']}/m/{unknown}")
        assert answer.status == 404
        assert tab.locator("h1").inner_text() == "Not found"
        assert "INVALID_ARGUMENT" not in tab.content()
        answer = tab.goto(f"{base(server)}/p/{seeded['slug']}/m/{urllib.parse.quote('not-an-id')}")
        assert answer.status == 400
        assert tab.locator("h1").inner_text() != "Not found"
    finally:
        context.close()


# -- accessibility ---------------------------------------------------------------------------------------

@pytest.mark.parametrize(**axe.WIDTHS)
def test_every_page_has_no_serious_accessibility_violation(site, browser, viewport):
    server, seeded = site

    def outline(tab: Any) -> list[dict[str, Any]]:
        headings = tab.evaluate("() => Array.from(document.querySelectorAll('h1,h2,h3,h4,h5,h6'))"
                                ".map(h => Number(h.tagName[1]))")
        problems: list[dict[str, Any]] = []
        if headings.count(1) != 1:
            problems.append({"rule": "one h1", "found": headings.count(1)})
        if [b for a, b in zip(headings, headings[1:], strict=False) if b > a + 1]:
            problems.append({"rule": "no skipped heading level", "levels": headings})
        return problems

    paths = [*every_page(seeded), f"/p/{seeded['slug']}/dashboard", "/dashboard",
             f"/p/{seeded['slug']}/board?path=src/db/x.py"]
    pages = {path: (lambda tab, path=path: tab.goto(base(server) + path)) for path in paths}
    found = axe.audit(browser, viewport, pages, outline)
    assert found == {}, json.dumps(found, indent=1)


def test_tabs_say_which_is_current_and_a_skip_link_leads_to_the_content(site, page):
    server, seeded = site
    page.goto(f"{base(server)}/p/{seeded['slug']}/agents/GreenHill?view=ack")
    assert page.locator("nav.tabs [aria-current=page]").all_inner_texts() == [page.locator("#tab-ack").inner_text()]
    page.goto(f"{base(server)}/p/{seeded['slug']}/journals?agent=BlueLake")
    assert page.locator("nav.tabs [aria-current=page]").all_inner_texts() == ["BlueLake"]
    page.goto(f"{base(server)}/p/{seeded['slug']}/board")
    assert page.locator("header nav [aria-current=page]").all_inner_texts() == ["Reservations & seats"]
    page.keyboard.press("Tab")
    assert page.evaluate("() => document.activeElement.textContent") == "Skip to the content"
    page.keyboard.press("Enter")
    assert page.evaluate("() => document.activeElement.id") == "main"


# -- reading comfort -------------------------------------------------------------------------------------

def test_a_message_reads_comfortably(site, page):
    server, seeded = site
    page.goto(f"{base(server)}/p/{seeded['slug']}/thread/{seeded['thread']}")
    first = page.locator(f"#m-{seeded['message']}")
    cell = first.locator(".body td").first
    assert cell.evaluate("td => getComputedStyle(td).borderTopStyle") == "solid"
    assert float(cell.evaluate("td => parseFloat(getComputedStyle(td).paddingLeft)")) > 0
    boxes = first.locator("li.task .box")
    assert [boxes.nth(i).get_attribute("aria-label") for i in range(boxes.count())] == ["not done", "done"]
    assert "[ ]" not in first.locator(".body").first.inner_text()
    assert first.locator("img").count() == 1  # the diagram, once, though it is also an attachment
    names = first.locator("ul.attachments li").all_inner_texts()
    assert any(n.startswith(f"build-log-{LONG_WORD}.txt") and "6 bytes" in n for n in names), names
    when = first.locator("time.when")
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT.*Z", when.get_attribute("title")) and "ago" in when.inner_text() or \
        when.inner_text() == "just now"


def test_the_dark_theme_follows_the_system(site, browser):
    server, seeded = site
    colours = {}
    for scheme in ("light", "dark"):
        context = browser.new_context(color_scheme=scheme)
        tab = context.new_page()
        tab.goto(f"{base(server)}/p/{seeded['slug']}")
        colours[scheme] = tab.evaluate("() => getComputedStyle(document.body).backgroundColor")
        context.close()
    assert colours["light"] == "rgb(251, 251, 253)" and colours["dark"] == "rgb(20, 23, 28)"


def test_keyboard_shortcuts_move_reply_search_and_are_listed(site, page):
    server, seeded = site
    page.goto(f"{base(server)}/p/{seeded['slug']}/thread/{seeded['thread']}")
    page.keyboard.press("?")
    assert page.locator("dialog#help").is_visible()
    assert "next / previous message" in page.locator("dialog#help").inner_text()
    page.get_by_role("button", name="Close").click()
    page.keyboard.press("j")
    page.keyboard.press("j")
    page.keyboard.press("k")
    assert page.locator("article.message.current").get_attribute("id") == f"m-{seeded['message']}"
    page.keyboard.press("r")
    assert page.evaluate("() => document.activeElement.name") == "body"
    assert page.locator(f"#m-{seeded['message']} details.reply").get_attribute("open") is not None
    page.locator("h1").click()  # out of the text box: shortcuts apply again
    page.keyboard.press("/")
    page.wait_for_url(re.compile(r".*/search$"))
    # The box takes the focus by autofocus, which the browser applies after the page has loaded: wait for it.
    page.wait_for_function("() => document.activeElement && document.activeElement.name === 'q'")
    page.keyboard.press("g")
    page.keyboard.press("d")  # the search box has the focus: g d is typed, not followed
    assert page.locator("input[name=q]").input_value() == "gd"
