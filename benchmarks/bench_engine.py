"""Benchmark of the storage engine: latency, throughput, disk, and git's own speed.

One command runs everything and prints a table, then one JSON line::

    python benchmarks/bench_engine.py                      # 1k, 10k, 100k messages
    python benchmarks/bench_engine.py --quick              # a small run in well under a minute
    python benchmarks/bench_engine.py --sizes 1000,10000 --writes 100
    python benchmarks/bench_engine.py --workdir /tmp/gmb   # keep the prefilled archives, reuse them next time

The full run takes 10–20 minutes on two cores, most of it filling the 100k
archive (``git fast-import`` then ``git repack``); with ``--workdir`` a second
run the same day reuses the filled archives and takes a few minutes.

What it measures:

1. Latency of one durable message write (the canonical file, an inbox copy per
   recipient, the sender's outbox copy, all the same blob) through
   ``Archive.transact`` into an archive that already holds N messages. The
   archives are filled with ``git fast-import`` the way a real one grows:
   about ``--per-day`` messages a day over many past days, one commit per
   message, then repacked. The last day is today, so at every size the day
   folder a new message lands in holds the same number of entries and only
   the size of the archive changes. Background consolidation runs as the
   store would run it.
2. Group-commit throughput with several writers: threads sharing one
   ``Archive``, and OS processes each opening their own.
3. Bytes on disk per message, as the engine leaves the object store (after
   its background consolidation) and after ``git gc``.
4. The same messages written by ``git fast-import``: the physical reference
   for time and bytes per message.
5. Write latency against the number of pack files when nothing consolidates,
   the cost of one consolidation, and a profile of the write path.

Figures on a shared machine move from run to run: compare medians and ratios.
"""

from __future__ import annotations

import argparse
import cProfile
import datetime as dt
import inspect
import io
import json
import math
import multiprocessing as mp
import os
import pstats
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from gitmail.model.clock import HybridClock, format_ts
from gitmail.model.errors import NOT_FOUND, GitmailError
from gitmail.model.ids import ALPHABET, id_time, is_id, new_id
from gitmail.model.records import LAYOUT, Agent, Message, Project, inbox_path, message_path, outbox_path
from gitmail.storage.engine import Archive, Change
from gitmail.storage.maintenance import PACK_LIMIT, Maintainer, consolidate, pack_count

AGENTS = ["BlueLake", "GreenCastle", "RedStone", "WhiteFox", "SilverPine", "AmberCove",
          "CopperHill", "IvoryTower", "JadeRiver", "OnyxField", "PearlHarbor", "RubyMeadow"]
WORDS = ("parser index cache schema migration test flaky build release reservation lock merge "
         "conflict review patch module handler endpoint timeout retry queue worker budget "
         "latency profile archive commit branch cursor token seat journal search deploy").split()
NODE = "bench"
UTC = dt.UTC


# -- synthetic but realistic mail ---------------------------------------------

def past_id(ms: int, rng: random.Random) -> str:
    """An ID minted at ``ms`` (``new_id`` only mints forward from the last ID it made)."""
    value, chars = (ms << 65) | rng.getrandbits(65), []
    for _ in range(23):
        chars.append(ALPHABET[value & 31])
        value >>= 5
    return "".join(reversed(chars))


class MailMaker:
    """Messages with the shape of real traffic: replies in threads, 1–2 recipients."""

    def __init__(self, seed: int):
        self.rng = random.Random(seed)
        self.recent: list[Message] = []

    def _sentence(self, words: int) -> str:
        text = " ".join(self.rng.choice(WORDS) for _ in range(words))
        return text[0].upper() + text[1:] + "."

    def make(self, message_id: str, ms: int) -> Message:
        rng = self.rng
        sender = rng.choice(AGENTS)
        to = rng.sample([name for name in AGENTS if name != sender], 1 if rng.random() < 0.7 else 2)
        parent = rng.choice(self.recent) if self.recent and rng.random() < 0.4 else None
        subject = ("Re: " + parent.subject.removeprefix("Re: ")) if parent else self._sentence(rng.randint(3, 8))[:-1]
        paragraphs = [" ".join(self._sentence(rng.randint(6, 16)) for _ in range(rng.randint(1, 4)))
                      for _ in range(rng.randint(1, 4))]
        message = Message(
            id=message_id,
            thread_id=parent.thread_id if parent else message_id,
            sender=sender,
            subject=subject,
            created_ts=format_ts(dt.datetime.fromtimestamp(ms / 1000, tz=UTC)),
            to=to,
            importance="high" if rng.random() < 0.1 else "normal",
            ack_required=rng.random() < 0.2,
            topic=rng.choice(["build", "release", "review"]) if rng.random() < 0.2 else None,
            reply_to=parent.id if parent else None,
            body="\n\n".join(paragraphs) + "\n",
        )
        self.recent = (self.recent + [message])[-50:]
        return message


