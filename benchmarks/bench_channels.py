"""Benchmark of channels beside direct mail: a post against a send, a channel page against an inbox page.

Run: ``python benchmarks/bench_channels.py`` (400 of each) or ``--count 100`` for a quick look.

One throw-away store, one project, two agents. Writes alternate between a
``send_message`` of a short body from one agent to the other and a
``post_channel`` of the same body to one channel, so both see the same
archive growing under them and the same load; each write's time is taken
around the facade call (the commit, one durable pack, and the index
catching up on the next read). Then the reads alternate too: a page of 200
from the inbox feed (``read_messages``) and a page of 200 from the channel
(``read_channel``), from a cursor half way, each read after a new write so
neither is answered from the per-commit cache. Medians, with wall and CPU
time (the machine may be shared). Prints a table, then one JSON line.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from gitmail import Mail, Store  # noqa: E402

PROJECT = "/bench/channels"


def timed(run: Callable[[], object]) -> tuple[float, float]:
    """Milliseconds of wall and CPU time one call takes."""
    wall, cpu = time.perf_counter(), time.process_time()
    run()
    return (time.perf_counter() - wall) * 1000, (time.process_time() - cpu) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--count", type=int, default=400, help="sends and posts each (default 400)")
    parser.add_argument("--reads", type=int, default=30, help="reads of each kind (default 30)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as home:
        mail = Mail(Store(home, background=False))
        mail.ensure_project(PROJECT)
        for name in ("BlueLake", "GreenCastle"):
            mail.register_agent(PROJECT, "bench", "m", name=name)
            mail.set_contact_policy(PROJECT, name, "open")
        mail.create_channel(PROJECT, "BlueLake", "deploys")
        sends, posts = [], []
        for i in range(args.count):
            body = f"build {i} is green; deploying to staging now"
            sends.append(timed(functools.partial(mail.send_message, PROJECT, "BlueLake", ["GreenCastle"],
                                                 f"build {i}", body)))
            posts.append(timed(functools.partial(mail.post_channel, PROJECT, "BlueLake", "deploys", body)))
        inbox_after = mail.read_messages(PROJECT, "GreenCastle", limit=args.count // 2)["next_after"]
        inbox_reads, channel_reads = [], []
        for _ in range(args.reads):
            mail.post_channel(PROJECT, "GreenCastle", "deploys", "tick")  # a new commit: no cached answer
            inbox_reads.append(timed(lambda: mail.read_messages(PROJECT, "GreenCastle", after=inbox_after,
                                                                limit=200)))
            mail.post_channel(PROJECT, "GreenCastle", "deploys", "tick")
            channel_reads.append(timed(lambda: mail.read_channel(PROJECT, "GreenCastle", "deploys",
                                                                 after=args.count // 2, limit=200)))
    rows = {"send_message": sends, "post_channel": posts, "read_messages_200": inbox_reads,
            "read_channel_200": channel_reads}
    out = {}
    print(f"{'operation':<20}{'wall p50 ms':>14}{'cpu p50 ms':>14}")
    for name, samples in rows.items():
        wall = statistics.median(s[0] for s in samples)
        cpu = statistics.median(s[1] for s in samples)
        out[name] = {"wall_p50_ms": round(wall, 2), "cpu_p50_ms": round(cpu, 2), "n": len(samples)}
        print(f"{name:<20}{wall:>14.2f}{cpu:>14.2f}")
    out["load"] = os.getloadavg()[0]
    print(json.dumps(out))


if __name__ == "__main__":
    main()
