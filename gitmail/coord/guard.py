"""The commit guard: git hooks in a code repository that honour reservations.

``install`` puts one script (shipped as ``hooks/code/guard.sh``) in the
repository's hooks folder as ``pre-commit`` and ``pre-push``, and records the
project key in the repository's git config (``gitmail.project``). The folder is
the one git itself uses (``git rev-parse --git-path hooks``), so
``core.hooksPath`` and linked worktrees are honoured. A hook that was already
there is kept as ``<hook>.gitmail-chained`` and runs before the guard;
``uninstall`` removes only the guard and puts such a hook back.

When a hook runs, :func:`run_hook` lists the files the commit or push touches
and looks them up in the project's active exclusive reservations held by
agents other than ``AGENT_NAME``. The archive is found through the store
(``GITMAIL_HOME``) by project key, never by a path written into the hook.
"""

from __future__ import annotations

import os
import subprocess
from importlib import resources

from gitmail.model.errors import CONFLICT, NOT_FOUND, GitmailError, invalid
from gitmail.model.results import Result, result
from gitmail.storage.rawdiff import NO_ID

from . import hierarchy
from .context import Context
from .lookup import find_agent
from .reservations import conflicts_for_paths

HOOKS = ("pre-commit", "pre-push")
MARKER = "# gitmail-reservation-guard"
CHAINED_SUFFIX = ".gitmail-chained"
CONFIG_PROJECT = "gitmail.project"
CONFIG_MODE = "gitmail.guardMode"
MODE_ENV = "GITMAIL_GUARD_MODE"
BYPASS_ENV = "GITMAIL_GUARD_BYPASS"


def _git(repo: str, *args: str, check: bool = True, stdin: str | None = None) -> str:
    proc = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, input=stdin,
                          env=dict(os.environ, GIT_TERMINAL_PROMPT="0"))
    if check and proc.returncode != 0:
        raise GitmailError(NOT_FOUND, f"{repo}: git {' '.join(args)} failed: {proc.stderr.strip()}",
                           {"repo": repo})
    return proc.stdout


def _repo_root(repo: str) -> str:
    if not isinstance(repo, str) or not repo.strip():
        raise invalid("code_repo_path must be the path of a git repository", field="code_repo_path")
    path = os.path.abspath(os.path.expanduser(repo))
    if not os.path.isdir(path):
        raise GitmailError(NOT_FOUND, f"{repo} is not a folder; give the path of a git repository",
                           {"field": "code_repo_path"})
    proc = subprocess.run(["git", "rev-parse", "--git-dir"], cwd=path, capture_output=True, text=True)
    if proc.returncode != 0:
        raise GitmailError(NOT_FOUND, f"{repo} is not inside a git repository; run `git init` there first",
                           {"field": "code_repo_path"})
    return path


def hooks_dir(repo: str) -> str:
    """The folder git runs hooks from for ``repo`` (honours core.hooksPath and worktrees)."""
    out = _git(repo, "rev-parse", "--git-path", "hooks").strip()
    return os.path.normpath(out if os.path.isabs(out) else os.path.join(repo, out))


def hook_script() -> str:
    return (resources.files("gitmail.hooks") / "code" / "guard.sh").read_text(encoding="utf-8")


def is_ours(path: str) -> bool:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return MARKER in handle.read(4096)
    except (FileNotFoundError, IsADirectoryError):
        return False


@result
class GuardInstalled(Result):
    """The guard's hooks written into a repository, the hooks it kept and chains to, and the project it checks."""

    hook: str
    hooks: list[str]
    chained: list[str]
    hooks_dir: str
    project: str


@result
class GuardRemoved(Result):
    """Whether a repository had the guard, the hooks removed, and the chained hooks put back."""

    removed: bool
    hooks: list[str]
    restored: list[str]


def install(ctx: Context, project_key: str, repo: str) -> GuardInstalled:
    """Install the guard hooks into ``repo`` for ``project``; safe to run again."""
    root = _repo_root(repo)
    if not ctx.store.exists(project_key):
        raise GitmailError(NOT_FOUND, f"no project {project_key!r} in {ctx.store.home}; create it (ensure_project) "
                           "or point GITMAIL_HOME at the store that holds it", {"project": project_key})
    key = _human_key(ctx, project_key)
    folder = hooks_dir(root)
    os.makedirs(folder, exist_ok=True)
    script = hook_script()
    installed, chained = [], []
    for name in HOOKS:
        path = os.path.join(folder, name)
        kept = path + CHAINED_SUFFIX
        if os.path.lexists(path) and not is_ours(path):
            if os.path.lexists(kept):
                raise GitmailError(CONFLICT, f"{path} is not the gitmail guard and {kept} already exists; move one "
                                   "of them away, then install again", {"path": path})
            os.rename(path, kept)
        if os.path.lexists(kept):
            chained.append(kept)
        tmp = f"{path}.gitmail-tmp"
        with open(tmp, "w", encoding="utf-8") as handle:
            handle.write(script)
        os.chmod(tmp, 0o755)
        os.replace(tmp, path)
        installed.append(path)
    _git(root, "config", CONFIG_PROJECT, key)
    return GuardInstalled(hook=installed[0], hooks=installed, chained=chained, hooks_dir=folder, project=key)


