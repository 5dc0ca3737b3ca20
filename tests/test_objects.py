"""Trees and packs built in memory agree byte for byte with what git writes."""

from __future__ import annotations

import random
import subprocess

import pygit2

from gitmail.storage.objects import (
    BLOB,
    COMMIT,
    MODE_BLOB,
    MODE_TREE,
    TREE,
    PackBuffer,
    Signature,
    Tree,
    encode_commit,
    object_id,
)

# Names whose order is easy to get wrong: a folder sorts as if it ended in "/".
NAMES = ["a", "a.md", "a-b", "a0", "a_", "ab", "b", "B", "é.md", "z", "zz", "2026", "01", "1"]


def _mktree(git_dir: str, entries: dict[str, tuple[int, bytes]]) -> bytes:
    lines = "".join(
        f"{mode:06o} {'tree' if mode == MODE_TREE else 'blob'} {oid.hex()}\t{name}\n"
        for name, (mode, oid) in entries.items()
    )
    made = subprocess.run(["git", "--git-dir", git_dir, "mktree", "--missing"], input=lines.encode(),
                          capture_output=True, check=True)
    oid = made.stdout.decode().strip()
    return subprocess.run(["git", "--git-dir", git_dir, "cat-file", "tree", oid], capture_output=True,
                          check=True).stdout


def test_edited_tree_encodes_exactly_as_git_orders_it(tmp_path):
    git_dir = str(tmp_path / "repo.git")
    pygit2.init_repository(git_dir, bare=True)
    rng = random.Random(7)
    tree, expected = Tree(), {}
    for step in range(300):
        name = rng.choice(NAMES)
        if rng.random() < 0.25:
            tree.pop(name)
            expected.pop(name, None)
        else:
            mode = rng.choice([MODE_BLOB, MODE_TREE])  # a name may turn from file into folder
            oid = object_id(BLOB, str(step).encode())
            tree.set(name, mode, oid)
            expected[name] = (mode, oid)
        if step % 25 == 0 or step == 299:
            assert tree.encode() == _mktree(git_dir, expected)
            assert len(tree) == len(expected)
            assert Tree.decode(tree.encode()).encode() == tree.encode()
            assert Tree(expected).encode() == tree.encode()


def test_a_copy_edits_independently():
    oid = object_id(BLOB, b"x")
    tree = Tree({"a": (MODE_BLOB, oid)})
    copy = tree.copy()
    copy.set("b", MODE_BLOB, oid)
    copy.pop("a")
    assert tree.get("a") == (MODE_BLOB, oid) and tree.get("b") is None
    assert Tree.decode(tree.encode()).get("a") == (MODE_BLOB, oid)


def test_pack_is_read_back_by_git_with_every_object_intact(tmp_path):
    git_dir = str(tmp_path / "repo.git")
    pygit2.init_repository(git_dir, bare=True)
    pack = PackBuffer()
    rng = random.Random(3)
    blobs = [b"", b"small\n", bytes(rng.getrandbits(8) for _ in range(70_000)), b"line\n" * 40_000]
    ids = [pack.add(BLOB, blob) for blob in blobs]
    # Small trees and commits are stored without compression, large trees compressed.
    big = pack.add(TREE, Tree({f"entry-{i:05d}.md": (MODE_BLOB, ids[i % 4]) for i in range(4000)}).encode())
    empty = pack.add(TREE, b"")
    tree = pack.add(TREE, Tree({**{f"f{i}": (MODE_BLOB, oid) for i, oid in enumerate(ids)},
                                "big": (MODE_TREE, big), "empty": (MODE_TREE, empty)}).encode())
    author = Signature("A", "a@example.org", 1_700_000_000)
    commit = pack.add(COMMIT, encode_commit(tree, [], author, author, "all kinds\n"))
    pack.write(f"{git_dir}/objects/pack")
    subprocess.run(["git", "--git-dir", git_dir, "fsck", "--strict", "--no-dangling", commit.hex()], check=True,
                   capture_output=True)
    assert len(subprocess.run(["git", "--git-dir", git_dir, "ls-tree", "-r", commit.hex()], capture_output=True,
                              check=True).stdout.splitlines()) == 4004
    checked = subprocess.run(["git", "--git-dir", git_dir, "verify-pack", "-v",
                              *(str(p) for p in (tmp_path / "repo.git/objects/pack").glob("*.idx"))],
                             capture_output=True, text=True, check=True)
    assert checked.stdout.count(" blob ") == len(blobs) and " tree " in checked.stdout
    for oid, blob in zip(ids, blobs, strict=True):
        assert pygit2.Repository(git_dir)[pygit2.Oid(raw=oid)].data == blob


def test_later_versions_of_a_folder_in_one_pack_are_deltas_git_reads_back(tmp_path):
    git_dir = str(tmp_path / "repo.git")
    pygit2.init_repository(git_dir, bare=True)
    pack = PackBuffer()
    blob = pack.add(BLOB, b"x\n")
    tree = Tree({f"{i:023d}.md": (MODE_BLOB, blob) for i in range(5000)})  # names of one length, as day folders
    tree.mark()
    first = pack.add(TREE, tree.encode())
    versions, parents = [first], []
    for i in (2500, 7000, 7001):  # one replaced in the middle, then two added at the end (new IDs sort last)
        tree.set(f"{i:023d}.md", MODE_BLOB, pack.add(BLOB, b"%d\n" % i))
        data = tree.encode()
        delta = tree.delta_since_mark(data)
        assert delta is not None and len(delta) < 200
        versions.append(pack.add(TREE, data, base=versions[-1], delta=delta))
        tree.mark()
    author = Signature("A", "a@example.org", 1_700_000_000)
    for version in versions:
        parents = [pack.add(COMMIT, encode_commit(version, parents, author, author, "v\n"))]
    pack.write(f"{git_dir}/objects/pack")
    fsck = subprocess.run(["git", "--git-dir", git_dir, "fsck", "--strict", "--no-dangling"], capture_output=True,
                          text=True)
    assert fsck.returncode == 0, fsck.stderr
    listed = subprocess.run(["git", "--git-dir", git_dir, "ls-tree", "--name-only", versions[-1].hex()],
                            capture_output=True, text=True, check=True).stdout.split()
    assert len(listed) == 5002 and listed[-1] == f"{7001:023d}.md"
    verify = subprocess.run(["git", "verify-pack", "-v", *(str(p) for p in (tmp_path / "repo.git/objects/pack").glob(
        "*.idx"))], capture_output=True, text=True, check=True).stdout
    deltas = [line for line in verify.splitlines() if " tree " in line and len(line.split()) == 7]
    assert len(deltas) == 3, "every version after the first is a delta"
    repo = pygit2.Repository(git_dir)
    middle = repo[pygit2.Oid(raw=versions[2])].read_raw()  # libgit2 resolves the chain of deltas too
    assert Tree.decode(middle).get(f"{7000:023d}.md") is not None and Tree.decode(middle).get(f"{7001:023d}.md") is None
