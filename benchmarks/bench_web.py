"""Benchmark of the web view: the time each page takes at a given archive size, over HTTP.

Run: ``python benchmarks/bench_web.py --size 100000`` (the target size) or
``python benchmarks/bench_web.py --size 1000 --rounds 5`` for a quick look.

A throw-away store gets ``--projects`` projects (10 by default) sharing
``--size`` messages: the history of ``bench_mcp.py`` (messages from twenty
agents to one, spread over past days, written with git fast-import), half
of them in the first project and the rest spread over the others. The first
project also gets what the overseer's pages show (a thread, acknowledgement
requests owed, urgent mail, the overseer's note and an answer to it, a
pending contact request, reservations, a build slot, a journal entry), and
every index is brought up to date as ``gitmail reindex`` would. Then a real
``gitmail serve`` answers every page of the view: each is fetched once
(``first ms``: the server's first answer after start, caches cold) and then
``--rounds`` times (median and p95), from request to last byte on loopback
(an upper bound of the server's time). The targets: every page's median
within 100 ms, the dashboard across all projects within 150 ms. Prints a
table, then one JSON line.
"""

from __future__ import annotations

import argparse
import datetime as dt
import html
import json
import os
import re
import statistics
import sys
import tempfile
import time
import urllib.parse
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from bench_mcp import FILLERS, PROJECT, RECIPIENT, cpu_seconds, history, setup, start_server  # noqa: E402

from gitmail.index import indexer_for
from gitmail.mail.facade import Mail, SendOptions
from gitmail.storage.store import Store

TARGET_MS = 100.0
DAYS_AGO_1, DAYS_AGO_3 = (str(dt.date.today() - dt.timedelta(days=n)) for n in (1, 3))  # the history's recent days
DASHBOARD_TARGET_MS = 150.0


def seed_project(home: str, key: str) -> None:
    """Another project with the history's agents, open to mail."""
    mail = Mail(Store(home, background=False))
    mail.ensure_project(key)
    for name in [RECIPIENT, *FILLERS]:
        mail.register_agent(key, "bench", "none", name=name)
        mail.set_contact_policy(key, name, "open")


def seed_live(home: str, keys: list[str]) -> dict[str, str]:
    """The records the overseer's pages show beyond the history, and every index brought up to date."""
    store = Store(home, background=False)
    mail = Mail(store)
    first = mail.send_message(PROJECT, FILLERS[0], [RECIPIENT], "Schema migration plan", "Three **steps**.",
                              options=SendOptions(ack_required=True, cc=[FILLERS[1]]))["deliveries"][0]["payload"]
    mail.reply_message(PROJECT, first["id"], RECIPIENT, "Agreed.")
    for i in range(5):
        mail.send_message(PROJECT, FILLERS[2 + i], [FILLERS[3 + i]], f"Disk almost full {i}", "97%",
                          options=SendOptions(importance="urgent", ack_required=True))
    note = mail.send_as_overseer(PROJECT, [RECIPIENT], "Tests first", "Add a test before the migration.")
    mail.reply_message(PROJECT, note["deliveries"][0]["payload"]["id"], RECIPIENT, "Will do.",
                       options=SendOptions(ack_required=True))
    mail.set_contact_policy(PROJECT, FILLERS[5], "contacts_only")
    mail.request_contact(PROJECT, FILLERS[6], FILLERS[5], reason="review")
    mail.file_reservation_paths(PROJECT, FILLERS[0], ["src/db/**"], reason="migration", ttl_seconds=900)
    mail.acquire_build_slot(PROJECT, FILLERS[1], "test-db", reason="backfill")
    mail.journal(PROJECT, FILLERS[0], "Planned the migration.")
    started = time.perf_counter()
    for key in keys:
        indexer_for(store).project(key).reindex()
        indexer_for(store).project(key).file_history([])  # the derived history, as the server's catch-up keeps it
    return {"slug": store.resolve(PROJECT), "thread": first["thread_id"], "message": first["id"],
            "index_s": f"{time.perf_counter() - started:.1f}"}


def fetch_ms(url: str) -> float:
    began = time.perf_counter()
    with urllib.request.urlopen(url, timeout=60) as response:
        response.read()
        if response.status != 200:
            raise SystemExit(f"{url} answered {response.status}")
    return (time.perf_counter() - began) * 1000


