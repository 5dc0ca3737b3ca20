"""Comparing two trees folder by folder: the same answer as a full diff, without opening folders that did not change."""

from __future__ import annotations

import os

import pygit2
from hypothesis import given, settings
from hypothesis import strategies as st

from gitmail.storage.snapshot import tree_delta
from gitmail.storage.treediff import pruned_delta

NAMES = ("a", "b", "a.b", "a-b", "c")


def _tree(repo: pygit2.Repository, files: dict[str, tuple[bytes, int]]) -> pygit2.Tree:
    """A tree holding ``files`` (path -> (content, mode)); a path whose folder is also a file is skipped."""
    index = pygit2.Index()
    taken: set[str] = set()
    for path, (content, mode) in sorted(files.items()):
        parts = path.split("/")
        if any("/".join(parts[:n]) in taken for n in range(1, len(parts))) or any(
                other.startswith(path + "/") for other in taken):
            continue
        taken.add(path)
        index.add(pygit2.IndexEntry(path, repo.create_blob(content), mode))
    return repo[index.write_tree(repo)].peel(pygit2.Tree)


def _full(old: pygit2.Tree, new: pygit2.Tree) -> dict[str, tuple[pygit2.Oid | None, int]]:
    out: dict[str, tuple[pygit2.Oid | None, int]] = {}
    for delta in old.diff_to_tree(new).deltas:
        if delta.status == pygit2.GIT_DELTA_DELETED:
            out[delta.old_file.path] = (None, delta.old_file.mode)
        else:
            out[delta.new_file.path] = (delta.new_file.id, delta.new_file.mode)
    return out


paths = st.lists(st.sampled_from(NAMES), min_size=1, max_size=4).map("/".join)
files = st.dictionaries(paths, st.tuples(st.sampled_from([b"1", b"2", b"3"]),
                                          st.sampled_from([pygit2.GIT_FILEMODE_BLOB,
                                                           pygit2.GIT_FILEMODE_BLOB_EXECUTABLE,
                                                           pygit2.GIT_FILEMODE_LINK])), max_size=14)


@settings(max_examples=300, deadline=None)
@given(files, files)
def test_the_same_changes_as_a_full_diff_in_the_same_order(tmp_path_factory, before, after):
    repo = pygit2.init_repository(str(tmp_path_factory.mktemp("r")), bare=True)
    old, new = _tree(repo, before), _tree(repo, after)
    found = pruned_delta(old, new)
    full = _full(old, new)
    assert found == full
    assert list(found) == list(full), "git's path order"
    assert tree_delta(old, new) == full


def test_a_folder_both_trees_share_is_never_opened(tmp_path):
    """The shared folder's objects are removed from disk: only a comparison that skips equal ids can succeed."""
    repo = pygit2.init_repository(str(tmp_path / "r"), bare=True)
    shared = {f"day/{n:04}.yaml": (b"x%d" % n, pygit2.GIT_FILEMODE_BLOB) for n in range(50)}
    blob = pygit2.GIT_FILEMODE_BLOB
    old = _tree(repo, {**shared, "top/one": (b"1", blob)})
    new = _tree(repo, {**shared, "top/one": (b"2", blob), "top/two": (b"3", blob)})
    day = old["day"].id
    assert new["day"].id == day
    gone = str(day)
    os.remove(os.path.join(repo.path, "objects", gone[:2], gone[2:]))
    fresh = pygit2.Repository(repo.path)
    old, new = fresh[old.id].peel(pygit2.Tree), fresh[new.id].peel(pygit2.Tree)
    expected = {"top/one": (new["top/one"].id, blob), "top/two": (new["top/two"].id, blob)}
    assert pruned_delta(old, new) == expected
    assert tree_delta(old, new) == expected  # libgit2's diff opens the shared folder and fails
