"""Mail over MCP: sending, reading, receipts, contacts, cursors and long-poll, per-agent proof."""

from __future__ import annotations

import json
import subprocess
import time
import uuid

import pytest
from mcp_types import CallToolResult

from gitmail.storage.store import slug_for

from .mcp_harness import call, fail, read_json, run

SHARES_SERVER = True  # each test makes a project of its own: the process's one server serves them all

pytestmark = pytest.mark.slow  # a real gitmail serve process


async def pair(client, project: str) -> tuple[dict, dict]:
    """A project with BlueLake and GreenCastle, both open to mail, registered from ``client``."""
    await call(client, "ensure_project", human_key=project)
    blue = await call(client, "register_agent", project_key=project, program="claude-code", model="opus",
                      name="BlueLake")
    green = await call(client, "register_agent", project_key=project, program="codex", model="gpt",
                       name="GreenCastle")
    for name in ("BlueLake", "GreenCastle"):
        await call(client, "set_contact_policy", project_key=project, agent_name=name, policy="open")
    return blue, green


def fresh_project() -> str:
    return f"/work/mcp-mail/{uuid.uuid4().hex[:10]}"


def server_tip(server, project_slug: str) -> str:
    """The tip of a project's archive in a running server's store, as git sees it."""
    git_dir = f"{server.home}/projects/{project_slug}/archive.git"
    return subprocess.run(["git", "--git-dir", git_dir, "rev-parse", "main"], capture_output=True, text=True,
                          check=True).stdout.strip()


def test_send_fetch_read_ack_reply(server):
    project = fresh_project()

    async def scenario():
        async with server.client() as admin:
            blue, green = await pair(admin, project)
        async with server.client() as b, server.client() as g:
            sent = await call(b, "send_message", project_key=project, sender_name="BlueLake", to=["GreenCastle"],
                              subject="Plan", body_md="Please **review**.", ack_required=True,
                              sender_token=blue["registration_token"])
            msg = sent["deliveries"][0]["payload"]
            inbox = await call(g, "fetch_inbox", project_key=project, agent_name="GreenCastle", include_bodies=True,
                               agent_token=green["registration_token"])
            read = await call(g, "mark_message_read", project_key=project, agent_name="GreenCastle",
                              message_id=msg["id"], agent_token=green["registration_token"])
            ack = await call(g, "acknowledge_message", project_key=project, agent_name="GreenCastle",
                             message_id=msg["id"], agent_token=green["registration_token"])
            again = await call(g, "acknowledge_message", project_key=project, agent_name="GreenCastle",
                               message_id=msg["id"], agent_token=green["registration_token"])
            reply = await call(g, "reply_message", project_key=project, message_id=msg["id"],
                               sender_name="GreenCastle", body_md="Looks good.",
                               sender_token=green["registration_token"])
            thread = await read_json(b, f"resource://thread/{reply['thread_id']}?project={project}")
            one = await read_json(b, f"resource://message/{msg['id']}")
            return sent, msg, inbox, read, ack, again, reply, thread, one

    sent, msg, inbox, read, ack, again, reply, thread, one = run(scenario())
    assert sent["count"] == 1 and msg["subject"] == "Plan"
    assert [m["id"] for m in inbox] == [msg["id"]] and inbox[0]["body_md"] == "Please **review**."
    assert inbox[0]["ack_required"] is True and inbox[0]["read_at"] is None
    assert read["read"] is True and read["read_at"]
    assert ack["acknowledged"] is True and again["acknowledged_at"] == ack["acknowledged_at"]
    assert reply["subject"] == "Re: Plan" and reply["thread_id"] == msg["thread_id"]
    assert [m["id"] for m in thread["messages"]] == [msg["id"], reply["id"]]
    assert one["body_md"] == "Please **review**."


