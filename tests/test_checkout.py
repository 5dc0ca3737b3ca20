"""The human checkout: kept fresh, and never a way to delete newer records."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from gitmail import Change, Store
from gitmail.model.ids import new_id
from gitmail.model.records import JournalEntry, node_path
from gitmail.storage.checkout import refresh

from .conftest import git, git_run, sign_commits


def _add(archive, path, text):
    archive.transact(lambda s: Change(f"add {path}", author="BlueLake").put(path, text.encode()))


@pytest.fixture
def checked_out(store):
    """A project with one note, ``notes/a.md``, and its checkout made: (archive, paths)."""
    archive = store.archive("/data/p", create=True)
    paths = store.paths(store.resolve("/data/p"))
    _add(archive, "notes/a.md", "a\n")
    refresh(paths.archive, paths.checkout)
    return archive, paths


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
    sign_commits(paths.checkout, store.home)
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


def test_refresher_moves_on_around_uncommitted_edits_and_never_overwrites_one(checked_out):
    archive, paths = checked_out
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


def _tree_of(checkout: str) -> dict[str, str]:
    """Every file of the checkout's working tree (outside .git) with its text."""
    found = {}
    for folder, dirs, files in os.walk(checkout):
        dirs[:] = [d for d in dirs if d != ".git"]
        for name in files:
            full = os.path.join(folder, name)
            with open(full, encoding="utf-8") as handle:
                found[os.path.relpath(full, checkout)] = handle.read()
    return found


def test_a_refresh_applies_the_change_and_leaves_index_and_tree_exactly_at_main(store):
    archive = store.archive("/data/p", create=True)
    paths = store.paths(store.resolve("/data/p"))
    _add(archive, "notes/a/keep.md", "keep\n")
    _add(archive, "notes/b/gone.md", "gone\n")
    _add(archive, "notes/c", "a file that becomes a folder\n")
    assert refresh(paths.archive, paths.checkout) == "created"
    assert git("config", "core.splitIndex", cwd=paths.checkout).strip() == "true"
    kept = os.stat(os.path.join(paths.checkout, "notes", "a", "keep.md"))

    def change(snap):
        return (Change("several", author="BlueLake").put("notes/a/new.md", b"new\n")
                .put("notes/a/keep.md", b"keep\n").delete("notes/b/gone.md").delete("notes/c")
                .put("notes/c/inside.md", b"inside\n"))

    archive.transact(change)
    assert refresh(paths.archive, paths.checkout) == "updated"
    own = node_path(store.node)  # the store's key, published with its first commit
    assert _tree_of(paths.checkout) == {"notes/a/keep.md": "keep\n", "notes/a/new.md": "new\n",
                                        "notes/c/inside.md": "inside\n", own: archive.snapshot().read(own).decode()}
    assert not os.path.exists(os.path.join(paths.checkout, "notes", "b"))  # an emptied folder goes, as with git
    again = os.stat(os.path.join(paths.checkout, "notes", "a", "keep.md"))
    assert (again.st_ino, again.st_mtime_ns) == (kept.st_ino, kept.st_mtime_ns)  # an unchanged file is not rewritten
    assert git("rev-parse", "HEAD", cwd=paths.checkout).strip() == archive.tip()
    assert git("status", "--porcelain", "--untracked-files=all", cwd=paths.checkout) == ""
    assert git("diff", "--cached", "--name-only", cwd=paths.checkout) == ""  # the index is main's tree
    assert refresh(paths.archive, paths.checkout) == "current"


def test_new_records_reach_the_index_without_git_reading_all_of_it(checked_out):
    archive, paths = checked_out
    git_dir = os.path.join(paths.checkout, ".git")

    def shared() -> dict[str, int]:
        return {name: os.stat(os.path.join(git_dir, name)).st_mtime_ns for name in os.listdir(git_dir)
                if name.startswith("sharedindex.")}

    before = shared()
    assert before  # the checkout's index is split
    _add(archive, "notes/b.md", "b\n")
    _add(archive, "notes/a.md", "a, revised\n")
    assert refresh(paths.archive, paths.checkout) == "updated"
    assert shared() == before  # only the small part of the index was written
    assert git_run("diff-files", "--quiet", cwd=paths.checkout).returncode == 0  # stat data as git records it
    assert git("status", "--porcelain", "--untracked-files=all", cwd=paths.checkout) == ""
    assert git("diff", "--cached", "--name-only", cwd=paths.checkout) == ""


def test_a_file_holding_the_new_version_already_does_not_hold_the_refresh_up(checked_out):
    """A refresh cut short after writing files resumes: what it wrote is not mistaken for a human's edit."""
    archive, paths = checked_out
    _add(archive, "notes/a.md", "a, revised\n")
    with open(os.path.join(paths.checkout, "notes", "a.md"), "w") as handle:
        handle.write("a, revised\n")
    assert refresh(paths.archive, paths.checkout) == "updated"
    assert git("status", "--porcelain", cwd=paths.checkout) == ""


def test_an_index_lock_left_by_a_killed_command_is_removed(checked_out):
    archive, paths = checked_out
    lock = os.path.join(paths.checkout, ".git", "index.lock")
    with open(lock, "w"):
        pass  # what a git command killed halfway leaves; no git process works in the checkout
    _add(archive, "notes/b.md", "b\n")
    assert refresh(paths.archive, paths.checkout) == "updated"
    assert not os.path.exists(lock)
    assert git("status", "--porcelain", cwd=paths.checkout) == ""


