"""The overseer's web view, in a real headless Chromium against a real ``gitmail serve``.

Every browser test fails on a JavaScript console error or an uncaught page
error. Set-up writes through the library into the server's store (another
process, as an agent on the same machine would), so live updates travel the
real path: ref change, watcher, server-sent event, page refresh.
"""

from __future__ import annotations

import os
import re
import shutil
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator

import pytest

from gitmail import Store
from gitmail.mail.facade import Mail, SendOptions

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
                                  options=SendOptions(importance="high", ack_required=True))["deliveries"][0]["payload"]
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


HOSTILE = "<img src=x onerror=window.__owned=1>"
SHORT = "<svg onload=window.__owned=1>"  # within the 32 characters an importance may have
BODY = "\n\n".join([
    "<script>window.__owned = 1</script>", HOSTILE, "<svg><script>window.__owned=1</script></svg>",
    "[link](javascript:window.__owned=1)", "[entity](&#106;avascript:window.__owned=1)",
    "<a href=\"javascript:window.__owned=1\">raw</a>",
    "[page](data:text/html,<script>window.__owned=1</script>)", "<javascript:window.__owned=1>",
    "<iframe srcdoc=\"<script>parent.__owned=1</script>\"></iframe>", "<details open ontoggle=window.__owned=1>x",
    "<form action=\"javascript:window.__owned=1\"><button>go</button></form>", "<style>body{display:none}</style>",
    "<meta http-equiv=\"refresh\" content=\"0;url=javascript:window.__owned=1\">", "<base href=\"javascript:/\">",
    "`<script>window.__owned=1</script>`", "<object data=\"javascript:window.__owned=1\"></object>",
])
DOM_PROBLEMS = """() => {
  const found = [];
  if (window.__owned) { found.push('a payload ran'); }
  for (const el of document.querySelectorAll('*')) {
    for (const attr of el.attributes) {
      const value = attr.value.trim().toLowerCase();
      if (attr.name.startsWith('on')) { found.push(el.tagName + ' has ' + attr.name); }
      if (['href', 'src', 'action', 'formaction', 'data', 'srcdoc'].includes(attr.name)
          && (value.startsWith('javascript:') || value.startsWith('data:text') || attr.name === 'srcdoc')) {
        found.push(el.tagName + ' ' + attr.name + '=' + value.slice(0, 40));
      }
    }
  }
  for (const el of document.querySelectorAll('script')) {
    if (el.getAttribute('src') !== '/ui/static/app.js') { found.push('script: ' + el.outerHTML.slice(0, 60)); }
  }
  for (const tag of ['iframe', 'object', 'embed', 'base', 'meta[http-equiv]', 'main style', 'main form[action^=j]']) {
    if (document.querySelector(tag)) { found.push('a ' + tag + ' element'); }
  }
  return found;
}"""


def hostile_seed(home: str, files: str) -> dict[str, str]:
    """A project whose every field a page shows holds markup or script, as agents could write it."""
    key = f"/work/{HOSTILE}"
    mail = Mail(Store(home, background=False))
    mail.ensure_project(key)
    mail.register_agent(key, HOSTILE, HOSTILE, name="BlueLake", task_description=HOSTILE)
    mail.register_agent(key, "p", "m", name="GreenHill", task_description=BODY)
    for name in ("BlueLake", "GreenHill"):
        mail.set_contact_policy(key, name, "open")
    with open(os.path.join(files, f"{HOSTILE}.txt"), "w") as handle:
        handle.write(BODY)
    sent = mail.send_message(key, "BlueLake", ["GreenHill"], HOSTILE, BODY,
                             options=SendOptions(importance=SHORT, ack_required=True, topic="x",
                                                 attachment_paths=[os.path.join(files, f"{HOSTILE}.txt")]))
    first = sent["deliveries"][0]["payload"]
    mail.reply_message(key, first["id"], "GreenHill", BODY)
    reservation = mail.file_reservation_paths(key, "BlueLake", [f"src/{HOSTILE}"], reason=BODY)["granted"][0]
    mail.acquire_build_slot(key, "GreenHill", "test-db", reason=HOSTILE)
    mail.journal(key, "BlueLake", BODY)
    mail.request_contact(key, "GreenHill", "BlueLake", reason=HOSTILE)
    return {"slug": Store(home, background=False).resolve(key), "thread": first["thread_id"], "message": first["id"],
            "reservation": reservation["id"]}


