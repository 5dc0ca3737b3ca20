"""Build slots through MCP: a real server on loopback, the official client, a clock the test moves."""

from __future__ import annotations

import pytest

from gitmail import Store

from .inprocess_server import InProcessServer
from .mcp_harness import call, fail, read_json, run

pytestmark = pytest.mark.slow  # a uvicorn server per test

PROJECT = "/work/projects/slots"


async def _register(server: InProcessServer, *names: str) -> list:
    clients = []
    for name in names:
        client = server.client()
        await client.__aenter__()
        await call(client, "ensure_project", human_key=PROJECT)
        await call(client, "register_agent", project_key=PROJECT, program="p", model="m", name=name)
        clients.append(client)
    return clients


def test_a_taken_over_build_slot_refuses_its_old_holder(home, wall):
    with InProcessServer(Store(home, background=False, wall=wall)) as server:
        async def scenario():
            blue, green = await _register(server, "Blue", "Green")
            try:
                mine = await call(blue, "acquire_build_slot", project_key=PROJECT, agent_name="Blue",
                                  slot="build-dir", ttl_seconds=60, reason="release build")
                assert mine["granted"] and mine["epoch"] == 1
                busy = await call(green, "acquire_build_slot", project_key=PROJECT, agent_name="Green",
                                  slot="build-dir")
                assert busy["granted"] is False and busy["holders"][0]["agent"] == "Blue"
                wall.advance(61)  # Blue's lease runs out without a renewal
                taken = await call(green, "acquire_build_slot", project_key=PROJECT, agent_name="Green",
                                   slot="build-dir")
                assert taken["granted"] and taken["epoch"] == 2
                assert taken["taken_over"] == [{"agent": "Blue", "epoch": 1}]
                stale = await fail(blue, "renew_build_slot", project_key=PROJECT, agent_name="Blue",
                                   slot="build-dir", epoch=1)
                assert stale["code"] == "STALE_EPOCH" and stale["data"]["holders"] == ["Green"]
                gone = await fail(blue, "release_build_slot", project_key=PROJECT, agent_name="Blue",
                                  slot="build-dir", epoch=1)
                assert gone["code"] == "STALE_EPOCH"
                renewed = await call(green, "renew_build_slot", project_key=PROJECT, agent_name="Green",
                                     slot="build-dir", epoch=2, extend_seconds=600)
                assert renewed["epoch"] == 2
                other = await fail(blue, "renew_build_slot", project_key=PROJECT, agent_name="Green",
                                   slot="build-dir", epoch=2)
                assert other["code"] == "UNAUTHORIZED"  # nobody renews another's holding
            finally:
                for client in (blue, green):
                    await client.__aexit__(None, None, None)

        run(scenario())


def test_a_shared_slot_admits_its_maximum_and_the_resource_shows_it(home, wall):
    with InProcessServer(Store(home, background=False, wall=wall)) as server:
        async def scenario():
            clients = await _register(server, "Blue", "Green", "Red")
            blue, green, red = clients
            try:
                for client, name in ((blue, "Blue"), (green, "Green")):
                    got = await call(client, "acquire_build_slot", project_key=PROJECT, agent_name=name,
                                     slot="test-db", exclusive=False, max_holders=2)
                    assert got["granted"], got
                full = await call(red, "acquire_build_slot", project_key=PROJECT, agent_name="Red",
                                  slot="test-db", exclusive=False, max_holders=2)
                assert full["granted"] is False and "at most 2" in full["reason"]
                shown = await read_json(red, f"resource://build_slots/{PROJECT}")
                slot = shown["build_slots"][0]
                assert (slot["slot"], slot["exclusive"], slot["max_holders"]) == ("test-db", False, 2)
                assert [h["agent"] for h in slot["holders"]] == ["Blue", "Green"]
                await call(blue, "release_build_slot", project_key=PROJECT, agent_name="Blue", slot="test-db",
                           epoch=1)
                joined = await call(red, "acquire_build_slot", project_key=PROJECT, agent_name="Red",
                                    slot="test-db", exclusive=False)
                assert joined["granted"] and joined["epoch"] == 3
            finally:
                for client in clients:
                    await client.__aexit__(None, None, None)

        run(scenario())
