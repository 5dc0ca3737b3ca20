"""Who an agent is, at every door: a hub's push, a push into an archive, a sync's fetch, and fsck.

A profile that came through git was written by anyone. These tests push it
with the real ``git`` into a checked hub and into an archive (whose
``pre-receive`` hooks run the record checker in their own interpreter), sync
it from a hub that has no checks, and run fsck on an archive that holds it:
an overseer carrying a token, a second agent whose name differs only in
case, a child pointed at another registration than the one that spawned it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest

from gitmail.mail.facade import Mail
from gitmail.model.records import Agent, Conflict, Message, conflict_path, inbox_path, message_path, profile_path
from gitmail.storage.engine import Change
from gitmail.storage.fsck import check_archive
from gitmail.storage.recordcheck import Checker
from gitmail.sync.merge import blob_hex
from gitmail.sync.remotes import add_remote
from gitmail.sync.syncer import sync_project

from .conftest import git_run
from .sync_helpers import PROJECT, Machine, tree_files
from .test_record_doors import _clone, _hub, _write

HASH = "sha256:" + "ab" * 32


def _machine(tmp_path, name: str, hub: str | None = None, *, create: bool = True) -> Machine:
    machine = Machine(str(tmp_path / "m"), name)
    if create:
        machine.create_project()
    if hub is not None:
        add_remote(machine.store, PROJECT, "hub", "file://" + hub)
        assert sync_project(machine.store, PROJECT).exit_code == 0
    return machine


def _push(clone: str, files: dict[str, bytes], message: str = "by hand"):
    for path, data in files.items():
        _write(clone, path, data)
    assert git_run("add", "-A", cwd=clone).returncode == 0
    assert git_run("commit", "-q", "-m", message, cwd=clone).returncode == 0
    return git_run("push", "origin", "HEAD:main", cwd=clone)


def _tip(git_dir: str) -> str:
    return git_run("rev-parse", "--verify", "-q", "main", cwd=git_dir).stdout.strip()


def _profile(machine: Machine, name: str, **fields) -> Agent:
    return Agent(id=machine.store.clock.new_id(), name=name, program="p", model="m",
                 inception_ts=machine.store.clock.now_ts(), hlc=machine.store.clock.tick(), **fields)


def _at_every_door(tmp_path, make: Callable[[Machine], dict[str, dict[str, bytes]]], reason: str) -> None:
    """What ``make`` writes is refused by a checked hub and by an archive, and kept aside by a sync.

    ``make(machine)`` returns ``{"refused": files, "valid": files}``, written
    with the clock of ``machine`` after every machine registered its agents;
    the valid files go with the others, and the sync from a hub without
    checks takes them in.
    """
    checked = _hub(tmp_path, checked=True)
    a = _machine(tmp_path, "node-a", checked)
    unchecked = _hub(tmp_path / "open", checked=False)
    b = _machine(tmp_path, "node-b", unchecked)
    made = make(b)
    refusable, files = made["refused"], {**made["refused"], **made.get("valid", {})}

    before = _tip(checked)
    pushed = _push(_clone(checked, str(tmp_path / "to-hub")), files)
    assert pushed.returncode != 0 and reason in pushed.stderr, pushed.stderr
    assert _tip(checked) == before

    before = a.archive.tip()
    pushed = _push(_clone(a.archive.git_dir, str(tmp_path / "to-archive")), files)
    assert pushed.returncode != 0 and reason in pushed.stderr, pushed.stderr
    assert a.archive.tip() == before

    _push(_clone(unchecked, str(tmp_path / "to-open-hub"), b.store.home), files)
    c = _machine(tmp_path, "node-c", create=False)
    add_remote(c.store, PROJECT, "hub", "file://" + unchecked)
    report = sync_project(c.store, PROJECT)
    (result,) = report.results
    refused = {item["path"]: item["reason"] for item in result.quarantined}
    assert set(refused) == set(refusable) and all(reason in text for text in refused.values()), refused
    assert not set(refusable) & set(tree_files(c.store))  # kept aside: none of it reached main
    assert set(tree_files(c.store)) == set(tree_files(b.store)) | set(files) - set(refusable)  # the rest came in
    assert check_archive(c.archive, run_git=False) == []


@pytest.mark.slow  # git runs the installed hooks, which start gitmail
def test_an_overseer_with_a_token_is_refused_at_every_door(tmp_path):
    _at_every_door(tmp_path, lambda machine: {"refused": {
        profile_path("Overseer"): _profile(machine, "Overseer", human=True, token_hash=HASH).to_bytes()}},
        "human profile")


@pytest.mark.slow  # git runs the installed hooks, which start gitmail
def test_a_second_spelling_of_an_agents_name_is_refused_at_every_door(tmp_path):
    def make(machine: Machine) -> dict[str, dict[str, bytes]]:
        twin = _profile(machine, "bluelake", token_hash=HASH)
        message = Message(id=machine.store.clock.new_id(), thread_id="t-twin", sender="GreenCastle",
                          subject="hi twin", created_ts=machine.store.clock.now_ts(), to=["bluelake"],
                          body="for the second spelling\n")
        return {"refused": {profile_path("bluelake"): twin.to_bytes(),
                            inbox_path("bluelake", message.id): message.to_bytes()},
                "valid": {message_path(message.id): message.to_bytes()}}

    _at_every_door(tmp_path, make, "differs only in case from the agent BlueLake")


def test_fsck_reports_an_overseer_with_a_token_a_human_agent_and_a_second_spelling(tmp_path):
    a = _machine(tmp_path, "node-a")
    assert check_archive(a.archive, run_git=False) == []
    overseer = _profile(a, "Overseer", human=True, token_hash=HASH)
    twin = _profile(a, "bluelake")
    a.write("damage", None, lambda snap: [overseer, twin,
                                          dataclasses.replace(snap.load(profile_path("RedStone"), Agent), human=True,
                                                              token_hash=HASH)])
    found = {(p.path, p.reason) for p in check_archive(a.archive, run_git=False)}
    paths = {path for path, _ in found}
    assert paths == {profile_path("Overseer"), profile_path("RedStone"), profile_path("bluelake")}, found
    assert all("human profile" in reason for path, reason in found if path != profile_path("bluelake"))
    assert any("BlueLake" in reason for path, reason in found if path == profile_path("bluelake"))


def test_fsck_reports_a_child_whose_parents_name_another_registration_holds(tmp_path):
    a = _machine(tmp_path, "node-a")
    Mail(a.store).spawn_agent(PROJECT, "BlueLake", ["viewer@*"], name="Kid")
    assert check_archive(a.archive, run_git=False) == []
    # BlueLake's profile is replaced by a new registration of the name, without the deletion's orphaning.
    a.write("another BlueLake", None, lambda snap: [_profile(a, "BlueLake")])
    found = [(p.path, p.reason) for p in check_archive(a.archive, run_git=False)]
    assert [path for path, _ in found] == [profile_path("Kid")]
    assert "another registration" in found[0][1]


def _kid_profile_text(machine: Machine) -> str:
    return machine.archive.snapshot().read(profile_path("Kid")).decode()


@pytest.mark.slow  # git runs the installed hooks, which start gitmail
def test_a_push_never_points_a_child_at_another_registration(tmp_path):
    hub = _hub(tmp_path, checked=True)
    a = _machine(tmp_path, "node-a", hub)
    Mail(a.store).spawn_agent(PROJECT, "BlueLake", ["viewer@*"], name="Kid")
    assert sync_project(a.store, PROJECT).exit_code == 0
    clone = _clone(hub, str(tmp_path / "human"))
    text = _kid_profile_text(a)
    kid = a.archive.snapshot().load(profile_path("Kid"), Agent)
    other = a.archive.snapshot().load(profile_path("GreenCastle"), Agent)
    before = _tip(hub)
    attempts = {
        # another agent's identity under the same parent name
        "parent_id": text.replace(f"parent_id: {kid.parent_id}", f"parent_id: {other.id}"),
        # another parent, with a conflict record parked beside it as a merge would leave one
        "parked": text.replace("parent: BlueLake", "parent: GreenCastle").replace(
            f"parent_id: {kid.parent_id}", f"parent_id: {other.id}"),
        # the profile's own registration replaced, the old one parked, by a registration made later
        "id": text.replace(f"id: {kid.id}", f"id: {a.store.clock.new_id()}"),
    }
    for what, edited in attempts.items():
        old_blob = blob_hex(text.encode())
        parked = Conflict(file=profile_path("Kid"), kept_blob=blob_hex(edited.encode()), other_blob=old_blob,
                          encoding="utf-8", content=text)
        files = {profile_path("Kid"): edited.encode()}
        if what != "parent_id":
            files[conflict_path(profile_path("Kid"), old_blob)] = parked.to_bytes()
        pushed = _push(clone, files, f"move Kid: {what}")
        assert pushed.returncode != 0, (what, pushed.stderr)
        assert f"refused {profile_path('Kid')}" in pushed.stderr, (what, pushed.stderr)
        assert _tip(hub) == before
        assert git_run("reset", "-q", "--hard", "origin/main", cwd=clone).returncode == 0
        assert git_run("clean", "-q", "-fd", cwd=clone).returncode == 0


@pytest.mark.slow  # git runs the hub's installed hook, which starts gitmail
def test_deleting_a_parent_orphans_its_children_on_every_machine(tmp_path):
    hub = _hub(tmp_path, checked=True)
    a, b = _machine(tmp_path, "node-a", hub), _machine(tmp_path, "node-b", hub, create=False)
    on_a, on_b = Mail(a.store), Mail(b.store)
    on_a.spawn_agent(PROJECT, "BlueLake", ["manager@src"], name="Kid")
    on_a.spawn_agent(PROJECT, "Kid", ["editor@src/api"], name="Grandkid")
    parent_id = on_a.whois(PROJECT, "BlueLake")["id"]
    for machine in (a, b):
        assert sync_project(machine.store, PROJECT).exit_code == 0
    deleted = on_a.hard_delete_agent(PROJECT, "BlueLake", confirmation="I UNDERSTAND")
    assert deleted["orphaned"] == ["Kid"]
    for machine in (a, b):  # through the checked hub, then the fetch door: nothing refused
        report = sync_project(machine.store, PROJECT)
        assert report.exit_code == 0 and not report.results[0].quarantined, report.lines()
    assert a.archive.tip() == b.archive.tip()
    on_b.register_agent(PROJECT, "p", "m", name="BlueLake")  # a new registration of the name, on the other machine
    kid = on_b.agent_position(PROJECT, "Kid")
    assert kid["ancestors"] == [] and kid["self"]["orphaned_from"] == {"name": "BlueLake", "id": parent_id}
    assert [a["name"] for a in on_b.agent_position(PROJECT, "Grandkid")["ancestors"]] == ["Kid"]
    assert on_b.agent_position(PROJECT, "BlueLake")["children"] == []
    assert check_archive(b.archive, run_git=False) == []


def test_a_second_spelling_is_judged_against_what_the_change_leaves(tmp_path):
    a = _machine(tmp_path, "node-a")
    archive = a.archive
    start = archive.tip()

    def commit(change: Change) -> str:
        return archive.transact(lambda snap: change).commit

    violet = commit(Change("Violet").put_record(_profile(a, "Violet")))
    # Registered apart from a main that holds Violet (both made on start): refused.
    assert archive.advance(violet, start)
    apart = commit(Change("violet, apart").put_record(_profile(a, "violet")))
    assert archive.advance(apart, violet)
    refused = Checker(archive.repo, "hub").check_commit(apart, violet)
    assert [p.path for p in refused] == [profile_path("violet")] and "Violet" in refused[0].reason
    # Violet deleted and violet registered in one change: one agent of that name is left.
    respelled = commit(Change("respell").delete(profile_path("Violet")).put_record(_profile(a, "violet")))
    assert Checker(archive.repo, "hub").check_commit(respelled, violet) == []
