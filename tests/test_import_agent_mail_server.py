"""A store written by a real mcp_agent_mail server (0.1.0 from PyPI), imported, and read through gitmail's tools.

The server runs in its own environment (:mod:`tests.agent_mail`), agents drive
it over MCP (``tests/agent_mail_driver.py``), it is stopped, and ``gitmail
import agent-mail`` takes its database and archive folder. Then a real
``gitmail serve`` answers the official client: every message in the right
inboxes with its read and acknowledgement times, search, threads and replies
(old ids included), attachments byte for byte, contacts, reservations, and a
clean ``gitmail fsck``.
"""

from __future__ import annotations

import base64
import json
import os
import sqlite3

import pytest

from gitmail.importers.agentmail_db import parse_time
from gitmail.model.clock import format_ts

from . import agent_mail
from .conftest import git
from .mcp_harness import ServerProcess, call, free_port, read_json, run
from .test_import_agent_mail_processes import gitmail

pytestmark = pytest.mark.slow  # the old server in its own environment, the importer, a gitmail server

SHOP, INFRA = "/data/projects/shop", "/data/projects/infra"


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """The folder, database, archive and ids of a store the old server wrote and was stopped on."""
    try:
        agent_mail.ensure()
    except RuntimeError as exc:
        pytest.fail(str(exc))
    folder = str(tmp_path_factory.mktemp("agent-mail"))
    server = agent_mail.AgentMailServer(folder, free_port())
    try:
        facts = server.drive()
    finally:
        server.stop()
    return server, facts


def receipt_times(database: str, message_id: int, agent: str) -> tuple[str | None, str | None]:
    """What the old server recorded for one recipient, as gitmail writes times."""
    with sqlite3.connect(database) as db:
        read, acked = db.execute("SELECT r.read_ts, r.ack_ts FROM message_recipients r JOIN agents a "
                                 "ON a.id = r.agent_id WHERE r.message_id = ? AND a.name = ?",
                                 (message_id, agent)).fetchone()
    return tuple(format_ts(t) if (t := parse_time(value)) else None for value in (read, acked))  # type: ignore[return-value]


