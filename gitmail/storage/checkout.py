"""The human checkout: files to grep and open, never a way to lose records.

The database is the bare ``archive.git``. Beside it, ``checkout/`` is an
ordinary clone (sharing the archive's objects, so it costs no copy) kept at
``main``. Since the objects are shared, a refresh needs no fetch: it reads
the archive's ``main``, moves ``origin/main`` there and fast-forwards the
checkout's branch by applying the difference between the two trees.

**In proportion to the change.** A refresh walks the old and new trees
together, skipping every subtree whose id did not change (a day folder or
two after a burst of mail), writes only the files that changed, records
only their entries in the checkout's git index and moves the branch. Nothing looks at
every file: ``git merge --ff-only`` (what this replaced) first stats every
file of the checkout, which cost some 180 ms of CPU at 10k messages. The
checkout keeps a split index (``core.splitIndex``): new and changed entries
go into its small part, written directly (:mod:`.gitindex`) without reading
the large shared part, which ``git update-index`` would read in full (it
still does for deletions, and to fold a grown small part into a new shared
one now and then).

**Who refreshes.** Every process that moves ``main`` refreshes the checkout
itself, so nothing long-lived is needed: a commit listener pokes a debounced
background worker (:class:`CheckoutRefresher`; a server batches a burst into
one refresh a second at most), and a process about to exit runs a refresh
still owed in its own thread (:func:`finish_all`, at exit), so a CLI command
leaves the checkout current when it returns. A push into the archive from
outside refreshes it from the archive's ``post-receive`` hook (``gitmail
checkout``), and a running server's watcher pokes the refresher after any
other move of ``main``. A file lock serialises refreshers of all processes.

**Human edits.** Humans may edit and commit in the checkout. Their commits
land on the checkout's own branch; they reach the database only by ``git
push``, which the archive accepts only as a fast-forward
(``receive.denyNonFastForwards``). A commit made from a stale checkout is
therefore rejected on push instead of silently deleting the records written
since: the human pulls (a merge that keeps both sides) and pushes again. A
refresh never moves a checkout that has local commits, and never overwrites
an uncommitted edit: if a file it would change holds anything but the old or
the new version, it changes nothing and reports ``held``. Edits to other
files stay as they are, as with ``git pull``.

**A stale ``index.lock``.** A git command killed in the checkout leaves
``.git/index.lock``, and git (and this refresher) then refuse to touch the
index. A lock with a git process still working in the checkout is a human's
command (``git commit -a`` holds it while the editor is open): the refresh
reports ``busy`` and tries again later. A lock with no git process there has
no owner left, and the refresh removes it and goes on. Without ``/proc`` to
look at, a lock older than :data:`STALE_LOCK_AGE` counts as ownerless.
"""

from __future__ import annotations

import atexit
import fcntl
import logging
import os
import shutil
import subprocess
import threading
import time
import weakref

import pygit2

from .background import Debounced
from .boundary import is_partial
from .gitindex import put_entries
from .handles import open_repository
from .objects import MODE_BLOB
from .signers import refresh_signers
from .treeedit import Entry, changed_files
from .window import Window, day_of, fitting, folder_for, folders, newest_day

_log = logging.getLogger("gitmail.storage.checkout")

_QUIET = 0.3  # a refresh follows once commits pause this long...
_MAX_WAIT = 1.0  # ...or this long after the first commit of a burst
STALE_LOCK_AGE = 3600.0  # seconds: where ownership cannot be seen, an index lock this old has no owner
_MODE_EXEC = 0o100755
_REFRESH_LOCK = "gitmail-refresh.lock"
_WINDOW_KEY = "gitmail.window"  # the checkout's window (see window.py); absent: everything
_NEWEST_KEY = "gitmail.newest"  # the newest day of the archive when the window's folders were last chosen
# A window's git status lists no untracked files (``git status -u`` does): at layout 2 a window holds more
# folders than files, and looking for new files in each cost 2.7 of 3.2 s of CPU at 94k files (100k messages).
_WINDOW_SETTINGS = (("status.showUntrackedFiles", "no"), ("core.untrackedCache", "true"))
# A split index (see gitindex.py); shared parts git has replaced go after five minutes, not two weeks.
_SETTINGS = (("core.splitIndex", "true"), ("splitIndex.sharedIndexExpire", "5.minutes.ago"))
# Variables that point git at a repository: a hook inherits them from the
# push that runs it, and they must not steer commands run in the checkout.
_REPO_ENV = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY", "GIT_ALTERNATE_OBJECT_DIRECTORIES",
             "GIT_QUARANTINE_PATH", "GIT_PREFIX", "GIT_COMMON_DIR", "GIT_NAMESPACE", "GIT_IMPLICIT_WORK_TREE",
             "GIT_GRAFT_FILE", "GIT_SHALLOW_FILE", "GIT_REPLACE_REF_BASE", "GIT_NO_REPLACE_OBJECTS", "GIT_CONFIG",
             "GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT")


