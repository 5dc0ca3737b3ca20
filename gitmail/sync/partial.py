"""Fetching into an archive that joined shallow: the same cut, the files every check needs, a base for each merge.

An archive made by ``gitmail clone URL --since 7d`` (:mod:`.join`) holds
history from its first day on and the files of its window only
(:mod:`gitmail.storage.boundary`). Each later fetch keeps it that way and
brings what the doors need to judge what came:

- the fetch cuts new history at the same first day (``--shallow-since``):
  a machine's ref built on commits older than the window would otherwise
  bring the whole history below it;
- boundary commits the pinned hub sent are added to the pin; one from any
  other remote stays unpinned, and the who-may-write rule refuses it;
- a fetched tip that shares no commit with the local ``main`` (a machine
  that wrote offline since before the window) has the history deepened,
  a step at a time, until they share their merge base: merging against the
  true base is what keeps a purge purged and a record changed once, where a
  merge with no base would bring back what the other side deleted;
- every file the checks and the merge read is fetched: both versions of
  each record a fetched commit changes (so every commit after the boundary
  is judged in full), and the base's, ours and theirs of each record both
  sides changed.

Files are fetched by id in one request (git's protocol v2 serves any object
of the repository), never one by one.
"""

from __future__ import annotations

import pygit2

from gitmail.storage.boundary import is_partial, pinned_boundaries, read_pin, shallow_commits, write_pin
from gitmail.storage.engine import Archive
from gitmail.storage.layout import changed_records
from gitmail.storage.rawdiff import NO_ID, read_raw
from gitmail.storage.treeedit import changed_files

from .remotes import git, git_output

_FILE_MODES = frozenset({0o100644, 0o100755, 0o120000})  # files and links; a gitlink names a commit
DEEPEN_STEPS = (64, 1024, 16384)  # commits added below the boundary per step, before the history is fetched whole


def joined_from(archive: Archive, tip: str) -> str | None:
    """The newest pinned boundary ``tip`` reaches: what a first join's changes are counted from (None: none).

    The records a window join names below its boundary were written and
    judged on the hub; counting, clocking and looking through them again
    would cost as much as the whole archive.
    """
    pinned = pinned_boundaries(archive.git_dir)
    if not pinned:
        return None
    walker = archive.repo.walk(pygit2.Oid(hex=tip), pygit2.enums.SortMode.TIME)
    return next((str(commit.id) for commit in walker if str(commit.id) in pinned), None)


def is_shallow(archive: Archive) -> bool:
    """Whether the archive holds cut-off history (boundary commits whose parents it never fetched)."""
    return bool(shallow_commits(archive.git_dir))


def fetch_options(archive: Archive) -> list[str]:
    """What a fetch into this archive adds: the window's cut, and no files of history below it."""
    pin = read_pin(archive.git_dir)
    if pin is None or not is_shallow(archive) or pin.since == "all":
        return []
    options = [f"--shallow-since={pin.since} 00:00:00 +0000"]
    return options + ["--filter=blob:none"] if is_partial(archive.repo) else options


def pin_new_boundaries(archive: Archive, remote: str) -> None:
    """Trust the boundary commits a fetch from the pinned hub brought (those from any other remote stay unpinned)."""
    pin = read_pin(archive.git_dir)
    if pin is None or pin.remote != remote:
        return
    new = shallow_commits(archive.git_dir) - set(pin.commits)
    if new:
        pin.commits = sorted({*pin.commits, *new})
        write_pin(archive.git_dir, pin)


def reach_bases(archive: Archive, remote: str, tips: list[str]) -> None:
    """Deepen the history a step at a time until each tip shares a commit with ``main``."""
    for tip in tips:
        for step in (*DEEPEN_STEPS, None):
            ours = archive.tip()
            if ours is None or not is_shallow(archive) or archive.repo.merge_base(ours, tip) is not None:
                break
            how = [f"--deepen={step}"] if step is not None else ["--unshallow"]
            extra = ["--filter=blob:none"] if is_partial(archive.repo) else []
            git(archive.git_dir, "fetch", "--quiet", "--no-tags", "--no-write-fetch-head", *how, *extra, remote)
            archive.follow_shallow()
            pin_new_boundaries(archive, remote)


