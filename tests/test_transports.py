"""What travels on the wire: stdio's standard output, session-less HTTP requests, and the server's log lines."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request
from typing import Any

import pytest

from .mcp_harness import ROOT, child_env

PROJECT = "/work/transports/project"


def post(url: str, payload: Any, headers: dict[str, str] | None = None) -> tuple[int, Any]:
    """One plain JSON-RPC POST, as a script would send it (no session, no Accept header of its own)."""
    request = urllib.request.Request(url, data=json.dumps(payload).encode(), method="POST",
                                     headers={"content-type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def tool_call(name: str, arguments: dict[str, Any], request_id: int = 1) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
            "params": {"name": name, "arguments": arguments}}


def tool_body(answer: dict[str, Any]) -> dict[str, Any]:
    result = answer["result"]
    return result.get("structuredContent") or json.loads(result["content"][0]["text"])


@pytest.mark.slow
def test_stdio_stdout_carries_only_json_rpc_through_shutdown(tmp_path):
    lines = [
        {"jsonrpc": "2.0", "id": 0, "method": "initialize",
         "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                    "clientInfo": {"name": "raw", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        tool_call("ensure_project", {"human_key": PROJECT}, 1),
        tool_call("register_agent", {"project_key": PROJECT, "program": "p", "model": "m", "name": "BlueLake"}, 2),
        tool_call("send_message", {"project_key": PROJECT, "sender_name": "BlueLake", "to": ["BlueLake"],
                                   "subject": "note to self", "body_md": "hello"}, 3),
        # a search starts the search-index helper process: whatever it might print must not reach stdout
        tool_call("search_messages", {"project_key": PROJECT, "query": "hello"}, 4),
        tool_call("send_message", {"project_key": PROJECT}, 5),  # bad arguments: logged, never on stdout
    ]
    proc = subprocess.Popen([sys.executable, "-m", "gitmail", "serve", "--stdio"], cwd=ROOT,
                            env=child_env(str(tmp_path / "home")), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None
    raw = b""
    for line in lines:  # as a client does: each request, then its answer
        proc.stdin.write(json.dumps(line).encode() + b"\n")
        proc.stdin.flush()
        if "id" in line:
            raw += proc.stdout.readline()
    proc.stdin.close()  # the client goes away; everything after this must still be JSON-RPC (here: nothing)
    raw += proc.stdout.read()
    err = proc.stderr.read() if proc.stderr else b""
    assert proc.wait(60) == 0, err.decode()
    proc.stdout.close()
    if proc.stderr:
        proc.stderr.close()
    assert raw.endswith(b"\n")
    answers = [json.loads(line) for line in raw.split(b"\n")[:-1]]  # every byte belongs to a JSON-RPC line
    assert all(a.get("jsonrpc") == "2.0" for a in answers)
    assert [a["id"] for a in answers] == [0, 1, 2, 3, 4, 5]
    by_id = {a["id"]: a for a in answers}
    assert [h["subject"] for h in tool_body(by_id[4])["result"]] == ["note to self"]
    assert by_id[5]["result"]["isError"] is True
    assert b"stdio server stopped" in err


def test_a_session_less_post_is_served_at_both_paths(server):
    base = server.url
    status, created = post(base, tool_call("ensure_project", {"human_key": PROJECT}))
    assert status == 200 and tool_body(created)["human_key"] == PROJECT
    status, again = post(base + "/", tool_call("ensure_project", {"human_key": PROJECT}))
    assert status == 200 and tool_body(again)["human_key"] == PROJECT  # /mcp/ answers too, no redirect
    _, registered = post(base + "/", tool_call("register_agent", {"project_key": PROJECT, "program": "p",
                                                                  "model": "m", "name": "Stateless"}))
    token = tool_body(registered)["registration_token"]
    # No session: proof comes with every call, under either name.
    _, refused = post(base, tool_call("fetch_inbox", {"project_key": PROJECT, "agent_name": "Stateless"}))
    assert refused["result"]["isError"] and tool_body(refused)["code"] == "UNAUTHORIZED"
    _, inbox = post(base, tool_call("fetch_inbox", {"project_key": PROJECT, "agent_name": "Stateless",
                                                    "registration_token": token}))
    assert inbox["result"]["isError"] is False
    _, agents = post(base, {"jsonrpc": "2.0", "id": 9, "method": "resources/read",
                            "params": {"uri": f"resource://agents/{PROJECT}"}})
    listed = json.loads(agents["result"]["contents"][0]["text"])
    assert [a["name"] for a in listed["agents"]] == ["Stateless"]


def test_bad_arguments_make_one_log_line_naming_tool_and_argument(server):
    server.log.seek(0, 2)
    start = server.log.tell()
    _, answer = post(server.url, tool_call("renew_file_reservations", {"project_key": PROJECT,
                                                                         "agent_name": "Nobody",
                                                                         "extend_seconds": "soon"}))
    assert answer["result"]["isError"] is True
    server.log.flush()
    server.log.seek(start)
    logged = [line for line in server.log.read().splitlines() if line.strip()]
    assert len(logged) == 1, logged
    assert "renew_file_reservations" in logged[0] and "extend_seconds" in logged[0]
