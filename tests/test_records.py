"""Records: canonical serialization, strict parsing, IDs and clocks."""

from __future__ import annotations

import copy
import dataclasses
import datetime as dt
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gitmail import HLC, Agent, Contact, HybridClock, JournalEntry, Message, Project, Receipt, Reservation, Seat, new_id
from gitmail.model.clock import format_ts, parse_ts
from gitmail.model.errors import CORRUPT_RECORD, INVALID_ARGUMENT, GitmailError
from gitmail.model.ids import ID_LENGTH, derived_id, id_time, is_id
from gitmail.model.records import (
    MAX_BODY_BYTES,
    MAX_SUBJECT,
    ORG_CONTEXT_PATH,
    PATH_TYPES,
    PROJECT_PATH,
    adoption_path,
    build_slot_path,
    channel_path,
    classify,
    conflict_path,
    contact_path,
    day_shard,
    escalation_path,
    file_path,
    held_path,
    inbox_path,
    journal_path,
    memory_path,
    message_path,
    node_path,
    outbox_path,
    parse_path,
    post_path,
    product_path,
    profile_path,
    receipt_path,
    repair_path,
    reservation_path,
    revocation_path,
    seat_path,
    summary_path,
    tombstone_path,
)

names = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._-]{0,20}", fullmatch=True)
line = st.text(st.characters(blacklist_categories=("Cs", "Cc")), max_size=80)
# Any text but NUL (refused in every field, see test_control_characters) and line breaks YAML would normalize.
text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\0\r\x85\u2028\u2029"), max_size=400)
stamps = st.datetimes(min_value=dt.datetime(2000, 1, 1), max_value=dt.datetime(2100, 1, 1),
                      timezones=st.just(dt.UTC)).map(format_ts)
clock = HybridClock("node-a")


@st.composite
def messages(draw):
    return Message(id=new_id(), thread_id=draw(st.from_regex(r"[A-Za-z0-9-]{1,30}", fullmatch=True)),
                   sender=draw(names), subject=draw(line), created_ts=draw(stamps),
                   to=draw(st.lists(names, min_size=1, max_size=4)), cc=draw(st.lists(names, max_size=3)),
                   bcc=draw(st.lists(names, max_size=2)),
                   importance=draw(st.sampled_from(["low", "normal", "high", "urgent"])),
                   ack_required=draw(st.booleans()),
                   topic=draw(st.none() | st.from_regex(r"[a-z][a-z0-9-]{0,10}", fullmatch=True)),
                   body=draw(text))


@settings(max_examples=150, deadline=None)
@given(messages())
def test_message_round_trip_is_stable(message):
    data = message.to_bytes()
    parsed = Message.from_bytes(data, message.path())
    assert parsed == message
    assert parsed.to_bytes() == data


@settings(max_examples=100, deadline=None)
@given(names, line, line, text, st.lists(line.filter(lambda s: "\n" not in s), max_size=3), st.booleans())
def test_agent_round_trip_is_stable(name, program, model, task, capabilities, asleep):
    agent = Agent(id=new_id(), name=name, program=program, model=model, inception_ts=clock.now_ts(), hlc=clock.tick(),
                  task_description=task, capabilities=capabilities, asleep=asleep)
    data = agent.to_bytes()
    assert Agent.from_bytes(data, agent.path()) == agent
    assert Agent.from_bytes(data, agent.path()).to_bytes() == data


def _every_kind():
    mid = new_id()
    return [
        Project(id=new_id(), slug="data-x-0123456789ab", human_key="/data/x", created_at=clock.now_ts(),
                hlc=clock.tick()),
        Agent(id=new_id(), name="BlueLake", program="p", model="m", inception_ts=clock.now_ts(), hlc=clock.tick()),
        Message(id=mid, thread_id=mid, sender="BlueLake", subject="s", created_ts=clock.now_ts(), to=["RedFox"],
                body="b"),
        Receipt(message_id=mid, agent="RedFox", hlc=clock.tick(), read_at=clock.now_ts()),
        Contact(requester="BlueLake", target="RedFox", status="pending", requested_at=clock.now_ts(), hlc=clock.tick()),
        Reservation(id=new_id(), agent="BlueLake", path_pattern="src/**", created_ts=clock.now_ts(),
                    expires_ts=clock.now_ts(),
                    hlc=clock.tick()),
        Seat(agent="BlueLake", epoch=3, holder="session-1", lease_expires_at=clock.now_ts(), hlc=clock.tick()),
        JournalEntry(id=new_id(), agent="BlueLake", created_ts=clock.now_ts(), body="note\n"),
    ]