def test_no_agent_can_act_for_another_and_nothing_is_written(server):
    project = fresh_project()

    async def scenario():
        async with server.client() as admin:
            ensured = await call(admin, "ensure_project", human_key=project)
            blue, green = await pair(admin, project)
            sent = await call(admin, "send_message", project_key=project, sender_name="BlueLake",
                              to=["GreenCastle"], subject="hello", body_md="hi")
        before = server_tip(server, ensured["slug"])
        async with server.client() as mallory:
            forged = await fail(mallory, "send_message", project_key=project, sender_name="BlueLake",
                                to=["GreenCastle"], subject="forged", body_md="x",
                                sender_token=green["registration_token"])
            snoop = await fail(mallory, "fetch_inbox", project_key=project, agent_name="GreenCastle",
                               agent_token=blue["registration_token"])
            ack = await fail(mallory, "acknowledge_message", project_key=project, agent_name="GreenCastle",
                             message_id=sent["deliveries"][0]["payload"]["id"])
            with pytest.raises(Exception) as resource:
                await read_json(mallory, f"resource://inbox/GreenCastle?project={project}")
            allowed = await read_json(mallory, f"resource://inbox/GreenCastle?project={project}"
                                               f"&agent_token={green['registration_token']}")
        return ensured, before, forged, snoop, ack, str(resource.value), allowed

    ensured, before, forged, snoop, ack, resource, allowed = run(scenario())
    for body in (forged, snoop, ack):
        assert body["code"] == "UNAUTHORIZED"
    assert "UNAUTHORIZED" in resource
    assert allowed["count"] == 1
    assert server_tip(server, ensured["slug"]) == before


def test_domain_errors_come_back_with_codes_and_leave_the_archive_alone(server):
    project = fresh_project()

    async def scenario():
        async with server.client() as client:
            ensured = await call(client, "ensure_project", human_key=project)
            await pair(client, project)
            before = server_tip(server, ensured["slug"])
            unknown = await fail(client, "send_message", project_key=project, sender_name="BlueLake",
                                 to=["Nobody"], subject="s", body_md="b")
            await call(client, "set_contact_policy", project_key=project, agent_name="GreenCastle", policy="block_all")
            mid = server_tip(server, ensured["slug"])
            blocked = await fail(client, "send_message", project_key=project, sender_name="BlueLake",
                                 to=["GreenCastle"], subject="s", body_md="b")
            bad_id = await fail(client, "acknowledge_message", project_key=project, agent_name="GreenCastle",
                                message_id="not-an-id")
            after = server_tip(server, ensured["slug"])
            return before, unknown, mid, blocked, bad_id, after

    before, unknown, mid, blocked, bad_id, after = run(scenario())
    assert unknown["code"] in ("RECIPIENT_NOT_FOUND", "NOT_FOUND") and "Nobody" in unknown["message"]
    assert blocked["code"] == "CONTACT_BLOCKED"
    assert bad_id["code"] == "INVALID_ARGUMENT"
    assert mid != before and after == mid


def test_idempotent_send(server):
    project = fresh_project()

    async def scenario():
        async with server.client() as client:
            await pair(client, project)
            args = dict(project_key=project, sender_name="BlueLake", to=["GreenCastle"], subject="once",
                        body_md="only once", idempotency_key="k-1")
            first = await call(client, "send_message", **args)
            second = await call(client, "send_message", **args)
            conflict = await fail(client, "send_message", **dict(args, body_md="different"))
            inbox = await call(client, "fetch_inbox", project_key=project, agent_name="GreenCastle")
            return first, second, conflict, inbox

    first, second, conflict, inbox = run(scenario())
    assert first["deliveries"][0]["payload"]["id"] == second["deliveries"][0]["payload"]["id"]
    assert conflict["code"] == "IDEMPOTENCY_CONFLICT"
    assert len(inbox) == 1


