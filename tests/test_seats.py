"""Seats with epoch fencing, journals, sleep and wake, capability cards."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys

import pytest

from gitmail import Change, Seat
from gitmail.coord import capabilities as caps
from gitmail.coord import journal, seats
from gitmail.coord import reservations as rs
from gitmail.mail import identities
from gitmail.model.clock import parse_ts
from gitmail.model.errors import GitmailError

from .conftest import refused, tip
from .coord_helpers import make_project

KEY = "/work/demo"


@pytest.fixture
def project(store):
    return make_project(store, KEY, "Blue", "Green", "Red",
                        capabilities={"Green": ["review"], "Red": ["review", "db"]})


def test_take_seat_returns_token_lease_and_journal_end(store, project, wall, ctx):
    for i in range(7):
        journal.append(ctx, KEY, "Blue", f"decision {i}: because reasons")
    out = seats.take_seat(ctx, KEY, "Blue", holder="laptop", lease_s=120, journal_entries=3)
    seat = out["seat"]
    assert seat["epoch"] == 1 and seat["holder"] == "laptop" and seat["token"].startswith("seat-1-")
    assert parse_ts(seat["expires_at"]) - wall.now() == dt.timedelta(seconds=120)
    assert [e["entry"].split(":")[0] for e in out["journal"]] == ["decision 4", "decision 5", "decision 6"]
    assert out["home"] == "agents/Blue/"
    record = store.archive(KEY).snapshot().load("agents/Blue/seat.yaml", Seat)
    assert record.token_hash
    assert seat["token"] not in store.archive(KEY).snapshot().read("agents/Blue/seat.yaml").decode()


def test_writes_are_fenced_by_the_seat(store, project, ctx):
    first = seats.take_seat(ctx, KEY, "Blue", holder="one")["seat"]["token"]
    # While the seat is held, a write without its token is refused.
    refused(store, KEY, "SEAT_HELD", rs.reserve, ctx, KEY, "Blue", ["a/*"])
    refused(store, KEY, "SEAT_HELD", seats.take_seat, ctx, KEY, "Blue", holder="two")
    assert rs.reserve(ctx, KEY, "Blue", ["a/*"], seat=first)["granted"]
    second = seats.take_seat(ctx, KEY, "Blue", holder="two", take_over=True)
    assert second["seat"]["epoch"] == 2 and second["taken_over"] is True
    error = refused(store, KEY, "STALE_EPOCH", journal.append, ctx, KEY, "Blue", "late write", seat=first)
    assert error.data["current_epoch"] == 2
    refused(store, KEY, "STALE_EPOCH", seats.renew_seat, ctx, KEY, "Blue", first)
    token = second["seat"]["token"]
    assert journal.append(ctx, KEY, "Blue", "carrying on", seat=token)["agent"] == "Blue"
    refused(store, KEY, "UNAUTHORIZED", journal.append, ctx, KEY, "Blue", "x", seat="seat-2-" + "A" * 32)
    refused(store, KEY, "INVALID_ARGUMENT", journal.append, ctx, KEY, "Blue", "x", seat="not-a-token")
    # Other agents are not affected by Blue's seat.
    assert rs.reserve(ctx, KEY, "Green", ["b/*"])["granted"]


def test_renew_never_shortens_and_release_frees(store, project, ctx):
    token = seats.take_seat(ctx, KEY, "Blue", lease_s=3600)["seat"]["token"]
    before = tip(store, KEY)
    out = seats.renew_seat(ctx, KEY, "Blue", token, lease_s=60)
    assert out["renewed"] is False and tip(store, KEY) == before
    longer = seats.renew_seat(ctx, KEY, "Blue", token, lease_s=7200)
    assert longer["renewed"] is True
    assert longer["seat"]["expires_at"] > out["seat"]["expires_at"]
    released = seats.release_seat(ctx, KEY, "Blue", token)
    assert released["released"] is True and released["seat"]["released_at"]
    refused(store, KEY, "STALE_EPOCH", journal.append, ctx, KEY, "Blue", "after release", seat=token)
    # Free again, but Blue is now driven from its seat: a write without one is refused until a session takes it.
    refused(store, KEY, "SEAT_REQUIRED", journal.append, ctx, KEY, "Blue", "no seat held")
    assert seats.take_seat(ctx, KEY, "Blue")["seat"]["epoch"] == 2
    assert seats.seat_status(ctx, KEY, "Blue")["held"] is True


def test_an_expired_lease_frees_the_seat_for_the_next_session(store, project, wall, ctx):
    old = seats.take_seat(ctx, KEY, "Blue", lease_s=60)["seat"]
    wall.advance(seconds=59.999)
    refused(store, KEY, "SEAT_HELD", seats.take_seat, ctx, KEY, "Blue", holder="next")
    wall.advance(seconds=0.001)  # the lease ends at its expiry instant
    fresh = seats.take_seat(ctx, KEY, "Blue", holder="next")
    assert fresh["seat"]["epoch"] == 2 and fresh["taken_over"] is False
    refused(store, KEY, "STALE_EPOCH", journal.append, ctx, KEY, "Blue", "x", seat=old["token"])


@pytest.mark.parametrize("kwargs", [{"lease_s": 59}, {"lease_s": 86401}, {"lease_s": "600"}, {"holder": ""},
                                    {"holder": "a\nb"}])
def test_bad_seat_input(store, project, kwargs, ctx):
    refused(store, KEY, "INVALID_ARGUMENT", seats.take_seat, ctx, KEY, "Blue", **kwargs)


def test_unknown_agent(store, project, ctx):
    refused(store, KEY, "NOT_FOUND", seats.take_seat, ctx, KEY, "Nobody")
    refused(store, KEY, "INVALID_ARGUMENT", seats.take_seat, ctx, KEY, "../etc")


_TAKER = r"""
import json, sys
sys.path.insert(0, sys.argv[4])
from gitmail import Store, GitmailError
from gitmail.coord import seats
from gitmail.coord.context import Context
from tests.start_line import arrive
home, holder, line = sys.argv[1:4]
ctx = Context(Store(home, background=False))
ctx.store.archive("/work/demo").snapshot()  # everything opened and imported before the start
ready = arrive(line, holder, 2)
try:
    out = seats.take_seat(ctx, "/work/demo", "Blue", holder=holder)
    print(json.dumps({"ready": ready, "epoch": out["seat"]["epoch"]}))
