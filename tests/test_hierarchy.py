"""The agent hierarchy in the library: scopes and containment, expiry, the guard, merges, the record checker, fsck."""

from __future__ import annotations

import dataclasses
import os
import subprocess

import pytest

from gitmail import Change
from gitmail.coord import guard, hierarchy
from gitmail.model.clock import HLC
from gitmail.model.errors import GitmailError
from gitmail.model.records import Agent, profile_path
from gitmail.storage.fsck import check_archive
from gitmail.storage.recordcheck import edit_refusal, inspect_file
from gitmail.sync.merge import merge_file

from .conftest import fails_cleanly
from .mail_helpers import PROJECT, make_mail, register


@pytest.fixture
def mail(store):
    mail = make_mail(store)
    register(mail, "Lead", "Peer")
    return mail


def test_scopes_parse_and_contain():
    assert str(hierarchy.parse_scope(" Writer@src/api/ ")) == "editor@src/api"  # an alias, a folder's slash
    assert str(hierarchy.parse_scope("viewer@*")) == "viewer@*"
    for bad in ("editor", "owner@src", "editor@/etc", "editor@../up", 7):
        with pytest.raises(GitmailError) as info:
            hierarchy.parse_scope(bad)
        assert info.value.code == "INVALID_ARGUMENT"
    contains = hierarchy.location_contains
    assert contains("*", "src/**/*.py") and contains("src", "src/api/*.py") and contains("src/*.py", "src/*.py")
    assert not contains("src/api", "src") and not contains("src", "*") and not contains("src/*.py", "src/a.py")
    assert not contains("src", "srcs/a.py")
    manager, editor = hierarchy.Scope("manager", "src"), hierarchy.Scope("editor", "src/api")
    assert hierarchy.scope_contains(manager, editor) and not hierarchy.scope_contains(editor, manager)


def test_a_child_never_outlives_its_parent_and_expires(mail, store, wall):
    mid = mail.spawn_agent(PROJECT, "Lead", ["manager@*"], name="Mid", expires_at="2099-01-01T00:00:00Z")
    with fails_cleanly(store, "INVALID_ARGUMENT", PROJECT) as info:
        mail.spawn_agent(PROJECT, "Mid", ["viewer@*"], expires_at="2099-06-01T00:00:00Z")
    assert "2099-01-01" in info.value.message
    leaf = mail.spawn_agent(PROJECT, "Mid", ["editor@*"], name="Leaf")
    assert leaf["expires_at"] == mid["expires_at"]  # inherited: it ends with its parent
    soon = mail.spawn_agent(PROJECT, "Lead", ["editor@*"], name="Soon", lifecycle="ephemeral")
    assert soon["expires_at"] is not None
    mail.journal(PROJECT, "Soon", "working")
    wall.advance(hours=25)  # past an ephemeral agent's day
    with fails_cleanly(store, "AGENT_EXPIRED", PROJECT):
        mail.journal(PROJECT, "Soon", "still working?")
    mail.journal(PROJECT, "Leaf", "fine until 2099")
    # Shortening a parent's expiry brings its descendants' in with it, so none outlives it.
    mail.update_agent(PROJECT, "Lead", target="Mid", expires_at="2098-01-01T00:00:00Z")
    assert mail.agent_position(PROJECT, "Leaf")["self"]["expires_at"] == "2098-01-01T00:00:00.000Z"
    assert check_archive(store.archive(PROJECT), run_git=False) == []


def test_narrowing_a_parent_narrows_its_descendants(mail, store):
    mail.spawn_agent(PROJECT, "Lead", ["manager@src"], name="Mid")
    mail.spawn_agent(PROJECT, "Mid", ["editor@src/api"], name="Leaf")
    assert mail.file_reservation_paths(PROJECT, "Leaf", ["src/api/a.py"])["granted"]
    mail.update_agent(PROJECT, "Lead", target="Mid", scope=["manager@docs"])
    with fails_cleanly(store, "SCOPE_DENIED", PROJECT):
        mail.file_reservation_paths(PROJECT, "Leaf", ["src/api/b.py"])


