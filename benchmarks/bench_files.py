"""What files cost through a real server: uploads and downloads in a call and over HTTP, and a send carrying one.

Run: ``python benchmarks/bench_files.py`` (``--samples 9``, ``--http-mib 20``).

A real ``gitmail serve --tools all`` on a free loopback port with a
throw-away store; fastmcp's client in one MCP session for the tools, plain
HTTP (``http.client``) for the endpoint. Each sample uploads fresh random
bytes (a repeat would be the no-op duplicate), then downloads them and checks
their SHA-256. Measured, as p50 and p90 in milliseconds:

- ``upload_file`` and ``download_file`` of 1 MiB inside a call (base64);
- ``POST /files/<slug>`` and ``GET /files/<slug>/<id>`` of ``--http-mib``
  MiB, with the MiB/s of the p50;
- ``send_message`` with one ``attachment_ids`` entry, alternating with a send
  without, so both p50s come from the same moments of a shared machine.

Prints the load average before and after, a table, then one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import hashlib
import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from bench_mcp import free_port, wait_listening  # noqa: E402
from fastmcp import Client  # noqa: E402

PROJECT = "/bench/files"
MIB = 1024 * 1024


def percentiles(times: list[float]) -> dict[str, float]:
    ordered = sorted(times)
    return {"p50_ms": round(statistics.median(ordered) * 1000, 1),
            "p90_ms": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.9))] * 1000, 1)}


async def timed(pending: Awaitable[Any]) -> tuple[float, Any]:
    """Seconds ``pending`` (a coroutine not yet started) takes to run, and its value."""
    start = time.perf_counter()
    value = await pending
    return time.perf_counter() - start, value


async def call(client: Client, tool: str, /, **arguments: Any) -> Any:
    result = await client.call_tool(tool, arguments, raise_on_error=False)
    if result.is_error:
        raise SystemExit(f"{tool} failed: {result.content[0].text}")
    return result.structured_content


def http_request(port: int, method: str, path: str, body: bytes | None, token: str) -> tuple[int, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    connection.request(method, path, body, {"X-Agent-Token": token, "Content-Type": "application/octet-stream"})
    response = connection.getresponse()
    data = response.read()
    connection.close()
    return response.status, data


async def in_calls(client: Client, token: str, samples: int) -> dict[str, Any]:
    """1 MiB through upload_file and download_file, the download's hash checked."""
    ups, downs = [], []
    for _ in range(samples):
        data = os.urandom(MIB)
        spent, up = await timed(call(client, "upload_file", project_key=PROJECT, agent_name="Blue",
                                             agent_token=token, name="one.bin",
                                             content_base64=base64.b64encode(data).decode()))
        ups.append(spent)
        spent, down = await timed(call(client, "download_file", project_key=PROJECT, agent_name="Blue",
                                               agent_token=token, file_id=up["file"]["file_id"]))
        downs.append(spent)
        assert hashlib.sha256(base64.b64decode(down["content_base64"])).hexdigest() == up["file"]["sha256"]
    return {"upload_1mib": percentiles(ups), "download_1mib": percentiles(downs)}


def over_http(port: int, slug: str, token: str, samples: int, mib: int) -> dict[str, Any]:
    """``mib`` MiB through the endpoint, both ways, the download's hash checked."""
    posts, gets = [], []
    for _ in range(samples):
        data = os.urandom(mib * MIB)
        start = time.perf_counter()
        status, answer = http_request(port, "POST", f"/files/{slug}?agent_name=Blue&name=big.bin", data, token)
        posts.append(time.perf_counter() - start)
        if status != 201:
            raise SystemExit(f"POST answered {status}: {answer[:300]!r}")
        file_id = json.loads(answer)["file"]["file_id"]
        start = time.perf_counter()
        status, got = http_request(port, "GET", f"/files/{slug}/{file_id}?agent_name=Blue", None, token)
        gets.append(time.perf_counter() - start)
        assert status == 200 and hashlib.sha256(got).hexdigest() == file_id
    post, get = percentiles(posts), percentiles(gets)
    post["mib_per_s"] = round(mib / (post["p50_ms"] / 1000), 1)
    get["mib_per_s"] = round(mib / (get["p50_ms"] / 1000), 1)
    return {f"http_post_{mib}mib": post, f"http_get_{mib}mib": get}


async def sends(client: Client, token: str, samples: int) -> dict[str, Any]:
    """send_message with one attachment_ids entry, alternating with a plain send."""
    up = await call(client, "upload_file", project_key=PROJECT, agent_name="Blue", agent_token=token,
                    name="notes.txt", content_base64=base64.b64encode(b"notes\n" * 100).decode())
    plain, carrying = [], []
    for i in range(samples * 3):
        spent, _ = await timed(call(client, "send_message", project_key=PROJECT, sender_name="Blue",
                                            to=["Green"], subject=f"plain {i}", body_md="b", sender_token=token))
        plain.append(spent)
        spent, _ = await timed(call(client, "send_message", project_key=PROJECT, sender_name="Blue",
                                            to=["Green"], subject=f"file {i}", body_md="b", sender_token=token,
                                            attachment_ids=[up["file"]["file_id"]]))
        carrying.append(spent)
    out = {"send_plain": percentiles(plain), "send_with_file": percentiles(carrying)}
    out["send_with_file"]["ratio_to_plain"] = round(out["send_with_file"]["p50_ms"] / out["send_plain"]["p50_ms"], 2)
    return out


async def scenario(port: int, samples: int, mib: int) -> dict[str, Any]:
    async with Client(f"http://127.0.0.1:{port}/mcp", timeout=300) as client:
        made = await call(client, "ensure_project", human_key=PROJECT)
        tokens = {}
        for name in ("Blue", "Green"):
            tokens[name] = (await call(client, "register_agent", project_key=PROJECT, program="bench", model="m",
                                       name=name))["registration_token"]
            await call(client, "set_contact_policy", project_key=PROJECT, agent_name=name, policy="open",
                       agent_token=tokens[name])
        results = await in_calls(client, tokens["Blue"], samples)
        results.update(await asyncio.to_thread(over_http, port, made["slug"], tokens["Blue"], samples, mib))
        results.update(await sends(client, tokens["Blue"], samples))
        return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--samples", type=int, default=9)
    parser.add_argument("--http-mib", type=int, default=20)
    args = parser.parse_args()
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as home:
        port = free_port()
        env = dict(os.environ, GITMAIL_HOME=home, PYTHONPATH=ROOT)
        for setting in ("GITMAIL_TOKEN", "GITMAIL_TOOLS"):
            env.pop(setting, None)
        proc = subprocess.Popen([sys.executable, "-m", "gitmail", "serve", "--port", str(port), "--tools", "all"],
                                cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_listening(proc, port)
            results = asyncio.run(scenario(port, args.samples, args.http_mib))
        finally:
            proc.terminate()
            proc.wait(30)
    load_after = os.getloadavg()
    print(f"load average before {load_before[0]:.2f}, after {load_after[0]:.2f}; {args.samples} samples each")
    for name, figures in results.items():
        print(f"{name:22} " + "  ".join(f"{key} {value}" for key, value in figures.items()))
    print(json.dumps({"bench": "files", "samples": args.samples, "load": [round(load_before[0], 2),
                                                                           round(load_after[0], 2)], **results}))


if __name__ == "__main__":
    main()
