"""Machines of the multi-process sync tests, each a ``tests.sync_machine`` process with a store of its own.

:class:`MachineProcess` starts one and asks it things; :func:`sync_all`
releases several machines' syncs at the same moment, each having reached the
start line; :func:`converge` syncs them until they and the hub hold one tree
and a round moves nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from typing import Any

from .conftest import git_run
from .mcp_harness import ROOT, child_env
from .sync_machine import PROJECT


class MachineProcess:
    """A ``tests.sync_machine`` process and the requests it answers."""

    def __init__(self, root: str, node: str, env: dict[str, str] | None = None):
        self.node = node
        self.home = os.path.join(root, node)
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.sync_machine", self.home, node],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=ROOT,
                                     env=child_env(self.home, **(env or {})))

    def _send(self, request: dict[str, Any] | str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write((request if isinstance(request, str) else json.dumps(request)) + "\n")
        self.proc.stdin.flush()

    def _read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line, f"{self.node} ended"
        return json.loads(line)

    def ask(self, op: str, **fields: Any) -> Any:
        self._send({"op": op, **fields})
        answer = self._read()
        assert "ok" in answer, f"{self.node} {op}: {answer}"
        return answer["ok"]

    def mail(self, method: str, **kwargs: Any) -> Any:
        return self.ask("mail", method=method, kwargs={"project_key": PROJECT, **kwargs})

    def close(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            self.proc.wait(60)
        assert self.proc.stdout is not None
        self.proc.stdout.close()


def sync_all(machines: list[MachineProcess]) -> list[dict[str, Any]]:
    """Sync every machine at once: each reaches the start line, then all are released together."""
    for machine in machines:
        machine._send({"op": "sync"})
    for machine in machines:
        assert machine._read() == {"ready": True}, machine.node
    for machine in machines:
        machine._send("go")
    reports = []
    for machine in machines:
        answer = machine._read()
        assert "ok" in answer, f"{machine.node}: {answer}"
        reports.append(answer["ok"])
    return reports


def hub_results(reports: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [result for report in reports for result in report["results"] if result["remote"] == "hub"]


def converge(machines: list[MachineProcess], hub: str, note: Callable[[list[dict[str, Any]]], None] | None = None,
             limit: int = 8) -> None:
    """Simultaneous sync rounds until every machine and the hub hold one tree and a round moves nothing.

    ``hub`` is the hub's bare repository on disk; ``note`` sees every round's reports.
    """
    for _ in range(limit):
        reports = sync_all(machines)
        if note:
            note(reports)
        assert [r["error"] for r in hub_results(reports)] == [None, None, None], reports
        moved = sum(r["records_in"] + r["records_out"] for r in hub_results(reports))
        trees = {machine.ask("tip")["tree"] for machine in machines}
        hub_tree = git_run("rev-parse", "main^{tree}", cwd=hub).stdout.strip()
        if moved == 0 and trees == {hub_tree}:
            return
    raise AssertionError(f"no convergence after {limit} rounds")
