"""What an agent pays to be offered gitmail's tools: the size of ``tools/list`` under each tool profile.

Run: ``python benchmarks/bench_surface.py`` (profiles core, default and all), or
``python benchmarks/bench_surface.py --profiles core,hierarchy default`` for others.

For each profile a real ``gitmail serve --tools PROFILE`` on a throw-away
store answers one session-less JSON-RPC ``tools/list`` POST; the figure is
the bytes of that HTTP response body, what a client reads into its context
window before its first call (about four bytes a token). Beside it: the
number of tools, the budget the profile is held to (``tests/test_surface.py``
holds the same ones) and the largest tool. The sizes do not depend on the
machine's load. Prints a table, then one JSON line.
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

from bench_mcp import free_port, wait_listening  # noqa: E402

BUDGETS = {"core": 12_000, "default": 40_000, "all": 100_000}
"""Bytes each profile's tools/list may take (the same figures tests/test_surface.py holds)."""


def tools_list(home: str, profile: str) -> bytes:
    """The body of a session-less ``tools/list`` answered by ``gitmail serve --tools profile``."""
    port = free_port()
    env = dict(os.environ, GITMAIL_HOME=home, PYTHONPATH=ROOT)
    for setting in ("GITMAIL_TOKEN", "GITMAIL_TOOLS"):
        env.pop(setting, None)
    proc = subprocess.Popen([sys.executable, "-m", "gitmail", "serve", "--port", str(port), "--tools", profile],
                            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_listening(proc, port)
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        connection.request("POST", "/mcp", json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
                           {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"})
        response = connection.getresponse()
        body = response.read()
        connection.close()
        if response.status != 200:
            raise SystemExit(f"tools/list under {profile} answered {response.status}: {body[:200]!r}")
        return body
    finally:
        proc.terminate()
        proc.wait(30)


def measure(home: str, profile: str) -> dict[str, object]:
    body = tools_list(home, profile)
    tools = json.loads(body)["result"]["tools"]
    largest = max(tools, key=lambda tool: len(json.dumps(tool, separators=(",", ":"))))
    return {"profile": profile, "bytes": len(body), "tools": len(tools), "budget": BUDGETS.get(profile),
            "largest": largest["name"], "largest_bytes": len(json.dumps(largest, separators=(",", ":")))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profiles", nargs="+", default=list(BUDGETS),
                        help="profiles to measure (default: %(default)s)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-surface-") as home:
        rows = [measure(home, profile) for profile in args.profiles]
    print(f"{'profile':24} {'tools':>5} {'bytes':>8} {'~tokens':>8} {'budget':>8}  largest tool")
    for row in rows:
        budget = row["budget"] if row["budget"] is not None else "-"
        print(f"{row['profile']:24} {row['tools']:>5} {row['bytes']:>8} {int(row['bytes']) // 4:>8} {budget:>8}  "
              f"{row['largest']} ({row['largest_bytes']} bytes)")
    print(json.dumps({"bench": "surface", "profiles": rows}))


if __name__ == "__main__":
    main()
