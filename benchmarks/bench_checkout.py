"""Benchmark of the human checkout's refresh: what keeping it current costs.

Run: ``python benchmarks/bench_checkout.py`` (1k and 10k messages) or
``python benchmarks/bench_checkout.py --sizes 1000 --rounds 3`` for a quick look.

For each size a throw-away store gets a history of that many messages (as in
``bench_mcp.py``: three files per message, spread over past days) and its
checkout. Each round then sends ``--batch`` messages (about one second of a
busy server's writes, which is how often the refresher runs during a burst),
rolls the packs together as the server's maintainer would, and times one
refresh: wall time and the CPU time of the git processes it runs. For
reference it also times a full ``git status`` in the same checkout, the pass
over every file that the refresh does not make. Last, with the store's
background refresher running as a server runs it, it times how long after a
send returns its message appears in the checkout (the design says "within
about a second"). Prints a table, then one JSON line with every figure. On a
shared machine compare medians and ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from bench_mcp import PROJECT, RECIPIENT, body, history, setup  # noqa: E402

from gitmail.mail.facade import Mail
from gitmail.model.records import message_path
from gitmail.storage.checkout import refresh
from gitmail.storage.maintenance import consolidate
from gitmail.storage.store import Store


def child_cpu_ms() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (usage.ru_utime + usage.ru_stime) * 1000


def timed(fn) -> tuple[float, float]:
    """(wall ms, child CPU ms) of ``fn()``."""
    cpu, began = child_cpu_ms(), time.perf_counter()
    fn()
    return (time.perf_counter() - began) * 1000, child_cpu_ms() - cpu


def measure(size: int, rounds: int, batch: int, per_day: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="gitmail-bench-checkout-") as home:
        setup(home, 1)
        history(home, size, per_day)
        store = Store(home, background=False)
        paths = store.paths(store.resolve(PROJECT))
        assert refresh(paths.archive, paths.checkout) == "created"
        mail = Mail(store)
        refreshes, statuses = [], []
        for r in range(rounds):
            for i in range(batch):
                mail.send_message(PROJECT, "Sender0", [RECIPIENT], f"round {r} note {i}", body(i))
            consolidate(paths.archive, force=True)
            outcome: list[str] = []
            refreshes.append(timed(lambda out=outcome: out.append(refresh(paths.archive, paths.checkout))))
            assert outcome == ["updated"], outcome
            statuses.append(timed(lambda: subprocess.run(
                ["git", "status", "--porcelain", "--untracked-files=no"], cwd=paths.checkout,
                capture_output=True, check=True)))
        files = subprocess.run(["git", "ls-files", "-z"], cwd=paths.checkout, capture_output=True,
                               check=True).stdout.count(b"\0")
        follows = follow_latencies(home, paths.checkout, rounds)
    return {
        "size": size, "files": files, "batch": batch,
        "refresh_wall_p50_ms": round(statistics.median(w for w, _ in refreshes), 1),
        "refresh_cpu_p50_ms": round(statistics.median(c for _, c in refreshes), 1),
        "status_wall_p50_ms": round(statistics.median(w for w, _ in statuses), 1),
        "status_cpu_p50_ms": round(statistics.median(c for _, c in statuses), 1),
        "follow_p50_ms": round(statistics.median(follows), 1), "follow_max_ms": round(max(follows), 1),
    }


def follow_latencies(home: str, checkout: str, rounds: int) -> list[float]:
    """Milliseconds from a send's return until its message is a file in the checkout (background refresher)."""
    live = Store(home)  # with the background refresher, as a server runs it
    mail = Mail(live)
    found = []
    for r in range(rounds):
        sent = mail.send_message(PROJECT, "Sender0", [RECIPIENT], f"follow {r}", body(r))
        began = time.perf_counter()
        target = os.path.join(checkout, message_path(sent["deliveries"][0]["payload"]["id"]))
        while not os.path.exists(target):
            time.sleep(0.002)
        found.append((time.perf_counter() - began) * 1000)
        live.flush()
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000", help="archive sizes in messages")
    parser.add_argument("--rounds", type=int, default=7, help="refreshes timed per size")
    parser.add_argument("--batch", type=int, default=60, help="messages sent before each refresh")
    parser.add_argument("--per-day", type=int, default=100, help="messages a day in the generated history")
    args = parser.parse_args()
    results = [measure(int(size), args.rounds, args.batch, args.per_day) for size in args.sizes.split(",")]
    print(f"{'size':>7} {'files':>7} {'refresh ms':>11} {'refresh CPU':>12} {'git status ms':>14} {'status CPU':>11}"
          f" {'follow ms p50/max':>18}")
    for fig in results:
        print(f"{fig['size']:>7} {fig['files']:>7} {fig['refresh_wall_p50_ms']:>11} {fig['refresh_cpu_p50_ms']:>12}"
              f" {fig['status_wall_p50_ms']:>14} {fig['status_cpu_p50_ms']:>11}"
              f" {fig['follow_p50_ms']:>9}/{fig['follow_max_ms']:<8}")
    print(json.dumps({"benchmark": "checkout", "results": results}))


if __name__ == "__main__":
    main()
