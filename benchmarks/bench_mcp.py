"""Benchmark of the MCP server: what an agent sees over Streamable HTTP, next to a bare call's cost.

Run: ``python benchmarks/bench_mcp.py --sizes 1000,100000`` (the default is
1k and 10k), or ``python benchmarks/bench_mcp.py --sizes 300 --samples 20
--fill 200`` for a quick look.

A real server (``gitmail serve`` plus one tool that does nothing, see
``serve_with_floor.py``) runs in a child process on a free loopback port with
a throw-away store; the benchmark talks to it with fastmcp's client, one MCP
session per simulated agent. For each size a fresh project gets a history of
that many messages the way a real archive grows (``--per-day`` a day among 20
agents over the preceding days, one thread of 20 messages, every tenth
message tagged ``ops``), written with ``git fast-import``; the server's index
takes it in before timing starts. Then:

1. **Light**: send latency from one session with one-line bodies, and
   send throughput with 1, 8 and 16 concurrent sessions (one-line bodies).
2. **Realistic**: ``--fill`` messages (default 1,000) sent through MCP by 10
   agents, each in its own session passing its own token, 512-byte bodies,
   10 at once; then throughput again with 1, 8 and 16 senders, 512-byte bodies.
   Each send burst is followed by a burst of the no-op tool from as many
   sessions, as many calls: server CPU per send over the floor's per call at
   the same concurrency is the send's ``cpu_ratio``.
3. **Every tool against the floor**, in the realistic state: each tool's
   calls alternate with calls of the no-op tool, so both p50s come from the
   same moments of a shared machine, and the ratio is tool p50 / floor p50.
   Server CPU per call is measured over a burst of calls of one tool, from
   its start until the server is idle again (its threads, its search-index
   helper and its git runs: background work each call triggers is counted,
   amortized over the burst), next to the floor's over a burst of its own.

Targets: read tools (fetch_inbox, search_messages, summarize_thread,
fetch_topic, whois, list_contacts) p50 ≤ 1.3× the floor's at 1k and 10k,
≤ floor + 20 ms at 100k; server CPU per send ≤ 3× the floor's at 1 sender
and ≤ 2× at 8 (realistic bursts, the ``targets`` of each size); acknowledge
server CPU ≤ 2× the floor's; send p50 ≤ 1.6× the floor's; 8 senders ≥ 120
msg/s realistic and ≥ 200 light with no errors; 16 senders not slower than 8;
a page of 200 messages within 128,000 bytes (``read_messages`` and its compact
form ``read_compact``; the server lists the compact family for this) ≤ 1.3×
the floor's p50 at 100k; ``bench_text``, a bare call answering a text of
that size, shows what carrying those bytes costs by itself. Prints one table per size, the load average before
and after, then one JSON line with every figure.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

from fastmcp import Client

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from gitmail.index import indexer_for
from gitmail.mail.facade import Mail
from gitmail.model.clock import format_ts
from gitmail.model.ids import ALPHABET, ID_LENGTH
from gitmail.model.records import Message, inbox_path, message_path, outbox_path
from gitmail.storage.checkout import refresh
from gitmail.storage.store import Store

PROJECT = "/bench/mcp"
RECIPIENT = "Receiver"
FILLERS = [f"Agent{i:02d}" for i in range(20)]
SENDERS = [f"Sender{i}" for i in range(16)]
REALISTIC_AGENTS = 10
BODY_BYTES = 512
THREAD_LENGTH = 20
FLOOR = "bench_noop"
WORDS = ["migration", "schema", "deploy", "router", "cache", "review", "latency", "token", "index", "build"]
SEND_CPU_RATIO_1 = 3.0  # server CPU per send at most this many times the floor's, one sender...
SEND_CPU_RATIO_MANY = 2.0  # ...and at --clients senders
SEND_RATE_MANY = 120.0  # messages per second at --clients senders (realistic bodies), with no errors
READ_TOOLS = ("fetch_inbox", "search_messages", "summarize_thread", "fetch_topic", "whois", "list_contacts")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_server(home: str) -> tuple[subprocess.Popen, str]:
    port = free_port()
    env = dict(os.environ, GITMAIL_HOME=home, PYTHONPATH=ROOT, GITMAIL_TOOLS="default,compact")
    env.pop("GITMAIL_TOKEN", None)
    proc = subprocess.Popen([sys.executable, os.path.join(ROOT, "benchmarks", "serve_with_floor.py"), str(port)],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_listening(proc, port)
    return proc, f"http://127.0.0.1:{port}/mcp"


def wait_listening(proc: subprocess.Popen, port: int) -> None:
    """Return once a server just started listens on ``port`` (ends it and the run if it never does)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise SystemExit("the server did not start")


