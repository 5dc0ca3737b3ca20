"""Channels over MCP: the channels family's tools, and catch_up and read_compact reading a channel."""

from __future__ import annotations

import asyncio
import json

import pytest

from gitmail.storage.store import slug_for

from .mcp_harness import call, fail, run
from .test_mcp_mail import fresh_project, pair, server_tip, wire_bytes

SHARES_SERVER = True  # each test makes a project of its own

pytestmark = pytest.mark.slow  # a real gitmail serve process


def test_create_post_list_and_read_a_channel(server):
    project = fresh_project()

    async def scenario():
        async with server.client() as client:
            blue, green = await pair(client, project)
            made = await call(client, "create_channel", project_key=project, agent_name="BlueLake",
                              channel="#deploys", purpose="what ships", idempotency_key="deploys-1",
                              agent_token=blue["registration_token"])
            again = await call(client, "create_channel", project_key=project, agent_name="BlueLake",
                               channel="#deploys", purpose="what ships", idempotency_key="deploys-1",
                               agent_token=blue["registration_token"])
            clash = await fail(client, "create_channel", project_key=project, agent_name="BlueLake",
                               channel="reviews", idempotency_key="deploys-1", agent_token=blue["registration_token"])
            posted = [await call(client, "post_channel", project_key=project, agent_name=name, channel="deploys",
                                 body_md=f"release {i}", agent_token=token["registration_token"])
                      for i, (name, token) in enumerate([("BlueLake", blue), ("GreenCastle", green)] * 3)]
            listed = await call(client, "list_channels", project_key=project, agent_name="GreenCastle",
                                agent_token=green["registration_token"])
            page = await call(client, "read_channel", project_key=project, agent_name="GreenCastle",
                              channel="deploys", after=2, limit=2, agent_token=green["registration_token"])
            found = await call(client, "search_channel", project_key=project, agent_name="GreenCastle",
                               channel="deploys", query="RELEASE 4", agent_token=green["registration_token"])
            return made, again, clash, posted, listed, page, found

    made, again, clash, posted, listed, page, found = run(scenario())
    assert [(p["seq"], p["body_md"]) for p in found["posts"]] == [(5, "release 4")] and found["next_after"] == 6
    assert made["created"] is True and again["created"] is False and again["channel"] == made["channel"]
    assert clash["code"] == "IDEMPOTENCY_CONFLICT"
    assert [p["seq"] for p in posted] == [1, 2, 3, 4, 5, 6]
    assert listed["channels"] == [{**made["channel"], "posts": 6}]
    assert [(p["seq"], p["from"], p["body_md"]) for p in page["posts"]] == [(3, "BlueLake", "release 2"),
                                                                         (4, "GreenCastle", "release 3")]
    assert page["has_more"] is True and page["next_after"] == 4 and page["channel"] == "deploys"


