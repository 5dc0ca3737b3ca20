"""One record checker at every door: a hub's push, a push into an archive, and a sync's fetch.

Every test drives the real doors: the real ``git`` pushing into a hub or an
archive (whose installed ``pre-receive`` hook runs the checker in its own
interpreter), and real syncs fetching from a hub that took a bad push
because it had no checks.
"""

from __future__ import annotations

import glob
import os
import subprocess
import sys
from collections.abc import Callable

import pytest

from gitmail.model.ids import new_id
from gitmail.model.records import Agent, inbox_path, message_path, profile_path
from gitmail.storage.fsck import check_archive
from gitmail.storage.recordcheck import Checker
from gitmail.sync.hookinstall import install_hub
from gitmail.sync.quarantine import quarantine_ref, read_quarantine
from gitmail.sync.remotes import add_remote
from gitmail.sync.syncer import sync_project

from .conftest import git_run, sign_commits
from .sync_helpers import PROJECT, Machine, tree_files

GITMAIL = [sys.executable, "-m", "gitmail"]


def _hub(tmp_path, *, checked: bool) -> str:
    hub = str(tmp_path / "hub.git")
    assert git_run("init", "-q", "--bare", "--initial-branch=main", hub).returncode == 0
    if checked:
        install_hub(hub)
    return hub


def _machines(tmp_path, hub: str, names=("node-a", "node-b")) -> list[Machine]:
    machines = [Machine(str(tmp_path / "m"), name) for name in names]
    machines[0].create_project()
    for machine in machines:
        add_remote(machine.store, PROJECT, "hub", "file://" + hub)
        sync_project(machine.store, PROJECT)
    return machines


def _clone(source: str, target: str, home: str | None = None) -> str:
    """A person's clone of an archive or a hub, signing with the key of the machine at ``home``.

    Without ``home``, a machine of the test (``node-a`` where there is one)
    signs: a person on a machine signs with its key, so what the doors judge
    in these tests is the content, written by a node allowed to write it.
    """
    assert git_run("clone", "-q", source, target).returncode == 0
    if home is None:
        root = os.path.dirname(os.path.abspath(target))
        keys = sorted(glob.glob(os.path.join(root, "**", "node_ed25519"), recursive=True),
                      key=lambda path: ("node-a" not in path, path))
        home = os.path.dirname(os.path.dirname(keys[0])) if keys else None
    if home is not None:
        sign_commits(target, home)
    return target


def _write(root: str, path: str, data: bytes) -> None:
    full = os.path.join(root, path)
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, "wb") as handle:
        handle.write(data)


def push_refuser(archive, clone: str, before: str | None) -> Callable[..., None]:
    """``refused(edit, *expected)``: make ``edit`` in ``clone``, commit it, and check the archive's door refuses the
    push naming each of ``expected``, the archive left at ``before``; the clone is then reset to it."""

    def refused(edit: Callable[[], object], *expected: str) -> None:
        edit()
        _commit(clone)
        pushed = git_run("push", "origin", "HEAD:main", cwd=clone)
        assert pushed.returncode != 0, pushed.stderr
        for text in expected:
            assert text in pushed.stderr, pushed.stderr
        assert archive.tip() == before  # the archive is unchanged
        git_run("reset", "-q", "--hard", "origin/main", cwd=clone)

    return refused


def _commit(clone: str, message: str = "by hand") -> None:
    assert git_run("add", "-A", cwd=clone).returncode == 0
    assert git_run("commit", "-q", "-m", message, cwd=clone).returncode == 0


def _hand_message(subject: str) -> tuple[str, bytes]:
    message_id = new_id()
    text = (f"---\nid: {message_id}\nthread_id: {message_id}\nfrom: BlueLake\nsubject: {subject}\n"
            f"created: 2026-12-01T10:00:00.000Z\nto:\n- GreenCastle\n---\nWritten by hand.\n")
    return message_id, text.encode()


def _tip(git_dir: str, ref: str = "main") -> str:
    proc = git_run("rev-parse", "--verify", "-q", ref, cwd=git_dir)
    return proc.stdout.strip()


# -- the hub ---------------------------------------------------------------------------------