def rss_mib(pid: int, field: str = "VmRSS") -> float:
    """A process's resident memory now (``VmRSS``) or at its peak (``VmHWM``), in MiB."""
    with open(f"/proc/{pid}/status") as handle:
        for line in handle:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return float("nan")


def cpu_seconds(pid: int) -> float:
    """CPU time of a process and its live descendants, plus the children it has reaped (git runs)."""
    tick = os.sysconf("SC_CLK_TCK")
    total, pending = 0.0, [pid]
    while pending:
        current = pending.pop()
        try:
            with open(f"/proc/{current}/stat") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
            total += sum(int(value) for value in fields[11:15]) / tick  # utime stime cutime cstime
            for task in os.listdir(f"/proc/{current}/task"):
                with open(f"/proc/{current}/task/{task}/children") as handle:
                    pending += [int(child) for child in handle.read().split()]
        except (FileNotFoundError, ProcessLookupError):
            continue  # exited meanwhile
    return total


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


IDLE_SHARE = 0.02  # a server using less than this share of a core is idle (its threads still wake now and then)


async def settle(pid: int, quiet: float = 1.5, cap: float = 15.0) -> None:
    """Wait until the server has used under IDLE_SHARE of a core for ``quiet`` seconds (background work is done).

    Not "no CPU at all": an idle server still wakes a few times a second
    (the ref watcher, the event loop), and the kernel counts CPU in 10 ms
    ticks, so waiting for a window without a single tick mostly waited
    for ``cap``. The window is longer than every background delay (the
    longest, the search-index merge, waits 1 s for a pause), so work still
    pending shows up in it.
    """
    deadline = time.monotonic() + cap
    seen = [(time.monotonic(), cpu_seconds(pid))]
    while time.monotonic() < deadline:
        await asyncio.sleep(0.1)
        now = time.monotonic()
        seen.append((now, cpu_seconds(pid)))
        while len(seen) > 1 and seen[1][0] <= now - quiet:
            seen.pop(0)
        began, used = seen[0][0], seen[-1][1] - seen[0][1]
        if now - began >= quiet and used <= IDLE_SHARE * (now - began):
            return


def short_body(i: int) -> str:
    return f"Note {i}: the {WORDS[i % len(WORDS)]} step of {WORDS[(i * 7) % len(WORDS)]} is ready for review."


def long_body(i: int) -> str:
    """A 512-byte Markdown body, as agents write them."""
    text = (f"## Status {i}\n\n- [ ] check the {WORDS[i % len(WORDS)]} step before the "
            f"{WORDS[(i * 7) % len(WORDS)]} rollout\n- the {WORDS[(i * 3) % len(WORDS)]} numbers look right; "
            "please review the diff and say if anything blocks the merge.\n\n")
    filler = " ".join(WORDS[(i + k) % len(WORDS)] for k in range(80))
    return (text + filler)[:BODY_BYTES]


def setup(home: str) -> dict[str, str]:
    """The project, its agents (all open to mail) and the tokens of the ones the benchmark acts as."""
    mail = Mail(Store(home, background=False))
    mail.ensure_project(PROJECT)
    tokens = {}
    for name in [RECIPIENT] + FILLERS + SENDERS:
        profile = mail.register_agent(PROJECT, "bench", "none", name=name)
        mail.set_contact_policy(PROJECT, name, "open")
        tokens[name] = profile["registration_token"]
    return tokens


def past_id(ms: int, rng: random.Random) -> str:
    """An ID minted at ``ms`` (``new_id`` never mints earlier than the last ID it made)."""
    value, chars = (ms << 65) | rng.getrandbits(65), []
    for _ in range(ID_LENGTH):
        chars.append(ALPHABET[value & 31])
        value >>= 5
    return "".join(reversed(chars))