def uninstall(repo: str) -> GuardRemoved:
    """Remove the guard hooks from ``repo``, restoring hooks it had chained; others are left alone."""
    root = _repo_root(repo)
    folder = hooks_dir(root)
    removed, restored = [], []
    for name in HOOKS:
        path = os.path.join(folder, name)
        kept = path + CHAINED_SUFFIX
        if not is_ours(path):
            continue
        os.unlink(path)
        removed.append(path)
        if os.path.lexists(kept):
            os.rename(kept, path)
            restored.append(path)
    _git(root, "config", "--unset", CONFIG_PROJECT, check=False)
    return GuardRemoved(removed=bool(removed), hooks=removed, restored=restored)


def recorded_project(repo: object) -> str | None:
    """The project key a guarded repository records (``git config gitmail.project``), if any."""
    if not isinstance(repo, str) or not os.path.isdir(os.path.abspath(os.path.expanduser(repo))):
        return None
    path = os.path.abspath(os.path.expanduser(repo))
    return _git(path, "config", "--local", "--get", CONFIG_PROJECT, check=False).strip() or None


def _human_key(ctx: Context, project_key: str) -> str:
    from gitmail.model.records import PROJECT_PATH, Project

    record = ctx.archive(project_key).snapshot().load(PROJECT_PATH, Project)
    return record.human_key if record is not None else project_key


# -- when a hook runs ----------------------------------------------------------------------


def staged_paths(repo: str) -> list[str]:
    """Files the pending commit adds, changes or deletes (both sides of a rename)."""
    out = _git(repo, "diff", "--cached", "--name-only", "--no-renames", "-z")
    return [p for p in out.split("\0") if p]


def pushed_paths(repo: str, refs: str) -> list[str]:
    """Files changed by the commits a push sends, from the lines git gives pre-push on stdin."""
    paths: list[str] = []
    for line in refs.splitlines():
        parts = line.split()
        if len(parts) != 4 or parts[1] == NO_ID:
            continue  # blank line, or a ref being deleted
        local, remote = parts[1], parts[3]
        known = remote != NO_ID and subprocess.run(["git", "cat-file", "-e", f"{remote}^{{commit}}"], cwd=repo,
                                                   capture_output=True).returncode == 0
        if known:
            out = _git(repo, "diff", "--name-only", "--no-renames", "-z", remote, local)
        else:
            out = _git(repo, "log", "--name-only", "--no-renames", "--format=", "-z", local, "--not", "--remotes")
        for path in out.replace("\n", "\0").split("\0"):
            if path and path not in paths:
                paths.append(path)
    return paths


def run_hook(ctx: Context, hook: str, repo: str, stdin: str = "", env: dict[str, str] | None = None) -> tuple[int, str]:
    """Decide one hook run: (exit code, what to tell the committer)."""
    env = dict(os.environ if env is None else env)
    if hook not in HOOKS:
        raise invalid(f"hook must be one of {', '.join(HOOKS)}", field="hook")
    if env.get(BYPASS_ENV, "") not in ("", "0"):
        return 0, f"gitmail guard: bypassed ({BYPASS_ENV} is set)"
    project = _git(repo, "config", "--get", CONFIG_PROJECT, check=False).strip()
    if not project:
        return 0, (f"gitmail guard: no project configured (git config {CONFIG_PROJECT}); run "
                   "`gitmail guard install PROJECT REPO` again. Not checking.")
    mode = env.get(MODE_ENV) or _git(repo, "config", "--get", CONFIG_MODE, check=False).strip() or "block"
    if not ctx.store.exists(project):
        return 0, (f"gitmail guard: project {project!r} is not in the store at {ctx.store.home}; set GITMAIL_HOME to "
                   "the store that holds it. Not checking.")
    agent = env.get("AGENT_NAME") or None
    paths = staged_paths(repo) if hook == "pre-commit" else pushed_paths(repo, stdin)
    conflicts = conflicts_for_paths(ctx, project, paths, agent=agent)
    held, outside = _outside_scope(ctx, project, agent, paths)
    if not conflicts and not outside:
        return 0, ""
    lines = []
    if outside:
        lines.append(f"gitmail guard: {agent}'s scopes ({held}) do not let it edit {len(outside)} file(s) "
                     f"in this {hook.split('-')[1]}:")
        lines += [f"  {path}" for path in outside]
    if conflicts:
        lines.append(f"gitmail guard: {len(conflicts)} file(s) in this {hook.split('-')[1]} are reserved by other "
                     "agents:")
    for item in conflicts:
        holders = "; ".join(f"{h.agent} holds {h.path_pattern} until {h.expires_ts}"
                            + (f" ({h.reason})" if h.reason else "") for h in item.holders)
        lines.append(f"  {item.path}: {holders}")
    if agent is None:
        lines.append("  AGENT_NAME is not set, so every agent's reservations count; set it to your agent name.")
    if mode == "warn":
        lines.append(f"gitmail guard: {MODE_ENV}=warn, letting it through.")
        return 0, "\n".join(lines)
    if conflicts:
        lines.append("Ask the holders to release them or wait for expiry.")
    if outside:
        lines.append("Leave those files to an agent whose scopes cover them, or ask an agent above you to widen yours.")
    lines.append(f"To override once, set {BYPASS_ENV}=1.")
    return 1, "\n".join(lines)


def _outside_scope(ctx: Context, project: str, agent: str | None, paths: list[str]) -> tuple[str, list[str]]:
    """``agent``'s scopes as text and the files among ``paths`` they do not let it edit (none without an agent)."""
    if agent is None:
        return "", []
    snap = ctx.archive(project).snapshot()
    profile = find_agent(snap, agent)
    if profile is None:
        return "", []
    return (", ".join(str(s) for s in hierarchy.scopes_of(profile)),
            hierarchy.files_outside(snap, profile, paths))