def _git(*args: str, cwd: str | None = None, check: bool = True,
         stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    env = {key: value for key, value in os.environ.items() if key not in _REPO_ENV}
    env["GIT_TERMINAL_PROMPT"] = "0"
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, check=check, env=env, input=stdin)


def protect_archive(git_dir: str) -> None:
    """Refuse pushes that rewrite or delete ``main`` in the archive."""
    _git("--git-dir", git_dir, "config", "receive.denyNonFastForwards", "true")
    _git("--git-dir", git_dir, "config", "receive.denyDeletes", "true")


def refresh(archive_dir: str, checkout_dir: str, *, window: Window | None = None) -> str:
    """Bring the checkout up to the archive's main, holding ``window`` from now on if one is given.

    Returns ``"created"``, ``"updated"``, ``"current"``, ``"partial"`` (no
    checkout for an archive joined from a window), ``"held"`` when the
    human has local commits there or has edited a file the update would
    change (nothing is touched then), or ``"busy"`` while a git command of
    the human's holds the checkout's index (try again later). A checkout
    made without a ``window`` gets :func:`~.window.fitting`'s. A checkout
    that signs (``gitmail checkout --sign-with``) gets its allowed-signers
    file rewritten from ``main`` too, whatever the state.
    """
    if not os.path.isdir(os.path.join(checkout_dir, ".git")):
        return _create(archive_dir, checkout_dir, window)
    with _refresh_lock(checkout_dir):
        if window is not None:
            _choose(open_repository(checkout_dir), checkout_dir, window)
        state = _refresh(archive_dir, checkout_dir)
        refresh_signers(open_repository(archive_dir), checkout_dir)  # keys registered or revoked meanwhile
        return state


def window_of(checkout_dir: str) -> Window:
    """The window a checkout holds (everything for one made before windows, or by ``--all``)."""
    config = open_repository(checkout_dir).config
    return Window.parse(str(config[_WINDOW_KEY])) if _WINDOW_KEY in config else Window()


def _create(archive_dir: str, checkout_dir: str, window: Window | None) -> str:
    try:
        archive = open_repository(archive_dir)
        tip = archive.references["refs/heads/main"].target
    except KeyError:
        return "current"  # nothing committed yet
    if is_partial(archive):
        # Joined from a window (gitmail.storage.boundary): git's clone of it would ask it for files it never
        # fetched, and it would ask the hub for them in turn; the checkout comes once `gitmail deepen` took all.
        return "partial"
    if window is None:
        window = fitting(archive, archive[tip].peel(pygit2.Tree).id.raw)
    tmp = f"{checkout_dir}.tmp-{os.getpid()}-{threading.get_ident()}"
    if window.everything:
        settings = [arg for key, value in _SETTINGS for arg in ("--config", f"{key}={value}")]
        _git("clone", "-q", "--shared", "--branch", "main", *settings, archive_dir, tmp)
        _git("update-index", "--split-index", cwd=tmp)  # a clone writes its first index whole
    else:
        _git("clone", "-q", "--shared", "--sparse", "--branch", "main", archive_dir, tmp)  # the top files only
        _narrow(open_repository(tmp), tmp, window)
    try:
        os.rename(tmp, checkout_dir)
    except OSError:  # another process created it first
        shutil.rmtree(tmp, ignore_errors=True)
        return "current"
    return "created"


