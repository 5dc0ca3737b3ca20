"""The rest of the MCP surface over a real server: each tool's happy path and its main error."""

from __future__ import annotations

import uuid

import pytest

from .mcp_harness import call, fail, read_json, run

SHARES_SERVER = True  # each test makes a project of its own: the process's one server serves them all

pytestmark = pytest.mark.slow  # a real gitmail serve process


async def setup(client, project: str) -> None:
    await call(client, "ensure_project", human_key=project)
    for name in ("BlueLake", "GreenCastle"):
        await call(client, "register_agent", project_key=project, program="p", model="m", name=name)
        await call(client, "set_contact_policy", project_key=project, agent_name=name, policy="open")


def fresh() -> str:
    return f"/work/mcp-surface/{uuid.uuid4().hex[:10]}"


def test_project_lifecycle(server):
    project = fresh()

    async def scenario():
        async with server.client() as client:
            created = await call(client, "ensure_project", human_key=project)
            await call(client, "register_agent", project_key=project, program="p", model="m", name="Keeper")
            again = await call(client, "ensure_project", human_key=project + "/")
            archived = await call(client, "archive_project", project_key=project)
            listed = await read_json(client, "resource://projects")
            everything = await read_json(client, "resource://projects?include_archived=true")
            restored = await call(client, "unarchive_project", project_key=project)
            refused = await fail(client, "hard_delete_project", project_key=project, confirmation="yes")
            deleted = await call(client, "hard_delete_project", project_key=project, confirmation="I UNDERSTAND")
            gone = await fail(client, "archive_project", project_key=project)
            return created, again, archived, listed, everything, restored, refused, deleted, gone

    created, again, archived, listed, everything, restored, refused, deleted, gone = run(scenario())
    assert again["id"] == created["id"]
    assert archived["archived_at"] and restored["archived_at"] is None
    assert created["slug"] not in [p["slug"] for p in listed]
    assert created["slug"] in [p["slug"] for p in everything]
    assert refused["code"] == "CONFIRMATION_REQUIRED"
    assert deleted and gone["code"] == "NOT_FOUND"


def test_agent_lifecycle(server):
    project = fresh()

    async def scenario():
        async with server.client() as client:
            await setup(client, project)
            await call(client, "register_agent", project_key=project, program="p", model="m", name="OldOak")
            who = await call(client, "whois", project_key=project, agent_name="OldOak")
            dry = await call(client, "retire_inactive_agents", project_key=project, agent_name="BlueLake",
                             inactive_seconds=60, dry_run=True)
            dereg = await call(client, "deregister_agent", project_key=project, agent_name="OldOak")
            refused = await fail(client, "hard_delete_agent", project_key=project, agent_name="OldOak",
                                 confirmation="sure")
            deleted = await call(client, "hard_delete_agent", project_key=project, agent_name="OldOak",
                                 confirmation="I UNDERSTAND")
            gone = await fail(client, "whois", project_key=project, agent_name="OldOak")
            taken = await fail(client, "create_agent_identity", project_key=project, program="p", model="m",
                               name_hint="BlueLake")
            return who, dry, dereg, refused, deleted, gone, taken

    who, dry, dereg, refused, deleted, gone, taken = run(scenario())
    assert who["name"] == "OldOak" and "recent_commits" in who
    assert isinstance(dry, dict)
    assert dereg["status"] == "deregistered"
    assert refused["code"] == "CONFIRMATION_REQUIRED"
    assert gone["code"] == "NOT_FOUND"
    assert taken["code"] == "ALREADY_EXISTS"


