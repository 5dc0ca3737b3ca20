"""Background consolidation keeps the object store compact and never blocks writers."""

from __future__ import annotations

import os
import subprocess
import threading
import time
import tracemalloc

import pytest

from gitmail import Archive, Change
from gitmail.storage.maintenance import PACK_LIMIT, consolidate, pack_count

from .conftest import git


def _fill(archive, count, prefix="f"):
    for i in range(count):
        archive.transact(lambda s, i=i: Change(f"add {i}").put(f"{prefix}/{i:05d}.md", f"record {i}\n".encode() * 20))


def test_consolidation_folds_packs_and_keeps_every_record(tmp_path):
    archive = Archive.init(str(tmp_path / "a.git"), maintain=False)
    _fill(archive, 40)
    assert pack_count(archive.git_dir) == 40
    assert consolidate(archive.git_dir, force=True)
    assert pack_count(archive.git_dir) <= 2
    assert len(archive.snapshot().listdir("f")) == 40
    git("--git-dir", archive.git_dir, "fsck", "--strict")


def test_background_maintenance_bounds_the_pack_count(tmp_path):
    archive = Archive.init(str(tmp_path / "a.git"))
    _fill(archive, 120)
    archive.maintainer.worker.wait_idle(60)
    assert pack_count(archive.git_dir) < PACK_LIMIT + 8
    assert len(archive.snapshot().listdir("f")) == 120


@pytest.mark.slow  # git pack-objects while writers write
def test_writers_proceed_while_consolidation_runs(tmp_path):
    archive = Archive.init(str(tmp_path / "a.git"), maintain=False)
    _fill(archive, 300)
    running = threading.Event()
    finished = threading.Event()

    def maintain():
        running.set()
        consolidate(archive.git_dir, force=True)
        finished.set()

    thread = threading.Thread(target=maintain)
    thread.start()
    running.wait()
    during = 0
    while not finished.is_set():
        archive.transact(lambda s, n=during: Change("during").put(f"during/{n}", b"x"))
        during += 1
    thread.join()
    assert during > 0, "no write completed while the repack ran"
    assert len(archive.snapshot().listdir("during")) == during
    git("--git-dir", archive.git_dir, "fsck", "--strict")