@pytest.mark.parametrize("record", _every_kind(), ids=lambda r: r.KIND)
def test_every_kind_round_trips_and_is_found_by_path(record):
    data = record.to_bytes()
    assert parse_path(record.path(), data) == record
    assert classify(record.path())[1] is type(record)


@pytest.mark.parametrize("record", _every_kind(), ids=lambda r: r.KIND)
def test_a_records_copy_equals_it_and_shares_nothing_it_could_change(record):
    record.extra = {"x-team": {"lead": ["BlueLake"]}}
    if isinstance(record, Message):
        record.attachments = [{"path": "attachments/aa/bb/x.png", "width": 1}]
    if isinstance(record, Agent):
        record.capabilities = ["review"]
    clone = copy.deepcopy(record)
    assert clone == record and clone is not record and clone.to_bytes() == record.to_bytes()
    for name, value in vars(record).items():
        if isinstance(value, (list, dict)):
            assert getattr(clone, name) is not value, name
    clone.extra["x-team"]["lead"].append("RedFox")
    if isinstance(clone, Message):
        clone.attachments[0]["width"] = 2
        clone.to.append("GreenHill")
    if isinstance(clone, Agent):
        clone.capabilities.append("deploy")
    assert record.extra == {"x-team": {"lead": ["BlueLake"]}}
    if isinstance(record, Message):
        assert record.attachments[0]["width"] == 1 and "GreenHill" not in record.to
    if isinstance(record, Agent):
        assert record.capabilities == ["review"]
    assert record.to_bytes() == parse_path(record.path(), record.to_bytes()).to_bytes()
    assert clone != record


def test_unknown_field_names_file_and_field():
    agent = _every_kind()[1]
    data = agent.to_bytes().replace(b"program:", b"programme:")
    with pytest.raises(GitmailError) as info:
        Agent.from_bytes(data, agent.path())
    assert info.value.code == CORRUPT_RECORD
    assert info.value.message.startswith(agent.path() + ": field 'programme'")


def test_extension_fields_are_allowed():
    agent = _every_kind()[1]
    data = agent.to_bytes() + b"x-team: infra\n"
    assert Agent.from_bytes(data, agent.path()).name == "BlueLake"


@pytest.mark.parametrize("mutate, field", [
    (lambda b: b.replace(b"status: active", b"status: sleeping"), "status"),
    (lambda b: b.replace(b"asleep: false", b"asleep: 'no'"), "asleep"),
    (lambda b: b.replace(b"inception_ts: ", b"inception_ts: yesterday #"), "inception_ts"),
    (lambda b: b.replace(b"name: BlueLake", b"name: Blue Lake"), "name"),
    (lambda b: b.replace(b"model: m\n", b""), "model"),
    (lambda b: b.replace(b"hlc: ", b"hlc: 12 #"), "hlc"),
])
def test_bad_values_name_the_field(mutate, field):
    agent = _every_kind()[1]
    with pytest.raises(GitmailError) as info:
        Agent.from_bytes(mutate(agent.to_bytes()), agent.path())
    assert info.value.code == CORRUPT_RECORD and f"field '{field}'" in info.value.message


@pytest.mark.parametrize("data, reason", [
    (b"\xff\xfe", "not UTF-8"),
    (b"a: [1,\n", "invalid YAML at line"),
    (b"- just\n- a list\n", "mapping"),
])
def test_unparsable_yaml_names_the_file(data, reason):
    with pytest.raises(GitmailError) as info:
        Agent.from_bytes(data, "agents/X/profile.yaml")
    assert info.value.message.startswith("agents/X/profile.yaml: ") and reason in info.value.message


def test_message_without_front_matter_is_corrupt():
    with pytest.raises(GitmailError) as info:
        Message.from_bytes(b"hello\n", "messages/2026/12/01/x.md")
    assert "front matter" in info.value.message


def test_record_in_the_wrong_place_is_corrupt():
    agent = _every_kind()[1]
    with pytest.raises(GitmailError) as info:
        Agent.from_bytes(agent.to_bytes(), "agents/Someone/profile.yaml")
    assert "does not match the file's location" in info.value.message
    message = _every_kind()[2]
    with pytest.raises(GitmailError):
        Message.from_bytes(message.to_bytes(), "messages/1999/01/01/" + message.id + ".md")


