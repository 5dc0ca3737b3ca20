"""How soon a subscribed agent hears of new mail: send returned → ``notifications/resources/updated`` arrived.

Run: ``python benchmarks/bench_push.py`` (``--samples N`` per wire, default 30).

A real ``gitmail serve`` over Streamable HTTP and a real ``gitmail serve
--stdio``, each with the official client subscribed to an agent's inbox,
on each wire it offers: a handshake-era session (``resources/subscribe``)
and a 2026-07-28 ``subscriptions/listen`` stream. Each sample sends one
message to that agent and times from the moment ``send_message`` returned
to the moment the notice arrived (the send's own time is not counted: it
is what a send costs anyway). Beside each wire's p50: a bare call's p50
(``health_check``) on the same client in the same run, the ratio of the
two, and whether any notice was missed. The target is a p50 of 300 ms.

The ``http webhook`` row is a wake-up instead: the agent's card asks for a
webhook (``set_card``) to a receiver on loopback in this process; each
sample replies to a message the agent sent and times from the moment
``reply_message`` returned to the moment the receiver took the signed POST.
Its target is a p50 of 500 ms. Prints a table, then one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import queue
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Awaitable, Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from bench_mcp import free_port, wait_listening  # noqa: E402
from fastmcp import Client  # noqa: E402
from fastmcp.client.transports import StdioTransport  # noqa: E402
from mcp.client.subscriptions import listen  # noqa: E402

TARGET_MS = 300.0
WEBHOOK_TARGET_MS = 500.0


async def _call(client: Client, tool: str, **arguments: Any) -> Any:
    result = await client.call_tool(tool, arguments, raise_on_error=True)
    return result.structured_content


async def _setup(client: Client, project: str) -> str:
    await _call(client, "ensure_project", human_key=project)
    made = await _call(client, "register_agent", project_key=project, program="bench", model="m", name="Reader")
    token = made["registration_token"]
    await _call(client, "set_contact_policy", project_key=project, agent_name="Reader", policy="open",
                agent_token=token)
    return str(token)


async def _samples(client: Client, project: str, token: str, heard: Callable[[], Awaitable[object]],
                   samples: int) -> dict[str, Any]:
    """Send to the reader ``samples`` times; time each notice after the send returned, and bare calls beside."""
    async def send(n: int) -> None:
        await _call(client, "send_message", project_key=project, sender_name="Reader", to=["Reader"],
                    subject=f"sample {n}", body_md="x", sender_token=token)

    return await _timed(client, send, heard, samples, TARGET_MS)


async def _timed(client: Client, cause: Callable[[int], Awaitable[object]], heard: Callable[[], Awaitable[object]],
                 samples: int, target: float) -> dict[str, Any]:
    """Run ``cause`` ``samples`` times, timing ``heard`` after each returned, with a bare call's time beside."""
    waits, bare = [], []
    for n in range(samples):
        start = time.perf_counter()
        await _call(client, "health_check")
        bare.append(time.perf_counter() - start)
        await cause(n)
        sent = time.perf_counter()
        await asyncio.wait_for(heard(), 30)
        waits.append(time.perf_counter() - sent)
    p50, floor = statistics.median(waits) * 1000, statistics.median(bare) * 1000
    return {"p50_ms": round(p50, 1), "p95_ms": round(sorted(waits)[int(0.95 * (len(waits) - 1))] * 1000, 1),
            "bare_call_p50_ms": round(floor, 1), "ratio": round(p50 / floor, 2), "notices": len(waits),
            "missed": samples - len(waits), "target_ms": target, "target_ok": p50 <= target}


def _receiver() -> tuple[str, queue.Queue[str]]:
    """An HTTP receiver on loopback answering 204; its URL and the webhook-ids of the POSTs it took."""
    posts: queue.Queue[str] = queue.Queue()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - the name http.server calls
            self.rfile.read(int(self.headers.get("content-length", "0")))
            self.send_response(204)
            self.end_headers()
            posts.put(self.headers.get("webhook-id", ""))

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}/wake", posts


