"""The coordination commands of the `gitmail` CLI, run in-process on a private store."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from gitmail.cli import cli

from .coord_helpers import make_project

KEY = "/work/demo"


@pytest.fixture
def gm(store, home):
    make_project(store, KEY, "Blue", "Green")
    runner = CliRunner()

    def invoke(*args: str, code: int = 0, data: bool = True):
        result = runner.invoke(cli, ["--home", home, *args, *(["--json"] if data else [])])
        assert result.exit_code == code, result.output
        return json.loads(result.output) if data else result.output

    return invoke


def test_reserve_conflict_renew_release(gm):
    out = gm("reserve", KEY, "Blue", "src/", "--ttl", "600", "--reason", "core rewrite")
    rid = out["granted"][0]["id"]
    conflict = gm("reserve", KEY, "Green", "src/a.py", code=1)
    assert conflict["conflicts"][0]["holders"][0]["id"] == rid
    text = gm("reservations", KEY, data=False)
    assert "src" in text and "core rewrite" in text
    assert gm("renew", KEY, "Blue", "--extend", "120")["renewed"] == 1
    assert gm("release", KEY, "Blue", "--id", rid)["released"] == 1
    assert gm("reservations", KEY)["file_reservations"] == []
    assert len(gm("reservations", KEY, "--all")["file_reservations"]) == 1
    bad = gm("reserve", KEY, "Blue", "x", "--ttl", "5", code=2)
    assert bad["error"]["code"] == "INVALID_ARGUMENT"


def test_seats_journal_sleep_and_capabilities(gm):
    seat = gm("seat", "take", KEY, "Blue", "--holder", "terminal")["seat"]
    assert gm("journal", KEY, "Blue", "decided to split the parser", code=2)["error"]["code"] == "SEAT_HELD"
    gm("journal", KEY, "Blue", "decided to split the parser", "--seat", seat["token"])
    assert gm("journal", KEY, "Blue")["entries"][-1]["entry"].startswith("decided")
    assert gm("seat", "status", KEY, "Blue")["held"] is True
    gm("seat", "renew", KEY, "Blue", seat["token"], "--lease", "900")
    gm("seat", "release", KEY, "Blue", seat["token"])
    assert gm("seat", "status", KEY, "Blue")["held"] is False
    assert gm("sleep", KEY, "Green", "--until", "woken", "--reason", "holiday")["until"] == "woken"
    assert gm("reserve", KEY, "Green", "x", code=2)["error"]["code"] == "AGENT_ASLEEP"
    assert gm("wake", KEY, "Green", "--by", "Green", code=2)["error"]["code"] == "WAKE_REFUSED"
    assert gm("wake", KEY, "Green", "--by", "Blue", code=2)["error"]["code"] == "SEAT_REQUIRED"  # Blue gave it up
    again = gm("seat", "take", KEY, "Blue", "--holder", "terminal")["seat"]["token"]
    assert gm("wake", KEY, "Green", "--by", "Blue", "--seat", again, code=2)["error"]["code"] == "NOT_ABOVE"
    assert gm("wake", KEY, "Green")["asleep"] is False  # the operator wakes any agent
    assert gm("capabilities", KEY, "Green", "review", "docs", "--set")["capabilities"] == ["docs", "review"]
    cards = gm("capabilities", KEY)["agents"]
    assert {a["name"]: a["capabilities"] for a in cards}["Green"] == ["docs", "review"]