@pytest.mark.parametrize("change, field", [
    ({"subject": "x" * (MAX_SUBJECT + 1)}, "subject"),
    ({"subject": "two\nlines"}, "subject"),
    ({"body": "x" * (MAX_BODY_BYTES + 1)}, "body"),
    ({"to": ["not a name"]}, "to[0]"),
    ({"importance": "x" * 33}, "importance"),
    ({"created_ts": "2026-12-01 10:00"}, "created"),
    ({"id": "NOT-AN-ID"}, "id"),
])
def test_oversized_or_malformed_fields_are_invalid_arguments(change, field):
    message = dataclasses.replace(_every_kind()[2], **change)
    with pytest.raises(GitmailError) as info:
        message.to_bytes()
    assert info.value.code == INVALID_ARGUMENT and info.value.data["field"] == field


def test_timestamps_stay_strings_and_normalize_to_utc():
    assert format_ts(parse_ts("2026-12-01T07:00:00+02:00")) == "2026-12-01T05:00:00.000Z"
    with pytest.raises(ValueError):
        parse_ts("2026-12-01T05:00:00")  # no zone: ambiguous between machines


@settings(max_examples=50, deadline=None)
@given(st.integers(min_value=1, max_value=300))
def test_ids_are_unique_sorted_and_filename_safe(count):
    ids = [new_id() for _ in range(count)]
    assert len(set(ids)) == count
    assert ids == sorted(ids), "IDs minted in one process sort in minting order"
    assert all(is_id(i) and len(i) == ID_LENGTH and i.isalnum() and i == i.lower() for i in ids)


def test_ids_encode_their_time_and_never_collide_across_processes():
    at = dt.datetime(2026, 1, 1, 12, 30, 5, 123000, tzinfo=dt.UTC)
    mid = HybridClock("a", wall=at.timestamp).new_id()
    assert id_time(mid) == at
    # Two "machines" minting in the very same millisecond still differ.
    script = "from gitmail import new_id; print(new_id(now_ms=1_000_000_000_000))"
    minted = [subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout.strip()
              for _ in range(2)]
    assert minted[0][:10] == minted[1][:10] and minted[0] != minted[1]


def test_ids_keep_order_when_the_clock_steps_back():
    later = new_id()
    earlier_clock = new_id(now_ms=1_000_000_000_000)
    assert earlier_clock > later


def test_hybrid_clock_orders_events_and_survives_parsing():
    a, b = HybridClock("a"), HybridClock("b")
    first = a.tick()
    second = a.tick()
    assert second > first
    future = HLC(first.wall_ms + 60_000, 5, "b")
    a.observe(future)
    third = a.tick()
    assert third > future and third.node == "a"
    assert HLC.parse(str(third)) == third
    with pytest.raises(ValueError):
        HLC.parse("garbage")
    assert b.tick().node == "b"


# Characters that change how YAML writes a scalar: indicators, separators, number and flag look-alikes.
_TRICKY = st.text(st.sampled_from(list("aZy0917._-:# ,[]{}?!&*'\"%|>@`=+~/\\\té\n")), max_size=12)
_ASCII = st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=30)
_SCALARS = names | _TRICKY | _ASCII | st.sampled_from([
    "yes", "No", "on", "null", "1:20", "0x1f", "0o17", "1_000", ".inf", "3.14", "2026-01-05T09:00:00.000Z",
    "Re: plan", "a #b", "x:", "-1", "+1", "True"])


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(names, _SCALARS | st.booleans() | st.integers(-10, 10**12) | st.lists(_SCALARS, max_size=3),
                       min_size=1, max_size=5))
def test_records_are_written_alike_with_or_without_the_yaml_emitter(fields):
    """The short way of writing plain mappings gives the emitter's bytes, or leaves the mapping to it."""
    import yaml

    from gitmail.model import codec

    fast = codec._dump_plain(fields)
    slow = yaml.dump(fields, Dumper=codec._Dumper, sort_keys=False, allow_unicode=True, default_flow_style=False,
                     width=10_000).encode("utf-8")
    assert fast is None or fast == slow
    assert codec.dump_yaml(fields) == slow


def test_day_shard_is_the_utc_day_of_the_id_across_days_years_and_leap_days():
    moments = [dt.datetime(2024, 2, 29, 23, 59, 59, 999000, tzinfo=dt.UTC), dt.datetime(2026, 12, 31, tzinfo=dt.UTC),
               dt.datetime(1970, 1, 2, tzinfo=dt.UTC), dt.datetime(2100, 3, 1, 0, 0, 0, 1000, tzinfo=dt.UTC)]
    for moment in moments:
        ms = int(moment.timestamp() * 1000)
        for offset in (-1, 0, 1):
            record_id = derived_id(ms + offset, b"seed")
            assert day_shard(record_id) == id_time(record_id).strftime("%Y/%m/%d")


