"""The web view's guards over raw HTTP: bad query parameters, session expiry, sign-out, the sign-in limit,
CSRF on every form, cookie flags, redirects and path traversal.

The server is gitmail serve's own application under uvicorn in this process
(:class:`tests.inprocess_server.InProcessServer`), over a store on the test's
hand-moved clock, so a session's hour passes with ``wall.advance``.
"""

from __future__ import annotations

import http.client
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx2 as httpx
import pytest

from gitmail import Mail
from gitmail.web.access import IDLE_SECONDS, LIFETIME_SECONDS, LOGIN_FAILURES, LOGIN_WINDOW_SECONDS

from .conftest import tip
from .inprocess_server import InProcessServer

PROJECT = "/work/web-guards/project"
TOKEN = "the-operators-token-for-the-view"


def seeded(store) -> dict[str, str]:
    mail = Mail(store)
    mail.ensure_project(PROJECT)
    for name in ("BlueLake", "GreenHill"):
        mail.register_agent(PROJECT, "p", "m", name=name)
        mail.set_contact_policy(PROJECT, name, "open")
    sent = mail.send_message(PROJECT, "BlueLake", ["GreenHill"], "Plan", "the plan")["deliveries"][0]["payload"]
    return {"slug": store.resolve(PROJECT), "message": sent["id"], "thread": sent["thread_id"]}


@pytest.fixture
def site(store) -> Iterator[tuple[InProcessServer, dict[str, str]]]:
    seed = seeded(store)
    with InProcessServer(store, token=TOKEN) as server:
        yield server, seed


@pytest.fixture
def open_site(store) -> Iterator[tuple[InProcessServer, dict[str, str]]]:
    seed = seeded(store)
    with InProcessServer(store) as server:
        yield server, seed


def browser(server: InProcessServer, **options: Any) -> httpx.Client:
    """A client that keeps cookies and does not follow redirects, as one browser tab."""
    return httpx.Client(base_url=server.base, timeout=60, follow_redirects=False, **options)


@contextmanager
def signed_in(server: InProcessServer, **options: Any) -> Iterator[httpx.Client]:
    """A tab that has signed in with the server's token."""
    with browser(server, **options) as tab:
        answer = tab.post("/ui/login", data={"token": TOKEN})
        assert answer.status_code == 303, answer.text
        yield tab


def csrf_of(page: str) -> str:
    return re.search(r'name="csrf" value="([^"]+)"', page).group(1)


# -- finding: malformed query parameters, sessions, sign-out, the sign-in limit ---------------------------

def test_a_malformed_query_parameter_is_a_400_page_never_a_server_error(open_site):
    server, seed = open_site
    slug = seed["slug"]
    with browser(server) as tab:
        for query in ("page=abc", "page=0", "page=-1", "page=1.5", "page=1e3", "page=99999999999999999999",
                      "page=%00", "page=%E2%91%A0"):
            for path in (f"/ui/p/{slug}?", f"/ui/p/{slug}/search?q=plan&"):
                url = path + query
                answer = tab.get(url)
                assert answer.status_code == 400, (url, answer.status_code)
                assert "INVALID_ARGUMENT" in answer.text and "page must be a whole number from 1 to" in answer.text
        for url in (f"/ui/p/{slug}/search?q=%22unterminated", f"/ui/p/{slug}/search?q=created:banana",
                    f"/ui/p/{slug}/search?q=(((", f"/ui/p/{slug}/search?q=from:", f"/ui/p/{slug}/history?kind=x",
                    f"/ui/p/{slug}/history?kind=message&key=nope", f"/ui/p/{slug}/journals?agent=Nobody",
                    f"/ui/p/{slug}/agents/BlueLake?view=%3Cscript%3E", f"/ui/p/{slug}/board?all=%FF",
                    f"/ui/p/{slug}/thread/nope", f"/ui/p/{slug}/m/nope", "/ui/p/nope",
                    f"/ui/p/{slug}/file/nope", "/ui/login?next=%00"):
            answer = tab.get(url)
            assert answer.status_code in (200, 400, 404), (url, answer.status_code, answer.text[:300])
        assert tab.get(f"/ui/p/{slug}?page=2").status_code == 200


