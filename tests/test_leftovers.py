"""Leftovers of killed processes are cleared at the next start (or push), and only those.

A writer killed with ``kill -9`` mid-write is a real child process killed for
real. A stale ``packed-refs.lock`` and a killed push's quarantine folder are
made the way git leaves them (an empty lock file, a folder of objects), aged
by setting their modification time rather than by waiting.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from gitmail import Archive, Change
from gitmail.storage import leftovers
from gitmail.sync.hookinstall import install_hub

from .conftest import git, git_run, wait_until
from .mcp_harness import ROOT
from .sync_helpers import Machine

HOUR = 3600


def age(path: str, seconds: float) -> None:
    past = time.time() - seconds
    os.utime(path, (past, past))


def test_a_pack_of_a_killed_writer_is_removed_when_the_archive_is_next_opened(tmp_path):
    path = str(tmp_path / "archive.git")
    Archive.init(path, durable=False, maintain=False).transact(lambda snap: Change("one").put("a.txt", b"a\n"))
    pack_dir = os.path.join(path, "objects", "pack")
    writer = subprocess.Popen([sys.executable, "-c", (
        "import os, sys; from gitmail import Archive, Change; a = Archive(sys.argv[1], maintain=False); "
        "big = os.urandom(64 << 20); a.transact(lambda snap: Change('big').put('big.bin', big))"), path],
        env=dict(os.environ, PYTHONPATH=ROOT))
    try:
        wait_until(lambda: [n for n in os.listdir(pack_dir) if n.startswith(f"tmp_gm_{writer.pid}_")],
                   "the writer to start its pack", timeout=120)
        writer.send_signal(signal.SIGKILL)
    finally:
        writer.wait()
    assert writer.returncode == -signal.SIGKILL
    left = leftovers.find(path)
    assert [item.kind for item in left] == ["pack a killed gitmail writer left"]
    archive = Archive(path, durable=False)  # what a server or the CLI does when it starts
    assert not [n for n in os.listdir(pack_dir) if n.startswith("tmp_gm_")]
    assert leftovers.find(path) == []
    assert archive.snapshot().read("a.txt") == b"a\n" and not archive.snapshot().exists("big.bin")


def test_a_live_writers_pack_and_fresh_locks_are_left_alone(tmp_path):
    path = str(tmp_path / "archive.git")
    archive = Archive.init(path, durable=False, maintain=False)
    archive.transact(lambda snap: Change("one").put("a.txt", b"a\n"))
    mine = os.path.join(path, "objects", "pack", f"tmp_gm_{os.getpid()}_pack-x_pack")
    lock = os.path.join(path, "packed-refs.lock")
    for name in (mine, lock):
        open(name, "wb").close()
    assert leftovers.find(path) == []
    age(mine, HOUR + 1)  # a live writer never takes an hour: after one, its file is a leftover too
    age(lock, leftovers.LOCK_AGE + 1)
    assert sorted(item.path for item in leftovers.clear(path)) == ["objects/pack/" + os.path.basename(mine),
                                                                    "packed-refs.lock"]


def test_a_stale_packed_refs_lock_no_longer_stops_git(tmp_path):
    path = str(tmp_path / "archive.git")
    Archive.init(path, durable=False, maintain=False).transact(lambda snap: Change("one").put("a.txt", b"a\n"))
    lock = os.path.join(path, "packed-refs.lock")
    open(lock, "wb").close()  # what `git pack-refs` killed halfway leaves
    age(lock, 5 * 60)
    assert git_run("--git-dir", path, "pack-refs", "--all").returncode != 0
    Archive(path, durable=False)
    assert not os.path.exists(lock)
    assert git_run("--git-dir", path, "pack-refs", "--all").returncode == 0


def test_a_killed_pushs_quarantine_is_removed_at_the_hubs_next_push(tmp_path):
    hub = str(tmp_path / "hub.git")
    git("init", "-q", "--bare", "--initial-branch=main", hub)
    install_hub(hub)
    stale = os.path.join(hub, "objects", "tmp_objdir-incoming-Ab12Cd")
    os.makedirs(os.path.join(stale, "pack"))
    with open(os.path.join(stale, "pack", "tmp_pack_killed"), "wb") as handle:
        handle.write(b"PACK half written")
    age(stale, 2 * HOUR)
    machine = Machine(str(tmp_path / "m"), "node-a")  # the first machine's signed history fills the hub
    machine.create_project()
    pushed = git_run("--git-dir", machine.archive.git_dir, "push", "-q", hub, "main:main")
    assert pushed.returncode == 0, pushed.stderr
    assert not os.path.exists(stale)
    assert "quarantine of a push that was killed" in pushed.stderr
    assert not [name for name in os.listdir(os.path.join(hub, "objects")) if name.startswith("tmp_objdir")]
