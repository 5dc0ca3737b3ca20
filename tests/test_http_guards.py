"""What a real ``gitmail serve`` answers before any tool runs: Host and Origin, body size, parse depth, the bearer.

Raw HTTP (httpx) against the server on loopback, as a hostile web page,
a script or a careless client would send it, with and without
``GITMAIL_TOKEN``. A refused request changes nothing in the store.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterator
from typing import Any

import httpx2 as httpx
import pytest

from gitmail import Mail, Store

from .mcp_harness import ServerProcess, call, run

pytestmark = pytest.mark.slow  # each module-scoped server is a `gitmail serve` process

PROJECT = "/work/guards/project"
TOKEN = "bearer-for-the-guard-tests"
JSONRPC = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
INITIALIZE = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}


def tool_call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": arguments}}


def seeded(home: str) -> str:
    """A store with one project and agent; the project's slug."""
    mail = Mail(Store(home, background=False))
    mail.ensure_project(PROJECT)
    mail.register_agent(PROJECT, "p", "m", name="BlueLake")
    return Store(home, background=False).resolve(PROJECT)


def store_state(home: str) -> tuple[list[str], list[str]]:
    """The projects of a store and the tip of each archive: what a refused request must leave as it was."""
    root = os.path.join(home, "projects")
    slugs = sorted(os.listdir(root)) if os.path.isdir(root) else []
    tips = [Store(home, background=False).archive(slug).tip() or "" for slug in slugs]
    return slugs, tips


@pytest.fixture(scope="module")
def open_server(tmp_path_factory) -> Iterator[tuple[ServerProcess, str]]:
    home = str(tmp_path_factory.mktemp("guards-open"))
    slug = seeded(home)
    server = ServerProcess(home, extra_args=("--tools", "all"))
    yield server, slug
    server.stop()


@pytest.fixture(scope="module")
def token_server(tmp_path_factory) -> Iterator[tuple[ServerProcess, str]]:
    home = str(tmp_path_factory.mktemp("guards-token"))
    slug = seeded(home)
    server = ServerProcess(home, token=TOKEN, extra_args=("--tools", "all"),
                           env={"GITMAIL_ALLOWED_ORIGINS": "https://mail.example.org, box.lan"})
    yield server, slug
    server.stop()


def base(server: ServerProcess) -> str:
    return f"http://127.0.0.1:{server.port}"


def hostile_requests(server: ServerProcess, slug: str) -> list[tuple[str, str, dict[str, Any]]]:
    """(method, url, httpx arguments) for every kind of route the server has, each one that would act."""
    root = base(server)
    form = {"to": "BlueLake", "subject": "rebound", "body": "from a hostile page", "csrf": "x"}
    return [
        ("POST", f"{root}/mcp", {"json": tool_call("ensure_project", human_key="/work/guards/rebound")}),
        ("POST", f"{root}/mcp/", {"json": tool_call("ensure_project", human_key="/work/guards/rebound")}),
        ("POST", f"{root}/mcp", {"json": INITIALIZE}),
        ("GET", f"{root}/mcp", {}),
        ("GET", f"{root}/", {}),
        ("GET", f"{root}/ui/", {}),
        ("GET", f"{root}/ui/p/{slug}", {}),
        ("GET", f"{root}/ui/events", {}),
        ("GET", f"{root}/ui/static/app.js", {}),
        ("GET", f"{root}/ui/login", {}),
        ("POST", f"{root}/ui/login", {"data": {"token": TOKEN}}),
        ("POST", f"{root}/ui/p/{slug}/compose", {"data": form}),
    ]


def send(method: str, url: str, headers: dict[str, str], **arguments: Any) -> httpx.Response:
    """One request; to the MCP endpoint with the headers a JSON-RPC client sends."""
    with httpx.Client(timeout=60) as client:
        return client.request(method, url, headers={**(JSONRPC if "/mcp" in url else {}), **headers}, **arguments)