def test_only_one_process_maintains_at_a_time(tmp_path):
    import fcntl

    archive = Archive.init(str(tmp_path / "a.git"), maintain=False)
    _fill(archive, 3)
    fd = os.open(os.path.join(archive.git_dir, "gitmail-maintenance.lock"), os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        assert consolidate(archive.git_dir, force=True) is False
    finally:
        os.close(fd)
    assert consolidate(archive.git_dir, force=True) is True


def test_orphaned_temporary_packs_are_removed(tmp_path):
    archive = Archive.init(str(tmp_path / "a.git"), maintain=False)
    _fill(archive, 2)
    orphan = os.path.join(archive.git_dir, "objects", "pack", "tmp_gm_999_pack-dead.pack")
    recent = os.path.join(archive.git_dir, "objects", "pack", f"tmp_gm_{os.getpid()}_pack-live.pack")  # a live writer
    for path in (orphan, recent):
        with open(path, "wb") as handle:
            handle.write(b"partial")
    os.utime(orphan, (time.time() - 7200, time.time() - 7200))
    consolidate(archive.git_dir)
    assert not os.path.exists(orphan) and os.path.exists(recent)


def test_rollup_keeps_a_doubling_progression():
    from gitmail.storage.maintenance import _rollup

    def names(sizes):
        return _rollup([(size, f"p{i}") for i, size in enumerate(sizes)])

    assert names([1, 2, 4, 8]) == []  # already geometric: nothing to do
    assert names([1, 1, 1, 1, 1000]) == ["p0", "p1", "p2", "p3"]  # the big pack stays
    assert names([1, 1, 3, 100]) == ["p0", "p1", "p2"]
    assert names([5, 5, 6]) == ["p0", "p1", "p2"]  # the merged total outgrows the last one
    assert names([7]) == []


@pytest.mark.slow  # large packs built with git
def test_old_large_packs_are_left_alone(tmp_path):
    """Only new small packs are merged; git gc --auto never escalates to a full repack."""
    archive = Archive.init(str(tmp_path / "a.git"), maintain=False)
    for i in range(100):  # an established archive: one large pack of varied content
        archive.transact(lambda s, i=i: Change("old").put(f"old/{i}", os.urandom(8192).hex().encode()))
    consolidate(archive.git_dir, force=True)
    pack_dir = os.path.join(archive.git_dir, "objects", "pack")
    (big,) = [name for name in os.listdir(pack_dir) if name.endswith(".pack")]
    _fill(archive, 60, prefix="new")  # more packs than git's own gc.autoPackLimit (50)
    assert consolidate(archive.git_dir)
    assert os.path.exists(os.path.join(pack_dir, big)), "the large pack was rewritten"
    assert pack_count(archive.git_dir) == 2
    assert len(archive.snapshot().listdir("new")) == 60
    git("--git-dir", archive.git_dir, "fsck", "--strict")


@pytest.mark.slow  # many versions packed by git
def test_consolidation_stores_versions_of_a_folder_as_deltas(tmp_path):
    """Objects are handed to pack-objects with their paths, so each folder version deltas against the last."""
    archive = Archive.init(str(tmp_path / "a.git"), maintain=False)
    _fill(archive, 200)
    assert consolidate(archive.git_dir, force=True)
    pack = [name for name in os.listdir(os.path.join(archive.git_dir, "objects", "pack")) if name.endswith(".idx")]
    listing = git("--git-dir", archive.git_dir, "verify-pack", "-v",
                  os.path.join(archive.git_dir, "objects", "pack", pack[0]))
    # "<id> tree <size> <packed size> <offset> [<depth> <base>]": a delta names its depth and base.
    trees = [line.split() for line in listing.splitlines() if " tree " in line]
    assert len(trees) == 400  # per commit, a root (one entry, too small to bother) and a version of "f"
    assert sum(len(fields) > 5 for fields in trees) >= 190  # nearly every "f" is a delta of its neighbour
    with open(os.path.join(archive.git_dir, "gitmail-rollup-tip"), encoding="ascii") as handle:
        assert handle.read().strip() == archive.tip()  # the next run names only what came after
    git("--git-dir", archive.git_dir, "fsck", "--strict")


def _packs_of_blobs(git_dir, packs, per_pack):
    """``packs`` packs of ``per_pack`` distinct small blobs each, written by git fast-import (one pack per run)."""
    for p in range(packs):
        stream = b"".join(b"blob\ndata %d\n%s\n" % (len(body), body)
                          for body in (b"object %d of pack %d\n" % (i, p) for i in range(per_pack)))
        subprocess.run(["git", "--git-dir", git_dir, "fast-import", "--quiet"], input=stream + b"done\n",
                       check=True)


def test_a_merge_streams_the_object_ids_instead_of_holding_them(tmp_path):
    # A merge that reaches the largest pack handles every object of the archive (millions at a million
    # messages): its memory must not grow with them. 3 x 40k objects held as Python strings took tens of MB.
    archive = Archive.init(str(tmp_path / "a.git"), maintain=False)
    _packs_of_blobs(archive.git_dir, 3, 40_000)
    before = pack_count(archive.git_dir)
    assert before == 3
    tracemalloc.start()
    try:
        assert consolidate(archive.git_dir, force=True)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert pack_count(archive.git_dir) == 1
    counted = git("--git-dir", archive.git_dir, "count-objects", "-v")
    assert "in-pack: 120001" in counted or "in-pack: 120000" in counted  # the blobs (and the first commit's tree)
    assert peak < 8_000_000, f"the merge held {peak / 1e6:.1f} MB of Python objects"