def test_the_guard_refuses_files_outside_the_committers_scopes(mail, store, tmp_path):
    repo = str(tmp_path / "code")
    subprocess.run(["git", "init", "-q", repo], check=True)
    mail.spawn_agent(PROJECT, "Lead", ["editor@src/api"], name="Helper")
    guard.install(mail.ctx, PROJECT, repo)
    for name in ("src/api/a.py", "docs/b.md"):
        os.makedirs(os.path.dirname(os.path.join(repo, name)), exist_ok=True)
        with open(os.path.join(repo, name), "w") as handle:
            handle.write("x\n")
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    code, text = guard.run_hook(mail.ctx, "pre-commit", repo, env={**os.environ, "AGENT_NAME": "Helper"})
    assert code == 1 and "docs/b.md" in text and "src/api/a.py" not in text and "editor@src/api" in text
    assert guard.run_hook(mail.ctx, "pre-commit", repo, env={**os.environ, "AGENT_NAME": "Lead"}) == (0, "")


def test_deleting_a_parent_orphans_its_children_with_what_they_effectively_held(mail, store):
    mail.spawn_agent(PROJECT, "Lead", ["manager@*"], name="Mid", expires_at="2099-01-01T00:00:00Z")
    mail.spawn_agent(PROJECT, "Mid", ["manager@src", "viewer@*"], name="Leaf")
    mail.spawn_agent(PROJECT, "Mid", ["editor@docs"], name="Cut")
    mail.spawn_agent(PROJECT, "Leaf", ["editor@src/api/v1"], name="Tip")
    mail.update_agent(PROJECT, "Lead", target="Leaf", expires_at="2098-01-01T00:00:00Z")
    # Leaf holds manager@src/api and viewer@src/api in effect; Cut nothing.
    mail.update_agent(PROJECT, "Lead", target="Mid", scope=["manager@src/api"])
    assert [s["name"] for s in mail.agent_position(PROJECT, "Leaf")["siblings"]] == ["Cut"]  # Mid's other child
    assert [s["name"] for s in mail.agent_position(PROJECT, "Cut")["siblings"]] == ["Leaf"]
    assert mail.agent_position(PROJECT, "Lead")["siblings"] == []  # top-level: none listed
    mid_id = mail.whois(PROJECT, "Mid")["id"]
    deleted = mail.hard_delete_agent(PROJECT, "Mid", confirmation="I UNDERSTAND")
    assert deleted["orphaned"] == ["Cut", "Leaf"] and deleted["id"] == mid_id
    leaf = mail.agent_position(PROJECT, "Leaf")
    assert leaf["ancestors"] == [] and leaf["self"]["parent"] is None and leaf["siblings"] == []
    assert leaf["self"]["orphaned_from"] == {"name": "Mid", "id": mid_id}
    assert leaf["self"]["scopes"] == ["manager@src/api"] and leaf["self"]["expires_at"] == "2098-01-01T00:00:00.000Z"
    assert [c["name"] for c in leaf["children"]] == ["Tip"]  # a grandchild stays below its own parent
    assert mail.file_reservation_paths(PROJECT, "Leaf", ["src/api/a.py"])["granted"]
    with fails_cleanly(store, "SCOPE_DENIED", PROJECT):  # what Mid no longer allowed, the orphan never regains
        mail.file_reservation_paths(PROJECT, "Leaf", ["src/db/a.py"])
    cut = mail.agent_position(PROJECT, "Cut")["self"]
    assert cut["scopes"] == [] and cut["orphaned_from"]["name"] == "Mid"
    with fails_cleanly(store, "SCOPE_DENIED", PROJECT):  # an orphan that held nothing is not top-level
        mail.spawn_agent(PROJECT, "Cut", ["viewer@*"])
    with fails_cleanly(store, "NOT_ABOVE", PROJECT):  # the agent above the deleted one is not above its children
        mail.update_agent(PROJECT, "Lead", target="Leaf", purpose="still mine?")
    mail.register_agent(PROJECT, "p", "m", name="Mid")  # the name again: a new registration, above no one
    assert mail.agent_position(PROJECT, "Mid")["children"] == []
    assert mail.agent_position(PROJECT, "Tip")["ancestors"][0]["name"] == "Leaf"
    assert check_archive(store.archive(PROJECT), run_git=False) == []


