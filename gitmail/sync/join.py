"""A new machine joins a project from a hub with a recent window: ``gitmail clone URL --since 7d``; ``gitmail deepen``.

**What is fetched.** Two partial fetches of git's own, together:

- ``--shallow-since``: history from the window's first day on. Each commit
  before it is left out; the newest commits left out are replaced by their
  children, the *boundary* commits (git's shallow clone);
- ``--filter=blob:none``: the trees of that history without any file, then
  in one more request the files of the window, by id: every record of the
  undated folders (profiles, contacts, products, nodes, ...) and the dated
  records from the first day on, plus both versions of every record a
  commit after the boundary changes (so each can be judged in full).

The history cut alone saves little in an archive whose records are added
and rarely changed: the boundary's tree still names every record ever
written. The file filter is what keeps an archive of a million messages to
the window's share. A hub that does not serve filters (``git daemon``
without ``uploadpack.allowFilter``) sends every file of the boundary
instead; the join still works, whole below the history cut.

**Trust.** The hub joined from is *pinned*: its URL and the boundary commits
are kept in local state (:mod:`gitmail.storage.boundary`), and only those
boundaries are trusted as the hub's history; every commit after them is
judged by the who-may-write rule and the record checks before ``main``
takes it, exactly as a sync judges (a forged commit is kept aside in the
quarantine ref and reported). Later syncs keep the window
(:mod:`.partial`).

**Deepening.** ``gitmail deepen PROJECT --since 30d`` (or a day, or ``all``)
moves the first day back: the history and files between the new and the old
first day are fetched the same way, the boundary it now stops at is pinned
(fetched from the same hub), the history brought in is judged by the
who-may-write rule and its findings reported (it is the history ``main``
already builds on, so it cannot be refused, only reported, as ``gitmail
verify`` does), and the index takes in the records that came.
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import time
import uuid
from collections.abc import Callable

import pygit2

from gitmail.index import indexer_for
from gitmail.model.errors import ALREADY_EXISTS, SYNC_FAILED, GitmailError, invalid
from gitmail.model.records import PROJECT_PATH, Project
from gitmail.model.results import Result, result
from gitmail.storage.boundary import (
    BoundaryPin,
    is_partial,
    read_pin,
    shallow_commits,
    window_entries,
    write_pin,
)
from gitmail.storage.checkout import protect_archive
from gitmail.storage.engine import Archive
from gitmail.storage.hookfiles import install_archive_hooks
from gitmail.storage.store import Store
from gitmail.storage.verify import Finding, verify
from gitmail.storage.window import Window

from .findings import SYNC_RULES
from .partial import commit_files, fetch_files
from .remotes import NODE_REFS, git, tracking_nodes, tracking_ref
from .syncer import MAIN, Progress, ProjectSync, sync_project

Counter = Callable[[int, int], None]  # (done, of): the index's progress


@result
class Joined(Result):
    """A project joined from a hub: what was fetched, the boundary pinned, the sync that judged it, the index.

    What was left on the hub is not counted: counting it would walk every
    folder the archive ever had, which is what a window join avoids.
    """

    project: str
    remote: str
    url: str
    since: str  # the window's first day (``YYYY-MM-DD``), or ``all`` for a whole clone
    boundary: list[str]  # the boundary commits pinned (trusted as the hub's history)
    partial: bool  # whether the hub served the window's files alone (else every file of the boundary came)
    commits: int  # commits held after the join
    files_fetched: int  # window files fetched by id after the trees
    sync: ProjectSync
    messages_indexed: int | None  # None when the index was left to catch up later
    seconds: float


@result
class Deepened(Result):
    """A shallow archive's history moved back: the new first day, what came, and what judging it found."""

    project: str
    since: str
    boundary: list[str]
    commits_in: int
    files_fetched: int
    findings: list[Finding]
    messages_indexed: int
    seconds: float


def first_day(window: Window, today: str) -> str | None:
    """The window's first day as ``YYYY-MM-DD`` counted back from ``today`` (``YYYY-MM-DD``); None: everything."""
    if window.everything:
        return None
    if window.since is not None:
        return window.since.replace("/", "-")
    assert window.days is not None
    return (dt.date.fromisoformat(today) - dt.timedelta(days=window.days - 1)).isoformat()


