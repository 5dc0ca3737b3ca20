"""Benchmark of waiting reads: what many long polls cost a server, and what the other calls see meanwhile.

Run: ``python benchmarks/bench_long_polls.py`` (60 waiting reads by
default; ``--waits 120`` for more, ``--samples`` for the p50s).

A real server (``serve_with_floor.py``, as in ``bench_mcp.py``) runs in a
child process on a free loopback port with a throw-away store; 15 agents
keep ``--waits`` reads waiting (``read_messages(wait_seconds=25)``, each in
its own HTTP request, again whenever one runs out, as an agent's loop does).
Measured, in the same run:

1. ``health_check`` p50 with no read waiting, and while all wait (the
   ratio is the point: a waiting read must not hold a worker thread);
2. the server's CPU per second while idle, without and with the waits
   (what a waiting read costs while nothing happens: its look for changes
   nobody announced, every second);
3. from one message sent to all 15 agents until the first and until the
   last waiting read has returned with it, beside a ``read_messages`` that
   does not wait (each woken read reads again, as that one does).

Prints a table, the load average before and after, then one JSON line with
every figure.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from bench_mcp import FLOOR, cpu_seconds, load_average, start_server  # beside this file
from fastmcp import Client

READERS = 15
IDLE_WINDOW = 5.0  # seconds of idle CPU measured


async def _call(client: Client, tool: str, **arguments: Any) -> Any:
    result = await client.call_tool(tool, arguments, raise_on_error=False)
    if result.is_error:
        raise SystemExit(f"{tool} failed: {result.content[0].text}")
    return result.structured_content if result.structured_content is not None else json.loads(
        result.content[0].text)


async def _p50(client: Client, tool: str, samples: int) -> float:
    """p50 in ms of ``tool``, each call beside a call of the no-op tool (so a busy machine hits both alike)."""
    times = []
    for _ in range(samples):
        await _call(client, FLOOR)
        started = time.perf_counter()
        await _call(client, tool)
        times.append((time.perf_counter() - started) * 1000)
    return round(statistics.median(times), 2)


async def _p50_read(client: Client, project: str, after: int, samples: int) -> float:
    times = []
    for _ in range(samples):
        await _call(client, FLOOR)
        started = time.perf_counter()
        await _call(client, "read_messages", project_key=project, agent_name="Reader0", after=after)
        times.append((time.perf_counter() - started) * 1000)
    return round(statistics.median(times), 2)


async def _idle_cpu(pid: int) -> float:
    """The server's CPU seconds per second over IDLE_WINDOW seconds of nothing happening."""
    before = cpu_seconds(pid)
    await asyncio.sleep(IDLE_WINDOW)
    return round((cpu_seconds(pid) - before) / IDLE_WINDOW, 4)


def _post(url: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """One session-less JSON-RPC call (a script's POST): lighter on the client than an MCP session."""
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                       "params": {"name": tool, "arguments": arguments}}).encode()
    request = urllib.request.Request(url, data=body, headers={"content-type": "application/json",
                                                              "accept": "application/json, text/event-stream"})
    with urllib.request.urlopen(request, timeout=60) as response:
        result = json.loads(response.read())["result"]
    if result.get("isError"):
        raise SystemExit(f"{tool} failed: {result['content'][0]['text']}")
    return json.loads(result["content"][0]["text"])


def _reader(url: str, project: str, agent: str, token: str, after: int) -> float:
    """One long-poll loop, in a thread of its own; the moment (perf_counter) it returned with mail.

    The readers are plain HTTP calls in threads, not MCP client sessions:
    60 sessions in one client process take seconds to take in 60 answers
    that arrive together, which would be measured instead of the server.
    """
    while True:
        page = _post(url, "read_messages", {"project_key": project, "agent_name": agent, "after": after,
                                            "wait_seconds": 25, "agent_token": token})
        if page["messages"]:
            return time.perf_counter()