@pytest.mark.parametrize("which", ["open_server", "token_server"])
def test_a_foreign_host_or_origin_is_refused_on_every_route_and_changes_nothing(which, request):
    server, slug = request.getfixturevalue(which)
    bearer = {"authorization": f"Bearer {TOKEN}"} if server.token else {}
    before = store_state(server.home)
    port = server.port
    for method, url, arguments in hostile_requests(server, slug):
        for headers, status, code in (
                ({"host": f"evil.example:{port}"}, 421, "HOST_NOT_ALLOWED"),
                ({"host": "evil.example"}, 421, "HOST_NOT_ALLOWED"),
                ({"host": f"127.0.0.1.evil.example:{port}"}, 421, "HOST_NOT_ALLOWED"),
                ({"host": f"localhost:{port}", "origin": "http://evil.example"}, 403, "ORIGIN_NOT_ALLOWED"),
                ({"host": f"127.0.0.1:{port}", "origin": f"http://evil.example:{port}"}, 403, "ORIGIN_NOT_ALLOWED"),
                ({"host": f"127.0.0.1:{port}", "origin": "null"}, 403, "ORIGIN_NOT_ALLOWED")):
            answer = send(method, url, {**bearer, **headers}, **arguments)
            assert answer.status_code == status, (method, url, headers, answer.status_code, answer.text[:200])
            if "/mcp" in url:
                body = answer.json()
                assert body["code"] == code and "GITMAIL_ALLOWED_ORIGINS" in body["message"]
                assert body["data"]["setting"] == "GITMAIL_ALLOWED_ORIGINS"
            else:
                assert code in answer.text and "GITMAIL_ALLOWED_ORIGINS" in answer.text
    assert store_state(server.home) == before


def test_a_refused_session_request_ends_nothing_and_the_session_goes_on(open_server):
    server, _ = open_server
    root = base(server)
    opened = send("POST", f"{root}/mcp", {}, json=INITIALIZE)
    assert opened.status_code == 200
    session = {"mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": "2025-06-18"}
    send("POST", f"{root}/mcp", session, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
    call = tool_call("health_check")
    refused = send("POST", f"{root}/mcp", {**session, "origin": "https://attacker.example"}, json=call)
    assert refused.status_code == 403 and refused.json()["code"] == "ORIGIN_NOT_ALLOWED"
    answered = send("POST", f"{root}/mcp", session, json=call)
    assert answered.status_code == 200 and answered.json()["result"]["isError"] is False


def test_loopback_names_and_the_servers_own_origins_are_answered(open_server):
    server, _ = open_server
    port = server.port
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}", f"LocalHost:{port}"):
        for origin in (None, f"http://{host}"):
            headers = {"host": host, **({"origin": origin} if origin else {})}
            answer = send("POST", f"{base(server)}/mcp", headers, json=tool_call("health_check"))
            assert answer.status_code == 200, (headers, answer.text[:200])
            assert send("GET", f"{base(server)}/ui/", headers).status_code == 200


def test_the_setting_adds_names_and_the_bearer_still_counts(token_server):
    server, _ = token_server
    url = f"{base(server)}/mcp"
    bearer = {"authorization": f"Bearer {TOKEN}"}
    call = tool_call("health_check")
    for headers in ({"host": "mail.example.org", "origin": "https://mail.example.org"},
                    {"host": "box.lan", "origin": "http://box.lan"}, {"host": "box.lan", "origin": "https://box.lan"},
                    {"host": f"127.0.0.1:{server.port}"}):
        assert send("POST", url, {**bearer, **headers}, json=call).status_code == 200, headers
        assert send("POST", url, headers, json=call).status_code == 401, headers  # the name is no proof
    # An entry is exact: no other port, no other scheme for an origin given with one, no subdomain.
    for headers, status in (({"host": "mail.example.org:8443"}, 421), ({"host": "box.lan:9"}, 421),
                            ({"host": "evil.mail.example.org"}, 421),
                            ({"host": "mail.example.org", "origin": "http://mail.example.org"}, 403)):
        assert send("POST", url, {**bearer, **headers}, json=call).status_code == status, headers


