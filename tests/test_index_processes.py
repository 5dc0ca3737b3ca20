"""Several processes keeping one project's derived state: one writer, nothing lost."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from gitmail.index import indexer_for

from .conftest import wait_until
from .index_helpers import message, register, send

pytestmark = pytest.mark.slow  # three indexing processes at once

PROJECT = "/work/projects/processes"

WORKER = r"""
import os, sys, time
from gitmail import Store
from gitmail.index import indexer_for

home, project, stop, mode, progress = sys.argv[1:6]
index = indexer_for(Store(home, background=False)).project(project)
rounds = 0
while not os.path.exists(stop):
    if mode == "reindex" and rounds == 3:
        index.reindex()
    index.catch_up()
    index.search("plan OR note", limit=50)
    index.messages_after("Green", 0, 1000)
    rounds += 1
    with open(progress, "w") as handle:
        handle.write(str(rounds))
    time.sleep(0.01)  # pacing: three workers share two cores with the test
print(rounds)
"""


def _rounds(progress: str) -> int:
    try:
        with open(progress) as handle:
            return int(handle.read() or 0)
    except FileNotFoundError:
        return 0


def test_processes_share_derived_state_without_losing_anything(store, home, tmp_path):
    archive = store.archive(PROJECT, create=True)
    register(archive, "Blue", "Green")
    stop = str(tmp_path / "stop")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    progress = [str(tmp_path / f"rounds-{n}") for n in range(3)]
    workers = [subprocess.Popen([sys.executable, "-c", WORKER, home, PROJECT, stop, mode, counter], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
               for mode, counter in zip(("plain", "plain", "reindex"), progress, strict=True)]
    sent = []
    try:
        wait_until(lambda: all(_rounds(counter) >= 1 for counter in progress), "every worker to be running")
        for i in range(25):
            msg = message("Blue", ["Green"], f"Note {i}", f"plan number {i}")
            send(archive, msg)
            sent.append(msg.id)
            if i == 12:  # halfway: the reindexing worker rebuilds while the others catch up and the writes go on
                wait_until(lambda: _rounds(progress[2]) > 3, "the reindex")
        # Every worker has done five rounds (the reindexing one rebuilt in its fourth) before it stops.
        wait_until(lambda: all(_rounds(counter) > 4 for counter in progress), "five rounds of each worker")
    finally:
        open(stop, "w").close()
        outcomes = [worker.communicate(timeout=120) for worker in workers]
    for worker, (out, err) in zip(workers, outcomes, strict=True):
        assert worker.returncode == 0, err
        assert int(out.strip()) > 4
    index = indexer_for(store).project(PROJECT)
    index.catch_up()
    assert {r["id"] for r in index.search("plan", limit=100)} == set(sent)
    rows = index.messages_after("Green", 0, 1000)
    assert [r["id"] for r in rows] == sent  # every message once, in the order they arrived
    seqs = [r["seq"] for r in rows]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    assert not index.meta.has_pending()
