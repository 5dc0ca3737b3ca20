"""How catch-up finds what changed: ancestry and tree diffs, checked against real git."""

from __future__ import annotations

import os
import subprocess

import pygit2
import pytest

from gitmail.index.changes import diff, is_ancestor, listing
from gitmail.model.ids import new_id


def _git(repo_dir: str, *args: str) -> str:
    return subprocess.run(["git", "-C", repo_dir, *args], capture_output=True, text=True, check=True).stdout.strip()


def _commit(repo_dir: str, path: str, text: str) -> str:
    full = f"{repo_dir}/{path}"
    subprocess.run(["mkdir", "-p", full.rsplit("/", 1)[0]], check=True)
    with open(full, "w", encoding="utf-8") as handle:
        handle.write(text)
    _git(repo_dir, "add", "-A")
    _git(repo_dir, "commit", "-qm", f"{path}: {text[:20]}")
    return _git(repo_dir, "rev-parse", "HEAD")


def _write(repo_dir: str, files: dict[str, str]) -> None:
    """Write each file (its folders made as needed) into the work tree, uncommitted."""
    for path, text in files.items():
        full = f"{repo_dir}/{path}"
        os.makedirs(full.rsplit("/", 1)[0], exist_ok=True)
        with open(full, "w", encoding="utf-8") as handle:
            handle.write(text)


def _repo(tmp_path) -> str:
    tmp_path.mkdir(parents=True, exist_ok=True)
    repo_dir = str(tmp_path / "work")
    _git(str(tmp_path), "init", "-q", "-b", "main", repo_dir)
    _git(repo_dir, "config", "user.name", "t")
    _git(repo_dir, "config", "user.email", "t@example.org")
    return repo_dir


@pytest.mark.slow  # hundreds of commits
def test_ancestry_along_first_parents_beyond_the_short_walk_and_through_merges(tmp_path):
    repo_dir = _repo(tmp_path)
    chain = [_commit(repo_dir, "agents/A/profile.md", f"v{i}\n") for i in range(80)]
    _git(repo_dir, "checkout", "-qb", "side", chain[76])
    side = [_commit(repo_dir, "agents/B/profile.md", f"s{i}\n") for i in range(3)]
    _git(repo_dir, "checkout", "-q", "main")
    _git(repo_dir, "merge", "-q", "--no-ff", "-m", "merge side", "side")
    merge = _git(repo_dir, "rev-parse", "HEAD")
    after = [_commit(repo_dir, "agents/A/profile.md", f"w{i}\n") for i in range(70)]
    unrelated_dir = _repo(tmp_path / "other")
    lone = _commit(unrelated_dir, "x.md", "x\n")
    repo = pygit2.Repository(repo_dir)

    assert is_ancestor(repo, chain[-1], chain[-1])
    assert is_ancestor(repo, chain[-2], chain[-1])  # one step
    assert is_ancestor(repo, chain[0], chain[-1])  # beyond the short walk
    assert is_ancestor(repo, side[0], after[-1])  # only through the merge's second parent, far down
    assert is_ancestor(repo, side[-1], merge)  # the second parent itself
    assert not is_ancestor(repo, chain[-1], chain[-2])  # newer is not an ancestor of older
    assert not is_ancestor(repo, after[-1], side[-1])
    assert not is_ancestor(repo, side[-1], chain[-1])  # a side branch not merged into it
    assert not is_ancestor(repo, lone, chain[-1])  # not even in this repository
    for old, new in [(chain[0], after[-1]), (side[1], chain[40]), (merge, after[3]), (after[3], merge),
                     (side[0], merge), (side[0], after[2])]:
        expected = subprocess.run(["git", "-C", repo_dir, "merge-base", "--is-ancestor", old, new]).returncode == 0
        assert is_ancestor(repo, old, new) is expected


def test_ancestry_through_a_merge_in_a_short_history(tmp_path):
    repo_dir = _repo(tmp_path)
    chain = [_commit(repo_dir, "agents/A/profile.md", f"v{i}\n") for i in range(4)]
    _git(repo_dir, "checkout", "-qb", "side", chain[1])
    side = [_commit(repo_dir, "agents/B/profile.md", f"s{i}\n") for i in range(2)]
    _git(repo_dir, "checkout", "-q", "main")
    _git(repo_dir, "merge", "-q", "--no-ff", "-m", "merge side", "side")
    tip = _commit(repo_dir, "agents/A/profile.md", "after\n")
    repo = pygit2.Repository(repo_dir)
    assert is_ancestor(repo, side[0], tip)  # the first-parent line reaches the root without it
    assert not is_ancestor(repo, tip, side[0])