@pytest.mark.slow  # git runs the installed hooks, which start gitmail
def test_hub_checks_every_ref_not_only_main(tmp_path):
    hub = _hub(tmp_path, checked=True)
    (a,) = _machines(tmp_path, hub, names=("node-a",))
    clone = _clone(hub, str(tmp_path / "human"))
    _write(clone, "notes.txt", b"a stray file\n")
    _commit(clone)
    for ref in ("refs/heads/evil", "refs/gitmail/nodes/intruder", "refs/tags/v1"):
        pushed = git_run("push", "origin", f"HEAD:{ref}", cwd=clone)
        assert pushed.returncode != 0, ref
        assert "refused notes.txt: not a path where gitmail keeps records" in pushed.stderr
        assert "what to do:" in pushed.stderr and "nothing was changed here" in pushed.stderr
        assert _tip(hub, ref) == ""
    # A branch holding only valid records is accepted like main would be.
    git_run("reset", "-q", "--hard", "origin/main", cwd=clone)
    good, data = _hand_message("on a branch")
    _write(clone, message_path(good), data)
    _commit(clone)
    assert git_run("push", "origin", "HEAD:refs/heads/side", cwd=clone).returncode == 0


@pytest.mark.slow  # git runs the installed hooks, which start gitmail
def test_the_pushers_environment_cannot_skip_the_hub_check(tmp_path):
    hub = _hub(tmp_path, checked=True)
    _machines(tmp_path, hub, names=("node-a",))
    clone = _clone(hub, str(tmp_path / "human"))
    _write(clone, "notes.txt", b"a stray file\n")
    _commit(clone)
    decoy = tmp_path / "decoy" / "gitmail"
    decoy.mkdir(parents=True)
    (decoy / "__init__.py").write_text("")
    (decoy / "__main__.py").write_text("raise SystemExit(0)\n")  # a 'gitmail' that accepts everything
    before = _tip(hub)
    for env in ({"GITMAIL_PYTHON": "/bin/true"}, {"PYTHONPATH": str(decoy.parent)},
                {"PYTHONHOME": str(tmp_path / "nowhere")}):
        pushed = git_run("push", "origin", "HEAD:main", cwd=clone, env=env)
        assert pushed.returncode != 0 and "refused notes.txt" in pushed.stderr, env
        assert _tip(hub) == before


@pytest.mark.slow  # git runs the installed hooks, which start gitmail
def test_simultaneous_pushes_through_the_real_hub_hook_are_judged_by_what_they_add(tmp_path):
    """The machine that loses the race for main pushes to its own ref, and the real hook accepts it.

    The race is made exact: while B is about to push, A syncs and moves
    the hub's main past what B fetched, so B's push to main is refused as
    not a fast-forward and B pushes to its own ref, which the hook judges
    against the main B merged, not the one A just pushed.
    """
    hub = _hub(tmp_path, checked=True)
    a, b = _machines(tmp_path, hub)
    for round_no in range(3):
        a.send("BlueLake", ["GreenCastle"], f"from a {round_no}")
        b.send("GreenCastle", ["BlueLake"], f"from b {round_no}")
        raced: list[object] = []

        def race(remote: str, step: str, raced: list[object] = raced) -> None:
            if step == "push" and not raced:
                raced.append(sync_project(a.store, PROJECT))

        report = sync_project(b.store, PROJECT, progress=race)
        assert report.exit_code == 0, report.lines()
        assert raced and raced[0].exit_code == 0  # A's sync ran in between and pushed main
        (result,) = report.results
        assert result.pushed_to == "node" and result.error is None
        assert _tip(hub, f"refs/gitmail/nodes/{b.name}") == b.archive.tip()
    for machine in (a, b, a):
        assert sync_project(machine.store, PROJECT).exit_code == 0
    assert tree_files(a.store) == tree_files(b.store)
    assert set(a.sent + b.sent) <= {path.rsplit("/", 1)[1][:-3] for path in tree_files(a.store)
                                    if path.startswith("messages/")}
    assert _tip(hub) == a.archive.tip()


# -- the archive's own receive hook ---------------------------------------------------------------