def test_a_session_ends_after_an_idle_hour_and_after_its_lifetime(site, wall):
    server, seed = site
    page = f"/ui/p/{seed['slug']}"
    with signed_in(server) as tab:
        wall.advance(seconds=IDLE_SECONDS - 1)
        assert tab.get(page).status_code == 200  # each request keeps it alive...
        wall.advance(seconds=IDLE_SECONDS - 1)
        assert tab.get(page).status_code == 200
        wall.advance(seconds=IDLE_SECONDS)  # ...until an hour passes without one
        gone = tab.get(page)
        assert gone.status_code == 303 and gone.headers["location"].startswith("/ui/login")
    with signed_in(server) as tab:
        opened = wall()
        while wall() + IDLE_SECONDS // 2 < opened + LIFETIME_SECONDS:
            wall.advance(seconds=IDLE_SECONDS // 2)
            assert tab.get(page).status_code == 200
        wall.advance(seconds=opened + LIFETIME_SECONDS - wall())  # busy all along, but the lifetime is over
        assert tab.get(page).status_code == 303


def test_without_a_token_an_expired_session_is_replaced_and_its_forms_go_stale(open_site, wall):
    server, seed = open_site
    slug = seed["slug"]
    before = tip(server.store, PROJECT)
    with browser(server) as tab:
        old = csrf_of(tab.get(f"/ui/p/{slug}/compose").text)
        wall.advance(seconds=IDLE_SECONDS)
        fresh = tab.get(f"/ui/p/{slug}/compose")
        assert fresh.status_code == 200 and "gitmail_ui=" in fresh.headers["set-cookie"]
        stale = tab.post(f"/ui/p/{slug}/compose", data={"to": "GreenHill", "subject": "s", "body": "b", "csrf": old})
        assert stale.status_code == 403
    assert tip(server.store, PROJECT) == before


def test_signing_out_needs_the_forms_token_and_ends_the_session_on_both_sides(site):
    server, seed = site
    page = f"/ui/p/{seed['slug']}"
    with signed_in(server) as tab, signed_in(server) as other:
        shown = tab.get(page).text
        assert 'action="/ui/logout"' in shown
        token = csrf_of(shown)
        assert tab.post("/ui/logout", data={}).status_code == 403
        assert tab.post("/ui/logout", data={"csrf": csrf_of(other.get(page).text)}).status_code == 403
        assert tab.get(page).status_code == 200  # a refused sign-out ends nothing
        cookie = tab.cookies["gitmail_ui"]
        out = tab.post("/ui/logout", data={"csrf": token})
        assert out.status_code == 303 and out.headers["location"] == "/ui/login"
        cleared = out.headers["set-cookie"]
        assert cleared.startswith('gitmail_ui=""') and "Max-Age=0" in cleared and "Path=/ui" in cleared
        assert "gitmail_ui" not in tab.cookies
        with browser(server) as replay:  # the old cookie, kept by someone, opens nothing any more
            replay.cookies.set("gitmail_ui", cookie)
            assert replay.get(page).status_code == 303
        assert other.get(page).status_code == 200  # another session goes on


def test_wrong_tokens_close_sign_in_from_that_address_for_a_while(site, wall):
    server, _ = site
    with browser(server) as tab, browser(server, transport=httpx.HTTPTransport(local_address="127.0.0.2")) as apart:
        for _ in range(LOGIN_FAILURES):
            assert tab.post("/ui/login", data={"token": "guess"}).status_code == 401
        first_failure = wall()
        wall.advance(seconds=60)
        closed = tab.post("/ui/login", data={"token": TOKEN})  # even the right token waits
        assert closed.status_code == 429
        until = first_failure + LOGIN_WINDOW_SECONDS
        assert closed.headers["retry-after"] == str(int(until - wall()) + 1)
        assert "Too many wrong tokens from your address (127.0.0.1)" in closed.text
        assert re.search(r"closed\s+until \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", closed.text)
        assert "gitmail_ui" not in tab.cookies
        assert apart.post("/ui/login", data={"token": TOKEN}).status_code == 303  # another address is not held up
        wall.advance(seconds=until - wall())
        assert tab.post("/ui/login", data={"token": TOKEN}).status_code == 303


# -- held: CSRF on every form, cookie flags, redirects, path traversal -----------------------------------

def forms_of(page: str, html: str) -> list[tuple[str, bool]]:
    """(where it posts, carries a csrf field) of every POST form on ``page``; without an action, the page."""
    found = []
    for match in re.finditer(r"<form([^>]*)>(.*?)</form>", html, re.S):
        attributes, inner = match.groups()
        if 'method="post"' not in attributes:
            continue
        action = re.search(r'action="([^"]+)"', attributes)
        found.append((action.group(1) if action else page, 'name="csrf"' in inner))
    return found


def test_every_form_that_writes_carries_and_needs_its_sessions_csrf_token(site):
    server, seed = site
    slug = seed["slug"]
    pages = ["/ui/", f"/ui/p/{slug}", f"/ui/p/{slug}/compose", f"/ui/p/{slug}/thread/{seed['thread']}",
             f"/ui/p/{slug}/agents/BlueLake", f"/ui/p/{slug}/board", f"/ui/p/{slug}/journals",
             f"/ui/p/{slug}/search?q=plan", f"/ui/p/{slug}/history?kind=thread&key={seed['thread']}",
             "/ui/dashboard", f"/ui/p/{slug}/dashboard"]
    with signed_in(server) as tab, signed_in(server) as other:
        found = [form for page in pages for form in forms_of(page, tab.get(page).text)]
        forms = {action.split("?")[0] for action, has in found if has}
        unguarded = {action for action, has in found if not has}
        assert unguarded == set()
        reply = f"/ui/p/{slug}/reply/{seed['message']}"
        assert forms == {f"/ui/p/{slug}/compose", reply, "/ui/logout", f"/ui/p/{slug}/archive",
                         f"/ui/p/{slug}/agents/BlueLake/status"}, forms
        foreign = csrf_of(other.get(pages[2]).text)
        fields = {"to": "GreenHill", "subject": "forged", "body": "forged"}
        before = tip(server.store, PROJECT)
        for action in sorted(forms):
            for csrf in (None, "", foreign, csrf_of(tab.get(pages[2]).text) + "x"):
                data = {**fields, **({} if csrf is None else {"csrf": csrf})}
                assert tab.post(action, data=data).status_code == 403, (action, csrf)
            with browser(server) as stranger:  # no session at all
                assert stranger.post(action, data={**fields, "csrf": foreign}).status_code in (303, 403), action
        assert tip(server.store, PROJECT) == before
        assert tab.get(pages[1]).status_code == 200  # still signed in: no refused form signed it out


def cookie_attributes(header: str) -> dict[str, str]:
    parts = [p.strip() for p in header.split(";")]
    return {p.split("=", 1)[0].lower(): (p.split("=", 1)[1] if "=" in p else "") for p in parts[1:]}


def test_the_session_cookie_is_httponly_strict_and_scoped_to_the_view(site, open_site):
    token_server, _ = site
    open_server, _ = open_site
    with browser(open_server) as tab:
        opened = tab.get("/ui/").headers["set-cookie"]
    with browser(token_server) as tab:
        signed = tab.post("/ui/login", data={"token": TOKEN}).headers["set-cookie"]
        assert "set-cookie" not in tab.post("/ui/login", data={"token": "wrong"}).headers
    for header in (opened, signed):
        assert header.startswith("gitmail_ui=")
        value = header.split(";", 1)[0].split("=", 1)[1]
        assert len(value) >= 40  # 32 random bytes
        attributes = cookie_attributes(header)
        assert "httponly" in attributes and attributes["samesite"].lower() == "strict"
        assert attributes["path"] == "/ui" and "domain" not in attributes and "max-age" not in attributes


def test_no_redirect_leaves_the_view(site):
    server, seed = site
    hostile = ["//evil.example", "https://evil.example/", "/\\evil.example", "\\\\evil.example", "/ui//evil.example",
               "/ui/\\evil.example", "/ui\\..\\..\\evil", "javascript:alert(1)", "/uievil.example",
               "/ui/%0d%0aLocation:%20https://evil.example", "http:/evil.example", " //evil.example",
               "/ui/../..//evil.example"]
    with browser(server) as tab:
        for target in hostile:
            for method in ("GET", "POST"):
                login = tab.request(method, "/ui/login", params={"next": target},
                                    data={"token": TOKEN} if method == "POST" else None)
                if method == "POST":
                    assert login.status_code == 303 and login.headers["location"] == "/ui/", (target, login.headers)
                else:
                    action = re.search(r'action="([^"]+)"', login.text).group(1)
                    assert action == "/ui/login?next=/ui/", (target, action)
        kept = tab.post("/ui/login", params={"next": f"/ui/p/{seed['slug']}"}, data={"token": TOKEN})
        assert kept.headers["location"] == f"/ui/p/{seed['slug']}"
        for path in ("/", f"/ui/p/{seed['slug']}/m/{seed['message']}", f"/ui/p/{seed['slug']}"):
            answer = tab.get(path)
            location = answer.headers.get("location", "/ui/")
            assert location.startswith("/ui/") and not location.startswith("//"), (path, location)


def raw_get(server: InProcessServer, target: str) -> tuple[int, str]:
    """GET ``target`` exactly as written (no client-side clean-up of dot segments or escapes)."""
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    try:
        connection.putrequest("GET", target, skip_accept_encoding=True)
        connection.putheader("Cookie", "")
        connection.endheaders()
        response = connection.getresponse()
        return response.status, response.read().decode("utf-8", "replace")
    finally:
        connection.close()


def test_no_route_reads_a_file_outside_what_it_serves(open_site):
    server, seed = open_site
    slug = seed["slug"]
    targets = [
        "/ui/static/../../../../../../etc/passwd", "/ui/static/%2e%2e/%2e%2e/%2e%2e/%2e%2e/etc/passwd",
        "/ui/static/..%2f..%2f..%2f..%2fetc%2fpasswd", "/ui/static/....//....//etc/passwd",
        "/ui/static/%2e%2e/app.py", "/ui/static/../app.py", "/ui/static/..%2fapp.py", "/ui/static/..%5capp.py",
        "/ui/static//etc/passwd", "/ui/static/%2fetc%2fpasswd",
        f"/ui/p/{slug}/file/../../../../etc/passwd", f"/ui/p/{slug}/file/..%2f..%2fproject.yaml",
        f"/ui/p/{slug}/file/attachments/../project.yaml", f"/ui/p/{slug}/file/%2e%2e/agents/BlueLake/profile.yaml",
        f"/ui/p/{slug}/file/agents/BlueLake/profile.yaml", f"/ui/p/{slug}/file//etc/passwd",
        "/ui/p/..%2f..%2f..%2fetc%2fpasswd", "/ui/p/%2e%2e", f"/ui/p/{slug}/agents/..%2f..%2fproject.yaml",
        f"/ui/p/{slug}/thread/..%2f..%2fproject.yaml", f"/ui/p/{slug}/history?kind=agent&key=../../project.yaml",
        f"/ui/p/{slug}/journals?agent=../../etc/passwd", f"/ui/p/{slug}/m/..%2f..%2fproject.yaml",
    ]
    for target in targets:
        status, body = raw_get(server, target)
        assert status in (400, 404), (target, status, body[:200])
        for secret in ("root:x:", "human_key:", "token_hash", "def build_web", "import "):
            assert secret not in body, (target, secret)
