"""The operator's git identity: who a person writing through gitmail is in ``git log``.

When the human overseer writes (through the web view or ``gitmail send
--as-overseer``), the commit carries the identity git itself would use for
that person on this machine: ``git var GIT_AUTHOR_IDENT`` honours
``GIT_AUTHOR_NAME`` / ``GIT_AUTHOR_EMAIL``, ``user.name`` / ``user.email`` in
the configuration, and git's own fallbacks. Without any, the commit names
the overseer on this machine's node.
"""

from __future__ import annotations

import functools
import os
import re
import subprocess

_IDENT = re.compile(r"^(?P<name>.*?) <(?P<email>[^<>]*)> \d+ [+-]\d{4}$")


@functools.lru_cache(maxsize=4)
def _ident(env_key: tuple[tuple[str, str], ...]) -> tuple[str, str] | None:
    try:
        done = subprocess.run(["git", "var", "GIT_AUTHOR_IDENT"], capture_output=True, text=True, check=False,
                              env=dict(env_key), timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    found = _IDENT.match(done.stdout.strip()) if done.returncode == 0 else None
    if found is None or not found["name"].strip():
        return None
    return found["name"].strip(), found["email"].strip()


def operator_identity(fallback_name: str, node: str) -> tuple[str, str]:
    """``(name, email)`` of the person at this machine, or ``fallback_name`` at ``node`` if git knows none."""
    keys = ("GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "HOME", "XDG_CONFIG_HOME", "GIT_CONFIG_GLOBAL", "PATH",
            "GIT_CONFIG_NOSYSTEM", "EMAIL")
    env = tuple(sorted((k, os.environ[k]) for k in keys if k in os.environ))
    return _ident(env) or (fallback_name, f"{fallback_name.lower()}@{node}")
