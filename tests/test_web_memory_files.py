"""The web view's pages for an agent's card, the project's memory and skills, and its files.

A real server (the application ``gitmail serve`` runs, in process, on a
loopback port): cards are published over MCP with the official client, so a
webhook's URL and secret really are in the server's local state, and the
agent's page must show neither.
"""

from __future__ import annotations

import hashlib
import re

import httpx2 as httpx

from gitmail import Mail, Store
from gitmail.mail.facade import SendOptions
from gitmail.server.wake import Wakes

from .inprocess_server import InProcessServer
from .mcp_harness import call, run
from .wake_helpers import Receiver

PROJECT = "/work/web-memory/project"


def _project(mail: Mail) -> str:
    """BlueLake and GreenCastle, open to mail; BlueLake's token."""
    mail.ensure_project(PROJECT)
    tokens = [mail.register_agent(PROJECT, "p", "m", name=name).registration_token
              for name in ("BlueLake", "GreenCastle")]
    for name in ("BlueLake", "GreenCastle"):
        mail.set_contact_policy(PROJECT, name, "open")
    return tokens[0]


def test_the_agent_page_shows_the_card_version_and_wake_channel_never_the_webhook_url_or_secret(tmp_path):
    store = Store(str(tmp_path / "home"), background=False, durable=False)
    mail = Mail(store)
    token = _project(mail)
    receiver = Receiver()
    slug = store.resolve(PROJECT)
    try:
        with InProcessServer(store, mail=mail, wakes=Wakes.serving(store, mail)) as server:
            async def publish():
                async with server.client() as client:
                    await call(client, "set_card", project_key=PROJECT, agent_name="BlueLake", vendor="acme",
                               agent_token=token)
                    return await call(client, "set_card", project_key=PROJECT, agent_name="BlueLake",
                                      wake_channel="webhook", webhook_url=receiver.url)

            card = run(publish())
            with httpx.Client(base_url=server.base, timeout=60) as tab:
                blue = tab.get(f"/ui/p/{slug}/agents/BlueLake")
                green = tab.get(f"/ui/p/{slug}/agents/GreenCastle")
    finally:
        receiver.close()
    assert blue.status_code == 200 and card["webhook_secret"]
    assert re.search(r'id="card">version 2; woken by webhook<', blue.text)
    assert re.search(r'id="card">version 0; woken by brief<', green.text)
    assert receiver.url not in blue.text and receiver.url.split("//")[1] not in blue.text
    assert card["webhook_secret"] not in blue.text


def test_the_memory_page_shows_the_defaults_and_the_archives_memory_folders_with_their_text_escaped(store):
    mail = Mail(store)
    _project(mail)
    text = "# Ops\n<script>alert(1)</script> page the lead\n"
    mail.write_memory(PROJECT, "BlueLake", folder="ops", file="AGENTS.md", text=text)
    mail.write_memory(PROJECT, "BlueLake", folder="ops", file="skills/rollback/SKILL.md", text="# Roll back\n")
    mail.set_org_context(PROJECT, "BlueLake", load_memory_and_skills=["archive:ops"], folder_hints=False)
    for folder, file in (("ops", "CLAUDE.md"), ("old", "AGENTS.md")):  # removed files are not shown
        mail.write_memory(PROJECT, "BlueLake", folder=folder, file=file, text="gone soon\n")
        mail.write_memory(PROJECT, "BlueLake", folder=folder, file=file, remove=True)
    slug = store.resolve(PROJECT)
    with InProcessServer(store, mail=mail) as server, httpx.Client(base_url=server.base, timeout=60) as tab:
        page = tab.get(f"/ui/p/{slug}/memory")
    assert page.status_code == 200
    assert "CLAUDE.md" not in page.text and 'id="folder-old"' not in page.text and "gone soon" not in page.text
    assert re.search(r'id="default-folders"><code>archive:ops</code></dd>', page.text)
    assert 'id="folder-hints">off<' in page.text and 'id="folder-ops"' in page.text
    assert "<code>AGENTS.md</code>" in page.text and "<code>skills/rollback/SKILL.md</code>" in page.text
    assert hashlib.sha256(text.encode()).hexdigest() in page.text
    assert "<script>alert(1)" not in page.text and "&lt;script&gt;alert(1)&lt;/script&gt;" in page.text


def test_the_files_page_lists_newest_first_a_page_at_a_time_with_the_messages_using_each_and_downloads(store):
    mail = Mail(store)
    _project(mail)
    ids = [mail.upload_file(PROJECT, "BlueLake", f"file {i}\n".encode(), name=f"f{i}.txt").file.file_id
           for i in range(27)]
    sent = mail.send_message(PROJECT, "BlueLake", ["GreenCastle"], "the logs", "attached",
                             SendOptions(attachment_ids=[ids[3]]))
    newest_first = [f.file_id for f in mail.list_files(PROJECT).files]
    slug = store.resolve(PROJECT)
    with InProcessServer(store, mail=mail) as server, httpx.Client(base_url=server.base, timeout=60) as tab:
        first, second = tab.get(f"/ui/p/{slug}/files"), tab.get(f"/ui/p/{slug}/files?page=2")
        got = tab.get(f"/ui/p/{slug}/files/{ids[3]}")
        missing = tab.get(f"/ui/p/{slug}/files/{'0' * 64}")
        malformed = tab.get(f"/ui/p/{slug}/files/not-an-id")
    shown = re.findall(r'id="file-([0-9a-f]{64})"', first.text) + re.findall(r'id="file-([0-9a-f]{64})"',
                                                                              second.text)
    assert first.status_code == 200 and shown == newest_first and len(re.findall('id="file-', first.text)) == 25
    row = first.text if ids[3] in re.findall(r'id="file-([0-9a-f]{64})"', first.text) else second.text
    message_id = sent["deliveries"][0]["payload"]["id"]
    assert f"#m-{message_id}\">the logs</a>" in row
    assert got.status_code == 200 and got.content == b"file 3\n"
    assert got.headers["content-type"] == "application/octet-stream" and "f3.txt" in got.headers[
        "content-disposition"]
    assert missing.status_code == 404 and malformed.status_code == 400


def test_with_a_token_a_file_is_downloaded_only_by_a_signed_in_session(store):
    mail = Mail(store)
    _project(mail)
    file_id = mail.upload_file(PROJECT, "BlueLake", b"secret numbers\n", name="n.txt").file.file_id
    slug = store.resolve(PROJECT)
    with InProcessServer(store, mail=mail, token="web-token") as server, \
            httpx.Client(base_url=server.base, timeout=60) as tab:
        anonymous = tab.get(f"/ui/p/{slug}/files/{file_id}")
        listing = tab.get(f"/ui/p/{slug}/files", follow_redirects=False)
    assert anonymous.status_code == 401 and b"secret" not in anonymous.content
    assert listing.status_code != 200 and file_id not in listing.text
