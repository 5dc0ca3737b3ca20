"""Reserve + release latency with many active reservations in the project.

Creates a project whose archive already holds N active exclusive reservations
(default 1,000, spread over many agents and folders), opens the project's
index as a server does (it follows every commit in the background), then
times rounds of
``reserve`` (one new exclusive pattern, checked for overlap against every
active reservation of other agents) followed by ``release`` of that
reservation. Each call is a full transaction: conflict check on the tip,
commit, compare-and-swap of main.

For comparison it also times the naive way to find the active set (read and
parse every reservation file at the tip), which the index's set of open
reservations (:mod:`gitmail.index.reservations`) replaces.

    python benchmarks/bench_reservations.py                 # 1k active, 200 rounds
    python benchmarks/bench_reservations.py --active 100 --rounds 50 --no-durable
    python benchmarks/bench_reservations.py --active 30000 --shared   # nothing blocks: the set's own cost

Prints a table, then one JSON line.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from gitmail import Agent, Change, Project, Reservation, Store
from gitmail.coord import reservations as rs
from gitmail.coord.context import Context
from gitmail.index import indexer_for
from gitmail.model.clock import format_ts
from gitmail.model.ids import new_id
from gitmail.model.records import LAYOUT
from gitmail.storage.store import slug_for

KEY = "/bench/reservations"


def setup(store: Store, active: int, agents: int, *, exclusive: bool = True) -> None:
    archive = store.archive(KEY, create=True)
    names = [f"agent-{i:03d}" for i in range(agents)] + ["Bencher"]
    at = store.clock.now()

    def fn(snap):
        change = Change(f"benchmark setup: {active} active reservations")
        change.put_record(Project(id=new_id(), slug=slug_for(KEY), human_key=KEY, created_at=store.clock.now_ts(),
                                  hlc=store.clock.tick(), layout=LAYOUT))
        for name in names:
            change.put_record(Agent(id=new_id(), name=name, program="bench", model="bench",
                                    inception_ts=store.clock.now_ts(),
                                    hlc=store.clock.tick()))
        for i in range(active):
            change.put_record(Reservation(
                id=new_id(), agent=names[i % agents], path_pattern=f"pkg{i % 50}/mod{i}/**/*.py",
                created_ts=format_ts(at), expires_ts=format_ts(at + dt.timedelta(hours=2)), hlc=store.clock.tick(),
                exclusive=exclusive, reason="benchmark"))
        return change

    archive.transact(fn)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def naive_scan(store: Store) -> int:
    snap = store.archive(KEY).snapshot()
    moment = store.clock.now()
    count = 0
    for path in snap.walk("reservations"):
        record = snap.load(path, Reservation)
        if record.released_ts is None and dt.datetime.fromisoformat(record.expires_ts.replace("Z", "+00:00")) > moment:
            count += 1
    return count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--active", type=int, default=1000, help="active reservations already in the project")
    parser.add_argument("--agents", type=int, default=20, help="agents holding them")
    parser.add_argument("--rounds", type=int, default=200, help="reserve + release rounds to time")
    parser.add_argument("--no-durable", action="store_true", help="skip fsync (measures CPU work only)")
    parser.add_argument("--shared", action="store_true",
                        help="the active reservations are shared: nothing blocks a grant, which then costs only "
                             "what keeping the set in force costs")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as home:
        store = Store(home, durable=not args.no_durable, background=False)
        ctx = Context(store)
        setup(store, args.active, args.agents, exclusive=not args.shared)
        # As a server runs: the project's index is open and follows every commit in the background.
        indexer_for(store).attach_all()
        first = time.perf_counter()
        rs.reserve(ctx, KEY, "Bencher", ["warmup/a.py"], ttl_seconds=600)  # the index's open set, built once
        cold = time.perf_counter() - first
        reserve_ms, release_ms, total_ms = [], [], []
        cpu_start = time.process_time()
        for i in range(args.rounds):
            t0 = time.perf_counter()
            out = rs.reserve(ctx, KEY, "Bencher", [f"pkg{i % 50}/bench{i}/*.py"], ttl_seconds=600)
            t1 = time.perf_counter()
            assert out["granted"] and not out["conflicts"], out
            rs.release(ctx, KEY, "Bencher", file_reservation_ids=[out["granted"][0]["id"]])
            t2 = time.perf_counter()
            reserve_ms.append((t1 - t0) * 1000)
            release_ms.append((t2 - t1) * 1000)
            total_ms.append((t2 - t0) * 1000)
        cpu_ms = (time.process_time() - cpu_start) * 1000 / args.rounds  # every thread: the index's catch-up too
        conflict_t0 = time.perf_counter()
        refused = rs.reserve(ctx, KEY, "Bencher", ["pkg3/mod3/x/y.py"], ttl_seconds=600)
        conflict_ms = (time.perf_counter() - conflict_t0) * 1000
        assert bool(refused["conflicts"]) is not args.shared and bool(refused["granted"]) is args.shared
        scans = []
        for _ in range(5):
            t0 = time.perf_counter()
            found = naive_scan(store)
            scans.append((time.perf_counter() - t0) * 1000)
        active_now = len(rs.list_reservations(ctx, KEY)["file_reservations"])
        indexer_for(store).close()  # its followers stop before the folder is removed

    rows = [("reserve", reserve_ms), ("release", release_ms), ("reserve + release", total_ms)]
    print(f"{args.active} active reservations ({active_now} at the end), {args.rounds} rounds, "
          f"durable={not args.no_durable}")
    print(f"{'operation':<20}{'p50 ms':>10}{'p95 ms':>10}{'max ms':>10}")
    for name, values in rows:
        print(f"{name:<20}{statistics.median(values):>10.2f}{percentile(values, 0.95):>10.2f}{max(values):>10.2f}")
    print(f"{'granted reserve' if args.shared else 'conflicting reserve':<20}{conflict_ms:>10.2f}")
    print(f"process CPU per reserve + release (all threads): {cpu_ms:.2f} ms")
    print(f"first reserve (builds the index's open set from a full scan): {cold * 1000:.1f} ms")
    print(f"naive full scan of the active set ({found} records): p50 {statistics.median(scans):.1f} ms per call")
    print(json.dumps({
        "benchmark": "reservations", "active": args.active, "shared": args.shared,
        "rounds": args.rounds, "durable": not args.no_durable,
        "reserve_p50_ms": round(statistics.median(reserve_ms), 3),
        "release_p50_ms": round(statistics.median(release_ms), 3),
        "reserve_release_p50_ms": round(statistics.median(total_ms), 3),
        "reserve_release_p95_ms": round(percentile(total_ms, 0.95), 3),
        "cpu_ms_per_round": round(cpu_ms, 3),
        "first_reserve_ms": round(cold * 1000, 3),
        "naive_scan_p50_ms": round(statistics.median(scans), 3),
    }))


if __name__ == "__main__":
    main()
