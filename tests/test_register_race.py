"""Sessions racing to register one new name: exactly one becomes that agent.

Eight worker processes each keep an MCP session to a real server over
Streamable HTTP; for each trial they meet at a barrier (so every one of them
is known to have reached the start line) and call ``register_agent`` with
that trial's new name at once, each spelling it its own way (``Racer3``,
``racer3``, ``RACER3``: names are one without regard to case). Exactly one
gets the token and the session binding; every other gets UNAUTHORIZED
saying the name is taken, cannot act as the agent, and has not touched its
profile.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
from typing import Any

import pytest

from gitmail import Mail, Store

from .mcp_harness import ServerProcess

SESSIONS = 8
TRIALS = 50
PROJECT = "/work/projects/racing"


def _contender(url: str, k: int, trials: int, barrier: Any, results: Any) -> None:
    """One worker process, one MCP session: per trial, the barrier, then register that trial's name.

    Bindings are per session and per name, so one session can race for every
    trial's new name in turn.
    """
    from fastmcp import Client

    async def main() -> None:
        async with Client(url, mode="legacy", timeout=120) as client:  # a client that keeps its MCP session
            await client.call_tool("health_check", {})  # the session exists before the first start line
            for t in range(trials):
                index = await asyncio.to_thread(barrier.wait, 120)
                name = (f"Racer{t}", f"racer{t}", f"RACER{t}")[k % 3]
                outcome = await client.call_tool("register_agent", {
                    "project_key": PROJECT, "program": f"contender-{k}", "model": "m", "name": name,
                }, raise_on_error=False)
                body = json.loads(outcome.content[0].text)
                acting = await client.call_tool("list_contacts", {"project_key": PROJECT, "agent_name": name},
                                                raise_on_error=False)  # needs the agent's proof, writes nothing
                results.put({"k": k, "trial": t, "barrier": index, "error": outcome.is_error, "body": body,
                             "bound": not acting.is_error})

    asyncio.run(main())


@pytest.mark.slow
@pytest.mark.timeout(600)  # 400 racing registrations: about a minute on a busy two-core machine
def test_exactly_one_of_eight_sessions_gets_a_new_name(tmp_path):
    home = str(tmp_path / "home")
    Mail(Store(home, background=False)).ensure_project(PROJECT)
    server = ServerProcess(home)
    spawn = multiprocessing.get_context("spawn")
    barrier = spawn.Barrier(SESSIONS)
    results = spawn.Queue()
    workers = [spawn.Process(target=_contender, args=(server.url, k, TRIALS, barrier, results), daemon=True)
               for k in range(SESSIONS)]
    try:
        for worker in workers:
            worker.start()
        outcomes = [results.get(timeout=300) for _ in range(SESSIONS * TRIALS)]
        for worker in workers:
            worker.join(60)
            assert worker.exitcode == 0
    finally:
        server.stop()
    profiles = {agent["name"].lower(): agent["program"] for agent in
                Mail(Store(home, background=False)).list_agents(PROJECT, active_only=False)}
    assert len(profiles) == TRIALS
    for t in range(TRIALS):
        rows = [row for row in outcomes if row["trial"] == t]
        assert sorted(row["barrier"] for row in rows) == list(range(SESSIONS)), "all eight reached the start line"
        winners = [row for row in rows if not row["error"]]
        assert len(winners) == 1, f"trial {t}: {len(winners)} sessions registered Racer{t}"
        winner = winners[0]
        assert winner["body"]["registration_token"].startswith("gmt_")
        assert [row["k"] for row in rows if row["bound"]] == [winner["k"]], "only the winner acts as the agent"
        for loser in (row for row in rows if row["error"]):
            assert loser["body"]["code"] == "UNAUTHORIZED"
            assert "already taken" in loser["body"]["message"] and "pick another name" in loser["body"]["message"]
        assert profiles[f"racer{t}"] == f"contender-{winner['k']}", "no loser overwrote the profile"
