"""Wake channels on the capability card: set_card, signed webhooks and wake streams, through real servers.

Each test runs a real server (``gitmail serve`` in a child process, or the
same application in this process where the retry schedule's sleeper and
clock are the test's) and the official MCP client; webhooks go to a real
HTTP receiver on loopback and are verified with the ``standardwebhooks``
package. A wake-up is awaited, never a pause: the call that causes it has
returned when the wait starts, and a watchdog only keeps a broken build from
hanging.
"""

from __future__ import annotations

import os
import sqlite3
import stat
import subprocess
import time

import pytest
from standardwebhooks import Webhook

from gitmail import Mail, Store
from gitmail.storage import nodes
from gitmail.sync.hookinstall import install_hub
from gitmail.sync.remotes import add_remote
from gitmail.sync.syncer import sync_project

from .conftest import git
from .inprocess_server import InProcessServer
from .mcp_harness import ServerProcess, call, fail, run
from .test_mcp_mail import fresh_project, pair, server_tip
from .wake_helpers import Receiver, WakeStream

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]
NOW = int(time.time())  # the retry test's clock stands here (a verifier refuses stamps far from its own time)


def _history(home: str, slug: str) -> str:
    """Every commit of a project's archive with its message and patch, as git prints them."""
    git_dir = f"{home}/projects/{slug}/archive.git"
    return subprocess.run(["git", "--git-dir", git_dir, "log", "--all", "-p", "--format=%H%n%B"],
                          capture_output=True, text=True, check=True).stdout


def _hooks(home: str) -> list[tuple[str, ...]]:
    with sqlite3.connect(os.path.join(home, "wake", "state.sqlite")) as db:
        return list(db.execute("SELECT slug, name, url FROM hooks"))


async def _thread_with_reply(client, project: str) -> tuple[str, str]:
    """BlueLake writes to GreenCastle, who replies; the original's and the reply's IDs."""
    sent = await call(client, "send_message", project_key=project, sender_name="BlueLake", to=["GreenCastle"],
                      subject="plan", body_md="the secret plan", ack_required=True)
    original = sent["deliveries"][0]["payload"]["id"]
    reply = await call(client, "reply_message", project_key=project, message_id=original, sender_name="GreenCastle",
                       body_md="agreed, in detail")
    return original, reply["id"]


def test_a_reply_wakes_the_sender_by_a_signed_webhook_kept_out_of_the_archive(tmp_path):
    receiver, server = Receiver(), ServerProcess(str(tmp_path / "home"), extra_args=("--tools", "all"))
    project = fresh_project()
    try:
        async def scenario():
            async with server.client() as client:
                await pair(client, project)
                card = await call(client, "set_card", project_key=project, agent_name="BlueLake",
                                  wake_channel="webhook", webhook_url=receiver.url, vendor="acme")
                again = await call(client, "set_card", project_key=project, agent_name="BlueLake",
                                   wake_channel="webhook", webhook_url=receiver.url)
                return card, again, await _thread_with_reply(client, project)

        card, again, (original, reply) = run(scenario())
        (post,) = receiver.wait_for(1)
    finally:
        server.stop()
        receiver.close()
    assert (card["card_version"], again["card_version"]) == (1, 2) and card["wake_channel"] == "webhook"
    assert card["vendor"] == again["vendor"] == "acme"  # a field left out keeps what the card said
    secret = again["webhook_secret"]
    assert secret.startswith("whsec_") and secret != card["webhook_secret"]  # each publication mints a new one
    event = Webhook(secret).verify(post.body, post.headers)
    assert post.headers["webhook-id"] == event["id"]
    assert event["kind"] == "reply" and event["agent"] == "BlueLake" and event["record_id"] == reply
    assert event["by"] == "GreenCastle" and event["thread_id"]
    assert b"agreed" not in post.body and b"plan" not in post.body  # never a body, nor a subject
    slug = event["project"]
    history = _history(server.home, slug)
    assert receiver.url not in history and secret not in history and card["webhook_secret"] not in history
    assert "card_version: 2" in history and "wake_channel: webhook" in history
    folder, state = os.path.join(server.home, "wake"), os.path.join(server.home, "wake", "state.sqlite")
    assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700 and stat.S_IMODE(os.stat(state).st_mode) == 0o600
    assert original in history  # the history holds the mail itself, which the wake-up only pointed at


