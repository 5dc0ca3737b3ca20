"""Shared fixtures: every test gets its own store in a temporary folder, on a clock it moves by hand."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import threading
import time
from collections.abc import Callable
from typing import TypeVar

import pytest

from gitmail import Store

T = TypeVar("T")


class ManualTime:
    """A wall-time source that stands still until the test moves it.

    Handed to ``Store(home, wall=...)``, it is the time of everything the
    store writes and checks: timestamps, clock values, IDs, commit times,
    expiry, retention, inactivity. Tests let hours pass with :meth:`advance`
    instead of sleeping.
    """

    def __init__(self, start: float | None = None):
        self._now = float(int(time.time())) if start is None else start  # whole seconds: exact arithmetic
        self._lock = threading.Lock()

    def __call__(self) -> float:
        return self._now

    def now(self) -> dt.datetime:
        return dt.datetime.fromtimestamp(self._now, dt.UTC)

    def advance(self, seconds: float = 0.0, **delta: float) -> None:
        """Move forward by ``seconds`` plus any ``timedelta`` keywords (``hours=2``)."""
        step = seconds + dt.timedelta(**delta).total_seconds()
        assert step >= 0, "time only moves forward"
        with self._lock:
            self._now += step


@pytest.fixture
def home(tmp_path, monkeypatch):
    path = tmp_path / "home"
    monkeypatch.setenv("GITMAIL_HOME", str(path))
    return str(path)


@pytest.fixture
def wall():
    """The wall time of the ``store`` fixture: the moment the test began, until the test advances it."""
    return ManualTime()


@pytest.fixture
def store(home, wall):
    """A store with no background workers and a hand-moved clock, so tests control every step."""
    return Store(home, background=False, wall=wall)


@pytest.fixture
def ctx(store):
    """The domain context over ``store``: what every coordination and mail operation takes first."""
    from gitmail.coord.context import Context

    return Context(store)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """A real ``gitmail serve`` on a free loopback port, one per test module, on its own store."""
    from .mcp_harness import ServerProcess

    proc = ServerProcess(str(tmp_path_factory.mktemp("home")))
    yield proc
    proc.stop()


def wait_until(condition: Callable[[], T], what: str, timeout: float = 60.0) -> T:
    """Poll ``condition`` until it gives a true value, and return that value.

    For an outcome in another thread or process that the test cannot join.
    ``timeout`` only keeps a broken build from hanging: it is no budget, and
    nothing is asserted about how soon the outcome came.
    """
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.02)
    return value


def git_run(*args: str, cwd: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run the real git binary as a human would; the caller inspects the outcome."""
    env = dict(os.environ, GIT_TERMINAL_PROMPT="0", GIT_AUTHOR_NAME="Human", GIT_AUTHOR_EMAIL="human@example.org",
               GIT_COMMITTER_NAME="Human", GIT_COMMITTER_EMAIL="human@example.org")
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, env=env)


def git(*args: str, cwd: str | None = None, check: bool = True) -> str:
    """Run the real git binary and return its standard output."""
    proc = git_run(*args, cwd=cwd)
    if check and proc.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed ({proc.returncode}): {proc.stderr}")
    return proc.stdout