class _refresh_lock:
    """An exclusive lock on refreshing one checkout, across processes (released by the OS if one dies)."""

    def __init__(self, checkout_dir: str):
        self.path = os.path.join(checkout_dir, ".git", _REFRESH_LOCK)
        self.fd = -1

    def __enter__(self) -> None:
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(self.fd, fcntl.LOCK_EX)

    def __exit__(self, *exc: object) -> None:
        os.close(self.fd)  # closing releases the lock


def _refresh(archive_dir: str, checkout_dir: str) -> str:
    try:
        upstream = open_repository(archive_dir).references["refs/heads/main"].target
    except KeyError:
        return "current"  # nothing committed yet
    repo = open_repository(checkout_dir)
    repo.references.create("refs/remotes/origin/main", upstream, force=True)  # as a fetch would leave it
    if repo.head_is_unborn:
        return "held"  # the human emptied the branch: leave it be
    branch = repo.lookup_reference("HEAD").resolve()
    head = branch.target
    if head == upstream:
        return "current"
    if not repo.descendant_of(upstream, head):
        return "held"  # the human's commits are ahead of main, or diverged: they pull and push
    if not _index_free(checkout_dir):
        return "busy"
    _configure(repo)
    old_root = repo[head].peel(pygit2.Tree).id.raw
    new_root = repo[upstream].peel(pygit2.Tree).id.raw
    changes = list(changed_files(repo, old_root, new_root))
    if not window_of(checkout_dir).everything:
        return _follow_in_window(repo, checkout_dir, branch, str(head), str(upstream), changes)
    if any(entry is not None and entry[0] not in (MODE_BLOB, _MODE_EXEC) for _, _, entry in changes):
        return _merge_with_git(checkout_dir, str(upstream))  # links or submodules: git knows best
    if any(_edited(checkout_dir, path, old, new) for path, old, new in changes):
        return "held"  # an update would overwrite the human's edits: leave them be
    changes.sort(key=lambda change: change[2] is not None)  # deletions first: a file may give way to a folder
    made: set[str] = set()
    for path, _, new in changes:
        _apply(repo, checkout_dir, path, new, made)
    if _update_index(checkout_dir, changes) == "busy":
        return "busy"  # a git command took the index meanwhile; the files written are resumed next time
    try:
        branch.set_target(upstream, "gitmail: follow main")  # only from ``head``: a human's commit meanwhile wins
    except pygit2.GitError:
        return "held"
    return "updated"


def _choose(repo: pygit2.Repository, checkout_dir: str, window: Window) -> None:
    """Make the checkout hold ``window`` from now on: a plain checkout for everything, else a sparse one."""
    if window.everything:
        if window_of(checkout_dir).everything:
            return
        _git("sparse-checkout", "disable", cwd=checkout_dir)  # every file of the checkout's commit comes back
        for key, _ in _WINDOW_SETTINGS:
            _git("config", "--unset", key, cwd=checkout_dir, check=False)
        for key, value in _SETTINGS:
            _git("config", key, value, cwd=checkout_dir)
        _git("config", _WINDOW_KEY, window.text(), cwd=checkout_dir)
        _git("update-index", "--split-index", cwd=checkout_dir)
        return
    if _git("config", "--get", "core.splitIndex", cwd=checkout_dir, check=False).stdout.strip() == b"true":
        _git("config", "core.splitIndex", "false", cwd=checkout_dir)  # git cannot split a sparse index
        _git("update-index", "--no-split-index", cwd=checkout_dir)
    _narrow(repo, checkout_dir, window)


def _narrow(repo: pygit2.Repository, checkout_dir: str, window: Window) -> None:
    """Hold the folders of ``window`` in the checkout's commit (with a sparse index), and remember the window."""
    tree = repo.head.peel(pygit2.Tree).id.raw
    newest = newest_day(repo, tree)
    paths = "".join(f"{path}\n" for path in folders(repo, tree, window.first_day(newest)))
    _git("sparse-checkout", "set", "--cone", "--sparse-index", "--stdin", cwd=checkout_dir, stdin=paths.encode())
    for key, value in (*_WINDOW_SETTINGS, (_WINDOW_KEY, window.text()), (_NEWEST_KEY, newest or "")):
        _git("config", key, value, cwd=checkout_dir)