async def run(url: str, pid: int, waits: int, samples: int) -> dict[str, Any]:
    project = "/bench/long-polls"
    names = [f"Reader{i}" for i in range(READERS)]
    async with Client(url, mode="legacy", timeout=60) as admin:
        await _call(admin, "ensure_project", human_key=project)
        tokens = {}
        for name in [*names, "Writer"]:
            agent = await _call(admin, "register_agent", project_key=project, program="bench", model="m", name=name)
            tokens[name] = agent["registration_token"]
            await _call(admin, "set_contact_policy", project_key=project, agent_name=name, policy="open")
        start = (await _call(admin, "catch_up", project_key=project, agent_name="Reader0"))["next_after"]
        await asyncio.sleep(2)  # the registrations' background work settles
        out: dict[str, Any] = {"waits": waits, "health_p50_ms_idle": await _p50(admin, "health_check", samples),
                               "server_cpu_per_s_idle": await _idle_cpu(pid)}
        loop = asyncio.get_running_loop()
        threads = ThreadPoolExecutor(max_workers=waits, thread_name_prefix="reader")
        readers = [loop.run_in_executor(threads, _reader, url, project, names[i % READERS], tokens[names[i % READERS]],
                                        start)
                   for i in range(waits)]
        while (await _call(admin, "health_check"))["long_polls"]["waiting"] < waits:
            await asyncio.sleep(0.05)
        out["health_p50_ms_waiting"] = await _p50(admin, "health_check", samples)
        out["server_cpu_per_s_waiting"] = await _idle_cpu(pid)
        sent = time.perf_counter()
        await _call(admin, "send_message", project_key=project, sender_name="Writer", to=names, subject="wake",
                    body_md="up")
        woken = await asyncio.gather(*readers)
        threads.shutdown()
        out["all_woken_ms"] = round((max(woken) - sent) * 1000, 1)
        out["first_woken_ms"] = round((min(woken) - sent) * 1000, 1)
        out["read_p50_ms"] = await _p50_read(admin, project, start, samples)
        out["health_ratio"] = round(out["health_p50_ms_waiting"] / out["health_p50_ms_idle"], 2)
        out["cpu_per_s_per_wait"] = round((out["server_cpu_per_s_waiting"] - out["server_cpu_per_s_idle"]) / waits,
                                          5)
        return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--waits", type=int, default=60, help="reads kept waiting at once (at most 4 per agent)")
    parser.add_argument("--samples", type=int, default=40, help="calls for each p50")
    args = parser.parse_args()
    if not 1 <= args.waits <= 4 * READERS:
        raise SystemExit(f"--waits must be from 1 to {4 * READERS} ({READERS} agents, 4 waiting reads each)")
    load_before = load_average()
    with tempfile.TemporaryDirectory(prefix="gitmail-bench-polls-") as home:
        proc, url = start_server(home)
        try:
            figures = asyncio.run(run(url, proc.pid, args.waits, args.samples))
        finally:
            proc.terminate()
            proc.wait(10)
    figures["load_before"], figures["load_after"] = load_before, load_average()
    rows = [("health_check p50, nothing waiting", f"{figures['health_p50_ms_idle']} ms"),
            (f"health_check p50, {args.waits} reads waiting", f"{figures['health_p50_ms_waiting']} ms"),
            ("ratio", f"{figures['health_ratio']}x"),
            ("server CPU while idle", f"{figures['server_cpu_per_s_idle'] * 1000:.1f} ms/s"),
            (f"server CPU while {args.waits} reads wait", f"{figures['server_cpu_per_s_waiting'] * 1000:.1f} ms/s"),
            (f"one message to all, until the first of {args.waits} returned", f"{figures['first_woken_ms']} ms"),
            (f"one message to all, until all {args.waits} returned", f"{figures['all_woken_ms']} ms"),
            ("read_messages p50, not waiting", f"{figures['read_p50_ms']} ms")]
    width = max(len(label) for label, _ in rows)
    for label, value in rows:
        print(f"{label:<{width}}  {value}")
    print(f"load average {figures['load_before']} -> {figures['load_after']}")
    print(json.dumps(figures, sort_keys=True))


if __name__ == "__main__":
    main()
