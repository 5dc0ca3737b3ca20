"""Benchmark of the MCP server: what an agent sees over Streamable HTTP.

Run: ``python benchmarks/bench_mcp.py`` (1k and 10k messages) or
``python benchmarks/bench_mcp.py --sizes 300 --samples 30`` for a quick look.

A real ``gitmail serve`` runs in a child process on a free loopback port with
a throw-away store; the benchmark talks to it with fastmcp's client, one MCP
session per simulated agent. For each size a fresh project is given a history
of that many messages the way a real archive grows (about ``--per-day``
messages a day among 20 agents over the preceding days, written with
``git fast-import``), so today's folders start alike at every size and only
the archive's size differs. The server's index takes the history in before
timing starts. Then, through MCP:

- ``send_message`` p50 / p95 (one client, one recipient, durable commit)
- ``fetch_inbox`` p50 / p95 (limit 20, the recipient holding every message)
- ``search_messages`` p50 / p95 (limit 20, a word present in many messages)
- ``acknowledge_message`` p50 / p95 (distinct messages)
- long-poll wake-up p50 / p95: a ``read_messages`` waiting (``wait_seconds``
  25) on an empty page, from a send's return until the read returns with it
- send throughput with 1 client and with 8 concurrent clients (8 senders),
  counting error results (the goal is zero), and the server's CPU time per
  message meanwhile (its threads, its search-index helper and its git runs)
- the server's resident memory (RSS) after the run

Goals: send p50 at most 12 ms and flat from 1k to 10k; 8 clients at least
200 messages/s. Figures on a shared machine move between runs: compare medians
and ratios. Prints a table, then one JSON line with every figure.
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

from fastmcp import Client

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from gitmail.mail.facade import Mail
from gitmail.model.clock import format_ts
from gitmail.model.ids import ALPHABET, ID_LENGTH
from gitmail.model.records import Message, inbox_path, message_path, outbox_path
from gitmail.storage.store import Store

PROJECT = "/bench/mcp"
RECIPIENT = "Receiver"
FILLERS = [f"Agent{i:02d}" for i in range(20)]
WORDS = ["migration", "schema", "deploy", "router", "cache", "review", "latency", "token", "index", "build"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_server(home: str) -> tuple[subprocess.Popen, str]:
    port = free_port()
    env = dict(os.environ, GITMAIL_HOME=home, PYTHONPATH=ROOT)
    env.pop("GITMAIL_TOKEN", None)
    proc = subprocess.Popen([sys.executable, "-m", "gitmail", "serve", "--port", str(port)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return proc, f"http://127.0.0.1:{port}/mcp"
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise SystemExit("gitmail serve did not start")


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as handle:
        for line in handle:
            if line.startswith("VmRSS:"):
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


def body(i: int) -> str:
    return f"Note {i}: the {WORDS[i % len(WORDS)]} step of {WORDS[(i * 7) % len(WORDS)]} is ready for review."


def setup(home: str, senders: int) -> dict[str, str]:
    """The project, its agents (all open to mail) and the tokens of the ones the benchmark acts as."""
    mail = Mail(Store(home, background=False))
    mail.ensure_project(PROJECT)
    tokens = {}
    for name in [RECIPIENT] + FILLERS + [f"Sender{i}" for i in range(senders)]:
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


def history(home: str, count: int, per_day: int) -> float:
    """Add ``count`` past messages (``per_day`` a day, ending yesterday) with git fast-import; seconds taken."""
    began = time.perf_counter()
    store = Store(home, background=False)
    archive = store.archive(PROJECT)
    day_ms = 86_400_000
    end_ms = (int(time.time() * 1000) // day_ms) * day_ms - 1  # the end of yesterday
    proc = subprocess.Popen(["git", "--git-dir", archive.git_dir, "fast-import", "--quiet", "--done"],
                            stdin=subprocess.PIPE)
    out = proc.stdin
    assert out is not None
    chunk = 1000
    rng = random.Random(count)
    for first in range(0, count, chunk):
        files = []
        for i in range(first, min(count, first + chunk)):
            ms = end_ms - (count - i) * day_ms // per_day
            sender = FILLERS[i % len(FILLERS)]
            to = [RECIPIENT] if i % 4 == 0 else [FILLERS[(i + 1 + i // 7) % len(FILLERS)]]
            if to == [sender]:
                to = [FILLERS[(i + 2) % len(FILLERS)]]
            mid = past_id(ms, rng)
            created = format_ts(dt.datetime.fromtimestamp(ms / 1000, dt.UTC))
            data = Message(id=mid, thread_id=mid, sender=sender, subject=f"history {i}", created_ts=created,
                           to=to, body=body(i)).to_bytes()
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
    return time.perf_counter() - began


async def call(client: Client, name: str, args: dict) -> object:
    result = await client.call_tool(name, args, raise_on_error=False)
    if result.is_error:
        raise RuntimeError(f"{name}: {result.content[0].text}")
    return result


async def timed(client: Client, name: str, make_args, count: int) -> list[float]:
    times = []
    for i in range(count):
        args = make_args(i)
        began = time.perf_counter()
        await call(client, name, args)
        times.append((time.perf_counter() - began) * 1000)
    return times


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


async def measure(url: str, tokens: dict[str, str], samples: int, burst: int, clients: int, size: int,
                  pid: int) -> dict:
    out: dict = {"size": size}
    sender = Client(url, mode="legacy", timeout=120)
    receiver = Client(url, mode="legacy", timeout=120)
    async with sender, receiver:
        await call(receiver, "fetch_inbox", {"project_key": PROJECT, "agent_name": RECIPIENT, "agent_token":
                                             tokens[RECIPIENT]})  # warm the index after the fill
        await call(receiver, "search_messages", {"project_key": PROJECT, "query": "review"})
        send = lambda i: {"project_key": PROJECT, "sender_name": "Sender0", "to": [RECIPIENT],  # noqa: E731
                          "subject": f"bench {size} {i}", "body_md": body(i), "sender_token": tokens["Sender0"]}
        out["send_ms"] = await timed(sender, "send_message", send, samples)
        inbox = lambda i: {"project_key": PROJECT, "agent_name": RECIPIENT, "limit": 20,  # noqa: E731
                           "agent_token": tokens[RECIPIENT]}
        out["fetch_inbox_ms"] = await timed(receiver, "fetch_inbox", inbox, samples)
        search = lambda i: {"project_key": PROJECT, "query": WORDS[i % len(WORDS)], "limit": 20}  # noqa: E731
        out["search_ms"] = await timed(receiver, "search_messages", search, samples)
        listed = json.loads((await call(receiver, "fetch_inbox", {
            "project_key": PROJECT, "agent_name": RECIPIENT, "limit": samples, "unread_only": True,
            "agent_token": tokens[RECIPIENT]})).content[0].text)
        listed = listed if isinstance(listed, list) else listed["result"]
        ids = [m["id"] for m in listed]
        ack = lambda i: {"project_key": PROJECT, "agent_name": RECIPIENT, "message_id": ids[i],  # noqa: E731
                         "agent_token": tokens[RECIPIENT]}
        out["ack_ms"] = await timed(receiver, "acknowledge_message", ack, min(samples, len(ids)))
        out["wake_ms"] = await long_poll_wakes(sender, receiver, tokens, min(samples, 20))
    out["throughput_1"] = await throughput(url, tokens, burst, 1, pid)
    out["throughput_n"] = await throughput(url, tokens, burst, clients, pid)
    return out


async def long_poll_wakes(sender: Client, receiver: Client, tokens: dict[str, str], rounds: int) -> list[float]:
    """Milliseconds from a send's return until a reader long-polling for it has its page."""
    wakes = []
    for i in range(rounds):
        cursor = json.loads((await call(receiver, "catch_up", {
            "project_key": PROJECT, "agent_name": RECIPIENT, "agent_token": tokens[RECIPIENT]})).content[0].text)
        read = asyncio.ensure_future(call(receiver, "read_messages", {
            "project_key": PROJECT, "agent_name": RECIPIENT, "after": cursor["next_after"], "wait_seconds": 25,
            "agent_token": tokens[RECIPIENT]}))
        await asyncio.sleep(0.3)  # a head start: the read is waiting before the send (not timed)
        await call(sender, "send_message", {"project_key": PROJECT, "sender_name": "Sender0", "to": [RECIPIENT],
                                            "subject": f"wake {i}", "body_md": body(i),
                                            "sender_token": tokens["Sender0"]})
        sent = time.perf_counter()
        page = json.loads((await read).content[0].text)
        wakes.append((time.perf_counter() - sent) * 1000)
        assert [m["subject"] for m in page["messages"]] == [f"wake {i}"], page
    return wakes