def test_contact_request_and_handshake(server):
    project = fresh_project()

    async def scenario():
        async with server.client() as client, server.client() as green:
            await call(client, "ensure_project", human_key=project)
            for name in ("BlueLake", "RedStone"):
                await call(client, "register_agent", project_key=project, program="p", model="m", name=name)
            registered = await call(green, "register_agent", project_key=project, program="p", model="m",
                                    name="GreenCastle")
            await call(green, "set_contact_policy", project_key=project, agent_name="GreenCastle",
                       policy="contacts_only")
            cold = await fail(client, "send_message", project_key=project, sender_name="BlueLake",
                              to=["GreenCastle"], subject="s", body_md="b", auto_contact_if_blocked=False)
            request = await call(client, "request_contact", project_key=project, from_agent="BlueLake",
                                 to_agent="GreenCastle", reason="API contract")
            await call(green, "respond_contact", project_key=project, to_agent="GreenCastle", from_agent="BlueLake",
                       accept=True)
            warm = await call(client, "send_message", project_key=project, sender_name="BlueLake",
                              to=["GreenCastle"], subject="s", body_md="b")
            contacts = await call(green, "list_contacts", project_key=project, agent_name="GreenCastle")
            shake = await call(client, "macro_contact_handshake", project_key=project, requester="RedStone",
                               target="GreenCastle", reason="db", auto_accept=True, welcome_subject="hi",
                               welcome_body="first message", target_token=registered["registration_token"])
            return cold, request, warm, contacts, shake

    cold, request, warm, contacts, shake = run(scenario())
    assert cold["code"] == "CONTACT_REQUIRED" and "auto_contact_requested" not in cold["data"]
    assert warm["count"] == 1
    assert any(c.get("status") == "approved" for c in contacts)
    assert shake["response"] is not None and shake["welcome_message"]["count"] == 1


def test_auto_contact_requests_and_fails_and_is_not_queued(server):
    """The default: a send that needs contact files the request and fails; it is never delivered later on its own."""
    project = fresh_project()

    async def scenario():
        async with server.client() as blue, server.client() as green:
            await call(blue, "ensure_project", human_key=project)
            await call(blue, "register_agent", project_key=project, program="p", model="m", name="BlueLake")
            await call(green, "register_agent", project_key=project, program="p", model="m", name="GreenCastle")
            await call(green, "set_contact_policy", project_key=project, agent_name="GreenCastle",
                       policy="contacts_only")
            first = await fail(blue, "send_message", project_key=project, sender_name="BlueLake",
                               to=["GreenCastle"], subject="Plan", body_md="the plan")
            pending = await call(green, "list_contacts", project_key=project, agent_name="GreenCastle")
            await call(green, "respond_contact", project_key=project, to_agent="GreenCastle", from_agent="BlueLake",
                       accept=True)
            before = await call(green, "fetch_inbox", project_key=project, agent_name="GreenCastle")
            again = await call(blue, "send_message", project_key=project, sender_name="BlueLake",
                               to=["GreenCastle"], subject="Plan", body_md="the plan")
            after = await call(green, "fetch_inbox", project_key=project, agent_name="GreenCastle")
            return first, pending, before, again, after

    first, pending, before, again, after = run(scenario())
    assert first["code"] == "CONTACT_REQUIRED"
    (requested,) = first["data"]["auto_contact_requested"]
    assert requested["to"] == "GreenCastle" and requested["status"] == "pending"
    assert any(c["status"] == "pending" and c["from"] == "BlueLake" for c in pending)
    assert [m["subject"] for m in before] == ["Contact request from BlueLake"]  # approving delivered nothing
    assert again["count"] == 1
    assert [m["subject"] for m in after].count("Plan") == 1  # sent once, received once


def test_auto_contact_approves_in_band_when_the_session_acts_as_both(server):
    project = fresh_project()

    async def scenario():
        async with server.client() as both:
            await call(both, "ensure_project", human_key=project)
            for name in ("BlueLake", "GreenCastle"):
                await call(both, "register_agent", project_key=project, program="p", model="m", name=name)
            await call(both, "set_contact_policy", project_key=project, agent_name="GreenCastle",
                       policy="contacts_only")
            sent = await call(both, "send_message", project_key=project, sender_name="BlueLake",
                              to=["GreenCastle"], subject="Plan", body_md="the plan")
            links = await call(both, "list_contacts", project_key=project, agent_name="GreenCastle")
            return sent, links

    sent, links = run(scenario())
    assert sent["count"] == 1 and sent["contacts_approved"][0]["status"] == "approved"
    assert any(c["status"] == "approved" and c["from"] == "BlueLake" for c in links)


