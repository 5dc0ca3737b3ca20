"""Build slots: exclusive and shared leases on a named resource, fenced by epoch, merged by their rule."""

from __future__ import annotations

import pytest

from gitmail import Change
from gitmail.coord import buildslots as slots
from gitmail.model.errors import INVALID_ARGUMENT, NOT_FOUND, SLOT_NOT_STALE, STALE_EPOCH
from gitmail.model.records import BuildSlot, build_slot_path, parse_path
from gitmail.storage.fsck import check_archive
from gitmail.storage.recordcheck import Checker, edit_refusal
from gitmail.sync.merge import merge_file

from .conftest import refused, tip
from .coord_helpers import make_project

KEY = "/work/slots"


@pytest.fixture
def project(store):
    return make_project(store, KEY, "Blue", "Green", "Red")


def test_exclusive_slot_refuses_a_second_holder_without_writing(store, project, ctx):
    got = slots.acquire(ctx, KEY, "Blue", "Build-Dir", ttl_seconds=600, reason="release build")
    assert (got["granted"], got["slot"], got["epoch"], got["already_held"]) == (True, "build-dir", 1, False)
    before = tip(store, KEY)
    other = slots.acquire(ctx, KEY, "Green", "build-dir")
    assert other["granted"] is False and "exclusively" in other["reason"]
    assert [h["agent"] for h in other["holders"]] == ["Blue"] and other["retry_after_ts"] == got["expires_ts"]
    assert tip(store, KEY) == before
    record = store.archive(KEY).snapshot().load(build_slot_path("build-dir"), BuildSlot)
    assert record is not None and record.epoch == 1 and record.holders[0]["reason"] == "release build"


def test_acquiring_a_held_slot_again_keeps_the_holding_and_never_shortens(store, project, ctx, wall):
    first = slots.acquire(ctx, KEY, "Blue", "test-db", ttl_seconds=3600)
    again = slots.acquire(ctx, KEY, "Blue", "test-db", ttl_seconds=60)
    assert again["already_held"] and again["epoch"] == 1 and again["expires_ts"] == first["expires_ts"]
    wall.advance(3000)
    longer = slots.acquire(ctx, KEY, "Blue", "test-db", ttl_seconds=3600)
    assert longer["epoch"] == 1 and longer["expires_ts"] > first["expires_ts"]


def test_each_acquire_outcome_keeps_its_keys_in_the_order_it_always_sent_them(store, project, ctx, wall):
    new = slots.acquire(ctx, KEY, "Blue", "test-db", ttl_seconds=600)
    kept = slots.acquire(ctx, KEY, "Blue", "test-db", ttl_seconds=60)
    refused_now = slots.acquire(ctx, KEY, "Green", "test-db")
    assert list(new) == ["granted", "slot", "epoch", "expires_ts", "already_held", "taken_over", "build_slot"]
    assert list(kept) == ["granted", "slot", "epoch", "already_held", "expires_ts", "build_slot"]
    assert list(refused_now) == ["granted", "slot", "reason", "retry_after_ts", "holders", "build_slot"]
    assert kept.kept is not None and kept.new is None and kept.kept.expires_ts == new["expires_ts"]
    assert refused_now.refusal is not None and refused_now.refusal.holders[0].agent == "Blue"
    wall.advance(300)  # still held: a longer lease extends the holding it has
    extended = slots.acquire(ctx, KEY, "Blue", "test-db", ttl_seconds=3600)
    assert list(extended) == list(kept) and extended["expires_ts"] > new["expires_ts"]


