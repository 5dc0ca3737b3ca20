"""Benchmark of the human checkout: what keeping it current costs, and how soon it follows a write.

Run: ``python benchmarks/bench_checkout.py`` (1k, 10k and 100k messages) or
``python benchmarks/bench_checkout.py --sizes 1000 --rounds 3`` for a quick look.

For each size a throw-away store gets a history of that many messages (as in
``bench_mcp.py``: three files per message, spread over past days) and its
checkout. Each round then sends ``--batch`` messages (about one second of a
busy server's writes, which is how often the refresher runs during a burst),
rolls the packs together as the server's maintainer would, and times one
refresh: wall time and CPU time, the refreshing thread's own plus that of
the git processes it runs. For reference it also times a full ``git status``
in the same checkout, the pass over every file that a refresh does not make.

Then the follow latency: from the moment ``main`` moves to the moment the
checkout's branch is at the new ``main`` (its files written), polled every
millisecond, for three writers: a server (a store with the background
refresher in this process, as ``gitmail serve`` runs it), a CLI command
(``gitmail send`` in its own process, no server running), and a ``git push``
into the archive from another clone (a profile's task description edited by
hand; the archive's hook refreshes the checkout). Prints a table, then one
JSON line with every figure. On a shared machine compare medians and ratios.
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
import threading
import time
from collections.abc import Callable

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from bench_mcp import PROJECT, RECIPIENT, history, setup  # noqa: E402
from bench_mcp import long_body as body  # noqa: E402

from gitmail.mail.facade import Mail
from gitmail.model.records import profile_path
from gitmail.storage.checkout import refresh
from gitmail.storage.handles import open_repository
from gitmail.storage.maintenance import consolidate
from gitmail.storage.store import Store


def child_cpu_ms() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (usage.ru_utime + usage.ru_stime) * 1000


def timed(fn: Callable[[], object]) -> tuple[float, float]:
    """(wall ms, CPU ms of this thread and of the processes it ran) of ``fn()``."""
    cpu, began = child_cpu_ms() + time.thread_time() * 1000, time.perf_counter()
    fn()
    return (time.perf_counter() - began) * 1000, child_cpu_ms() + time.thread_time() * 1000 - cpu


def measure(size: int, rounds: int, batch: int, per_day: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="gitmail-bench-checkout-") as home:
        setup(home)
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
        follows = {"server": follow_server(home, paths, rounds), "cli": follow_cli(home, paths, rounds),
                   "push": follow_push(home, paths, rounds)}
    fig = {
        "size": size, "files": files, "batch": batch,
        "refresh_wall_p50_ms": round(statistics.median(w for w, _ in refreshes), 1),
        "refresh_cpu_p50_ms": round(statistics.median(c for _, c in refreshes), 1),
        "status_wall_p50_ms": round(statistics.median(w for w, _ in statuses), 1),
        "status_cpu_p50_ms": round(statistics.median(c for _, c in statuses), 1),
    }
    for kind, found in follows.items():
        fig[f"follow_{kind}_p50_ms"] = round(statistics.median(found), 1)
        fig[f"follow_{kind}_max_ms"] = round(max(found), 1)
    return fig


def follow(archive: str, checkout: str, write: Callable[[], object]) -> float:
    """Milliseconds from ``main`` moving (during ``write()``) until the checkout's branch is at main."""
    before = open_repository(archive).references["refs/heads/main"].target
    found: list[float] = []

    def watch() -> None:
        moved = None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            now = time.perf_counter()
            tip = open_repository(archive).references["refs/heads/main"].target
            if moved is None and tip != before:
                moved = now
            if moved is not None and open_repository(checkout).head.target == tip:
                found.append((time.perf_counter() - moved) * 1000)
                return
            time.sleep(0.001)

    watcher = threading.Thread(target=watch)
    watcher.start()
    write()
    watcher.join()
    if not found:
        raise SystemExit("the checkout did not follow main within a minute")
    return found[0]


