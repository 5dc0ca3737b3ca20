"""What a repository accepts by ``git push``: the ``pre-receive`` check of hubs and archives.

Two kinds of repository receive pushes: a hub (a bare repository machines
share an archive through) and each archive itself (pushes from the human
checkout beside it). Both run ``gitmail hook pre-receive``, which calls
:func:`check_push`; a refused push leaves the repository unchanged and
names each file, the reason, and what to do instead.

Every ref a push moves is checked, whatever its name (``main``, the
machines' own refs ``refs/gitmail/nodes/*``, a stray branch): what the new
tip adds over its merge base with the current ``main`` goes through the
record checker (:class:`gitmail.storage.recordcheck.Checker`), and every
commit it brings must be signed by a node of the project allowed to write
what that commit writes (:mod:`gitmail.storage.authorship`; a person pushing
by hand signs with the key ``gitmail nodes add --human`` registered). For ``main``
that base is its current tip (pushes to it are fast-forwards). For a
machine's ref it is the last ``main`` that machine merged, so records that
reached ``main`` since then do not count as deleted: several machines can
push at once and every one of them is judged by what it adds. Deleting
``main`` is refused; other refs may be dropped (hubs also deny deletions by
configuration), and a ref must name a commit.
"""

from __future__ import annotations

import os

import pygit2

from gitmail.storage.authorship import Trust, as_rejection, judge_range
from gitmail.storage.nodes import keyring, read_pins
from gitmail.storage.rawdiff import NO_ID
from gitmail.storage.recordcheck import Checker, Rejection
from gitmail.storage.snapshot import Snapshot
from gitmail.storage.store import default_home

from .findings import SYNC_RULES

MAIN = "refs/heads/main"


def open_receiving(git_dir: str) -> pygit2.Repository:
    """The repository as a pre-receive hook must see it: with the pushed objects still in quarantine."""
    repo = pygit2.Repository(git_dir)
    for variable in ("GIT_QUARANTINE_PATH", "GIT_OBJECT_DIRECTORY"):
        extra = os.environ.get(variable)
        if extra and os.path.isdir(extra):
            repo.odb.add_disk_alternate(os.path.abspath(extra))
    return repo


def check_update(checker: Checker, main: str | None, old: str, new: str, ref: str) -> list[Rejection]:
    """Problems with moving ``ref`` from ``old`` to ``new`` while ``main`` is at ``main`` (empty: acceptable)."""
    if new == NO_ID:
        if ref == MAIN:
            return [Rejection(ref, "deleting main would delete the whole archive for everyone",
                              "nothing to do: main is never deleted")]
        return []
    commit = commit_of(checker.repo[new])
    if commit is None:
        return [Rejection(ref, f"names a {checker.repo[new].type_str}, not a commit", "push commits only")]
    return checker.check_commit(str(commit.id), main) + signed_by_writers(checker.repo, main, old, str(commit.id))


def signed_by_writers(repo: pygit2.Repository, main: str | None, old: str, tip: str) -> list[Rejection]:
    """Every commit the push brings is signed by a node of the project allowed to write what it writes.

    The commits judged are those neither ``main`` nor the ref's old value
    reaches; the keys known are ``main``'s, with a node trusted on first use
    when its record arrives in a commit its own key signs, unless the machine
    that receives the push pinned another key under that node's name
    (``gitmail nodes pin``, kept in its ``$GITMAIL_HOME``).
    """
    hide = [commit for commit in (main, old) if commit and commit != NO_ID and commit in repo]
    trust = Trust(keyring(Snapshot(repo, main)), read_pins(default_home()))
    judged = judge_range(repo, tip, hide, trust, rules=SYNC_RULES)
    return [as_rejection(refusal) for refusal in judged.refusals]


def commit_of(obj: pygit2.Object) -> pygit2.Commit | None:
    """The commit an object names (a tag is followed), or None for a tree or blob."""
    try:
        return obj.peel(pygit2.Commit)
    except (ValueError, pygit2.InvalidSpecError):
        return None


def check_push(git_dir: str, lines: list[str], door: str) -> list[Rejection]:
    """Check the ``<old> <new> <ref>`` lines a pre-receive hook reads, at ``door`` (``hub`` or ``archive``)."""
    repo = open_receiving(git_dir)
    checker = Checker(repo, door)
    try:
        main: str | None = str(repo.references[MAIN].target)
    except KeyError:
        main = None
    problems: list[Rejection] = []
    for line in lines:
        parts = line.split()
        if len(parts) == 3:
            problems += check_update(checker, main, *parts)
    return problems


def refusal_lines(problems: list[Rejection], *, limit: int = 50) -> list[str]:
    """What a refused push prints: each file, the reason and what to do, then one line that sums up."""
    lines: list[str] = []
    for problem in problems[:limit]:
        lines += [f"gitmail: refused {problem.path}: {problem.reason}", f"gitmail:   what to do: {problem.advice}"]
    if len(problems) > limit:
        lines.append(f"gitmail: ... and {len(problems) - limit} more")
    lines.append(f"gitmail: push refused ({len(problems)} problem(s)); nothing was changed here")
    lines.append("gitmail: fix your commits (a new commit on top, or git commit --amend) and push again; "
                 "what may be edited by hand: the README, under Editing through git")
    return lines