def test_diff_lists_exactly_the_records_git_reports_changed(tmp_path):
    repo_dir = _repo(tmp_path)
    ids = [new_id() for _ in range(302)]
    day = f"{repo_dir}/messages/2026/12/01"
    subprocess.run(["mkdir", "-p", day], check=True)
    for i in range(300):  # a busy day folder
        with open(f"{day}/{ids[i]}.md", "w", encoding="utf-8") as handle:
            handle.write(f"message {i}\n")
    base = _commit(repo_dir, "notes.txt", "first\n")
    _commit(repo_dir, f"messages/2026/12/01/{ids[300]}.md", "new\n")
    _commit(repo_dir, f"messages/2026/12/01/{ids[50]}.md", "changed\n")
    _git(repo_dir, "rm", "-q", f"messages/2026/12/01/{ids[100]}.md")
    _git(repo_dir, "commit", "-qm", "delete one")
    _commit(repo_dir, f"agents/A/inbox/2026/12/01/{ids[300]}.md", "copy\n")
    _commit(repo_dir, "agents/A/notes/scratch.md", "not a record\n")
    _commit(repo_dir, "notes.txt", "not a record\n")
    tip = _git(repo_dir, "rev-parse", "HEAD")
    repo = pygit2.Repository(repo_dir)

    found = {(change.path, change.role, change.blob) for change in diff(repo, base, tip)}
    expected = set()
    for line in _git(repo_dir, "diff", "--raw", "--no-abbrev", "--no-renames", base, tip).splitlines():
        meta, path = line.split("\t")
        new_blob, status = meta.split()[3], meta.split()[4]
        if path.startswith(("messages/", "agents/A/inbox/")):
            role = "message" if path.startswith("messages/") else "inbox"
            expected.add((path, role, None if status == "D" else new_blob))
    assert found == expected and len(found) == 4
    everything = {change.path for change in listing(repo, tip)}
    tracked = set(_git(repo_dir, "ls-files", "messages", "agents/A/inbox").splitlines())
    assert everything == tracked


def test_what_the_engine_recorded_of_its_commits_is_what_comparing_trees_finds(tmp_path):
    from gitmail import Archive, Change
    from gitmail.index.changes import recorded_changes
    from gitmail.index.history import commit_rows
    from gitmail.model.records import inbox_path, message_path, outbox_path

    archive = Archive.init(str(tmp_path / "archive.git"), durable=False, maintain=False)
    ids = [new_id() for _ in range(6)]
    steps = [
        lambda c: c.put(message_path(ids[0]), b"one").put(inbox_path("Blue", ids[0]), b"one"),
        lambda c: c.put(message_path(ids[1]), b"two").put(outbox_path("Red", ids[1]), b"two")
                   .put("agents/Blue/journal/2026/01/01/x.md", b"not derived"),
        lambda c: c.put(message_path(ids[0]), b"one, edited").delete(inbox_path("Blue", ids[0])),
        lambda c: c.put(message_path(ids[2]), b"three").delete(message_path(ids[2])),  # there and gone again
        lambda c: c.delete(message_path(ids[1])).put(inbox_path("Green", ids[3]), b"four"),
    ]
    tips = [archive.transact(lambda snap: Change("start").put("project.yaml", b"p")).commit]
    for step in steps:
        tips.append(archive.transact(lambda snap, step=step: step(Change("step"))).commit)
    repo = archive.repo
    for i in range(len(tips)):
        for j in range(i + 1, len(tips)):
            recorded = recorded_changes(archive, repo, tips[i], tips[j])
            assert recorded == list(diff(repo, tips[i], tips[j])), (i, j)
    for tip in tips[1:]:
        commit = repo[tip]
        assert commit_rows(repo, commit, archive.changes_of) == commit_rows(repo, commit)
    assert archive.changes_of("0" * 40) is None
    assert recorded_changes(Archive(archive.path, maintain=False), repo, tips[0], tips[-1]) is None  # not made here


