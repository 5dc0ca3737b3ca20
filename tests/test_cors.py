"""Pages of the origins the operator allows may call MCP from a browser; nothing else may, by default nothing.

Real ``gitmail serve`` processes, real HTTP requests, and headless Chromium
loading a page from another loopback port that calls the MCP endpoint with
``fetch`` (a JSON POST, so the browser sends a preflight first).
"""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator

import httpx2 as httpx
import pytest

from .mcp_harness import ServerProcess, free_port
from .test_web import CHROMIUM, CHROMIUM_ARGS

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

APP = "https://app.example.org"
LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
ACCEPT = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


@pytest.fixture(scope="module")
def page_port() -> Iterator[int]:
    """A loopback web server on its own port whose page calls the MCP endpoint named in its query string."""
    html = b"""<!doctype html><title>caller</title><script>
    async function callMcp(url) {
      try {
        const answer = await fetch(url, {method: "POST", body: JSON.stringify({jsonrpc: "2.0", id: 1,
          method: "tools/list"}), headers: {"content-type": "application/json",
          "accept": "application/json, text/event-stream"}});
        return {status: answer.status, tools: (await answer.json()).result.tools.length};
      } catch (error) { return {failed: String(error)}; }
    }</script>"""

    class Page(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the standard library's name
            self.send_response(200)
            self.send_header("content-type", "text/html")
            self.send_header("content-length", str(len(html)))
            self.end_headers()
            self.wfile.write(html)

        def log_message(self, *args: object) -> None:
            pass


    port = free_port()
    web = http.server.HTTPServer(("127.0.0.1", port), Page)  # one request at a time: nothing left open
    threading.Thread(target=web.serve_forever, daemon=True).start()
    yield port
    web.shutdown()
    web.server_close()


@pytest.fixture(scope="module")
def servers(tmp_path_factory, page_port) -> Iterator[dict[str, ServerProcess]]:
    started = {}
    try:
        started["allowing"] = ServerProcess(str(tmp_path_factory.mktemp("cors")), extra_args=(
            "--allow-origin", APP, "--allow-origin", f"http://127.0.0.1:{page_port}"))
        started["default"] = ServerProcess(str(tmp_path_factory.mktemp("plain")))
        yield started
    finally:
        for server in started.values():
            server.stop()


def _preflight(server: ServerProcess, origin: str) -> httpx.Response:
    return httpx.options(server.url, headers={"origin": origin, "access-control-request-method": "POST",
                                              "access-control-request-headers": "content-type"}, timeout=30)


def test_an_allowed_origin_gets_its_preflight_and_readable_answers(servers):
    allowing = servers["allowing"]
    preflight = _preflight(allowing, APP)
    assert preflight.status_code == 204
    assert preflight.headers["access-control-allow-origin"] == APP
    assert "POST" in preflight.headers["access-control-allow-methods"]
    assert "mcp-session-id" in preflight.headers["access-control-allow-headers"]
    answer = httpx.post(allowing.url, json=LIST, headers={**ACCEPT, "origin": APP}, timeout=60)
    assert answer.status_code == 200 and answer.json()["result"]["tools"]
    assert answer.headers["access-control-allow-origin"] == APP
    assert answer.headers["access-control-expose-headers"] == "mcp-session-id"


def test_no_other_origin_is_allowed_and_by_default_none(servers):
    refused = _preflight(servers["allowing"], "https://evil.example")
    assert refused.status_code == 403 and refused.json()["code"] == "ORIGIN_NOT_ALLOWED"
    assert "access-control-allow-origin" not in refused.headers
    plain = _preflight(servers["default"], APP)
    assert plain.status_code == 403 and plain.json()["code"] == "ORIGIN_NOT_ALLOWED"
    same = httpx.post(servers["default"].url, json=LIST, headers=ACCEPT, timeout=60)  # no Origin: not a page
    assert same.status_code == 200 and "access-control-allow-origin" not in same.headers


def test_a_page_of_an_allowed_origin_calls_mcp_from_chromium_and_another_page_cannot(servers, page_port):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            tab = browser.new_page()
            tab.goto(f"http://127.0.0.1:{page_port}/")
            allowed = tab.evaluate("url => callMcp(url)", servers["allowing"].url)
            refused = tab.evaluate("url => callMcp(url)", servers["default"].url)
        finally:
            browser.close()
    assert allowed["status"] == 200 and allowed["tools"] > 0, allowed
    assert "failed" in refused, refused
