"""An agent's state as MCP reports and keeps it: retired, asleep, replayed, dead; and a missing argument named.

Each test runs a real server on loopback in this process, over a store on
the test's hand-moved clock (:class:`tests.inprocess_server.InProcessServer`),
reached with the official MCP client, so days pass with ``wall.advance``.
"""

from __future__ import annotations

import subprocess
from typing import Any

import pytest

from gitmail.mail.facade import Mail

from .inprocess_server import InProcessServer
from .mcp_harness import call, fail, run

pytestmark = pytest.mark.slow  # a uvicorn server per test

PROJECT = "/data/projects/states"


async def agents(client: Any, *names: str) -> dict[str, str]:
    """The project with ``names`` registered (open to mail); their tokens."""
    await call(client, "ensure_project", human_key=PROJECT)
    tokens = {}
    for name in names:
        tokens[name] = (await call(client, "register_agent", project_key=PROJECT, program="p", model="m",
                                   name=name))["registration_token"]
        await call(client, "set_contact_policy", project_key=PROJECT, agent_name=name, policy="open")
    return tokens


def test_retiring_inactive_agents_spares_the_overseer_so_replies_to_the_human_still_go(store, wall):
    mail = Mail(store)
    with InProcessServer(store, mail=mail) as server:
        async def setup():
            async with server.client() as client:
                return await agents(client, "Alice", "Bob")

        tokens = run(setup())
        asked = mail.send_as_overseer(PROJECT, ["Alice"], "Status?", "Where are we?")
        wall.advance(3 * 86400)

        async def scenario():
            async with server.client() as client:
                swept = await call(client, "retire_inactive_agents", project_key=PROJECT, agent_name="Alice",
                                   inactive_seconds=86400, agent_token=tokens["Alice"])
                reply = await call(client, "reply_message", project_key=PROJECT, sender_name="Alice",
                                   message_id=asked["deliveries"][0]["payload"]["id"], body_md="On track.",
                                   sender_token=tokens["Alice"])
                return swept, reply

        swept, reply = run(scenario())
    assert [r["agent"] for r in swept["retired"]] == ["Bob"]
    assert reply["to"] == ["Overseer"]
    assert mail.whois(PROJECT, "Overseer", include_recent_commits=False)["status"] == "active"


def test_a_retried_sleep_returns_the_first_answer_though_the_agent_now_sleeps(store):
    with InProcessServer(store) as server:
        async def scenario():
            async with server.client() as client:
                await agents(client, "Ada")
                first = await call(client, "sleep_agent", project_key=PROJECT, agent_name="Ada",
                                   idempotency_key="nap-1")
                tip = store.archive(PROJECT).tip()
                again = await call(client, "sleep_agent", project_key=PROJECT, agent_name="Ada",
                                   idempotency_key="nap-1")
                other = await fail(client, "sleep_agent", project_key=PROJECT, agent_name="Ada",
                                   idempotency_key="nap-2")
                return first, again, tip, other

        first, again, tip, other = run(scenario())
        assert store.archive(PROJECT).tip() == tip
    assert first == {"agent": "Ada", "asleep": True, "until": "reply", "changed": True}
    assert again == {**first, "replayed": True}
    assert other["code"] == "AGENT_ASLEEP"  # a new request is decided afresh


def test_a_replayed_registration_says_so_and_shows_no_token(store):
    with InProcessServer(store) as server:
        async def scenario():
            async with server.client() as client:
                await call(client, "ensure_project", human_key=PROJECT)
                first = await call(client, "register_agent", project_key=PROJECT, program="p", model="m",
                                   name="Ada", idempotency_key="join-1")
                again = await call(client, "register_agent", project_key=PROJECT, program="p", model="m",
                                   name="Ada", idempotency_key="join-1")
                return first, again

        first, again = run(scenario())
    assert "replayed" not in first and first["registration_token"]
    assert again["replayed"] is True and "registration_token" not in again and again["id"] == first["id"]


def test_an_expired_child_is_reported_dead_as_its_writes_fail(store, wall):
    with InProcessServer(store) as server:
        async def scenario():
            async with server.client() as client:
                await agents(client, "Lead")
                child = await call(client, "spawn_agent", project_key=PROJECT, agent_name="Lead",
                                   scope=["editor@*"], name="Temp", expires_at="2030-01-01T00:00:00Z")
                alive = await call(client, "whois", project_key=PROJECT, agent_name="Temp")
                wall.advance(10 * 365 * 86400)
                dead = await call(client, "whois", project_key=PROJECT, agent_name="Temp")
                refused = await fail(client, "set_contact_policy", project_key=PROJECT, agent_name="Temp",
                                     policy="open", agent_token=child["registration_token"])
                return alive, dead, refused

        alive, dead, refused = run(scenario())
    assert alive["status"] == "active"
    assert refused["code"] == "AGENT_EXPIRED"
    assert dead["status"] == "dead"


def test_uninstalling_a_guard_without_its_project_names_the_missing_argument(store, tmp_path):
    repo = tmp_path / "code"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    with InProcessServer(store) as server:
        async def scenario():
            async with server.client() as client:
                await agents(client, "Ada")
                return await fail(client, "uninstall_precommit_guard", code_repo_path=str(repo))

        refused = run(scenario())
    assert refused["code"] == "INVALID_ARGUMENT" and refused["data"] == {"field": "project_key"}
    assert refused["message"].startswith("project_key is missing"), refused["message"]
