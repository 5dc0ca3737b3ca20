"""The overseer's web view, in a real headless Chromium against a real ``gitmail serve``.

Every browser test fails on a JavaScript console error or an uncaught page
error. Set-up writes through the library into the server's store (another
process, as an agent on the same machine would), so live updates travel the
real path: ref change, watcher, server-sent event, page refresh.
"""

from __future__ import annotations

import re
import shutil
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator

import pytest

from gitmail import Store
from gitmail.mail.facade import Mail

from .mcp_harness import ServerProcess

pytestmark = pytest.mark.slow

PROJECT = "/work/web/project"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--no-first-run", "--disable-quic", "--disable-dev-shm-usage"]


def seed(home: str) -> dict[str, str]:
    store = Store(home, background=False)
    mail = Mail(store)
    mail.ensure_project(PROJECT)
    for name in ("BlueLake", "GreenHill"):
        mail.register_agent(PROJECT, "claude-code", "opus", name=name)
        mail.set_contact_policy(PROJECT, name, "open")
    first = mail.send_message(PROJECT, "BlueLake", ["GreenHill"], "Schema migration plan",
                              "Three **steps**.\n\n<script>alert('x')</script>\n\n[bad](javascript:alert(1))",
                              importance="high", ack_required=True)["deliveries"][0]["payload"]
    mail.reply_message(PROJECT, first["id"], "GreenHill", "I take the backfill.")
    mail.file_reservation_paths(PROJECT, "BlueLake", ["src/db/**"], reason="migration")
    mail.journal(PROJECT, "BlueLake", "Planned the migration.")
    mail.acquire_build_slot(PROJECT, "GreenHill", "test-db", exclusive=False, max_holders=2, reason="backfill run")
    return {"thread": first["thread_id"], "slug": store.resolve(PROJECT)}


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Iterator[tuple[ServerProcess, dict[str, str]]]:
    home = str(tmp_path_factory.mktemp("webhome"))
    seeded = seed(home)
    server = ServerProcess(home, env={"GIT_AUTHOR_NAME": "Dana Operator", "GIT_AUTHOR_EMAIL": "dana@example.org"})
    yield server, seeded
    server.stop()


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as driver:
        launched = driver.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@pytest.fixture
def page(browser):
    context = browser.new_context()
    tab = context.new_page()
    problems: list[str] = []
    tab.on("console", lambda msg: problems.append(f"console {msg.type}: {msg.text}") if msg.type == "error" else None)
    tab.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))
    yield tab
    context.close()
    assert problems == [], problems


def base(server: ServerProcess) -> str:
    return f"http://127.0.0.1:{server.port}/ui"


def test_click_through_project_agent_inbox_thread_history(site, page):
    server, seeded = site
    page.goto(base(server) + "/")
    page.get_by_role("link", name=PROJECT).click()
    page.locator("table[data-live=agents]").get_by_role("link", name="GreenHill").click()
    assert page.locator("h1").inner_text().startswith("GreenHill")
    page.locator("#tab-ack").click()
    page.get_by_role("link", name="Schema migration plan").click()
    body = page.locator("article.message .body").first
    assert body.locator("strong").inner_text() == "steps"
    assert "<script>" in body.inner_text()  # shown as text, never run
    assert body.locator("a[href^=javascript]").count() == 0
    page.locator("#thread-history").click()
    assert "git --git-dir" in page.locator("#git-command").inner_text()
    assert page.locator("article.commit").count() == 2
    assert page.locator("article.commit header b").first.inner_text() == "GreenHill"


def test_the_board_shows_build_slots_with_their_holders(site, page):
    server, seeded = site
    page.goto(base(server) + f"/p/{seeded['slug']}/board")
    row = page.locator("table[data-live=build-slots] tbody tr").first
    text = row.inner_text()
    assert "test-db" in text and "shared, at most 2" in text and "GreenHill" in text and "backfill run" in text


