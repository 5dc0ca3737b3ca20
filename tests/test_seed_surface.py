"""Every tool of the agent-mail documentation, driven with its argument names by the official MCP client, both majors.

``tests/seed_client.py`` is the agent: it runs under this environment's
``mcp`` 2.x and under a 1.x client in a venv of its own (:mod:`tests.mcp1`),
over Streamable HTTP against a real ``gitmail serve`` and over stdio against
``gitmail serve --stdio``. Each run must get, step by step, the result shapes
the documentation promises.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest

from . import mcp1
from .mcp_harness import ROOT, ServerProcess, child_env

DRIVER = os.path.join(ROOT, "tests", "seed_client.py")
DOCUMENTED = {
    "health_check", "ensure_project", "register_agent", "create_agent_identity", "whois", "list_agents",
    "list_window_identities", "rename_window", "expire_window", "set_contact_policy", "request_contact",
    "respond_contact", "list_contacts", "send_message", "reply_message", "fetch_inbox", "fetch_topic",
    "mark_message_read", "acknowledge_message", "search_messages", "summarize_thread", "summarize_recent",
    "fetch_summary", "file_reservation_paths", "renew_file_reservations", "force_release_file_reservation",
    "release_file_reservations", "macro_start_session", "macro_prepare_thread", "macro_file_reservation_cycle",
    "macro_contact_handshake", "install_precommit_guard", "uninstall_precommit_guard", "retire_agent",
    "unretire_agent", "deregister_agent", "retire_inactive_agents", "hard_delete_agent", "purge_old_messages",
    "archive_project", "unarchive_project", "hard_delete_project",
}


def has(obj: Any, *keys: str) -> bool:
    return isinstance(obj, dict) and all(k in obj for k in keys)


def check(steps: list[dict[str, Any]]) -> None:
    """The shapes the documentation gives, step by step."""
    by = {s["step"]: s for s in steps}
    assert {s["tool"] for s in steps if "tool" in s} == DOCUMENTED
    failed = {s["step"]: s["body"] for s in steps if s["error"] and s["step"] != "force"}
    assert failed == {}
    body = {name: s["body"] for name, s in by.items()}
    assert has(body["health"], "status", "environment", "http_host", "http_port", "database_url")
    assert has(body["ensure"], "id", "slug", "human_key", "created_at")
    profile = ("id", "name", "program", "model", "task_description", "inception_ts", "last_active_ts", "project_id")
    assert has(body["register"], *profile, "registration_token") and has(body["create"], *profile)
    assert has(body["whois"], *profile)
    assert [a["name"] for a in body["list_agents"]["agents"]] == ["BlueLake", "GreenCastle"]
    assert body["agents"] == body["list_agents"]
    (window,) = body["windows"]["identities"]
    assert has(window, "id", "window_uuid", "display_name", "created_ts", "last_active_ts", "expires_ts")
    assert has(body["expire_window"], "window_uuid", "expired", "expired_at")
    assert has(body["send"], "deliveries", "count") and has(body["send"]["deliveries"][0], "project", "payload")
    assert has(body["reply"], "thread_id", "reply_to")
    assert isinstance(body["inbox"], list) and has(body["inbox"][0], "id", "subject", "from", "created_ts",
                                                   "importance", "ack_required", "kind", "read_at", "body_md")
    assert has(body["topic"][0], "id", "subject", "from", "created_ts", "importance", "topic")
    assert has(body["read"], "message_id", "read", "read_at")
    assert has(body["ack"], "message_id", "acknowledged", "acknowledged_at", "read_at")
    assert has(body["search"][0], "id", "subject", "importance", "ack_required", "created_ts", "thread_id", "from")
    assert has(body["thread"], "thread_id", "summary", "examples")
    assert has(body["thread"]["summary"], "participants", "key_points", "action_items")
    assert has(body["threads"], "threads", "aggregate")
    assert has(body["threads"]["aggregate"], "top_mentions", "key_points", "action_items")
    assert body["recent"]["mode"] == "extractive" and isinstance(body["summaries"], list)
    assert has(body["reserve"], "granted", "conflicts")
    assert has(body["reserve"]["granted"][0], "id", "path_pattern", "exclusive", "reason", "expires_ts")
    assert has(body["renew"], "renewed", "file_reservations")
    assert has(body["renew"]["file_reservations"][0], "id", "path_pattern", "old_expires_ts", "new_expires_ts")
    assert has(body["release"], "released", "released_at")
    assert by["force"]["error"] and body["force"]["code"] == "RESERVATION_NOT_STALE"
    assert body["start"]["file_reservations"]["granted"]
    assert has(body["prepare"], "thread", "inbox") and body["cycle"]["released"]["released"] == 1
    assert body["handshake"]["welcome_message"]["count"] == 1
    assert body["guard"]["hook"].endswith("pre-commit") and body["unguard"]["removed"] is True
    assert body["hard_delete_project"]["deleted"] is True
    assert all(s.get("blocks", 1) >= 1 for s in steps)  # every result has a text block, empty lists included


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("seed") / "backend")
    subprocess.run(["git", "init", "-q", path], check=True)
    return path


def drive(python: str, *args: str, home: str) -> list[dict[str, Any]]:
    env = child_env(home)
    env.pop("PYTHONPATH", None)  # the client knows nothing of gitmail
    proc = subprocess.run([python, DRIVER, *args], capture_output=True, text=True, env=env, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout)


CLIENTS = {"mcp2": lambda: sys.executable, "mcp1": mcp1.ensure}


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("client", sorted(CLIENTS))
def test_the_documented_surface_over_http(client, repo, tmp_path):
    python = CLIENTS[client]()
    server = ServerProcess(str(tmp_path / "home"), env={"GITMAIL_GUARD_ROOTS": os.path.dirname(repo)})
    try:
        steps = drive(python, "http", server.url, repo, home=server.home)
    finally:
        server.stop()
    check(steps)


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("client", sorted(CLIENTS))
def test_the_documented_surface_over_stdio(client, repo, tmp_path):
    python = CLIENTS[client]()
    home = str(tmp_path / "home")
    env = child_env(home)
    steps = drive(python, "stdio", repo, "--", sys.executable, "-c",
                  f"import os, sys; os.environ['GITMAIL_GUARD_ROOTS'] = {os.path.dirname(repo)!r}; "
                  f"sys.path.insert(0, {ROOT!r}); from gitmail.cli import main; "
                  "sys.argv = ['gitmail', '--home', " + repr(home) + ", 'serve', '--stdio']; main()",
                  home=env["GITMAIL_HOME"])
    check(steps)
