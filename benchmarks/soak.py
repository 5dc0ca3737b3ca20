"""Soak test of the MCP server: resources under sustained sending.

Run: ``python benchmarks/soak.py --messages 100000`` (16 clients, one
simulated day), ``python benchmarks/soak.py --messages 100000 --days 7`` (the
same load over a simulated week) or ``python benchmarks/soak.py --clients 8
--messages 3000`` for a quick look.

A real ``gitmail serve`` (``serve_clocked.py``: the same server on a clock
the benchmark moves) runs in a child process with its open-file limit set to
1024 (``ulimit -n 1024``, a common default; ``--nofile``) on a throw-away
store. ``--clients`` MCP sessions, one agent each, send messages to one
another over Streamable HTTP until ``--messages`` have been sent; every
fourth message asks for an acknowledgement, which its recipient gives before
its next send, and every tenth turn an agent also reserves a file for two
hours. The server's clock starts at 01:00 of a fresh day; with ``--days N``
it jumps to 01:00 of the next day each time another Nth of the messages is
sent, so day folders roll over, receipts fall overdue and reservations
expire as they would over a week, while pack consolidation and index merges
keep running. While the clients work, the server is sampled twice a second:
its open file descriptors, its memory mappings of deleted files (pack files a
consolidation removed but a handle still maps), its resident memory (RSS) and
that of its search-index helper. The run is cut into ten deciles by message
count; for each the table shows the send rate, send latency p50 / p95, and
the samples at its end (with the largest seen during it).

Targets, checked and printed at the end:

- no error results and no failed calls;
- open descriptors and deleted mappings flat after warm-up: nothing in the
  second half of the run above the largest value seen in deciles 2-5 (plus
  10 % and a few descriptors for the connections and git runs in flight);
- server RSS, and the search helper's, grow by at most 50 MB each from the
  end of the 2nd decile to the end;
- p95 send latency of the last decile within 1.2x that of the 2nd, and its
  send rate at least 0.8x the 2nd's.

``--wrap`` runs the server under a profiler, for example ``--wrap "heaptrack
-o /tmp/soak-heap"`` or ``--wrap "python -m memray run --native -o
/tmp/soak.bin"``; the samples follow the server process itself.

Figures on a shared machine move between runs: the JSON line carries every
figure and the load average at the start and end of the run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import shlex
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

from fastmcp import Client

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchmarks.serve_clocked import write_offset
from gitmail.mail.facade import Mail
from gitmail.storage.store import Store

PROJECT = "/bench/soak"
DECILES = 10
SAMPLE_SECONDS = 0.5
RSS_GROWTH_LIMIT_MB = 50.0
P95_RATIO_LIMIT = 1.2
RATE_RATIO_LIMIT = 0.8
DAY = 86_400
ACK_EVERY = 4  # every 4th message asks for an acknowledgement
RESERVE_EVERY = 10  # every 10th turn an agent also reserves a file...
RESERVE_TTL = 7200  # ...for two (simulated) hours
FLAT_SLACK = 0.10  # share above the warm-up maximum that still counts as flat...
FLAT_FLOOR = 4  # ...with at least this many descriptors or mappings of headroom
WORDS = ["migration", "schema", "deploy", "router", "cache", "review", "latency", "token", "index", "build"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class Server:
    proc: subprocess.Popen  # what was started (a profiler, when the server runs under one)
    pid: int  # the server process itself
    url: str
    log_path: str
    clock_path: str  # the offset of the server's clock (see serve_clocked.py)

    def stop(self) -> None:
        try:
            os.kill(self.pid, signal.SIGTERM)  # the server itself, so a profiler around it can write its report
        except ProcessLookupError:
            pass
        try:
            self.proc.wait(300)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def start_server(home: str, nofile: int, wrap: str) -> Server:
    """The clocked ``gitmail serve`` with RLIMIT_NOFILE at ``nofile``, under ``wrap`` if given."""
    port = free_port()
    env = dict(os.environ, GITMAIL_HOME=home, PYTHONPATH=ROOT)
    env.pop("GITMAIL_TOKEN", None)
    log_path = os.path.join(home, "serve.log")
    clock_path = os.path.join(home, "soak-clock")
    write_offset(clock_path, day_start(0) - time.time())

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

    script = os.path.join(ROOT, "benchmarks", "serve_clocked.py")
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([*shlex.split(wrap), sys.executable, script, str(port), clock_path], env=env,
                                stdout=subprocess.DEVNULL, stderr=log, preexec_fn=limit)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                pid = find_process(proc.pid, b"serve_clocked.py") or proc.pid
                return Server(proc, pid, f"http://127.0.0.1:{port}/mcp", log_path, clock_path)
        except OSError:
            if proc.poll() is not None:
                break
            time.sleep(0.05)
    proc.kill()
    raise SystemExit(f"the server did not start; see {log_path}")


_EPOCH_DAY = int(time.time()) // DAY + 1  # the simulated week starts tomorrow, whatever the hour now


def day_start(day: int) -> float:
    """01:00 UTC of the run's ``day``-th simulated day (0 is the first)."""
    return (_EPOCH_DAY + day) * DAY + 3600.0


