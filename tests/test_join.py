"""A new machine joins from a recent window (``gitmail clone URL --since 7d``), through a checked hub, with real git.

A writer (node-a) builds twenty days of mail, one message a day, on a clock
the test moves, and shares it through a bare hub with gitmail's pre-receive
check that serves filtered fetches, as hosted services do. The new machine
(node-j) joins on day 20 with a window of seven days: it holds history and
records from day 14 on, trusts the boundary as the pinned hub's, judges
every commit after it, reads its inbox, sends, merges across the boundary,
and deepens to the whole history.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import subprocess
import sys
from collections import Counter

import pytest

from gitmail import Store
from gitmail.index import indexer_for, search_messages
from gitmail.index.changes import diff, listing
from gitmail.mail.facade import Mail
from gitmail.model.errors import GitmailError
from gitmail.storage.boundary import present, read_pin, shallow_commits
from gitmail.storage.fsck import check_archive
from gitmail.storage.verify import verify
from gitmail.sync.hookinstall import install_hub
from gitmail.sync.join import clone, deepen
from gitmail.sync.partial import commit_files, walked_files
from gitmail.sync.remotes import add_remote
from gitmail.sync.syncer import sync_project

from .sync_helpers import PROJECT, Machine, message_counts, tree_id

DAY = 86_400
START = 1_790_000_000  # 2026-09-21, a day 0 the test counts from
FIRST = "2026-10-05"  # day 14: the first day of a seven-day window seen on day 20


class Clocked(Machine):
    """A machine whose store tells the time the test sets (``now[0]``)."""

    def __init__(self, root: str, name: str, now: list[float]):
        super().__init__(root, name)
        self.store = Store(os.path.join(root, name), background=False, durable=False, wall=lambda: now[0])


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], check=True, capture_output=True, text=True).stdout.strip()


def _start(tmp_path) -> tuple[str, list[float], Clocked]:
    """The hub and the writer, with its project and agents on it."""
    hub = str(tmp_path / "hub.git")
    _git("init", "-q", "--bare", "--initial-branch=main", hub)
    install_hub(hub)
    _git("--git-dir", hub, "config", "uploadpack.allowFilter", "true")
    now = [float(START)]
    a = Clocked(str(tmp_path), "node-a", now)
    a.create_project()
    a.register("Alice")
    a.register("Bob")
    add_remote(a.store, PROJECT, "hub", "file://" + hub)
    return hub, now, a


def _days(a: Clocked, now: list[float], days: range) -> None:
    """One message a day from Alice to Bob, then a sync."""
    for day in days:
        now[0] = START + day * DAY + 3600
        a.send("Alice", ["Bob"], f"news of day {day:02d}")
    assert sync_project(a.store, PROJECT).exit_code == 0


@pytest.fixture
def world(tmp_path):
    """The hub, the writer with days 0-19 on it, and the clock (at day 20)."""
    hub, now, a = _start(tmp_path)
    _days(a, now, range(20))
    now[0] = START + 20 * DAY + 3600
    return tmp_path, hub, now, a


def _join(world, since: str = "7d") -> tuple[Clocked, str]:
    root, hub, now, _ = world
    j = Clocked(str(root), "node-j", now)
    joined = clone(j.store, "file://" + hub, since=since)
    assert joined.sync.exit_code == 0 and joined.partial
    return j, joined.project


def _subjects(store: Store, agent: str) -> list[str]:
    return sorted(row["subject"] for row in indexer_for(store).project(PROJECT).inbox(agent, limit=100))


def _messages(machine: Machine) -> Counter:
    """How many canonical files each message id has at the tip (read from the tree: files may be unfetched)."""
    return message_counts(dict.fromkeys(machine.archive.snapshot().walk(), b""))


def _clean(machine: Machine) -> None:
    archive = machine.archive
    assert check_archive(archive) == []
    out = verify(archive, machine.store.resolve(PROJECT), machine.store.paths(machine.store.resolve(PROJECT)).derived)
    assert out.clean, out.findings


def test_a_window_join_holds_recent_history_and_records_and_serves_inbox_and_send(world):
    _, hub, _, a = world
    j, slug = _join(world)
    archive, repo = j.archive, j.archive.repo
    # History from the first day on only, cut at a boundary pinned with the hub's URL.
    first = dt.datetime.fromisoformat(FIRST + "T00:00:00+00:00").timestamp()
    assert all(commit.commit_time >= first for commit in repo.walk(repo[archive.tip()].id))
    pin = read_pin(archive.git_dir)
    assert pin is not None and pin.url == "file://" + hub and pin.since == FIRST
    assert shallow_commits(archive.git_dir) <= set(pin.commits)
    # The window's records are here, the older ones are named by the tree but were never fetched.
    files = archive.snapshot()
    held = {path.rsplit("/", 1)[1][:-3]: present(repo, str(files.blob_id(path))) for path in files.walk()
            if path.startswith("messages/")}
    assert sum(held.values()) == 6 and len(held) == 20
    assert _subjects(j.store, "Bob") == [f"news of day {day:02d}" for day in range(14, 20)]
    assert [hit["subject"] for hit in search_messages(j.store, PROJECT, "news", limit=50)] != []
    _clean(j)
    assert verify(archive, slug, j.store.paths(slug).derived).trusted_by_pin == sorted(
        shallow_commits(archive.git_dir))
    # It sends: an agent of its own writes to Bob, the checked hub takes it, the writer receives it.
    j.register("Carol")
    j.send("Carol", ["Bob"], "hello from the new machine")
    assert sync_project(j.store, PROJECT).exit_code == 0
    assert sync_project(a.store, PROJECT).exit_code == 0
    assert "hello from the new machine" in _subjects(a.store, "Bob")
    assert tree_id(a.store) == tree_id(j.store)
    _clean(j)


def test_a_forged_commit_after_the_boundary_is_kept_aside_and_reported(world):
    root, hub, now, a = world
    j, slug = _join(world)
    # node-m joins whole (a node of the project, with an agent of its own), then forges a message under Bob's
    # name on the hub's main behind the check's back (a hub whose check was skipped).
    m = Clocked(str(root), "node-m", now)
    add_remote(m.store, PROJECT, "hub", "file://" + hub)
    assert sync_project(m.store, PROJECT).exit_code == 0
    m.register("Mallory")
    assert sync_project(m.store, PROJECT).exit_code == 0
    forged = m.send("Bob", ["Alice"], "forged in Bob's name")
    _git("--git-dir", hub, "fetch", "-q", m.archive.git_dir, "+main:refs/heads/main")
    report = sync_project(j.store, PROJECT)
    assert report.exit_code == 1
    result = report.results[0]
    assert result.quarantine_ref and any("not-allowed-writer" in item["reason"] for item in result.quarantined)
    assert forged not in _messages(j) and len(_messages(j)) == 20
    assert check_archive(j.archive) == []
    findings = verify(j.archive, slug, j.store.paths(slug).derived).findings
    assert {(f.problem, f.kept_aside) for f in findings} == {("not-allowed-writer", True)}


def test_a_merge_across_the_boundary_converges_once(tmp_path):
    hub, now, a = _start(tmp_path)
    _days(a, now, range(2))
    # node-b joined whole on day 2, then wrote offline: its history branches off far below the new window.
    b = Clocked(str(tmp_path), "node-b", now)
    add_remote(b.store, PROJECT, "hub", "file://" + hub)
    assert sync_project(b.store, PROJECT).exit_code == 0
    b.register("Dave")
    b.send("Dave", ["Bob"], "written offline on day 2")
    offline = b.archive.tip()
    _days(a, now, range(2, 20))
    now[0] = START + 20 * DAY + 3600
    world = (tmp_path, hub, now, a)
    j, _ = _join(world)
    j.register("Carol")
    j.send("Carol", ["Bob"], "written on the new machine")
    assert sync_project(b.store, PROJECT).exit_code == 0  # b merges the hub's main and pushes
    report = sync_project(j.store, PROJECT)  # b's history joins j's below j's boundary: deepened to a base
    assert report.exit_code == 0 and report.results[0].merges == 1
    assert offline is not None and offline in j.archive.repo and j.archive.repo.descendant_of(j.archive.tip(), offline)
    for machine in (a, b, j):
        assert sync_project(machine.store, PROJECT).exit_code == 0
    assert tree_id(a.store) == tree_id(b.store) == tree_id(j.store)
    counts = _messages(a)
    assert len(counts) == 22 and set(counts.values()) == {1}
    for subject in ("written offline on day 2", "written on the new machine"):
        assert _subjects(a.store, "Bob").count(subject) == 1
        assert _subjects(j.store, "Bob").count(subject) == 1
    _clean(j)
    # git's listing of what the commits since the boundary wrote, merges included, is libgit2's folder walk's.
    repo, boundary = j.archive.repo, sorted(shallow_commits(j.archive.git_dir))
    assert commit_files(repo, j.archive.tip(), boundary) == walked_files(repo, j.archive.tip(), boundary) != set()


def test_deepen_brings_the_older_records_into_the_index_and_search(world):
    j, slug = _join(world)
    assert search_messages(j.store, PROJECT, '"day 03"', limit=5) == []
    with pytest.raises(GitmailError) as refused:
        deepen(j.store, slug, since="3d")  # a later first day than the one held
    assert refused.value.code == "INVALID_ARGUMENT"
    out = deepen(j.store, slug, since="all")
    assert out.findings == [] and out.files_fetched > 0 and out.boundary == []
    assert _subjects(j.store, "Bob") == [f"news of day {day:02d}" for day in range(20)]
    assert [hit["subject"] for hit in search_messages(j.store, PROJECT, '"day 03"', limit=5)] == ["news of day 03"]
    repo = j.archive.repo
    snap = j.archive.snapshot()
    assert all(present(repo, str(snap.blob_id(path))) for path in snap.walk())
    assert Counter(len(commit.parents) for commit in repo.walk(repo[j.archive.tip()].id))[0] == 1  # the root
    _clean(j)


def test_a_hub_without_filters_sends_every_file_of_the_boundary(tmp_path, world):
    _, hub, _, _ = world
    _git("--git-dir", hub, "config", "uploadpack.allowFilter", "false")
    root, _, now, _ = world
    j = Clocked(str(root), "node-j", now)
    joined = clone(j.store, "file://" + hub, since="7d")
    assert not joined.partial and joined.boundary
    assert _subjects(j.store, "Bob") == [f"news of day {day:02d}" for day in range(20)]
    _clean(j)


def test_the_commands_join_deepen_and_refuse_bad_input_leaving_nothing_behind(world):
    root, hub, _, _ = world
    home = str(root / "cli")
    env = dict(os.environ, GITMAIL_HOME=home)

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "gitmail", *args], capture_output=True, text=True, env=env)

    bad = run("clone", "file://" + hub, "--since", "7x")
    assert bad.returncode == 2 and "INVALID_ARGUMENT" in bad.stderr
    assert not os.path.exists(os.path.join(home, "projects")) or os.listdir(os.path.join(home, "projects")) == []
    # This clock is far past the history: the window is the day of the hub's newest commit.
    joined = run("clone", "file://" + hub, "--since", "7d", "--json")
    assert joined.returncode == 0, joined.stderr
    answer = json.loads(joined.stdout)
    assert answer["since"] == "2026-10-10" and answer["boundary"] and answer["partial"]
    slug = answer["project"]
    listed = sorted(os.listdir(os.path.join(home, "projects")))
    again = run("clone", "file://" + hub)
    assert again.returncode == 2 and "ALREADY_EXISTS" in again.stderr
    assert sorted(os.listdir(os.path.join(home, "projects"))) == listed
    assert run("verify", slug).returncode == 0
    deepened = run("deepen", slug, "--since", "all")
    assert deepened.returncode == 0, deepened.stderr
    assert "history from all on" in deepened.stdout
    nothing = run("deepen", slug)
    assert nothing.returncode == 2 and "INVALID_ARGUMENT" in nothing.stderr
    assert run("fsck", slug).returncode == 0


def test_a_window_join_holds_what_may_be_in_force_and_lists_only_what_it_fetched(tmp_path):
    """A reservation from before the window is still in force on the new machine, and one released in it is not.

    The index's listing of a window walks only the window's folders (and the
    older days the window's history changed); it must name exactly the
    records whose files came, as a listing of the whole tree filtered by
    what is present would.
    """
    hub, now, a = _start(tmp_path)
    _days(a, now, range(2))
    kept, released = a.reserve("Alice", "src/kept.py"), a.reserve("Alice", "src/released.py")
    _days(a, now, range(2, 16))
    a.release("Alice", released)  # day 15, inside the window: a change to a record filed on day 1
    _days(a, now, range(16, 20))
    now[0] = START + 20 * DAY + 3600
    j, _ = _join((tmp_path, hub, now, a))
    repo, tip = j.archive.repo, j.archive.tip()
    index = indexer_for(j.store).project(PROJECT)
    active = index.active_reservations(j.archive.snapshot(), dt.datetime.fromtimestamp(now[0], dt.UTC))
    assert [r.id for r in active] == [kept]
    listed = listing(repo, tip)
    assert listed == [change for change in diff(repo, None, tip) if change.blob is None or present(repo, change.blob)]
    paths = [change.path for change in listed]
    assert sum(path.startswith("reservations/") for path in paths) == 2
    assert sum(path.startswith("messages/") for path in paths) == 6  # days 14-19 of the twenty


def test_a_message_older_than_the_window_asks_for_deepen_and_reads_after_it(world):
    _, _, _, a = world
    old = next(row["id"] for row in indexer_for(a.store).project(PROJECT).inbox("Bob", limit=100)
               if row["subject"] == "news of day 03")
    j, slug = _join(world)
    tip = j.archive.tip()
    with pytest.raises(GitmailError) as refused:
        Mail(j.store).get_message(PROJECT, old)
    assert refused.value.code == "NOT_FETCHED" and refused.value.data["since"] == FIRST
    assert "gitmail deepen PROJECT --since DAY" in refused.value.message
    assert j.archive.tip() == tip
    deepen(j.store, slug, since="all")
    assert Mail(j.store).get_message(PROJECT, old).message.subject == "news of day 03"


def test_the_listing_of_what_fetched_commits_wrote_runs_git_as_a_fetch_does(world, tmp_path, monkeypatch):
    """A window join's listing may make git fetch from the hub: it gets the remotes' environment, never a prompt."""
    j, _ = _join(world)
    real, runs = shutil.which("git"), tmp_path / "git-runs"
    wrapper = tmp_path / "bin" / "git"
    wrapper.parent.mkdir()
    wrapper.write_text(f'#!/bin/sh\necho "$GIT_TERMINAL_PROMPT $LC_ALL $*" >> "{runs}"\nexec "{real}" "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{wrapper.parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("GIT_TERMINAL_PROMPT", "1")  # this shell would let git ask for credentials
    repo, boundary = j.archive.repo, sorted(shallow_commits(j.archive.git_dir))
    assert commit_files(repo, j.archive.tip(), boundary) == walked_files(repo, j.archive.tip(), boundary) != set()
    (listing_run,) = [line for line in runs.read_text().splitlines() if " log --raw " in line]
    assert listing_run.startswith("0 C --git-dir ")
