"""The human checkout's window: a sparse checkout of recent days that git itself keeps small, with real git."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys

import pygit2
import pytest

from gitmail import Change
from gitmail.model.errors import INVALID_ARGUMENT, GitmailError
from gitmail.model.ids import derived_id
from gitmail.model.records import contact_path, inbox_path, message_path, profile_path, receipt_path
from gitmail.storage.checkout import refresh, window_of
from gitmail.storage.window import Window, fitting, folder_for

from .conftest import git


def _ms(day: int) -> int:
    return int(dt.datetime(2026, 11, day, 12, tzinfo=dt.UTC).timestamp() * 1000)


def _id(day: int) -> str:
    """A fresh ID of 2026-11-<day> (the minter of new IDs never goes back in time)."""
    return derived_id(_ms(day), os.urandom(8))


def _put(archive, *paths: str, text: str = "x\n") -> None:
    def change(snap):
        out = Change("add", author="BlueLake")
        for path in paths:
            out.put(path, text.encode())
        return out

    archive.transact(change)


def _message(archive, day: int, to: str = "GreenCastle") -> str:
    """A message of 2026-11-<day> with its inbox copy; its ID."""
    mid = _id(day)
    _put(archive, message_path(mid), inbox_path(to, mid))
    return mid


def _files(checkout: str) -> set[str]:
    found = set()
    for folder, dirs, files in os.walk(checkout):
        dirs[:] = [d for d in dirs if d != ".git"]
        found |= {os.path.relpath(os.path.join(folder, name), checkout) for name in files}
    return found


@pytest.fixture
def four_days(store):
    """A project with a message on each of 2026-11-01..04 and two profiles: (archive, paths, ids by day)."""
    archive = store.archive("/data/p", create=True)
    paths = store.paths(store.resolve("/data/p"))
    _put(archive, profile_path("BlueLake"), profile_path("GreenCastle"))
    return archive, paths, {day: _message(archive, day) for day in (1, 2, 3, 4)}


def test_a_window_of_days_holds_those_days_and_git_sees_nothing_else(four_days):
    archive, paths, ids = four_days
    assert refresh(paths.archive, paths.checkout, window=Window.parse("2d")) == "created"
    held = _files(paths.checkout)
    assert {message_path(ids[3]), inbox_path("GreenCastle", ids[3]), message_path(ids[4])} <= held
    assert not {message_path(ids[1]), message_path(ids[2]), inbox_path("GreenCastle", ids[2])} & held
    # the files beside held folders: every agent's profile, even one with no mail in the window
    assert {profile_path("BlueLake"), profile_path("GreenCastle")} <= held
    assert window_of(paths.checkout) == Window(days=2)
    assert git("config", "index.sparse", cwd=paths.checkout).strip() == "true"
    assert git("config", "status.showUntrackedFiles", cwd=paths.checkout).strip() == "no"
    assert "messages/2026/11/01/" in git("ls-files", "--sparse", cwd=paths.checkout).splitlines()  # one entry
    assert git("status", "--porcelain", "--untracked-files=all", cwd=paths.checkout) == ""
    assert git("rev-parse", "HEAD", cwd=paths.checkout).strip() == archive.tip()
    assert git("show", f"HEAD:{message_path(ids[1])}", cwd=paths.checkout) == "x\n"  # git still has every record


def test_records_arriving_in_and_outside_the_window_keep_it_exact(four_days):
    archive, paths, ids = four_days
    refresh(paths.archive, paths.checkout, window=Window.parse("2d"))
    recent = _message(archive, 4, to="BlueLake")  # a new folder of a held day (BlueLake's inbox of the 4th)
    _put(archive, receipt_path("GreenCastle", ids[1]))  # a receipt of an old message, outside the window
    _put(archive, contact_path("BlueLake", "GreenCastle"), profile_path("RedStone"))  # a new undated folder, agent
    assert refresh(paths.archive, paths.checkout) == "updated"
    held = _files(paths.checkout)
    assert {inbox_path("BlueLake", recent), contact_path("BlueLake", "GreenCastle"), profile_path("RedStone")} <= held
    assert receipt_path("GreenCastle", ids[1]) not in held
    assert git("rev-parse", "HEAD", cwd=paths.checkout).strip() == archive.tip()
    assert git("status", "--porcelain", "--untracked-files=all", cwd=paths.checkout) == ""
    assert git("diff", "--name-only", "HEAD", cwd=paths.checkout) == ""  # index and tree at main, outside too


def test_a_window_of_days_slides_when_a_newer_day_arrives_and_a_fixed_one_does_not(four_days, tmp_path):
    archive, paths, ids = four_days
    refresh(paths.archive, paths.checkout, window=Window.parse("2d"))
    fifth = _message(archive, 5)
    assert refresh(paths.archive, paths.checkout) == "updated"
    held = _files(paths.checkout)
    assert {message_path(ids[4]), message_path(fifth)} <= held and message_path(ids[3]) not in held
    assert git("status", "--porcelain", "--untracked-files=all", cwd=paths.checkout) == ""
    # from a fixed first day on, a newer day is added and nothing leaves
    fixed = str(tmp_path / "fixed")
    refresh(paths.archive, fixed, window=Window.parse("2026-11-03"))
    sixth = _message(archive, 6)
    assert refresh(paths.archive, fixed) == "updated"
    assert {message_path(ids[3]), message_path(fifth), message_path(sixth)} <= _files(fixed)
    assert message_path(ids[2]) not in _files(fixed)


def test_an_edit_in_the_window_holds_the_refresh_and_nothing_changes(four_days):
    archive, paths, ids = four_days
    refresh(paths.archive, paths.checkout, window=Window.parse("2d"))
    edited = os.path.join(paths.checkout, message_path(ids[4]))
    with open(edited, "w") as handle:
        handle.write("the human's\n")
    head = git("rev-parse", "HEAD", cwd=paths.checkout)

    def rewrite(snap):
        return Change("rewrite", author="BlueLake").put(message_path(ids[4]), b"y\n")

    archive.transact(rewrite)
    assert refresh(paths.archive, paths.checkout) == "held"
    assert git("rev-parse", "HEAD", cwd=paths.checkout) == head
    with open(edited) as handle:
        assert handle.read() == "the human's\n"


def test_all_makes_it_whole_again_and_since_narrows_it(four_days):
    archive, paths, ids = four_days
    refresh(paths.archive, paths.checkout, window=Window.parse("1d"))
    assert message_path(ids[1]) not in _files(paths.checkout)
    assert refresh(paths.archive, paths.checkout, window=Window()) == "current"
    assert {message_path(ids[day]) for day in ids} <= _files(paths.checkout)
    assert git("config", "core.splitIndex", cwd=paths.checkout).strip() == "true"  # the plain checkout's index
    assert git("config", "--default", "normal", "status.showUntrackedFiles", cwd=paths.checkout).strip() == "normal"
    assert git("status", "--porcelain", "--untracked-files=all", cwd=paths.checkout) == ""
    _message(archive, 4)
    assert refresh(paths.archive, paths.checkout) == "updated"  # by the plain checkout's own path
    refresh(paths.archive, paths.checkout, window=Window.parse("2026-11-04"))
    held = _files(paths.checkout)
    assert message_path(ids[4]) in held and message_path(ids[3]) not in held
    assert git("status", "--porcelain", "--untracked-files=all", cwd=paths.checkout) == ""


def test_by_default_a_small_archive_is_checked_out_whole_and_a_large_one_as_the_newest_days_that_fit(four_days):
    archive, paths, ids = four_days
    repo = pygit2.Repository(archive.git_dir)
    tree = repo.revparse_single("main").peel(pygit2.Tree).id.raw
    # two files a day (files beside the dated folders, a few per agent, are not counted), and the one
    # undated file: the writing machine's key under nodes/
    assert fitting(repo, tree, budget=9) == Window()
    assert fitting(repo, tree, budget=8) == Window(days=3)
    assert fitting(repo, tree, budget=6) == Window(days=2)
    assert fitting(repo, tree, budget=1) == Window(days=1)  # at least the newest day
    assert refresh(paths.archive, paths.checkout) == "created"
    assert window_of(paths.checkout) == Window()


@pytest.mark.parametrize("text", ["", "0d", "7", "d", "2026-13-01", "2026-11-1", "yesterday", "-3d"])
def test_a_bad_window_is_refused_with_a_code_and_what_to_give(text):
    with pytest.raises(GitmailError) as caught:
        Window.parse(text)
    assert caught.value.code == INVALID_ARGUMENT
    assert "7d" in caught.value.message and "2026-11-01" in caught.value.message and "all" in caught.value.message


def test_folder_for_names_the_folder_a_window_holds_a_path_by():
    mid = _id(3)
    assert folder_for(message_path(mid), "2026/11/02") == "messages/2026/11/03"
    assert folder_for(inbox_path("BlueLake", mid), "2026/11/04") is None  # before the window
    assert folder_for(contact_path("BlueLake", "GreenCastle"), "2026/11/04") == "contacts"
    assert folder_for(profile_path("BlueLake"), "2026/11/04") == "agents/BlueLake/inbox/2026/11/04"
    assert folder_for("project.yaml", "2026/11/04") is None


def test_the_cli_chooses_the_window_and_refuses_a_bad_one_leaving_the_checkout_as_it_was(home):
    def gm(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "gitmail", "--home", home, *args], capture_output=True, text=True)

    assert gm("init", "/data/cli").returncode == 0
    assert gm("register", "/data/cli", "--name", "BlueLake", "--program", "p", "--model", "m").returncode == 0
    done = gm("checkout", "/data/cli", "--since", "3d")
    assert done.returncode == 0 and "holds: 3d" in done.stdout
    for bad in (["--since", "soon"], ["--since", "3d", "--all"]):
        refused = gm("checkout", "/data/cli", *bad)
        assert refused.returncode != 0 and INVALID_ARGUMENT in refused.stdout + refused.stderr
    assert "holds: 3d" in gm("checkout", "/data/cli").stdout
    assert "holds: all" in gm("checkout", "/data/cli", "--all").stdout
