"""A virtual environment with the official ``mcp`` client 1.x, for testing against the older major release.

gitmail's own environment holds mcp 2.x (FastMCP 4 needs it), so the 1.x
client lives in a venv of its own under ``build/mcp1-venv`` (ignored by git,
reused while its ``mcp`` matches :data:`SPEC`), built by :mod:`tests.venvs`.
``python -m tests.mcp1`` builds it ahead of a test run (CI does, so a
failure to fetch it shows on its own line).
"""

from __future__ import annotations

import os
import subprocess

from . import venvs

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SPEC = "mcp>=1.20,<2"
VENV = os.path.join(ROOT, "build", "mcp1-venv")
PYTHON = os.path.join(VENV, "bin", "python")
_PROBE = "import importlib.metadata as m; v = m.version('mcp'); assert v.startswith('1.'), v; print(v)"


def installed_version() -> str | None:
    """The mcp 1.x version the venv holds (by its package metadata), or None if it is missing or holds another."""
    if not os.path.exists(PYTHON):
        return None
    probe = subprocess.run([PYTHON, "-c", _PROBE], capture_output=True, text=True)
    return probe.stdout.strip() if probe.returncode == 0 else None


def ensure() -> str:
    """Build the venv if needed; the path of its python."""
    return venvs.ensure(VENV, (SPEC,), lambda: installed_version() is not None, "the mcp 1.x client")


if __name__ == "__main__":
    ensure()
    print(f"mcp {installed_version()} client ready in {VENV}")