def commit_files(repo: pygit2.Repository, tip: str, hide: list[str]) -> set[str]:
    """Every file version that the commits of ``tip`` not reached from ``hide`` write or replace.

    One ``git log --raw`` lists each commit's changes over each parent (a
    commit without parents here, a boundary, over nothing), from the trees
    alone: no file is read, so none is fetched by asking. git runs as every
    git that may reach the hub does (:func:`.remotes.git_env`): should it
    need an object the window left out, it asks the hub as a fetch would,
    never a terminal. Should git fail, each commit is compared with each
    parent folder by folder, skipping the folders with the same id on both
    sides.
    """
    listed = git_output(repo.path, "log", "--raw", "-z", "-r", "--root", "--no-renames", "--no-abbrev",
                        "--diff-merges=separate", "--format=", tip, *[f"^{commit}" for commit in hide])
    if listed.returncode == 0:
        return {blob for change in read_raw(listed.stdout) if not isinstance(change, str)
                for mode, blob in ((change.old_mode, change.old_id), (change.new_mode, change.new_id))
                if mode in _FILE_MODES and blob != NO_ID}
    return walked_files(repo, tip, hide)


def walked_files(repo: pygit2.Repository, tip: str, hide: list[str]) -> set[str]:
    """:func:`commit_files` read by libgit2, folder by folder (what git's listing must agree with)."""
    walker = repo.walk(pygit2.Oid(hex=tip), pygit2.enums.SortMode.NONE)
    for hexsha in hide:
        walker.hide(pygit2.Oid(hex=hexsha))
    out: set[str] = set()
    for commit in walker:
        parents: list[bytes | None] = [parent.tree_id.raw for parent in commit.parents] or [None]
        for parent in parents:
            for _, *versions in changed_files(repo, parent, commit.tree_id.raw):
                out.update(entry[1].hex() for entry in versions if entry is not None and entry[0] in _FILE_MODES)
    return out


def merge_files(repo: pygit2.Repository, ours: str | None, theirs: str) -> set[str]:
    """The versions a merge of ``theirs`` into ``ours`` reads: base, ours and theirs of what both sides changed."""
    if ours is None:
        return set()
    base = repo.merge_base(ours, theirs)
    if base is None:
        return set()
    trees = [repo[oid].peel(pygit2.Tree) for oid in (base, pygit2.Oid(hex=ours), pygit2.Oid(hex=theirs))]
    mine, other = changed_records(trees[0], trees[1]), changed_records(trees[0], trees[2])
    held = changed_records(trees[1], trees[0])  # what the base held of each record ours changed
    out: set[str] = set()
    for path in mine.keys() & other.keys():
        out.update(str(blob) for blob in (mine[path], other[path], held.get(path)) if blob is not None)
    return out


def fetch_files(git_dir: str, repo: pygit2.Repository, remote: str, blobs: set[str]) -> int:
    """Fetch the files among ``blobs`` the repository lacks, in one request; how many it fetched."""
    missing = sorted(blob for blob in blobs if pygit2.Oid(hex=blob) not in repo.odb)
    if not missing:
        return 0
    git(git_dir, "-c", "fetch.negotiationAlgorithm=noop", "fetch", "--quiet", "--no-tags",
        "--no-write-fetch-head", "--stdin", remote, stdin="".join(f"{blob}\n" for blob in missing))
    return len(missing)


def prepare(archive: Archive, remote: str, tips: list[str]) -> None:
    """After a fetch into a shallow archive: pin, deepen to merge bases, fetch the files the checks read."""
    archive.follow_shallow()
    if not is_shallow(archive) and not is_partial(archive.repo):
        return
    pin_new_boundaries(archive, remote)
    reach_bases(archive, remote, tips)
    if not is_partial(archive.repo):
        return
    repo, ours = archive.repo, archive.tip()
    hide = [*([ours] if ours else []), *shallow_commits(archive.git_dir)]  # a boundary's own files: never read
    wanted: set[str] = set()
    for tip in tips:
        wanted |= commit_files(repo, tip, hide) | merge_files(repo, ours, tip)
    fetch_files(archive.git_dir, repo, remote, wanted)