def test_a_child_names_the_registration_that_spawned_it(mail, store):
    mail.spawn_agent(PROJECT, "Lead", ["viewer@*"], name="Kid")
    snap = store.archive(PROJECT).snapshot()
    lead, kid = (snap.load(profile_path(name), Agent) for name in ("Lead", "Kid"))
    assert kid.parent_id == lead.id and kid.spawned_by(lead)
    again = dataclasses.replace(lead, id=store.clock.new_id())  # a later registration of the same name
    assert not kid.spawned_by(again)
    # A child written before children named the registration: only one older than the child can have spawned it.
    legacy = dataclasses.replace(kid, parent_id=None)
    assert legacy.spawned_by(lead) and not legacy.spawned_by(again)


def _profile(**fields) -> Agent:
    base = Agent(id="0" * 23, name="Helper", program="p", model="m", inception_ts="2026-12-01T00:00:00.000Z",
                 hlc=HLC(1, 0, "a"), parent="Lead", scopes=["editor@*"])
    return dataclasses.replace(base, **fields)


def test_merge_drops_the_sleep_condition_of_an_agent_woken_on_one_side():
    path = profile_path("Helper")
    base = _profile(asleep=True, sleep_until="reply", hlc=HLC(10, 0, "a"))
    woken = _profile(asleep=False, sleep_until=None, hlc=HLC(20, 0, "a"))
    recondition = _profile(asleep=True, sleep_until="woken", hlc=HLC(30, 0, "b"))
    for ours, theirs in ((woken, recondition), (recondition, woken)):
        merged = Agent.from_bytes(merge_file(path, base.to_bytes(), ours.to_bytes(), theirs.to_bytes()).content, path)
        assert (merged.asleep, merged.sleep_until) == (False, None)


def test_the_record_checker_refuses_moving_an_agent_in_the_hierarchy():
    path = profile_path("Helper")
    lead, other = "1" * 23, "2" * 23
    child = _profile(parent_id=lead)
    for moved in (_profile(parent="Peer", parent_id=lead), _profile(parent_id=other), _profile(parent_id=None),
                  _profile(parent=None, parent_id=None)):
        refusal = edit_refusal("hub", "agent", path, child, moved)
        assert refusal is not None and "parent" in refusal[0], moved  # (reason, what to do)
    assert edit_refusal("hub", "agent", path, child, _profile(parent_id=lead, scopes=["viewer@*"])) is None
    # Orphaned: only when the registration it names is deleted in the same change, and naming that one.
    orphan = _profile(parent=None, parent_id=None, orphaned_from="Lead", orphaned_from_id=lead, scopes=["viewer@*"])
    assert edit_refusal("hub", "agent", path, child, orphan, gone=frozenset({lead})) is None
    assert edit_refusal("hub", "agent", path, child, orphan, gone=frozenset({other})) is not None
    assert edit_refusal("hub", "agent", path, child, orphan) is not None
    named_other = dataclasses.replace(orphan, orphaned_from_id=other)
    assert edit_refusal("hub", "agent", path, child, named_other, gone=frozenset({lead, other})) is not None
    assert edit_refusal("archive", "agent", path, child, orphan, gone=frozenset({lead})) is not None  # not by hand


