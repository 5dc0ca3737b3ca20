"""The store: project keys, slugs, node names, where derived state lives."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from gitmail import Store, slug_for
from gitmail.model.errors import INVALID_ARGUMENT, NOT_FOUND, GitmailError
from gitmail.model.names import normalize_human_key


def test_slug_is_readable_deterministic_and_distinct():
    slug = slug_for("/data/projects/backend")
    assert slug.startswith("data-projects-backend-") and len(slug.rsplit("-", 1)[1]) == 12
    assert slug == slug_for("/data/projects/backend/") == slug_for("/data//projects/backend")
    script = "from gitmail import slug_for; print(slug_for('/data/projects/backend'))"
    other = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout.strip()
    assert other == slug, "every machine computes the same slug"
    # Keys that flatten to the same words still get different slugs.
    assert slug_for("/data/projects/back-end") != slug_for("/data/projects/back_end")
    assert slug_for("/Data/X") != slug_for("/data/x")


@pytest.mark.parametrize("key", ["relative/path", "./backend", "backend", "", "   ", "/a\nb", 42, None,
                                "/" + "x" * 2000])
def test_bad_human_keys_are_refused(key):
    with pytest.raises(GitmailError) as info:
        slug_for(key)
    assert info.value.code == INVALID_ARGUMENT and info.value.data["field"] == "human_key"


def test_windows_style_keys_are_absolute():
    assert normalize_human_key("c:\\work\\api\\") == "C:/work/api"


def test_relative_key_explains_what_to_pass():
    with pytest.raises(GitmailError) as info:
        slug_for("backend")
    assert "absolute path" in info.value.message


def test_archive_is_created_on_request_only(store):
    with pytest.raises(GitmailError) as info:
        store.archive("/data/nothing")
    assert info.value.code == NOT_FOUND
    assert store.slugs() == []
    archive = store.archive("/data/projects/backend", create=True)
    slug = slug_for("/data/projects/backend")
    paths = store.paths(slug)
    assert archive.path == paths.archive and os.path.isfile(os.path.join(paths.archive, "HEAD"))
    assert store.slugs() == [slug]
    assert store.archive(slug) is archive, "a slug names the project too"
    assert store.exists("/data/projects/backend/")
    # Derived state lives apart from the repository.
    assert not paths.derived.startswith(paths.archive)


def test_node_name_is_stable_per_store(home):
    first = Store(home, background=False).node
    assert Store(home, background=False).node == first
    assert first and all(ch.isalnum() or ch in "._-" for ch in first)


def test_archive_refuses_forced_pushes(store):
    from .conftest import git

    archive = store.archive("/data/p", create=True)
    assert git("--git-dir", archive.git_dir, "config", "receive.denyNonFastForwards").strip() == "true"
    assert git("--git-dir", archive.git_dir, "config", "receive.denyDeletes").strip() == "true"


def test_remove_stops_background_work_and_leaves_nothing(home):
    from gitmail import Change

    store = Store(home)  # with the checkout refresher and pack maintenance running
    archive = store.archive("/data/p", create=True)
    for i in range(20):
        archive.transact(lambda s, i=i: Change(f"add {i}").put(f"notes/{i}.md", b"x"))
    slug = store.resolve("/data/p")
    store.remove(slug)  # while the refresher is likely mid-run
    assert not os.path.exists(os.path.join(home, "projects", slug))
    assert not os.path.exists(store.paths(slug).derived)
    with pytest.raises(GitmailError) as info:
        store.archive("/data/p")
    assert info.value.code == NOT_FOUND
    assert [name for name in os.listdir(os.path.join(home, "projects")) if slug in name] == []


def test_everything_the_store_writes_takes_its_time_from_its_clock(home):
    """Timestamps, clock values, IDs and commit times all follow the store's wall-time source."""
    import datetime as dt

    from gitmail import Mail
    from gitmail.model.clock import parse_ts
    from gitmail.model.ids import id_time

    from .conftest import ManualTime

    at = dt.datetime(2031, 5, 6, 7, 8, 9, tzinfo=dt.UTC)  # far from the system's time
    wall = ManualTime(at.timestamp())
    store = Store(home, background=False, wall=wall)
    mail = Mail(store)
    key = "/data/projects/clocked"
    mail.ensure_project(key)
    for name in ("BlueLake", "GreenCastle"):
        mail.register_agent(key, "p", "m", name=name)
        mail.set_contact_policy(key, name, "open")
    sent = mail.send_message(key, "BlueLake", ["GreenCastle"], "Hello", "body")["deliveries"][0]["payload"]
    wall.advance(hours=1)
    later = at + dt.timedelta(hours=1)
    receipt = mail.acknowledge_message(key, "GreenCastle", sent["id"])
    seat = mail.take_seat(key, "BlueLake", lease_s=600)["seat"]
    entry = mail.journal(key, "BlueLake", "noted", seat=seat["token"])
    granted = mail.file_reservation_paths(key, "GreenCastle", ["src/*"], ttl_seconds=600)["granted"][0]

    assert parse_ts(sent["created_ts"]) == id_time(sent["id"]) == at
    assert parse_ts(receipt["acknowledged_at"]) == later
    assert parse_ts(seat["expires_at"]) == later + dt.timedelta(minutes=10)
    assert id_time(entry["id"]) == later and entry["path"].startswith("agents/BlueLake/journal/2031/05/06/")
    assert parse_ts(granted["created_ts"]) == id_time(granted["id"]) == later
    assert mail.whois(key, "GreenCastle")["last_active_ts"] == "2031-05-06T08:08:09.000Z"
    archive = store.archive(key)
    commit = archive.repo[archive.tip()]
    assert commit.author.time == commit.commit_time == int(later.timestamp())
    assert store.clock.tick().wall_ms == int(later.timestamp() * 1000)