@pytest.mark.slow  # git runs the installed hooks, which start gitmail
def test_an_archive_refuses_damaging_pushes_from_its_checkout(tmp_path):
    (a,) = [Machine(str(tmp_path / "m"), "node-a")]
    a.create_project()
    kept = a.send("BlueLake", ["GreenCastle"], "keep me")
    archive = a.archive
    hook = os.path.join(archive.git_dir, "hooks", "pre-receive")
    assert os.access(hook, os.X_OK)  # installed when the archive was created, not by `gitmail hooks install`
    clone = _clone(archive.git_dir, str(tmp_path / "checkout"))
    before = archive.tip()

    refused = push_refuser(archive, clone, before)

    profile = os.path.join(clone, profile_path("GreenCastle"))
    with open(profile, encoding="utf-8") as handle:
        text = handle.read()
    refused(lambda: _write(clone, profile_path("GreenCastle"), text.replace("model: m", "model m").encode()),
            f"refused {profile_path('GreenCastle')}: invalid YAML", "what to do: correct the line or field named")
    with open(os.path.join(clone, message_path(kept)), "rb") as handle:
        original = handle.read()
    refused(lambda: _write(clone, message_path(kept), original.replace(b"keep me from", b"changed from")),
            f"refused {message_path(kept)}: a message record is immutable",
            f"git checkout {before[:12]} -- {message_path(kept)}")
    refused(lambda: os.unlink(os.path.join(clone, message_path(kept))),
            f"refused {message_path(kept)}: deleted without a tombstone", "purge_old_messages")
    # A legitimate edit goes through: a profile's free text.
    assert "task_description: ''" in text
    _write(clone, profile_path("GreenCastle"), text.replace("task_description: ''", "task_description: reviews")
           .encode())
    _commit(clone)
    pushed = git_run("push", "origin", "HEAD:main", cwd=clone)
    assert pushed.returncode == 0, pushed.stderr
    agent = archive.snapshot().load(profile_path("GreenCastle"), Agent)
    assert agent.task_description == "reviews"


def test_an_archive_made_before_the_hook_gets_it_when_opened(tmp_path):
    a = Machine(str(tmp_path / "m"), "node-a")
    a.create_project()
    hook = os.path.join(a.archive.git_dir, "hooks", "pre-receive")
    os.unlink(hook)
    reopened = Machine(str(tmp_path / "m"), "node-a")
    reopened.archive  # noqa: B018 - opening the archive is the point
    assert os.access(hook, os.X_OK)


# -- the fetch ---------------------------------------------------------------------------------

def _poison(tmp_path, hub: str, victim: str, kept: str) -> dict[str, str]:
    """Push five kinds of damage and one good message into an unchecked hub; what to expect by path."""
    clone = _clone(hub, str(tmp_path / "poisoner"))
    bad_id = new_id()
    _write(clone, message_path(bad_id), b"---\nid: nope\n---\nbody\n")  # malformed record
    _write(clone, "notes.txt", b"a stray file\n")  # not a record
    path = os.path.join(clone, message_path(kept))
    with open(path, "rb") as handle:
        original = handle.read()
    _write(clone, message_path(kept), original.replace(b"kept", b"edited"))  # an edited body
    os.unlink(os.path.join(clone, message_path(victim)))  # a deletion without a tombstone
    _write(clone, profile_path("RedStone"), b"name: [unclosed\n")  # a profile replaced by garbage
    good, data = _hand_message("still welcome")
    _write(clone, message_path(good), data)
    _write(clone, inbox_path("GreenCastle", good), data)
    _commit(clone, "damage")
    assert git_run("push", "-q", "origin", "main", cwd=clone).returncode == 0
    return {"good": good, message_path(bad_id): "field 'id'", "notes.txt": "not a path",
            message_path(kept): "immutable", message_path(victim): "deleted without a tombstone",
            profile_path("RedStone"): "invalid YAML"}


