"""The human checkout: kept fresh, and never a way to delete newer records."""

from __future__ import annotations

import os
import time

from gitmail import Change, Store
from gitmail.storage.checkout import refresh

from .conftest import git, git_run


def _add(archive, path, text):
    archive.transact(lambda s: Change(f"add {path}", author="BlueLake").put(path, text.encode()))


def test_checkout_follows_main_within_a_second(home):
    store = Store(home)  # with background workers
    archive = store.archive("/data/p", create=True)
    checkout = store.paths(store.resolve("/data/p")).checkout
    _add(archive, "notes/one.md", "one\n")
    deadline = time.time() + 1.5
    target = os.path.join(checkout, "notes", "one.md")
    while not os.path.exists(target) and time.time() < deadline:
        time.sleep(0.02)
    assert os.path.exists(target), "the checkout was not refreshed within a second"
    started = time.time()
    _add(archive, "notes/two.md", "two\n")
    while not os.path.exists(os.path.join(checkout, "notes", "two.md")) and time.time() - started < 5:
        time.sleep(0.02)
    assert time.time() - started < 1.5
    assert git("grep", "-l", "two", cwd=checkout).strip() == "notes/two.md"


def test_stale_checkout_commit_cannot_remove_newer_records(store):
    archive = store.archive("/data/p", create=True)
    paths = store.paths(store.resolve("/data/p"))
    _add(archive, "notes/old.md", "old\n")
    assert refresh(paths.archive, paths.checkout) == "created"
    # main moves on after the checkout was last refreshed...
    _add(archive, "notes/newer.md", "newer\n")
    # ...and a human commits in the stale checkout, deleting a file on the way.
    with open(os.path.join(paths.checkout, "notes", "human.md"), "w") as handle:
        handle.write("by hand\n")
    git("add", "-A", cwd=paths.checkout)
    git("commit", "-qm", "human note", cwd=paths.checkout)
    assert not os.path.exists(os.path.join(paths.checkout, "notes", "newer.md"))
    tip = archive.tip()
    # The archive's main is untouched by the commit, and a push is refused.
    assert archive.tip() == tip and archive.snapshot().exists("notes/newer.md")
    push = git_run("push", "origin", "HEAD:main", cwd=paths.checkout)
    assert push.returncode != 0 and "rejected" in push.stderr
    assert archive.tip() == tip
    forced = git_run("push", "--force", "origin", "HEAD:main", cwd=paths.checkout)
    assert forced.returncode != 0 and "non-fast-forward" in forced.stderr
    assert archive.tip() == tip and archive.snapshot().exists("notes/newer.md")
    # The refresher leaves the human's work alone...
    assert refresh(paths.archive, paths.checkout) == "held"
    # ...and the normal path (pull = merge, then push) keeps both sides.
    git("pull", "-q", "--no-rebase", "--no-edit", "origin", "main", cwd=paths.checkout)
    git("push", "-q", "origin", "HEAD:main", cwd=paths.checkout)
    snap = archive.snapshot()
    assert snap.exists("notes/newer.md") and snap.exists("notes/human.md") and snap.exists("notes/old.md")


def test_refresher_moves_on_around_uncommitted_edits_and_never_overwrites_one(store):
    archive = store.archive("/data/p", create=True)
    paths = store.paths(store.resolve("/data/p"))
    _add(archive, "notes/a.md", "a\n")
    refresh(paths.archive, paths.checkout)
    edited = os.path.join(paths.checkout, "notes", "a.md")
    with open(edited, "w") as handle:
        handle.write("being edited\n")
    # New records arrive: the checkout takes them in and keeps the edit.
    _add(archive, "notes/b.md", "b\n")
    assert refresh(paths.archive, paths.checkout) == "updated"
    assert os.path.exists(os.path.join(paths.checkout, "notes", "b.md"))
    with open(edited) as handle:
        assert handle.read() == "being edited\n"
    assert git("status", "--porcelain", "--untracked-files=no", cwd=paths.checkout).split() == ["M", "notes/a.md"]
    # The edited file itself changes on main: the checkout waits rather than overwrite the edit.
    _add(archive, "notes/a.md", "a, revised\n")
    head = git("rev-parse", "HEAD", cwd=paths.checkout)
    assert refresh(paths.archive, paths.checkout) == "held"
    assert git("rev-parse", "HEAD", cwd=paths.checkout) == head
    with open(edited) as handle:
        assert handle.read() == "being edited\n"
    git("checkout", "--", "notes/a.md", cwd=paths.checkout)
    assert refresh(paths.archive, paths.checkout) == "updated"
    with open(edited) as handle:
        assert handle.read() == "a, revised\n"
    assert refresh(paths.archive, paths.checkout) == "current"


def test_during_a_long_burst_the_checkout_still_moves_and_is_current_after_it(home):
    store = Store(home)  # with background workers
    archive = store.archive("/data/burst", create=True)
    checkout = store.paths(store.resolve("/data/burst")).checkout
    seen_during = set()
    end = time.time() + 3.5
    i = 0
    while time.time() < end:
        _add(archive, f"notes/{i:04d}.md", f"{i}\n")
        i += 1
        time.sleep(0.02)
        if os.path.isdir(os.path.join(checkout, ".git")):
            seen_during.add(git("rev-parse", "HEAD", cwd=checkout).strip())
    assert len(seen_during) >= 2  # refreshed while commits kept coming, not only after they stopped
    tip = archive.tip()
    deadline = time.time() + 3
    while git("rev-parse", "HEAD", cwd=checkout).strip() != tip and time.time() < deadline:
        time.sleep(0.05)
    assert git("rev-parse", "HEAD", cwd=checkout).strip() == tip
    assert git("rev-parse", "origin/main", cwd=checkout).strip() == tip  # as if fetched
    assert git("status", "--porcelain", cwd=checkout).strip() == ""
    assert len(os.listdir(os.path.join(checkout, "notes"))) == i
