"""The human checkout: kept fresh, and never a way to delete newer records."""

from __future__ import annotations

import os

import pytest

from gitmail import Change, Store
from gitmail.model.ids import new_id
from gitmail.model.records import JournalEntry
from gitmail.storage.checkout import refresh

from .conftest import git, git_run


def _add(archive, path, text):
    archive.transact(lambda s: Change(f"add {path}", author="BlueLake").put(path, text.encode()))


def test_checkout_follows_main_by_itself(home):
    """Every commit reaches the checkout without anyone asking (how soon: benchmarks/bench_checkout.py)."""
    store = Store(home)  # with background workers
    archive = store.archive("/data/p", create=True)
    checkout = store.paths(store.resolve("/data/p")).checkout
    _add(archive, "notes/one.md", "one\n")
    store.flush()
    assert os.path.exists(os.path.join(checkout, "notes", "one.md"))
    _add(archive, "notes/two.md", "two\n")
    store.flush()
    assert git("grep", "-l", "two", cwd=checkout).strip() == "notes/two.md"
    assert git("rev-parse", "HEAD", cwd=checkout).strip() == archive.tip()


def test_stale_checkout_commit_cannot_remove_newer_records(store):
    archive = store.archive("/data/p", create=True)
    paths = store.paths(store.resolve("/data/p"))
    _add(archive, "notes/old.md", "old\n")
    assert refresh(paths.archive, paths.checkout) == "created"
    # main moves on after the checkout was last refreshed...
    _add(archive, "notes/newer.md", "newer\n")
    # ...and a human commits in the stale checkout, deleting a file on the way.
    entry = JournalEntry(id=new_id(), agent="BlueLake", created_ts="2026-12-01T10:00:00.000Z", body="by hand\n")
    human = os.path.join(paths.checkout, entry.path())
    os.makedirs(os.path.dirname(human))
    with open(human, "wb") as handle:
        handle.write(entry.to_bytes())
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
    assert snap.exists("notes/newer.md") and snap.exists(entry.path()) and snap.exists("notes/old.md")


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


@pytest.mark.slow  # a burst of commits for seconds
def test_during_a_long_burst_the_checkout_still_moves_and_is_current_after_it(home):
    store = Store(home)  # with background workers
    archive = store.archive("/data/burst", create=True)
    checkout = store.paths(store.resolve("/data/burst")).checkout
    seen_during: set[str] = set()
    i = 0
    # Commits keep coming, far closer together than the refresher's pause, until the checkout has
    # moved twice: it is refreshed during a burst, not only after it (a broken build hangs here).
    while len(seen_during) < 2:
        _add(archive, f"notes/{i:04d}.md", f"{i}\n")
        i += 1
        if os.path.isdir(os.path.join(checkout, ".git")):
            seen_during.add(git("rev-parse", "HEAD", cwd=checkout).strip())
    tip = archive.tip()
    store.flush()
    assert git("rev-parse", "HEAD", cwd=checkout).strip() == tip
    assert git("rev-parse", "origin/main", cwd=checkout).strip() == tip  # as if fetched
    assert git("status", "--porcelain", cwd=checkout).strip() == ""
    assert len(os.listdir(os.path.join(checkout, "notes"))) == i
