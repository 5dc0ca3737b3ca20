"""Flat records read line by line: the same values as the YAML loader, or the loader reads them.

Derived state reads every record of an archive when it is rebuilt; records
gitmail writes (and most a person writes) are flat mappings, which
``codec.flat_mapping`` reads without building the loader's node tree. It
must answer exactly what the loader answers, or leave the text to it.
"""

from __future__ import annotations

import datetime as dt

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from gitmail.model import codec
from gitmail.model.clock import HLC
from gitmail.model.records import Receipt, Reservation

from .index_helpers import message

RISKY = list("ab yZ019:#-'\"!&*?|>%@`{}[],.~=<+\\\t") + ["yes", "No", "null", "on", "OFF", "true", "0x1", "1.5", "07",
                                                       "1:30", ".inf", "- ", ": ", " #", "é", "\u2028", "\x85"]
KEYS = st.from_regex(r"[a-z_][a-z0-9_-]{0,8}", fullmatch=True) | st.sampled_from(["on", "yes", "x-team", "null"])
SCALARS = (st.lists(st.sampled_from(RISKY), max_size=12).map("".join) | st.integers(-5, 10**12) | st.booleans()
           | st.none() | st.sampled_from(["2026-12-03T15:59:29.871Z", "2026-12-03", "Re: plan", "it's"]))
VALUES = SCALARS | st.lists(st.lists(st.sampled_from(RISKY), max_size=8).map("".join), max_size=3)


def loaded(text: str):
    return yaml.load(text, Loader=codec._Loader)  # noqa: S506, SLF001 - the records' own loader


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(KEYS, VALUES, max_size=6))
def test_what_gitmail_writes_reads_back_the_same(fields):
    text = codec.dump_yaml(fields).decode()
    flat = codec.flat_mapping(text)
    assert flat is None or flat == loaded(text)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["", "- ", "  "]), KEYS, st.sampled_from([": ", ":", " : ", ":: "]),
                          st.lists(st.sampled_from(RISKY), max_size=10).map("".join)), max_size=6))
def test_hand_written_text_is_read_the_same_or_left_to_the_loader(lines):
    text = "".join(f"{lead}{key}{sep}{value}\n" for lead, key, sep, value in lines)
    flat = codec.flat_mapping(text)
    if flat is not None:
        assert flat == loaded(text)


def test_records_gitmail_writes_are_read_line_by_line():
    """The fast path is the one taken for receipts, reservations and message headers."""
    stamp = "2026-12-03T15:59:29.871Z"
    receipt = Receipt(message_id="01m8ya3m3049zheh8qdydhq", agent="Blue", hlc=HLC(1, 0, "node"), read_at=stamp)
    reservation = Reservation(id="01m8ya3m3049zheh8qdydhq", agent="Blue", path_pattern="src/**", created_ts=stamp,
                              expires_ts=stamp, hlc=HLC(1, 0, "node"), reason="editing: the parser # twice")
    msg = message("Blue", ["Green", "Red"], "Re: build plan", "body", cc=("Gray",), topic="ops",
                  when=dt.datetime(2026, 12, 3, tzinfo=dt.UTC))
    header = msg.to_bytes().decode().split("---\n")[1]
    for text in (receipt.to_bytes().decode(), reservation.to_bytes().decode(), header):
        flat = codec.flat_mapping(text)
        assert flat is not None and flat == loaded(text)
    assert codec.flat_mapping(header)["to"] == ["Green", "Red"]
    assert codec.flat_mapping(header)["subject"] == "Re: build plan"
