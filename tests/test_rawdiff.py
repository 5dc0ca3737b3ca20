"""git's raw diff read in one place: the same changes as libgit2's tree diff, odd paths and modes included."""

from __future__ import annotations

import subprocess

import pygit2

from gitmail.storage.rawdiff import NO_ID, RawChange, diff_trees, read_raw
from gitmail.storage.snapshot import tree_delta


def _commit(repo: pygit2.Repository, files: dict[str, tuple[bytes, int]], parents: list[pygit2.Oid]) -> pygit2.Oid:
    builder = pygit2.IndexEntry
    index = pygit2.Index()
    for path, (data, mode) in files.items():
        index.add(builder(path, repo.create_blob(data), mode))
    tree = index.write_tree(repo)
    who = pygit2.Signature("t", "t@example.org", 1_790_000_000, 0)
    return repo.create_commit(None, who, who, "c", tree, parents)


def test_git_and_libgit2_give_one_answer_for_adds_changes_deletions_modes_and_odd_names(tmp_path):
    repo = pygit2.init_repository(str(tmp_path / "r.git"), bare=True)
    plain, run = pygit2.enums.FileMode.BLOB, pygit2.enums.FileMode.BLOB_EXECUTABLE
    first = _commit(repo, {"a/kept.md": (b"1", plain), "a/changed.md": (b"1", plain), "gone/x.md": (b"1", plain),
                           "mode.sh": (b"1", plain)}, [])
    second = _commit(repo, {"a/kept.md": (b"1", plain), "a/changed.md": (b"2", plain), "mode.sh": (b"1", run),
                            "new folder/näme with space.md": (b"3", plain), "new folder/tab\there.md": (b"4", plain)},
                     [first])
    old, new = repo[first].peel(pygit2.Tree), repo[second].peel(pygit2.Tree)
    by_git = tree_delta(old, new, git_dir=repo.path)
    assert by_git == tree_delta(old, new)
    assert by_git["gone/x.md"] == (None, plain) and by_git["mode.sh"][1] == run
    assert set(by_git) == {"a/changed.md", "gone/x.md", "mode.sh", "new folder/näme with space.md",
                           "new folder/tab\there.md"}
    assert tree_delta(None, new, git_dir=repo.path) == tree_delta(None, new)
    assert tree_delta(old, None, git_dir=repo.path) == tree_delta(old, None)


def test_log_output_interleaves_commit_lines_with_their_changes(tmp_path):
    repo = pygit2.init_repository(str(tmp_path / "r.git"), bare=True)
    plain = pygit2.enums.FileMode.BLOB
    first = _commit(repo, {"x.md": (b"1", plain)}, [])
    second = _commit(repo, {"y.md": (b"2", plain)}, [first])
    out = subprocess.run(["git", "--git-dir", repo.path, "log", "--format=%x00%H", "-z", "--raw", "--root",
                          "--no-abbrev", str(second)], capture_output=True, check=True).stdout
    items = list(read_raw(out))
    assert [item if isinstance(item, str) else (item.path, item.new_id == NO_ID) for item in items] == [
        str(second), ("x.md", True), ("y.md", False), str(first), ("x.md", False)]
    assert isinstance(items[1], RawChange) and items[1].old_mode == plain and items[1].new_mode == 0


def test_a_tree_git_cannot_read_answers_none_for_the_caller_to_compare_itself(tmp_path):
    repo = pygit2.init_repository(str(tmp_path / "r.git"), bare=True)
    assert diff_trees(repo.path, None, "1" * 40) is None
