"""Benchmark of sync between machines: bulk transfer, and many machines sharing one hub.

One command runs everything and prints a table, then one JSON line::

    python benchmarks/bench_sync.py                          # 10k messages, 10 machines for 60 s
    python benchmarks/bench_sync.py --messages 2000 --machines 4 --seconds 15   # a quick run

What it measures:

1. **Bulk**: a remote machine writes ``--messages`` new messages (canonical
   file, an inbox copy, an outbox copy each) and pushes them to a bare hub.
   Then, for two receivers:

   - a fresh machine (the sync is a fetch plus a fast-forward), and
   - a machine that shares the history before those messages and has
     written messages of its own (the sync is a fetch plus a real merge by
     the record rules, committed by compare-and-swap, then a push),

   it times ``git fetch`` and the merge step separately and reports
   messages per second, then the index catch-up that follows (a tree diff
   from the index's watermark) against a full index rebuild of the same
   archive, per message.
2. **Simulation**: ``--machines`` stores, each in its own OS process, write
   a message every ``--write-interval`` seconds and sync with the hub every
   ``--sync-interval`` seconds (jittered) for ``--seconds``; then they keep
   syncing until every archive has the same tree. Reported: the time from
   the end of the writes to convergence, push rejections (a machine pushed
   while another had just moved the hub), sync latency, and a check that
   every message written anywhere is present exactly once everywhere.

3. **Watcher**: a human pushes one message at a time into an archive from a
   clone, as a teammate's push or a plain ``git pull`` would land; the
   watcher on the archive's refs wakes the index catch-up. Reported: the
   time from starting ``git push`` until that catch-up has taken the message
   in, p50 and max over ``--watch-rounds`` pushes.

Figures on a shared 2-core machine move from run to run: compare medians.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import pygit2  # noqa: E402

from gitmail.model.ids import new_id
from gitmail.model.records import Agent, Message, Project, inbox_path, outbox_path
from gitmail.storage.engine import Change
from gitmail.storage.store import Store, slug_for
from gitmail.sync.remotes import add_remote
from gitmail.sync.syncer import SyncResult, fetch_remote, integrate, sync_project

PROJECT = "/bench/shared"
AGENTS = ("BlueLake", "GreenCastle")


def _git(*args: str) -> None:
    subprocess.run(["git", *args], check=True, capture_output=True)


def make_store(root: str, name: str) -> Store:
    home = os.path.join(root, name)
    os.makedirs(home, exist_ok=True)
    with open(os.path.join(home, "node"), "w", encoding="utf-8") as handle:
        handle.write(name + "\n")
    return Store(home, background=False, durable=False)


def create_project(store: Store) -> None:
    stamp, hlc = store.clock.now_ts(), store.clock.tick()

    def fn(snapshot):
        change = Change("project created")
        change.put_record(Project(id=new_id(), slug=slug_for(PROJECT), human_key=PROJECT, created_at=stamp, hlc=hlc))
        for name in AGENTS:
            change.put_record(Agent(id=new_id(), name=name, program="bench", model="m", inception_ts=stamp, hlc=hlc))
        return change

    store.archive(PROJECT, create=True).transact(fn)


def write_messages(store: Store, count: int, batch: int = 100, tag: str = "") -> list[str]:
    """``count`` messages from BlueLake to GreenCastle, ``batch`` per commit."""
    archive = store.archive(PROJECT)
    ids: list[str] = []
    for start in range(0, count, batch):
        messages = [Message(id=new_id(), thread_id="bench", sender="BlueLake", subject=f"bench {tag} {start + i}",
                            created_ts=store.clock.now_ts(), to=["GreenCastle"], body=f"message {start + i} {tag}\n")
                    for i in range(min(batch, count - start))]

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


def timed_sync(store: Store, remote: str = "hub") -> dict[str, float]:
    """Fetch, integrate and push step by step, timing each."""
    archive = store.archive(PROJECT)
    result = SyncResult(project=store.resolve(PROJECT), remote=remote)
    t0 = time.perf_counter()
    theirs, _nodes = fetch_remote(archive, remote)
    t1 = time.perf_counter()
    integrate(store, archive, theirs, f"{remote}/main", result)
    t2 = time.perf_counter()
    pushed = sync_project(store, PROJECT, remote)[0]  # pushes the merge, if any
    t3 = time.perf_counter()
    return {"fetch_s": t1 - t0, "merge_s": t2 - t1, "push_s": t3 - t2, "messages_in": result.messages_in,
            "fast_forwards": result.fast_forwards, "merges": result.merges, "records_out": pushed.records_out}


def index_times(store: Store) -> tuple[float, float]:
    """(catch-up after the sync, full rebuild) in seconds."""
    from gitmail.index import indexer_for

    # Measure on two copies of the store, the rebuild first, so the catch-up
    # does not pay alone for cold caches (blobs, imports) the rebuild reuses.
    twin = Store(shutil.copytree(store.home, store.home + "-twin", symlinks=True), background=False)
    rebuilder = indexer_for(twin)
    t0 = time.perf_counter()
    rebuilder.project(PROJECT).reindex()
    t1 = time.perf_counter()
    rebuilder.close()
    indexer = indexer_for(store)
    t2 = time.perf_counter()
    indexer.project(PROJECT).catch_up()
    t3 = time.perf_counter()
    indexer.close()
    return t3 - t2, t1 - t0


def bench_bulk(root: str, count: int) -> dict[str, object]:
    hub = os.path.join(root, "hub.git")
    _git("init", "-q", "--bare", "--initial-branch=main", hub)
    remote, fresh, merger = (make_store(root, name) for name in ("remote", "fresh", "merger"))
    create_project(remote)
    add_remote(remote, PROJECT, "hub", "file://" + hub)
    sync_project(remote, PROJECT)
    add_remote(merger, PROJECT, "hub", "file://" + hub)
    sync_project(merger, PROJECT)  # shares the history before the bulk
    from gitmail.index import indexer_for

    indexer_for(merger).project(PROJECT).catch_up()  # its index reflects the shared base
    indexer_for(merger).close()
    t0 = time.perf_counter()
    write_messages(remote, count, tag="remote")
    t1 = time.perf_counter()
    sync_project(remote, PROJECT)
    t2 = time.perf_counter()
    write_messages(merger, 50, batch=10, tag="local")
    add_remote(fresh, PROJECT, "hub", "file://" + hub)
    ff = timed_sync(fresh)
    ff_index, ff_rebuild = index_times(fresh)
    merge = timed_sync(merger)
    merge_index, merge_rebuild = index_times(merger)
    tree = lambda store: str(store.archive(PROJECT).repo[store.archive(PROJECT).tip()].peel(pygit2.Tree).id)  # noqa: E731
    sync_project(fresh, PROJECT)
    return {
        "messages": count,
        "remote_write_s": t1 - t0,
        "remote_push_s": t2 - t1,
        "ff": ff | {"msgs_per_s": count / (ff["fetch_s"] + ff["merge_s"]), "index_catch_up_s": ff_index,
                    "index_rebuild_s": ff_rebuild},
        "merge": merge | {"msgs_per_s": count / (merge["fetch_s"] + merge["merge_s"]),
                          "index_catch_up_s": merge_index, "index_rebuild_s": merge_rebuild},
        "converged": tree(fresh) == tree(merger),
    }


# -- the simulation ------------------------------------------------------------------

def worker(root: str, name: str, seconds: float, write_interval: float, sync_interval: float, stop_file: str) -> None:
    """One machine: write and sync until the writes end, then keep syncing until told to stop."""
    store = Store(os.path.join(root, name), background=True, durable=False)
    rng = random.Random(name)
    sent: list[str] = []
    syncs: list[float] = []
    rejections = 0
    errors: list[str] = []
    start = time.monotonic()
    next_write = start + rng.uniform(0, write_interval)
    next_sync = start + rng.uniform(0, sync_interval)
    while not os.path.exists(stop_file):
        now = time.monotonic()
        if now < start + seconds and now >= next_write:
            sent += write_messages(store, 1, tag=name)
            next_write += write_interval
        if now >= next_sync:
            t0 = time.perf_counter()
            try:
                result = sync_project(store, PROJECT)[0]
                rejections += result.rejected_pushes
            except Exception as exc:  # noqa: BLE001 - counted; the next round tries again
                errors.append(f"{type(exc).__name__}: {exc}")
            syncs.append(time.perf_counter() - t0)
            next_sync = time.monotonic() + sync_interval * rng.uniform(0.5, 1.5)
        time.sleep(0.01)
    store.flush()
    with open(os.path.join(root, name + ".json"), "w", encoding="utf-8") as handle:
        json.dump({"sent": sent, "syncs": syncs, "rejections": rejections, "errors": errors}, handle)


def bench_simulation(root: str, machines: int, seconds: float, write_interval: float, sync_interval: float) -> dict:
    hub = os.path.join(root, "hub.git")
    _git("init", "-q", "--bare", "--initial-branch=main", hub)
    names = [f"node{i:02d}" for i in range(machines)]
    stores = [make_store(root, name) for name in names]
    create_project(stores[0])
    for store in stores:
        add_remote(store, PROJECT, "hub", "file://" + hub)
        sync_project(store, PROJECT)
    git_dirs = [store.paths(store.resolve(PROJECT)).archive for store in stores]
    del stores
    stop_file = os.path.join(root, "stop")
    procs = [subprocess.Popen([sys.executable, __file__, "--worker", root, name, str(seconds), str(write_interval),
                               str(sync_interval), stop_file]) for name in names]
    started = time.monotonic()
    time.sleep(seconds)
    writes_end = started + seconds
    converged_at = None
    deadline = writes_end + max(120.0, 20 * sync_interval)
    while time.monotonic() < deadline:
        trees = set()
        for git_dir in git_dirs:
            repo = pygit2.Repository(git_dir)
            trees.add(str(repo.references["refs/heads/main"].peel(pygit2.Tree).id))
        if len(trees) == 1 and time.monotonic() > writes_end + 1.0:
            # Equal trees may be reached before a straggler's last write landed; it is checked below.
            converged_at = time.monotonic()
            break
        time.sleep(0.1)
    with open(stop_file, "w"):
        pass
    for proc in procs:
        proc.wait(120)
    reports = []
    for name in names:
        with open(os.path.join(root, name + ".json"), encoding="utf-8") as handle:
            reports.append(json.load(handle))
    sent = [mid for report in reports for mid in report["sent"]]
    repo = pygit2.Repository(git_dirs[0])
    tree = repo.references["refs/heads/main"].peel(pygit2.Tree)
    present = []
    for shard_path in _walk(tree["messages"]):
        present.append(shard_path.rsplit("/", 1)[1][:-3])
    syncs = [seconds for report in reports for seconds in report["syncs"]]
    return {
        "machines": machines,
        "seconds": seconds,
        "messages_written": len(sent),
        "messages_present": len(present),
        "lost": len(set(sent) - set(present)),
        "duplicated": len(present) - len(set(present)),
        "convergence_s": None if converged_at is None else converged_at - writes_end,
        "push_rejections": sum(report["rejections"] for report in reports),
        "sync_errors": sum(len(report["errors"]) for report in reports),
        "error_samples": sorted({error for report in reports for error in report["errors"]})[:5],
        "syncs": len(syncs),
        "sync_p50_s": statistics.median(syncs) if syncs else None,
        "sync_p95_s": sorted(syncs)[int(0.95 * (len(syncs) - 1))] if syncs else None,
    }


def bench_watch(root: str, rounds: int) -> dict[str, object]:
    """Seconds from a human's push into the archive until the watcher's catch-up has taken its message in.

    Searches catch up by themselves before they answer; this times the
    watcher, which brings the index (and long-polling readers) along without
    anyone asking.
    """
    import threading

    from gitmail.index import indexer_for
    from gitmail.sync.watch import Watcher

    store = make_store(root, "watched")
    create_project(store)
    index = indexer_for(store).project(PROJECT)
    index.catch_up()
    clone = os.path.join(root, "clone")
    _git("clone", "-q", store.paths(store.resolve(PROJECT)).archive, clone)
    caught_up = threading.Event()
    woke_at: list[float] = []

    def on_change(slug: str) -> None:
        index.catch_up()
        woke_at.append(time.perf_counter())
        caught_up.set()

    latencies = []
    with Watcher(store, on_change):
        for i in range(rounds):
            message = Message(id=new_id(), thread_id="watch", sender="BlueLake", subject=f"watched {i}",
                              created_ts=store.clock.now_ts(), to=["GreenCastle"], body=f"okapi{i}\n")
            for path in (message.path(), inbox_path("GreenCastle", message.id), outbox_path("BlueLake", message.id)):
                os.makedirs(os.path.dirname(os.path.join(clone, path)), exist_ok=True)
                with open(os.path.join(clone, path), "wb") as handle:
                    handle.write(message.to_bytes())
            _git("-C", clone, "add", "-A")
            _git("-C", clone, "-c", "user.name=Human", "-c", "user.email=h@example.org", "commit", "-q", "-m", "hi")
            caught_up.clear()
            pushed = time.perf_counter()  # the push's own time counts: the watcher may fire before git exits
            _git("-C", clone, "push", "-q", "origin", "HEAD:main")
            assert caught_up.wait(60), "the watcher never woke"
            latencies.append(woke_at[-1] - pushed)
            assert index.search(f"okapi{i}"), "caught up, yet not searchable"
    indexer_for(store).close()
    return {"rounds": rounds, "push_to_caught_up_p50_s": round(statistics.median(latencies), 3),
            "push_to_caught_up_max_s": round(max(latencies), 3)}


def _walk(tree: pygit2.Tree, prefix: str = "") -> list[str]:
    out = []
    for entry in tree:
        path = f"{prefix}{entry.name}"
        if entry.type == pygit2.GIT_OBJECT_TREE:
            out += _walk(entry, path + "/")
        else:
            out.append(path)
    return out


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        root, name, seconds, write_interval, sync_interval, stop_file = sys.argv[2:8]
        worker(root, name, float(seconds), float(write_interval), float(sync_interval), stop_file)
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=10_000, help="messages in the bulk sync (default 10000)")
    parser.add_argument("--machines", type=int, default=10, help="machines in the simulation (default 10)")
    parser.add_argument("--seconds", type=float, default=60.0, help="how long the machines write (default 60)")
    parser.add_argument("--write-interval", type=float, default=1.0, help="seconds between one machine's writes")
    parser.add_argument("--sync-interval", type=float, default=5.0, help="seconds between one machine's syncs")
    parser.add_argument("--skip-bulk", action="store_true")
    parser.add_argument("--skip-simulation", action="store_true")
    parser.add_argument("--watch-rounds", type=int, default=10, help="pushes timed through the watcher (default 10)")
    parser.add_argument("--skip-watch", action="store_true")
    args = parser.parse_args()
    root = tempfile.mkdtemp(prefix="gitmail-bench-sync-")
    out: dict[str, object] = {}
    try:
        if not args.skip_bulk:
            bulk = out["bulk"] = bench_bulk(os.path.join(root, "bulk"), args.messages)
            print(f"Bulk sync of {bulk['messages']} new messages (remote wrote them in {bulk['remote_write_s']:.1f}s, "
                  f"pushed in {bulk['remote_push_s']:.1f}s)")
            print(f"{'receiver':<10} {'fetch s':>8} {'merge s':>8} {'msgs/s':>8} {'push s':>7} "
                  f"{'index catch-up s':>17} {'rebuild s':>10} {'catch-up/rebuild':>17}")
            for label in ("ff", "merge"):
                row = bulk[label]  # type: ignore[index]
                print(f"{label:<10} {row['fetch_s']:>8.2f} {row['merge_s']:>8.2f} {row['msgs_per_s']:>8.0f} "
                      f"{row['push_s']:>7.2f} {row['index_catch_up_s']:>17.2f} {row['index_rebuild_s']:>10.2f} "
                      f"{row['index_catch_up_s'] / row['index_rebuild_s']:>17.2f}")
            print(f"fresh and merging receivers converged: {bulk['converged']}")
        if not args.skip_simulation:
            sim = out["simulation"] = bench_simulation(os.path.join(root, "sim"), args.machines, args.seconds,
                                                       args.write_interval, args.sync_interval)
            print(f"\nSimulation: {sim['machines']} machines, writes for {sim['seconds']:.0f}s, "
                  f"one write per {args.write_interval}s and one sync per ~{args.sync_interval}s each")
            for key in ("messages_written", "messages_present", "lost", "duplicated", "convergence_s",
                        "push_rejections", "sync_errors", "syncs", "sync_p50_s", "sync_p95_s"):
                value = sim[key]
                print(f"  {key:<18} {value:.3f}" if isinstance(value, float) else f"  {key:<18} {value}")
        if not args.skip_watch:
            watch = out["watch"] = bench_watch(os.path.join(root, "watch"), args.watch_rounds)
            print(f"\nWatcher: from a human's git push until the index holds its message, over {watch['rounds']} "
                  f"pushes: p50 {watch['push_to_caught_up_p50_s']:.3f}s, max {watch['push_to_caught_up_max_s']:.3f}s")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(json.dumps({"bench": "sync", **out}, default=str))


if __name__ == "__main__":
    main()
