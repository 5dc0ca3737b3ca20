"""Server CPU per send over MCP against a bare call's, in one command.

Run: ``python benchmarks/bench_send_cpu.py`` (400 sends from 1 session, then
from 8, short and 512-byte bodies, each burst followed by as many no-op calls;
``--rounds 3`` repeats it and quotes medians).

The server, the project and the bursts are ``bench_mcp.py``'s (a real
``gitmail serve`` plus the no-op tool, a fast-imported history of ``--size``
messages, CPU counted for the server, its search helper and its git runs from
the start of a burst until the server is idle again); only the throughput
part runs, so a change to the send path gets its figure in a few minutes.
Prints one line per burst and one JSON line with every figure and the load
average before and after. With ``--threads`` (needs ``py-spy`` for the
threads' names), each send burst's server CPU is also split by thread (the
request loop, the tool's worker, the index catch-up, the checkout, the
watcher...), beside the search helper and the git runs: where a send's CPU
goes, without a profiler's overhead.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bench_mcp as bench

BODIES = {"short": bench.short_body, "long": bench.long_body}
PY_SPY = shutil.which("py-spy", path=os.path.dirname(sys.executable)) or shutil.which("py-spy")


def thread_cpu(pid: int) -> dict[int, float]:
    """CPU seconds of each thread of the server so far, by thread id."""
    tick, out = os.sysconf("SC_CLK_TCK"), {}
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/stat") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except FileNotFoundError:
            continue
        out[int(task)] = (int(fields[11]) + int(fields[12])) / tick
    return out


def thread_names(pid: int) -> dict[int, str]:
    """The Python name of each thread of the server (none without py-spy; native threads have none)."""
    if PY_SPY is None:
        return {}
    dump = subprocess.run([PY_SPY, "dump", "--pid", str(pid)], capture_output=True, text=True, check=False).stdout
    return {int(tid): name for tid, name in re.findall(r'Thread (\d+) \([^)]*\): "([^"]*)"', dump)}


def split(pid: int, before: dict[int, float], after: dict[int, float], calls: int, total: float) -> dict[str, float]:
    """CPU ms per call by thread name (a pool's threads together), then the search helper's and git's together.

    ``total`` is the CPU of the server with its helper and git runs over the
    same span; threads that ended meanwhile are in neither reading.
    """
    names = thread_names(pid)
    out: dict[str, float] = {}
    own = 0.0
    for tid, seconds in after.items():
        used = seconds - before.get(tid, 0.0)
        own += used
        if used > 0:
            name = re.sub(r":.*|[-_ ]\d+$", "", names.get(tid, "native"))
            out[name] = round(out.get(name, 0.0) + used * 1000 / calls, 3)
    out["helper and git"] = round((total - own) * 1000 / calls, 3)
    return dict(sorted(out.items(), key=lambda item: -item[1]))


async def rounds(url: str, tokens: dict[str, str], pid: int, args: argparse.Namespace) -> list[dict]:
    """Every (bodies, senders) burst, ``args.rounds`` times, in that order each round."""
    out = []
    for number in range(args.rounds):
        for kind in args.bodies.split(","):
            for clients in (int(c) for c in args.clients.split(",")):
                readings: list[tuple[dict[int, float], float]] = []
                take = lambda readings=readings: readings.append((thread_cpu(pid), bench.cpu_seconds(pid)))  # noqa: E731
                take()
                fig = await bench.throughput(url, tokens, args.messages, clients, pid, BODIES[kind],
                                             f"{kind}{number}", after_sends=take)
                fig.update(bodies=kind, round=number)
                print(f"  {kind:<5} x{clients:<2} {fig['msg_per_s']:>6} msg/s, {fig['errors']} errors, server CPU "
                      f"{fig['server_cpu_ms_per_msg']} ms/send, floor {fig['floor_cpu_ms_per_call']} ms/call, "
                      f"ratio {fig['cpu_ratio']}", flush=True)
                if args.threads:
                    (before, total_before), (after, total_after) = readings
                    fig["threads_ms_per_send"] = split(pid, before, after, fig["messages"], total_after - total_before)
                    print(f"    by thread, ms per send: {fig['threads_ms_per_send']}", flush=True)
                out.append(fig)
    return out


def medians(figures: list[dict]) -> dict[str, dict[str, float]]:
    """Per (bodies, senders): the median CPU per send, floor per call, ratio and rate over the rounds."""
    keys = sorted({(f["bodies"], f["clients"]) for f in figures})
    out = {}
    for kind, clients in keys:
        same = [f for f in figures if (f["bodies"], f["clients"]) == (kind, clients)]
        out[f"{kind}_x{clients}"] = {name: round(statistics.median(f[name] for f in same), 2)
                                     for name in ("server_cpu_ms_per_msg", "floor_cpu_ms_per_call", "cpu_ratio",
                                                  "msg_per_s")}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=1000, help="messages in the fast-imported history")
    parser.add_argument("--messages", type=int, default=400, help="sends per burst")
    parser.add_argument("--clients", default="1,8", help="concurrent senders, one burst each")
    parser.add_argument("--bodies", default="short,long", help="short (one line) and/or long (512 bytes)")
    parser.add_argument("--rounds", type=int, default=1, help="times every burst runs (medians are quoted)")
    parser.add_argument("--threads", action="store_true", help="split each burst's server CPU by thread")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="gitmail-bench-send-") as home:
        tokens = bench.setup(home)
        bench.history(home, args.size, 100)
        bench.make_checkout(home)
        server, url = bench.start_server(home)
        try:
            load_before = bench.load_average()
            figures = asyncio.run(rounds(url, tokens, server.pid, args))
            load_after = bench.load_average()
        finally:
            server.terminate()
            server.wait(30)
    summary = medians(figures)
    for key, fig in summary.items():
        print(f"median {key}: {fig}")
    print(json.dumps({"benchmark": "send_cpu", "load_before": load_before, "load_after": load_after,
                      "medians": summary, "bursts": figures}))


if __name__ == "__main__":
    main()
