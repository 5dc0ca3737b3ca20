"""Shared fixtures: every test gets its own store in a temporary folder."""

from __future__ import annotations

import os
import subprocess

import pytest

from gitmail import Store


@pytest.fixture
def home(tmp_path, monkeypatch):
    path = tmp_path / "home"
    monkeypatch.setenv("GITMAIL_HOME", str(path))
    return str(path)


@pytest.fixture
def store(home):
    """A store with no background workers, so tests control every step."""
    return Store(home, background=False)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """A real ``gitmail serve`` on a free loopback port, one per test module, on its own store."""
    from .mcp_harness import ServerProcess

    proc = ServerProcess(str(tmp_path_factory.mktemp("home")))
    yield proc
    proc.stop()


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