def commit_line(message: Message) -> str:
    return f"{message.sender} sent {message.id} to {', '.join(message.to)}: {message.subject}"


def message_files(message: Message) -> tuple[bytes, list[str]]:
    """The bytes of a message and every path that holds them."""
    paths = [message_path(message.id)] + [inbox_path(name, message.id) for name in message.to]
    return message.to_bytes(), paths + [outbox_path(message.sender, message.id)]


def history(count: int, per_day: int, seed: int, end: dt.datetime) -> list[tuple[int, Message]]:
    """``count`` messages, ``per_day`` a day, on consecutive days ending on ``end``'s day."""
    maker = MailMaker(seed)
    rng = random.Random(seed + 1)
    days = max(1, math.ceil(count / per_day))
    midnight = dt.datetime(end.year, end.month, end.day, tzinfo=UTC)
    out = []
    for day in range(days):
        start = midnight - dt.timedelta(days=days - 1 - day)
        stop = min(start + dt.timedelta(days=1), end)
        n = per_day if day < days - 1 else count - per_day * (days - 1)
        lo, hi = int(start.timestamp() * 1000), int(stop.timestamp() * 1000) - 1
        for ms in sorted(rng.randint(lo, hi) for _ in range(n)):
            message_id = past_id(ms, rng)
            out.append((ms, maker.make(message_id, ms)))
    return out


def setup_records(when: dt.datetime) -> dict[str, bytes]:
    clock = HybridClock(NODE)
    ts = format_ts(when)
    files = {"project.yaml": Project(id=new_id(), slug="bench-000000000000", human_key="/bench/project",
                                     created_at=ts, hlc=clock.tick(), layout=LAYOUT).to_bytes()}
    for name in AGENTS:
        agent = Agent(id=new_id(), name=name, program="claude-code", model="opus", inception_ts=ts,
                      hlc=clock.tick(), task_description=f"{name} works on the {random.choice(WORDS)}")
        files[agent.path()] = agent.to_bytes()
    return files


# -- git helpers ----------------------------------------------------------------

def git(git_dir: str, *args: str) -> str:
    proc = subprocess.run(["git", "--git-dir", git_dir, *args], capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)}: {proc.stderr.strip()}")
    return proc.stdout