def history(home: str, count: int, per_day: int, *, project: str = PROJECT) -> tuple[float, str]:
    """Add ``count`` past messages (``per_day`` a day, ending yesterday) to ``project`` with git fast-import.

    The last THREAD_LENGTH form one thread; every tenth has the topic ``ops``.
    Returns the seconds taken and the thread's ID.
    """
    began = time.perf_counter()
    store = Store(home, background=False)
    archive = store.archive(project)
    day_ms = 86_400_000
    end_ms = (int(time.time() * 1000) // day_ms) * day_ms - 1  # the end of yesterday
    proc = subprocess.Popen(["git", "--git-dir", archive.git_dir, "fast-import", "--quiet", "--done"],
                            stdin=subprocess.PIPE)
    out = proc.stdin
    assert out is not None
    chunk = 1000
    rng = random.Random(count)
    thread = ""
    for first in range(0, count, chunk):
        files = []
        for i in range(first, min(count, first + chunk)):
            ms = end_ms - (count - i) * day_ms // per_day
            sender = FILLERS[i % len(FILLERS)]
            to = [RECIPIENT] if i % 4 == 0 else [FILLERS[(i + 1 + i // 7) % len(FILLERS)]]
            if to == [sender]:
                to = [FILLERS[(i + 2) % len(FILLERS)]]
            mid = past_id(ms, rng)
            if i == count - THREAD_LENGTH:
                thread = mid
            created = format_ts(dt.datetime.fromtimestamp(ms / 1000, dt.UTC))
            data = Message(id=mid, thread_id=thread or mid, sender=sender, subject=f"history {i}", created_ts=created,
                           to=to, body=long_body(i), topic="ops" if i % 10 == 0 else None).to_bytes()
            out.write(b"blob\nmark :%d\ndata %d\n" % (i + 1, len(data)) + data + b"\n")
            files.append((i + 1, [message_path(mid), outbox_path(sender, mid)] + [inbox_path(r, mid) for r in to]))
        text = f"history: {len(files)} messages".encode()
        out.write(b"commit refs/heads/main\ncommitter bench <bench@example.org> %d +0000\ndata %d\n"
                  % (int(time.time()), len(text)) + text + b"\n")
        if first == 0:
            out.write(f"from {archive.tip()}\n".encode())
        for mark, paths in files:
            for path in paths:
                out.write(f"M 100644 :{mark} {path}\n".encode())
        out.write(b"\n")
    out.write(b"done\n")
    out.close()
    if proc.wait() != 0:
        raise SystemExit("git fast-import failed")
    return time.perf_counter() - began, thread


def make_checkout(home: str) -> float:
    """Clone the human checkout and build the index of the history before the server starts.

    A grown archive has both already. Otherwise the first commit the
    benchmark makes starts the clone (minutes at 100k messages) in the
    middle of the timed calls, and the server's first read builds the index
    of every message (longer than a client waits on a busy machine).
    Returns the seconds taken.
    """
    began = time.perf_counter()
    store = Store(home, background=False)
    paths = store.paths(store.resolve(PROJECT))
    refresh(paths.archive, paths.checkout)
    indexer = indexer_for(store)
    indexer.project(PROJECT).catch_up()
    indexer.close()
    return time.perf_counter() - began


async def call(client: Client, name: str, args: dict) -> Any:
    result = await client.call_tool(name, args, raise_on_error=False)
    if result.is_error:
        raise RuntimeError(f"{name}: {result.content[0].text}")
    return result


def payload(result: Any) -> Any:
    data = json.loads(result.content[0].text)
    return data["result"] if isinstance(data, dict) and set(data) == {"result"} else data


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


async def sessions(url: str, count: int) -> list[Client]:
    clients = [Client(url, mode="legacy", timeout=120) for _ in range(count)]
    for client in clients:
        await client.__aenter__()
    await asyncio.gather(*(call(client, FLOOR, {}) for client in clients))
    return clients


async def close(clients: list[Client]) -> None:
    for client in clients:
        await client.__aexit__(None, None, None)


async def throughput(url: str, tokens: dict[str, str], total: int, clients: int, pid: int, body: Callable[[int], str],
                     tag: str, *, after_sends: Callable[[], None] | None = None) -> dict:
    """Messages per second with ``clients`` sessions sending at once, each as its own agent with its own token.

    Connecting is not timed. Server CPU per message counts the burst and the
    background work it left behind (until the server is idle again); the
    floor's is measured the same way right after, with as many sessions
    calling the no-op tool as often, and the ratio of the two is the send's
    cost in units of a bare call at that concurrency. ``after_sends`` is
    called between the two bursts (to take a reading of the sends alone).
    """
    def send(k: int, i: int) -> tuple[str, dict]:
        return "send_message", {"project_key": PROJECT, "sender_name": SENDERS[k], "to": [RECIPIENT],
                                "subject": f"{tag} {k} {i}", "body_md": body(i), "sender_token": tokens[SENDERS[k]]}

    per = max(1, total // clients)
    sent = await burst(url, clients, per, send, pid)
    if after_sends is not None:
        after_sends()
    floor = await burst(url, clients, per, lambda k, i: (FLOOR, {}), pid)
    return {"clients": clients, "messages": per * clients, "seconds": sent["seconds"],
            "msg_per_s": round(per * clients / sent["seconds"], 1), "errors": sent["errors"],
            "server_cpu_ms_per_msg": sent["cpu_ms_per_call"], "floor_cpu_ms_per_call": floor["cpu_ms_per_call"],
            "cpu_ratio": round(sent["cpu_ms_per_call"] / max(floor["cpu_ms_per_call"], 1e-6), 2)}


async def burst(url: str, clients: int, per: int, make: Callable[[int, int], tuple[str, dict]], pid: int) -> dict:
    """``per`` calls from each of ``clients`` sessions at once; seconds, errors and server CPU per call."""
    errors = 0

    async def run(k: int, client: Client) -> None:
        nonlocal errors
        for i in range(per):
            try:
                await call(client, *make(k, i))
            except Exception:  # noqa: BLE001 - counted and reported
                errors += 1

    opened = await sessions(url, clients)
    try:
        await settle(pid)
        cpu, began = cpu_seconds(pid), time.perf_counter()
        await asyncio.gather(*(run(k, session) for k, session in enumerate(opened)))
        seconds = time.perf_counter() - began
        await settle(pid)
        cpu = cpu_seconds(pid) - cpu
    finally:
        await close(opened)
    return {"seconds": round(seconds, 3), "errors": errors, "cpu_ms_per_call": round(cpu * 1000 / (per * clients), 2)}


class Calls:
    """Argument makers for every tool the table covers (index ``i`` makes each call distinct where it must be)."""

    def __init__(self, tokens: dict[str, str], thread: str, acks: list[str], reads: list[str], body: Callable):
        self.tokens, self.thread, self.acks, self.reads, self.body = tokens, thread, acks, reads, body

    def me(self, name: str = RECIPIENT) -> dict[str, Any]:
        return {"project_key": PROJECT, "agent_name": name, "agent_token": self.tokens[name]}

    def table(self) -> dict[str, Callable[[int], dict[str, Any]]]:
        sender = SENDERS[0]
        return {
            "health_check": lambda i: {},
            "send_message": lambda i: {"project_key": PROJECT, "sender_name": sender, "to": [RECIPIENT],
                                       "subject": f"table {i}", "body_md": self.body(i),
                                       "sender_token": self.tokens[sender]},
            "reply_message": lambda i: {"project_key": PROJECT, "message_id": self.thread, "sender_name": sender,
                                        "body_md": self.body(i), "sender_token": self.tokens[sender]},
            "acknowledge_message": lambda i: {**self.me(), "message_id": self.acks.pop()},  # a new one each call
            "mark_message_read": lambda i: {**self.me(), "message_id": self.reads.pop()},
            "fetch_inbox": lambda i: {**self.me(), "limit": 20},
            "search_messages": lambda i: {**self.me(), "query": WORDS[i % len(WORDS)], "limit": 20},
            "summarize_thread": lambda i: {**self.me(), "thread_id": self.thread},
            "fetch_topic": lambda i: {**self.me(), "topic_name": "ops", "limit": 20},
            "whois": lambda i: {"project_key": PROJECT, "agent_name": FILLERS[i % len(FILLERS)]},
            "list_contacts": lambda i: self.me(),
            "catch_up": lambda i: self.me(),
            "read_messages": lambda i: {**self.me(), "limit": 200, "max_output_bytes": 128_000},
            "read_compact": lambda i: {**self.me(), "limit": 200, "max_output_bytes": 128_000},
            "bench_text": lambda i: {"size": 121_000},  # a bare call answering as many bytes as those pages
            "list_agents": lambda i: {"project_key": PROJECT},
            "file_reservation_paths": lambda i: {**self.me(sender), "paths": [f"src/bench/{i}.py"],
                                                 "ttl_seconds": 600},
            "list_file_reservations": lambda i: {"project_key": PROJECT},
        }


WRITES = ("send_message", "reply_message", "acknowledge_message", "mark_message_read", "file_reservation_paths")


async def tool_table(url: str, calls: Calls, samples: int, burst: int, pid: int) -> dict[str, dict]:
    """Each tool's p50 (its calls alternating with the floor's) and server CPU per call, with the floor's."""
    client, floor_client = Client(url, mode="legacy", timeout=120), Client(url, mode="legacy", timeout=120)
    out: dict[str, dict] = {}
    async with client, floor_client:
        await call(floor_client, FLOOR, {})
        # Prove every agent once in this session, as an agent's own session would have.
        await call(client, "fetch_inbox", {**calls.me(), "limit": 1})
        await call(client, "fetch_inbox", {**calls.me(SENDERS[0]), "limit": 1})
        counter = 0
        for name, make in calls.table().items():
            await call(client, name, make(counter))  # warm
            counter += 1
            tool_ms, floor_ms = [], []
            for _ in range(samples):
                began = time.perf_counter()
                await call(floor_client, FLOOR, {})
                floor_ms.append((time.perf_counter() - began) * 1000)
                args = make(counter)
                counter += 1
                began = time.perf_counter()
                await call(client, name, args)
                tool_ms.append((time.perf_counter() - began) * 1000)
            cpu_floor = await cpu_per_call(floor_client, FLOOR, lambda i: {}, burst, pid)
            cpu_tool = await cpu_per_call(client, name, lambda i, make=make, start=counter: make(start + i), burst, pid)
            counter += burst
            out[name] = {"p50_ms": round(statistics.median(tool_ms), 2), "p95_ms": round(pct(tool_ms, 0.95), 2),
                         "floor_p50_ms": round(statistics.median(floor_ms), 2),
                         "cpu_ms": round(cpu_tool, 2), "floor_cpu_ms": round(cpu_floor, 2)}
    return out


async def cpu_per_call(client: Client, name: str, make: Callable[[int], dict], count: int, pid: int) -> float:
    """Server CPU per call over a burst, background work included (until the server is idle again)."""
    await settle(pid)
    before = cpu_seconds(pid)
    for i in range(count):
        await call(client, name, make(i))
    await settle(pid)
    return (cpu_seconds(pid) - before) * 1000 / count


async def measure(url: str, tokens: dict[str, str], thread: str, args: argparse.Namespace, size: int,
                  pid: int) -> dict:
    out: dict = {"size": size}
    probe = Client(url, mode="legacy", timeout=300)
    async with probe:
        await call(probe, "fetch_inbox", {"project_key": PROJECT, "agent_name": RECIPIENT, "limit": 1,
                                          "agent_token": tokens[RECIPIENT]})  # the index takes the history in
        await call(probe, "search_messages", {"project_key": PROJECT, "query": "review",
                                              "agent_name": RECIPIENT, "agent_token": tokens[RECIPIENT]})
    await settle(pid)
    # 1. Light: one-line bodies.
    light = {}
    for clients in (1, args.clients, 2 * args.clients):
        light[clients] = await throughput(url, tokens, args.burst, clients, pid, short_body, "light")
    out["light"] = light
    # 2. Realistic: the fill through MCP by 10 agents with their own sessions and tokens, then bursts.
    out["fill"] = await throughput(url, tokens, args.fill, REALISTIC_AGENTS, pid, long_body, "fill")
    realistic = {}
    for clients in (1, args.clients, 2 * args.clients):
        realistic[clients] = await throughput(url, tokens, args.burst, clients, pid, long_body, "burst")
    out["realistic"] = realistic
    # 3. Every tool against the floor, in the realistic state.
    async with Client(url, mode="legacy", timeout=120) as reader:
        unread = payload(await call(reader, "fetch_inbox", {
            "project_key": PROJECT, "agent_name": RECIPIENT, "limit": 1000, "unread_only": True,
            "agent_token": tokens[RECIPIENT]}))
    ids = [m["id"] for m in unread]
    need = 2 * (args.samples + args.cpu_burst + 2)
    if len(ids) < need:
        raise SystemExit(f"only {len(ids)} unread messages for acknowledgements; raise --fill or --burst")
    calls = Calls(tokens, thread, ids[: need // 2], ids[need // 2:], long_body)
    out["tools"] = await tool_table(url, calls, args.samples, args.cpu_burst, pid)
    out["targets"] = send_targets(out, args.clients)
    return out


def send_targets(fig: dict, clients: int) -> dict:
    """The send targets: server CPU per send over the floor's at 1 and ``clients`` senders, and the rate there."""
    one, many = fig["realistic"][1], fig["realistic"][clients]
    return {"send_cpu_ratio_1": one["cpu_ratio"], "send_cpu_ratio_1_ok": one["cpu_ratio"] <= SEND_CPU_RATIO_1,
            f"send_cpu_ratio_{clients}": many["cpu_ratio"],
            f"send_cpu_ratio_{clients}_ok": many["cpu_ratio"] <= SEND_CPU_RATIO_MANY,
            f"msg_per_s_{clients}": many["msg_per_s"],
            f"msg_per_s_{clients}_ok": many["msg_per_s"] >= SEND_RATE_MANY and many["errors"] == 0,
            "errors": sum(t["errors"] for case in ("light", "realistic") for t in fig[case].values())}


def report(fig: dict) -> list[str]:
    size = fig["size"]
    lines = [f"== {size:,} messages (load average {fig['load_before']} -> {fig['load_after']}; "
             f"history {fig['fill_s']} s, checkout and index {fig['checkout_s']} s; "
             f"server RSS {fig['rss_mib']} MiB) =="]
    for case in ("light", "realistic"):
        for clients, t in fig[case].items():
            lines.append(f"  {case:<9} send x{clients:<3} {t['msg_per_s']:>7} msg/s  ({t['messages']} in "
                         f"{t['seconds']} s, {t['errors']} errors, server CPU {t['server_cpu_ms_per_msg']} ms/msg, "
                         f"floor {t['floor_cpu_ms_per_call']} ms/call, ratio {t['cpu_ratio']})")
    f = fig["fill"]
    lines.append(f"  fill: {f['messages']} messages by {f['clients']} agents, 512-byte bodies: {f['msg_per_s']} msg/s, "
                 f"{f['errors']} errors, server CPU {f['server_cpu_ms_per_msg']} ms/msg")
    lines.append("  targets: " + ", ".join(f"{key} {value}" for key, value in fig["targets"].items()))
    lines.append(f"  {'tool':<24}{'p50 ms':>8}{'p95 ms':>8}{'floor p50':>10}{'ratio':>7}{'CPU ms':>8}"
                 f"{'floor CPU':>10}{'ratio':>7}")
    for name, t in fig["tools"].items():
        lines.append(f"  {name:<24}{t['p50_ms']:>8}{t['p95_ms']:>8}{t['floor_p50_ms']:>10}{t['p50_ratio']:>7}"
                     f"{t['cpu_ms']:>8}{t['floor_cpu_ms']:>10}{t['cpu_ratio']:>7}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000", help="archive sizes in messages (ascending)")
    parser.add_argument("--samples", type=int, default=60, help="calls per tool for its p50 (each beside a floor call)")
    parser.add_argument("--cpu-burst", type=int, default=40, help="calls per burst for server CPU per call")
    parser.add_argument("--burst", type=int, default=400, help="messages per throughput run")
    parser.add_argument("--fill", type=int, default=1000, help="messages sent through MCP in the realistic case")
    parser.add_argument("--clients", type=int, default=8, help="concurrent senders (and twice as many)")
    parser.add_argument("--per-day", type=int, default=100, help="messages a day in the generated history")
    args = parser.parse_args()
    results = []
    for size in [int(s) for s in args.sizes.split(",")]:
        with tempfile.TemporaryDirectory(prefix="gitmail-bench-mcp-") as home:
            tokens = setup(home)
            fill_s, thread = history(home, size, args.per_day)
            checkout_s = make_checkout(home)
            server, url = start_server(home)
            try:
                load_before = load_average()
                figures = asyncio.run(measure(url, tokens, thread, args, size, server.pid))
                figures.update(load_before=load_before, load_after=load_average(), fill_s=round(fill_s, 1),
                               checkout_s=round(checkout_s, 1),
                               rss_mib=round(rss_mib(server.pid), 1))
            finally:
                server.terminate()
                server.wait(30)
        for t in figures["tools"].values():
            t["p50_ratio"] = round(t["p50_ms"] / t["floor_p50_ms"], 2)
            t["cpu_ratio"] = round(t["cpu_ms"] / max(t["floor_cpu_ms"], 1e-6), 2)
            t["p50_over_floor_ms"] = round(t["p50_ms"] - t["floor_p50_ms"], 2)
        results.append(figures)
        print("\n".join(report(figures)), flush=True)
    print(json.dumps({"benchmark": "mcp", "results": results}))


if __name__ == "__main__":
    main()
