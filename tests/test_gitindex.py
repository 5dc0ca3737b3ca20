"""Entries put into the small part of a split git index, checked by the real git reading it."""

from __future__ import annotations

import os

import pytest

from gitmail.storage import gitindex

from .conftest import git, git_run


def _repo(tmp_path, files: dict[str, str], *, split: bool = True) -> str:
    root = str(tmp_path / "work")
    git("init", "-q", "--initial-branch=main", root)
    if split:
        git("config", "core.splitIndex", "true", cwd=root)
    for name, text in files.items():
        _write(root, name, text)
    git("add", "-A", cwd=root)
    git("commit", "-qm", "start", cwd=root)
    return root


def _write(root: str, name: str, text: str) -> None:
    full = os.path.join(root, name)
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, "w", encoding="utf-8") as handle:
        handle.write(text)


def _entries(root: str, names: list[str]) -> list[tuple[str, int, bytes, os.stat_result]]:
    """What a refresh hands over for files it just wrote (their blobs are in the object store): path, mode, id, stat."""
    out = []
    for name in names:
        blob = git("hash-object", "-w", name, cwd=root).strip()
        out.append((name, 0o100644, bytes.fromhex(blob), os.lstat(os.path.join(root, name))))
    return out


def _staged(root: str) -> dict[str, str]:
    return {line.split("\t")[1]: line.split()[1] for line in git("ls-files", "-s", cwd=root).splitlines()}


def test_new_and_changed_entries_are_what_git_would_record(tmp_path):
    root = _repo(tmp_path, {"a/one.md": "one\n", "a/two.md": "two\n", "b/three.md": "three\n"})
    _write(root, "a/new.md", "new\n")  # not in the index yet
    _write(root, "a/two.md", "two, revised\n")  # in the shared part
    assert gitindex.put_entries(os.path.join(root, ".git"), _entries(root, ["a/new.md", "a/two.md"])) == "done"
    # git's stat check alone (no content comparison, no refresh) finds every file as recorded...
    assert git_run("diff-files", "--quiet", cwd=root).returncode == 0
    # ...and the index holds exactly the tree of the working files.
    assert _staged(root) == {"a/new.md": git("hash-object", "a/new.md", cwd=root).strip(),
                             "a/one.md": git("hash-object", "a/one.md", cwd=root).strip(),
                             "a/two.md": git("hash-object", "a/two.md", cwd=root).strip(),
                             "b/three.md": git("hash-object", "b/three.md", cwd=root).strip()}
    git("commit", "-qm", "next", cwd=root)
    assert git("status", "--porcelain", "--untracked-files=all", cwd=root) == ""
    assert git("ls-tree", "-r", "--name-only", "HEAD", cwd=root).split() == ["a/new.md", "a/one.md", "a/two.md",
                                                                             "b/three.md"]


def test_what_git_itself_put_in_the_small_part_is_kept(tmp_path):
    root = _repo(tmp_path, {"a/one.md": "one\n", "a/two.md": "two\n"})
    _write(root, "a/one.md", "one, by git\n")
    git("add", "a/one.md", cwd=root)  # git records it as a replacement of the shared entry
    _write(root, "c/four.md", "four\n")
    assert gitindex.put_entries(os.path.join(root, ".git"), _entries(root, ["c/four.md"])) == "done"
    staged = _staged(root)
    assert staged["a/one.md"] == git("hash-object", "a/one.md", cwd=root).strip()
    assert staged["c/four.md"] == git("hash-object", "c/four.md", cwd=root).strip()
    assert git_run("diff-files", "--quiet", cwd=root).returncode == 0
    # git writes the index again (and may fold the parts together): nothing is lost.
    git("update-index", "--split-index", cwd=root)
    assert _staged(root) == staged


def test_it_declines_what_git_should_do(tmp_path, monkeypatch):
    plain = _repo(tmp_path / "plain", {"a.md": "a\n"}, split=False)
    _write(plain, "b.md", "b\n")
    assert gitindex.put_entries(os.path.join(plain, ".git"), _entries(plain, ["b.md"])) == "git"
    root = _repo(tmp_path / "split", {"a.md": "a\n"})
    _write(root, "b.md", "b\n")
    lock = os.path.join(root, ".git", "index.lock")
    with open(lock, "w"):
        pass
    before = _staged(root)
    assert gitindex.put_entries(os.path.join(root, ".git"), _entries(root, ["b.md"])) == "busy"
    os.unlink(lock)
    assert _staged(root) == before
    monkeypatch.setattr(gitindex, "SPLIT_LIMIT", 1)
    _write(root, "c.md", "c\n")
    assert gitindex.put_entries(os.path.join(root, ".git"), _entries(root, ["b.md", "c.md"])) == "fold"
    assert _staged(root) == before  # nothing written: git does it


@pytest.mark.parametrize("damage", [b"", b"garbage"])
def test_a_damaged_index_is_left_to_git(tmp_path, damage):
    root = _repo(tmp_path, {"a.md": "a\n"})
    with open(os.path.join(root, ".git", "index"), "r+b") as handle:
        handle.seek(0 if damage else 30)
        handle.write(damage or b"XXXX")
    _write(root, "b.md", "b\n")
    assert gitindex.put_entries(os.path.join(root, ".git"), _entries(root, ["b.md"])) == "git"
