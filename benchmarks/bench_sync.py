"""Benchmark of sync between machines through a checked hub: bulk transfer, racing syncs, convergence.

One command runs everything and prints a table, then one JSON line::

    python benchmarks/bench_sync.py                     # the targets' settings (takes a few minutes)
    python benchmarks/bench_sync.py --messages 2000 --machines 3 --fleet 3 --seconds 10   # a quick run
    python benchmarks/bench_sync.py --skip race fleet --profile   # where a bulk sync's time goes

Every hub has gitmail's ``pre-receive`` check installed (``install_hub``),
so every push below is judged by the record checker, as on a real shared hub.

1. **Bulk**: a remote machine writes ``--messages`` new messages (canonical
   file, an inbox and an outbox copy each) and pushes them. Two receivers
   run one ``sync_project`` each, which returns only once the index (inbox
   and search) has taken the messages in: a fresh machine (a fetch and a
   fast-forward) and one that shares the history before the bulk and wrote
   messages of its own (a fetch, a merge by the record rules, a push). Each
   receiver syncs in a process of its own once every store's background
   index work is done, as on separate machines. Each step is timed through
   the sync's progress callback. Two rates: in inbox, over the fetch,
   check and merge (the messages are readable from then on; target: at
   least 5,000 msg/s), and searchable, over the whole sync, index included
   (target: at least 2,000 msg/s).
2. **Racing syncs**: ``--machines`` processes each write a message, wait at
   a barrier, and sync at the same moment, ``--rounds`` times. Reported:
   errors (target 0) and how many pushes lost the race for ``main`` and
   went to the machine's own ref.
3. **Convergence**: for each machine count in ``--fleet`` (default 3 and
   10), that many processes each write one message every
   ``--write-interval`` seconds and sync every ``--sync-interval`` seconds
   (as ``gitmail serve --sync-interval`` does: the pause counts from the end
   of the last sync) for ``--seconds``. Reported: the time from the end of
   the writes until every machine holds the same tree with every message
   written anywhere (targets: 3 s for 3 machines, 5 s for 10 at a sync
   interval of 1 s), sync errors, and exactly-once presence.

Figures on a shared 2-core machine move from run to run: compare medians,
and read the load average printed with them.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import multiprocessing
import os
import pstats
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import pygit2

from gitmail.index.indexer import indexer_for
from gitmail.model.ids import new_id
from gitmail.model.records import LAYOUT, Agent, Message, Project, inbox_path, outbox_path
from gitmail.storage.engine import Change
from gitmail.storage.store import Store, slug_for
from gitmail.sync.hookinstall import install_hub
from gitmail.sync.remotes import add_remote
from gitmail.sync.syncer import sync_project

PROJECT = "/bench/shared"
AGENTS = ("BlueLake", "GreenCastle")
TARGETS = {"bulk_msgs_per_s": 5000, "searchable_msgs_per_s": 2000, "convergence_s": {3: 3.0, 10: 5.0},
           "race_errors": 0}


def make_hub(path: str) -> str:
    subprocess.run(["git", "init", "-q", "--bare", "--initial-branch=main", path], check=True, capture_output=True)
    install_hub(path)
    return path


def make_store(root: str, name: str, *, background: bool = False) -> Store:
    home = os.path.join(root, name)
    os.makedirs(home, exist_ok=True)
    with open(os.path.join(home, "node"), "w", encoding="utf-8") as handle:
        handle.write(name + "\n")
    return Store(home, background=background, durable=False)


def create_project(store: Store) -> None:
    stamp, hlc = store.clock.now_ts(), store.clock.tick()

    def fn(snapshot):
        change = Change("project created")
        change.put_record(Project(id=new_id(), slug=slug_for(PROJECT), human_key=PROJECT, created_at=stamp, hlc=hlc,
                                  layout=LAYOUT))
        for name in AGENTS:
            change.put_record(Agent(id=new_id(), name=name, program="bench", model="m", inception_ts=stamp, hlc=hlc))
        return change

    store.archive(PROJECT, create=True).transact(fn)


def write_messages(store: Store, count: int, batch: int = 100, tag: str = "") -> list[str]:
    """``count`` messages from BlueLake to GreenCastle, ``batch`` per commit."""
    archive = store.archive(PROJECT)
    ids: list[str] = []
    for start in range(0, count, batch):
        messages = [Message(id=store.clock.new_id(), thread_id="bench", sender="BlueLake",
                            subject=f"bench {tag} {start + i}", created_ts=store.clock.now_ts(), to=["GreenCastle"],
                            body=f"message {start + i} {tag}\n") for i in range(min(batch, count - start))]

        def fn(snapshot, messages=messages):
            change = Change(f"BlueLake sent {len(messages)} messages", author="BlueLake")
            for message in messages:
                data = message.to_bytes()
                change.put_record(message)
                change.put(inbox_path("GreenCastle", message.id), data)
                change.put(outbox_path("BlueLake", message.id), data)
            return change

        archive.transact(fn)
        ids += [message.id for message in messages]
    return ids


def tree_of(git_dir: str) -> str | None:
    try:
        return str(pygit2.Repository(git_dir).references["refs/heads/main"].peel(pygit2.Tree).id)
    except KeyError:
        return None


# -- 1. bulk ------------------------------------------------------------------------------

def timed_sync(store: Store, count: int) -> dict[str, Any]:
    """One sync, each step timed by the progress callback; messages per second over the whole sync."""
    marks: list[tuple[str, float]] = []
    started = time.perf_counter()
    report = sync_project(store, PROJECT, progress=lambda remote, step: marks.append((step, time.perf_counter())))
    ended = time.perf_counter()
    steps: dict[str, float] = {}
    for (step, at), (_, until) in zip(marks, [*marks[1:], ("end", ended)], strict=True):
        steps[step] = steps.get(step, 0.0) + until - at
    (result,) = report.results
    in_inbox = sum(steps.get(step, 0.0) for step in ("fetch", "check", "merge"))  # readable from the inbox from then
    return {"total_s": ended - started, "msgs_per_s": count / (ended - started),
            "inbox_msgs_per_s": count / in_inbox if in_inbox else None, **{f"{k}_s": v for k, v in steps.items()},
            "messages_in": result.messages_in, "merges": result.merges,
            "fast_forwards": result.fast_forwards, "quarantined": len(result.quarantined),
            "search_caught_up": report.index.get("caught_up"), "search_behind": report.index.get("search_behind", 0)}


def receive(home: str, count: int, out: str, profile: bool) -> None:
    """One receiving machine's timed sync, in a process of its own (as `gitmail sync` runs).

    With ``profile``, the sync runs under cProfile and the functions with the
    most cumulative time are printed (the figures then include its overhead).
    """
    store = Store(home, background=False, durable=False)
    profiler = cProfile.Profile() if profile else None
    if profiler is not None:
        profiler.enable()
    result = timed_sync(store, count)
    if profiler is not None:
        profiler.disable()
        print(f"-- cProfile of the sync into {os.path.basename(home)} (the figures include its overhead)")
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(30)
    with open(out, "w", encoding="utf-8") as handle:
        json.dump(result, handle)


def timed_sync_elsewhere(store: Store, count: int, *, profile: bool = False) -> dict[str, Any]:
    """``timed_sync`` of ``store``'s home in a fresh process: no other machine's background work shares it."""
    out = os.path.join(store.home, "timed-sync.json")
    proc = multiprocessing.get_context("spawn").Process(target=receive, args=(store.home, count, out, profile))
    proc.start()
    proc.join()
    if proc.exitcode != 0:
        raise RuntimeError(f"the receiving sync failed (exit code {proc.exitcode})")
    with open(out, encoding="utf-8") as handle:
        result: dict[str, Any] = json.load(handle)
    return result


def settle(*stores: Store) -> None:
    """Let every store's background index work finish and stop, as on machines that sat idle a while."""
    for store in stores:
        indexer_for(store).close()