def fast_import(git_dir: str, messages: list[tuple[int, Message]], setup: dict[str, bytes]) -> float:
    """Write ``setup`` then one commit per message with ``git fast-import``; return seconds."""
    if not os.path.exists(os.path.join(git_dir, "HEAD")):
        subprocess.run(["git", "init", "-q", "--bare", "-b", "main", git_dir], check=True)
    files = [message_files(message) for _, message in messages]  # serialize before the clock starts
    start = time.perf_counter()
    proc = subprocess.Popen(["git", "--git-dir", git_dir, "fast-import", "--quiet"],
                            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
    out = proc.stdin
    assert out is not None

    def data(payload: bytes) -> None:
        out.write(b"data %d\n" % len(payload))
        out.write(payload)
        out.write(b"\n")

    first_s = messages[0][0] // 1000 - 60 if messages else int(time.time())
    out.write(b"commit refs/heads/main\n")
    out.write(b"author gitmail <gitmail@gitmail> %d +0000\n" % first_s)
    out.write(b"committer gitmail <gitmail@%s> %d +0000\n" % (NODE.encode(), first_s))
    data(b"Set up the project and its agents\n")
    for path, payload in setup.items():
        out.write(b"M 100644 inline %s\n" % path.encode())
        data(payload)
    out.write(b"\n")
    for mark, ((ms, message), (payload, paths)) in enumerate(zip(messages, files, strict=True), start=1):
        out.write(b"blob\nmark :%d\n" % mark)
        data(payload)
        when = ms // 1000
        out.write(b"commit refs/heads/main\n")
        out.write(b"author %s <%s@gitmail> %d +0000\n" % (message.sender.encode(), message.sender.encode(), when))
        out.write(b"committer gitmail <gitmail@%s> %d +0000\n" % (NODE.encode(), when))
        data(commit_line(message).encode() + b"\n")
        for path in paths:
            out.write(b"M 100644 :%d %s\n" % (mark, path.encode()))
        out.write(b"\n")
    out.close()
    if proc.wait() != 0:
        raise RuntimeError("git fast-import failed")
    return time.perf_counter() - start


def disk_usage(git_dir: str) -> dict[str, int]:
    """Bytes under ``objects/``: allocated on disk and apparent; pack and loose-object counts."""
    allocated = apparent = packs = loose = 0
    for root, _, files in os.walk(os.path.join(git_dir, "objects")):
        for name in files:
            st = os.lstat(os.path.join(root, name))
            allocated += st.st_blocks * 512
            apparent += st.st_size
            packs += name.endswith(".pack")
            loose += len(os.path.basename(root)) == 2
    return {"allocated": allocated, "apparent": apparent, "packs": packs, "loose": loose}


def commits_between(git_dir: str, old: str, new: str) -> int:
    return int(git(git_dir, "rev-list", "--count", new, f"^{old}").strip())


# -- engine writes --------------------------------------------------------------

def send(message: Message):
    """The transaction a send makes: check the agents exist, put the message and its copies."""

    def fn(snapshot):
        for name in (message.sender, *message.to):
            if not snapshot.exists(f"agents/{name}/profile.yaml"):
                raise GitmailError(NOT_FOUND, f"no agent {name}")
        payload, paths = message_files(message)
        change = Change(commit_line(message), author=message.sender, result=message.id)
        for path in paths:
            change.put(path, payload)
        return change

    return fn


def live_message(maker: MailMaker) -> Message:
    message_id = new_id()
    return maker.make(message_id, int(id_time(message_id).timestamp() * 1000))


class TimedMaintainer(Maintainer):
    """The store's background consolidation, with each run timed."""

    def __init__(self, git_dir: str):
        super().__init__(git_dir)
        self.runs: list[float] = []

    def _run(self) -> None:
        start = time.perf_counter()
        super()._run()
        self.runs.append(time.perf_counter() - start)


def open_archive(git_dir: str, *, maintain: bool) -> tuple[Archive, TimedMaintainer | None]:
    """A durable archive; with ``maintain``, background consolidation as the store runs it, timed."""
    own_maintainer = "maintain" in inspect.signature(Archive.__init__).parameters
    archive = Archive(git_dir, node=NODE, durable=True, **({"maintain": False} if own_maintainer else {}))
    archive.group_commits = 0  # ref updates this process made (several git commits may share one)
    archive.add_listener(lambda old, new: setattr(archive, "group_commits", archive.group_commits + 1))
    maintainer = None
    if maintain:
        maintainer = TimedMaintainer(archive.git_dir)
        archive.add_listener(maintainer.on_commit)
    return archive, maintainer


def timed_writes(archive: Archive, maker: MailMaker, count: int, packs: list[int] | None = None,
                 cpu: list[float] | None = None) -> list[float]:
    """Send ``count`` messages one after another; wall ms per write (and pack counts, CPU ms if asked)."""
    times = []
    for _ in range(count):
        message = live_message(maker)
        if packs is not None:
            packs.append(pack_count(archive.git_dir))
        start, start_cpu = time.perf_counter(), time.thread_time()
        archive.transact(send(message))
        times.append((time.perf_counter() - start) * 1000)
        if cpu is not None:
            cpu.append((time.thread_time() - start_cpu) * 1000)
    return times


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q / 100 * len(ordered)) - 1))]


def stats(values: list[float]) -> dict[str, float]:
    return {"p50": round(statistics.median(values), 2), "p95": round(pct(values, 95), 2), "n": len(values)}


def copy_repo(src: str, dst: str) -> str:
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst, symlinks=True)
    return dst


# -- the measurements -------------------------------------------------------------