async def throughput(url: str, tokens: dict[str, str], total: int, clients: int, pid: int) -> dict:
    """Messages per second with ``clients`` connected sessions sending at once (connecting is not timed).

    Also the server's CPU time per message (with its helper and git runs), which
    tells more work per message apart from fewer free cores on a shared machine.
    """
    errors = 0
    per = max(1, total // clients)

    async def run(k: int, client: Client) -> None:
        nonlocal errors
        for i in range(per):
            try:
                await call(client, "send_message", {
                    "project_key": PROJECT, "sender_name": f"Sender{k}", "to": [RECIPIENT],
                    "subject": f"burst {k} {i}", "body_md": body(i), "sender_token": tokens[f"Sender{k}"]})
            except Exception:  # noqa: BLE001 - counted and reported
                errors += 1

    sessions = [Client(url, mode="legacy", timeout=120) for _ in range(clients)]
    for session in sessions:
        await session.__aenter__()
    try:
        await asyncio.gather(*(call(session, "health_check", {}) for session in sessions))
        cpu, began = cpu_seconds(pid), time.perf_counter()
        await asyncio.gather(*(run(k, session) for k, session in enumerate(sessions)))
        seconds, cpu = time.perf_counter() - began, cpu_seconds(pid) - cpu
    finally:
        for session in sessions:
            await session.__aexit__(None, None, None)
    return {"clients": clients, "messages": per * clients, "seconds": round(seconds, 3),
            "msg_per_s": round(per * clients / seconds, 1), "errors": errors,
            "server_cpu_ms_per_msg": round(cpu * 1000 / (per * clients), 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000", help="archive sizes in messages (ascending)")
    parser.add_argument("--samples", type=int, default=200, help="calls per latency figure")
    parser.add_argument("--burst", type=int, default=400, help="messages per throughput run")
    parser.add_argument("--clients", type=int, default=8, help="concurrent clients in the second throughput run")
    parser.add_argument("--per-day", type=int, default=100, help="messages a day in the generated history")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    results = []
    for size in sizes:
        with tempfile.TemporaryDirectory(prefix="gitmail-bench-mcp-") as home:
            tokens = setup(home, args.clients)
            fill_s = history(home, size, args.per_day)
            server, url = start_server(home)
            try:
                figures = asyncio.run(measure(url, tokens, args.samples, args.burst, args.clients, size, server.pid))
                figures["rss_mib"] = round(rss_mib(server.pid), 1)
                figures["fill_s"] = round(fill_s, 1)
            finally:
                server.terminate()
                server.wait(30)
            results.append(figures)
    summary = []
    print(f"{'size':>7} {'op':<20} {'p50 ms':>8} {'p95 ms':>8}")
    for fig in results:
        row = {"size": fig["size"], "rss_mib": fig["rss_mib"], "fill_s": fig["fill_s"],
               "throughput_1": fig["throughput_1"], "throughput_n": fig["throughput_n"]}
        for op in ("send", "fetch_inbox", "search", "ack", "wake"):
            values = fig[f"{op}_ms"]
            row[f"{op}_p50_ms"] = round(statistics.median(values), 2)
            row[f"{op}_p95_ms"] = round(pct(values, 0.95), 2)
            print(f"{fig['size']:>7} {op:<20} {row[f'{op}_p50_ms']:>8} {row[f'{op}_p95_ms']:>8}")
        for key in ("throughput_1", "throughput_n"):
            t = fig[key]
            print(f"{fig['size']:>7} {'send x' + str(t['clients']) + ' clients':<20} {t['msg_per_s']:>8} msg/s"
                  f"  ({t['messages']} in {t['seconds']} s, {t['errors']} errors,"
                  f" server CPU {t['server_cpu_ms_per_msg']} ms/msg)")
        print(f"{fig['size']:>7} {'server RSS':<20} {fig['rss_mib']:>8} MiB")
        summary.append(row)
    if len(summary) > 1:
        first, last = summary[0], summary[-1]
        print(f"send p50 ratio {last['size']}/{first['size']}: {last['send_p50_ms'] / first['send_p50_ms']:.2f}")
    print(json.dumps({"benchmark": "mcp", "results": summary}))


if __name__ == "__main__":
    main()