def test_a_webhook_outside_loopback_and_the_allow_list_is_refused_and_nothing_changes(server):
    project = fresh_project()

    async def scenario():
        async with server.client() as client:
            await pair(client, project)
            slug = (await call(client, "ensure_project", human_key=project))["slug"]
            before = server_tip(server, slug)
            refused = await fail(client, "set_card", project_key=project, agent_name="BlueLake",
                                 wake_channel="webhook", webhook_url="http://example.com/hook")
            private = await fail(client, "set_card", project_key=project, agent_name="BlueLake",
                                 wake_channel="webhook", webhook_url="http://10.0.0.8/hook")
            missing = await fail(client, "set_card", project_key=project, agent_name="BlueLake",
                                 wake_channel="webhook")
            stray = await fail(client, "set_card", project_key=project, agent_name="BlueLake",
                               wake_channel="sse", webhook_url="http://127.0.0.1:9/x")
            return slug, before, server_tip(server, slug), (refused, private, missing, stray)

    slug, before, after, (refused, private, missing, stray) = run(scenario())
    assert refused["code"] == private["code"] == "WAKE_TARGET_REFUSED"
    assert "GITMAIL_WAKE_HOSTS" in refused["message"] and refused["data"]["host"] == "example.com"
    assert missing["code"] == stray["code"] == "INVALID_ARGUMENT"
    assert missing["data"]["field"] == stray["data"]["field"] == "webhook_url"
    assert before == after  # the repository is unchanged...
    assert not [row for row in _hooks(server.home) if row[0] == slug]  # ...and so is the local state


def test_retries_with_backoff_until_the_receiver_takes_it_then_never_again_even_after_a_restart(tmp_path):
    from gitmail.server.wake import Wakes

    receiver = Receiver(failures=2)
    pauses: list[float] = []
    store = Store(str(tmp_path / "home"), background=False, durable=False)
    project = fresh_project()

    def wakes() -> Wakes:
        made = Wakes.serving(store, Mail(store))
        made.deliverer.retry_s, made.deliverer.sleep = 0.5, pauses.append  # the test's sleeper: nothing waits
        made.deliverer.clock = lambda: float(NOW)
        return made

    try:
        with InProcessServer(store, wakes=wakes()) as one:
            async def first():
                async with one.client() as client:
                    _, green = await pair(client, project)
                    card = await call(client, "set_card", project_key=project, agent_name="BlueLake",
                                      wake_channel="webhook", webhook_url=receiver.url)
                    original, _ = await _thread_with_reply(client, project)
                    return card["webhook_secret"], green["registration_token"], original

            secret, token, original = run(first())
            posts = receiver.wait_for(3)
        assert [p.status for p in posts] == [500, 500, 204] and pauses == [0.5, 1.0]
        assert len({p.headers["webhook-id"] for p in posts}) == 1
        assert {p.headers["webhook-timestamp"] for p in posts} == {str(NOW)}  # the injected clock's
        assert Webhook(secret).verify(posts[2].body, posts[2].headers)["kind"] == "reply"

        with InProcessServer(store, wakes=wakes()) as two:
            async def second():
                async with two.client() as client:
                    await call(client, "acknowledge_message", project_key=project, agent_name="GreenCastle",
                               message_id=original, agent_token=token)
            run(second())
            posts = receiver.wait_for(4)
    finally:
        receiver.close()
    kinds = [p.body for p in receiver.delivered()]
    assert len(kinds) == 2 and b'"kind":"reply"' in kinds[0] and b'"kind":"ack"' in kinds[1]
    assert posts[3].headers["webhook-id"] != posts[0].headers["webhook-id"]  # the reply was not delivered again


def test_a_wake_stream_hears_of_a_reply_and_refuses_agents_whose_card_asks_otherwise(server):
    project = fresh_project()

    async def setup():
        async with server.client() as client:
            blue, green = await pair(client, project)
            card = await call(client, "set_card", project_key=project, agent_name="BlueLake", wake_channel="sse")
            slug = (await call(client, "ensure_project", human_key=project))["slug"]
            return blue["registration_token"], green["registration_token"], card, slug

    blue, green, card, slug = run(setup())
    assert card["wake_channel"] == "sse" and "webhook_secret" not in card
    stream = WakeStream(server.port, slug, "BlueLake", blue)
    try:
        assert stream.response.status == 200 and stream.response.getheader("content-type").startswith(
            "text/event-stream")
        assert stream.opening() == ": listening"  # the stream is held: what happens now reaches it

        async def reply():
            async with server.client() as client:
                await call(client, "register_agent", project_key=project, program="p", model="m", name="BlueLake",
                           registration_token=blue)
                await call(client, "register_agent", project_key=project, program="p", model="m",
                           name="GreenCastle", registration_token=green)
                return await _thread_with_reply(client, project)

        _, reply_id = run(reply())
        event_id, event = stream.next_event()
    finally:
        stream.close()
    assert event_id == event["id"] and event["kind"] == "reply" and event["record_id"] == reply_id
    assert set(event) == {"id", "kind", "project", "agent", "record_id", "thread_id", "by"}
    brief = WakeStream(server.port, slug, "GreenCastle", green)
    wrong = WakeStream(server.port, slug, "BlueLake", green)
    try:
        assert brief.response.status == 400 and b"WAKE_CHANNEL_MISMATCH" in brief.response.read()
        assert wrong.response.status == 401
    finally:
        brief.close()
        wrong.close()