def test_fsck_reports_a_missing_parent_and_an_outliving_child(mail, store):
    mail.spawn_agent(PROJECT, "Lead", ["viewer@*"], name="Orphan")
    mail.spawn_agent(PROJECT, "Lead", ["manager@*"], name="Mid", expires_at="2099-01-01T00:00:00Z")
    mail.spawn_agent(PROJECT, "Mid", ["viewer@*"], name="Late")
    archive = store.archive(PROJECT)
    assert check_archive(archive, run_git=False) == []
    snap = archive.snapshot()
    orphan = dataclasses.replace(snap.load(profile_path("Orphan"), Agent), parent="Gone")
    late = dataclasses.replace(snap.load(profile_path("Late"), Agent), expires_at="2100-01-01T00:00:00.000Z")
    archive.transact(lambda s: Change("hand edits").put_record(orphan).put_record(late))
    found = {(p.path, p.reason.split(" ")[0]) for p in check_archive(archive, run_git=False)}
    assert found == {(profile_path("Orphan"), "parent"), (profile_path("Late"), "expires")}


def test_identity_keys_name_the_agent_written_and_pass_the_record_checks(mail, store):
    mail.spawn_agent(PROJECT, "Lead", ["viewer@*"], name="Kid", idempotency_key="spawn-kid-1")
    snap = store.archive(PROJECT).snapshot()
    keys = [path for path in snap.walk() if "/idempotency/" in path]
    assert len(keys) == 1 and keys[0].startswith("agents/Lead/idempotency/")
    record, problem = inspect_file(keys[0], snap.read(keys[0]))
    assert problem is None and record.operation == "spawn_agent" and record.target == "Kid"
    assert record.message_id is None and record.changed is True
    # A key must name what it produced: a message for a send, an agent for an identity write.
    text = snap.read(keys[0]).decode().replace("operation: spawn_agent", "operation: send_message")
    assert "message_id" in inspect_file(keys[0], text.encode())[1]
    assert check_archive(store.archive(PROJECT), run_git=False) == []


@pytest.mark.slow  # git runs the hub's installed hook, which starts gitmail
def test_the_hierarchy_syncs_through_a_checked_hub_which_refuses_moving_an_agent(tmp_path):
    from gitmail.mail.facade import Mail
    from gitmail.sync.syncer import sync_project

    from .conftest import git_run
    from .sync_helpers import PROJECT as SHARED
    from .sync_helpers import hub_pair

    hub, a, b = hub_pair(str(tmp_path))
    on_a, on_b = Mail(a.store), Mail(b.store)
    on_a.spawn_agent(SHARED, "BlueLake", ["editor@src"], name="Kid", reason="split the work")
    sync_project(a.store, SHARED)
    sync_project(b.store, SHARED)
    # Apart: b puts Kid to sleep until woken, a narrows its scopes; both survive the merge.
    on_b.sleep_agent(SHARED, "BlueLake", target="Kid", until="woken")
    on_a.update_agent(SHARED, "BlueLake", target="Kid", scope=["viewer@*"])
    for machine in (a, b, a):
        sync_project(machine.store, SHARED)
    for mail in (on_a, on_b):
        kid = mail.agent_position(SHARED, "Kid")["self"]
        assert (kid["parent"], kid["scopes"], kid["asleep"], kid["sleep_until"]) == ("BlueLake", ["viewer@*"],
                                                                                     True, "woken")
    assert a.archive.tip() == b.archive.tip()
    # A human's push that moves Kid under another parent is refused at the hub.
    clone = str(tmp_path / "human")
    assert git_run("clone", "-q", hub, clone).returncode == 0
    path = os.path.join(clone, profile_path("Kid"))
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text.replace("parent: BlueLake", "parent: GreenCastle"))
    assert git_run("commit", "-q", "-am", "move Kid", cwd=clone).returncode == 0
    pushed = git_run("push", "origin", "HEAD:main", cwd=clone)
    assert pushed.returncode != 0 and "moves agent Kid in the hierarchy" in pushed.stderr


