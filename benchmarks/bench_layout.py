"""Benchmark of the archive layouts: what one commit costs as a single day fills up, layout 1 against layout 2.

One command, a table, then one JSON line::

    python benchmarks/bench_layout.py                              # 1k, 10k, 30k, 100k messages in one day
    python benchmarks/bench_layout.py --sizes 1000,10000 --writes 100

Two archives are built at once, each in a process of its own: one at
layout 1 (every record of a day in its day folder) and one at layout 2 (two
fan-out folders under the day). Each is filled through the engine, in
commits of 2,000 messages, with messages whose IDs all fall on one day
(canonical file, one or two inbox copies, outbox copy, among twelve agents).
At each size, ``--writes`` single sends (bench_engine's write: realistic
bodies, the same files) are committed one by one. What is reported per
commit:

- CPU time of the committing thread (median and 95th percentile), which is
  what the layout changes: encoding, hashing and compressing the trees on the
  way to each file. Background consolidation runs in its own thread and is
  not counted. Medians of CPU time hold up on a machine other work is
  loading; wall time (also shown) does not, since it includes the fsyncs;
- the largest tree the commit wrote, and the entries of every tree it wrote
  (each a line of a tree object that was encoded and hashed again).

At the end the layout-1 archive is moved to layout 2 as ``gitmail migrate``
moves it, and the move is timed (CPU and wall).

Ratios are layout 1 over layout 2 at the same size, in the same run.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time

import pygit2

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.bench_engine import AGENTS, MailMaker, pct, send, setup_records  # noqa: E402
from gitmail.model.ids import IdMinter  # noqa: E402
from gitmail.model.records import LAYOUT, Message, Project, inbox_path, message_path, outbox_path  # noqa: E402
from gitmail.storage.engine import Archive, Change  # noqa: E402
from gitmail.storage.layout import migrate  # noqa: E402

DAY_MS = 1_796_126_400_000  # 2026-12-01T12:00:00Z: every ID of the run is minted on this day
BATCH = 2000
PLACEHOLDER = "0" * 23


def build(folder: str, layout: int) -> Archive:
    """An empty archive at ``layout`` with the project and its twelve agents (consolidating as a store's does)."""
    archive = Archive.init(os.path.join(folder, f"layout-{layout}.git"), node="bench", durable=True)
    setup = setup_records(dt.datetime.now(dt.UTC))
    project = Project.from_bytes(setup.pop("project.yaml"))
    project.layout = layout

    def fn(snapshot):
        change = Change("Set up the project and its agents").put_record(project)
        for path, data in setup.items():
            change.put(path, data)
        return change

    archive.transact(fn)
    return archive


def fill(archive: Archive, minter: IdMinter, count: int, rng: random.Random) -> None:
    """Add ``count`` messages of the day in commits of :data:`BATCH` (one template, each with its own ID)."""
    template = Message(id=PLACEHOLDER, thread_id=PLACEHOLDER, sender="BlueLake", subject="filler",
                       created_ts="2026-12-01T12:00:00.000Z", to=["GreenCastle"], body="Filler.\n").to_bytes()
    for start in range(0, count, BATCH):
        size = min(BATCH, count - start)

        def fn(snapshot, size=size):
            change = Change(f"{size} messages")
            for _ in range(size):
                mid = minter.mint(DAY_MS)
                data = template.replace(PLACEHOLDER.encode(), mid.encode())
                sender, *to = rng.sample(AGENTS, 2 if rng.random() < 0.7 else 3)
                change.put(message_path(mid), data).put(outbox_path(sender, mid), data)
                for name in to:
                    change.put(inbox_path(name, mid), data)
            return change

        archive.transact(fn)


def trees_written(repo: pygit2.Repository, commit: str) -> tuple[int, int]:
    """(entries of the largest tree ``commit`` wrote, entries of every tree it wrote), against its parent."""
    new = repo[commit].peel(pygit2.Commit)

    def walk(old: pygit2.Tree | None, tree: pygit2.Tree) -> tuple[int, int]:
        largest, total = len(tree), len(tree)
        before = {entry.name: entry.id for entry in old} if old is not None else {}
        for entry in tree:
            if entry.type_str == "tree" and before.get(entry.name) != entry.id:
                was = before.get(entry.name)
                inner = walk(repo[was] if was is not None else None, repo[entry.id])
                largest, total = max(largest, inner[0]), total + inner[1]
        return largest, total

    return walk(new.parents[0].tree, new.tree)


def measure(archive: Archive, minter: IdMinter, writes: int, maker: MailMaker) -> dict:
    """``writes`` sends, one commit each: CPU and wall ms per commit, and the trees each wrote."""
    cpu: list[float] = []
    wall: list[float] = []
    trees: list[tuple[int, int]] = []
    for _ in range(writes):
        mid = minter.mint(DAY_MS)
        message = maker.make(mid, DAY_MS)
        start, start_cpu = time.perf_counter(), time.thread_time()
        committed = archive.transact(send(message))
        cpu.append((time.thread_time() - start_cpu) * 1000)
        wall.append((time.perf_counter() - start) * 1000)
        trees.append(trees_written(archive.repo, committed.commit))
    return {"cpu_ms_p50": round(statistics.median(cpu), 3), "cpu_ms_p95": round(pct(cpu, 95), 3),
            "wall_ms_p50": round(statistics.median(wall), 3), "largest_tree": max(largest for largest, _ in trees),
            "tree_entries_p50": statistics.median(total for _, total in trees), "writes": writes}


def run_layout(layout: int, sizes: list[int], writes: int, folder: str) -> dict[str, dict]:
    """One layout's archive filled size after size, measured at each (in a process of its own).

    The layout-1 archive is then moved to layout 2 (``gitmail migrate``), timed.
    """
    archive = build(folder, layout)
    minter, rng, maker = IdMinter(), random.Random(7), MailMaker(7)
    results: dict[str, dict] = {}
    held = 0
    for size in sizes:
        fill(archive, minter, size - held, rng)
        results[str(size)] = measure(archive, minter, writes, maker)
        held = size + writes
    if layout < LAYOUT:
        start, start_cpu = time.perf_counter(), time.process_time()
        moved = migrate(archive)
        results["migration"] = {"messages": held, "files_moved": moved.moved,
                                "cpu_s": round(time.process_time() - start_cpu, 2),
                                "wall_s": round(time.perf_counter() - start, 2)}
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--sizes", default="1000,10000,30000,100000", help="messages in the day, ascending")
    parser.add_argument("--writes", type=int, default=200, help="single sends measured per size and layout")
    parser.add_argument("--layouts", default="1,2", help="which layouts to measure")
    parser.add_argument("--workdir", default=None, help="where the archives go (default: a temporary folder)")
    parser.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)  # one layout, JSON out
    args = parser.parse_args()
    sizes = sorted(int(size) for size in args.sizes.split(","))
    folder = args.workdir or tempfile.mkdtemp(prefix="bench-layout-")
    os.makedirs(folder, exist_ok=True)
    if args.child is not None:
        print(json.dumps(run_layout(args.child, sizes, args.writes, folder)))
        return
    # Each layout in a process of its own, both at once (so under the same load): in one process the
    # layout-1 archive's huge trees would fill the shared tree cache and lengthen every garbage collection.
    layouts = sorted(int(x) for x in args.layouts.split(","))
    children = {layout: subprocess.Popen([sys.executable, os.path.abspath(__file__), "--child", str(layout),
                                          "--sizes", args.sizes, "--writes", str(args.writes), "--workdir", folder],
                                         stdout=subprocess.PIPE, text=True) for layout in layouts}
    found = {}
    for layout, child in children.items():
        out, _ = child.communicate()
        if child.returncode != 0:
            raise SystemExit(f"layout {layout} failed")
        found[layout] = {(int(size) if size.isdigit() else size): row for size, row in json.loads(out).items()}
    print(f"{'messages in the day':>20} {'layout':>6} {'CPU ms p50':>10} {'p95':>7} {'wall ms p50':>11} "
          f"{'largest tree':>12} {'entries written':>15}")
    for size in sizes:
        for layout in layouts:
            row = found[layout][size]
            print(f"{size:>20,} {layout:>6} {row['cpu_ms_p50']:>10.2f} {row['cpu_ms_p95']:>7.2f} "
                  f"{row['wall_ms_p50']:>11.2f} {row['largest_tree']:>12,} {row['tree_entries_p50']:>15,.0f}")
    growth = {layout: round(found[layout][sizes[-1]]["cpu_ms_p50"] / found[layout][sizes[0]]["cpu_ms_p50"], 2)
              for layout in layouts}
    ratios = ({size: round(found[1][size]["cpu_ms_p50"] / found[2][size]["cpu_ms_p50"], 2) for size in sizes}
              if {1, 2} <= set(layouts) else {})
    if ratios:
        print("CPU per commit, layout 1 / layout 2: "
              + ", ".join(f"{size:,}: {ratio}x" for size, ratio in ratios.items()))
    print(f"CPU per commit from {sizes[0]:,} to {sizes[-1]:,} in the day: "
          + ", ".join(f"layout {layout} {value}x" for layout, value in growth.items()))
    migration = found.get(1, {}).get("migration")
    if migration:
        print(f"gitmail migrate of the layout-1 archive ({migration['messages']:,} messages, "
              f"{migration['files_moved']:,} files moved): {migration['cpu_s']} s CPU, {migration['wall_s']} s")
    table = {str(size): {str(layout): found[layout][size] for layout in layouts} for size in sizes}
    print(json.dumps({"bench": "layout", "writes": args.writes, "load_average": [round(x, 2) for x in os.getloadavg()],
                      "results": table,
                      "cpu_ratio_layout1_over_layout2": {str(size): ratio for size, ratio in ratios.items()},
                      "cpu_growth_smallest_to_largest": {str(layout): value for layout, value in growth.items()},
                      "migration": migration}))


if __name__ == "__main__":
    main()