def setup(home: str, clients: int) -> dict[str, str]:
    """The project and one agent per client, all open to mail; name -> token."""
    mail = Mail(Store(home, background=False))
    mail.ensure_project(PROJECT)
    tokens = {}
    for k in range(clients):
        name = f"Sender{k}"
        tokens[name] = mail.register_agent(PROJECT, "soak", "none", name=name)["registration_token"]
        mail.set_contact_policy(PROJECT, name, "open")
    return tokens


# -- what the server holds ------------------------------------------------------
def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def deleted_mappings(pid: int) -> int:
    with open(f"/proc/{pid}/maps") as handle:
        return sum(1 for line in handle if line.rstrip().endswith("(deleted)"))


def rss_mb(pid: int | None, field: str = "VmRSS") -> float:
    """Resident memory in MB: all of it (``VmRSS``), or its anonymous part (``RssAnon``: heaps, not file mappings)."""
    if pid is None:
        return 0.0
    try:
        with open(f"/proc/{pid}/status") as handle:
            for line in handle:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024 / 1e6
    except FileNotFoundError:
        pass
    return 0.0


def find_process(pid: int, marker: bytes) -> int | None:
    """The deepest of ``pid`` and its descendants whose command line contains ``marker``.

    The deepest, not the first: a profiler's wrapper names the program it runs in its own command line.
    """
    pending, found = [pid], None
    while pending:
        current = pending.pop(0)
        try:
            with open(f"/proc/{current}/cmdline", "rb") as handle:
                if marker in handle.read():
                    found = current
            for task in os.listdir(f"/proc/{current}/task"):
                with open(f"/proc/{current}/task/{task}/children") as handle:
                    pending += [int(child) for child in handle.read().split()]
        except (FileNotFoundError, ProcessLookupError):
            continue
    return found


def helper_pid(pid: int) -> int | None:
    """The server's search-index helper (a child running gitmail.index.search_process), if it runs."""
    return find_process(pid, b"search_process")


def nofile_limit(pid: int) -> str:
    with open(f"/proc/{pid}/limits") as handle:
        for line in handle:
            if line.startswith("Max open files"):
                return line.split()[3]  # the soft limit
    return "?"


@dataclass
class Sample:
    sent: int
    fds: int
    deleted: int
    rss: float
    helper_rss: float
    anon: float = 0.0  # the server's anonymous resident memory (the rest maps files: packs, libraries)


@dataclass
class Run:
    total: int
    latencies: list[tuple[int, float]] = field(default_factory=list)  # (completion number, ms)
    samples: list[Sample] = field(default_factory=list)
    errors: int = 0
    error_texts: list[str] = field(default_factory=list)
    started: int = 0
    done: int = 0
    decile_times: list[float] = field(default_factory=list)