def _answer_to_partial(port: int, request: bytes) -> bytes:
    """Send a request whose body never ends, and return the head of what the server answers.

    The server has read everything sent by the time it answers (so it closes
    cleanly); a server that waits for the rest of the body never answers, and
    the socket's timeout fails the test.
    """
    with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
        sock.sendall(request)
        answer = b""
        while b"\r\n\r\n" not in answer:
            chunk = sock.recv(65536)
            if not chunk:
                break
            answer += chunk
        return answer


def test_a_session_less_body_over_the_limit_is_refused_before_it_is_read(open_server):
    server, _ = open_server
    port = server.port
    head = (f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
            "Accept: application/json\r\n")
    # Declared too large: refused from the headers alone, before any of the body comes.
    declared = _answer_to_partial(port, f"{head}Content-Length: {250 * 1024 * 1024}\r\n\r\n".encode())
    assert declared.startswith(b"HTTP/1.1 413"), declared[:100]
    # Streamed without a length: refused as soon as more than 4 MiB came in, though the body has not ended.
    chunk = b"x" * (256 * 1024)
    body = b"2\r\n{}\r\n" + (f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n") * 16
    streamed = _answer_to_partial(port, f"{head}Transfer-Encoding: chunked\r\n\r\n".encode() + body)
    assert streamed.startswith(b"HTTP/1.1 413"), streamed[:100]
    # The session path says the same, and the server answers the next request as ever.
    opened = send("POST", f"{base(server)}/mcp", {}, json=INITIALIZE)
    session = {"mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": "2025-06-18"}
    big = {"jsonrpc": "2.0", "id": 2, "method": "ping", "params": {"a": "x" * (5 * 1024 * 1024)}}
    assert send("POST", f"{base(server)}/mcp", session, json=big).status_code == 413
    assert send("POST", f"{base(server)}/mcp", {}, json=big).status_code == 413
    after = send("POST", f"{base(server)}/mcp", {}, json=tool_call("health_check"))
    assert after.status_code == 200 and after.json()["result"]["isError"] is False


def test_a_web_form_over_the_limit_is_refused_too(open_server):
    server, slug = open_server
    before = store_state(server.home)
    huge = {"to": "BlueLake", "subject": "s", "body": "x" * (5 * 1024 * 1024), "csrf": "x"}
    for path in ("/ui/login", f"/ui/p/{slug}/compose", "/ui/logout"):
        assert send("POST", base(server) + path, {}, data=huge).status_code == 413, path
    assert send("GET", base(server) + "/ui/", {}).status_code == 200
    assert store_state(server.home) == before


def test_a_deeply_nested_body_is_a_parse_error_on_both_paths(open_server):
    server, _ = open_server
    url = f"{base(server)}/mcp"
    nested_call = ('{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"health_check","arguments":{"x":'
                   + "[" * 1000 + "]" * 1000 + "}}}")
    nested_list = "[" * 1000 + "]" * 1000
    opened = send("POST", url, {}, json=INITIALIZE)
    session = {"mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": "2025-06-18"}
    for headers in ({}, session):
        for body in (nested_call, nested_list):
            answer = send("POST", url, headers, content=body.encode())
            assert answer.status_code == 400, (headers, answer.status_code, answer.text[:200])
            error = answer.json()["error"]
            assert error["code"] == -32700 and "Parse error" in error["message"]
    assert send("POST", url, {}, json=tool_call("health_check")).json()["result"]["isError"] is False
    assert "RecursionError" not in server_log(server)


def server_log(server: ServerProcess) -> str:
    server.log.flush()
    server.log.seek(0)
    return server.log.read()


def test_the_bearer_guards_the_session_less_path_and_the_web_view_too(token_server):
    server, slug = token_server
    url = f"{base(server)}/mcp"
    before = store_state(server.home)
    write = tool_call("ensure_project", human_key="/work/guards/unauthorized")
    for headers in ({}, {"authorization": "Bearer wrong"}, {"authorization": TOKEN},
                    {"authorization": f"Basic {TOKEN}"}, {"authorization": f"Bearer {TOKEN}x"}):
        assert send("POST", url, headers, json=write).status_code == 401, headers
        assert send("POST", url + "/", headers, json=write).status_code == 401, headers
    assert store_state(server.home) == before
    # The web view wants its own sign-in; the bearer header opens nothing there, and the cookie nothing at /mcp.
    page = send("GET", f"{base(server)}/ui/p/{slug}", {"authorization": f"Bearer {TOKEN}"}, follow_redirects=False)
    assert page.status_code == 303 and page.headers["location"].startswith("/ui/login")
    signed = send("POST", f"{base(server)}/ui/login", {}, data={"token": TOKEN}, follow_redirects=False)
    cookie = signed.headers["set-cookie"].split(";", 1)[0]
    assert send("POST", url, {"cookie": cookie}, json=write).status_code == 401
    assert json.loads(send("POST", url, {"authorization": f"Bearer {TOKEN}"},
                           json=tool_call("health_check")).text)["result"]["isError"] is False


def array_parameters(schema: dict[str, Any]) -> dict[str, int | None]:
    """Each parameter of a tool's input schema that takes a list, and its maxItems."""
    found = {}
    for name, prop in schema.get("properties", {}).items():
        for option in [prop, *prop.get("anyOf", [])]:
            if option.get("type") == "array":
                found[name] = option.get("maxItems")
    return found


def test_every_list_argument_is_capped_and_a_longer_list_is_refused_before_any_tool_runs(open_server):
    server, slug = open_server
    before = store_state(server.home)

    async def scenario():
        async with server.client() as client:
            tools = await client.list_tools()
            caps = {(tool.name, name): cap for tool in tools
                    for name, cap in array_parameters(tool.input_schema).items()}
            refusals = {}
            for (tool, name), cap in caps.items():
                if cap is None:
                    continue
                result = await client.call_tool(tool, {"project_key": PROJECT, name: ["x"] * (cap + 1)},
                                                raise_on_error=False)
                refusals[(tool, name)] = json.loads(result.content[0].text) if result.is_error else None
            return caps, refusals

    caps, refusals = run(scenario())
    assert {"to", "cc", "bcc", "attachment_paths", "paths", "file_reservation_ids"} <= {name for _, name in caps}
    assert {key: cap for key, cap in caps.items() if cap is None} == {}
    for (tool, name), refused in refusals.items():
        assert refused is not None and refused["code"] == "INVALID_ARGUMENT", (tool, name, refused)
        assert any(p["argument"] == name and "at most" in p["problem"] for p in refused["data"]["problems"]), refused
    assert store_state(server.home) == before


def test_no_resource_or_tool_reads_a_file_by_a_path_that_climbs(open_server):
    server, slug = open_server
    climbs = ["../../../../etc/passwd", "..%2F..%2F..%2Fetc%2Fpasswd", "%2e%2e/%2e%2e/etc/passwd",
              "..\\..\\etc\\passwd", "/etc/passwd"]

    async def scenario():
        seen = []
        async with server.client() as client:
            await call(client, "register_agent", project_key=PROJECT, program="p", model="m", name="Reader")
            for path in climbs:
                for uri in (f"resource://message/{path}?project={PROJECT}", f"resource://thread/{path}?project={PROJECT}",
                            f"resource://project/{path}", f"resource://agents/{path}",
                            f"resource://inbox/{path}?project={PROJECT}", f"resource://file_reservations/{path}",
                            f"resource://thread/x?project={PROJECT}&after={path}"):
                    try:
                        seen.append((uri, json.dumps([c.text for c in await client.read_resource(uri)])))
                    except Exception as exc:  # noqa: BLE001 - a refused read is what most of these must be
                        seen.append((uri, str(exc)))
                for name, arguments in (("get_attachment", {"project_key": PROJECT, "path": path}),
                                        ("get_attachment", {"project_key": PROJECT, "path": f"attachments/{path}"}),
                                        ("ensure_project", {"human_key": path}),
                                        ("whois", {"project_key": path, "agent_name": "Reader"})):
                    result = await client.call_tool(name, arguments, raise_on_error=False)
                    seen.append((name, result.content[0].text))
        return seen

    seen = run(scenario())
    assert len(seen) == len(climbs) * 11
    for where, text in seen:
        assert "root:x:" not in text and "human_key:" not in text, (where, text[:200])
