"""The debounced worker behind the index, checkout and pack maintenance jobs.

The worker's pauses come from a timer the test steps by hand
(:class:`tests.conftest.SteppedTime`), so no test waits for time to pass.
"""

from __future__ import annotations

import threading

import pytest

from gitmail.storage.background import Debounced

from .conftest import SteppedTime, wait_until


def _worker(delay: float, max_wait: float | None = None, *,
            min_interval: float = 0.0) -> tuple[list[float], Debounced, SteppedTime]:
    runs: list[float] = []
    timer = SteppedTime()
    worker = Debounced("test-worker", lambda: runs.append(timer.now), delay=delay, max_wait=max_wait,
                       min_interval=min_interval, timer=timer)
    return runs, worker, timer


def test_pokes_while_a_run_waits_share_that_run():
    runs, worker, timer = _worker(delay=0.2)
    worker.poke()
    assert timer.next_pause() == 0.2
    for _ in range(19):
        worker.poke()
    timer.end_pause(0.2)
    assert worker.wait_idle(60)
    assert runs == [0.2]
    assert not timer.paused()
    worker.stop()


def test_without_max_wait_pokes_during_the_pause_do_not_postpone_the_run():
    runs, worker, timer = _worker(delay=0.05)
    for i in range(1, 4):
        worker.poke()
        assert timer.next_pause() == 0.05
        worker.poke()  # commits keep coming during every pause...
        timer.end_pause(0.05)
        assert worker.wait_idle(60)
        assert len(runs) == i  # ...and each pause still ends in a run
    assert runs == pytest.approx([0.05, 0.1, 0.15])
    worker.stop()


def test_with_max_wait_the_job_waits_for_a_pause_but_not_forever():
    runs, worker, timer = _worker(delay=0.15, max_wait=0.5)
    worker.poke()
    for _ in range(4):  # a poke in every pause: the job waits for a quiet one...
        assert timer.next_pause() == 0.15
        assert runs == []
        worker.poke()
        timer.end_pause(0.15)
    assert worker.wait_idle(60)
    assert runs == pytest.approx([0.6])  # ...until max_wait has passed since the first poke
    worker.poke()
    assert timer.next_pause() == 0.15
    timer.end_pause(0.15)  # a pause without pokes: the run follows at once
    assert worker.wait_idle(60)
    assert runs == pytest.approx([0.6, 0.75])
    worker.stop()


def test_with_min_interval_a_burst_spaces_its_runs_and_a_quiet_spell_is_served_after_delay():
    runs, worker, timer = _worker(delay=0.02, min_interval=0.1)
    worker.poke()
    assert timer.next_pause() == 0.02
    timer.end_pause(0.02)
    assert worker.wait_idle(60)
    assert runs == pytest.approx([0.02])  # the first run: no earlier run to space from
    worker.poke()  # the next commit comes as that run ends...
    assert timer.next_pause() == 0.02
    timer.end_pause(0.02)
    assert timer.next_pause() == pytest.approx(0.08)  # ...so its run waits out the rest of the interval
    for _ in range(5):
        worker.poke()  # the commits arriving meanwhile...
    timer.end_pause(0.08)
    assert worker.wait_idle(60)
    assert runs == pytest.approx([0.02, 0.12])  # ...are taken in by that one run
    timer.now += 5.0  # a quiet spell longer than the interval: the next poke is served after delay alone
    worker.poke()
    assert timer.next_pause() == 0.02
    timer.end_pause(0.02)
    assert worker.wait_idle(60)
    assert runs == pytest.approx([0.02, 0.12, 5.14])
    assert not timer.paused()
    worker.stop()


def test_stop_ends_a_pause_at_once_and_drops_the_run_it_was_for():
    runs, worker, timer = _worker(delay=0.1, max_wait=30)
    worker.poke()
    assert timer.next_pause() == 0.1
    worker.stop()  # returns although nobody ends the pause
    assert runs == [] and timer.now == 0


def test_stop_lets_a_run_in_progress_finish():
    started, release = threading.Event(), threading.Event()
    finished: list[bool] = []
    timer = SteppedTime()
    worker = Debounced("test-worker", lambda: (started.set(), release.wait(60), finished.append(True)),
                       delay=0.05, timer=timer)
    worker.poke()
    timer.end_pause(timer.next_pause())
    assert started.wait(60)
    stopper = threading.Thread(target=worker.stop)
    stopper.start()
    wait_until(worker._stopping.is_set, "stop() to be called")  # noqa: SLF001 - ordering the two threads
    assert stopper.is_alive() and finished == []  # stop waits for the run...
    release.set()
    stopper.join(60)
    assert not stopper.is_alive() and finished == [True]  # ...and returns once it is done


def test_a_poke_during_a_run_is_served_by_another_run_before_the_worker_is_idle():
    started, release = threading.Event(), threading.Event()
    runs: list[float] = []
    timer = SteppedTime()

    def job() -> None:
        runs.append(timer.now)
        started.set()
        release.wait(60)

    worker = Debounced("test-worker", job, delay=0.05, timer=timer)
    worker.poke()
    timer.end_pause(timer.next_pause())
    assert started.wait(60)
    worker.poke()  # a commit while the job runs: the job may have read the state before it
    release.set()
    assert not worker.wait_idle(0)  # not idle until a run after that poke has finished
    timer.end_pause(timer.next_pause())
    assert worker.wait_idle(60)
    assert runs == pytest.approx([0.05, 0.1])
    worker.stop()
