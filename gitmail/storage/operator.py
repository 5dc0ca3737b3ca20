"""The operator's git identity: who a person writing through gitmail is in ``git log``.

When the human overseer writes (through the web view or ``gitmail send
--as-overseer``), the commit carries the identity git itself would use for
that person on this machine: ``git var GIT_AUTHOR_IDENT`` honours
``GIT_AUTHOR_NAME`` / ``GIT_AUTHOR_EMAIL``, ``user.name`` / ``user.email`` in
the configuration, and git's own fallbacks. Without any, the commit names
the overseer on this machine's node.

A person may also act for the project through a door (the web view): inside
:func:`acting_as_operator`, every commit that door's request makes (a
receipt, a contact answer, a retirement, a forced release) names that
person as its author and says in its message through which door, whoever
the record is about. The engine applies it (:func:`by_operator`) to each
transaction queued in that context, in the queuing thread, so a write
committed by another thread's group commit is still attributed rightly.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import os
import re
import subprocess
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

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


_ACTING: contextvars.ContextVar[tuple[str, str, str] | None] = contextvars.ContextVar("gitmail_operator", default=None)
T = TypeVar("T", bound=Callable[[Any], Any])


@contextlib.contextmanager
def acting_as_operator(door: str, *, fallback_name: str, node: str) -> Iterator[tuple[str, str]]:
    """Within the block, commits name the operator (see the module docs); yields ``(name, email)``."""
    name, email = operator_identity(fallback_name, node)
    token = _ACTING.set((name, email, door))
    try:
        yield name, email
    finally:
        _ACTING.reset(token)


def by_operator(fn: T) -> T:
    """``fn`` (a transaction) with its change credited to the operator acting now, if one is; else ``fn``."""
    acting = _ACTING.get()
    if acting is None:
        return fn
    name, email, door = acting

    def credited(snapshot: Any) -> Any:
        change = fn(snapshot)
        if change.edits:
            change.author, change.author_email = name, email
            change.message = f"{change.message} (by {name} through {door})"
        return change

    return credited  # type: ignore[return-value]