def test_a_sync_keeps_out_what_an_unchecked_hub_took_in_and_merges_the_rest(tmp_path):
    hub = _hub(tmp_path, checked=False)
    a, b = _machines(tmp_path, hub)
    victim = a.send("BlueLake", ["GreenCastle"], "victim")
    kept = a.send("BlueLake", ["GreenCastle"], "kept")
    for machine in (a, b):
        sync_project(machine.store, PROJECT)
    expected = _poison(tmp_path, hub, victim, kept)
    good = expected.pop("good")
    mine = b.send("GreenCastle", ["BlueLake"], "written on b meanwhile")
    before = tree_files(b.store)

    report = sync_project(b.store, PROJECT)
    assert report.exit_code == 1
    (result,) = report.results
    refused = {item["path"]: item for item in result.quarantined}
    assert set(refused) == set(expected)
    for path, reason in expected.items():
        assert reason in refused[path]["reason"] and refused[path]["advice"] and refused[path]["source"] == "hub/main"
    assert result.quarantine_ref == quarantine_ref("hub")
    assert any("refused from hub/main: notes.txt" in line for line in report.lines())
    files = tree_files(b.store)
    assert message_path(good) in files and inbox_path("GreenCastle", good) in files  # the valid part came in
    for path in (message_path(victim), message_path(kept), profile_path("RedStone"), message_path(mine)):
        assert files[path] == before[path]  # nothing valid was lost or changed
    assert "notes.txt" not in files
    assert check_archive(b.archive, run_git=False) == []
    # The refused versions are kept aside, readable with plain git.
    kept_aside = read_quarantine(b.archive, "hub")
    assert {entry["path"] for entry in kept_aside} == set(expected)
    shown = git_run("--git-dir", b.archive.git_dir, "show", f"{quarantine_ref('hub')}:incoming/notes.txt")
    assert shown.stdout == "a stray file\n"
    # b's own mail still leaves, through its machine ref, and a's sync takes it in.
    assert result.pushed_to == "node"
    assert sync_project(a.store, PROJECT).exit_code == 1  # a keeps the damage out too
    assert message_path(mine) in tree_files(a.store) and "notes.txt" not in tree_files(a.store)

    # Once b has what a sent back, syncing again changes nothing and reports the same.
    sync_project(b.store, PROJECT)
    tip = b.archive.tip()
    again = sync_project(b.store, PROJECT)
    assert again.exit_code == 1 and {item["path"] for item in again.results[0].quarantined} == set(expected)
    assert b.archive.tip() == tip


def test_the_checker_refuses_a_takeover_of_an_agents_name(tmp_path):
    a = Machine(str(tmp_path / "m"), "node-a")
    a.create_project()
    repo = a.archive.repo
    old_tip = a.archive.tip()
    stamp = a.store.clock.now_ts()
    a.write("another agent takes the name", None, lambda snap: [
        Agent(id=new_id(), name="BlueLake", program="x", model="y", inception_ts=stamp, hlc=a.store.clock.tick())])
    problems = Checker(repo, "hub").check_commit(a.archive.tip(), old_tip)
    assert [p.path for p in problems] == [profile_path("BlueLake")]
    assert "replaces the registration of agent BlueLake" in problems[0].reason


@pytest.mark.slow  # a gitmail process per door
@pytest.mark.parametrize("door", ["hub", "archive"])
def test_check_push_command_reads_hook_lines(tmp_path, door):
    """The hidden command the hooks run: exit 1 and the refusal on stderr; 0 and silence when fine."""
    a = Machine(str(tmp_path / "m"), "node-a")
    a.create_project()
    tip = a.archive.tip()
    a.write("stray", None, lambda snap: [("notes.txt", b"x\n")])
    bad = a.archive.tip()
    assert a.archive.advance(bad, tip)  # main as the hook sees it: not moved yet
    run = subprocess.run([*GITMAIL, "check-push", "--door", door], input=f"{tip} {bad} refs/heads/main\n",
                         capture_output=True, text=True, cwd=a.archive.git_dir)
    assert run.returncode == 1 and "refused notes.txt" in run.stderr
    fine = subprocess.run([*GITMAIL, "check-push", "--door", door], input=f"{tip} {tip} refs/heads/main\n",
                          capture_output=True, text=True, cwd=a.archive.git_dir)
    assert fine.returncode == 0 and fine.stderr == ""
