"""File reservations: grants, conflicts, release, renew, expiry, force release and the two-process race."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import subprocess
import sys

import pytest

from gitmail import Reservation
from gitmail.coord import reservations as rs
from gitmail.model.clock import HLC, format_ts, parse_ts
from gitmail.model.errors import GitmailError
from gitmail.model.ids import new_id
from gitmail.model.records import inbox_path, reservation_path
from gitmail.storage.fsck import check_archive

from .conftest import refused, tip
from .coord_helpers import make_project

KEY = "/work/demo"


@pytest.fixture
def project(store):
    return make_project(store, KEY, "Blue", "Green", "Red")


def test_grant_and_overlap_conflicts_with_other_agents_only(store, project, ctx):
    out = rs.reserve(ctx, KEY, "Blue", ["src/**/*.py"], ttl_seconds=600, reason="refactor")
    assert [g["path_pattern"] for g in out["granted"]] == ["src/**/*.py"]
    assert out["conflicts"] == []
    granted = out["granted"][0]
    assert granted["exclusive"] is True and granted["reason"] == "refactor"
    # Neither pattern matches the other as text, yet they overlap (src/api/x.py).
    other = rs.reserve(ctx, KEY, "Green", ["src/api/*", "docs/*"], ttl_seconds=600)
    assert [g["path_pattern"] for g in other["granted"]] == ["docs/*"]
    assert other["conflicts"][0]["path"] == "src/api/*"
    assert other["conflicts"][0]["holders"][0]["agent"] == "Blue"
    assert other["conflicts"][0]["holders"][0]["id"] == granted["id"]
    # The holder itself may reserve overlapping paths.
    assert rs.reserve(ctx, KEY, "Blue", ["src/api/users.py"], ttl_seconds=600)["conflicts"] == []
    # Non-overlapping pattern for another agent is fine.
    assert rs.reserve(ctx, KEY, "Red", ["src/*.txt"], ttl_seconds=600)["conflicts"] == []


def test_shared_requests_conflict_with_exclusive_but_not_with_shared(store, project, ctx):
    rs.reserve(ctx, KEY, "Blue", ["lib/"], ttl_seconds=600, exclusive=False)
    assert rs.reserve(ctx, KEY, "Green", ["lib/a.py"], ttl_seconds=600, exclusive=True)["conflicts"] == []
    out = rs.reserve(ctx, KEY, "Red", ["lib/*.py"], ttl_seconds=600, exclusive=False)
    assert out["granted"] == [] and out["conflicts"][0]["holders"][0]["agent"] == "Green"


def test_records_are_committed_with_a_readable_message(store, project, ctx):
    out = rs.reserve(ctx, KEY, "Blue", ["app/api/*.py"], ttl_seconds=7200, reason="migrations")
    rid = out["granted"][0]["id"]
    archive = store.archive(KEY)
    record = archive.snapshot().load(reservation_path(rid), Reservation)
    assert record.path_pattern == "app/api/*.py" and record.agent == "Blue" and record.released_ts is None
    commit = archive.repo[archive.tip()]
    assert commit.author.name == "Blue"
    assert "Blue reserved app/api/*.py" in commit.message


@pytest.mark.parametrize("kwargs, field", [
    ({"paths": ["src/a.py"], "ttl_seconds": 59}, "ttl_seconds"),
    ({"paths": ["src/a.py"], "ttl_seconds": "600"}, "ttl_seconds"),
    ({"paths": []}, "paths"),
    ({"paths": "src/a.py"}, "paths"),
    ({"paths": ["/etc/passwd"]}, "paths"),
    ({"paths": ["src/../../x"]}, "paths"),
    ({"paths": ["src/\x00a"]}, "paths"),
    ({"paths": ["  "]}, "paths"),
    ({"paths": ["a"], "exclusive": "yes"}, "exclusive"),
])
def test_bad_input_is_refused_and_writes_nothing(store, project, kwargs, field, ctx):
    error = refused(store, KEY, "INVALID_ARGUMENT", lambda **kw: rs.reserve(ctx, KEY, "Blue", **kw), **kwargs)
    assert error.data["field"] == field
    assert error.message.startswith(field)


def test_unknown_agent_and_project(store, project, ctx):
    refused(store, KEY, "NOT_FOUND", lambda: rs.reserve(ctx, KEY, "Nobody", ["a"]))
    with pytest.raises(GitmailError) as info:
        rs.reserve(ctx, "/no/such/project", "Blue", ["a"])
    assert info.value.code == "NOT_FOUND"


def test_release_by_ids_paths_and_all_keeps_records_for_audit(store, project, ctx):
    granted = rs.reserve(ctx, KEY, "Blue", ["a/*", "b/*", "c/*", "d/*"], ttl_seconds=600)["granted"]
    ids = {g["path_pattern"]: g["id"] for g in granted}
    out = rs.release(ctx, KEY, "Blue", file_reservation_ids=[ids["a/*"]])
    assert out["released"] == 1 and out["file_reservation_ids"] == [ids["a/*"]]
    assert rs.release(ctx, KEY, "Blue", paths=["b/*"])["released"] == 1
    # Another agent cannot release Blue's reservation by id: a no-op.
    assert rs.release(ctx, KEY, "Green", file_reservation_ids=[ids["c/*"]])["released"] == 0
    assert rs.release(ctx, KEY, "Blue")["released"] == 2
    before = tip(store, KEY)
    assert rs.release(ctx, KEY, "Blue", file_reservation_ids=[ids["a/*"]])["released"] == 0
    assert tip(store, KEY) == before  # nothing to do, nothing committed
    snap = store.archive(KEY).snapshot()
    for rid in ids.values():
        record = snap.load(reservation_path(rid), Reservation)
        assert record.released_ts is not None
    assert rs.list_reservations(ctx, KEY)["file_reservations"] == []
    history = rs.list_reservations(ctx, KEY, active_only=False)["file_reservations"]
    assert len(history) == 4
    # Released paths are free for others now; a release is final (renew cannot revive it).
    assert rs.reserve(ctx, KEY, "Green", ["a/x"], ttl_seconds=600)["conflicts"] == []
    assert rs.renew(ctx, KEY, "Blue", file_reservation_ids=[ids["a/*"]])["renewed"] == 0
    refused(store, KEY, "INVALID_ARGUMENT", lambda: rs.release(ctx, KEY, "Blue", file_reservation_ids=["42"]))


def test_renew_extends_from_the_later_of_now_and_expiry_and_never_shortens(store, project, wall, ctx):
    granted = rs.reserve(ctx, KEY, "Blue", ["x/*", "y/*"], ttl_seconds=3600)["granted"]
    wall.advance(minutes=10)
    out = rs.renew(ctx, KEY, "Blue", extend_seconds=60, paths=["x/*"])
    assert out["renewed"] == 1
    item = out["file_reservations"][0]
    assert item["old_expires_ts"] == granted[0]["expires_ts"]
    old, new = parse_ts(item["old_expires_ts"]), parse_ts(item["new_expires_ts"])
    assert new - old == dt.timedelta(seconds=60)  # from the expiry (later than now), not from now
    assert new - wall.now() == dt.timedelta(minutes=51)
    refused(store, KEY, "INVALID_ARGUMENT", lambda: rs.renew(ctx, KEY, "Blue", extend_seconds=30))


def test_expiry_is_honoured_to_the_millisecond(store, project, wall, ctx):
    rs.reserve(ctx, KEY, "Blue", ["core/*"], ttl_seconds=60)
    wall.advance(seconds=59.999)
    assert rs.reserve(ctx, KEY, "Green", ["core/a.py"], ttl_seconds=60)["granted"] == []
    wall.advance(seconds=0.001)  # the reservation ends at its expiry instant
    assert rs.reserve(ctx, KEY, "Green", ["core/a.py"], ttl_seconds=60)["conflicts"] == []


def test_force_release_refused_while_holder_is_active(store, project, wall, ctx):
    wall.advance(seconds=1)  # after the holder registered: its reservation is its latest activity
    rid = rs.reserve(ctx, KEY, "Blue", ["busy/*"], ttl_seconds=7200)["granted"][0]["id"]
    wall.advance(seconds=599)
    error = refused(store, KEY, "RESERVATION_NOT_STALE", rs.force_release, ctx, KEY, "Green", rid,
                    inactivity_seconds=600)
    assert error.data["holder"] == "Blue" and "reservation" in error.data["signal"]
    refused(store, KEY, "INVALID_ARGUMENT", lambda: rs.force_release(ctx, KEY, "Blue", rid))
    refused(store, KEY, "NOT_FOUND", lambda: rs.force_release(ctx, KEY, "Green", store.clock.new_id()))
    refused(store, KEY, "INVALID_ARGUMENT", lambda: rs.force_release(ctx, KEY, "Green", rid, inactivity_seconds=10))
    wall.advance(seconds=1)
    assert rs.force_release(ctx, KEY, "Green", rid, inactivity_seconds=600)["released"] is True


def test_force_release_of_an_abandoned_reservation_notifies_the_holder(store, project, wall, ctx):
    rid = rs.reserve(ctx, KEY, "Blue", ["stale/*"], ttl_seconds=5 * 3600)["granted"][0]["id"]
    wall.advance(hours=2)
    out = rs.force_release(ctx, KEY, "Green", rid, note="taking over the parser", inactivity_seconds=600)
    assert out["released"] is True and out["heuristics"]["expired"] is False
    assert out["heuristics"]["last_signal"] in ("profile updated", "reservation made or renewed")
    snap = store.archive(KEY).snapshot()
    assert snap.load(reservation_path(rid), Reservation).released_ts == store.clock.now_ts()
    note = snap.read(inbox_path("Blue", out["notified"])).decode()
    assert "stale/*" in note and "taking over the parser" in note and "from: Green" in note
    assert check_archive(store.archive(KEY), run_git=False) == []
    again = rs.force_release(ctx, KEY, "Green", rid)
    assert again["released"] is False and again["already_released_ts"]


def test_force_release_of_an_expired_reservation(store, project, wall, ctx):
    rid = rs.reserve(ctx, KEY, "Blue", ["old/*"], ttl_seconds=60)["granted"][0]["id"]
    wall.advance(seconds=60)  # expired, although its holder was active a minute ago
    out = rs.force_release(ctx, KEY, "Green", rid, notify_previous=False)
    assert out["released"] is True and out["heuristics"]["expired"] is True and out["notified"] is None


def test_force_release_sees_recent_edits_in_the_workspace(store, tmp_path, wall, ctx):
    workspace = tmp_path / "ws"
    (workspace / "pkg").mkdir(parents=True)
    key = make_project(store, str(workspace), "Blue", "Green")
    rid = rs.reserve(ctx, key, "Blue", ["pkg/*.py"], ttl_seconds=5 * 3600)["granted"][0]["id"]
    wall.advance(hours=2)
    edited = workspace / "pkg" / "mod.py"
    edited.write_text("print('editing')\n")
    os.utime(edited, (wall(), wall()))  # edited just now, by the store's clock
    with pytest.raises(GitmailError) as info:
        rs.force_release(ctx, key, "Green", rid, inactivity_seconds=600)
    assert info.value.code == "RESERVATION_NOT_STALE" and info.value.data["signal"] == "file modified"
    wall.advance(seconds=600)
    assert rs.force_release(ctx, key, "Green", rid, inactivity_seconds=600)["released"] is True


def test_conflicts_for_files_cover_directories_and_globs(store, project, ctx):
    rs.reserve(ctx, KEY, "Blue", ["src/api", "docs/*.md"], ttl_seconds=600)
    found = rs.conflicts_for_paths(ctx, KEY, ["src/api/v1/users.py", "docs/a.md", "docs/sub/a.md", "README"],
                                   agent="Green")
    assert [c["path"] for c in found] == ["src/api/v1/users.py", "docs/a.md"]
    assert rs.conflicts_for_paths(ctx, KEY, ["src/api/x.py"], agent="Blue") == []


_RACER = r"""
import json, sys
sys.path.insert(0, sys.argv[5])
from gitmail import Store
from gitmail.coord import reservations as rs
from gitmail.coord.context import Context
from tests.start_line import arrive
home, agent, pattern, line = sys.argv[1:5]
ctx = Context(Store(home, background=False))
ctx.store.archive("/work/demo").snapshot()  # everything opened and imported before the start
ready = arrive(line, agent, 2)
try:
    out = rs.reserve(ctx, "/work/demo", agent, [pattern], ttl_seconds=600)
    print(json.dumps({"ready": ready, "granted": len(out["granted"]), "conflicts": len(out["conflicts"])}))