def prefill(workdir: str, size: int, per_day: int, now: dt.datetime, log) -> tuple[str, dict]:
    """A packed archive holding ``size`` messages, reused from ``workdir`` if already built."""
    git_dir = os.path.join(workdir, f"prefill-{size}-{per_day}.git")
    meta_path = git_dir + ".json"
    if os.path.exists(meta_path):
        with open(meta_path) as handle:
            meta = json.load(handle)
        if meta.get("day") == now.strftime("%Y-%m-%d"):
            log(f"  reusing {git_dir}")
            return git_dir, meta
    shutil.rmtree(git_dir, ignore_errors=True)
    start = time.perf_counter()
    messages = history(size, per_day, seed=size, end=now - dt.timedelta(seconds=1))
    generate_s = time.perf_counter() - start
    import_s = fast_import(git_dir, messages, setup_records(now - dt.timedelta(days=len(messages) // per_day + 1)))
    raw = disk_usage(git_dir)
    start = time.perf_counter()
    git(git_dir, "repack", "-a", "-d", "-q")
    repack_s = time.perf_counter() - start
    packed = disk_usage(git_dir)
    meta = {"size": size, "day": now.strftime("%Y-%m-%d"), "generate_s": round(generate_s, 2),
            "fast_import_s": round(import_s, 2), "fast_import_msgs_per_s": round(size / import_s),
            "repack_s": round(repack_s, 2), "bytes_per_msg_fast_import": round(raw["allocated"] / size),
            "bytes_per_msg_repacked": round(packed["allocated"] / size)}
    with open(meta_path, "w") as handle:
        json.dump(meta, handle)
    log(f"  prefilled {size} in {import_s:.1f}s of fast-import ({meta['fast_import_msgs_per_s']} msg/s), "
        f"repack {repack_s:.1f}s, {meta['bytes_per_msg_repacked']} B/msg")
    return git_dir, meta


def measure_latency(sources: dict[int, str], workdir: str, writes: int, seed: int, rounds: int = 10) -> dict:
    """Durable write latency at each size, in interleaved rounds so that load on a shared
    machine falls on every size alike."""
    runs = {}
    for size, src in sources.items():
        archive, maintainer = open_archive(copy_repo(src, os.path.join(workdir, f"latency-{size}.git")), maintain=True)
        maker = MailMaker(seed + size)
        timed_writes(archive, maker, 5)  # warm up: open packs, decode the hot trees
        runs[size] = (archive, maintainer, maker, [], [])
    per_round = max(1, writes // rounds)
    for round_ in range(rounds):
        order = list(runs) if round_ % 2 == 0 else list(reversed(runs))
        for size in order:
            archive, _, maker, times, packs = runs[size]
            times += timed_writes(archive, maker, per_round if round_ < rounds - 1 else writes - len(times), packs)
    results = {}
    for size, (archive, maintainer, _, times, packs) in runs.items():
        assert maintainer is not None
        maintainer.worker.wait_idle(300)
        result = stats(times)
        result.update(max_packs=max(packs), consolidations=len(maintainer.runs),
                      consolidation_s=round(statistics.median(maintainer.runs), 2) if maintainer.runs else None,
                      retries=archive.retries)
        results[str(size)] = result
        shutil.rmtree(archive.git_dir)
    return results


def fsync_probe(workdir: str, count: int = 20) -> float:
    """Median ms for writing and fsyncing one small file: how busy the disk is right now."""
    path = os.path.join(workdir, "fsync-probe")
    times = []
    for _ in range(count):
        start = time.perf_counter()
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.write(fd, b"x" * 512)
        os.fsync(fd)
        os.close(fd)
        times.append((time.perf_counter() - start) * 1000)
    os.unlink(path)
    return round(statistics.median(times), 2)


def _process_writer(git_dir: str, count: int, seed: int, ready, go, results) -> None:
    archive, maintainer = open_archive(git_dir, maintain=True)
    maker = MailMaker(seed)
    ready.put(os.getpid())
    go.wait()
    times = timed_writes(archive, maker, count)
    end = time.time()
    if maintainer is not None:
        maintainer.worker.wait_idle(300)
    results.put({"times": times, "end": end, "retries": archive.retries, "group_commits": archive.group_commits})


def measure_throughput(src: str, workdir: str, writers: int, per_writer: int, mode: str, seed: int) -> dict:
    git_dir = copy_repo(src, os.path.join(workdir, f"throughput-{mode}.git"))
    old_tip = git(git_dir, "rev-parse", "main").strip()
    times: list[float] = []
    if mode == "threads":
        archive, maintainer = open_archive(git_dir, maintain=True)
        timed_writes(archive, MailMaker(seed), 3)
        old_tip = archive.tip()
        barrier = threading.Barrier(writers + 1)
        lock = threading.Lock()

        def worker(index: int) -> None:
            maker = MailMaker(seed + index)
            barrier.wait()
            mine = timed_writes(archive, maker, per_writer)
            with lock:
                times.extend(mine)

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(writers)]
        for thread in threads:
            thread.start()
        barrier.wait()
        start = time.perf_counter()
        for thread in threads:
            thread.join()
        elapsed = time.perf_counter() - start
        retries, group_commits = archive.retries, archive.group_commits - 3
        assert maintainer is not None
        maintainer.worker.wait_idle(300)
    else:
        ctx = mp.get_context("spawn")
        ready, results, go = ctx.Queue(), ctx.Queue(), ctx.Event()
        procs = [ctx.Process(target=_process_writer, args=(git_dir, per_writer, seed + i, ready, go, results))
                 for i in range(writers)]
        for proc in procs:
            proc.start()
        for _ in procs:
            ready.get(timeout=120)
        start_wall = time.time()
        go.set()
        outcomes = [results.get(timeout=600) for _ in procs]
        for proc in procs:
            proc.join()
        elapsed = max(o["end"] for o in outcomes) - start_wall
        retries = sum(o["retries"] for o in outcomes)
        group_commits = sum(o["group_commits"] for o in outcomes)
        for outcome in outcomes:
            times.extend(outcome["times"])
    new_tip = git(git_dir, "rev-parse", "main").strip()
    total = writers * per_writer
    commits = commits_between(git_dir, old_tip, new_tip)
    found = int(git(git_dir, "ls-tree", "-r", "--name-only", "main", "--", "messages/").count("\n"))
    shutil.rmtree(git_dir)
    return {"writers": writers, "messages": total, "seconds": round(elapsed, 2),
            "msgs_per_s": round(total / elapsed, 1), "commits": commits,
            "group_commits": group_commits, "msgs_per_group_commit": round(total / group_commits, 2),
            "retries": retries,
            "write_p50": round(statistics.median(times), 2), "write_p95": round(pct(times, 95), 2),
            "messages_in_tree": found}


def measure_disk(workdir: str, count: int, per_day: int, now: dt.datetime, seed: int) -> dict:
    """The same messages through the engine and through fast-import, bytes and time per message."""
    messages = history(count, per_day, seed=seed, end=now - dt.timedelta(days=1))
    setup = setup_records(now - dt.timedelta(days=30))
    engine_dir = os.path.join(workdir, "disk-engine.git")
    shutil.rmtree(engine_dir, ignore_errors=True)
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", engine_dir], check=True)
    archive, maintainer = open_archive(engine_dir, maintain=True)
    assert maintainer is not None
    archive.transact(lambda snap: Change("Set up the project and its agents", edits=dict(setup)))
    start = time.perf_counter()
    for _, message in messages:
        archive.transact(send(message))
    engine_s = time.perf_counter() - start
    maintainer.worker.wait_idle(600)
    left = disk_usage(engine_dir)
    start = time.perf_counter()
    git(engine_dir, "-c", "gc.autoDetach=false", "gc", "-q", "--prune=now")
    engine_gc_s = time.perf_counter() - start
    engine_gc = disk_usage(engine_dir)

    ref_dir = os.path.join(workdir, "disk-fast-import.git")
    shutil.rmtree(ref_dir, ignore_errors=True)
    ref_s = fast_import(ref_dir, messages, setup)
    ref_raw = disk_usage(ref_dir)
    git(ref_dir, "-c", "gc.autoDetach=false", "gc", "-q", "--prune=now")
    ref_gc = disk_usage(ref_dir)
    same_tree = git(engine_dir, "rev-parse", "main^{tree}") == git(ref_dir, "rev-parse", "main^{tree}")
    shutil.rmtree(engine_dir)
    shutil.rmtree(ref_dir)
    per = lambda usage: round(usage["allocated"] / count)  # noqa: E731
    return {
        "messages": count, "same_tree": same_tree,
        "engine_ms_per_msg": round(engine_s / count * 1000, 3),
        "fast_import_ms_per_msg": round(ref_s / count * 1000, 3),
        "time_ratio": round(engine_s / ref_s, 1),
        "engine_bytes_per_msg": per(left), "engine_packs": left["packs"], "engine_loose": left["loose"],
        "engine_consolidations": len(maintainer.runs),
        "engine_gc_bytes_per_msg": per(engine_gc), "engine_gc_s": round(engine_gc_s, 2),
        "fast_import_bytes_per_msg": per(ref_raw),
        "fast_import_gc_bytes_per_msg": per(ref_gc),
        "bytes_ratio_gc": round(engine_gc["allocated"] / ref_gc["allocated"], 2),
        "bytes_ratio_as_left": round(left["allocated"] / ref_raw["allocated"], 2),
    }


def measure_pack_sweep(src: str, workdir: str, writes: int, seed: int) -> dict:
    """Write latency as packs pile up with no consolidation, then one consolidation's cost."""
    git_dir = copy_repo(src, os.path.join(workdir, "sweep.git"))
    archive, _ = open_archive(git_dir, maintain=False)
    maker = MailMaker(seed)
    timed_writes(archive, maker, 3)
    packs: list[int] = []
    cpu: list[float] = []
    times = timed_writes(archive, maker, writes, packs, cpu)
    edges = [1, 9, 25, 49, 97, 193, 385, 10**9]
    buckets = []
    for lo, hi in zip(edges, edges[1:], strict=False):
        chosen = [(t, c) for t, c, p in zip(times, cpu, packs, strict=True) if lo <= p < hi]
        if chosen:
            buckets.append({"packs": f"{lo}-{min(hi - 1, max(packs))}", "n": len(chosen),
                            "p50": round(statistics.median(t for t, _ in chosen), 2),
                            "cpu_p50": round(statistics.median(c for _, c in chosen), 2)})
    varied = len(set(packs)) > 1
    slope = statistics.linear_regression(packs, times).slope if varied else 0.0
    cpu_slope = statistics.linear_regression(packs, cpu).slope if varied else 0.0
    before = pack_count(git_dir)
    start = time.perf_counter()
    consolidate(git_dir, force=True)
    consolidate_s = time.perf_counter() - start
    packs_after = pack_count(git_dir)
    after_times = timed_writes(archive, maker, min(40, writes))
    result = {"buckets": buckets, "ms_per_100_packs": round(slope * 100, 2),
              "cpu_ms_per_100_packs": round(cpu_slope * 100, 2), "packs_before": before,
              "consolidate_s": round(consolidate_s, 2), "packs_after": packs_after,
              "p50_after_consolidation": round(statistics.median(after_times), 2)}
    shutil.rmtree(git_dir)
    return result


PROFILED = ["engine.py:_try_commit", "engine.py:_commit_batch", "bench_engine.py:fn", "snapshot.py:__init__",
            "snapshot.py:exists", "treeedit.py:set", "treeedit.py:flush", "treeedit.py:read_tree",
            "objects.py:encode", "objects.py:decode", "objects.py:_deflate", "objects.py:write",
            "objects.py:_write_file", "objects.py:fsync_dir", "engine.py:_swap", "engine.py:_sync_ref",
            "engine.py:_lookup",
            "engine.py:__enter__", "<built-in method posix.fsync>", "records.py:to_bytes"]


def measure_profile(src: str, workdir: str, writes: int, seed: int, durable: bool) -> dict:
    git_dir = copy_repo(src, os.path.join(workdir, "profile.git"))
    archive, _ = open_archive(git_dir, maintain=False)
    archive.durable = durable
    maker = MailMaker(seed)
    timed_writes(archive, maker, 5)
    profiler = cProfile.Profile()
    messages = [live_message(maker) for _ in range(writes)]
    start = time.perf_counter()
    profiler.enable()
    for message in messages:
        archive.transact(send(message))
    profiler.disable()
    wall = (time.perf_counter() - start) * 1000 / writes
    shutil.rmtree(git_dir)
    stream = io.StringIO()
    st = pstats.Stats(profiler, stream=stream)
    per_call = {}
    for (filename, _, func), (_, ncalls, _tottime, cumtime, _) in st.stats.items():  # type: ignore[attr-defined]
        key = f"{os.path.basename(filename)}:{func}" if filename != "~" else func
        if key in PROFILED:
            per_call[key] = {"cum_ms": round(cumtime * 1000 / writes, 3), "calls": round(ncalls / writes, 1)}
    st.sort_stats("tottime").print_stats(15)
    top = []
    for line in stream.getvalue().splitlines():
        parts = line.split(None, 5)
        if len(parts) == 6 and parts[1].replace(".", "").isdigit():
            top.append(f"{float(parts[1]) * 1000 / writes:7.3f} ms  {parts[5]}")
    return {"durable": durable, "wall_ms_per_write": round(wall, 2), "stages": per_call, "top_self_time": top[:15]}


# -- the report ---------------------------------------------------------------------

def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000,100000", help="archive sizes (messages) to prefill")
    parser.add_argument("--writes", type=int, default=200, help="timed writes per size")
    parser.add_argument("--per-day", type=int, default=1000, help="messages per day in the prefill")
    parser.add_argument("--writers", type=int, default=8, help="concurrent writers (threads, then processes)")
    parser.add_argument("--per-writer", type=int, default=100, help="messages each concurrent writer sends")
    parser.add_argument("--disk-messages", type=int, default=2000, help="messages for the disk comparison")
    parser.add_argument("--sweep-writes", type=int, default=300, help="writes with no consolidation")
    parser.add_argument("--profile-writes", type=int, default=100, help="profiled writes at the largest size")
    parser.add_argument("--quick", action="store_true", help="small sizes for a run under a minute")
    parser.add_argument("--workdir", help="keep prefilled archives here and reuse them (default: a temp dir)")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    if args.quick:
        args.sizes, args.writes, args.per_writer = "500,2000", 40, 15
        args.disk_messages, args.sweep_writes, args.profile_writes = 300, 60, 30
    sizes = [int(s) for s in args.sizes.split(",")]
    workdir = args.workdir or tempfile.mkdtemp(prefix="gitmail-bench-")
    os.makedirs(workdir, exist_ok=True)
    log = lambda text: print(text, file=sys.stderr, flush=True)  # noqa: E731
    now = dt.datetime.now(UTC).replace(microsecond=0)
    assert is_id(past_id(int(now.timestamp() * 1000), random.Random(0)))
    report: dict = {"bench": "engine", "pack_limit": PACK_LIMIT, "per_day": args.per_day,
                    "durable": True, "cpus": os.cpu_count(), "latency": {}, "prefill": {}}
    try:
        prefilled = {}
        for size in sizes:
            log(f"prefill {size}")
            prefilled[size], report["prefill"][str(size)] = prefill(workdir, size, args.per_day, now, log)
        report["fsync_ms_before"], report["load_before"] = fsync_probe(workdir), round(os.getloadavg()[0], 2)
        log(f"latency at {', '.join(map(str, sizes))} (interleaved)")
        report["latency"] = measure_latency(prefilled, workdir, args.writes, args.seed)
        small, large = str(sizes[0]), str(sizes[-1])
        report["flatness"] = round(report["latency"][large]["p50"] / report["latency"][small]["p50"], 2)
        biggest = prefilled[sizes[-1]]
        for mode in ("threads", "processes"):
            log(f"throughput, {args.writers} {mode}")
            report[f"throughput_{mode}"] = measure_throughput(biggest, workdir, args.writers, args.per_writer,
                                                              mode, args.seed * 1000)
        log(f"disk, {args.disk_messages} messages")
        report["disk"] = measure_disk(workdir, args.disk_messages, args.per_day, now, args.seed + 3)
        log("pack sweep")
        report["pack_sweep"] = measure_pack_sweep(biggest, workdir, args.sweep_writes, args.seed + 5)
        log("profile")
        report["profile"] = measure_profile(biggest, workdir, args.profile_writes, args.seed + 9, durable=True)
        report["profile_cpu"] = measure_profile(biggest, workdir, args.profile_writes, args.seed + 11, durable=False)
        report["fsync_ms_after"], report["load_after"] = fsync_probe(workdir), round(os.getloadavg()[0], 2)
    finally:
        if not args.workdir:
            shutil.rmtree(workdir, ignore_errors=True)
    print_table(report, sizes)
    print(json.dumps(report, separators=(",", ":")))
    return report


def print_table(r: dict, sizes: list[int]) -> None:
    line = "-" * 78
    print(line)
    print(f"gitmail engine benchmark   (durable writes, {r['cpus']} CPUs, PACK_LIMIT={r['pack_limit']})")
    print(f"machine: load {r['load_before']} -> {r['load_after']}, one small-file fsync {r['fsync_ms_before']} -> "
          f"{r['fsync_ms_after']} ms")
    print(line)
    print(f"{'archive':>9} {'p50 ms':>8} {'p95 ms':>8} {'max packs':>10} {'consol.':>8} {'each s':>7} "
          f"{'prefill msg/s':>14} {'packed B/msg':>13}")
    for size in sizes:
        lat, pre = r["latency"][str(size)], r["prefill"][str(size)]
        print(f"{size:>9} {lat['p50']:>8.2f} {lat['p95']:>8.2f} {lat['max_packs']:>10} {lat['consolidations']:>8} "
              f"{lat['consolidation_s'] or 0:>7.2f} {pre['fast_import_msgs_per_s']:>14} "
              f"{pre['bytes_per_msg_repacked']:>13}")
    print(f"flatness p50@{sizes[-1]} / p50@{sizes[0]} = {r['flatness']}  (goal <= 1.5)")
    print(line)
    for mode in ("threads", "processes"):
        t = r[f"throughput_{mode}"]
        print(f"{t['writers']} {mode:<9}: {t['msgs_per_s']:>7} msg/s  {t['messages']} msgs in {t['commits']} commits "
              f"/ {t['group_commits']} ref updates ({t['msgs_per_group_commit']}/update), retries {t['retries']}, "
              f"write p50 {t['write_p50']} p95 {t['write_p95']} ms")
    print(line)
    d = r["disk"]
    print(f"disk, {d['messages']} messages (identical trees: {d['same_tree']})")
    print(f"  engine, as left after consolidation : {d['engine_bytes_per_msg']:>7} B/msg "
          f"({d['engine_packs']} packs, {d['engine_loose']} loose, {d['engine_consolidations']} consolidations)")
    print(f"  engine, after git gc                : {d['engine_gc_bytes_per_msg']:>7} B/msg  (gc {d['engine_gc_s']} s)")
    print(f"  fast-import, as written             : {d['fast_import_bytes_per_msg']:>7} B/msg")
    print(f"  fast-import, after git gc           : {d['fast_import_gc_bytes_per_msg']:>7} B/msg")
    print(f"  ratio engine/fast-import: bytes after gc {d['bytes_ratio_gc']}x, as left {d['bytes_ratio_as_left']}x; "
          f"time {d['engine_ms_per_msg']} vs {d['fast_import_ms_per_msg']} ms/msg = {d['time_ratio']}x")
    print(line)
    s = r["pack_sweep"]
    print(f"write by pack count, no consolidation (at {sizes[-1]}), p50 wall/CPU ms: " +
          ", ".join(f"{b['packs']}: {b['p50']}/{b['cpu_p50']}" for b in s["buckets"]))
    print(f"  slope {s['ms_per_100_packs']} ms wall, {s['cpu_ms_per_100_packs']} ms CPU per 100 packs; "
          f"consolidating {s['packs_before']} packs took "
          f"{s['consolidate_s']} s -> {s['packs_after']} packs, p50 then {s['p50_after_consolidation']} ms")
    print(line)
    for key in ("profile", "profile_cpu"):
        p = r[key]
        print(f"profile at {sizes[-1]}, durable={p['durable']}: {p['wall_ms_per_write']} ms/write under cProfile")
        for name, v in sorted(p["stages"].items(), key=lambda kv: -kv[1]["cum_ms"]):
            print(f"  {v['cum_ms']:>8.3f} ms  x{v['calls']:<5} {name}")
        print("  top self time per write:")
        for entry in p["top_self_time"][:10]:
            print("   " + entry)
    print(line)


if __name__ == "__main__":
    main()
