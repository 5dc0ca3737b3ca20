"""The commit guard, driven through real `git commit` and `git push` in temporary repositories."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from gitmail import Store
from gitmail.coord import guard
from gitmail.coord import reservations as rs

from .conftest import close_indexes
from .coord_helpers import make_project

pytestmark = pytest.mark.slow  # git runs the installed hooks, which start gitmail

KEY = "/work/demo"


def run(*args, cwd, env=None, check=True):
    full = dict(os.environ, GIT_TERMINAL_PROMPT="0", GIT_AUTHOR_NAME="Dev", GIT_AUTHOR_EMAIL="dev@example.org",
                GIT_COMMITTER_NAME="Dev", GIT_COMMITTER_EMAIL="dev@example.org")
    for key in ("AGENT_NAME", guard.MODE_ENV, guard.BYPASS_ENV):
        full.pop(key, None)
    full.update(env or {})
    proc = subprocess.run(list(args), cwd=cwd, capture_output=True, text=True, env=full)
    if check and proc.returncode != 0:
        raise AssertionError(f"{args} failed ({proc.returncode}): {proc.stdout}{proc.stderr}")
    return proc


def commit(repo, path, env=None, check=False):
    full = os.path.join(repo, path)
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, "a", encoding="utf-8") as handle:
        handle.write("change\n")
    run("git", "add", path, cwd=repo)
    return run("git", "commit", "-m", f"edit {path}", cwd=repo, env=env, check=check)


@pytest.fixture
def code_repo(tmp_path, store, ctx):
    make_project(store, KEY, "Blue", "Green")
    rs.reserve(ctx, KEY, "Blue", ["src/core/", "docs/*.md"], ttl_seconds=600, reason="rewriting the core")
    repo = str(tmp_path / "code")
    os.makedirs(repo)
    run("git", "init", "-q", "-b", "main", cwd=repo)
    commit(repo, "README", check=True)
    return repo


def test_install_through_the_cli_and_block_other_agents(code_repo, home):
    out = run("gitmail", "guard", "install", KEY, code_repo, cwd=code_repo)
    assert "pre-commit" in out.stdout and "pre-push" in out.stdout
    hook = os.path.join(code_repo, ".git", "hooks", "pre-commit")
    with open(hook, encoding="utf-8") as handle:
        text = handle.read()
    assert home not in text and guard.MARKER in text  # no store path baked in
    assert run("git", "config", "gitmail.project", cwd=code_repo).stdout.strip() == KEY

    blocked = commit(code_repo, "src/core/engine.py", env={"AGENT_NAME": "Green"})
    assert blocked.returncode != 0
    report = blocked.stdout + blocked.stderr
    assert "src/core/engine.py" in report and "Blue holds src/core until" in report and "rewriting the core" in report
    # The holder itself may commit; so may anyone touching unreserved files.
    assert commit(code_repo, "src/core/engine.py", env={"AGENT_NAME": "Blue"}).returncode == 0
    assert commit(code_repo, "src/other.py", env={"AGENT_NAME": "Green"}).returncode == 0
    assert commit(code_repo, "docs/sub/deep.md", env={"AGENT_NAME": "Green"}).returncode == 0
    # Without AGENT_NAME every reservation counts.
    assert commit(code_repo, "docs/guide.md").returncode != 0


def test_warn_mode_and_bypass(code_repo, store, ctx):
    guard.install(ctx, KEY, code_repo)
    warned = commit(code_repo, "src/core/a.py", env={"AGENT_NAME": "Green", guard.MODE_ENV: "warn"})
    assert warned.returncode == 0 and "letting it through" in warned.stdout + warned.stderr
    run("git", "config", guard.CONFIG_MODE, "warn", cwd=code_repo)
    assert commit(code_repo, "src/core/b.py", env={"AGENT_NAME": "Green"}).returncode == 0
    run("git", "config", "--unset", guard.CONFIG_MODE, cwd=code_repo)
    assert commit(code_repo, "src/core/c.py", env={"AGENT_NAME": "Green"}).returncode != 0
    bypassed = commit(code_repo, "src/core/c.py", env={"AGENT_NAME": "Green", guard.BYPASS_ENV: "1"})
    assert bypassed.returncode == 0 and "bypassed" in bypassed.stdout + bypassed.stderr


def test_released_reservations_no_longer_block(code_repo, store, ctx):
    guard.install(ctx, KEY, code_repo)
    assert commit(code_repo, "src/core/x.py", env={"AGENT_NAME": "Green"}).returncode != 0
    rs.release(ctx, KEY, "Blue", paths=["src/core"])
    assert commit(code_repo, "src/core/x.py", env={"AGENT_NAME": "Green"}).returncode == 0


def test_existing_hook_is_chained_and_restored(code_repo, store, tmp_path, ctx):
    marker = tmp_path / "ran"
    hook = os.path.join(code_repo, ".git", "hooks", "pre-commit")
    with open(hook, "w", encoding="utf-8") as handle:
        handle.write(f"#!/bin/sh\necho ran >> {marker}\nexit 0\n")
    os.chmod(hook, 0o755)
    out = guard.install(ctx, KEY, code_repo)
    assert out["chained"] == [hook + guard.CHAINED_SUFFIX]
    assert guard.install(ctx, KEY, code_repo)["chained"] == out["chained"]  # idempotent
    assert commit(code_repo, "free.txt", env={"AGENT_NAME": "Green"}).returncode == 0
    assert marker.read_text() == "ran\n"
    # A failing chained hook still stops the commit before the guard runs.
    with open(hook + guard.CHAINED_SUFFIX, "w", encoding="utf-8") as handle:
        handle.write("#!/bin/sh\necho 'lint failed'\nexit 3\n")
    assert commit(code_repo, "free.txt", env={"AGENT_NAME": "Green"}).returncode != 0
    removed = guard.uninstall(code_repo)
    assert removed["removed"] is True and removed["restored"] == [hook]
    with open(hook, encoding="utf-8") as handle:
        assert "lint failed" in handle.read()
    assert not os.path.exists(os.path.join(code_repo, ".git", "hooks", "pre-push"))
    assert guard.uninstall(code_repo)["removed"] is False
    assert run("git", "config", "gitmail.project", cwd=code_repo, check=False).returncode != 0


def test_core_hooks_path_is_honoured(code_repo, store, ctx):
    run("git", "config", "core.hooksPath", ".githooks", cwd=code_repo)
    out = guard.install(ctx, KEY, code_repo)
    assert out["hooks_dir"] == os.path.join(code_repo, ".githooks")
    assert os.path.exists(os.path.join(code_repo, ".githooks", "pre-commit"))
    assert not os.path.exists(os.path.join(code_repo, ".git", "hooks", "pre-commit"))
    assert commit(code_repo, "src/core/y.py", env={"AGENT_NAME": "Green"}).returncode != 0


def test_linked_worktree(code_repo, store, tmp_path, ctx):
    guard.install(ctx, KEY, code_repo)
    worktree = str(tmp_path / "wt")
    run("git", "worktree", "add", "-q", "-b", "feature", worktree, cwd=code_repo)
    assert commit(worktree, "src/core/z.py", env={"AGENT_NAME": "Green"}).returncode != 0
    assert commit(worktree, "src/core/z.py", env={"AGENT_NAME": "Blue"}).returncode == 0


def test_pre_push_blocks_commits_touching_reserved_files(code_repo, store, tmp_path, ctx):
    remote = str(tmp_path / "remote.git")
    run("git", "init", "-q", "--bare", remote, cwd=str(tmp_path))
    run("git", "remote", "add", "origin", remote, cwd=code_repo)
    run("git", "push", "-q", "origin", "main", cwd=code_repo)
    guard.install(ctx, KEY, code_repo)
    assert commit(code_repo, "src/core/p.py", env={"AGENT_NAME": "Green", guard.BYPASS_ENV: "1"}).returncode == 0
    pushed = run("git", "push", "origin", "main", cwd=code_repo, env={"AGENT_NAME": "Green"}, check=False)
    assert pushed.returncode != 0 and "src/core/p.py" in pushed.stdout + pushed.stderr
    # A new branch is checked too (commits not on any remote).
    run("git", "checkout", "-q", "-b", "topic", cwd=code_repo)
    new_branch = run("git", "push", "origin", "topic", cwd=code_repo, env={"AGENT_NAME": "Green"}, check=False)
    assert new_branch.returncode != 0
    assert run("git", "push", "-q", "origin", "main", cwd=code_repo, env={"AGENT_NAME": "Blue"}).returncode == 0


def test_store_moved_is_found_through_gitmail_home(code_repo, store, home, tmp_path, monkeypatch, ctx):
    guard.install(ctx, KEY, code_repo)
    close_indexes()  # a store is moved while nothing writes to it: no index work may follow it
    moved = str(tmp_path / "moved-home")
    shutil.copytree(home, moved, symlinks=True)
    shutil.rmtree(home)
    monkeypatch.setenv("GITMAIL_HOME", moved)
    assert commit(code_repo, "src/core/m.py", env={"AGENT_NAME": "Green"}).returncode != 0
    # Pointing at a store without the project warns and lets the commit through.
    lost = commit(code_repo, "src/core/m.py", env={"AGENT_NAME": "Green", "GITMAIL_HOME": str(tmp_path / "empty")})
    assert lost.returncode == 0 and "no gitmail store" in lost.stdout + lost.stderr
    assert not (tmp_path / "empty").exists()  # the hook never creates a store
    other = tmp_path / "other-store"
    Store(str(other), background=False)
    unknown = commit(code_repo, "src/core/m.py", env={"AGENT_NAME": "Green", "GITMAIL_HOME": str(other)})
    assert unknown.returncode == 0 and "not in the store" in unknown.stdout + unknown.stderr


def test_bad_input(store, tmp_path, ctx):
    from gitmail.model.errors import GitmailError

    make_project(store, KEY, "Blue")
    plain = tmp_path / "plain"
    plain.mkdir()
    for call, code in [(lambda: guard.install(ctx, KEY, str(plain)), "NOT_FOUND"),
                       (lambda: guard.install(ctx, KEY, str(tmp_path / "missing")), "NOT_FOUND"),
                       (lambda: guard.install(ctx, "/no/such/project", str(plain)), "NOT_FOUND"),
                       (lambda: guard.uninstall(""), "INVALID_ARGUMENT")]:
        with pytest.raises(GitmailError) as info:
            call()
        assert info.value.code == code