def sample(pid: int, run: Run) -> None:
    try:
        run.samples.append(Sample(run.done, open_fds(pid), deleted_mappings(pid), rss_mb(pid),
                                  rss_mb(helper_pid(pid)), rss_mb(pid, "RssAnon")))
    except FileNotFoundError:
        pass  # the server is gone; the sends will say so


async def sampler(pid: int, run: Run, stop: asyncio.Event) -> None:
    loop = asyncio.get_running_loop()
    while not stop.is_set():
        await loop.run_in_executor(None, sample, pid, run)
        try:
            await asyncio.wait_for(stop.wait(), SAMPLE_SECONDS)
        except TimeoutError:
            pass


@dataclass
class Load:
    """What the clients do besides sending: acknowledgements owed to each agent, and the day count."""

    names: list[str]
    tokens: dict[str, str]
    days: int
    clock_path: str
    owed: dict[str, list[str]] = field(default_factory=dict)  # agent -> message IDs it is to acknowledge
    day: int = 0
    other_calls: int = 0

    def rollover(self, done: int, total: int) -> None:
        """Move the server's clock to the next simulated day once its share of the messages is sent."""
        while self.day + 1 < self.days and done >= total * (self.day + 1) // self.days:
            self.day += 1
            write_offset(self.clock_path, day_start(self.day) - time.time())


def message_args(load: Load, k: int, i: int) -> dict:
    me, count = load.names[k], len(load.names)
    to = load.names[(k + 1 + i % max(1, count - 1)) % count] if count > 1 else me
    return {"project_key": PROJECT, "sender_name": me, "to": [to], "sender_token": load.tokens[me],
            "subject": f"soak {i}: {WORDS[i % len(WORDS)]}", "ack_required": i % ACK_EVERY == 0,
            "body_md": f"Note {i}: the {WORDS[i % len(WORDS)]} step of {WORDS[(i * 7) % len(WORDS)]} is ready."}


async def side_calls(client: Client, load: Load, k: int, turn: int) -> str | None:
    """An agent's acknowledgement of one message it owes, and now and then a reservation; the first error."""
    me = load.names[k]
    who = {"project_key": PROJECT, "agent_name": me, "agent_token": load.tokens[me]}
    calls = []
    if load.owed.get(me):
        calls.append(("acknowledge_message", {**who, "message_id": load.owed[me].pop(0)}))
    if turn % RESERVE_EVERY == 0:
        calls.append(("file_reservation_paths", {**who, "paths": [f"src/{me.lower()}/{turn % 50}.py"],
                                                 "ttl_seconds": RESERVE_TTL, "exclusive": False}))
    for name, args in calls:
        load.other_calls += 1
        try:
            result = await client.call_tool(name, args, raise_on_error=False)
            if result.is_error:
                return f"{name}: {result.content[0].text}"
        except Exception as exc:  # noqa: BLE001 - counted and reported
            return f"{name}: {type(exc).__name__}: {exc}"
    return None


def owe(load: Load, args: dict, text: str) -> None:
    """Queue the acknowledgement a message asking for one is owed by its recipient."""
    if args["ack_required"]:
        data = json.loads(text)
        data = data.get("result", data)
        load.owed.setdefault(args["to"][0], []).append(data["deliveries"][0]["payload"]["id"])