def bench_bulk(root: str, count: int, *, profile: bool = False) -> dict[str, Any]:
    hub = make_hub(os.path.join(root, "hub.git"))
    remote, fresh, merger = (make_store(root, name) for name in ("remote", "fresh", "merger"))
    create_project(remote)
    for store in (remote, merger):
        add_remote(store, PROJECT, "hub", "file://" + hub)
        sync_project(store, PROJECT)  # the merger shares the history before the bulk, its index too
    t0 = time.perf_counter()
    write_messages(remote, count, tag="remote")
    t1 = time.perf_counter()
    sync_project(remote, PROJECT, catch_up_index=False)
    t2 = time.perf_counter()
    write_messages(merger, 50, batch=10, tag="local")
    indexer_for(merger).project(PROJECT).catch_up()  # its index takes its own messages in before the bulk
    add_remote(fresh, PROJECT, "hub", "file://" + hub)
    settle(remote, fresh, merger)
    out = {"messages": count, "remote_write_s": t1 - t0, "remote_push_s": t2 - t1,
           "fresh": timed_sync_elsewhere(fresh, count, profile=profile),
           "merge": timed_sync_elsewhere(merger, count, profile=profile)}
    sync_project(fresh, PROJECT)
    out["converged"] = (tree_of(fresh.paths(fresh.resolve(PROJECT)).archive)
                        == tree_of(merger.paths(merger.resolve(PROJECT)).archive))
    settle(fresh, merger)
    return out


