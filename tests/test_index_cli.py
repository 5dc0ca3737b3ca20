"""``gitmail reindex`` from a shell: progress, counts, errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from gitmail.index import indexer_for

from .index_helpers import message, register, send_many

PROJECT = "/work/projects/cli"


def run(home: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, GITMAIL_HOME=home)
    return subprocess.run([sys.executable, "-m", "gitmail", *args], capture_output=True, text=True, env=env,
                          timeout=120)


def test_reindex_rebuilds_and_counts(store, home):
    archive = store.archive(PROJECT, create=True)
    register(archive, "Blue", "Green")
    send_many(archive, [message("Blue", ["Green"], f"note {i}", f"kakapo {i}") for i in range(30)])
    index = indexer_for(store).project(PROJECT)
    before = index.search("kakapo", limit=100)
    old_generation = index.search_index.live_dir()
    seqs = {row["id"]: row["seq"] for row in index.messages_after("Green", 0, 100)}

    proc = run(home, "reindex", PROJECT)
    assert proc.returncode == 0, proc.stderr
    assert "30 message(s) indexed" in proc.stdout
    assert "search" in proc.stderr and "30/30" in proc.stderr  # the progress bar goes to stderr

    proc = run(home, "reindex", "--json", "--quiet")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["messages"] == 30 and list(doc["projects"].values()) == [30]

    assert index.search_index.live_dir() != old_generation
    assert sorted(r["id"] for r in index.search("kakapo", limit=100)) == sorted(r["id"] for r in before)
    assert {row["id"]: row["seq"] for row in index.messages_after("Green", 0, 100)} == seqs  # sequences kept


def test_reindex_of_unknown_project_fails_cleanly(home):
    proc = run(home, "reindex", "/no/such/project")
    assert proc.returncode == 2
    assert "NOT_FOUND" in proc.stderr