def test_no_script_runs_on_any_page_whatever_the_agents_wrote(tmp_path, browser, monkeypatch):
    home, files = str(tmp_path / "home"), tmp_path / "files"
    files.mkdir()
    monkeypatch.setenv("GITMAIL_ATTACHMENT_ROOTS", str(files))
    seeded = hostile_seed(home, str(files))
    server = ServerProcess(home, env={"GITMAIL_ATTACHMENT_ROOTS": str(files)})
    context = browser.new_context()
    tab = context.new_page()
    problems: list[str] = []
    tab.on("console", lambda msg: problems.append(f"console {msg.type}: {msg.text}") if msg.type == "error" else None)
    tab.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))
    tab.on("dialog", lambda dialog: (problems.append(f"dialog: {dialog.message}"), dialog.dismiss()))
    root, slug = base(server), seeded["slug"]
    quoted = urllib.parse.quote(HOSTILE)
    pages = [
        "/", f"/p/{slug}", f"/p/{slug}/thread/{seeded['thread']}", f"/p/{slug}/search?q={quoted}",
        f"/p/{slug}/search?q=owned", f"/p/{slug}/board?all=1", f"/p/{slug}/journals?agent=BlueLake",
        f"/p/{slug}/journals?agent={quoted}", f"/p/{slug}/compose", f"/p/{slug}/history?kind={quoted}&key={quoted}",
        f"/p/{slug}/history?kind=agent&key={quoted}", f"/p/{slug}/history?kind=thread&key={seeded['thread']}",
        f"/p/{slug}/history?kind=reservation&key={seeded['reservation']}", f"/p/{quoted}",
        f"/p/{slug}/agents/{quoted}", f"/p/{slug}/thread/{quoted}", f"/login?next={quoted}",
        f"/p/{slug}/m/{seeded['message']}", "/static/../" + quoted,
        *[f"/p/{slug}/agents/{name}?view={view}" for name in ("BlueLake", "GreenHill")
          for view in ("inbox", "outbox", "unread", "urgent", "ack", "overdue", quoted)],
    ]
    visited = {}
    try:
        for path in pages:
            tab.goto(root + path)
            visited[path] = tab.evaluate(DOM_PROBLEMS)
        # What a person types comes back in the form after a refused send.
        tab.goto(f"{root}/p/{slug}/compose")
        tab.fill("input[name=to]", HOSTILE)
        tab.fill("input[name=subject]", HOSTILE)
        tab.fill("textarea[name=body]", BODY)
        tab.get_by_role("button", name="Send").click()
        tab.locator("p.error").wait_for()
        visited["compose, refused"] = tab.evaluate(DOM_PROBLEMS)
        assert HOSTILE in tab.locator("input[name=subject]").input_value()
        # The thread shows the body's text, escaped, with the harmless Markdown still rendered.
        tab.goto(f"{root}/p/{slug}/thread/{seeded['thread']}")
        body = tab.locator("article.message .body").first.inner_text()
        assert "<script>window.__owned = 1</script>" in body and tab.locator("article.message").count() == 2
    finally:
        context.close()
        server.stop()
    assert {path: found for path, found in visited.items() if found} == {}
    assert len(visited) >= 19
    # Error pages (an unknown project, agent or history kind) answer 400 or 404, which Chromium logs as such.
    expected = re.compile(r"console error: Failed to load resource: the server responded with a status of 40[04]")
    assert [p for p in problems if not expected.match(p)] == [], problems
