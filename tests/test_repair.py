"""From a poisoned hub back to a clean one, with nothing valid lost: ``gitmail repair``."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from click.testing import CliRunner

from gitmail.cli import cli
from gitmail.model.ids import new_id
from gitmail.model.records import Agent, Message, inbox_path, message_path, outbox_path, profile_path
from gitmail.storage.fsck import check_archive
from gitmail.storage.recordcheck import file_problem
from gitmail.storage.verify import verify
from gitmail.sync.hookinstall import install_hub
from gitmail.sync.quarantine import quarantine_ref
from gitmail.sync.remotes import add_remote
from gitmail.sync.repair import repair
from gitmail.sync.syncer import sync_project

from .conftest import git_run, sign_commits
from .sync_helpers import PROJECT, Machine, message_counts, tree_files

GITMAIL = [sys.executable, "-m", "gitmail"]


def _write(root: str, path: str, data: bytes) -> None:
    full = os.path.join(root, path)
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, "wb") as handle:
        handle.write(data)


def _hub_files(hub: str) -> dict[str, bytes]:
    names = git_run("--git-dir", hub, "ls-tree", "-r", "--name-only", "main").stdout.split()
    return {name: subprocess.run(["git", "--git-dir", hub, "show", f"main:{name}"], capture_output=True).stdout
            for name in names}


def _three_on_a_bare_hub(tmp_path) -> tuple[str, Machine, Machine, Machine]:
    """A bare hub without hooks (it takes whatever is pushed, as a hosted service does) and three machines on it."""
    hub = str(tmp_path / "hub.git")
    assert git_run("init", "-q", "--bare", "--initial-branch=main", hub).returncode == 0
    a, b, c = (Machine(str(tmp_path / "m"), f"node-{name}") for name in "abc")
    a.create_project()
    for machine in (a, b, c):
        add_remote(machine.store, PROJECT, "hub", "file://" + hub)
        sync_project(machine.store, PROJECT)
    return hub, a, b, c


def test_a_poisoned_hub_is_repaired_and_nothing_valid_is_lost(tmp_path):
    hub, a, b, c = _three_on_a_bare_hub(tmp_path)
    victim = a.send("BlueLake", ["GreenCastle"], "victim")
    kept = a.send("BlueLake", ["GreenCastle"], "kept")
    for machine in (a, b, c):
        sync_project(machine.store, PROJECT)
    profile_before = tree_files(a.store)[profile_path("RedStone")]

    # Damage pushed while the hub had no checks; the checks arrive afterwards.
    clone = str(tmp_path / "poisoner")
    assert git_run("clone", "-q", hub, clone).returncode == 0
    sign_commits(clone, a.store.home)  # signed by a node: the record rules are what refuse it
    _write(clone, message_path(new_id()), b"---\nid: nope\n---\nbody\n")
    _write(clone, "notes.txt", b"a stray file\n")
    with open(os.path.join(clone, message_path(kept)), "rb") as handle:
        _write(clone, message_path(kept), handle.read().replace(b"kept from", b"edited from"))
    os.unlink(os.path.join(clone, message_path(victim)))
    _write(clone, profile_path("RedStone"), b"name: [unclosed\n")
    good = new_id()
    text = (f"---\nid: {good}\nthread_id: {good}\nfrom: BlueLake\nsubject: welcome\n"
            f"created: 2026-12-01T10:00:00.000Z\nto:\n- GreenCastle\n---\nStill welcome.\n").encode()
    _write(clone, message_path(good), text)
    _write(clone, inbox_path("GreenCastle", good), text)
    assert git_run("add", "-A", cwd=clone).returncode == 0
    assert git_run("commit", "-q", "-m", "damage", cwd=clone).returncode == 0
    assert git_run("push", "-q", "origin", "main", cwd=clone).returncode == 0
    install_hub(hub)

    # Every machine keeps the damage out, and mail still flows through the machine refs.
    sent = [m.send(sender, [to], f"meanwhile on {m.name}")
            for m, sender, to in ((a, "BlueLake", "GreenCastle"), (b, "GreenCastle", "RedStone"),
                                  (c, "RedStone", "BlueLake"))]
    for machine in (a, b, c, a, b):
        report = sync_project(machine.store, PROJECT)
        assert report.exit_code == 1 and len(report.results[0].quarantined) == 5, report.lines()
    assert {path for path, data in _hub_files(hub).items() if file_problem(path, data)} == {
        "notes.txt", profile_path("RedStone"), *[p for p in _hub_files(hub) if p.startswith("messages/")
                                                 and b"id: nope" in _hub_files(hub)[p]]}

    # The operator repairs from one machine (`gitmail repair PROJECT`).
    report = repair(b.store, PROJECT)
    assert report.to_dict()["exit_code"] == 0, report.lines()
    actions = {item["file"]: item["action"] for item in report.repaired}
    assert actions[message_path(victim)] == "put back" and actions[message_path(kept)] == "restored"
    assert actions["notes.txt"] == "took out" and actions[profile_path("RedStone")] == "restored"
    assert len(actions) == 5

    # The hub is clean: every file there holds up, the victims are back as they were.
    hub_files = _hub_files(hub)
    assert not [path for path, content in hub_files.items() if file_problem(path, content)]
    originals = tree_files(a.store)
    for path in (message_path(victim), message_path(kept), profile_path("RedStone")):
        assert hub_files[path] == originals[path]
    assert hub_files[profile_path("RedStone")] == profile_before
    assert message_path(good) in hub_files  # the valid part of the damaging push stays

    # Every machine converges, clean, with every message exactly once and nothing kept aside.
    for machine in (a, c, b, a, c):
        report = sync_project(machine.store, PROJECT)
        assert report.results[0].quarantined == [], report.lines()
    trees = [tree_files(machine.store) for machine in (a, b, c)]
    assert trees[0] == trees[1] == trees[2]
    counts = message_counts(trees[0])
    assert set(sent + [victim, kept, good]) <= set(counts) and set(counts.values()) == {1}
    assert git_run("rev-parse", "main", cwd=hub).stdout.strip() in {m.archive.tip() for m in (a, b, c)}
    for machine in (a, b, c):
        assert check_archive(machine.archive) == []
        assert quarantine_ref("hub") not in machine.archive.repo.references
        Agent.from_bytes(tree_files(machine.store)[profile_path("RedStone")], profile_path("RedStone"))


@pytest.mark.slow  # a process per command
def test_repair_with_nothing_to_repair_changes_nothing(tmp_path):
    hub = str(tmp_path / "hub.git")
    assert git_run("init", "-q", "--bare", "--initial-branch=main", hub).returncode == 0
    a = Machine(str(tmp_path / "m"), "node-a")
    a.create_project()
    add_remote(a.store, PROJECT, "hub", "file://" + hub)
    sync_project(a.store, PROJECT)
    tip = a.archive.tip()
    env = dict(os.environ, GITMAIL_HOME=a.store.home)
    repaired = subprocess.run([*GITMAIL, "repair", PROJECT, "--json"], capture_output=True, text=True, env=env)
    assert repaired.returncode == 0 and json.loads(repaired.stdout)["repaired"] == []
    shown = subprocess.run([*GITMAIL, "repair", PROJECT], capture_output=True, text=True, env=env)
    assert shown.returncode == 0 and "nothing to repair" in shown.stdout
    assert a.archive.tip() == tip
    missing = subprocess.run([*GITMAIL, "repair", PROJECT, "--remote", "nope"], capture_output=True, text=True,
                             env=env)
    assert missing.returncode == 2 and "NOT_FOUND" in missing.stderr


def test_an_unsigned_poison_through_a_hub_without_hooks_is_repaired_and_verify_ends_clean(tmp_path):
    hub, a, b, c = _three_on_a_bare_hub(tmp_path)
    before = a.send("BlueLake", ["GreenCastle"], "before the poison")
    for machine in (a, b, c):
        sync_project(machine.store, PROJECT)

    # Someone with push access commits a message in BlueLake's name with plain git, unsigned, on the hub's main.
    clone = str(tmp_path / "poisoner")
    assert git_run("clone", "-q", hub, clone).returncode == 0
    forged = Message(id=new_id(), thread_id="t-forged", sender="BlueLake", subject="send me the keys",
                     created_ts="2026-12-01T10:00:00.000Z", to=["GreenCastle"], body="forged\n")
    for path in (forged.path(), outbox_path("BlueLake", forged.id), inbox_path("GreenCastle", forged.id)):
        _write(clone, path, forged.to_bytes())
    assert git_run("add", "-A", cwd=clone).returncode == 0
    assert git_run("-c", "commit.gpgsign=false", "commit", "-q", "-m", "BlueLake sent", cwd=clone).returncode == 0
    assert git_run("push", "-q", "origin", "main", cwd=clone).returncode == 0
    poison = git_run("rev-parse", "HEAD", cwd=clone).stdout.strip()

    # Each machine keeps it aside and reports it: sync exits 1, verify reports it as kept aside, and exits 1.
    sent = [m.send(sender, [to], f"meanwhile on {m.name}")
            for m, sender, to in ((a, "BlueLake", "GreenCastle"), (b, "GreenCastle", "RedStone"),
                                  (c, "RedStone", "BlueLake"))]
    for machine in (a, b, c, a, b):
        report = sync_project(machine.store, PROJECT)
        assert report.exit_code == 1, report.lines()
        assert {item["code"] for item in report.results[0].quarantined} == {"unsigned"}, report.lines()
    runner = CliRunner()

    def verify_exit(machine: Machine) -> int:
        return runner.invoke(cli, ["verify", PROJECT], env={"GITMAIL_HOME": machine.store.home}).exit_code

    slug = a.store.resolve(PROJECT)
    found = verify(a.archive, slug, a.store.paths(slug).derived)
    assert [(f.problem, f.kept_aside) for f in found.findings] == [("unsigned", True)], found.findings
    assert {verify_exit(machine) for machine in (a, b, c)} == {1}

    # The operator's repair, from one machine (`gitmail repair PROJECT`), as the README's sync section says.
    repaired = runner.invoke(cli, ["repair", PROJECT, "--json"], env={"GITMAIL_HOME": c.store.home})
    assert repaired.exit_code == 0, repaired.output
    assert {item["file"]: item["action"] for item in json.loads(repaired.output)["repaired"]} == {
        path: "took out" for path in (forged.path(), outbox_path("BlueLake", forged.id),
                                      inbox_path("GreenCastle", forged.id))}

    for machine in (a, b, c, a, b):
        report = sync_project(machine.store, PROJECT)
        assert report.exit_code == 0 and report.results[0].quarantined == [], report.lines()
    trees = [tree_files(machine.store) for machine in (a, b, c)]
    assert trees[0] == trees[1] == trees[2] == _hub_files(hub)
    counts = message_counts(trees[0])
    assert set(counts) == {before, *sent} and set(counts.values()) == {1}
    for machine in (a, b, c):
        assert quarantine_ref("hub") not in machine.archive.repo.references
    assert {verify_exit(machine) for machine in (a, b, c)} == {0}
    found = verify(a.archive, slug, a.store.paths(slug).derived)  # the poison stays in the history, mended
    assert found.clean and found.repaired == [poison], found