def test_a_handshake_that_cannot_accept_for_the_target_changes_nothing(server):
    project = fresh_project()

    async def scenario():
        async with server.client() as admin:
            await call(admin, "ensure_project", human_key=project)
            await call(admin, "register_agent", project_key=project, program="p", model="m", name="GreenCastle")
        async with server.client() as client:
            await call(client, "register_agent", project_key=project, program="p", model="m", name="RedStone")
            before = server_tip(server, slug_for(project))
            refused = await fail(client, "macro_contact_handshake", project_key=project, requester="RedStone",
                                 target="GreenCastle", auto_accept=True, welcome_subject="hi")
            after = server_tip(server, slug_for(project))
            contacts = await call(client, "list_contacts", project_key=project, agent_name="RedStone")
        return before, refused, after, contacts

    before, refused, after, contacts = run(scenario())
    assert refused["code"] == "UNAUTHORIZED" and refused["data"]["argument"] == "target_token"
    assert after == before, "no contact request was committed"
    assert contacts == [] or contacts == {"result": []}


def test_macro_start_session_registers_and_shows_the_inbox(server):
    project = fresh_project()

    async def scenario():
        async with server.client() as client:
            started = await call(client, "macro_start_session", human_key=project, program="claude-code",
                                 model="opus", task_description="docs")
            name = started["agent"]["name"]
            # The session is bound to the new agent: acting as it needs no token.
            policy = await call(client, "set_contact_policy", project_key=project, agent_name=name, policy="open")
        async with server.client() as other:
            again = await fail(other, "macro_start_session", human_key=project, program="x", model="y",
                               agent_name=name)
        return started, policy, again

    started, policy, again = run(scenario())
    assert started["project"]["human_key"] == project
    assert started["agent"]["registration_token"] and started["inbox"] == []
    assert policy["policy"] == "open"
    assert again["code"] == "UNAUTHORIZED"


def wire_bytes(result) -> int:
    return len(CallToolResult(content=result.content, is_error=result.is_error)
               .model_dump_json(by_alias=True, exclude_none=True).encode("utf-8"))


async def fifteen(client, project: str) -> None:
    """BlueLake and GreenCastle, and fifteen messages to GreenCastle whose bodies need escaping, some long."""
    await pair(client, project)
    for i in range(15):
        await call(client, "send_message", project_key=project, sender_name="BlueLake", to=["GreenCastle"],
                   subject=f"m{i}", body_md=f"message {i} " + "é\"\n" * (60 * (i % 4)))


def test_catch_up_and_cursor_pages_respect_their_budgets(server):
    project = fresh_project()

    async def scenario():
        async with server.client() as client:
            await fifteen(client, project)
            caught = await client.call_tool("catch_up", {"project_key": project, "agent_name": "GreenCastle"})
            pages, after = [], 0
            for _ in range(20):
                result = await client.call_tool("read_messages", {
                    "project_key": project, "agent_name": "GreenCastle", "after": after, "limit": 5,
                    "max_output_bytes": 2500})
                pages.append((wire_bytes(result), json.loads(result.content[0].text)))
                page = pages[-1][1]
                after = page["next_after"]
                if not page["has_more"]:
                    break
            ahead = await fail(client, "read_messages", project_key=project, agent_name="GreenCastle",
                               after=page["high_watermark"] + 1000)
            return caught, pages, ahead

    caught, pages, ahead = run(scenario())
    assert caught.structured_content is None
    doc = json.loads(caught.content[0].text)
    assert [m["subject"] for m in doc["messages"]] == [f"m{i}" for i in range(7, 15)]
    previews = [len(m["preview"].encode()) for m in doc["messages"]]
    assert max(previews) <= 2000 and sum(previews) <= 8000
    assert doc["older_messages"] is True
    subjects = []
    for size, page in pages:
        assert size <= 2500
        subjects += [m["subject"] for m in page["messages"]]
    assert subjects == [f"m{i}" for i in range(15)]  # every message once, in order, none cut
    assert ahead["code"] == "CURSOR_AHEAD"