def follow_server(home: str, paths, rounds: int) -> list[float]:
    """A store with the background refresher in this process, as ``gitmail serve`` runs it."""
    live = Store(home)
    mail = Mail(live)
    out = []
    for r in range(rounds):
        out.append(follow(paths.archive, paths.checkout,
                          lambda r=r: mail.send_message(PROJECT, "Sender0", [RECIPIENT], f"follow {r}", body(r))))
        live.flush()
    return out


def follow_cli(home: str, paths, rounds: int) -> list[float]:
    """``gitmail send`` in a process of its own, with no server running."""
    def send(r: int) -> None:
        subprocess.run([sys.executable, "-m", "gitmail", "--home", home, "send", PROJECT, "--from", "Sender0",
                        "--to", RECIPIENT, "--subject", f"cli {r}", "--body", body(r)], check=True,
                       capture_output=True)
    return [follow(paths.archive, paths.checkout, lambda r=r: send(r)) for r in range(rounds)]


def follow_push(home: str, paths, rounds: int) -> list[float]:
    """``git push`` into the archive from another clone: a profile's task description edited by hand."""
    clone = os.path.join(home, "elsewhere")
    env = dict(os.environ, GIT_AUTHOR_NAME="Human", GIT_AUTHOR_EMAIL="human@example.org",
               GIT_COMMITTER_NAME="Human", GIT_COMMITTER_EMAIL="human@example.org")
    subprocess.run(["git", "clone", "-q", "--shared", paths.archive, clone], check=True)
    profile = os.path.join(clone, profile_path(RECIPIENT))

    def push(r: int) -> None:
        subprocess.run(["git", "pull", "-q", "--ff-only"], cwd=clone, check=True, env=env)
        with open(profile, encoding="utf-8") as handle:
            lines = [line for line in handle.read().splitlines() if not line.startswith("task_description:")]
        with open(profile, "w", encoding="utf-8") as handle:
            handle.write("\n".join(lines + [f"task_description: round {r} of reviews"]) + "\n")
        subprocess.run(["git", "commit", "-qam", f"task {r}"], cwd=clone, check=True, env=env)
        subprocess.run(["git", "push", "-q", "origin", "HEAD:main"], cwd=clone, check=True, env=env,
                       capture_output=True)
    return [follow(paths.archive, paths.checkout, lambda r=r: push(r)) for r in range(rounds)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000,100000", help="archive sizes in messages")
    parser.add_argument("--rounds", type=int, default=7, help="refreshes and follows timed per size")
    parser.add_argument("--batch", type=int, default=60, help="messages sent before each refresh")
    parser.add_argument("--per-day", type=int, default=100, help="messages a day in the generated history")
    args = parser.parse_args()
    results = []
    for size in args.sizes.split(","):
        results.append(measure(int(size), args.rounds, args.batch, args.per_day))
        print(f"measured {size}: {json.dumps(results[-1])}", file=sys.stderr, flush=True)  # a long run's progress
    base = results[0]["refresh_cpu_p50_ms"]
    for fig in results:
        fig["refresh_cpu_ratio"] = round(fig["refresh_cpu_p50_ms"] / base, 2) if base else None
    print(f"{'size':>7} {'files':>7} {'refresh ms':>11} {'refresh CPU':>12} {'CPU ratio':>10} {'git status ms':>14}"
          f" {'status CPU':>11} {'follow ms p50/max: server':>26} {'cli':>13} {'push':>13}")
    for fig in results:
        print(f"{fig['size']:>7} {fig['files']:>7} {fig['refresh_wall_p50_ms']:>11} {fig['refresh_cpu_p50_ms']:>12}"
              f" {fig['refresh_cpu_ratio']:>10} {fig['status_wall_p50_ms']:>14} {fig['status_cpu_p50_ms']:>11}"
              + "".join(f" {fig[f'follow_{k}_p50_ms']:>{w}}/{fig[f'follow_{k}_max_ms']:<7}"
                        for k, w in (("server", 18), ("cli", 5), ("push", 5))))
    print(json.dumps({"benchmark": "checkout", "results": results}))


if __name__ == "__main__":
    main()
