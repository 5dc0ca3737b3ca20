"""Virtual environments of their own, for what gitmail's environment cannot hold beside it.

The official ``mcp`` client 1.x (:mod:`tests.mcp1`) and a real mcp_agent_mail
server with the fastmcp 2.x it needs (:mod:`tests.agent_mail`) each live in a
venv under ``build/`` (ignored by git), built from the package index with the
ordinary pip, under a file lock so parallel test workers build it once, and
reused while it holds the versions asked for. Whether it does is read from
the venv's package metadata, which takes a fraction of a second, not by
importing the packages (the old mail server's import alone takes seconds of
CPU); a test process asks once and remembers the answer.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from collections.abc import Callable

_ready: set[str] = set()  # the venvs this process found usable: not asked about again


def ensure(venv: str, specs: tuple[str, ...], working: Callable[[], bool], what: str) -> str:
    """Build ``venv`` with ``specs`` unless ``working()`` says it is usable; the path of its python.

    ``working`` is asked once per process while the venv is usable, and once
    more after a build. RuntimeError, saying why, when it cannot be built
    (the package index out of reach, most often).
    """
    python = os.path.join(venv, "bin", "python")
    if venv in _ready:
        return python
    os.makedirs(os.path.dirname(venv), exist_ok=True)
    with open(venv + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not working():
            subprocess.run([sys.executable, "-m", "venv", "--clear", venv], check=True)
            done = subprocess.run([python, "-m", "pip", "install", "-q", "--disable-pip-version-check", *specs],
                                  capture_output=True, text=True)
            if done.returncode != 0:
                raise RuntimeError(f"could not install {' and '.join(specs)} into {venv} from the package index "
                                   f"(pip exited with {done.returncode}); the tests that need {what} fetch it from "
                                   f"PyPI once, to build it. pip said: {done.stderr.strip()[-2000:]}")
            if not working():
                raise RuntimeError(f"{venv} has no working {what} after installing {' and '.join(specs)}")
    _ready.add(venv)
    return python
