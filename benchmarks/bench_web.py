"""Benchmark of the web view: the time each page takes at a given archive size, over HTTP.

Run: ``python benchmarks/bench_web.py`` (10k messages) or
``python benchmarks/bench_web.py --size 1000 --rounds 5`` for a quick look.

A throw-away store gets the history of ``bench_mcp.py`` (messages from
twenty agents to one, spread over past days, written with git fast-import),
a few live messages (a thread, an acknowledgement request, the overseer's
note, a reservation, a journal entry), and its index is brought up to date
as ``gitmail reindex`` would. Then a real ``gitmail serve`` answers every
page of the view: each is fetched once to warm it and ``--rounds`` times
measured, from request to last byte on loopback (an upper bound of the
server's time). The target: every page's median within 100 ms at 10k
messages. Prints a table, then one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from bench_mcp import FILLERS, PROJECT, RECIPIENT, history, setup, start_server  # noqa: E402

from gitmail.index import indexer_for
from gitmail.mail.facade import Mail
from gitmail.storage.store import Store

TARGET_MS = 100.0


def seed_live(home: str) -> dict[str, str]:
    """The records a page needs beyond the history: a thread, a reservation, a journal, the overseer."""
    store = Store(home, background=False)
    mail = Mail(store)
    first = mail.send_message(PROJECT, FILLERS[0], [RECIPIENT], "Schema migration plan", "Three **steps**.",
                              ack_required=True)["deliveries"][0]["payload"]
    mail.reply_message(PROJECT, first["id"], RECIPIENT, "Agreed.")
    mail.send_as_overseer(PROJECT, [RECIPIENT], "Tests first", "Add a test before the migration.")
    mail.file_reservation_paths(PROJECT, FILLERS[0], ["src/db/**"], reason="migration")
    mail.journal(PROJECT, FILLERS[0], "Planned the migration.")
    started = time.perf_counter()
    indexer_for(store).project(PROJECT).reindex()
    indexer_for(store).project(PROJECT).file_history([])  # the derived history, as the server's catch-up keeps it
    return {"slug": store.resolve(PROJECT), "thread": first["thread_id"], "message": first["id"],
            "index_s": f"{time.perf_counter() - started:.1f}"}


def fetch_ms(url: str) -> float:
    began = time.perf_counter()
    with urllib.request.urlopen(url, timeout=60) as response:
        response.read()
        if response.status != 200:
            raise SystemExit(f"{url} answered {response.status}")
    return (time.perf_counter() - began) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--per-day", type=int, default=500)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="gitmail-bench-web-") as home:
        setup(home, 0)
        history(home, args.size, args.per_day)
        seeded = seed_live(home)
        proc, mcp_url = start_server(home)
        try:
            base = mcp_url.rsplit("/mcp", 1)[0] + "/ui"
            p = f"{base}/p/{seeded['slug']}"
            pages = {
                "projects": f"{base}/", "project": p, "agent inbox": f"{p}/agents/{RECIPIENT}",
                "agent outbox": f"{p}/agents/{FILLERS[0]}?view=outbox", "unread": f"{p}/agents/{RECIPIENT}?view=unread",
                "urgent": f"{p}/agents/{RECIPIENT}?view=urgent", "ack required": f"{p}/agents/{RECIPIENT}?view=ack",
                "ack overdue": f"{p}/agents/{RECIPIENT}?view=overdue", "thread": f"{p}/thread/{seeded['thread']}",
                "search": f"{p}/search?q=migration", "search page 3": f"{p}/search?q=review&page=3",
                "board": f"{p}/board?all=1", "journals": f"{p}/journals?agent={FILLERS[0]}",
                "message history": f"{p}/history?kind=message&key={seeded['message']}",
                "thread history": f"{p}/history?kind=thread&key={seeded['thread']}",
                "agent history": f"{p}/history?kind=agent&key={RECIPIENT}", "compose": f"{p}/compose",
            }
            results = {}
            for name, url in pages.items():
                fetch_ms(url)
                times = sorted(fetch_ms(url) for _ in range(args.rounds))
                results[name] = {"median_ms": round(statistics.median(times), 1),
                                 "p95_ms": round(times[max(0, int(len(times) * 0.95) - 1)], 1)}
        finally:
            proc.terminate()
            proc.wait(10)
    print(f"web view at {args.size} messages ({args.rounds} rounds each; target: median <= {TARGET_MS:.0f} ms)")
    print(f"{'page':<18}{'median ms':>10}{'p95 ms':>9}")
    for name, figures in results.items():
        print(f"{name:<18}{figures['median_ms']:>10}{figures['p95_ms']:>9}")
    worst = max(figures["median_ms"] for figures in results.values())
    print(f"slowest median: {worst} ms ({'within' if worst <= TARGET_MS else 'OVER'} the target)")
    print(json.dumps({"bench": "web", "size": args.size, "rounds": args.rounds, "pages": results,
                      "slowest_median_ms": worst}))


if __name__ == "__main__":
    main()