@pytest.mark.timeout(900)
def test_a_store_written_by_a_real_server_reads_the_same_through_gitmail(written, tmp_path):
    old, facts = written
    home = str(tmp_path / "home")
    done = gitmail(home, "import", "agent-mail", old.database, "--archive", old.archive, "--json", "--quiet")
    assert done.returncode == 0, done.stdout + done.stderr  # nothing lost: only the server's suggestions noted
    report = json.loads(done.stdout)
    assert report["totals"]["messages"]["imported"] == 6 and report["totals"]["attachments"]["imported"] == 2
    tokens = {}
    for key, name in ((SHOP, "BlueLake"), (SHOP, "GreenCastle"), (SHOP, "RedStone"), (INFRA, "SilverPeak")):
        issued = gitmail(home, "agents", "reset-token", key, name, "--json")  # 0.1.0 gave agents no tokens
        assert issued.returncode == 0, issued.stderr
        tokens[name] = json.loads(issued.stdout)["registration_token"]

    def proof(name: str) -> dict[str, str]:
        return {"agent_name": name, "agent_token": tokens[name]}

    def query(name: str) -> str:
        return f"project={SHOP}&agent_name={name}&agent_token={tokens[name]}"

    server = ServerProcess(home, extra_args=("--tools", "all"))  # get_attachment is outside the default profile
    try:
        async def scenario():
            async with server.client() as client:
                inboxes = {name: await call(client, "fetch_inbox", project_key=SHOP, include_bodies=True,
                                            **proof(name)) for name in ("BlueLake", "GreenCastle", "RedStone")}
                infra = await call(client, "fetch_inbox", project_key=INFRA, **proof("SilverPeak"))
                found = await call(client, "search_messages", project_key=SHOP, query="migrations",
                                   **proof("GreenCastle"))
                reply = await call(client, "reply_message", project_key=SHOP, message_id=facts["plan"],
                                   sender_name="RedStone", body_md="And I the writers.",
                                   sender_token=tokens["RedStone"])
                read = await call(client, "mark_message_read", project_key=SHOP, message_id=facts["secret"],
                                  **proof("GreenCastle"))
                thread = await read_json(client, f"resource://thread/{facts['plan']}?{query('RedStone')}")
                ticket = await read_json(client, f"resource://thread/TKT-7?{query('RedStone')}")
                plan = await read_json(client, f"resource://message/{facts['plan']}?{query('RedStone')}")
                files = [await call(client, "get_attachment", project_key=SHOP, path=item["path"],
                                    **proof("RedStone"))
                         for item in plan["attachments"] + ticket["messages"][0]["attachments"]]
                active = await call(client, "list_file_reservations", project_key=SHOP)
                every = await call(client, "list_file_reservations", project_key=SHOP, active_only=False)
                contacts = await call(client, "list_contacts", project_key=SHOP, **proof("BlueLake"))
                return inboxes, infra, found, reply, read, thread, ticket, plan, files, active, every, contacts

        inboxes, infra, found, reply, read, thread, ticket, plan, files, active, every, contacts = run(scenario())
    finally:
        server.stop()

    def box(name: str) -> dict[str, dict]:
        return {message["subject"]: message for message in inboxes[name]}

    assert set(box("GreenCastle")) == {"Plan for the schema", "Budget"}
    assert set(box("RedStone")) == {"Plan for the schema", "Budget"} and box("RedStone")["Budget"]["kind"] == "bcc"
    assert set(box("BlueLake")) == {"Re: Plan for the schema", "Ticket seven", "Contact request from RedStone"}
    for name in ("GreenCastle", "RedStone"):
        seen = box(name)["Plan for the schema"]
        assert (seen["read_at"], seen["acknowledged_at"]) == receipt_times(old.database, facts["plan"], name)
    assert box("GreenCastle")["Plan for the schema"]["acknowledged_at"] is not None
    assert box("RedStone")["Plan for the schema"]["acknowledged_at"] is None
    assert box("GreenCastle")["Budget"]["read_at"] is None and read["read"] is True
    assert [m["subject"] for m in infra] == ["Rotate the keys"]
    assert [hit["subject"] for hit in found] == ["Plan for the schema"]
    assert reply["thread_id"] == str(facts["plan"]) and reply["to"] == ["BlueLake"]
    assert [m["subject"] for m in thread["messages"]] == ["Plan for the schema", "Re: Plan for the schema",
                                                          "Re: Plan for the schema"]
    assert thread["messages"][1]["from"] == "GreenCastle" and thread["messages"][2]["id"] == reply["id"]
    assert [m["subject"] for m in ticket["messages"]] == ["Ticket seven"]
    # Attachments: the file one from the old archive, byte for byte; the inline one as the body carries it.
    with sqlite3.connect(old.database) as db:
        stored = json.loads(db.execute("SELECT attachments FROM messages WHERE id = ?", (facts["plan"],)).fetchone()[0])
    with open(os.path.join(old.archive, stored[0]["path"]), "rb") as handle:
        assert base64.b64decode(files[0]["content_base64"]) == handle.read()
    assert files[0]["path"] in plan["body_md"] or files[0]["path"] == plan["attachments"][0]["path"]
    inline = base64.b64decode(files[1]["content_base64"])
    assert base64.b64encode(inline).decode() in ticket["messages"][0]["body_md"]
    assert [(r["agent"], r["path_pattern"]) for r in active["file_reservations"]] == [("GreenCastle",
                                                                                       "src/readers/*.py")]
    released = [r for r in every["file_reservations"] if r["agent"] == "BlueLake"]
    assert len(released) == 1 and released[0]["released_ts"]
    assert released[0]["path_pattern"] == "migrations"  # 'migrations/**' in gitmail's canonical form
    assert [(c["from"], c["to"], c["status"]) for c in contacts] == [("RedStone", "BlueLake", "approved")]
    assert gitmail(home, "fsck").returncode == 0
    authors = git("--git-dir", os.path.join(home, "projects", os.listdir(os.path.join(home, "projects"))[0],
                                            "archive.git"), "log", "--format=%an").split()
    assert {"BlueLake", "GreenCastle", "RedStone"} <= set(authors) or {"OrangeFox", "SilverPeak"} <= set(authors)