def test_search_highlights_and_pages(site, page):
    server, seeded = site
    page.goto(f"{base(server)}/p/{seeded['slug']}/search")
    page.fill("input[name=q]", "migration")
    page.press("input[name=q]", "Enter")
    marks = page.locator("ol.hits mark")
    marks.first.wait_for()
    assert marks.first.inner_text().lower() == "migration"


def test_compose_as_overseer_reaches_the_agent(site, page):
    server, seeded = site
    page.goto(f"{base(server)}/p/{seeded['slug']}/compose")
    page.fill("input[name=to]", "GreenHill")
    page.fill("input[name=subject]", "Hold the deploy")
    page.fill("textarea[name=body]", "Wait for the *backfill*.")
    page.select_option("select[name=importance]", "urgent")
    page.check("input[name=ack_required]")
    page.get_by_role("button", name="Send").click()
    page.wait_for_url(re.compile(r".*/thread/.*"))
    assert page.locator("article.message.human .tag.human").count() == 1
    store = Store(server.home, background=False)
    inbox = Mail(store).fetch_inbox(PROJECT, "GreenHill")
    assert (inbox[0]["from"], inbox[0]["importance"], inbox[0]["ack_required"]) == ("Overseer", "urgent", True)


def test_a_message_sent_by_an_agent_appears_live(site, page):
    server, seeded = site
    page.goto(f"{base(server)}/p/{seeded['slug']}/agents/GreenHill")
    # A selector, not wait_for_function: its predicate is compiled in the page, which the
    # view's Content-Security-Policy (no 'unsafe-eval') refuses whenever it has to poll.
    page.locator("body[data-live=on]").wait_for(state="attached")
    mail = Mail(Store(server.home, background=False))
    mail.send_message(PROJECT, "BlueLake", ["GreenHill"], "Arrived while you watched", "hello")
    page.locator("table[data-live=messages]").get_by_role("link", name="Arrived while you watched").wait_for()


def _get(url: str, cookie: str | None = None) -> tuple[int, str, dict[str, str]]:
    request = urllib.request.Request(url, headers={"Cookie": cookie} if cookie else {})
    opener = urllib.request.build_opener(_NoRedirect)
    try:
        with opener.open(request, timeout=30) as response:
            return response.status, response.read().decode(), dict(response.headers)
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, exc.read().decode(), dict(exc.headers)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):  # noqa: ANN002, ANN003 - urllib's signature
        return None


def test_a_form_without_its_csrf_token_is_refused(site):
    server, seeded = site
    status, _, headers = _get(base(server) + "/")
    assert status == 200
    cookie = headers["set-cookie"].split(";", 1)[0]
    assert "HttpOnly" in headers["set-cookie"] and "SameSite=strict" in headers["set-cookie"]
    data = urllib.parse.urlencode({"to": "GreenHill", "subject": "forged", "body": "x"}).encode()
    request = urllib.request.Request(f"{base(server)}/p/{seeded['slug']}/compose", data=data,
                                     headers={"Cookie": cookie})
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(request, timeout=30)
    assert caught.value.code == 403
    caught.value.close()
    assert not any(m["subject"] == "forged" for m in Mail(Store(server.home, background=False))
                   .fetch_inbox(PROJECT, "GreenHill", limit=50))


def test_with_a_token_the_view_asks_for_it_once(tmp_path, browser):
    home = str(tmp_path / "home")
    seed(home)
    server = ServerProcess(home, token="s3cret-token-for-the-ui")
    try:
        status, _, headers = _get(base(server) + "/")
        assert status == 303 and headers["location"].startswith("/ui/login")
        context = browser.new_context()
        tab = context.new_page()
        tab.goto(base(server) + "/")
        tab.fill("input[name=token]", "wrong")
        tab.get_by_role("button", name="Sign in").click()
        assert "not the server's token" in tab.content()
        tab.fill("input[name=token]", "s3cret-token-for-the-ui")
        tab.get_by_role("button", name="Sign in").click()
        tab.get_by_role("link", name=PROJECT).wait_for()
        assert "registration_token" not in tab.content()
        context.close()
    finally:
        server.stop()
