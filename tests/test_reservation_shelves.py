"""The open-reservation set moves by what a commit changed: each holder's shelf apart, the exclusive ones apart."""

from __future__ import annotations

import datetime as dt

from hypothesis import given, settings
from hypothesis import strategies as st

from gitmail.coord import reservations as rs
from gitmail.index import indexer_for
from gitmail.index.reservations import EMPTY, Entry, Held
from gitmail.model.clock import HLC, format_ts
from gitmail.model.records import Reservation

from .coord_helpers import make_project

KEY = "/work/shelves"
AT = dt.datetime(2026, 3, 1, 12, 0, tzinfo=dt.UTC)
HOLDERS = ("Blue", "Green", "Red")


def _entry(n: int, holder: str, exclusive: bool, expires_in: int) -> Entry:
    expires = AT + dt.timedelta(seconds=expires_in)
    record = Reservation(id=f"r{n}", agent=holder, path_pattern=f"src/{n}/*", created_ts=format_ts(AT),
                         expires_ts=format_ts(expires), hlc=HLC(0, 0, "n"), exclusive=exclusive)
    return Entry(record, expires.timestamp())


edits = st.lists(st.tuples(st.integers(0, 12), st.one_of(st.none(), st.tuples(
    st.sampled_from(HOLDERS), st.booleans(), st.integers(-60, 600)))), max_size=30)


@settings(max_examples=200, deadline=None)
@given(st.lists(edits, min_size=1, max_size=6), st.sampled_from(HOLDERS))
def test_every_view_equals_a_plain_filter_and_an_older_set_never_changes(steps, me):
    horizon = AT.timestamp()
    held, model = EMPTY, {}
    for step in steps:
        before, before_model = held, dict(model)
        changes = []
        for n, what in step:
            entry = None if what is None else _entry(n, *what)
            changes.append((f"reservations/{n}.yaml", entry))
            if entry is None:
                model.pop(f"reservations/{n}.yaml", None)
            else:
                model[f"reservations/{n}.yaml"] = entry
        held = before.edited(changes, horizon=horizon)
        live = {e.record.id for e in model.values() if e.active_at(horizon + 1)}

        def ids(entries):
            return sorted(e.record.id for e in entries if e.active_at(horizon + 1))

        assert ids(held.entries()) == sorted(live)
        assert ids(held.held_by(me.lower())) == sorted(i for i in live if _holder(model, i) == me)
        assert ids(held.blocking(me)) == sorted(i for i in live if _holder(model, i) != me and _exclusive(model, i))
        # The set handed out before the move is untouched (a reader may still be using it).
        assert ids(before.entries()) == sorted(e.record.id for e in before_model.values()
                                               if e.active_at(horizon + 1))
        assert all(shelf for shelf in held.shelves.values()), "no empty shelf is kept"


def _holder(model: dict[str, Entry], rid: str) -> str:
    return next(e.record.agent for e in model.values() if e.record.id == rid)


def _exclusive(model: dict[str, Entry], rid: str) -> bool:
    return next(e.record.exclusive for e in model.values() if e.record.id == rid)


def test_a_shelf_copied_on_a_move_drops_what_expired():
    held = Held.of([("reservations/1.yaml", _entry(1, "Blue", True, 30)),
                    ("reservations/2.yaml", _entry(2, "Blue", True, 600))])
    moved = held.edited([("reservations/3.yaml", _entry(3, "Blue", False, 600))], horizon=AT.timestamp() + 60)
    assert sorted(moved.shelves["blue"]) == ["reservations/2.yaml", "reservations/3.yaml"]
    assert moved.exclusive["blue"] is held.exclusive["blue"]  # untouched: kept as it was, readers filter by time


def test_a_commit_copies_only_the_shelves_of_the_holders_it_touches(store, ctx):
    """Moving the set by one commit must not rebuild the reservations of agents the commit did not touch."""
    make_project(store, KEY, *HOLDERS)
    rs.reserve(ctx, KEY, "Blue", [f"blue/{n}.py" for n in range(20)], ttl_seconds=600)
    rs.reserve(ctx, KEY, "Red", ["red/a.py"], ttl_seconds=600, exclusive=False)
    index = indexer_for(store).project(KEY)
    archive = ctx.archive(KEY)
    now = ctx.clock.now().timestamp()
    before = index.open_reservations.at(archive.snapshot(), now)
    rs.reserve(ctx, KEY, "Green", ["green/a.py"], ttl_seconds=600)
    after = index.open_reservations.at(archive.snapshot(), now)
    assert after.shelves["blue"] is before.shelves["blue"]
    assert after.exclusive["blue"] is before.exclusive["blue"]
    assert after.shelves["red"] is before.shelves["red"]
    assert "red" not in after.exclusive  # a shared reservation never blocks anyone
    assert [e.record.path_pattern for e in after.held_by("Green")] == ["green/a.py"]
    # The grant check sees only the others' exclusive reservations.
    blocking = index.active_reservations(archive.snapshot(), ctx.clock.now(), blocking="Green")
    assert sorted(r.path_pattern for r in blocking) == sorted(f"blue/{n}.py" for n in range(20))
    mine = index.active_reservations(archive.snapshot(), ctx.clock.now(), held_by="red")
    assert [r.path_pattern for r in mine] == ["red/a.py"]