async def send_all(url: str, load: Load, run: Run, pid: int) -> None:
    began = time.perf_counter()
    boundaries = [run.total * (d + 1) // DECILES for d in range(DECILES)]

    def failed(text: str) -> None:
        run.errors += 1
        if len(run.error_texts) < 5:
            run.error_texts.append(text[:300])

    async def agent(k: int, client: Client) -> None:
        turn = 0
        while run.started < run.total:
            turn += 1
            problem = await side_calls(client, load, k, turn)
            if problem is not None:
                failed(problem)
            i = run.started
            run.started += 1
            args = message_args(load, k, i)
            t0 = time.perf_counter()
            try:
                result = await client.call_tool("send_message", args, raise_on_error=False)
                problem = result.content[0].text if result.is_error else None
                if problem is None:
                    owe(load, args, result.content[0].text)
            except Exception as exc:  # noqa: BLE001 - counted and reported
                problem = f"{type(exc).__name__}: {exc}"
            ms = (time.perf_counter() - t0) * 1000
            run.done += 1
            run.latencies.append((run.done, ms))
            load.rollover(run.done, run.total)
            while len(run.decile_times) < DECILES and run.done >= boundaries[len(run.decile_times)]:
                run.decile_times.append(time.perf_counter() - began)
            if problem is not None:
                failed(problem)

    sessions = [Client(url, mode="legacy", timeout=300) for _ in load.names]
    for session in sessions:
        await session.__aenter__()
    stop = asyncio.Event()
    watcher = asyncio.create_task(sampler(pid, run, stop))
    try:
        await asyncio.gather(*(agent(k, session) for k, session in enumerate(sessions)))
    finally:
        stop.set()
        await watcher
        for session in sessions:
            try:
                await session.__aexit__(None, None, None)
            except Exception:  # noqa: BLE001 - a dead server is already counted in the errors
                pass
    sample(pid, run)


# -- the report -----------------------------------------------------------------
def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))] if ordered else float("nan")


def deciles(run: Run) -> list[dict]:
    rows = []
    previous_time = 0.0
    for d in range(DECILES):
        low, high = run.total * d // DECILES, run.total * (d + 1) // DECILES
        times = [ms for n, ms in run.latencies if low < n <= high]
        inside = [s for s in run.samples if low < s.sent <= high] or [s for s in run.samples if s.sent <= high][-1:]
        end = inside[-1] if inside else Sample(high, 0, 0, 0.0, 0.0)
        seconds = (run.decile_times[d] if d < len(run.decile_times) else float("nan")) - previous_time
        previous_time = run.decile_times[d] if d < len(run.decile_times) else previous_time
        rows.append({
            "decile": d + 1, "messages": high, "msg_per_s": round((high - low) / seconds, 1) if seconds > 0 else None,
            "p50_ms": round(statistics.median(times), 1) if times else None,
            "p95_ms": round(pct(times, 0.95), 1) if times else None,
            "fds": end.fds, "fds_max": max((s.fds for s in inside), default=0),
            "deleted_maps": end.deleted, "deleted_maps_max": max((s.deleted for s in inside), default=0),
            "rss_mb": round(end.rss, 1), "anon_mb": round(end.anon, 1), "helper_rss_mb": round(end.helper_rss, 1),
        })
    return rows


def flat(rows: list[dict], key: str) -> bool:
    """Nothing in deciles 6-10 above the warm-up maximum of deciles 2-5 (plus slack)."""
    warm = max(row[key] for row in rows[1:5])
    late = max(row[key] for row in rows[5:])
    return late <= warm + max(FLAT_FLOOR, warm * FLAT_SLACK)


def verdict(rows: list[dict], run: Run) -> dict:
    growth = rows[-1]["rss_mb"] - rows[1]["rss_mb"]
    helper_growth = rows[-1]["helper_rss_mb"] - rows[1]["helper_rss_mb"]
    ratio = (rows[-1]["p95_ms"] or float("inf")) / (rows[1]["p95_ms"] or float("nan"))
    rate = (rows[-1]["msg_per_s"] or 0.0) / (rows[1]["msg_per_s"] or float("nan"))
    return {
        "errors": run.errors, "errors_ok": run.errors == 0,
        "fds_flat": flat(rows, "fds_max"), "deleted_maps_flat": flat(rows, "deleted_maps_max"),
        "rss_growth_mb": round(growth, 1), "rss_ok": growth <= RSS_GROWTH_LIMIT_MB,
        "helper_rss_growth_mb": round(helper_growth, 1), "helper_rss_ok": helper_growth <= RSS_GROWTH_LIMIT_MB,
        "p95_ratio": round(ratio, 2), "p95_ok": ratio <= P95_RATIO_LIMIT,
        "rate_ratio": round(rate, 2), "rate_ok": rate >= RATE_RATIO_LIMIT,
    }


