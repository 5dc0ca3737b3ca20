"""The debounced worker behind the index, checkout and pack maintenance jobs."""

from __future__ import annotations

import threading
import time

from gitmail.storage.background import Debounced


def _poke_for(worker: Debounced, seconds: float, every: float = 0.02) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        worker.poke()
        time.sleep(every)


def _runs(**options) -> tuple[list[float], Debounced]:
    runs: list[float] = []
    worker = Debounced("test-worker", lambda: runs.append(time.monotonic()), **options)
    return runs, worker


def test_pokes_while_a_run_waits_share_that_run():
    runs, worker = _runs(delay=0.2)
    for _ in range(20):
        worker.poke()
    assert worker.wait_idle(10)
    assert len(runs) == 1
    worker.stop()


def test_without_max_wait_a_steady_stream_of_pokes_runs_the_job_all_along():
    runs, worker = _runs(delay=0.05)
    _poke_for(worker, 1.2)
    assert worker.wait_idle(10)
    assert len(runs) >= 6
    worker.stop()


def test_with_max_wait_the_job_waits_for_a_pause_but_not_forever():
    runs, worker = _runs(delay=0.15, max_wait=0.5)
    began = time.monotonic()
    _poke_for(worker, 1.3)
    stopped = time.monotonic()
    assert worker.wait_idle(10)
    during = [t for t in runs if t < stopped]
    assert 1 <= len(during) <= 4  # capped by max_wait, not once per delay
    assert during[0] - began < 1.0
    assert runs[-1] >= stopped  # the pokes at the end were served after the pause
    worker.stop()


def test_stop_does_not_wait_out_max_wait():
    runs, worker = _runs(delay=0.1, max_wait=30)
    poker = threading.Thread(target=_poke_for, args=(worker, 0.5))
    poker.start()
    time.sleep(0.2)
    began = time.monotonic()
    worker.stop()
    assert time.monotonic() - began < 5
    poker.join()