def _follow_in_window(repo: pygit2.Repository, checkout_dir: str, branch: pygit2.Reference, head: str,
                      upstream: str, changes: list[tuple[str, Entry | None, Entry | None]]) -> str:
    """Fast-forward a sparse checkout: widen the window to new folders it should hold, then let git apply the change.

    A record of a newer day slides a window of days (its folders are chosen
    again, once a day); otherwise only the folders the change brings are
    added. ``git read-tree -m -u`` applies the change: it walks the sparse
    index (the window's files and one entry per folder outside it), writes
    only the files that changed inside the window, and refuses, changing
    nothing, when one of them holds an edit of the human's.
    """
    window = window_of(checkout_dir)
    newest = str(repo.config[_NEWEST_KEY]) if _NEWEST_KEY in repo.config else ""
    arrived = max((day or "" for day in (day_of(path) for path, _, new in changes if new is not None)), default="")
    slides = window.days is not None and arrived > newest
    if not slides:
        first = window.first_day(newest or None)
        _widen(checkout_dir, {folder_for(path, first) for path, _, new in changes if new is not None} - {None})
    if _git("read-tree", "-m", "-u", head, upstream, cwd=checkout_dir, check=False).returncode != 0:
        return "held"  # a file the change would write holds an edit of the human's, or is in the way
    try:
        branch.set_target(pygit2.Oid(hex=upstream), "gitmail: follow main")
    except pygit2.GitError:
        return "held"
    if slides:
        _narrow(repo, checkout_dir, window)  # chosen again on the new commit's tree
    return "updated"


def _widen(checkout_dir: str, wanted: set[str | None]) -> None:
    """Add the folders of ``wanted`` the checkout does not hold yet to its window."""
    if not wanted:
        return
    listed = set(_git("sparse-checkout", "list", cwd=checkout_dir).stdout.decode().splitlines())
    missing = "".join(f"{path}\n" for path in sorted(str(path) for path in wanted) if path not in listed)
    if missing:
        _git("sparse-checkout", "add", "--stdin", cwd=checkout_dir, stdin=missing.encode())


def _update_index(checkout_dir: str, changes: list[tuple[str, Entry | None, Entry | None]]) -> str:
    """Record the changed files in the checkout's index: only their entries, without reading the rest."""
    outcome = "git"
    if all(new is not None for _, _, new in changes):  # a deletion needs git (the shared part's bitmaps)
        entries = [(path, new[0], new[1], os.lstat(os.path.join(checkout_dir, path)))
                   for path, _, new in changes if new is not None]
        outcome = put_entries(os.path.join(checkout_dir, ".git"), entries)
        if outcome in ("done", "busy"):
            return outcome
    fold = ("-c", "splitIndex.maxPercentChange=0") if outcome == "fold" else ()
    paths = b"".join(path.encode() + b"\0" for path, _, _ in changes)
    if _git(*fold, "update-index", "--add", "--remove", "-z", "--stdin", cwd=checkout_dir, stdin=paths,
            check=False).returncode != 0:
        return "busy"
    return "done"


def _version(full: str) -> bytes | None:
    """The blob id of the file at ``full`` as git would store it (None: no regular file there)."""
    try:
        return pygit2.hashfile(full).raw
    except (OSError, pygit2.GitError, IsADirectoryError):
        return None


def _edited(checkout_dir: str, path: str, old: Entry | None, new: Entry | None) -> bool:
    """Whether the working file at ``path`` holds something of the human's (neither version, nor absent)."""
    full = os.path.join(checkout_dir, path)
    if not os.path.lexists(full):
        return False  # nothing there to keep (git puts back a file the human deleted, too)
    if os.path.islink(full) or os.path.isdir(full):
        return True
    found = _version(full)
    return found is None or found not in {entry[1] for entry in (old, new) if entry is not None}