except Exception as exc:
    print(json.dumps({"ready": ready, "error": repr(exc)}))
"""


@pytest.mark.slow
def test_two_processes_racing_for_one_exclusive_pattern_exactly_one_wins(store, project, home, ctx, tmp_path):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for round_no in range(4):
        line = str(tmp_path / f"start-{round_no}")
        procs = [subprocess.Popen([sys.executable, "-c", _RACER, home, name, f"race/{round_no}/*", line, root],
                                  stdout=subprocess.PIPE, text=True) for name in ("Blue", "Green")]
        results = [json.loads(p.communicate(timeout=120)[0]) for p in procs]
        assert [r["ready"] for r in results] == [2, 2], "each reserved only once both were at the start line"
        assert sorted(r["granted"] for r in results) == [0, 1], results
        assert sorted(r["conflicts"] for r in results) == [0, 1], results
    active = rs.list_reservations(ctx, KEY)["file_reservations"]
    assert len(active) == 4


def test_a_fresh_process_starts_from_the_index_and_catches_up_by_diff(store, project, home, wall, monkeypatch, ctx):
    from gitmail import Store
    from gitmail.coord.context import Context
    from gitmail.index import indexer_for
    from gitmail.index import reservations as active_set

    rs.reserve(ctx, KEY, "Blue", ["one/"], ttl_seconds=600)
    indexer_for(store).project(KEY).catch_up()  # the metadata store now holds "one/"
    rs.reserve(ctx, KEY, "Blue", ["two/"], ttl_seconds=600)  # committed after the watermark

    def no_scan(*args):
        raise AssertionError("full scan")

    # A fresh process (its own store and index): it loads the open reservations at the
    # watermark and applies the diff to the tip, without reading the whole history.
    monkeypatch.setattr(active_set, "_scan", no_scan)
    fresh = Context(Store(home, background=False, wall=wall))
    found = rs.conflicts_for_paths(fresh, KEY, ["one/a", "two/b", "three/c"], agent="Green")
    assert [c["path"] for c in found] == ["one/a", "two/b"]
    monkeypatch.undo()
    # A damaged metadata store costs one full read of the reservations, never a wrong answer.
    meta = indexer_for(store).project(KEY).meta.path
    indexer_for(store).close()
    with open(meta, "r+b") as handle:
        handle.write(b"not a database" * 100)
    again = Context(Store(home, background=False, wall=wall))
    assert len(rs.conflicts_for_paths(again, KEY, ["one/a", "two/b"], agent="Green")) == 2


def test_active_until_the_expiry_instant_and_not_at_it():
    from gitmail.index.reservations import Entry

    at = dt.datetime(2026, 3, 1, 12, 0, tzinfo=dt.UTC)
    expires = at + dt.timedelta(seconds=60)
    record = Reservation(id=new_id(), agent="Blue", path_pattern="a", created_ts=format_ts(at),
                         expires_ts=format_ts(expires), hlc=HLC(0, 0, "n"))
    entry = Entry(record, expires.timestamp())
    assert entry.active_at(expires.timestamp() - 0.001)
    assert not entry.active_at(expires.timestamp())
    released = Entry(dataclasses.replace(record, released_ts=format_ts(at)), expires.timestamp())
    assert not released.active_at(at.timestamp())
