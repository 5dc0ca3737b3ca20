"""``gitmail import agent-mail`` as a process: killed midway and run again, the CLI's output, and agents
going on over MCP (a real ``gitmail serve``, the official client) with what was imported.

The source is the committed store of a newer release (``tests/agent_mail_v032``);
a store written by a real 0.1.0 server is in ``test_import_agent_mail_server.py``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from gitmail.storage.store import slug_for

from .agent_mail_fixture import ARCHIVE, BACK, DATABASE, FRONT, TOKENS
from .conftest import git, wait_until
from .mcp_harness import ROOT, ServerProcess, call, child_env, fail, read_json, run

pytestmark = pytest.mark.slow  # gitmail processes: the importer, killed and run again; a server

# Loaded by the importer's interpreter at start (sitecustomize): small batches, and at the spot the test names
# the process says so and waits there until the test kills it.
STOP = textwrap.dedent("""
    import os
    if os.environ.get("GITMAIL_TEST_IMPORT_STOP"):
        import time
        import gitmail.importers.timeline as _timeline

        _spot, _batch = os.environ["GITMAIL_TEST_IMPORT_STOP"].split(":")
        _timeline.MAX_PER_BATCH = 4

        def _stop(spot, batch):
            if (spot, batch) == (_spot, int(_batch)):
                with open(os.environ["GITMAIL_TEST_IMPORT_MARK"], "w") as mark:
                    mark.write(f"{spot} {batch}")
                while True:
                    time.sleep(60)  # until the test kills the process

        _timeline.FAULT_HOOK = _stop
