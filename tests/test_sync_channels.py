"""Channels across machines: one channel made and written on both sides apart merges through a checked hub."""

from __future__ import annotations

import pytest

from gitmail.mail.facade import Mail
from gitmail.model.ids import new_id
from gitmail.model.records import CONFLICTS, Channel, ChannelPost, channel_path, post_path
from gitmail.storage import nodes
from gitmail.storage.engine import Change
from gitmail.storage.fsck import check_archive
from gitmail.sync.hookinstall import install_hub
from gitmail.sync.merge import merge_file
from gitmail.sync.remotes import add_remote
from gitmail.sync.syncer import sync_project

from .conftest import git_run
from .sync_helpers import mail_machine

PROJECT = "/data/projects/channelsync"


def two_machines(tmp_path) -> tuple[str, Mail, Mail]:
    """A checked hub, and a laptop and a desktop sharing the project: BlueLake on the laptop, GreenCastle on the
    desktop."""
    hub = str(tmp_path / "hub.git")
    assert git_run("init", "-q", "--bare", "--initial-branch=main", hub).returncode == 0
    install_hub(hub)  # every push must also pass the hub's record checks
    a, b = mail_machine(tmp_path, "laptop"), mail_machine(tmp_path, "desktop")
    a.ensure_project(PROJECT)
    for name in ("BlueLake", "GreenCastle"):
        a.register_agent(PROJECT, "test", "model", name=name)
    nodes.handover(a.store.archive(PROJECT), agent="GreenCastle", to="desktop", hlc=a.store.clock.tick())
    for mail in (a, b):
        add_remote(mail.store, PROJECT, "hub", "file://" + hub)
        sync_project(mail.store, PROJECT)
    return hub, a, b


@pytest.mark.parametrize("first", ["laptop", "desktop"])
def test_a_channel_made_and_written_on_both_sides_merges_to_one(tmp_path, first):
    """Whichever machine reaches the hub first, the earlier definition (the laptop's) ends up the channel: when the
    desktop's later one got there first, the laptop's merge replaces it, and the hub's checks take that."""
    hub, a, b = two_machines(tmp_path)
    # Offline: both make #deploys, each with its own purpose, and both post to it, turn about.
    a.create_channel(PROJECT, "BlueLake", "deploys", purpose="from the laptop")
    b.create_channel(PROJECT, "GreenCastle", "#deploys", purpose="from the desktop")
    posted = []
    for i in range(4):
        writer, name = (a, "BlueLake") if i % 2 == 0 else (b, "GreenCastle")
        posted.append(writer.post_channel(PROJECT, name, "deploys", f"release {i}")["id"])

    for mail in (a, b, a) if first == "laptop" else (b, a, b):
        sync_project(mail.store, PROJECT)
    snaps = [mail.store.archive(PROJECT).snapshot() for mail in (a, b)]
    assert snaps[0].commit == snaps[1].commit == git_run("rev-parse", "main", cwd=hub).stdout.strip()
    kept = snaps[0].load(channel_path("deploys"), Channel)
    assert kept is not None and kept.purpose == "from the laptop"  # the earlier definition is the channel
    assert not snaps[0].exists(CONFLICTS)  # the same channel twice is no conflict
    for post_id in posted:
        assert snaps[0].load(post_path("deploys", post_id), ChannelPost) is not None
    pages = [mail.read_channel(PROJECT, reader, "deploys") for mail, reader in ((a, "BlueLake"), (b, "GreenCastle"))]
    for page in pages:  # each machine numbers every post once, in the order it took them in, with no gap
        assert [p["seq"] for p in page["posts"]] == [1, 2, 3, 4] and sorted(p["id"] for p in page["posts"]) == \
            sorted(posted)
    by_id = sorted(pages[1]["posts"], key=lambda p: p["id"])
    assert [p["body_md"] for p in by_id] == [f"release {i}" for i in range(4)]
    assert [p["machine"] for p in by_id] == ["laptop", "desktop"] * 2  # each author's signing node
    assert [c["posts"] for c in b.list_channels(PROJECT, "GreenCastle")["channels"]] == [4]
    for mail in (a, b):
        assert check_archive(mail.store.archive(PROJECT), run_git=False) == []


def test_the_hub_refuses_a_post_in_the_name_of_an_agent_of_another_machine(tmp_path):
    hub, a, b = two_machines(tmp_path)
    a.create_channel(PROJECT, "BlueLake", "deploys")
    sync_project(a.store, PROJECT)
    sync_project(b.store, PROJECT)
    before = git_run("rev-parse", "main", cwd=hub).stdout.strip()
    archive = b.store.archive(PROJECT)
    clock = b.store.clock
    forged = ChannelPost(id=clock.new_id(), channel="deploys", sender="BlueLake", created_ts=clock.now_ts(),
                         body="ship it (not really BlueLake)")
    archive.transact(lambda snap: Change("forged post", author="BlueLake").put_record(forged))
    report = sync_project(b.store, PROJECT)
    assert git_run("rev-parse", "main", cwd=hub).stdout.strip() == before  # nothing of it reached the hub
    assert "not-allowed-writer" in str(report.to_dict()) and "BlueLake, bound to laptop" in str(report.to_dict())


def test_two_definitions_of_one_channel_merge_to_the_earlier_either_way():
    early = Channel(id=new_id(), name="deploys", created_by="BlueLake", created_ts="2026-12-04T10:00:00Z",
                    purpose="first").to_bytes()
    late = Channel(id=new_id(), name="deploys", created_by="GreenCastle", created_ts="2026-12-04T10:00:01Z",
                   purpose="second").to_bytes()
    path = channel_path("deploys")
    for ours, theirs in ((early, late), (late, early)):
        merged = merge_file(path, None, ours, theirs)
        assert merged.content == early and merged.conflict is None
