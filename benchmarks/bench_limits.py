"""Memory of a real server under oversized requests and reads: a huge session-less POST, a big inbox with bodies.

Run: ``python benchmarks/bench_limits.py`` (100 messages of 1 MiB, a 250 MB POST), or
``python benchmarks/bench_limits.py --messages 20 --post-mb 50`` for a quick look.
``--source DIR`` serves the gitmail of another checkout (for a before/after
comparison in the same run conditions).

A throw-away store gets ``--messages`` messages of 1 MiB to one agent. A
real ``gitmail serve`` then answers, in turn: a session-less JSON-RPC POST of
``--post-mb`` MB (streamed; the server may refuse it before the end), and a
session-less ``fetch_inbox(limit=100, include_bodies=true)``. For each the
table shows the HTTP status, the bytes answered and the server's peak
resident memory so far (``VmHWM``). Prints a table, then one JSON line.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from bench_mcp import free_port, rss_mib, wait_listening  # noqa: E402

from gitmail.mail.facade import Mail  # noqa: E402
from gitmail.storage.store import Store  # noqa: E402

PROJECT = "/bench/limits"
MIB = 1024 * 1024


def seed(home: str, count: int) -> str:
    """``count`` messages of 1 MiB to Reader; Reader's token."""
    mail = Mail(Store(home, background=False))
    mail.ensure_project(PROJECT)
    tokens = {}
    for name in ("Sender", "Reader"):
        tokens[name] = mail.register_agent(PROJECT, "bench", "bench", name=name)["registration_token"]
        mail.set_contact_policy(PROJECT, name, "open")
    filler = "x" * (MIB - 100)
    for n in range(count):
        mail.send_message(PROJECT, "Sender", ["Reader"], f"big {n}", f"message {n}\n{filler}")
    return tokens["Reader"]


def serve(home: str, source: str) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    env = dict(os.environ, GITMAIL_HOME=home, PYTHONPATH=source)
    env.pop("GITMAIL_TOKEN", None)
    proc = subprocess.Popen([sys.executable, "-m", "gitmail", "serve", "--port", str(port)], cwd=source, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_listening(proc, port)
    return proc, port


def peak_mib(pid: int) -> float:
    return rss_mib(pid, "VmHWM")


def big_post(port: int, megabytes: int) -> tuple[int, int]:
    """Stream a JSON-RPC ping whose one string is ``megabytes`` MB long; (status, bytes answered)."""
    size = megabytes * 1000 * 1000
    head, tail = b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"a":"', b'"}}'
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    connection.putrequest("POST", "/mcp", skip_host=True)
    for key, value in (("Host", f"127.0.0.1:{port}"), ("Content-Type", "application/json"),
                       ("Accept", "application/json, text/event-stream"),
                       ("Content-Length", str(len(head) + size + len(tail)))):
        connection.putheader(key, value)
    connection.endheaders()
    try:
        connection.send(head)
        chunk = b"x" * MIB
        for _ in range(size // MIB):
            connection.send(chunk)
        connection.send(b"x" * (size % MIB) + tail)
    except OSError:
        pass  # refused before the end: the answer is waiting
    response = connection.getresponse()
    answered = len(response.read())
    connection.close()
    return response.status, answered


def big_inbox(port: int, token: str) -> tuple[int, int]:
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "fetch_inbox", "arguments": {
        "project_key": PROJECT, "agent_name": "Reader", "limit": 100, "include_bodies": True, "agent_token": token}}}
    body = json.dumps(call).encode()
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    connection.request("POST", "/mcp", body, {"Content-Type": "application/json",
                                              "Accept": "application/json, text/event-stream"})
    response = connection.getresponse()
    answered = len(response.read())
    connection.close()
    return response.status, answered


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100)
    parser.add_argument("--post-mb", type=int, default=250)
    parser.add_argument("--source", default=ROOT, help="the checkout whose gitmail serves (default: this one)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-limits-") as home:
        token = seed(home, args.messages)
        proc, port = serve(home, os.path.abspath(args.source))
        try:
            rows = [("started", 0, 0, peak_mib(proc.pid))]
            status, answered = big_post(port, args.post_mb)
            rows.append((f"session-less POST of {args.post_mb} MB", status, answered, peak_mib(proc.pid)))
            status, answered = big_inbox(port, token)
            rows.append(("fetch_inbox(limit=100, include_bodies)", status, answered, peak_mib(proc.pid)))
        finally:
            proc.terminate()
            proc.wait(30)
    print(f"{'step':44} {'status':>6} {'answered':>12} {'peak RSS MiB':>13}")
    for step, status, answered, peak in rows:
        print(f"{step:44} {status:>6} {answered:>12} {peak:>13.0f}")
    print(json.dumps({"bench": "limits", "source": os.path.abspath(args.source), "messages": args.messages,
                      "post_mb": args.post_mb, "steps": [
                          {"step": s, "status": st, "answered_bytes": a, "peak_rss_mib": round(p, 1)}
                          for s, st, a, p in rows]}))


if __name__ == "__main__":
    main()
