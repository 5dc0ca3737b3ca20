"""The human checkout: files to grep and open, never a way to lose records.

The database is the bare ``archive.git``. Beside it, ``checkout/`` is an
ordinary clone (sharing the archive's objects, so it costs no copy) that a
background refresher fast-forwards to ``main`` shortly after commits pause
(and every second during a long burst). Since the objects are
shared, a refresh needs no fetch: it reads the archive's ``main``, moves
``origin/main`` there and fast-forwards, so only ``git merge --ff-only``
runs, and nothing at all when the checkout is current.

Humans may edit and commit in the checkout. Their commits land on the
checkout's own branch; they reach the database only by ``git push``, which
the archive accepts only as a fast-forward (``receive.denyNonFastForwards``).
A commit made from a stale checkout is therefore rejected on push instead of
silently deleting the records written since: the human pulls (a merge that
keeps both sides) and pushes again. The refresher never moves a checkout
that has local commits, and never overwrites an uncommitted edit.
"""

from __future__ import annotations

import os
import subprocess

from .background import Debounced
from .handles import open_repository

_QUIET = 0.3  # a refresh follows once commits pause this long...
_MAX_WAIT = 1.0  # ...or this long after the first commit of a burst


def _git(*args: str, cwd: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, GIT_TERMINAL_PROMPT="0")
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=check, env=env)


def protect_archive(git_dir: str) -> None:
    """Refuse pushes that rewrite or delete ``main`` in the archive."""
    _git("--git-dir", git_dir, "config", "receive.denyNonFastForwards", "true")
    _git("--git-dir", git_dir, "config", "receive.denyDeletes", "true")


def refresh(archive_dir: str, checkout_dir: str) -> str:
    """Bring the checkout up to the archive's main.

    Returns ``"created"``, ``"updated"``, ``"current"``, or ``"held"`` when
    the human has local commits there or has edited a file that the update
    would change (nothing is touched then). Edits to other files stay as
    they are while the checkout moves on, as with ``git pull``.
    """
    if not os.path.isdir(os.path.join(checkout_dir, ".git")):
        tmp = checkout_dir + ".tmp"
        _git("clone", "-q", "--shared", "--branch", "main", archive_dir, tmp)
        os.replace(tmp, checkout_dir)
        return "created"
    try:
        upstream = open_repository(archive_dir).references["refs/heads/main"].target
    except KeyError:
        return "current"  # nothing committed yet
    repo = open_repository(checkout_dir)
    repo.references.create("refs/remotes/origin/main", upstream, force=True)  # as a fetch would leave it
    head = None if repo.head_is_unborn else repo.head.target
    if head == upstream:
        return "current"
    if head is not None and repo.descendant_of(head, upstream):
        return "held"  # the human's commits are ahead of main: leave them be
    if head is not None and not repo.descendant_of(upstream, head):
        return "held"  # diverged: the human must pull and push
    # A fast-forward keeps uncommitted edits and refuses to overwrite an edited
    # file, so it needs no look at every file first (a full `git status` cost
    # as much as the update itself, and grew with the archive).
    if _git("merge", "-q", "--ff-only", str(upstream), cwd=checkout_dir, check=False).returncode != 0:
        return "held"  # an update would overwrite the human's edits: leave them be
    return "updated"


class CheckoutRefresher:
    """Refreshes a checkout in the background after commits."""

    def __init__(self, archive_dir: str, checkout_dir: str):
        self.archive_dir = archive_dir
        self.checkout_dir = checkout_dir
        self.last_state = ""
        self.worker = Debounced(f"gitmail-checkout:{os.path.basename(os.path.dirname(checkout_dir))}",
                                self._run, delay=_QUIET, max_wait=_MAX_WAIT)

    def on_commit(self, old: str | None, new: str) -> None:
        self.worker.poke()

    def _run(self) -> None:
        self.last_state = refresh(self.archive_dir, self.checkout_dir)
