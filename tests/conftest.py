"""Shared fixtures: every test gets its own store in a temporary folder, on a clock it moves by hand."""

from __future__ import annotations

import datetime as dt
import gc
import os
import queue
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import pytest

from gitmail import GitmailError, Store

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


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Slow tests first, each module's together: spread over pytest-xdist's workers, the long ones run
    beside the quick ones instead of starting last and ending the run alone."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


@pytest.fixture(autouse=True)
def _end_of_test():
    """Nothing a test started outlives it: its indexes are closed and its garbage is collected.

    An index left open keeps background threads that go on writing (and
    replacing open searchers) during the next test. Leaked files and pipes
    are reported, and fail the run, when they are finalized; objects in
    reference cycles are finalized by the cyclic collector at an arbitrary
    later moment. Both would blame whichever test runs next.
    """
    yield
    close_indexes()
    gc.collect()
    gc.freeze()  # what outlives the test is another scope's: the next test's collection scans only its own objects


@pytest.fixture(autouse=True, scope="module")
def _end_of_module():
    """What a module's fixtures leave behind is collected when they end, everything frozen since included.

    After each test, what survived it is frozen (``gc.freeze``), so the
    collection after a test costs what that test made, not the whole heap.
    Frozen objects are never collected: a module-scoped server, host or
    browser that is released in a reference cycle, with a file still open,
    would go unreported. This fixture ends after every other fixture of the
    module and collects the whole heap once.
    """
    yield
    close_indexes()
    gc.unfreeze()
    gc.collect()
    gc.freeze()


def close_indexes() -> None:
    """Close every store's indexer, so no background index work outlives the caller's folders."""
    from gitmail.index.indexer import _indexers  # every store's indexer, while its store lives

    for indexer in list(_indexers.values()):
        indexer.close()


@pytest.fixture
def ctx(store):
    """The domain context over ``store``: what every coordination and mail operation takes first."""
    from gitmail.coord.context import Context

    return Context(store)


def _serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A real ``gitmail serve`` on a free loopback port on a store of its own, stopped when the caller ends."""
    from .mcp_harness import ServerProcess

    proc = ServerProcess(str(tmp_path_factory.mktemp("home")), extra_args=("--tools", "all"),
                         env={"GITMAIL_GUARD_ROOTS": str(tmp_path_factory.getbasetemp())})
    yield proc
    proc.stop()


@pytest.fixture(scope="session")
def shared_server(tmp_path_factory):
    """The ``server`` of every module that sets ``SHARES_SERVER``: one per test process, started once.

    Such a module's tests each make a project of their own (a fresh key, or
    a key no other module uses) and read nothing across projects that
    another module's could change, so they need no server of their own.
    """
    yield from _serve(tmp_path_factory)


@pytest.fixture(scope="module")
def server(request, tmp_path_factory):
    """A real ``gitmail serve`` on a free loopback port, one per test module, on its own store.

    A module that sets ``SHARES_SERVER = True`` gets :func:`shared_server`
    instead. Its operator lets agents install the commit guard in
    repositories under the tests' temporary folder (``GITMAIL_GUARD_ROOTS``),
    where the tests that guard a repository over MCP make it. It lists every
    tool (``--tools all``); the drop-in tests use a server on the default
    profile.
    """
    if getattr(request.module, "SHARES_SERVER", False):
        yield request.getfixturevalue("shared_server")
        return
    yield from _serve(tmp_path_factory)


class SteppedTime:
    """A background worker's timer (``Debounced(timer=...)``) whose pauses end only when the test ends them.

    Each pause the worker asks for is handed to the test, which decides when
    it ends and how much time has passed by then.
    """

    def __init__(self) -> None:
        self.now = 0.0
        self._asked: queue.Queue[float] = queue.Queue()
        self._resume: queue.Queue[None] = queue.Queue()

    def monotonic(self) -> float:
        return self.now

    def pause(self, seconds: float, interrupt: threading.Event, /) -> None:
        self._asked.put(seconds)
        while not interrupt.is_set():  # a stopped worker's pause ends at once, as with the system's timer
            try:
                self._resume.get(timeout=0.01)
                return
            except queue.Empty:
                continue

    def next_pause(self) -> float:
        """Wait until the worker pauses; how long it asked to pause."""
        return self._asked.get(timeout=60)

    def end_pause(self, seconds: float) -> None:
        """End the worker's pause, ``seconds`` later than it began."""
        self.now += seconds
        self._resume.put(None)

    def paused(self) -> bool:
        """Whether the worker asked for a pause the test has not taken yet."""
        return not self._asked.empty()


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


def tip(store: Store, project: str) -> str | None:
    """The commit ``main`` of a project's archive points at (None before the first)."""
    return store.archive(project).tip()


@contextmanager
def fails_cleanly(store: Store, code: str, project: str) -> Iterator[pytest.ExceptionInfo[GitmailError]]:
    """Expect a GitmailError with ``code`` and a message, that leaves the project's tip where it was."""
    try:
        before = tip(store, project) if store.exists(project) else None
    except GitmailError:  # not even a valid project key
        before = None
    with pytest.raises(GitmailError) as info:
        yield info
    assert info.value.code == code, info.value.to_dict()
    assert info.value.message
    if before is not None:
        assert tip(store, project) == before


def refused(store: Store, project: str, code: str, call: Callable[..., Any], *args: Any, **kwargs: Any) -> GitmailError:
    """``call(*args, **kwargs)`` under :func:`fails_cleanly`; the error it raised."""
    with fails_cleanly(store, code, project) as info:
        call(*args, **kwargs)
    return info.value


def git_run(*args: str, cwd: str | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run the real git binary as a human would (``env`` adds to the environment); the caller inspects the outcome."""
    env = dict(os.environ, GIT_TERMINAL_PROMPT="0", GIT_AUTHOR_NAME="Human", GIT_AUTHOR_EMAIL="human@example.org",
               GIT_COMMITTER_NAME="Human", GIT_COMMITTER_EMAIL="human@example.org", **(env or {}))
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, env=env)


def git(*args: str, cwd: str | None = None, check: bool = True) -> str:
    """Run the real git binary and return its standard output."""
    proc = git_run(*args, cwd=cwd)
    if check and proc.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed ({proc.returncode}): {proc.stderr}")
    return proc.stdout


def sign_commits(clone: str, home: str) -> None:
    """Have git sign the commits made in ``clone`` with the node key of the store at ``home`` (its owner's key).

    A person working on the machine beside its archive signs hand edits
    with that machine's key (readable by its owner only), so every door
    takes them as the node's own writes.
    """
    key = os.path.join(home, "keys", "node_ed25519")
    for name, value in (("gpg.format", "ssh"), ("user.signingkey", key), ("commit.gpgsign", "true")):
        git("config", name, value, cwd=clone)