def test_shared_slot_admits_up_to_its_maximum(store, project, ctx):
    a = slots.acquire(ctx, KEY, "Blue", "ports", exclusive=False, max_holders=2)
    b = slots.acquire(ctx, KEY, "Green", "ports", exclusive=False, max_holders=5)  # joins under the slot's terms
    c = slots.acquire(ctx, KEY, "Red", "ports", exclusive=False)
    assert (a["granted"], b["granted"], c["granted"]) == (True, True, False)
    assert (a["epoch"], b["epoch"]) == (1, 2) and b["build_slot"]["max_holders"] == 2
    assert "full" in c["reason"]
    assert slots.acquire(ctx, KEY, "Red", "ports", exclusive=True)["granted"] is False
    slots.release(ctx, KEY, "Blue", "ports", 1)
    assert slots.acquire(ctx, KEY, "Red", "ports", exclusive=False)["epoch"] == 3


def test_a_stale_holding_is_taken_over_and_its_holder_is_refused(store, project, ctx, wall):
    slots.acquire(ctx, KEY, "Blue", "build-dir", ttl_seconds=60)
    wall.advance(61)
    taken = slots.acquire(ctx, KEY, "Green", "build-dir")
    assert taken["granted"] and taken["epoch"] == 2 and taken["taken_over"] == [{"agent": "Blue", "epoch": 1}]
    error = refused(store, KEY, STALE_EPOCH, slots.renew, ctx, KEY, "Blue", "build-dir", 1)
    assert error.data["holders"] == ["Green"] and error.data["current_epoch"] == 2
    refused(store, KEY, STALE_EPOCH, slots.release, ctx, KEY, "Blue", "build-dir", 1)
    refused(store, KEY, INVALID_ARGUMENT, slots.renew, ctx, KEY, "Green", "build-dir", 9)


def test_renew_extends_from_the_later_of_now_and_expiry_and_release_ends_it(store, project, ctx, wall):
    got = slots.acquire(ctx, KEY, "Blue", "build-dir", ttl_seconds=600)
    renewed = slots.renew(ctx, KEY, "Blue", "build-dir", got["epoch"], extend_seconds=120)
    assert renewed["old_expires_ts"] == got["expires_ts"] and renewed["expires_ts"] > got["expires_ts"]
    out = slots.release(ctx, KEY, "Blue", "build-dir", got["epoch"])
    assert out["released"] and out["build_slot"]["holders"] == []
    refused(store, KEY, STALE_EPOCH, slots.release, ctx, KEY, "Blue", "build-dir", got["epoch"])
    assert slots.acquire(ctx, KEY, "Green", "build-dir")["epoch"] == 2


def test_force_release_needs_a_stale_holder_and_tells_it(store, project, ctx, wall):
    slots.acquire(ctx, KEY, "Blue", "build-dir", ttl_seconds=7200)
    error = refused(store, KEY, SLOT_NOT_STALE, slots.force_release, ctx, KEY, "Green", "build-dir", "Blue",
                    inactivity_seconds=600)
    assert error.data["holder"] == "Blue"
    wall.advance(601)
    out = slots.force_release(ctx, KEY, "Green", "build-dir", "Blue", inactivity_seconds=600, note="CI is waiting")
    assert out["released"] and out["holder"] == "Blue" and out["notified"]
    inbox = store.archive(KEY).snapshot().listdir("agents/Blue/inbox")
    assert inbox, "the holder was told"
    refused(store, KEY, STALE_EPOCH, slots.renew, ctx, KEY, "Blue", "build-dir", 1)
    refused(store, KEY, NOT_FOUND, slots.force_release, ctx, KEY, "Green", "build-dir", "Blue")


def test_bad_names_and_terms_are_refused(store, project, ctx):
    for bad in ("", "../x", "a" * 65, "with space"):
        refused(store, KEY, INVALID_ARGUMENT, slots.acquire, ctx, KEY, "Blue", bad)
    refused(store, KEY, INVALID_ARGUMENT, slots.acquire, ctx, KEY, "Blue", "x", exclusive=True, max_holders=3)
    refused(store, KEY, INVALID_ARGUMENT, slots.acquire, ctx, KEY, "Blue", "x", ttl_seconds=5)
    refused(store, KEY, NOT_FOUND, slots.renew, ctx, KEY, "Blue", "never", 1)


