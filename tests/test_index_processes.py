"""Several processes keeping one project's derived state: one writer, nothing lost."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from gitmail.index import indexer_for

from .index_helpers import message, register, send

PROJECT = "/work/projects/processes"

WORKER = r"""
import os, sys, time
from gitmail import Store
from gitmail.index import indexer_for
home, project, stop, mode, ready = sys.argv[1:6]
index = indexer_for(Store(home, background=False)).project(project)
rounds = 0
while not os.path.exists(stop):
    if rounds == 1:
        open(ready, "w").close()
    if mode == "reindex" and rounds == 3:
        index.reindex()
    index.catch_up()
    index.search("plan OR note", limit=50)
    index.messages_after("Green", 0, 1000)
    rounds += 1
    time.sleep(0.01)
print(rounds)
"""


def test_processes_share_derived_state_without_losing_anything(store, home, tmp_path):
    archive = store.archive(PROJECT, create=True)
    register(archive, "Blue", "Green")
    stop = str(tmp_path / "stop")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    ready = [str(tmp_path / f"ready-{n}") for n in range(3)]
    workers = [subprocess.Popen([sys.executable, "-c", WORKER, home, PROJECT, stop, mode, flag], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
               for mode, flag in zip(("plain", "plain", "reindex"), ready, strict=True)]
    sent = []
    try:
        deadline = time.monotonic() + 60
        while not all(os.path.exists(flag) for flag in ready) and time.monotonic() < deadline:
            time.sleep(0.05)
        for i in range(25):
            msg = message("Blue", ["Green"], f"Note {i}", f"plan number {i}")
            send(archive, msg)
            sent.append(msg.id)
            time.sleep(0.03)
    finally:
        open(stop, "w").close()
        outcomes = [worker.communicate(timeout=120) for worker in workers]
    for worker, (out, err) in zip(workers, outcomes, strict=True):
        assert worker.returncode == 0, err
        assert int(out.strip()) > 4  # the reindexing worker rebuilt in round 3, while others wrote
    index = indexer_for(store).project(PROJECT)
    index.catch_up()
    assert {r["id"] for r in index.search("plan", limit=100)} == set(sent)
    rows = index.messages_after("Green", 0, 1000)
    assert [r["id"] for r in rows] == sent  # every message once, in the order they arrived
    seqs = [r["seq"] for r in rows]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    assert not index.meta.has_pending()