def _shallow_fetch(git_dir: str, remote: str, first: str | None) -> tuple[str, bool]:
    """Fetch main and the machine refs from day ``first`` on, without files: (how it was cut, filter honoured)."""
    specs = [f"+{MAIN}:{tracking_ref(remote)}", f"+{NODE_REFS}/*:{tracking_nodes(remote)}/*"]
    cut = [f"--shallow-since={first} 00:00:00 +0000"] if first else []
    extra = ["--filter=blob:none"] if first else []
    proc = git(git_dir, "fetch", "--quiet", "--no-tags", *cut, *extra, remote, *specs, check=False)
    how = first or "all"
    if proc.returncode != 0 and "no commits selected" in proc.stderr:
        # Nothing was written since the first day: the newest commit alone, its date the first day.
        proc = git(git_dir, "fetch", "--quiet", "--no-tags", "--depth=1", *extra, remote, *specs, check=False)
        how = "tip"
    if proc.returncode != 0:
        empty = "couldn't find remote ref" in proc.stderr
        raise GitmailError(SYNC_FAILED, ("the hub holds no project yet: create it on one machine and push it with "
                                         "`gitmail remote add` and `gitmail sync`" if empty else
                                         f"git fetch failed: {' '.join(proc.stderr.split())}; check the URL and "
                                         "your access to the hub, then clone again"), {"remote": remote})
    return how, "filtering not recognized" not in proc.stderr


def window_files(repo: pygit2.Repository, tree: pygit2.Tree, first: str | None) -> set[str]:
    """The ids of the files of ``tree`` a window from day ``first`` on holds (undated folders whole)."""
    return {str(oid) for _, oid in window_entries(repo, tree, first)}