def test_a_headless_key_proves_its_agent_until_it_ends_or_idles_and_dies_with_retirement(mail, store, wall):
    import datetime as dt

    from gitmail.model.clock import parse_ts

    bot = mail.spawn_agent(PROJECT, "Lead", ["editor@*"], name="Bot", bootstrap_key=True, refresh_window_s=3600)
    key, token = bot["bootstrap_key"], bot["registration_token"]
    assert key.startswith("gmk_") and key != token
    assert parse_ts(bot["key_expires_at"]) - wall.now() == dt.timedelta(days=90)  # an agent without an end
    profile = store.archive(PROJECT).snapshot().read(profile_path("Bot")).decode()
    assert "key_hash: sha256:" in profile and key not in profile and "refresh_window_s: 3600" in profile
    assert "key" not in " ".join(mail.whois(PROJECT, "Bot"))  # the profile view shows no key field
    held = mail.credential(PROJECT, "Bot")
    assert held.proved_by(key) and held.proved_by(token) and not held.proved_by("gmk_" + key[4:-2] + "xx")

    wall.advance(seconds=3600)  # idle for the whole window: the key no longer proves it, the token still does
    idle = mail.credential(PROJECT, "Bot")
    assert not idle.proved_by(key) and idle.proved_by(token) and idle == held  # a session bound stays bound
    mail.journal(PROJECT, "Bot", "back at work")
    assert mail.credential(PROJECT, "Bot").proved_by(key)

    mail.retire_agent(PROJECT, "Bot")
    mail.unretire_agent(PROJECT, "Bot")
    restored = mail.credential(PROJECT, "Bot")
    assert restored.proved_by(token) and not restored.proved_by(key)  # dead for good
    assert "key_hash" not in store.archive(PROJECT).snapshot().read(profile_path("Bot")).decode()

    # The key ends with its agent, and never more than 365 days on.
    soon = mail.spawn_agent(PROJECT, "Lead", ["viewer@*"], name="Soon", bootstrap_key=True,
                            expires_at=(wall.now() + dt.timedelta(days=10)).strftime("%Y-%m-%dT%H:%M:%SZ"))
    assert soon["key_expires_at"] == soon["expires_at"]
    far = mail.spawn_agent(PROJECT, "Lead", ["viewer@*"], name="Far", bootstrap_key=True,
                           expires_at="2099-01-01T00:00:00Z")
    assert parse_ts(far["key_expires_at"]) - wall.now() == dt.timedelta(days=365)
    wall.advance(days=365)
    assert not mail.credential(PROJECT, "Far").proved_by(far["bootstrap_key"])
    assert mail.credential(PROJECT, "Far").proved_by(far["registration_token"])


def test_a_headless_key_is_shown_once_and_its_window_is_checked(mail, store):
    first = mail.spawn_agent(PROJECT, "Lead", ["viewer@*"], name="Once", bootstrap_key=True, idempotency_key="k-1")
    again = mail.spawn_agent(PROJECT, "Lead", ["viewer@*"], name="Once", bootstrap_key=True, idempotency_key="k-1")
    assert first["bootstrap_key"] and again["replayed"] is True and "bootstrap_key" not in again
    assert "registration_token" not in again or again["registration_token"] is None
    plain = mail.spawn_agent(PROJECT, "Lead", ["viewer@*"], name="Plain")
    assert "bootstrap_key" not in plain and "key_expires_at" not in plain
    for bad in ({"refresh_window_s": 600}, {"bootstrap_key": True, "refresh_window_s": 10},
                {"bootstrap_key": True, "refresh_window_s": True}):
        with fails_cleanly(store, "INVALID_ARGUMENT", PROJECT) as info:
            mail.spawn_agent(PROJECT, "Lead", ["viewer@*"], name="Bad", **bad)
        assert info.value.data["field"] == "refresh_window_s"
