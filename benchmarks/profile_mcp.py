"""Where the server's CPU goes per call: a sampling profile of a burst of each tool.

Run: ``python benchmarks/profile_mcp.py --tools send_message,fetch_inbox``
(needs ``py-spy``: ``pip install py-spy``). The server, the archive and the
calls are those of ``bench_mcp.py`` (a history written with fast-import, then
``--fill`` messages sent through MCP by 10 agents with 512-byte bodies). For
each tool, py-spy attaches to the server and its helper process while one
session makes ``--burst`` calls, and stays until the server is idle again, so
background work the calls leave behind is in the profile. Beside the profile,
the server's CPU per call is split between its own threads, the search-index
helper and the git commands it ran (``/proc`` figures).

Prints, per tool, the CPU split and the functions with the most samples
(inclusive, within the server's own code and its libraries), and writes the
raw stacks (``<out>/<tool>.txt``, one line per stack with its sample count;
feed them to any flame-graph tool).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from fastmcp import Client

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bench_mcp as bench

PY_SPY = shutil.which("py-spy", path=os.path.dirname(sys.executable)) or "py-spy"  # the venv's, if not on PATH
FRAME = re.compile(r"^(?P<fn>.*) \((?P<file>[^:()]+)(?::\d+)?\)$")


def cpu_split(pid: int) -> dict[str, float]:
    """CPU seconds of the server's own threads, of its live children (the search helper) and of reaped ones (git)."""
    tick = os.sysconf("SC_CLK_TCK")

    def stat(p: int) -> list[int]:
        with open(f"/proc/{p}/stat") as handle:
            return [int(v) for v in handle.read().rsplit(")", 1)[1].split()[11:15]]

    own = stat(pid)
    helpers = 0.0
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/children") as handle:
            for child in handle.read().split():
                try:
                    helpers += sum(stat(int(child))) / tick
                except FileNotFoundError:
                    continue
    return {"server": (own[0] + own[1]) / tick, "helper": helpers, "git": (own[2] + own[3]) / tick}


def summarize(path: str, top: int, per_call_ms: float) -> list[str]:
    """The functions (of ours and of the libraries) with the most samples, inclusive, in ms per call."""
    inclusive: collections.Counter[str] = collections.Counter()
    own: collections.Counter[str] = collections.Counter()
    total = 0
    with open(path) as handle:
        for line in handle:
            stack, _, count_text = line.rstrip("\n").rpartition(" ")
            if not stack:
                continue
            count = int(count_text)
            total += count
            frames = []
            for frame in stack.split(";"):
                match = FRAME.match(frame)
                if match:
                    frames.append(f"{match['fn']} ({match['file']})")
            for name in set(frames):
                inclusive[name] += count
            if frames:
                own[frames[-1]] += count
    lines = [f"    {total} samples ({total * per_call_ms:.2f} ms per call); inclusive, ms per call:"]
    lines += [f"      {n * per_call_ms:6.3f}  {name}" for name, n in inclusive.most_common(top)]
    lines.append("    self, ms per call:")
    lines += [f"      {n * per_call_ms:6.3f}  {name}" for name, n in own.most_common(top // 2)]
    return lines


async def profile(url: str, pid: int, calls: bench.Calls, tools: list[str], burst: int, out: str, top: int,
                  rate: int, gil: bool) -> None:
    table = calls.table()
    async with Client(url, mode="legacy", timeout=120) as client:
        await bench.call(client, "fetch_inbox", {**calls.me(), "limit": 1})
        await bench.call(client, "fetch_inbox", {**calls.me(bench.SENDERS[0]), "limit": 1})
        counter = 0
        for name in tools:
            make = table[name] if name != bench.FLOOR else (lambda i: {})
            await bench.call(client, name, make(counter))  # warm
            counter += 1
            await bench.settle(pid)
            raw = os.path.join(out, f"{name}.txt")
            spy = subprocess.Popen([PY_SPY, "record", "--pid", str(pid), "--subprocesses", "--nonblocking",
                                    "--rate", str(rate), "--format", "raw", "--output", raw,
                                    *(["--gil"] if gil else [])],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            await asyncio.sleep(1.0)  # attached
            before, began = cpu_split(pid), time.perf_counter()
            for _ in range(burst):
                await bench.call(client, name, make(counter))
                counter += 1
            seconds = time.perf_counter() - began
            await bench.settle(pid)
            after = cpu_split(pid)
            spy.send_signal(signal.SIGINT)
            spy.wait(60)
            split = {k: (after[k] - before[k]) * 1000 / burst for k in after}
            print(f"== {name}: {burst} calls in {seconds:.2f} s; CPU ms per call: server {split['server']:.2f}, "
                  f"search helper {split['helper']:.2f}, git {split['git']:.2f} "
                  f"(total {sum(split.values()):.2f})")
            if os.path.exists(raw):
                print("\n".join(summarize(raw, top, 1000 / rate / burst)), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=1000, help="messages in the fast-imported history")
    parser.add_argument("--fill", type=int, default=300, help="messages sent through MCP before profiling")
    parser.add_argument("--tools", default="bench_noop,send_message,acknowledge_message,fetch_inbox,search_messages")
    parser.add_argument("--burst", type=int, default=100, help="calls per tool")
    parser.add_argument("--top", type=int, default=40, help="functions shown per tool")
    parser.add_argument("--rate", type=int, default=200, help="samples per second")
    parser.add_argument("--short-bodies", action="store_true", help="one-line bodies for sends (default 512 bytes)")
    parser.add_argument("--gil", action="store_true", help="only samples of threads holding the GIL (Python work)")
    parser.add_argument("--out", default=None, help="folder for the raw stacks (default: a temporary one)")
    args = parser.parse_args()
    tools = args.tools.split(",")
    out = args.out or tempfile.mkdtemp(prefix="gitmail-profile-")
    os.makedirs(out, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="gitmail-profile-home-") as home:
        tokens = bench.setup(home)
        _, thread = bench.history(home, args.size, 100)
        server, url = bench.start_server(home)
        try:
            async def run() -> None:
                fill = await bench.throughput(url, tokens, args.fill, bench.REALISTIC_AGENTS, server.pid,
                                              bench.long_body, "fill")
                print(f"fill: {fill}")
                async with Client(url, mode="legacy", timeout=120) as reader:
                    unread = bench.payload(await bench.call(reader, "fetch_inbox", {
                        "project_key": bench.PROJECT, "agent_name": bench.RECIPIENT, "limit": 1000,
                        "unread_only": True, "agent_token": tokens[bench.RECIPIENT]}))
                ids = [m["id"] for m in unread]
                body = bench.short_body if args.short_bodies else bench.long_body
                calls = bench.Calls(tokens, thread, ids[: len(ids) // 2], ids[len(ids) // 2:], body)
                await profile(url, server.pid, calls, tools, args.burst, out, args.top, args.rate, args.gil)

            print(f"load average before: {bench.load_average()}")
            asyncio.run(run())
            print(f"load average after: {bench.load_average()}; raw stacks in {out}")
        finally:
            server.terminate()
            server.wait(30)


if __name__ == "__main__":
    main()