CHECKS = [("errors", "errors_ok", "{errors} (target 0)"),
          ("open fds flat after warm-up", "fds_flat", ""),
          ("deleted mappings flat after warm-up", "deleted_maps_flat", ""),
          ("server RSS growth, decile 2 to end", "rss_ok", "{rss_growth_mb} MB (target <= 50)"),
          ("search helper RSS growth, decile 2 to end", "helper_rss_ok", "{helper_rss_growth_mb} MB (target <= 50)"),
          ("p95 last decile / 2nd decile", "p95_ok", "{p95_ratio} (target <= 1.2)"),
          ("msg/s last decile / 2nd decile", "rate_ok", "{rate_ratio} (target >= 0.8)")]


def print_table(rows: list[dict], run: Run, result: dict) -> None:
    print(f"{'decile':>6} {'msgs':>7} {'msg/s':>7} {'p50 ms':>7} {'p95 ms':>7} {'fds':>9} {'del.maps':>9} "
          f"{'RSS MB':>7} {'anon':>7} {'helper':>7}")
    for row in rows:
        print(f"{row['decile']:>6} {row['messages']:>7} {row['msg_per_s'] or '-':>7} {row['p50_ms'] or '-':>7} "
              f"{row['p95_ms'] or '-':>7} {row['fds']:>4}/{row['fds_max']:<4} "
              f"{row['deleted_maps']:>4}/{row['deleted_maps_max']:<4} {row['rss_mb']:>7} {row['anon_mb']:>7} "
              f"{row['helper_rss_mb']:>7}")
    print("(fds and del.maps: at the decile's end / largest during it; RSS, its anonymous part and the helper's RSS "
          "at its end)")
    for text in run.error_texts:
        print(f"error: {text}")
    for label, key, detail in CHECKS:
        print(f"{'PASS' if result[key] else 'FAIL'}  {label} {detail.format(**result)}".rstrip())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=16, help="concurrent MCP sessions, one sending agent each")
    parser.add_argument("--messages", type=int, default=30_000, help="messages to send in all")
    parser.add_argument("--days", type=int, default=1, help="simulated days the messages are spread over")
    parser.add_argument("--nofile", type=int, default=1024, help="the server's open-file limit (ulimit -n)")
    parser.add_argument("--wrap", default="", help="a command to run the server under (a profiler)")
    parser.add_argument("--keep", action="store_true", help="keep the store and the server log (path printed)")
    args = parser.parse_args()
    if args.messages < DECILES * args.clients:
        raise SystemExit(f"--messages must be at least {DECILES * args.clients}")
    home = tempfile.mkdtemp(prefix="gitmail-soak-")
    tokens = setup(home, args.clients)
    load_before = [round(x, 2) for x in os.getloadavg()]
    server = start_server(home, args.nofile, args.wrap)
    run = Run(args.messages)
    names = sorted(tokens, key=lambda n: int(n[len("Sender"):]))
    load = Load(names, tokens, max(1, args.days), server.clock_path)
    began = time.perf_counter()
    try:
        limit = nofile_limit(server.pid)
        asyncio.run(send_all(server.url, load, run, server.pid))
        seconds = time.perf_counter() - began
    finally:
        server.stop()
    load_after = [round(x, 2) for x in os.getloadavg()]
    rows = deciles(run)
    result = verdict(rows, run)
    print(f"gitmail serve, open-file limit {limit}, {args.clients} clients, {args.messages} messages over "
          f"{load.days} simulated day(s), {load.other_calls} acknowledgements and reservations besides, "
          f"in {seconds:.0f} s ({args.messages / seconds:.1f} msg/s); load average {load_before} -> {load_after}")
    print_table(rows, run, result)
    if args.keep:
        print(f"store and server log kept in {home} ({server.log_path})")
    else:
        subprocess.run(["rm", "-rf", home], check=False)
    print(json.dumps({"benchmark": "soak", "clients": args.clients, "messages": args.messages, "days": load.days,
                      "other_calls": load.other_calls, "nofile": args.nofile, "seconds": round(seconds, 1),
                      "load_before": load_before, "load_after": load_after, "deciles": rows, **result}))


if __name__ == "__main__":
    main()