def clone(store: Store, url: str, *, since: str = "7d", remote: str = "hub", progress: Progress | None = None,
          index: bool = True, records_progress: Counter | None = None,
          search_progress: Counter | None = None) -> Joined:
    """Join the project a hub holds, from the window ``since`` (``7d``, ``2026-11-01`` or ``all``); see module docs.

    With ``index``, the project's index takes in what came before this
    returns (records first, then search, each reporting its progress).
    """
    started = time.monotonic()
    if not isinstance(url, str) or not url.strip() or url.startswith("-"):
        raise invalid("the hub URL must be a git URL or path", field="url")
    first = first_day(Window.parse(since), store.clock.now_ts()[:10])
    staging = os.path.join(store.home, "projects", f".join-{uuid.uuid4().hex[:12]}")
    git_dir = os.path.join(staging, "archive.git")
    try:
        joined = _fetch_into(store, git_dir, url, remote, first)
        slug = store.resolve(joined.human_key)
        if store.exists(slug):
            raise GitmailError(ALREADY_EXISTS, f"project {joined.human_key} is on this machine already: `gitmail "
                               f"sync {slug}` brings what is new, `gitmail deepen {slug}` older history",
                               {"project": slug})
        target = store.paths(slug).archive
        os.makedirs(os.path.dirname(target), exist_ok=True)
        os.rename(git_dir, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    sync = sync_project(store, slug, remote, progress=progress, catch_up_index=False)
    indexed = None
    if index:
        indexed = indexer_for(store).project(slug).reindex(progress=search_progress, records_progress=records_progress)
    return Joined(project=slug, remote=remote, url=url, since=joined.since, boundary=joined.boundary,
                  partial=joined.partial, commits=_count(store.archive(slug)), files_fetched=joined.fetched,
                  sync=sync.to_result(), messages_indexed=indexed, seconds=round(time.monotonic() - started, 3))


class _Fetched:
    """What the staging fetch brought: the project's key, the cut, the boundary, the files fetched."""

    def __init__(self, human_key: str, since: str, boundary: list[str], partial: bool, fetched: int):
        self.human_key, self.since, self.boundary = human_key, since, boundary
        self.partial, self.fetched = partial, fetched


def _fetch_into(store: Store, git_dir: str, url: str, remote: str, first: str | None) -> _Fetched:
    """Fetch the hub's project into a new bare repository at ``git_dir``, as an archive of this store."""
    pygit2.init_repository(git_dir, bare=True, initial_head="main")
    protect_archive(git_dir)
    install_archive_hooks(git_dir)
    git(git_dir, "remote", "add", remote, url)
    if first is not None:
        git(git_dir, "config", f"remote.{remote}.promisor", "true")
        git(git_dir, "config", "extensions.partialClone", remote)
    how, filtered = _shallow_fetch(git_dir, remote, first)
    if first is not None and not filtered:  # the hub sent every file: nothing is missing, nothing to fetch later
        git(git_dir, "config", "--unset", "extensions.partialClone")
        git(git_dir, "config", "--unset", f"remote.{remote}.promisor")
    repo = pygit2.Repository(git_dir)
    tip = str(repo.references[tracking_ref(remote)].resolve().target)
    tips = [tip] + [str(repo.references[name].resolve().target) for name in repo.references
                    if name.startswith(tracking_nodes(remote) + "/")]
    boundary = sorted(shallow_commits(git_dir))
    if how == "tip":  # a quiet hub: the window is the day of its newest commit
        first = dt.datetime.fromtimestamp(repo[tip].peel(pygit2.Commit).commit_time, dt.UTC).date().isoformat()
    fetched = 0
    if is_partial(repo):
        wanted: set[str] = set()
        for commit in tips:
            wanted |= window_files(repo, repo[commit].peel(pygit2.Tree), first)
            wanted |= commit_files(repo, commit, boundary)
        fetched = fetch_files(git_dir, repo, remote, wanted)
        repo = pygit2.Repository(git_dir)
    data = repo[tip].peel(pygit2.Tree)[PROJECT_PATH].peel(pygit2.Blob).data
    project = Project.from_bytes(data, PROJECT_PATH)
    if boundary:
        write_pin(git_dir, BoundaryPin(remote=remote, url=url, since=first or "all", pinned_at=store.clock.now_ts(),
                                       commits=boundary))
    return _Fetched(project.human_key, first or "all", boundary, is_partial(repo), fetched)


def deepen(store: Store, project: str, *, since: str = "all", progress: Counter | None = None,
           records_progress: Counter | None = None) -> Deepened:
    """Move a shallow archive's first day back to ``since`` (``30d``, a day, or ``all``); see the module docs."""
    started = time.monotonic()
    slug = store.resolve(project)
    archive = store.archive(slug)
    pin = read_pin(archive.git_dir)
    old = shallow_commits(archive.git_dir)
    if pin is None or not old:
        raise invalid("this archive holds its whole history already; nothing to deepen", field="project")
    first = first_day(Window.parse(since), store.clock.now_ts()[:10])
    if first is not None and first >= pin.since:
        raise invalid(f"the archive holds history from {pin.since} on already; give an earlier day, a longer "
                      "window or all", field="since")
    before = _count(archive)
    extra = ["--filter=blob:none"] if is_partial(archive.repo) else []
    how = [f"--shallow-since={first} 00:00:00 +0000"] if first else ["--unshallow"]
    git(archive.git_dir, "fetch", "--quiet", "--no-tags", *how, *extra, pin.remote,
        f"+{MAIN}:{tracking_ref(pin.remote)}")
    archive.follow_shallow()
    new = shallow_commits(archive.git_dir)
    pin.commits = sorted({*pin.commits, *new})
    pin.since = first or "all"
    write_pin(archive.git_dir, pin)
    repo = archive.repo
    tip = archive.tip()
    assert tip is not None
    fetched = 0
    if is_partial(repo):
        wanted = window_files(repo, repo[tip].peel(pygit2.Tree), first)
        for boundary in old - new:  # no longer boundaries: what each of them changed can be judged now
            wanted |= commit_files(repo, boundary, sorted(new))
        fetched = fetch_files(archive.git_dir, repo, pin.remote, wanted)
        if first is None:  # every file is here now: an archive like any other (and its checkout can be made)
            git(archive.git_dir, "config", "--unset", "extensions.partialClone")
            git(archive.git_dir, "config", "--unset", f"remote.{pin.remote}.promisor")
            archive.renew_handles()
            store.poke_checkout(slug)
    judged = verify(archive, slug, store.paths(slug).derived, rules=SYNC_RULES)
    indexed = indexer_for(store).project(slug).reindex(progress=progress, records_progress=records_progress)
    return Deepened(project=slug, since=pin.since, boundary=sorted(new), commits_in=_count(archive) - before,
                    files_fetched=fetched, findings=judged.findings, messages_indexed=indexed,
                    seconds=round(time.monotonic() - started, 3))


def _count(archive: Archive) -> int:
    """The commits of ``main`` this archive holds."""
    tip = archive.tip()
    return sum(1 for _ in archive.repo.walk(pygit2.Oid(hex=tip))) if tip else 0