async def _webhook(make: Callable[..., Client], samples: int) -> dict[str, Any]:
    """Time reply_message returned -> the receiver took the signed POST waking the original's sender."""
    url, posts = _receiver()
    project = f"/bench/push/{uuid.uuid4().hex[:8]}"
    async with make(mode="legacy") as client:
        token = await _setup(client, project)
        made = await _call(client, "register_agent", project_key=project, program="bench", model="m", name="Writer")
        writer = made["registration_token"]
        await _call(client, "set_contact_policy", project_key=project, agent_name="Writer", policy="open",
                    agent_token=writer)
        await _call(client, "set_card", project_key=project, agent_name="Reader", wake_channel="webhook",
                    webhook_url=url, agent_token=token)

        async def reply(n: int) -> None:
            sent = await _call(client, "send_message", project_key=project, sender_name="Reader", to=["Writer"],
                               subject=f"question {n}", body_md="x", sender_token=token)
            await _call(client, "reply_message", project_key=project, message_id=sent["deliveries"][0]["payload"]["id"],
                        sender_name="Writer", body_md="y", sender_token=writer)

        return await _timed(client, reply, lambda: asyncio.to_thread(posts.get), samples, WEBHOOK_TARGET_MS)


async def _legacy(make: Callable[..., Client], samples: int) -> dict[str, Any]:
    arrived: asyncio.Queue[str] = asyncio.Queue()

    async def on_message(message: Any) -> None:
        if getattr(message, "method", "") == "notifications/resources/updated":
            arrived.put_nowait(str(message.params.uri))

    project = f"/bench/push/{uuid.uuid4().hex[:8]}"
    async with make(mode="legacy", message_handler=on_message) as client:
        token = await _setup(client, project)
        await client.session.subscribe_resource(f"resource://inbox/Reader?project={project}")
        return await _samples(client, project, token, arrived.get, samples)


async def _listen(make: Callable[..., Client], samples: int) -> dict[str, Any]:
    project = f"/bench/push/{uuid.uuid4().hex[:8]}"
    async with make(mode="auto") as client:
        token = await _setup(client, project)
        uri = f"resource://inbox/Reader?project={project}&agent_token={token}"
        async with listen(client.session, resource_subscriptions=[uri]) as stream:
            events = aiter(stream)
            return await _samples(client, project, token, lambda: anext(events), samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=30, help="sends timed per wire")
    args = parser.parse_args()
    import subprocess
    import warnings

    warnings.simplefilter("ignore")  # the handshake era's resources/subscribe is deprecated in the 2.x SDK
    home = tempfile.mkdtemp(prefix="bench-push-")
    env = dict(os.environ, GITMAIL_HOME=home, PYTHONPATH=ROOT)
    env.pop("GITMAIL_TOKEN", None)
    port = free_port()
    load_before = os.getloadavg()
    proc = subprocess.Popen([sys.executable, "-m", "gitmail", "serve", "--port", str(port),
                             "--tools", "default,hierarchy"], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_listening(proc, port)
        url = f"http://127.0.0.1:{port}/mcp"

        def http(**options: Any) -> Client:
            return Client(url, timeout=60, **options)

        def stdio(**options: Any) -> Client:
            return Client(StdioTransport(command=sys.executable, args=["-m", "gitmail", "serve", "--stdio"],
                                         env=env, cwd=ROOT), timeout=60, **options)

        results = {
            "http session": asyncio.run(_legacy(http, args.samples)),
            "http listen": asyncio.run(_listen(http, args.samples)),
            "stdio session": asyncio.run(_legacy(stdio, args.samples)),
            "stdio listen": asyncio.run(_listen(stdio, args.samples)),
            "http webhook": asyncio.run(_webhook(http, args.samples)),
        }
    finally:
        proc.terminate()
        proc.wait(30)
    load_after = os.getloadavg()
    print(f"load average {[round(x, 2) for x in load_before]} -> {[round(x, 2) for x in load_after]}")
    print(f"{'wire':16} {'p50 ms':>8} {'p95 ms':>8} {'bare p50':>9} {'ratio':>6} {'missed':>7}  "
          "target")
    for wire, row in results.items():
        print(f"{wire:16} {row['p50_ms']:8} {row['p95_ms']:8} {row['bare_call_p50_ms']:9} {row['ratio']:6} "
              f"{row['missed']:7}  {row['target_ms']:.0f} ms {'ok' if row['target_ok'] else 'MISSED'}")
    print(json.dumps({"benchmark": "push", "samples": args.samples, "results": results,
                      "load_before": [round(x, 2) for x in load_before],
                      "load_after": [round(x, 2) for x in load_after]}))


if __name__ == "__main__":
    main()