def test_list_shows_slots_and_in_use(store, project, ctx, wall):
    slots.acquire(ctx, KEY, "Blue", "a", ttl_seconds=60)
    slots.acquire(ctx, KEY, "Green", "b", exclusive=False, max_holders=3)
    wall.advance(120)
    listed = slots.list_slots(ctx, KEY)["build_slots"]
    assert [(s["slot"], s["in_use"]) for s in listed] == [("a", False), ("b", True)]
    assert [s["slot"] for s in slots.list_slots(ctx, KEY, active_only=True)["build_slots"]] == ["b"]


# -- the record, its checks and its merge rule --------------------------------------------------

def _slot(epoch: int, hlc: str, holders: list[tuple[str, int, str]], *, exclusive: bool = True,
          max_holders: int = 1) -> bytes:
    return BuildSlot(slot="build-dir", epoch=epoch, hlc=hlc, exclusive=exclusive, max_holders=max_holders,
                     holders=[{"agent": a, "epoch": e, "acquired_ts": ts, "expires_ts": "2030-01-01T00:00:00.000Z"}
                              for a, e, ts in holders]).to_bytes()


def test_merge_keeps_the_first_grant_when_two_machines_granted_an_exclusive_slot_apart():
    base = _slot(0, "2026-12-01T10:00:00.000Z/0000/a", [])
    ours = _slot(1, "2026-12-01T10:00:01.000Z/0000/a", [("Blue", 1, "2026-12-01T10:00:00.000Z")])
    theirs = _slot(1, "2026-12-01T10:00:02.000Z/0000/b", [("Green", 1, "2026-12-01T10:00:01.000Z")])
    path = build_slot_path("build-dir")
    one, two = merge_file(path, base, ours, theirs), merge_file(path, base, theirs, ours)
    assert one.content == two.content and one.conflict is None
    merged = parse_path(path, one.content)
    assert [h["agent"] for h in merged.holders] == ["Blue"] and merged.epoch == 1


def test_merge_keeps_a_release_final_and_joins_shared_holdings():
    base = _slot(1, "2026-12-01T10:00:00.000Z/0000/a", [("Blue", 1, "2026-12-01T10:00:00.000Z")], exclusive=False,
                 max_holders=3)
    ours = _slot(1, "2026-12-01T10:00:01.000Z/0000/a", [], exclusive=False, max_holders=3)  # Blue released here
    theirs = _slot(2, "2026-12-01T10:00:02.000Z/0000/b", [("Blue", 1, "2026-12-01T10:00:00.000Z"),
                                               ("Red", 2, "2026-12-01T10:05:00.000Z")],
                   exclusive=False, max_holders=3)
    path = build_slot_path("build-dir")
    merged = parse_path(path, merge_file(path, base, ours, theirs).content)
    assert [(h["agent"], h["epoch"]) for h in merged.holders] == [("Red", 2)] and merged.epoch == 2


def test_checker_and_fsck_know_the_record(store, project, ctx):
    slots.acquire(ctx, KEY, "Blue", "build-dir")
    archive = store.archive(KEY)
    assert check_archive(archive, run_git=False) == []
    old = archive.snapshot().load(build_slot_path("build-dir"), BuildSlot)
    lowered = BuildSlot(slot="build-dir", epoch=0, hlc=old.hlc)
    assert "epoch" in (edit_refusal("hub", "build_slot", build_slot_path("build-dir"), old, lowered) or ("",))[0]
    bad = b"slot: build-dir\nepoch: 1\nhlc: 2026-12-01T10:00:00.000Z/0000/a\nholders:\n- {agent: Blue, epoch: 7}\n"
    archive.transact(lambda snap: Change("hand edit").put(build_slot_path("build-dir"), bad))
    problems = [str(p) for p in check_archive(archive, run_git=False)]
    assert any(p.startswith("build_slots/build-dir.yaml") for p in problems), problems
    checker = Checker(archive.repo, "hub")
    assert any(r.path == "build_slots/build-dir.yaml" for r in checker.check_commit(archive.tip(), None))