def pages_of(base: str, seeded: dict[str, str]) -> dict[str, str]:
    p = f"{base}/p/{seeded['slug']}"
    return {
        "projects": f"{base}/", "dashboard, all": f"{base}/dashboard", "dashboard": f"{p}/dashboard",
        "project": p, "agent inbox": f"{p}/agents/{RECIPIENT}",
        "agent outbox": f"{p}/agents/{FILLERS[0]}?view=outbox", "unread": f"{p}/agents/{RECIPIENT}?view=unread",
        "urgent": f"{p}/agents/{RECIPIENT}?view=urgent", "ack required": f"{p}/agents/{RECIPIENT}?view=ack",
        "ack overdue": f"{p}/agents/{RECIPIENT}?view=overdue", "overseer": f"{p}/agents/Overseer",
        "thread": f"{p}/thread/{seeded['thread']}", "search": f"{p}/search?q=migration",
        "search page 3": f"{p}/search?q=review&page=3", "board": f"{p}/board?all=1",
        "file holder": f"{p}/board?path=src/db/schema.py", "journals": f"{p}/journals?agent={FILLERS[0]}",
        "message history": f"{p}/history?kind=message&key={seeded['message']}",
        "thread history": f"{p}/history?kind=thread&key={seeded['thread']}",
        "agent history": f"{p}/history?kind=agent&key={RECIPIENT}", "compose": f"{p}/compose",
        "inbox page 3": f"{p}/agents/{RECIPIENT}?page=3", "owed page 2": f"{p}/dashboard?owed=2",
        "all mail": f"{base}/mail", "all mail page 2": next_page(f"{base}/mail"),
        "all mail, filtered": f"{base}/mail?from={FILLERS[0]}&to={RECIPIENT}&importance=normal",
        "all mail, owed": f"{base}/mail?ack=owed",
        "all mail, dates": f"{base}/mail?since={DAYS_AGO_3}&until={DAYS_AGO_1}",
        "all mail, search": f"{base}/mail?q=migration&from={FILLERS[0]}",
    }


def next_page(url: str) -> str:
    """The address a page's pager leads to next (all mail's cursor)."""
    with urllib.request.urlopen(url, timeout=60) as response:
        page = response.read().decode()
    found = re.search(r'href="([^"]+)" rel="next"', page)
    if found is None:
        raise SystemExit(f"{url} has no next page")
    return urllib.parse.urljoin(url, html.unescape(found.group(1)))


def measure(url: str, rounds: int, pid: int) -> dict[str, float]:
    """Wall times of one page, and the server's CPU time per request (what other load on the machine spares)."""
    first = fetch_ms(url)
    cpu = cpu_seconds(pid)
    times = sorted(fetch_ms(url) for _ in range(rounds))
    cpu_ms = (cpu_seconds(pid) - cpu) * 1000 / rounds
    return {"first_ms": round(first, 1), "median_ms": round(statistics.median(times), 1),
            "p95_ms": round(times[max(0, int(len(times) * 0.95) - 1)], 1), "cpu_ms": round(cpu_ms, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--size", type=int, default=10_000, help="messages in all projects together")
    parser.add_argument("--projects", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--per-day", type=int, default=500)
    args = parser.parse_args()
    keys = [PROJECT] + [f"{PROJECT}-{i}" for i in range(2, args.projects + 1)]
    shares = [args.size // 2] + [args.size // 2 // max(1, len(keys) - 1)] * (len(keys) - 1) \
        if len(keys) > 1 else [args.size]
    with tempfile.TemporaryDirectory(prefix="gitmail-bench-web-") as home:
        setup(home)
        for key, count in zip(keys, shares, strict=True):
            if key != PROJECT:
                seed_project(home, key)
            history(home, count, args.per_day, project=key)
        seeded = seed_live(home, keys)
        proc, mcp_url = start_server(home)
        try:
            base = mcp_url.rsplit("/mcp", 1)[0] + "/ui"
            results = {name: measure(url, args.rounds, proc.pid) for name, url in pages_of(base, seeded).items()}
        finally:
            proc.terminate()
            proc.wait(10)
    print(f"web view: {sum(shares)} messages in {len(keys)} projects, {shares[0]} in the one measured "
          f"({args.rounds} rounds each; targets: median <= {TARGET_MS:.0f} ms a page, "
          f"<= {DASHBOARD_TARGET_MS:.0f} ms the dashboard across all projects)")
    print(f"{'page':<20}{'first ms':>10}{'median ms':>10}{'p95 ms':>9}{'cpu ms':>9}")
    for name, figures in results.items():
        print(f"{name:<20}{figures['first_ms']:>10}{figures['median_ms']:>10}{figures['p95_ms']:>9}"
              f"{figures['cpu_ms']:>9}")
    pages = {name: f for name, f in results.items() if name != "dashboard, all"}
    worst = max(figures["median_ms"] for figures in pages.values())
    across = results["dashboard, all"]["median_ms"]
    print(f"slowest page median: {worst} ms ({'within' if worst <= TARGET_MS else 'OVER'} the target); "
          f"dashboard across projects: {across} ms ({'within' if across <= DASHBOARD_TARGET_MS else 'OVER'} "
          "the target)")
    print(json.dumps({"bench": "web", "size": sum(shares), "projects": len(keys), "measured_project": shares[0],
                      "rounds": args.rounds, "pages": results, "slowest_median_ms": worst,
                      "dashboard_all_median_ms": across}))


if __name__ == "__main__":
    main()