def _apply(repo: pygit2.Repository, checkout_dir: str, path: str, new: Entry | None, made: set[str]) -> None:
    """Write (or remove) one changed file; ``made`` holds the folders this refresh already made sure of.

    A burst's messages land in a few folders (the day's, each agent's inbox
    and outbox): making sure of each folder once per refresh, not once per
    file, spares a failing ``mkdir`` for nearly every file written.
    """
    full = os.path.join(checkout_dir, path)
    folder = os.path.dirname(full)
    if new is None:
        try:
            os.unlink(full)
        except FileNotFoundError:
            pass
        _prune(checkout_dir, folder)
        return
    if folder not in made:
        os.makedirs(folder, exist_ok=True)
        made.add(folder)
    with open(full, "wb") as handle:  # in place, as git does: creating a file is what a refresh mostly costs
        handle.write(repo.odb.read(pygit2.Oid(raw=new[1]))[1])
    if new[0] == _MODE_EXEC:
        os.chmod(full, 0o755)


def _prune(checkout_dir: str, folder: str) -> None:
    """Remove ``folder`` and its parents while they are empty (git does not keep empty folders)."""
    top = os.path.abspath(checkout_dir)
    folder = os.path.abspath(folder)
    while folder != top and folder.startswith(top + os.sep):
        try:
            os.rmdir(folder)
        except OSError:
            return  # not empty: something else lives there
        folder = os.path.dirname(folder)


def _merge_with_git(checkout_dir: str, upstream: str) -> str:
    if _git("merge", "-q", "--ff-only", upstream, cwd=checkout_dir, check=False).returncode != 0:
        return "held"
    return "updated"


def _configure(repo: pygit2.Repository) -> None:
    """Give a checkout made before the split index its settings (git splits the index at its next write)."""
    config = repo.config
    if _WINDOW_KEY in config and config[_WINDOW_KEY] != "all":
        return  # a sparse index, which git cannot split
    for key, value in _SETTINGS:
        if key not in config:
            config[key] = value


def _index_free(checkout_dir: str, *, now: float | None = None) -> bool:
    """Whether the checkout's index can be written: no lock, or one whose owner is gone (removed here)."""
    lock = os.path.join(checkout_dir, ".git", "index.lock")
    try:
        age = (time.time() if now is None else now) - os.lstat(lock).st_mtime
    except FileNotFoundError:
        return True
    owned = git_running_in(checkout_dir)
    if owned or (owned is None and age < STALE_LOCK_AGE):
        return False
    try:
        os.unlink(lock)
        _log.warning("removed %s, left by a git command that is gone (%.0f s old)", lock, age)
    except FileNotFoundError:
        pass  # its owner finished meanwhile
    return True


def git_running_in(folder: str) -> bool | None:
    """Whether a git process works in ``folder`` (git moves to the top of the work tree it acts on).

    None where processes cannot be seen (no ``/proc``).
    """
    if not os.path.isdir("/proc/self"):
        return None
    root = os.path.realpath(folder)
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/comm", encoding="utf-8", errors="replace") as handle:
                if not handle.read().startswith("git"):
                    continue
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            continue  # gone meanwhile, or not ours to look at
        if cwd == root or cwd.startswith(root + os.sep):
            return True
    return False


class CheckoutRefresher:
    """Refreshes a checkout in the background after commits, and before the process exits."""

    def __init__(self, archive_dir: str, checkout_dir: str):
        self.archive_dir = archive_dir
        self.checkout_dir = checkout_dir
        self.last_state = ""
        self.worker = Debounced(f"gitmail-checkout:{os.path.basename(os.path.dirname(checkout_dir))}",
                                self._run, delay=_QUIET, max_wait=_MAX_WAIT)
        _live.add(self)

    def on_commit(self, old: str | None, new: str) -> None:
        self.worker.poke()

    def poke(self) -> None:
        """Follow a move of ``main`` this process did not make (a push, another process)."""
        self.worker.poke()

    def _run(self) -> None:
        if not os.path.isdir(self.archive_dir):
            return  # the project was deleted
        self.last_state = refresh(self.archive_dir, self.checkout_dir)
        if self.last_state == "busy" and not self.worker.stopping:
            self.worker.poke()  # a human's git holds the index: try again after the pause

    def finish(self) -> None:
        """Stop the worker, running a refresh still owed in this thread (a process about to exit)."""
        self.worker.finish()


_live: weakref.WeakSet[CheckoutRefresher] = weakref.WeakSet()


@atexit.register
def finish_all() -> None:
    """Run every refresh still owed in this process, so a short-lived command leaves its checkout current."""
    for refresher in list(_live):
        refresher.finish()
