"""Benchmark of ``gitmail import agent-mail``: messages imported per second, receipts included.

Run: ``python benchmarks/bench_import.py`` (20k messages) or
``python benchmarks/bench_import.py --messages 2000`` for a quick look.

Builds a throw-away mcp_agent_mail database to the schema of its newer
releases (the one ``tests/agent_mail_fixture.py`` writes: tokens, topics,
products, windows, summaries): ``--agents`` agents in one project, messages
spread over ``--days`` days, each to one agent with a cc one time in two,
replies in threads, most receipts read and some acknowledged, plus a few
reservations and contact links. Then it imports it into a fresh store, as
``gitmail import agent-mail`` does, three ways:

1. **import**: every record written and committed (durable packs, one
   compare-and-swap per batch), the index left for later;
2. **index**: the index catching up to the imported tip (what the first read
   after an import would wait for; the command does it before it returns);
3. **again**: the same import run a second time, which finds everything in
   place and writes nothing.

The human checkout is left out (``bench_checkout.py`` measures it). Wall time
and CPU time are printed side by side: the machine may be shared, and CPU
time is the steadier figure there. Prints a table, then one JSON line.
"""

from __future__ import annotations

import argparse
import datetime as dt
import functools
import json
import os
import random
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from typing import TypeVar

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from gitmail.importers.agentmail import import_agent_mail  # noqa: E402
from gitmail.index import indexer_for  # noqa: E402
from gitmail.storage.store import Store  # noqa: E402
from tests.agent_mail_fixture import SCHEMA  # noqa: E402 - the newer release's tables, written once

T = TypeVar("T")
PROJECT = "/bench/shop"
WORDS = ("schema migration reader writer deploy window review budget release checkout payment endpoint test "
         "flaky build cache index queue worker retry backoff token rotate signing key docs").split()
START = dt.datetime(2026, 1, 5, 8, 0, tzinfo=dt.UTC)


def stamp(moment: dt.datetime) -> str:
    """A time as the server writes it: naive UTC text."""
    return moment.astimezone(dt.UTC).replace(tzinfo=None).isoformat(sep=" ", timespec="microseconds")


