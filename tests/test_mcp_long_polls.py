"""Waiting reads do not starve the server: 60 long polls in place, and every other call still answers.

A real ``gitmail serve`` and 60 real MCP clients, each an agent's long-poll
loop (``read_messages(wait_seconds=25)`` again whenever a wait runs out, as
an agent does). The start line is the server's own count of waiting reads
(``health_check``'s ``long_polls``): a ``health_check`` that reports all 60
waiting answered while all 60 were in place, whatever the machine's speed.
Then reads past the caps are refused, a read that does not wait still
answers, and one message to every reader ends all 60 waits with it.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from gitmail.model.errors import GitmailError
from gitmail.server.longpoll import LongPolls

from .mcp_harness import ServerProcess, ToolFailed, call, fail, run
from .test_mcp_mail import fresh_project

READERS = 15  # agents, each with as many waiting reads as one agent may have (4 by default)...
PER_READER = 4
WAITS = READERS * PER_READER  # ...60 in all, which is also this server's cap


async def _give_up_after(seconds: float, what: str) -> None:
    """Keeps a broken build from hanging (like conftest.wait_until); asserts nothing about how soon."""
    await asyncio.sleep(seconds)
    raise AssertionError(f"gave up waiting for {what}")


async def _until(condition, what: str) -> Any:
    """Await ``condition()`` until it gives a true value, and return that value."""
    async def poll() -> Any:
        while not (value := await condition()):
            await asyncio.sleep(0.02)
        return value

    watchdog = asyncio.ensure_future(_give_up_after(60, what))
    try:
        done, _ = await asyncio.wait([asyncio.ensure_future(poll()), watchdog], return_when=asyncio.FIRST_COMPLETED)
        return done.pop().result()
    finally:
        watchdog.cancel()


async def _reader(server: ServerProcess, project: str, agent: str, token: str, after: int) -> dict[str, Any]:
    """One agent's long-poll loop in its own MCP session: the first page that holds mail.

    Refused for a full server (a probe below took the place of a wait that
    had just run out), it asks again, as an agent told so would.
    """
    async with server.client() as client:
        while True:
            try:
                page = await call(client, "read_messages", project_key=project, agent_name=agent, after=after,
                                  wait_seconds=25, agent_token=token)
            except ToolFailed as refused:
                assert refused.body["code"] == "TOO_MANY_WAITS", refused.body
                continue
            if page["messages"]:
                return page


async def _refused_while_full(client, **arguments: Any) -> dict[str, Any]:
    """A waiting read made while the caps are full: refused. One made in the instant a reader's wait ran
    out and before it waited again is served (its wait is short) and the read is made again."""
    while True:
        try:
            await call(client, "read_messages", wait_seconds=0.1, **arguments)
        except ToolFailed as refused:
            return refused.body


@pytest.mark.slow  # a real gitmail serve process and 60 clients
def test_sixty_waiting_reads_leave_the_server_answering(tmp_path):
    server = ServerProcess(str(tmp_path / "home"), env={"GITMAIL_MAX_WAITS": str(WAITS)})
    project = fresh_project()
    names = [f"Reader{i}" for i in range(READERS)]

    async def scenario():
        async with server.client() as admin:
            await call(admin, "ensure_project", human_key=project)
            tokens = {}
            for name in [*names, "Writer", "Latecomer"]:
                agent = await call(admin, "register_agent", project_key=project, program="p", model="m", name=name)
                tokens[name] = agent["registration_token"]
                await call(admin, "set_contact_policy", project_key=project, agent_name=name, policy="open")
            start = (await call(admin, "catch_up", project_key=project, agent_name="Reader0",
                                agent_token=tokens["Reader0"]))["next_after"]
            readers = [asyncio.ensure_future(_reader(server, project, name, tokens[name], start))
                       for name in names for _ in range(PER_READER)]

            async def all_waiting() -> dict[str, Any] | None:
                health = await call(admin, "health_check")
                return health if health["long_polls"]["waiting"] == WAITS else None

            health = await _until(all_waiting, f"{WAITS} reads waiting at once")
            # This health_check answered while all 60 waited: it counted them. None of them has returned.
            assert health["status"] == "ok" and not any(reader.done() for reader in readers)
            assert health["long_polls"] == {"waiting": WAITS, "max_waiting": WAITS, "max_waiting_per_agent": 4}

            own_cap = await _refused_while_full(admin, project_key=project, agent_name="Reader0", after=start,
                                                agent_token=tokens["Reader0"])
            server_cap = await _refused_while_full(admin, project_key=project, agent_name="Latecomer",
                                                   after=start, agent_token=tokens["Latecomer"])
            at_once = await call(admin, "read_messages", project_key=project, agent_name="Reader0", after=start,
                                 agent_token=tokens["Reader0"])
            unknown = await fail(admin, "read_messages", project_key=project, agent_name="Nobody", wait_seconds=25)
            assert not any(reader.done() for reader in readers)

            await call(admin, "send_message", project_key=project, sender_name="Writer", to=names,
                       subject="wake up", body_md="all of you", sender_token=tokens["Writer"])
            pages = await asyncio.gather(*readers)
            after = (await call(admin, "health_check"))["long_polls"]["waiting"]
            return own_cap, server_cap, at_once, unknown, pages, after

    try:
        own_cap, server_cap, at_once, unknown, pages, after = run(scenario())
    finally:
        server.stop()
    assert own_cap["code"] == "TOO_MANY_WAITS" and own_cap["data"]["scope"] == "agent"
    assert "GITMAIL_MAX_WAITS_PER_AGENT" in own_cap["message"] and "wait_seconds=0" in own_cap["message"]
    assert server_cap["code"] == "TOO_MANY_WAITS" and server_cap["data"]["scope"] == "server"
    assert "GITMAIL_MAX_WAITS" in server_cap["message"] and "wait_seconds=0" in server_cap["message"]
    assert at_once["messages"] == []  # a read that does not wait is never held to the caps
    assert unknown["code"] == "NOT_FOUND"  # an unknown agent is told so at once, and waits for nothing
    assert [[m["subject"] for m in page["messages"]] for page in pages] == [["wake up"]] * WAITS
    assert after == 0


@pytest.mark.parametrize("setting", ["GITMAIL_MAX_WAITS", "GITMAIL_MAX_WAITS_PER_AGENT"])
@pytest.mark.parametrize("value", ["0", "-1", "many", "2.5"])
def test_a_cap_the_server_cannot_use_stops_it_naming_the_setting(setting, value):
    with pytest.raises(GitmailError) as info:
        LongPolls.from_env({setting: value})
    assert info.value.code == "INVALID_ARGUMENT" and setting in info.value.message
    assert LongPolls.from_env({setting: "7"}).state()["max_waiting" if setting == "GITMAIL_MAX_WAITS"
                                                      else "max_waiting_per_agent"] == 7