def test_catch_up_and_read_compact_read_a_channel_by_its_sequence(server):
    project = fresh_project()

    async def scenario():
        async with server.client() as client:
            blue, _ = await pair(client, project)
            await call(client, "create_channel", project_key=project, agent_name="BlueLake", channel="deploys")
            for i in range(14):
                body = f"post {i}" + (" " + "x" * 3000 if i == 13 else "")
                await call(client, "post_channel", project_key=project, agent_name="BlueLake", channel="deploys",
                           body_md=body)
            await call(client, "send_message", project_key=project, sender_name="BlueLake", to=["GreenCastle"],
                       subject="mail", body_md="not in the channel")
            caught = await call(client, "catch_up", project_key=project, agent_name="GreenCastle", channel="deploys")
            most = await call(client, "catch_up", project_key=project, agent_name="GreenCastle", channel="deploys",
                              limit=12)
            inbox = await call(client, "catch_up", project_key=project, agent_name="GreenCastle")
            pages, after = [], 0
            for _ in range(20):
                result = await client.call_tool("read_compact", {
                    "project_key": project, "agent_name": "GreenCastle", "channel": "deploys", "after": after,
                    "limit": 5, "max_output_bytes": 1500})
                pages.append((wire_bytes(result), json.loads(result.content[0].text)))
                after = pages[-1][1]["next_after"]
                if not pages[-1][1]["has_more"]:
                    break
            too_many = await fail(client, "catch_up", project_key=project, agent_name="GreenCastle",
                                  channel="deploys", limit=13)
            return caught, most, inbox, pages, too_many

    caught, most, inbox, pages, too_many = run(scenario())
    assert caught["channel"] == "deploys" and [m["seq"] for m in caught["messages"]] == list(range(7, 15))
    assert caught["next_after"] == 14 and caught["older_messages"] is True
    newest = caught["messages"][-1]
    assert newest["preview_truncated"] is True and newest["full_read"]["tool"] == "read_channel"
    assert newest["full_read"]["arguments"]["after"] == 13 and newest["full_read"]["arguments"]["limit"] == 1
    assert len(most["messages"]) == 12
    assert [m["subject"] for m in inbox["messages"]] == ["mail"] and "channel" not in inbox
    assert too_many["code"] == "INVALID_ARGUMENT"
    seen, stuck = [], None
    for size, page in pages:
        assert size <= 1500 and page["channel"] == "deploys" and page["reader"] == "GreenCastle"
        assert set(page["authors"].values()) <= {"BlueLake"}
        seen += [m["body"] for m in page["messages"]]
        if "recovery" in page:
            stuck = page
    assert seen == [f"post {i}" for i in range(13)]  # whole bodies, in order, the too-big one not skipped
    assert stuck is not None and stuck["next_after"] == 13 and stuck["recovery"]["tool"] == "read_channel"
    assert stuck["recovery"]["arguments"] == {"project_key": stuck["project"], "agent_name": "GreenCastle",
                                              "channel": "deploys", "after": 13, "limit": 1}


def test_refusals_carry_codes_and_change_nothing(server):
    project = fresh_project()

    async def scenario():
        async with server.client() as client:
            blue, green = await pair(client, project)
            await call(client, "create_channel", project_key=project, agent_name="BlueLake", channel="deploys")
        tip = server_tip(server, slug_for(project))
        async with server.client() as stranger:  # a session that proved no agent of the project
            errors = {
                "bad name": await fail(stranger, "create_channel", project_key=project, agent_name="BlueLake",
                                       channel="no spaces", agent_token=blue["registration_token"]),
                "unknown": await fail(stranger, "post_channel", project_key=project, agent_name="BlueLake",
                                      channel="nowhere", body_md="hi", agent_token=blue["registration_token"]),
                "too long": await fail(stranger, "post_channel", project_key=project, agent_name="BlueLake",
                                       channel="deploys", body_md="x" * 70_000,
                                       agent_token=blue["registration_token"]),
                "unproved": await fail(stranger, "post_channel", project_key=project, agent_name="GreenCastle",
                                       channel="deploys", body_md="hi"),
                "exists": await fail(stranger, "create_channel", project_key=project, agent_name="GreenCastle",
                                     channel="deploys", agent_token=green["registration_token"]),
            }
        return tip, errors

    tip, errors = run(scenario())
    assert {what: body["code"] for what, body in errors.items()} == {
        "bad name": "INVALID_ARGUMENT", "unknown": "NOT_FOUND", "too long": "INVALID_ARGUMENT",
        "unproved": "UNAUTHORIZED", "exists": "ALREADY_EXISTS"}
    assert all(body["message"] for body in errors.values())
    assert server_tip(server, slug_for(project)) == tip


def test_a_waiting_channel_read_returns_the_post_written_meanwhile(server):
    project = fresh_project()

    async def scenario():
        async with server.client() as client, server.client() as other:
            blue, _ = await pair(client, project)
            await call(client, "create_channel", project_key=project, agent_name="BlueLake", channel="deploys")
            high = (await call(client, "read_channel", project_key=project, agent_name="GreenCastle",
                               channel="deploys"))["next_after"]
            waiting = asyncio.ensure_future(call(client, "read_channel", project_key=project,
                                                 agent_name="GreenCastle", channel="deploys", after=high,
                                                 wait_seconds=25))
            await call(other, "post_channel", project_key=project, agent_name="BlueLake", channel="deploys",
                       body_md="shipped", agent_token=blue["registration_token"])
            return await waiting

    page = run(scenario())
    assert [(p["seq"], p["body_md"]) for p in page["posts"]] == [(1, "shipped")]