def build(path: str, *, messages: int, agents: int, days: int, seed: int = 7) -> dict[str, int]:
    """Write the source database; how many rows of each kind it holds."""
    rng = random.Random(seed)
    db = sqlite3.connect(path)
    db.executescript(SCHEMA)
    db.execute("INSERT INTO projects VALUES (1, 'bench-shop', ?, ?, NULL)", (PROJECT, stamp(START)))
    names = [f"Agent{i:02d}" for i in range(agents)]
    db.executemany("INSERT INTO agents VALUES (?, 1, ?, 'claude-code', 'opus', 'work', ?, ?, 'auto', 'auto', ?, NULL)",
                   [(i + 1, name, stamp(START), stamp(START + dt.timedelta(days=days)), f"tok-{i:04d}-{seed}")
                    for i, name in enumerate(names)])
    step = dt.timedelta(days=days) / messages
    rows, recipients, receipts = [], [], 0
    for n in range(1, messages + 1):
        created = START + dt.timedelta(hours=1) + step * n
        sender = rng.randrange(agents)
        others = [i for i in range(agents) if i != sender]
        to = rng.choice(others)
        thread = str(n - 1) if n > 1 and n % 4 == 0 else None
        body = " ".join(rng.choice(WORDS) for _ in range(60))
        rows.append((n, 1, sender + 1, thread, "ops" if n % 10 == 0 else None, f"Update {n}: {rng.choice(WORDS)}",
                     body, "high" if n % 7 == 0 else "normal", n % 5 == 0, stamp(created), "[]"))
        party = [(to, "to")] + ([(rng.choice([i for i in others if i != to]), "cc")] if n % 2 and agents > 2 else [])
        for agent, kind in party:
            read = created + dt.timedelta(minutes=rng.randrange(1, 240)) if rng.random() < 0.8 else None
            acked = read + dt.timedelta(minutes=1) if read is not None and n % 5 == 0 else None
            receipts += read is not None
            recipients.append((n, agent + 1, kind, stamp(read) if read else None, stamp(acked) if acked else None))
    db.executemany("INSERT INTO messages VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
    db.executemany("INSERT INTO message_recipients VALUES (?, ?, ?, ?, ?)", recipients)
    db.executemany("INSERT INTO file_reservations VALUES (?, 1, ?, ?, 1, 'work', ?, ?, ?)",
                   [(i + 1, i % agents + 1, f"src/module{i}/**", stamp(START + dt.timedelta(days=i % days)),
                     stamp(START + dt.timedelta(days=i % days, hours=2)),
                     stamp(START + dt.timedelta(days=i % days, hours=1))) for i in range(50)])
    db.executemany("INSERT INTO agent_links VALUES (?, 1, ?, 1, ?, 'approved', 'work', ?, ?, NULL)",
                   [(i + 1, i + 1, (i + 1) % agents + 1, stamp(START), stamp(START)) for i in range(agents)])
    db.commit()
    db.close()
    return {"messages": messages, "recipients": len(recipients), "receipts": receipts}


def timed(fn: Callable[[], T]) -> tuple[T, float, float]:
    """``fn()``'s result, wall seconds and CPU seconds of this process."""
    wall, cpu = time.perf_counter(), time.process_time()
    result = fn()
    return result, time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--agents", type=int, default=12)
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--runs", type=int, default=3, help="Imports into fresh stores; the median is reported.")
    parser.add_argument("--workdir", help="Where to build (default: a temporary folder, removed afterwards).")
    args = parser.parse_args()
    work = args.workdir or tempfile.mkdtemp(prefix="bench-import-")
    os.makedirs(work, exist_ok=True)
    try:
        figures = measure(work, args)
    finally:
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)
    f = figures
    print(f"{f['messages']} messages, {f['recipients']} recipients ({f['receipts']} receipts), {f['agents']} agents, "
          f"{f['days']} days -> {f['commits']} commits (load average {f['load_average']})")
    print(f"{'step':<12}{'wall s':>10}{'CPU s':>10}{'msg/s wall':>14}{'msg/s CPU':>14}")
    for i, (wall, cpu) in enumerate(f["runs"], 1):
        print(f"{'import ' + str(i):<12}{wall:>10}{cpu:>10}{round(f['messages'] / wall):>14}"
              f"{round(f['messages'] / cpu):>14}")
    print(f"{'median':<12}{f['import_wall_s']:>10}{f['import_cpu_s']:>10}{f['import_msgs_per_s_wall']:>14}"
          f"{f['import_msgs_per_s_cpu']:>14}")
    print(f"{'index':<12}{f['index_wall_s']:>10}{f['index_cpu_s']:>10}")
    print(f"{'again':<12}{f['again_wall_s']:>10}{f['again_cpu_s']:>10}")
    print(json.dumps(figures))


def measure(work: str, args: argparse.Namespace) -> dict[str, object]:
    """Build the source once, import it ``--runs`` times into fresh stores, then index and import again."""
    database = os.path.join(work, "storage.sqlite3")
    if os.path.exists(database):
        os.unlink(database)
    rows = build(database, messages=args.messages, agents=args.agents, days=args.days)
    runs = []
    for run in range(args.runs):
        home = os.path.join(work, f"home-{run}")
        shutil.rmtree(home, ignore_errors=True)
        store = Store(home, background=False)
        report, wall, cpu = timed(functools.partial(import_agent_mail, store, database, catch_up=False))
        totals = report.totals()
        assert totals["messages"].imported == rows["messages"], totals["messages"]
        assert totals["receipts"].imported == rows["receipts"], totals["receipts"]
        runs.append((round(wall, 2), round(cpu, 2)))
    commits = sum(project.commits for project in report.projects)
    _, index_wall, index_cpu = timed(indexer_for(store).project(PROJECT).catch_up)
    again, again_wall, again_cpu = timed(functools.partial(import_agent_mail, store, database, catch_up=False))
    indexer_for(store).close()
    assert sum(c.imported for c in again.totals().values()) == 0
    wall, cpu = statistics.median(w for w, _ in runs), statistics.median(c for _, c in runs)
    return {
        "messages": rows["messages"], "recipients": rows["recipients"], "receipts": rows["receipts"],
        "agents": args.agents, "days": args.days, "commits": commits, "runs": runs,
        "import_wall_s": wall, "import_cpu_s": cpu,
        "import_msgs_per_s_wall": round(rows["messages"] / wall),
        "import_msgs_per_s_cpu": round(rows["messages"] / cpu),
        "index_wall_s": round(index_wall, 2), "index_cpu_s": round(index_cpu, 2),
        "again_wall_s": round(again_wall, 2), "again_cpu_s": round(again_cpu, 2),
        "load_average": round(os.getloadavg()[0], 1),
    }


if __name__ == "__main__":
    main()