def test_compact_pages_carry_every_message_once_in_fewer_bytes(server):
    project = fresh_project()

    async def scenario():
        async with server.client() as client:
            await fifteen(client, project)
            pages, after = [], 0
            for _ in range(20):
                result = await client.call_tool("read_compact", {
                    "project_key": project, "agent_name": "GreenCastle", "after": after, "limit": 5,
                    "max_output_bytes": 2500})
                pages.append((wire_bytes(result), json.loads(result.content[0].text)))
                after = pages[-1][1]["next_after"]
                if not pages[-1][1]["has_more"]:
                    break
            full = await client.call_tool("read_messages", {"project_key": project, "agent_name": "GreenCastle"})
            compact = await client.call_tool("read_compact", {"project_key": project, "agent_name": "GreenCastle"})
            ahead = await fail(client, "read_compact", project_key=project, agent_name="GreenCastle",
                               after=pages[-1][1]["high_watermark"] + 1000)
            return pages, wire_bytes(full), wire_bytes(compact), ahead

    pages, full, compact, ahead = run(scenario())
    seen = []
    for size, page in pages:
        assert size <= 2500 and page["reader"] == "GreenCastle" and page["project"] == project
        seen += [(page["authors"][m["by"]], m["subject"], m["body"]) for m in page["messages"]]
    assert [subject for _, subject, _ in seen] == [f"m{i}" for i in range(15)]  # every message once, in order
    assert {author for author, _, _ in seen} == {"BlueLake"}
    assert seen[3][2] == "message 3 " + "é\"\n" * 180  # whole bodies
    assert compact < full
    assert ahead["code"] == "CURSOR_AHEAD"


def test_long_poll_returns_as_soon_as_a_message_arrives(server):
    project = fresh_project()

    async def scenario():
        import asyncio

        async with server.client() as reader, server.client() as writer:
            await pair(reader, project)
            await call(writer, "register_agent", project_key=project, program="p", model="m", name="RedStone")
            start = await call(reader, "catch_up", project_key=project, agent_name="GreenCastle")
            started = time.monotonic()
            empty = await call(reader, "read_messages", project_key=project, agent_name="GreenCastle",
                               after=start["next_after"], wait_seconds=1)
            waited_empty = time.monotonic() - started

            async def send_later():
                # A head start for the read; one that has not begun waiting finds the message at once.
                await asyncio.sleep(1.0)
                await call(writer, "send_message", project_key=project, sender_name="RedStone", to=["GreenCastle"],
                           subject="wake up", body_md="now")

            started = time.monotonic()
            page, _ = await asyncio.gather(
                call(reader, "read_messages", project_key=project, agent_name="GreenCastle",
                     after=start["next_after"], wait_seconds=25),
                send_later())
            return empty, waited_empty, page, time.monotonic() - started

    empty, waited_empty, page, waited = run(scenario())
    assert empty["messages"] == [] and waited_empty >= 1  # a wait that runs out returns an empty page
    assert [m["subject"] for m in page["messages"]] == ["wake up"]
    assert waited < 25  # it returned with the message, not when its wait ran out (how soon: bench_mcp.py)


def test_long_poll_wakes_for_mail_written_by_another_process(server):
    project = fresh_project()

    async def scenario():
        import asyncio
        import sys

        from .mcp_harness import child_env

        async with server.client() as reader:
            await pair(reader, project)
            start = await call(reader, "catch_up", project_key=project, agent_name="GreenCastle")

            async def shell_send():
                await asyncio.sleep(0.5)  # a head start for the read, as above
                proc = await asyncio.create_subprocess_exec(
                    sys.executable, "-m", "gitmail", "send", project, "--from", "BlueLake", "--to", "GreenCastle",
                    "--subject", "from the shell", "--body", "hi", env=child_env(server.home))
                assert await proc.wait() == 0

            started = time.monotonic()
            page, _ = await asyncio.gather(
                call(reader, "read_messages", project_key=project, agent_name="GreenCastle",
                     after=start["next_after"], wait_seconds=25),
                shell_send())
            return page, time.monotonic() - started

    page, waited = run(scenario())
    assert [m["subject"] for m in page["messages"]] == ["from the shell"]
    assert waited < 25  # noticed before the wait ran out, though this server did not write it
