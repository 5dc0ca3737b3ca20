"""Property tests: any interleaving of writes and syncs converges and loses nothing.

Kept small (few examples, short programs): each example builds three real
stores and a real hub and runs the real git binary.
"""

from __future__ import annotations

import os
import tempfile

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gitmail.model.records import Agent, Message, Receipt, Reservation, message_path, receipt_path, reservation_path
from gitmail.sync.merge import merge_file
from gitmail.sync.remotes import add_remote
from gitmail.sync.syncer import sync_project

from .conftest import close_indexes, git_run
from .sync_helpers import AGENTS, PROJECT, Machine, message_counts, tree_files

MACHINES = 3
STAMPS = [f"2026-12-01T10:00:{second:02d}.000Z" for second in range(60)]

operation = st.one_of(
    st.tuples(st.just("send"), st.integers(0, MACHINES - 1), st.sampled_from(AGENTS)),
    st.tuples(st.just("ack"), st.integers(0, MACHINES - 1), st.integers(0, 50), st.sampled_from(STAMPS)),
    st.tuples(st.just("profile"), st.integers(0, MACHINES - 1), st.sampled_from(("task_description", "model")),
              st.text("abcxyz", min_size=1, max_size=5)),
    st.tuples(st.just("reserve"), st.integers(0, MACHINES - 1), st.sampled_from(AGENTS)),
    st.tuples(st.just("release"), st.integers(0, MACHINES - 1), st.integers(0, 50)),
    st.tuples(st.just("sync"), st.integers(0, MACHINES - 1)),
)


def _run(root: str, program: list[tuple]) -> None:
    hub = os.path.join(root, "hub.git")
    assert git_run("init", "-q", "--bare", "--initial-branch=main", hub).returncode == 0
    machines = [Machine(os.path.join(root, "m"), f"p{i}") for i in range(MACHINES)]
    machines[0].create_project()
    for machine in machines:
        add_remote(machine.store, PROJECT, "hub", "file://" + hub)
        sync_project(machine.store, PROJECT)
    sent: list[str] = []
    reservations: list[tuple[int, str]] = []
    released: set[str] = set()
    read_at: dict[tuple[str, str], str] = {}
    acked_at: dict[tuple[str, str], str] = {}
    for op in program:
        kind, m = op[0], machines[op[1]]
        if kind == "send":
            sent.append(m.send(op[2], [name for name in AGENTS if name != op[2]], "note"))
        elif kind == "ack":
            visible = [mid for mid in sent if m.archive.snapshot().exists(message_path(mid))]
            if visible:
                receipt = m.ack("RedStone", visible[op[2] % len(visible)], when=op[3])
                key = ("RedStone", receipt.message_id)
                read_at[key] = min(read_at.get(key, receipt.read_at), receipt.read_at)
                acked_at[key] = min(acked_at.get(key, receipt.acked_at), receipt.acked_at)
        elif kind == "profile":
            m.edit_profile("BlueLake", **{op[2]: op[3]})
        elif kind == "reserve":
            reservations.append((op[1], m.reserve(op[2], "src/*.py")))
        elif kind == "release":
            mine = [rid for owner, rid in reservations if owner == op[1]]
            if mine:
                rid = mine[op[2] % len(mine)]
                m.release("BlueLake", rid)
                released.add(rid)
        else:
            sync_project(m.store, PROJECT)
    for _ in range(3):  # everyone syncs until quiet: two full rounds always suffice
        for machine in machines:
            sync_project(machine.store, PROJECT)
    trees = [tree_files(machine.store) for machine in machines]
    assert trees[0] == trees[1] == trees[2]
    files = trees[0]
    counts = message_counts(files)
    assert {mid: counts[mid] for mid in sent} == {mid: 1 for mid in sent}
    for mid in set(counts) - set(sent):  # the others are notices about reservations granted apart that overlap
        notice = Message.from_bytes(files[message_path(mid)], message_path(mid))
        assert counts[mid] == 1 and notice.subject.startswith("Overlapping reservations")
    for (agent, mid), earliest_ack in acked_at.items():
        receipt = Receipt.from_bytes(files[receipt_path(agent, mid)], receipt_path(agent, mid))
        assert (receipt.read_at, receipt.acked_at) == (read_at[(agent, mid)], earliest_ack)
    for _, rid in reservations:
        record = Reservation.from_bytes(files[reservation_path(rid)], reservation_path(rid))
        assert (record.released_ts is not None) == (rid in released)
    assert not any(path.startswith("conflicts/") for path in files)


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(operation, min_size=4, max_size=14))
def test_random_interleavings_converge_and_lose_nothing(program):
    with tempfile.TemporaryDirectory() as root:
        try:
            _run(root, program)
        finally:  # the stores' background index work stops before their folder is removed
            close_indexes()


def _profile(hlc: str, **fields) -> bytes:
    base = dict(id="01m8zzzzzzzzzzzzzzzzzzz", name="BlueLake", program="p", model="m",
                inception_ts="2026-12-01T10:00:00.000Z", hlc=hlc)
    base.update(fields)
    return Agent(**base).to_bytes()


clock = st.builds(lambda second, counter, node: f"2026-12-01T10:00:{second:02d}.000Z/{counter:04d}/{node}",
                  st.integers(0, 59), st.integers(0, 3), st.sampled_from(("n1", "n2")))


@settings(max_examples=60, deadline=None)
@given(clock, clock, clock, st.sampled_from(("a", "b")), st.sampled_from(("a", "c")),
       st.sampled_from(("open", "auto")), st.sampled_from(("auto", "block_all")))
def test_profile_merge_is_commutative_per_field(base_clock, ours_clock, theirs_clock, ours_task, theirs_task,
                                                ours_policy, theirs_policy):
    """Swapping the sides never changes the result, so every machine computes the same tree."""
    path = "agents/BlueLake/profile.yaml"
    base = _profile(base_clock, task_description="a", contact_policy="auto")
    ours = _profile(ours_clock, task_description=ours_task, contact_policy=ours_policy)
    theirs = _profile(theirs_clock, task_description=theirs_task, contact_policy=theirs_policy)
    one, two = merge_file(path, base, ours, theirs), merge_file(path, base, theirs, ours)
    assert one.content == two.content and one.conflict is None
    merged = Agent.from_bytes(one.content, path)
    if ours_task == "a":  # unchanged on our side: their change wins whatever the clocks say
        assert merged.task_description == theirs_task
    if ours_policy == theirs_policy:
        assert merged.contact_policy == ours_policy


def test_a_delivered_idempotency_key_wins_over_a_held_one():
    from gitmail.model.records import IdempotencyKey

    def key(message_id: str, held: bool) -> tuple[str, bytes]:
        record = IdempotencyKey(key_hash="a" * 64, agent="BlueLake", operation="send_message", request_hash="b" * 64,
                                created_at="2026-12-01T10:00:00.000Z", message_id=message_id, held=held)
        return record.path(), record.to_bytes()

    path, held = key("01m8r3w8fe573chhyy6wrgf", True)
    _, delivered = key("01m8r3w8fe573chhyy6wrgg", False)
    _, other_held = key("01m8r3w8fe573chhyy6wrgf", True)
    assert merge_file(path, b"x", held + b"# ours\n", delivered).content == delivered
    assert merge_file(path, b"x", delivered, held + b"# ours\n").content == delivered
    assert merge_file(path, None, held, other_held).conflict is None