def _yaml_answer(text: str):
    import yaml

    from gitmail.model import codec

    return yaml.load(text, Loader=codec._Loader)  # noqa: S506, SLF001 - the dialect's own loader


@settings(max_examples=150, deadline=None)
@given(messages())
def test_message_headers_are_read_line_by_line_as_the_yaml_parser_reads_them(message):
    """A message's front matter read line by line (or, past the flat subset, by the parser): the parser's answer."""
    from gitmail.model import codec

    header = message.to_bytes().decode().split("---\n")[1]
    flat = codec.flat_mapping(header)
    assert flat is None or flat == _yaml_answer(header)
    assert codec.split_front_matter(message.to_bytes())[0] == _yaml_answer(header)


@pytest.mark.parametrize("record", _every_kind(), ids=lambda r: r.KIND)
def test_every_kind_reads_the_same_with_or_without_the_yaml_parser(record):
    """Every kind gitmail writes is read as the YAML parser reads it (flat ones without it)."""
    from gitmail.model import codec

    data = record.to_bytes()
    text = data.decode()
    header = text.split("---\n")[1] if text.startswith("---\n") else text
    loaded = codec.split_front_matter(data)[0] if text.startswith("---\n") else codec.load_yaml(data)
    assert loaded == _yaml_answer(header)
    flat = codec.flat_mapping(header)
    assert flat is None or flat == loaded


@pytest.mark.parametrize("text", [
    'subject: "double quoted"\n', "to: [Blue, Red]\n", "attachments:\n- name: a.txt\n  size: 3\n",
    "note: |\n  two\n  lines\n", "x: 1.5\n", "a: 1\na: 2\n", "key: value # comment\n",
])
def test_yaml_beyond_the_flat_subset_is_left_to_the_parser(text):
    from gitmail.model import codec

    assert codec.flat_mapping(text) is None
    assert codec.load_yaml(text.encode()) == _yaml_answer(text)


@pytest.mark.parametrize("text", ["- a list\n", "plain words\n", "", "key: [unclosed\n", "a: b: c\n"])
def test_what_is_no_flat_mapping_fails_as_the_parser_makes_it_fail(text):
    from gitmail.model import codec

    assert codec.flat_mapping(text) is None
    with pytest.raises(codec.DecodeError):
        codec.load_yaml(text.encode())


def _first_match(path: str):
    """What the first of PATH_TYPES that matches ``path`` says it holds: classify's answer by definition."""
    return next(((role, record_type) for pattern, record_type, role in PATH_TYPES if pattern.match(path)), None)


_SAMPLE_ID = derived_id(1_767_323_045_123, b"classify")
_KNOWN_PATHS = [
    PROJECT_PATH, ORG_CONTEXT_PATH, message_path(_SAMPLE_ID), inbox_path("Nova", _SAMPLE_ID),
    outbox_path("Nova", _SAMPLE_ID), receipt_path("Nova", _SAMPLE_ID), profile_path("Nova"), seat_path("Nova"),
    journal_path("Nova", _SAMPLE_ID), held_path("Nova", _SAMPLE_ID), contact_path("Nova", "Orbit"),
    reservation_path(_SAMPLE_ID), tombstone_path(_SAMPLE_ID), summary_path(_SAMPLE_ID), repair_path(_SAMPLE_ID),
    node_path("node-a"), build_slot_path("ci"), product_path("shop"), channel_path("deploys"),
    post_path("deploys", _SAMPLE_ID), memory_path("team", "AGENTS.md"), escalation_path(_SAMPLE_ID, "Nova"),
    adoption_path("ab" * 20), revocation_path("cd" * 32), file_path("ef" * 32), conflict_path("x/y.yaml", "01" * 20),
]


@pytest.mark.parametrize("path", _KNOWN_PATHS)
def test_classify_answers_as_the_first_matching_path_type(path):
    assert classify(path) == _first_match(path) is not None
    for near in (path + "x", "x" + path, path.upper(), "_" + path, path.replace("/", "//", 1)):
        assert classify(near) == _first_match(near)


@given(st.text(alphabet="agentsmpro_jc.yaml/0123456789ABZ-", max_size=40))
def test_classify_matches_the_path_types_for_any_text(path):
    assert classify(path) == _first_match(path)
