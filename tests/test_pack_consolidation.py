"""Consolidation running while the engine writes packs: neither may trip the other."""

from __future__ import annotations

import os
import subprocess
import threading

from gitmail import Archive, Change
from gitmail.storage.maintenance import pack_count


def test_repack_never_sees_a_pack_being_written(tmp_path):
    archive = Archive.init(str(tmp_path / "archive.git"), durable=False)
    failures: list[str] = []
    runs = 0
    stop = threading.Event()

    def repack_loop() -> None:
        nonlocal runs
        while not stop.is_set():
            proc = subprocess.run(["git", "--git-dir", archive.git_dir, "repack", "-d", "-q", "--geometric=2"],
                                  capture_output=True, text=True)
            runs += 1
            if proc.returncode != 0:
                failures.append(proc.stderr)

    thread = threading.Thread(target=repack_loop)
    thread.start()
    written = 0
    try:
        # At least 150 commits, and on until git has repacked six times among them, however the machine's
        # load shares the time between the two (a cap keeps a broken build from writing for ever).
        while written < 150 or (runs < 6 and written < 20_000):
            archive.transact(lambda snap, i=written: Change(f"note {i}").put(f"notes/{i % 7}/{i}.txt", b"%d\n" % i))
            written += 1
    finally:
        stop.set()
        thread.join()
    assert runs >= 6, f"git repacked {runs} times while {written} commits were written"
    assert failures == []
    pack_dir = os.path.join(archive.git_dir, "objects", "pack")
    assert not [name for name in os.listdir(pack_dir) if name.startswith("tmp_")]
    assert pack_count(archive.git_dir) < written
    assert sum(1 for _ in archive.snapshot().walk("notes")) == written
    fsck = subprocess.run(["git", "--git-dir", archive.git_dir, "fsck", "--strict"], capture_output=True, text=True)
    assert fsck.returncode == 0, fsck.stderr
