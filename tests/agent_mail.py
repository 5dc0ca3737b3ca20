"""A real mcp_agent_mail server (the early 0.1.0 release from PyPI), for testing imports of the stores it writes.

It needs fastmcp 2.x, which gitmail's environment cannot hold (FastMCP 4),
so it lives in a virtual environment of its own under
``build/agent-mail-venv`` (ignored by git, reused while it holds the pinned
versions), built by :mod:`tests.venvs` as the mcp 1.x client's is. ``python -m
tests.agent_mail`` builds it ahead of a test run (CI does, so a failure to
fetch it shows on its own line). Without the package index the build fails
with a message saying so.

:class:`AgentMailServer` runs that server on a free loopback port with its
database and archive folder in a test's temporary folder; its
:meth:`~AgentMailServer.drive` runs ``tests/agent_mail_driver.py`` in the
same environment, which talks to it over MCP with fastmcp 2's client as
agents do.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import tempfile

from . import venvs
from .mcp_harness import stop_process

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SPECS = ("mcp-agent-mail==0.1.0", "fastmcp==2.13.0.2")
VENV = os.path.join(ROOT, "build", "agent-mail-venv")
PYTHON = os.path.join(VENV, "bin", "python")
DRIVER = os.path.join(ROOT, "tests", "agent_mail_driver.py")
_PROBE = "import importlib.metadata as m; print(m.version('mcp-agent-mail'), m.version('fastmcp'))"


def installed() -> str | None:
    """``<mcp-agent-mail version> <fastmcp version>`` of the venv, or None if it is missing or holds others.

    Read from the installed packages' metadata: importing the server would
    cost seconds of CPU on every check.
    """
    if not os.path.exists(PYTHON):
        return None
    probe = subprocess.run([PYTHON, "-c", _PROBE], capture_output=True, text=True, env=_quiet_env())
    wanted = " ".join(spec.split("==")[1] for spec in SPECS)
    return probe.stdout.strip() if probe.returncode == 0 and probe.stdout.strip() == wanted else None


def ensure() -> str:
    """Build the venv if needed; the path of its python. RuntimeError, saying why, if it cannot be built."""
    return venvs.ensure(VENV, SPECS, lambda: installed() is not None, "a real mcp_agent_mail server")


def _quiet_env(**extra: str) -> dict[str, str]:
    """The environment of the old server's processes: no network at start, no LLM, no colours."""
    env = {key: value for key, value in os.environ.items() if not key.startswith(("PYTHON", "GITMAIL"))}
    env.update(LLM_ENABLED="false", LITELLM_LOCAL_MODEL_COST_MAP="True", LOG_RICH_ENABLED="false",
               TOOLS_LOG_ENABLED="false", NO_COLOR="1", **extra)
    return env


class AgentMailServer:
    """``mcp_agent_mail serve-http`` on a free port, its database and archive under ``folder``."""

    def __init__(self, folder: str, port: int):
        self.folder = folder
        self.database = os.path.join(folder, "storage.sqlite3")
        self.archive = os.path.join(folder, "archive")
        self.url = f"http://127.0.0.1:{port}/mcp/"
        self.log = tempfile.TemporaryFile(mode="w+")  # a pipe nobody reads could fill and stall the server
        env = _quiet_env(DATABASE_URL=f"sqlite+aiosqlite:///{self.database}", STORAGE_ROOT=self.archive,
                         HTTP_PORT=str(port))
        # Its settings also come from a .env in the working folder: run where there is none.
        self.proc = subprocess.Popen(
            [ensure(), "-c", "from mcp_agent_mail.cli import app; app()", "serve-http", "--host", "127.0.0.1",
             "--port", str(port)], cwd=folder, env=env, stdout=self.log, stderr=subprocess.STDOUT)

    def drive(self) -> dict[str, int]:
        """Run the scenario of ``tests/agent_mail_driver.py`` against the server; the ids it reports."""
        workdir = os.path.join(self.folder, "files")
        os.makedirs(workdir, exist_ok=True)
        done = subprocess.run([ensure(), DRIVER, self.url, workdir], capture_output=True, text=True,
                              env=_quiet_env(), cwd=self.folder, timeout=600)
        if done.returncode != 0:
            raise AssertionError(f"the driver failed ({done.returncode}): {done.stderr[-3000:]}\n{self.said()}")
        return json.loads(done.stdout.strip().splitlines()[-1])

    def said(self) -> str:
        self.log.seek(0)
        return self.log.read()[-3000:]

    def stop(self) -> None:
        """Stop the server the way an operator would (Ctrl-C), and wait for it."""
        stop_process(self.proc, signal.SIGINT, 60)
        self.log.close()


if __name__ == "__main__":
    ensure()
    print(f"mcp-agent-mail and fastmcp {installed()} ready in {VENV}")