# -- 2. racing syncs ---------------------------------------------------------------------------

def race_worker(root: str, name: str, rounds: int, barrier: Any, out: str) -> None:
    store = make_store(root, name)
    errors, node_pushes, seconds = [], 0, []
    for round_no in range(rounds):
        write_messages(store, 1, tag=f"{name}-{round_no}")
        barrier.wait()  # every machine is at the start line
        t0 = time.perf_counter()
        report = sync_project(store, PROJECT)
        seconds.append(time.perf_counter() - t0)
        for result in report.results:
            if result.error is not None:
                errors.append(f"{result.error['code']}: {result.error['message']}")
            node_pushes += result.pushed_to == "node"
    with open(out, "w", encoding="utf-8") as handle:
        json.dump({"errors": errors, "node_pushes": node_pushes, "seconds": seconds}, handle)


def bench_race(root: str, machines: int, rounds: int) -> dict[str, Any]:
    hub = make_hub(os.path.join(root, "hub.git"))
    names = [f"racer{i:02d}" for i in range(machines)]
    stores = [make_store(root, name) for name in names]
    create_project(stores[0])
    for store in stores:
        add_remote(store, PROJECT, "hub", "file://" + hub)
        sync_project(store, PROJECT)
    del stores
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(machines)
    outs = [os.path.join(root, f"{name}.json") for name in names]
    procs = [context.Process(target=race_worker, args=(root, name, rounds, barrier, out))
             for name, out in zip(names, outs, strict=True)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(600)
    reports = []
    for out in outs:
        with open(out, encoding="utf-8") as handle:
            reports.append(json.load(handle))
    seconds = [s for report in reports for s in report["seconds"]]
    return {"machines": machines, "rounds": rounds, "syncs": len(seconds),
            "errors": sum(len(report["errors"]) for report in reports),
            "error_samples": sorted({e for report in reports for e in report["errors"]})[:3],
            "node_pushes": sum(report["node_pushes"] for report in reports),
            "sync_p50_s": statistics.median(seconds), "sync_max_s": max(seconds)}


# -- 3. convergence ------------------------------------------------------------------------------

def fleet_worker(root: str, name: str, seconds: float, write_interval: float, sync_interval: float,
                 stop_file: str) -> None:
    """One machine: write and sync (a pause of sync_interval after each sync) until told to stop."""
    store = make_store(root, name, background=True)
    rng = random.Random(name)
    sent: list[str] = []
    syncs: list[float] = []
    errors: list[str] = []
    start = time.monotonic()
    next_write = start + rng.uniform(0, write_interval)
    next_sync = start + rng.uniform(0, sync_interval)
    sent_file = os.path.join(root, name + ".sent")
    while not os.path.exists(stop_file):
        now = time.monotonic()
        if now < start + seconds and now >= next_write:
            sent += write_messages(store, 1, tag=name)
            next_write += write_interval
        if now >= start + seconds and not os.path.exists(sent_file):
            with open(sent_file + ".tmp", "w", encoding="utf-8") as handle:
                json.dump(sent, handle)
            os.replace(sent_file + ".tmp", sent_file)
        if now >= next_sync:
            t0 = time.perf_counter()
            try:
                report = sync_project(store, PROJECT)
                errors += [f"{r.error['code']}: {r.error['message']}" for r in report.results if r.error]
            except Exception as exc:  # noqa: BLE001 - counted; the next round tries again
                errors.append(f"{type(exc).__name__}: {exc}")
            syncs.append(time.perf_counter() - t0)
            next_sync = time.monotonic() + sync_interval
        time.sleep(0.005)
    with open(os.path.join(root, name + ".json"), "w", encoding="utf-8") as handle:
        json.dump({"syncs": syncs, "errors": errors}, handle)
    store.flush()


def bench_fleet(root: str, machines: int, seconds: float, write_interval: float, sync_interval: float) -> dict:
    hub = make_hub(os.path.join(root, "hub.git"))
    names = [f"node{i:02d}" for i in range(machines)]
    stores = [make_store(root, name) for name in names]
    create_project(stores[0])
    for store in stores:
        add_remote(store, PROJECT, "hub", "file://" + hub)
        sync_project(store, PROJECT)
    git_dirs = [store.paths(store.resolve(PROJECT)).archive for store in stores]
    del stores
    stop_file = os.path.join(root, "stop")
    procs = [subprocess.Popen([sys.executable, __file__, "--fleet-worker", root, name, str(seconds),
                               str(write_interval), str(sync_interval), stop_file]) for name in names]
    sent: list[str] = []
    converged_after = None
    try:
        while not all(os.path.exists(os.path.join(root, name + ".sent")) for name in names):
            time.sleep(0.01)
        writes_end = max(os.path.getmtime(os.path.join(root, name + ".sent")) for name in names)
        for name in names:
            with open(os.path.join(root, name + ".sent"), encoding="utf-8") as handle:
                sent += json.load(handle)
        deadline = time.time() + max(120.0, 30 * sync_interval)
        while time.time() < deadline:
            trees = {tree_of(git_dir) for git_dir in git_dirs}
            if len(trees) == 1 and set(sent) <= set(_messages(git_dirs[0])):
                converged_after = time.time() - writes_end
                break
            time.sleep(0.02)
    finally:
        with open(stop_file, "w"):
            pass
        for proc in procs:
            proc.wait(120)
    reports = []
    for name in names:
        with open(os.path.join(root, name + ".json"), encoding="utf-8") as handle:
            reports.append(json.load(handle))
    present = _messages(git_dirs[0])
    syncs = [s for report in reports for s in report["syncs"]]
    return {"machines": machines, "seconds": seconds, "sync_interval": sync_interval,
            "messages_written": len(sent), "messages_present": len(present), "lost": len(set(sent) - set(present)),
            "duplicated": len(present) - len(set(present)), "convergence_s": converged_after,
            "sync_errors": sum(len(report["errors"]) for report in reports),
            "error_samples": sorted({e for report in reports for e in report["errors"]})[:3],
            "syncs": len(syncs), "sync_p50_s": statistics.median(syncs) if syncs else None}


def _messages(git_dir: str) -> list[str]:
    """Message ids at the tip of an archive (one per canonical file)."""
    repo = pygit2.Repository(git_dir)
    try:
        tree = repo.references["refs/heads/main"].peel(pygit2.Tree)["messages"]
    except KeyError:
        return []
    out = []
    stack = [tree]
    while stack:
        for entry in stack.pop():
            if entry.type == pygit2.GIT_OBJECT_TREE:
                stack.append(repo[entry.id])
            else:
                out.append(entry.name[:-3])
    return out


# -- the table ---------------------------------------------------------------------------------

def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--fleet-worker":
        root, name, seconds, write_interval, sync_interval, stop_file = sys.argv[2:8]
        fleet_worker(root, name, float(seconds), float(write_interval), float(sync_interval), stop_file)
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=10_000, help="messages in the bulk sync (default 10000)")
    parser.add_argument("--machines", type=int, default=3, help="machines racing their syncs (default 3)")
    parser.add_argument("--rounds", type=int, default=20, help="rounds of racing syncs (default 20)")
    parser.add_argument("--fleet", type=int, nargs="*", default=[3, 10], help="machine counts for convergence")
    parser.add_argument("--seconds", type=float, default=20.0, help="how long the fleet writes (default 20)")
    parser.add_argument("--write-interval", type=float, default=1.0, help="seconds between one machine's writes")
    parser.add_argument("--sync-interval", type=float, default=1.0, help="pause after one machine's sync (default 1)")
    parser.add_argument("--skip", nargs="*", default=[], choices=["bulk", "race", "fleet"])
    parser.add_argument("--profile", action="store_true", help="print a cProfile of each bulk receiver's sync")
    args = parser.parse_args()
    root = tempfile.mkdtemp(prefix="gitmail-bench-sync-")
    out: dict[str, Any] = {"load_average": os.getloadavg(), "targets": TARGETS}
    try:
        if "bulk" not in args.skip:
            bulk = out["bulk"] = bench_bulk(os.path.join(root, "bulk"), args.messages, profile=args.profile)
            print(f"Bulk sync of {bulk['messages']} new messages through a checked hub (targets: in inbox, after "
                  f"fetch, check and merge, >= {TARGETS['bulk_msgs_per_s']} msg/s; searchable, index included, "
                  f">= {TARGETS['searchable_msgs_per_s']} msg/s)")
            print(f"{'receiver':<9} {'fetch s':>8} {'check s':>8} {'merge s':>8} {'push s':>7} {'index s':>8} "
                  f"{'total s':>8} {'inbox/s':>8} {'msgs/s':>8} {'search behind':>14}")
            for label in ("fresh", "merge"):
                row = bulk[label]
                print(f"{label:<9} {row.get('fetch_s', 0):>8.2f} {row.get('check_s', 0):>8.2f} "
                      f"{row.get('merge_s', 0):>8.2f} {row.get('push_s', 0):>7.2f} {row.get('index_s', 0):>8.2f} "
                      f"{row['total_s']:>8.2f} {row['inbox_msgs_per_s'] or 0:>8.0f} {row['msgs_per_s']:>8.0f} "
                      f"{row['search_behind']:>14}")
            print(f"fresh and merging receivers converged: {bulk['converged']}")
        if "race" not in args.skip:
            race = out["race"] = bench_race(os.path.join(root, "race"), args.machines, args.rounds)
            print(f"\nRacing syncs: {race['machines']} machines x {race['rounds']} rounds, all released at once "
                  f"(target: {TARGETS['race_errors']} errors)")
            print(f"  errors {race['errors']}   pushes to a machine's own ref {race['node_pushes']}   "
                  f"sync p50 {race['sync_p50_s']:.2f} s   max {race['sync_max_s']:.2f} s")
            for sample in race["error_samples"]:
                print(f"  error: {sample}")
        if "fleet" not in args.skip:
            out["fleet"] = []
            print(f"\nConvergence: each machine writes every {args.write_interval} s for {args.seconds:.0f} s and "
                  f"syncs {args.sync_interval} s after its last sync")
            print(f"{'machines':>8} {'converged s':>12} {'target s':>9} {'errors':>7} {'written':>8} {'lost':>5} "
                  f"{'dup':>4} {'syncs':>6} {'sync p50 s':>11}")
            for count in args.fleet:
                fleet = bench_fleet(os.path.join(root, f"fleet{count}"), count, args.seconds, args.write_interval,
                                    args.sync_interval)
                out["fleet"].append(fleet)
                shown = "never" if fleet["convergence_s"] is None else f"{fleet['convergence_s']:.2f}"
                target = TARGETS["convergence_s"].get(count)
                print(f"{count:>8} {shown:>12} {target if target else '-':>9} {fleet['sync_errors']:>7} "
                      f"{fleet['messages_written']:>8} {fleet['lost']:>5} {fleet['duplicated']:>4} "
                      f"{fleet['syncs']:>6} {fleet['sync_p50_s'] or 0:>11.2f}")
                for sample in fleet["error_samples"]:
                    print(f"  error: {sample}")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(json.dumps({"bench": "sync", **out}, default=str))


if __name__ == "__main__":
    main()
