"""The server's memory upkeep: a full collection and a C heap trim, on a timer, that never ends the server."""

from __future__ import annotations

import gc
import weakref

from gitmail.server.upkeep import Upkeep


class _Node:
    def __init__(self) -> None:
        self.other: _Node | None = None


def _cycle() -> weakref.ref[_Node]:
    a, b = _Node(), _Node()
    a.other, b.other = b, a
    return weakref.ref(a)


def test_a_round_frees_reference_cycles_that_no_generation_limit_has_reached_yet():
    gc.disable()  # only the round may collect here
    try:
        probe = _cycle()
        assert probe() is not None  # garbage, but still held by its cycle
        done = Upkeep().run_once()
    finally:
        gc.enable()
    assert probe() is None
    assert done.collected >= 2
    assert done.cpu_ms >= 0


def test_the_timer_runs_rounds_until_stopped():
    upkeep = Upkeep(every=0).start()
    try:
        assert upkeep.ran.wait(30)
    finally:
        upkeep.stop()
    rounds = upkeep.rounds
    assert rounds >= 1 and upkeep.last is not None
    assert upkeep.rounds == rounds  # stopped: no round after
