"""Many OS processes writing into one archive, and writers killed mid-burst."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from gitmail import Archive, Change

from .conftest import git

pytestmark = pytest.mark.slow  # writer processes, thousands of durable commits

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _writer(path: str, name: str, count: int, *start_line: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "tests.writer_process", path, name, str(count), *start_line],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _message_ids(archive: Archive) -> list[str]:
    snap = archive.snapshot()
    return [p.rsplit("/", 1)[1][:-3] for p in snap.walk("messages")]


@pytest.mark.timeout(600)  # 2,000 durable commits: over a minute on a busy 2-core machine
def test_four_processes_times_500_writes(tmp_path):
    archive = Archive.init(str(tmp_path / "archive.git"))
    archive.transact(lambda s: Change("start").put("project.yaml", b"x: 1\n"))
    line = str(tmp_path / "start")
    procs = [_writer(archive.path, f"Writer{i}", 500, line, "4") for i in range(4)]
    acknowledged, retries = [], 0
    for proc in procs:
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err
        lines = out.splitlines()
        assert lines[0] == "ready 4", "every writer began only once all four were at the start line"
        retries += int(lines[-1].split()[1])
        acknowledged += lines[1:-1]
    ids = _message_ids(archive)
    assert len(acknowledged) == 2000
    assert sorted(ids) == sorted(acknowledged), "every write present exactly once"
    merges = git("--git-dir", archive.git_dir, "rev-list", "--merges", "--count", "main").strip()
    assert merges == "0", "history is linear"
    git("--git-dir", archive.git_dir, "fsck", "--strict")
    print(f"\n4 processes x 500 writes: {retries} compare-and-swap retries in total")


def test_kill_9_mid_burst_keeps_every_acknowledged_write(tmp_path):
    archive = Archive.init(str(tmp_path / "archive.git"))
    archive.transact(lambda s: Change("start").put("project.yaml", b"x: 1\n"))
    acknowledged: list[str] = []
    for round_, writes in enumerate((1, 7, 30)):  # killed after this many acknowledged writes each, mid-burst
        victims = [_writer(archive.path, f"Victim{round_}x{i}", 100_000) for i in range(2)]
        for proc in victims:
            for _ in range(writes):
                line = proc.stdout.readline()
                assert line.strip(), proc.stderr.read()
                acknowledged.append(line.strip())
        for proc in victims:  # both are writing on: each dies wherever it is in its next write
            os.kill(proc.pid, signal.SIGKILL)
        for proc in victims:
            out, _ = proc.communicate()
            acknowledged += [line for line in out.splitlines() if line and not line.startswith("retries")]
    assert acknowledged, "the writers got some writes in before being killed"
    # The archive opens and accepts writes after the crashes.
    reopened = Archive(archive.path)
    reopened.transact(lambda s: Change("after the crash").put("after", b"ok"))
    ids = set(_message_ids(reopened))
    missing = [mid for mid in acknowledged if mid not in ids]
    assert not missing, f"acknowledged writes lost: {missing[:5]}"
    git("--git-dir", archive.git_dir, "fsck", "--strict")
