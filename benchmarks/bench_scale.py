"""Benchmark at archive sizes up to a million messages: history, reindex, search.

Run: ``python benchmarks/bench_scale.py`` (10k and 100k messages), or
``--sizes 10000,100000,1000000`` for the million column, or ``--messages N``
for one size. For each size it builds a history with
``benchmarks/scale_history.py`` (90 days, 50 agents, threads, receipts,
reservations, written with ``git fast-import``), then measures:

- the history build: seconds and messages/s (or "kept" when reused);
- ``reindex`` from nothing (derived state deleted first): wall seconds,
  CPU seconds of this process and of its worker processes, documents per
  wall second, and CPU milliseconds per document, for the whole reindex and
  for its two phases (the metadata store from the tree, then the search
  index), with documents per wall second and per CPU second of every
  process involved;
- the other paths that feed the index, at the same rates: joining (a store
  with nothing derived catching up to the tip, as after a clone) and a
  sync's arrival (an index of the second-to-last commit catching up to the
  last, up to searchable);
- search in process, each query kind of ``benchmarks/bench_index.py``:
  p50 wall and p50 CPU of the searching thread (limit 20, the default
  ranking: best match first over the newest matches);
- the human checkout made afresh with its default window (everything up to
  50,000 files, else the newest days that fit): the window and its files,
  seconds to make it, ``git status`` in it (median wall and CPU of seven
  runs; target at 1M: 300 ms), and the refresh after ten new messages.
- reads and writes through the mail domain, in process: an inbox page, a
  thread of six messages, its summary, and a send (one message to two
  agents, committed), p50 wall and CPU, with each size's CPU p50 as a
  ratio to the first size's (answers have the same size at every archive
  size, so a flat cost shows as a ratio near 1);
- a real ``gitmail serve`` on the archive: resident and peak resident
  memory after it answered the web view's project, inbox, thread and
  search pages;
- a new machine joining through ``gitmail clone`` from the kept archive as
  its hub (filtered fetches allowed, as hosted services do), its clock at
  the history's newest commit: with ``--since 7d`` and, to compare, with
  ``--since all``: seconds to the clone's end (fetch, files of the window,
  the sync's checks), to the first inbox page (the records indexed on the
  way), to the first send, and to search caught up (documents and their
  rate), with the archive's size on disk.

The machine may be shared: CPU figures are the ones to compare between
runs; wall figures hold on a quiet machine. ``--keep DIR`` builds each size
in ``DIR/<size>`` and leaves it there; ``--reuse DIR`` uses a history kept
there by an earlier run (building it if there is none); ``--skip`` leaves
parts out. Prints a table (one column per size), then one JSON line with
every figure.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from typing import Any

import pygit2

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench_index import QUERIES, narrowing, time_queries
from bench_mcp import start_server
from scale_history import AGENTS, PROJECT, History, kept_or_built

from gitmail import Change, Store
from gitmail.index import indexer_for
from gitmail.mail.facade import Mail
from gitmail.model.ids import new_id
from gitmail.model.records import Node, inbox_path, message_path, node_path
from gitmail.storage.checkout import refresh, window_of
from gitmail.storage.objects import COMMIT, PackBuffer, Signature, encode_commit
from gitmail.storage.treeedit import TreeEditor
from gitmail.sync.join import clone


def cpu_now() -> tuple[float, float]:
    """(this process's CPU seconds, its finished children's CPU seconds)."""
    times = os.times()
    return times.user + times.system, times.children_user + times.children_system


def reindex(home: str) -> dict[str, Any]:
    """``reindex`` of the project from nothing: wall and CPU, whole and by phase."""
    store = Store(home, background=False, durable=False)
    shutil.rmtree(store.paths(store.resolve(PROJECT)).derived, ignore_errors=True)
    index = indexer_for(store).project(PROJECT)
    marks: dict[str, tuple[float, tuple[float, float]]] = {}

    def search_started(done: int, total: int) -> None:
        marks.setdefault("search", (time.perf_counter(), cpu_now()))

    start, cpu0 = time.perf_counter(), cpu_now()
    count = index.reindex(progress=search_started)
    end, cpu1 = time.perf_counter(), cpu_now()
    mid, cpu_mid = marks.get("search", (end, cpu1))
    phases = {"records": (start, cpu0, mid, cpu_mid), "search": (mid, cpu_mid, end, cpu1),
              "total": (start, cpu0, end, cpu1)}
    out: dict[str, Any] = {"documents": count}
    for name, (t0, c0, t1, c1) in phases.items():
        wall, own, children = t1 - t0, c1[0] - c0[0], c1[1] - c0[1]
        out[name] = _rates(count, wall, own, children)
    out["search_queries"] = {name: {"p50_ms": round(p50, 2), "p95_ms": round(p95, 2), "cpu_p50_ms": round(cpu, 2)}
                             for name, (p50, p95, cpu) in time_queries(index, 30).items()}
    out["narrowing"] = narrowing(index, 30)
    indexer_for(store).close()
    return out


def _rates(count: int, wall: float, own: float, children: float) -> dict[str, Any]:
    """Documents per wall second and per CPU second of every process involved (this one and its workers)."""
    cpu = own + children
    return {"wall_s": round(wall, 2), "cpu_s": round(own, 2), "workers_cpu_s": round(children, 2),
            "docs_per_s": round(count / wall) if wall else None,
            "docs_per_cpu_s": round(count / cpu) if cpu else None,
            "cpu_ms_per_doc": round(1000 * cpu / max(count, 1), 3)}


def catch_up(home: str) -> dict[str, Any]:
    """The index paths a sync feeds, timed: joining (everything from nothing) and catching up a last commit.

    Joining is what a new machine does after its clone: the metadata store
    and the search index from nothing, through ``catch_up`` as a sync calls
    it. Catching up starts from an index of the history's second-to-last
    commit and takes in the last commit's messages (a sync's arrival), up to
    searchable.
    """
    store = Store(home, background=False, durable=False)
    derived = store.paths(store.resolve(PROJECT)).derived
    out: dict[str, Any] = {}
    for name in ("join", "arrival"):
        shutil.rmtree(derived, ignore_errors=True)
        index = indexer_for(store).project(PROJECT)
        repo = index.archive.repo
        tip = index.archive.tip()
        if name == "arrival":
            index.catch_up(str(repo[tip].parents[0].id))
        before = index.meta.message_count()
        start, cpu0 = time.perf_counter(), cpu_now()
        index.catch_up(tip)
        end, cpu1 = time.perf_counter(), cpu_now()
        count = index.meta.message_count() - before
        out[name] = {"documents": count, "queued_after": index.meta.pending_count(),
                     **_rates(count, end - start, cpu1[0] - cpu0[0], cpu1[1] - cpu0[1])}
        indexer_for(store).close()
    return out


def _fine_cpu() -> float:
    """CPU seconds of this process (every thread, to the nanosecond) and of the programs it ran and reaped."""
    return time.process_time() + cpu_now()[1]


def _timed(run: Any) -> tuple[Any, float, float]:
    """(what ``run()`` returns, wall seconds, CPU seconds of this process and its children)."""
    start, cpu = time.perf_counter(), _fine_cpu()
    out = run()
    return out, time.perf_counter() - start, _fine_cpu() - cpu


def checkout(home: str) -> dict[str, Any]:
    """The human checkout made afresh with its default window: making it, ``git status`` in it, one refresh.

    ``git status`` runs seven times (median wall and CPU, git's CPU counted as
    a child's). The refresh follows a commit of ten new messages (each with
    an inbox copy), as a burst of mail brings.
    """
    store = Store(home, background=False, durable=False)
    paths = store.paths(store.resolve(PROJECT))
    shutil.rmtree(paths.checkout, ignore_errors=True)
    state, made_wall, made_cpu = _timed(lambda: refresh(paths.archive, paths.checkout))
    listed = subprocess.run(["git", "ls-files", "--sparse", "-z"], cwd=paths.checkout, capture_output=True,
                            check=True).stdout.split(b"\0")
    files = sum(1 for entry in listed if entry and not entry.endswith(b"/"))  # a folder outside the window ends in /
    runs = [_timed(lambda: subprocess.run(["git", "status", "--porcelain"], cwd=paths.checkout,
                                          capture_output=True, check=True))[1:] for _ in range(7)]
    archive = store.archive(PROJECT)
    ids = [new_id() for _ in range(10)]

    def ten(snap: Any) -> Change:
        change = Change("ten messages", author="Agent00")
        for mid in ids:
            change.put(message_path(mid), b"a message\n").put(inbox_path("Agent01", mid), b"a message\n")
        return change

    archive.transact(ten)
    refreshed, refresh_wall, refresh_cpu = _timed(lambda: refresh(paths.archive, paths.checkout))
    return {"window": window_of(paths.checkout).text(), "state": state, "files": files,
            "made_s": round(made_wall, 2), "made_cpu_s": round(made_cpu, 2),
            "status_ms": round(1000 * statistics.median(wall for wall, _ in runs), 1),
            "status_cpu_ms": round(1000 * statistics.median(cpu for _, cpu in runs), 1),
            "refresh": refreshed, "refresh_ms": round(1000 * refresh_wall, 1),
            "refresh_cpu_ms": round(1000 * refresh_cpu, 1)}
READS = ("inbox page", "thread", "thread summary", "send")
THREAD_LENGTH = 6  # the threads read have this many messages at every size
READ_REPEATS = 30
SERVER_ROUNDS = 5


def _threads(index: Any) -> list[str]:
    """The newest threads of THREAD_LENGTH messages: the same answer size at every archive size."""
    rows = index.meta.read("SELECT thread_id FROM messages GROUP BY thread_id HAVING COUNT(*) = ? "
                           "ORDER BY MAX(seq) DESC LIMIT 10", (THREAD_LENGTH,))
    if not rows:
        raise SystemExit(f"the history has no thread of {THREAD_LENGTH} messages to read")
    return [row[0] for row in rows]


def reads_and_send(home: str) -> dict[str, dict[str, float]]:
    """p50 wall and CPU of an inbox page, a thread, its summary and a send, through the mail domain.

    CPU is this process's (every thread) and that of the programs it ran.

    Each read is computed afresh (the project index's cache of answers at
    one commit is emptied first, as the next commit would); a send is one
    message from one agent to two, committed. The sends are taken back
    afterwards (``main`` is set back to where it was), so a kept history
    stays as built.
    """
    store = Store(home, background=False, durable=False)
    mail = Mail(store)
    index = indexer_for(store).project(PROJECT)
    index.catch_up()
    threads = _threads(index)
    archive = store.archive(PROJECT)
    tip = archive.tip()
    calls = {
        "inbox page": lambda k: mail.fetch_inbox(PROJECT, AGENTS[k % len(AGENTS)], limit=20),
        "thread": lambda k: mail.get_thread(PROJECT, threads[k % len(threads)]),
        "thread summary": lambda k: mail.summarize_thread(PROJECT, threads[k % len(threads)]),
        "send": lambda k: mail.send_message(PROJECT, AGENTS[4 + k % 40], [AGENTS[k % 4], AGENTS[(k + 1) % 4]],
                                            f"scale check {k}", f"plan for step {k} of the rollout"),
    }
    out = {}
    try:
        for name in AGENTS[:4]:  # the send's recipients take mail from anyone (taken back with the sends)
            mail.set_contact_policy(PROJECT, name, "open")
        for name in READS:
            calls[name](0)  # warm
            walls, cpus = [], []
            for k in range(1, READ_REPEATS + 1):
                index._memo_tip = None  # noqa: SLF001 - forget cached answers, as the next commit would
                t, c = time.perf_counter(), _fine_cpu()
                calls[name](k)
                walls.append((time.perf_counter() - t) * 1000)
                cpus.append((_fine_cpu() - c) * 1000)
            out[name] = {"p50_ms": round(statistics.median(walls), 2), "cpu_p50_ms": round(statistics.median(cpus), 2)}
    finally:
        indexer_for(store).close()
        if tip is not None:
            subprocess.run(["git", "--git-dir", archive.git_dir, "update-ref", "refs/heads/main", tip], check=True)
    return out


def _memory_mib(pid: int) -> tuple[float, float]:
    """(resident, peak resident) MiB of a process."""
    found = {}
    with open(f"/proc/{pid}/status", encoding="utf-8") as handle:
        for line in handle:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                found[key] = int(value.split()[0]) / 1024
    return round(found["VmRSS"], 1), round(found["VmHWM"], 1)


def server_memory(home: str) -> dict[str, float]:
    """A real ``gitmail serve`` on the archive: its memory after answering the web view's busiest pages.

    The pages (the project, an agent's inbox, a thread, a search) are each
    fetched SERVER_ROUNDS times; the index is already up to date, so the
    figure is what serving costs, not what building the index costs.
    """
    store = Store(home, background=False, durable=False)
    slug = store.resolve(PROJECT)
    index = indexer_for(store).project(PROJECT)
    thread = _threads(index)[0]
    indexer_for(store).close()
    proc, mcp_url = start_server(home)
    try:
        base = mcp_url.rsplit("/mcp", 1)[0] + f"/ui/p/{slug}"
        started = _memory_mib(proc.pid)[0]
        pages = [base, f"{base}/agents/{AGENTS[3]}", f"{base}/thread/{thread}", f"{base}/search?q=plan",
                 f"{base}/search?q=%22build+plan%22"]
        for _ in range(SERVER_ROUNDS):
            for url in pages:
                with urllib.request.urlopen(url, timeout=300) as response:
                    response.read()
                    if response.status != 200:
                        raise SystemExit(f"{url} answered {response.status}")
        rss, peak = _memory_mib(proc.pid)
    finally:
        proc.terminate()
        proc.wait(30)
    return {"started_mib": started, "rss_mib": rss, "peak_mib": peak}


def joining(home: str) -> dict[str, Any]:
    """A new machine joining from the kept history: ``--since 7d`` and ``--since all``, timed step by step."""
    where = tempfile.mkdtemp(prefix="bench-hub-")
    try:
        hub, newest = signed_hub(home, where)
        out: dict[str, Any] = {}
        for since in ("7d", "all"):
            joiner = tempfile.mkdtemp(prefix="bench-join-")
            store = Store(joiner, background=False, durable=False, wall=lambda: newest + 3600)
            try:
                out[since] = _join_steps(store, "file://" + hub, since)
            finally:
                indexer_for(store).close()
                shutil.rmtree(joiner, ignore_errors=True)
        return out
    finally:
        shutil.rmtree(where, ignore_errors=True)


def signed_hub(home: str, where: str) -> tuple[str, float]:
    """A hub holding the kept history signed by one node, as gitmail writes it; (its path, the newest commit's time).

    The history is written unsigned (with fast-import), which every door
    refuses: each commit is written again with the same tree plus that
    node's record, its times and message, signed, in a hub that shares the
    kept archive's objects (filtered fetches allowed, as hosted services do).
    """
    source = Store(home, background=False, durable=False)
    archive = source.archive(PROJECT)
    hub = os.path.join(where, "hub.git")
    subprocess.run(["git", "clone", "-q", "--bare", "--shared", archive.git_dir, hub], check=True)
    subprocess.run(["git", "--git-dir", hub, "config", "uploadpack.allowFilter", "true"], check=True)
    repo = pygit2.Repository(hub)
    record = Node(node=source.node, key=source.key.public_line, kind="node", created_at=source.clock.now_ts())
    pack, written = PackBuffer(), {}  # old id -> the id of the commit written again
    tip = repo.references["refs/heads/main"].target
    for commit in repo.walk(tip, pygit2.enums.SortMode.TOPOLOGICAL | pygit2.enums.SortMode.REVERSE):
        editor = TreeEditor(repo, commit.tree.id.raw, pack)
        editor.set(node_path(source.node), record.to_bytes())
        who = Signature(commit.author.name, commit.author.email, commit.commit_time)
        written[commit.id] = pack.add(COMMIT, encode_commit(editor.flush(), [written[p] for p in commit.parent_ids],
                                                            who, who, commit.message, sign=source.key.sign_commit))
    pack.write(os.path.join(hub, "objects", "pack"))
    subprocess.run(["git", "--git-dir", hub, "update-ref", "refs/heads/main", written[tip].hex()], check=True)
    return hub, float(repo[tip].peel(pygit2.Commit).commit_time)


def _join_steps(store: Store, url: str, since: str) -> dict[str, Any]:
    """Seconds from the start of a clone to its end, the first inbox page, the first send, and search caught up."""
    started, cpu0 = time.perf_counter(), cpu_now()
    joined = clone(store, url, since=since, index=False)
    steps = {"clone_s": time.perf_counter() - started}
    assert joined.sync.exit_code == 0, joined.sync.results
    mail = Mail(store)
    mail.fetch_inbox(PROJECT, AGENTS[0], limit=20)
    steps["first_inbox_s"] = time.perf_counter() - started
    mail.set_contact_policy(PROJECT, AGENTS[0], "open")
    mail.send_message(PROJECT, AGENTS[4], [AGENTS[0]], "first send", "from the machine that just joined")
    steps["first_send_s"] = time.perf_counter() - started
    index = indexer_for(store).project(PROJECT)
    searched = time.perf_counter()
    index.catch_up()
    steps["search_caught_up_s"] = time.perf_counter() - started
    cpu1 = cpu_now()
    documents = index.meta.message_count()
    size = subprocess.run(["du", "-sk", store.archive(PROJECT).git_dir], capture_output=True, text=True, check=True)
    return {**{key: round(value, 2) for key, value in steps.items()}, "commits": joined.commits,
            "files_fetched": joined.files_fetched, "documents": documents,
            "search_docs_per_s": round(documents / max(time.perf_counter() - searched, 1e-9)),
            "cpu_s": round(cpu1[0] - cpu0[0] + cpu1[1] - cpu0[1], 2),
            "archive_mib": round(int(size.stdout.split()[0]) / 1024, 1)}


PARTS = ("reindex", "catch_up", "checkout", "reads", "server", "join")


def measure(home: str, size: int, *, reuse: bool, skip: frozenset[str] = frozenset()) -> dict[str, Any]:
    kept = History.load(home) if reuse else None
    history = kept_or_built(home, size, reuse=reuse)
    result: dict[str, Any] = {"messages": size, "history": {
        "kept": kept is not None and kept.messages == size, "seconds": history.seconds,
        "msgs_per_s": round(size / history.seconds) if history.seconds else None, "receipts": history.receipts,
        "reservations": history.reservations, "commits": history.commits}}
    for part, run in zip(PARTS, (reindex, catch_up, checkout, reads_and_send, server_memory, joining), strict=True):
        if part not in skip:
            result[part] = run(home)
    return result


ROWS: list[tuple[str, Any]] = [
    ("history build s", lambda r: "kept" if r["history"]["kept"] else r["history"]["seconds"]),
    ("history msg/s", lambda r: "kept" if r["history"]["kept"] else r["history"]["msgs_per_s"]),
    ("reindex wall s", lambda r: r["reindex"]["total"]["wall_s"]),
    ("reindex docs/s (wall)", lambda r: r["reindex"]["total"]["docs_per_s"]),
    ("reindex docs/CPU-s (ms/doc)", lambda r: f"{r['reindex']['total']['docs_per_cpu_s']} "
                                            f"({r['reindex']['total']['cpu_ms_per_doc']})"),
    ("  records: wall s", lambda r: r["reindex"]["records"]["wall_s"]),
    ("  records: CPU ms/doc", lambda r: r["reindex"]["records"]["cpu_ms_per_doc"]),
    ("  search: wall s", lambda r: r["reindex"]["search"]["wall_s"]),
    ("  search: docs/s (wall)", lambda r: r["reindex"]["search"]["docs_per_s"]),
    ("  search: CPU ms/doc (workers)", lambda r: f"{r['reindex']['search']['cpu_ms_per_doc']} "
                                                f"({r['reindex']['search']['workers_cpu_s']} s)"),
]


CATCH_UP_ROWS: list[tuple[str, Any]] = [
    (f"{label}: {figure}", lambda r, path=path, key=key: r["catch_up"][path][key])
    for path, label in (("join", "join from nothing"), ("arrival", "sync arrival (last commit)"))
    for figure, key in (("docs", "documents"), ("docs/s (wall)", "docs_per_s"), ("docs/CPU-s", "docs_per_cpu_s"))
]
CHECKOUT_ROWS: list[tuple[str, Any]] = [
    ("checkout window", lambda r: f"{r['checkout']['window']} ({r['checkout']['files']:,} files)"),
    ("checkout: made s (CPU s)", lambda r: f"{r['checkout']['made_s']} ({r['checkout']['made_cpu_s']})"),
    ("checkout: git status ms (CPU)", lambda r: f"{r['checkout']['status_ms']} ({r['checkout']['status_cpu_ms']})"),
    ("checkout: refresh 10 msgs ms (CPU)", lambda r: f"{r['checkout']['refresh_ms']} "
                                                     f"({r['checkout']['refresh_cpu_ms']})"),
]


JOIN_ROWS: list[tuple[str, Any]] = [
    (f"clone --since {since}: {figure}", lambda r, since=since, key=key: r["join"][since][key])
    for since in ("7d", "all")
    for figure, key in (("clone s", "clone_s"), ("first inbox s", "first_inbox_s"), ("first send s", "first_send_s"),
                        ("search caught up s", "search_caught_up_s"), ("documents", "documents"),
                        ("archive MiB", "archive_mib"))
]


def table(results: list[dict[str, Any]]) -> str:
    """One column per size; the rows of every part measured (see ``--skip``)."""
    width = 22
    measured = results[0]
    lines = [f"{'figure':<34}" + "".join(f"{r['messages']:>{width},}" for r in results)]
    rows = [*ROWS[:2], *(ROWS[2:] if "reindex" in measured else []),
            *(CATCH_UP_ROWS if "catch_up" in measured else []), *(CHECKOUT_ROWS if "checkout" in measured else []),
            *(JOIN_ROWS if "join" in measured else [])]
    for label, get in rows:
        lines.append(f"{label:<34}" + "".join(f"{get(r)!s:>{width}}" for r in results))
    if "reindex" in measured:
        lines.append(f"{'search p50 ms (CPU p50 ms)':<34}")
        for name in QUERIES:
            cells = [f"{q['p50_ms']} ({q['cpu_p50_ms']})"
                     for q in (r["reindex"]["search_queries"][name] for r in results)]
            lines.append(f"{'  ' + name:<34}" + "".join(f"{cell:>{width}}" for cell in cells))
        lines.append(f"{'narrowed / leapfrog CPU p50 ms':<34}")
        for name in measured["reindex"]["narrowing"]:
            cells = [f"{n['narrowed']} / {n['leapfrog']} ({n['ratio']}x)"
                     for n in (r["reindex"]["narrowing"][name] for r in results)]
            lines.append(f"{'  ' + name:<34}" + "".join(f"{cell:>{width}}" for cell in cells))
    if "reads" in measured:
        lines.append(f"{'p50 ms (CPU p50 ms) [CPU ratio to ' + format(measured['messages'], ',') + ']':<34}")
        for name in READS:
            cells = []
            for r in results:
                fig = r["reads"][name]
                ratio = fig["cpu_p50_ms"] / max(measured["reads"][name]["cpu_p50_ms"], 1e-6)
                cells.append(f"{fig['p50_ms']} ({fig['cpu_p50_ms']}) [{ratio:.2f}x]")
            lines.append(f"{'  ' + name:<34}" + "".join(f"{cell:>{width + 6}}" for cell in cells))
    if "server" in measured:
        lines.append(f"{'server RSS MiB (peak)':<34}"
                     + "".join(f"{str(r['server']['rss_mib']) + ' (' + str(r['server']['peak_mib']) + ')':>{width}}"
                               for r in results))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,100000", help="comma-separated message counts (default 10000,100000)")
    parser.add_argument("--messages", type=int, help="one size only (overrides --sizes)")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--keep", metavar="DIR", help="build each size in DIR/<size> and leave it there")
    where.add_argument("--reuse", metavar="DIR", help="use the histories kept in DIR/<size> (built if missing)")
    parser.add_argument("--skip", nargs="*", default=[], choices=PARTS, help="parts not to measure")
    args = parser.parse_args()
    sizes = [args.messages] if args.messages else [int(size) for size in args.sizes.split(",")]
    root = args.keep or args.reuse or tempfile.mkdtemp(prefix="bench-scale-")
    results = []
    try:
        for size in sizes:
            results.append(measure(os.path.join(root, str(size)), size, reuse=bool(args.reuse),
                                   skip=frozenset(args.skip)))
    finally:
        if not (args.keep or args.reuse):
            shutil.rmtree(root, ignore_errors=True)
    print(table(results))
    load = os.getloadavg()
    print(json.dumps({"bench": "scale", "load_average": [round(x, 2) for x in load], "results": results}))


if __name__ == "__main__":
    main()