def test_topics_search_summaries_and_retention(server):
    project = fresh()

    async def scenario():
        async with server.client() as client:
            await setup(client, project)
            first = await call(client, "send_message", project_key=project, sender_name="BlueLake",
                               to=["GreenCastle"], subject="Deploy window", topic="release",
                               body_md="We deploy on Friday.\n\n- TODO: freeze the schema")
            thread = first["deliveries"][0]["payload"]["thread_id"]
            await call(client, "reply_message", project_key=project, message_id=first["deliveries"][0]["payload"]["id"],
                       sender_name="GreenCastle", body_md="Agreed, the deploy is fine.")
            topic = await call(client, "fetch_topic", project_key=project, topic_name="release",
                               agent_name="BlueLake")
            bad_topic = await fail(client, "fetch_topic", project_key=project, topic_name="no spaces allowed",
                                   agent_name="BlueLake")
            # A search sees every message sent before it, taken into the index yet or not.
            hits = await call(client, "search_messages", project_key=project, query="deploy")
            bad_query = await fail(client, "search_messages", project_key=project, query='"unclosed')
            summary = await call(client, "summarize_thread", project_key=project, thread_id=thread,
                                 include_examples=True)
            recent = await call(client, "summarize_recent", project_key=project, since_hours=1)
            stored = await call(client, "fetch_summary", project_key=project)
            bad_hours = await fail(client, "summarize_recent", project_key=project, since_hours=-1)
            purge = await call(client, "purge_old_messages", project_key=project, max_age_days=30, dry_run=True)
            bad_purge = await fail(client, "purge_old_messages", project_key=project, max_age_days=0)
            prepared = await call(client, "macro_prepare_thread", project_key=project, thread_id=thread,
                                  program="p", model="m", agent_name="GreenCastle")
            return (topic, bad_topic, hits, bad_query, summary, recent, stored, bad_hours, purge, bad_purge,
                    prepared, thread)

    (topic, bad_topic, hits, bad_query, summary, recent, stored, bad_hours, purge, bad_purge, prepared,
     thread) = run(scenario())
    assert [m["subject"] for m in topic] == ["Re: Deploy window", "Deploy window"]  # replies keep the topic
    assert bad_topic["code"] == "INVALID_ARGUMENT"
    assert {h["subject"] for h in hits} == {"Deploy window", "Re: Deploy window"}
    assert bad_query["code"] == "INVALID_ARGUMENT"
    assert summary["thread_id"] == thread
    assert set(summary["summary"]["participants"]) == {"BlueLake", "GreenCastle"}
    assert recent and stored
    assert bad_hours["code"] == "INVALID_ARGUMENT"
    assert purge["dry_run"] is True and purge["purged"] == 0
    assert bad_purge["code"] == "INVALID_ARGUMENT"
    assert prepared["thread"]["thread_id"] == thread and prepared["agent"]["name"] == "GreenCastle"


def test_mailbox_outbox_and_views(server):
    project = fresh()

    async def scenario():
        async with server.client() as client:
            await setup(client, project)
            sent = await call(client, "send_message", project_key=project, sender_name="BlueLake",
                              to=["GreenCastle"], subject="Urgent fix", body_md="now", importance="urgent",
                              ack_required=True, bcc=["BlueLake"])
            mid = sent["deliveries"][0]["payload"]["id"]
            q = f"?project={project}"
            urgent = await read_json(client, f"resource://views/urgent-unread/GreenCastle{q}")
            ack_required = await read_json(client, f"resource://views/ack-required/GreenCastle{q}")
            overdue = await read_json(client, f"resource://views/ack-overdue/GreenCastle{q}&ttl_minutes=0")
            mailbox = await read_json(client, f"resource://mailbox/GreenCastle{q}")
            outbox = await read_json(client, f"resource://outbox/BlueLake{q}&include_bodies=true")
            inbox = await read_json(client, f"resource://inbox/GreenCastle{q}&urgent_only=true&limit=5")
            with pytest.raises(Exception) as bad_limit:
                await read_json(client, f"resource://inbox/GreenCastle{q}&limit=lots")
            await call(client, "acknowledge_message", project_key=project, agent_name="GreenCastle", message_id=mid)
            after_ack = await read_json(client, f"resource://views/ack-required/GreenCastle{q}")
            return mid, urgent, ack_required, overdue, mailbox, outbox, inbox, str(bad_limit.value), after_ack

    mid, urgent, ack_required, overdue, mailbox, outbox, inbox, bad_limit, after_ack = run(scenario())
    for view in (urgent, ack_required, overdue, inbox):
        assert [m["id"] for m in view["messages"]] == [mid]
    assert mid in [m["id"] for m in mailbox["messages"]]
    assert outbox["messages"][0]["id"] == mid and outbox["messages"][0]["body_md"] == "now"
    assert "INVALID_ARGUMENT" in bad_limit
    assert after_ack["messages"] == []