def test_a_reply_synced_from_another_machine_through_a_checked_hub_wakes_the_agent(tmp_path):
    hub = str(tmp_path / "hub.git")
    git("init", "-q", "--bare", "--initial-branch=main", hub)
    install_hub(hub)
    receiver, server = Receiver(), ServerProcess(str(tmp_path / "home"), extra_args=("--tools", "all"))
    project = "/work/projects/wake-sync"
    other = Store(str(tmp_path / "other"), background=False)
    try:
        async def setup():
            async with server.client() as client:
                blue, _ = await pair(client, project)
                await call(client, "set_card", project_key=project, agent_name="BlueLake", wake_channel="webhook",
                           webhook_url=receiver.url)
                sent = await call(client, "send_message", project_key=project, sender_name="BlueLake",
                                  to=["GreenCastle"], subject="over there", body_md="answer from your machine")
                return blue["registration_token"], sent["deliveries"][0]["payload"]["id"]

        token, original = run(setup())
        here = Store(server.home, background=False)
        add_remote(here, project, "hub", "file://" + hub)
        nodes.handover(here.archive(project), agent="GreenCastle", to=other.node, hlc=here.clock.tick())
        blue = {"agent_name": "BlueLake", "agent_token": token}

        async def sync():
            async with server.client() as client:
                return await call(client, "sync_project", project_key=project, **blue)

        assert run(sync())["exit_code"] == 0
        add_remote(other, project, "hub", "file://" + hub)
        assert sync_project(other, project).exit_code == 0
        there = Mail(other)
        assert there.agent_position(project, "BlueLake").me.card_version == 1  # the card's version came across
        card = there.set_card(project, "GreenCastle", wake_channel="sse")
        reply = there.reply_message(project, original, "GreenCastle", "done, from the other machine")
        assert sync_project(other, project).exit_code == 0
        assert run(sync())["exit_code"] == 0  # the reply arrives here by the sync
        (post,) = receiver.wait_for(1)
        seen = Mail(Store(server.home, background=False)).agent_position(project, "GreenCastle").me
    finally:
        server.stop()
        receiver.close()
    event = Webhook(_hook_secret(server.home)).verify(post.body, post.headers)
    assert event["kind"] == "reply" and event["by"] == "GreenCastle" and event["agent"] == "BlueLake"
    assert reply.message is not None and event["record_id"] == reply.message.id
    assert card.card_version == 1 and seen.card_version == 1 and seen.wake_channel == "sse"


def _hook_secret(home: str) -> str:
    with sqlite3.connect(os.path.join(home, "wake", "state.sqlite")) as db:
        (secret,) = db.execute("SELECT secret FROM hooks").fetchone()
    return str(secret)


def test_a_reconnecting_stream_gets_what_it_missed_and_streams_are_capped(tmp_path):
    from gitmail.server.wake import Wakes

    store = Store(str(tmp_path / "home"), background=False, durable=False)
    wakes = Wakes.serving(store, Mail(store))
    project = fresh_project()
    with InProcessServer(store, wakes=wakes) as server:
        async def setup():
            async with server.client() as client:
                blue, green = await pair(client, project)
                await call(client, "set_card", project_key=project, agent_name="BlueLake", wake_channel="sse")
                slug = (await call(client, "ensure_project", human_key=project))["slug"]
                return {"BlueLake": blue["registration_token"], "GreenCastle": green["registration_token"]}, slug

        async def exchange():
            async with server.client() as client:
                for name, token in tokens.items():  # this session proves both agents
                    await call(client, "register_agent", project_key=project, program="p", model="m", name=name,
                               registration_token=token)
                return (await _thread_with_reply(client, project))[1]

        tokens, slug = run(setup())
        wakes.max_streams = 1
        first = WakeStream(server.port, slug, "BlueLake", tokens["BlueLake"])
        try:
            assert first.opening() == ": listening"
            over = WakeStream(server.port, slug, "BlueLake", tokens["BlueLake"])
            assert over.response.status == 400 and b"TOO_MANY_SUBSCRIPTIONS" in over.response.read()
            over.close()
            wakes.max_streams = 8
            run(exchange())
            seen_id, seen = first.next_event()
        finally:
            first.close()
        missed_reply = run(exchange())  # while no stream is open
        again = WakeStream(server.port, slug, "BlueLake", tokens["BlueLake"], last_event_id=seen_id)
        try:
            assert again.opening() == ": listening"
            _, missed = again.next_event()
        finally:
            again.close()
    assert seen["kind"] == "reply"
    assert missed["record_id"] == missed_reply and missed["id"] != seen_id