@pytest.mark.slow  # a real git commit waits in its editor
def test_an_index_lock_held_by_a_running_git_command_is_waited_for(checked_out, tmp_path):
    archive, paths = checked_out
    with open(os.path.join(paths.checkout, "notes", "a.md"), "w") as handle:
        handle.write("edited by the human\n")
    started, release = tmp_path / "editor-started", tmp_path / "release"
    os.mkfifo(release)
    editor = tmp_path / "editor.sh"
    editor.write_text(f'#!/bin/sh\n: > "{started}"\nread line < "{release}"\necho "by hand" > "$1"\n')
    editor.chmod(0o755)
    # `git commit -a` holds the index lock while its editor is open.
    human = subprocess.Popen(["git", "commit", "-q", "-a"], cwd=paths.checkout, env=dict(
        os.environ, GIT_EDITOR=str(editor), GIT_AUTHOR_NAME="Human", GIT_AUTHOR_EMAIL="h@example.org",
        GIT_COMMITTER_NAME="Human", GIT_COMMITTER_EMAIL="h@example.org"))
    try:
        while not started.exists():  # the editor is open: the lock is taken
            assert human.poll() is None
            time.sleep(0.01)
        _add(archive, "notes/b.md", "b\n")
        assert refresh(paths.archive, paths.checkout) == "busy"
        assert os.path.exists(os.path.join(paths.checkout, ".git", "index.lock"))
    finally:
        with open(release, "w") as handle:
            handle.write("done\n")
        assert human.wait(30) == 0
    # The human's commit went through; the checkout now has a commit of theirs and waits for them.
    assert git("log", "-1", "--format=%s", cwd=paths.checkout).strip() == "by hand"
    assert refresh(paths.archive, paths.checkout) == "held"


@pytest.mark.slow  # a separate Python process writes and exits
def test_a_process_that_writes_and_exits_leaves_the_checkout_current(home):
    """No server runs: the writer refreshes the checkout itself before it exits (as every CLI command does)."""
    script = ("import sys\nfrom gitmail import Change, Store\n"
              "store = Store(sys.argv[1])\n"
              "archive = store.archive('/data/cli', create=True)\n"
              "archive.transact(lambda s: Change('one', author='BlueLake').put('notes/one.md', b'one\\n'))\n")
    subprocess.run([sys.executable, "-c", script, home], check=True)
    store = Store(home, background=False)
    paths = store.paths(store.resolve("/data/cli"))
    assert git("rev-parse", "HEAD", cwd=paths.checkout).strip() == store.archive("/data/cli").tip()
    assert os.path.exists(os.path.join(paths.checkout, "notes", "one.md"))


@pytest.mark.slow  # the CLI and git's hooks start gitmail processes
def test_cli_writes_and_outside_pushes_reach_the_checkout_without_a_server(home, tmp_path):
    def gm(*args: str) -> str:
        proc = subprocess.run([sys.executable, "-m", "gitmail", "--home", home, *args], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    gm("init", "/data/cli")
    gm("register", "/data/cli", "--name", "BlueLake", "--program", "p", "--model", "m")
    store = Store(home, background=False)
    slug = store.resolve("/data/cli")
    paths = store.paths(slug)
    assert os.path.isdir(os.path.join(paths.checkout, ".git"))  # there from the project's first write
    gm("send", "/data/cli", "--from", "BlueLake", "--to", "BlueLake", "--subject", "hello", "--body", "hi")
    archive = store.archive(slug)
    assert git("rev-parse", "HEAD", cwd=paths.checkout).strip() == archive.tip()
    assert git("grep", "-l", "subject: hello", cwd=paths.checkout).strip()
    # A push from another clone: the archive's hook brings the checkout along.
    clone = str(tmp_path / "elsewhere")
    git("clone", "-q", archive.git_dir, clone)
    sign_commits(clone, home)
    profile = os.path.join(clone, "agents", "BlueLake", "profile.yaml")
    with open(profile, encoding="utf-8") as handle:
        text = handle.read()
    with open(profile, "w", encoding="utf-8") as handle:
        handle.write(text.replace("task_description: ''", "task_description: reviews the parser"))
    git("commit", "-qam", "what BlueLake does", cwd=clone)
    git("push", "-q", "origin", "HEAD:main", cwd=clone)
    assert git("rev-parse", "HEAD", cwd=paths.checkout).strip() == archive.tip()
    with open(os.path.join(paths.checkout, "agents", "BlueLake", "profile.yaml"), encoding="utf-8") as handle:
        assert "reviews the parser" in handle.read()


def test_an_archive_whose_hook_predates_the_checkout_refresh_gets_todays_when_opened(home):
    Store(home, background=False).archive("/data/old", create=True)
    store = Store(home, background=False)
    hook = os.path.join(store.paths(store.resolve("/data/old")).archive, "hooks", "post-receive")
    with open(hook, "w") as handle:  # what an earlier gitmail installed: a poke only
        handle.write("#!/bin/sh\n# gitmail-archive-hook: poke\n: > \"$GIT_DIR/gitmail.poke\"\nexit 0\n")
    Store(home, background=False).archive("/data/old")
    with open(hook) as handle:
        assert "gitmail checkout --archive" in handle.read()
    with open(hook, "w") as handle:  # somebody else's hook is never replaced
        handle.write("#!/bin/sh\necho mine\n")
    Store(home, background=False).archive("/data/old")
    with open(hook) as handle:
        assert handle.read() == "#!/bin/sh\necho mine\n"