""")


def gitmail(home: str, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gitmail", *args], capture_output=True, text=True, timeout=300,
                          env=child_env(home, **(env or {})), cwd=ROOT)


def import_command(archive: bool = True) -> list[str]:
    return ["import", "agent-mail", DATABASE, *(("--archive", ARCHIVE) if archive else ()), "--json", "--quiet"]


def trees(home: str) -> dict[str, list[str]]:
    """The top of ``main``'s tree in each project's archive of a store, but for ``nodes/``.

    ``nodes/`` holds the key of the machine (the store) that wrote the
    archive, which differs from store to store whatever was imported.
    """
    out = {}
    for slug in sorted(os.listdir(os.path.join(home, "projects"))):
        git_dir = os.path.join(home, "projects", slug, "archive.git")
        out[slug] = [line for line in git("--git-dir", git_dir, "ls-tree", "main").splitlines()
                     if not line.endswith("\tnodes")]
    return out


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    """A store the fixture was imported into without interruption: the trees every other import must reach."""
    home = str(tmp_path_factory.mktemp("clean"))
    done = gitmail(home, *import_command())
    assert done.returncode == 1, done.stderr  # the fixture's rows left out on purpose
    return home, json.loads(done.stdout)


@pytest.mark.parametrize("spot", ["building", "committed"])
def test_an_import_killed_midway_completes_when_run_again_with_nothing_lost_or_doubled(tmp_path, clean, spot):
    home, faults, mark = str(tmp_path / "home"), tmp_path / "faults", tmp_path / "stopped"
    faults.mkdir()
    (faults / "sitecustomize.py").write_text(STOP)
    env = {"PYTHONPATH": os.pathsep.join([str(faults), ROOT]), "GITMAIL_TEST_IMPORT_STOP": f"{spot}:3",
           "GITMAIL_TEST_IMPORT_MARK": str(mark)}
    proc = subprocess.Popen([sys.executable, "-m", "gitmail", *import_command()], env=child_env(home, **env),
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: mark.exists() or proc.poll() is not None, "the importer to reach its third batch")
        assert mark.read_text() == f"{spot} 3", proc.stderr.read() if proc.poll() is not None else ""
        os.kill(proc.pid, signal.SIGKILL)  # in the middle of the third batch's commit, or right after it landed
        assert proc.wait(30) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        proc.stderr.close()
    front = os.path.join(home, "projects", slug_for(FRONT), "archive.git")
    landed = git("--git-dir", front, "rev-list", "--count", "main").strip()
    assert 0 < int(landed) < int(git("--git-dir", os.path.join(clean[0], "projects", slug_for(FRONT), "archive.git"),
                                     "rev-list", "--count", "main").strip())
    again = gitmail(home, *import_command())
    assert again.returncode == 1, again.stderr
    report = json.loads(again.stdout)
    assert trees(home) == trees(clean[0])  # the same records, byte for byte, as an import that was never stopped
    for kind, counts in clean[1]["totals"].items():  # each record once: written before the kill, or now
        if kind == "attachments":
            continue  # those of a message already there are not read again, nor counted
        done = report["totals"][kind]
        assert done["imported"] + done["present"] >= counts["imported"], kind
        assert done["imported"] <= counts["imported"], kind
    assert report["totals"]["messages"]["present"] > 0 and report["totals"]["messages"]["imported"] > 0
    assert gitmail(home, "fsck").returncode == 0
    git("--git-dir", front, "fsck", "--strict")


def test_the_command_prints_a_summary_or_json_and_a_dry_run_writes_nothing(tmp_path, clean):
    home = str(tmp_path / "home")
    dry = gitmail(home, "import", "agent-mail", DATABASE, "--archive", ARCHIVE, "--dry-run", "--quiet")
    assert dry.returncode == 1 and os.listdir(os.path.join(home, "projects")) == []  # no archive created
    assert "What would be imported" in dry.stdout and "archive_file_missing: 1" in dry.stdout
    assert "message 9: 'Re: Release plan'" in dry.stdout
    report = clean[1]
    assert report["totals"]["messages"] == {"imported": 9, "present": 0, "skipped": 1}
    assert {problem["key"] for problem in report["problems"]} >= {"archive_file_missing", "attachment_unreadable",
                                                                   "project_key_invalid", "table_not_imported"}
    missing = gitmail(home, "import", "agent-mail", str(tmp_path / "gone.sqlite3"))
    assert missing.returncode == 2 and "error [NOT_FOUND]" in missing.stderr and "DATABASE_URL" in missing.stderr


def test_agents_go_on_over_mcp_with_their_old_tokens_and_old_message_ids(clean):
    home = clean[0]
    server = ServerProcess(home)
    alice = {"agent_name": "Alice", "agent_token": TOKENS["Alice"]}
    try:
        async def scenario():
            async with server.client() as client:
                inbox = await call(client, "fetch_inbox", project_key=FRONT, include_bodies=True, limit=50, **alice)
                sent = await call(client, "send_message", project_key=FRONT, sender_name="Alice", to=["Carol"],
                                  subject="Back on gitmail", body_md="Same token as before.",
                                  sender_token=TOKENS["Alice"])
                reply = await call(client, "reply_message", project_key=FRONT, message_id=9, sender_name="Alice",
                                   body_md="Thanks for the docs.", sender_token=TOKENS["Alice"])
                read = await call(client, "mark_message_read", project_key=FRONT, message_id=3, **alice)
                thread = await read_json(client, f"resource://thread/1?project={FRONT}&agent_name=Alice"
                                                 f"&agent_token={TOKENS['Alice']}")
                one = await read_json(client, f"resource://message/4?project={FRONT}&agent_name=Alice"
                                              f"&agent_token={TOKENS['Alice']}")
                found = await call(client, "search_messages", project_key=FRONT, query="endpoint", **alice)
                held = await call(client, "list_file_reservations", project_key=FRONT)
                wrong = await fail(client, "send_message", project_key=FRONT, sender_name="Alice", to=["Carol"],
                                   subject="x", body_md="x", sender_token=TOKENS["Dave"])
                retired = await fail(client, "send_message", project_key=FRONT, sender_name="Bob", to=["Alice"],
                                     subject="x", body_md="x", sender_token=TOKENS["Bob"])
                dave = await call(client, "fetch_inbox", project_key=BACK, agent_name="Dave",
                                  agent_token=TOKENS["Dave"])
                return inbox, sent, reply, read, thread, one, found, held, wrong, retired, dave

        inbox, sent, reply, read, thread, one, found, held, wrong, retired, dave = run(scenario())
    finally:
        server.stop()
    subjects = {m["subject"]: m for m in inbox}
    assert set(subjects) == {"Re: Release plan", "Budget", "API change"}  # 2 and 9 share a subject
    change = subjects["API change"]
    assert (change["from"], change["read_at"], change["acknowledged_at"]) == (
        f"Dave@{slug_for(BACK)}", "2026-01-06T09:05:00.000Z", "2026-01-06T09:06:00.000Z")
    assert subjects["Budget"]["read_at"] is None and change["body_md"] == "The `/orders` endpoint moves to v2."
    assert sent["count"] == 1 and reply["thread_id"] == "1" and reply["to"] == ["Carol"]
    assert read["read"] is True
    assert [m["subject"] for m in thread["messages"]] == ["Release plan", "Re: Release plan", "Re: Release plan",
                                                          "Re: Release plan"]
    assert one["id"] == change["id"] and one["created_ts"] == "2026-01-06T09:00:00.000Z"
    assert [hit["id"] for hit in found] == [change["id"]]
    assert [r["path_pattern"] for r in held["file_reservations"]] == ["src/checkout/*.ts"]
    assert wrong["code"] == "UNAUTHORIZED" and retired["code"] == "AGENT_INACTIVE"
    assert [m["subject"] for m in dave] == ["Deploy window"]
    assert gitmail(home, "fsck").returncode == 0