except GitmailError as exc:
    print(json.dumps({"ready": ready, "error": exc.code}))
"""


@pytest.mark.slow
def test_two_processes_taking_one_seat_one_wins(store, project, home, tmp_path):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for round_no in range(3):
        line = str(tmp_path / f"start-{round_no}")
        procs = [subprocess.Popen([sys.executable, "-c", _TAKER, home, f"p{i}", line, root],
                                  stdout=subprocess.PIPE, text=True) for i in range(2)]
        results = [json.loads(p.communicate(timeout=120)[0]) for p in procs]
        assert [r["ready"] for r in results] == [2, 2], "each took the seat only once both were at the start line"
        winners = [r for r in results if "epoch" in r]
        assert len(winners) == 1 and [r.get("error") for r in results if "error" in r] == ["SEAT_HELD"], results
        assert winners[0]["epoch"] == round_no + 1
        record = store.archive(KEY).snapshot().load("agents/Blue/seat.yaml", Seat)
        record.released_at = store.clock.now_ts()
        store.archive(KEY).transact(lambda s, r=record: Change("free the seat").put_record(r))


def test_asleep_agents_receive_but_cannot_act(store, project, ctx):
    out = identities.set_asleep(ctx, KEY, "Blue", True)  # the operator may put any agent to sleep
    assert out == {"agent": "Blue", "asleep": True, "until": "reply", "changed": True}
    refused(store, KEY, "AGENT_ASLEEP", rs.reserve, ctx, KEY, "Blue", ["x"])
    refused(store, KEY, "AGENT_ASLEEP", journal.append, ctx, KEY, "Blue", "x")
    refused(store, KEY, "AGENT_ASLEEP", seats.take_seat, ctx, KEY, "Blue")
    refused(store, KEY, "AGENT_ASLEEP", identities.set_asleep, ctx, KEY, "Green", True, actor="Blue")
    # Top-level agents are peers: neither is above the other.
    refused(store, KEY, "NOT_ABOVE", identities.set_asleep, ctx, KEY, "Blue", False, actor="Green")
    refused(store, KEY, "NOT_ABOVE", identities.set_asleep, ctx, KEY, "Green", True, actor="Red")
    # Still an addressee: role expansion includes asleep agents with the capability.
    caps.publish(ctx, KEY, "Green", ["review"])
    # Asleep until a reply, it may end its own wait.
    assert identities.set_asleep(ctx, KEY, "Blue", False, actor="Blue")["asleep"] is False
    assert rs.reserve(ctx, KEY, "Blue", ["x"])["granted"]
    # Asleep until woken, it may not.
    assert identities.set_asleep(ctx, KEY, "Blue", True, actor="Blue", until="woken")["changed"] is True
    refused(store, KEY, "WAKE_REFUSED", identities.set_asleep, ctx, KEY, "Blue", False, actor="Blue")
    assert identities.set_asleep(ctx, KEY, "Blue", True, until="woken")["changed"] is False
    identities.set_asleep(ctx, KEY, "Blue", False)
    assert identities.set_asleep(ctx, KEY, "Red", True, actor="Red")["asleep"] is True


def test_capability_cards_and_role_addressing(store, project, ctx):
    out = caps.publish(ctx, KEY, "Blue", ["Review", "frontend", "review"])
    assert out["capabilities"] == ["frontend", "review"]
    snap = store.archive(KEY).snapshot()
    assert caps.holders(snap, "review") == ["Blue", "Green", "Red"]
    assert caps.expand_roles(snap, ["role:review", "Green"], exclude="Blue") == ["Green", "Red"]
    assert caps.expand_roles(snap, ["role:db", "Blue"]) == ["Red", "Blue"]
    with pytest.raises(GitmailError) as info:
        caps.expand_roles(snap, ["role:nobody-has-this"])
    assert info.value.code == "NOT_FOUND"
    assert [a["name"] for a in caps.cards(ctx, KEY, "frontend")["agents"]] == ["Blue"]
    refused(store, KEY, "INVALID_ARGUMENT", caps.publish, ctx, KEY, "Blue", ["bad name!"])
    refused(store, KEY, "INVALID_ARGUMENT", caps.publish, ctx, KEY, "Blue", "review")
    caps.publish(ctx, KEY, "Blue", [])
    assert caps.holders(store.archive(KEY).snapshot(), "frontend") == []


def test_journal_entries_live_under_the_agents_folder(store, project, ctx):
    entry = journal.append(ctx, KEY, "Blue", "Chose WebP for screenshots: smaller, lossless option.")
    today = dt.datetime.now(dt.UTC)
    assert entry["path"].startswith(f"agents/Blue/journal/{today:%Y/%m/%d}/")
    text = store.archive(KEY).snapshot().read(entry["path"]).decode()
    assert "Chose WebP" in text and "agent: Blue" in text
    assert journal.read(ctx, KEY, "Blue")["entries"][-1]["id"] == entry["id"]
    refused(store, KEY, "INVALID_ARGUMENT", journal.append, ctx, KEY, "Blue", "   ")
    refused(store, KEY, "INVALID_ARGUMENT", journal.append, ctx, KEY, "Blue", "x" * 20001)


def test_who_needs_a_seat_to_write(store, ctx):
    """Persistent agents always write from their seat, intermittent ones once they took one; others need none."""
    make_project(store, KEY, "Lead")
    for name, lifecycle in (("Always", "persistent"), ("Sometimes", "intermittent"), ("Brief", "ephemeral")):
        identities.spawn(ctx, KEY, "Lead", ["editor@*"], name=name, lifecycle=lifecycle)
    refused(store, KEY, "SEAT_REQUIRED", journal.append, ctx, KEY, "Always", "no seat yet")
    assert journal.append(ctx, KEY, "Sometimes", "never seated: writes as an agent-mail agent does")
    assert journal.append(ctx, KEY, "Brief", "ephemeral agents have no seats")
    assert journal.append(ctx, KEY, "Lead", "registered without seats")
    for name in ("Always", "Sometimes"):
        token = seats.take_seat(ctx, KEY, name)["seat"]["token"]
        assert journal.append(ctx, KEY, name, "from my seat", seat=token)
        seats.release_seat(ctx, KEY, name, token)
        with pytest.raises(GitmailError) as info:
            journal.append(ctx, KEY, name, "after giving it up")
        assert info.value.code == "SEAT_REQUIRED" and "take_seat" in info.value.message
    brief = seats.take_seat(ctx, KEY, "Brief")["seat"]["token"]
    seats.release_seat(ctx, KEY, "Brief", brief)
    assert journal.append(ctx, KEY, "Brief", "still no seat needed")