def test_a_full_listing_is_the_tree_walk_from_nothing(tmp_path):
    """``listing`` reads ``git ls-tree``; it must give what walking the trees gives, record for record, in order."""
    repo_dir = _repo(tmp_path)
    ids = sorted(new_id() for _ in range(6))
    files = {
        "project.yaml": "name: p\n",
        "notes.txt": "not a record\n",
        f"messages/2026/12/01/{ids[0]}.md": "m0\n",
        f"messages/2026/12/01/{ids[1]}.md": "m1\n",
        f"messages/2026/12/02/{ids[2]}.md": "m2\n",
        f"agents/Blue/inbox/2026/12/01/{ids[0]}.md": "m0\n",
        f"agents/Blue/outbox/2026/12/02/{ids[2]}.md": "m2\n",
        f"agents/Blue/receipts/2026/12/01/{ids[0]}.yaml": "read_at: x\n",
        "agents/Blue/profile.yaml": "name: Blue\n",
        f"agents/Blue/journal/2026/12/01/{ids[3]}.md": "not derived\n",
        f"agents/Blue/notes/inbox/{ids[4]}.md": "a folder named inbox deeper down\n",
        f"agents/Blue.x/inbox/2026/12/01/{ids[1]}.md": "m1\n",
        "agents/Blue.x/profile.yaml": "name: x\n",
        "agents/Blüe/profile.yaml": "name: Blüe\n",
        f"reservations/2026/12/01/{ids[5]}.yaml": "r\n",
        "reservations.md": "a file sorting after the folder of the same stem\n",
        "messages.old/x.md": "not records\n",
    }
    _write(repo_dir, files)
    tip = _commit(repo_dir, "agents/Red/profile.yaml", "name: Red\n")
    repo = pygit2.Repository(repo_dir)

    walked = diff(repo, None, tip)
    assert listing(repo, tip) == walked
    assert {change.role for change in walked} == {"message", "inbox", "outbox", "receipt", "agent", "reservation"}
    assert listing(repo, None) == []


def test_a_change_wider_than_the_walk_is_what_walking_every_folder_finds(tmp_path):
    """A diff past WALK_TREES folders comes from ``git diff-tree``: the same records, roles, blobs and order."""
    import sys

    from gitmail.index import changes

    repo_dir = _repo(tmp_path)
    ids = sorted(new_id() for _ in range(4))
    before = {
        f"messages/2026/12/01/{ids[0]}.md": "m0\n",
        f"messages/2026/12/01/{ids[1]}.md": "m1\n",
        f"agents/Blue/inbox/2026/12/01/{ids[0]}.md": "m0\n",
        "agents/Blue/profile.yaml": "name: Blue\n",
        f"reservations/2026/12/01/{ids[2]}.yaml": "r\n",
    }
    _write(repo_dir, before)
    base = _commit(repo_dir, "notes.txt", "first\n")
    arrived = [new_id() for _ in range(changes.WALK_TREES // 4)]
    for n, mid in enumerate(arrived):  # each in its own agent's folders: far more folders than the walk visits
        _write(repo_dir, {path: f"{path}\n" for path in (
            f"messages/2026/12/02/{mid}.md", f"agents/A{n}/inbox/2026/12/02/{mid}.md",
            f"agents/A{n}/receipts/2026/12/02/{mid}.yaml", f"agents/A{n}/journal/2026/12/02/{mid}.md")})
    with open(f"{repo_dir}/messages/2026/12/01/{ids[1]}.md", "w", encoding="utf-8") as handle:
        handle.write("changed\n")
    _git(repo_dir, "rm", "-q", f"agents/Blue/inbox/2026/12/01/{ids[0]}.md", f"reservations/2026/12/01/{ids[2]}.yaml")
    os.chmod(f"{repo_dir}/messages/2026/12/01/{ids[0]}.md", 0o755)  # a mode change alone
    tip = _commit(repo_dir, "agents/Blue/profile.yaml", "name: Blue\nstatus: busy\n")
    repo = pygit2.Repository(repo_dir)

    walked = changes.fold_moves(changes._compare(repo, changes._root(repo, base), changes._root(repo, tip), "",
                                                 None, [sys.maxsize]))
    assert changes._wide_diff(repo, changes._root(repo, base), changes._root(repo, tip)) == walked
    assert diff(repo, base, tip) == walked
    assert len(walked) == 3 * len(arrived) + 5  # arrivals, a change, a mode change, two deletions, a profile
    assert {(c.role, c.blob) for c in walked if c.path.startswith("reservations/")} == {("reservation", None)}
    assert diff(repo, tip, base) == changes.fold_moves(
        changes._compare(repo, changes._root(repo, tip), changes._root(repo, base), "", None, [sys.maxsize]))
