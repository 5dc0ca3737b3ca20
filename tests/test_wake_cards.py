"""Capability cards and webhook delivery below the server: the card's merge rule and checks, the retry bound.

Cards are published with the real domain (``Mail.set_card``) on real
archives and merged by the sync's own rule; deliveries go to a real HTTP
receiver on loopback, with the test's sleeper and clock so the backoff
schedule is followed without waiting for it.
"""

from __future__ import annotations

import dataclasses

import pytest

from gitmail import Mail, Store
from gitmail.model.errors import GitmailError
from gitmail.model.records import Agent, parse_path
from gitmail.server.wakestate import Hook, WakeState
from gitmail.server.webhooks import Deliverer, Delivery, allowed_hosts, check_target, new_secret, signature
from gitmail.storage.recordcheck import edit_refusal
from gitmail.sync.merge import merge_file

from .wake_helpers import Receiver

PROJECT = "/work/projects/cards"


def _mail(tmp_path) -> Mail:
    mail = Mail(Store(str(tmp_path / "home"), background=False, durable=False))
    mail.ensure_project(PROJECT)
    mail.register_agent(PROJECT, "p", "m", name="BlueLake")
    return mail


def _profile(mail: Mail) -> tuple[str, bytes]:
    path = "agents/BlueLake/profile.yaml"
    data = mail.ctx.archive(PROJECT).snapshot().read(path)
    assert data is not None
    return path, data


def test_each_card_change_is_the_next_version_and_the_higher_version_wins_a_merge_whole(tmp_path):
    mail = _mail(tmp_path)
    path, base = _profile(mail)
    assert mail.set_card(PROJECT, "BlueLake", wake_channel="sse", vendor="acme").card_version == 1
    mail.update_agent(PROJECT, "BlueLake", purpose="reviews")  # a card change through update_agent: version 2
    mail.publish_capabilities(PROJECT, "BlueLake", ["review"])  # and through publish_capabilities: version 3
    _, ahead = _profile(mail)
    card = Agent.from_bytes(ahead, path)
    assert (card.card_version, card.wake_channel, card.vendor, card.purpose) == (3, "sse", "acme", "reviews")
    # The other side published once, later by the clock, from the same base: version 1 with other fields.
    behind = dataclasses.replace(Agent.from_bytes(base, path), card_version=1, wake_channel="webhook",
                                 vendor="other", hlc=mail.ctx.tick(), task_description="elsewhere")
    for ours, theirs in ((ahead, behind.to_bytes()), (behind.to_bytes(), ahead)):
        merged = parse_path(path, merge_file(path, base, ours, theirs).content)
        assert isinstance(merged, Agent)
        assert (merged.card_version, merged.wake_channel, merged.vendor, merged.capabilities) == (
            3, "sse", "acme", ["review"])  # the whole card of version 3, nothing of version 1's
        assert merged.task_description == "elsewhere"  # fields outside the card still merge one by one


def test_two_publications_of_one_version_keep_the_later_writers_card_whole(tmp_path):
    mail = _mail(tmp_path)
    path, base = _profile(mail)
    start = Agent.from_bytes(base, path)
    early = dataclasses.replace(start, card_version=1, wake_channel="sse", vendor="a", hlc=mail.ctx.tick())
    late = dataclasses.replace(start, card_version=1, wake_channel="webhook", purpose="b", hlc=mail.ctx.tick())
    for ours, theirs in ((early.to_bytes(), late.to_bytes()), (late.to_bytes(), early.to_bytes())):
        merged = parse_path(path, merge_file(path, base, ours, theirs).content)
        assert isinstance(merged, Agent)
        assert (merged.wake_channel, merged.vendor, merged.purpose) == ("webhook", "", "b")


def test_a_card_version_never_goes_back_at_any_door(tmp_path):
    mail = _mail(tmp_path)
    mail.set_card(PROJECT, "BlueLake")
    path, data = _profile(mail)
    old = Agent.from_bytes(data, path)
    lowered = dataclasses.replace(old, card_version=0)
    for door in ("hub", "archive", "fetch"):
        refusal = edit_refusal(door, "agent", path, old, lowered)
        assert refusal is not None and "card version" in refusal[0]
    assert edit_refusal("hub", "agent", path, old, dataclasses.replace(old, card_version=2)) is None


def test_set_card_refuses_an_unknown_channel_and_changes_nothing(tmp_path):
    mail = _mail(tmp_path)
    before = mail.tip(PROJECT)
    with pytest.raises(GitmailError) as refused:
        mail.set_card(PROJECT, "BlueLake", wake_channel="pager")
    assert refused.value.code == "INVALID_ARGUMENT" and refused.value.data["field"] == "wake_channel"
    assert mail.tip(PROJECT) == before


def test_targets_are_loopback_or_the_operators_list():
    allowed = allowed_hosts({"GITMAIL_WAKE_HOSTS": "hooks.example.com, [fd00::1]"})
    assert allowed == {"hooks.example.com", "fd00::1"}
    for url in ("http://127.0.0.1:9/x", "http://localhost/x", "https://[::1]:8443/x", "http://127.8.0.1/",
                "https://HOOKS.example.com/wake", "http://[fd00::1]/w"):
        assert check_target(url, allowed) == url
    refused_hosts = ("http://example.com/x", "http://169.254.169.254/", "http://evil.hooks.example.com/")
    bad_urls = ("ftp://127.0.0.1/", "http://[::1/", "")
    for url, code in [(u, "WAKE_TARGET_REFUSED") for u in refused_hosts] + [(u, "INVALID_ARGUMENT") for u in bad_urls]:
        with pytest.raises(GitmailError) as refused:
            check_target(url, allowed)
        assert refused.value.code == code, url


def test_a_failing_receiver_gets_each_attempt_on_schedule_until_the_bound_then_it_is_dropped(tmp_path):
    receiver, pauses = Receiver(failures=100), []
    state = WakeState(str(tmp_path))
    secret = new_secret()
    deliverer = Deliverer(state, retry_s=1.0, attempts=6, sleep=pauses.append, clock=lambda: 1_700_000_000.0)
    try:
        delivery = Delivery("evt_1", b'{"kind":"reply"}', Hook("s", "BlueLake", receiver.url, secret))
        assert deliverer.deliver(delivery) is False
    finally:
        receiver.close()
    assert pauses == [1.0, 2.0, 4.0, 8.0, 16.0] and len(receiver.posts) == 6
    assert not state.delivered("evt_1")
    post = receiver.posts[0]
    assert post.headers["webhook-signature"] == signature(secret, "evt_1", 1_700_000_000, post.body)


def test_a_wake_up_is_taken_once_by_the_servers_of_a_store_and_across_a_restart(tmp_path):
    receiver = Receiver()
    state = WakeState(str(tmp_path))
    deliverer = Deliverer(state, sleep=lambda seconds: None).start()
    try:
        hook = Hook("s", "BlueLake", receiver.url, new_secret())
        assert deliverer.submit(Delivery("evt_2", b"{}", hook))
        assert WakeState(str(tmp_path)).claim("evt_2") is False  # a second server on the store leaves it alone
        receiver.wait_for(1)
        deliverer.stop()  # the workers end once the queue is done: the delivery was recorded before
        state.close()
        again = Deliverer(WakeState(str(tmp_path)))  # the server restarted over the same local state
        assert again.submit(Delivery("evt_2", b"{}", hook)) is False
    finally:
        receiver.close()
    assert len(receiver.posts) == 1


def test_what_wakes_whom_between_two_commits(tmp_path):
    from gitmail.mail.facade import SendOptions

    mail = _mail(tmp_path)
    for name in ("GreenCastle", "RedStone"):
        mail.register_agent(PROJECT, "p", "m", name=name)
    mail.set_contact_policy(PROJECT, "GreenCastle", "open")
    mail.set_contact_policy(PROJECT, "RedStone", "contacts_only")
    start = mail.tip(PROJECT)
    sent = mail.send_message(PROJECT, "BlueLake", ["GreenCastle"], "plan", "body", SendOptions(ack_required=True))
    original = sent.deliveries[0].payload.id
    mail.send_message(PROJECT, "BlueLake", ["GreenCastle"], "fyi", "no ack asked")
    reply = mail.reply_message(PROJECT, original, "GreenCastle", "agreed")
    mail.reply_message(PROJECT, original, "BlueLake", "a reply to oneself wakes nobody")
    mail.acknowledge_message(PROJECT, "GreenCastle", original)
    mail.request_contact(PROJECT, "BlueLake", "RedStone", reason="to ask")
    middle = mail.tip(PROJECT)
    mail.respond_contact(PROJECT, "RedStone", "BlueLake", True)
    end = mail.tip(PROJECT)
    assert start and middle and end
    events = mail.wake_events(PROJECT, start, middle) + mail.wake_events(PROJECT, middle, end)
    assert reply.message is not None
    found = sorted((e.kind, e.agent, e.record_id, e.by) for e in events)
    assert found == [("ack", "BlueLake", original, "GreenCastle"),
                     ("contact_approved", "BlueLake", "BlueLake->RedStone", "RedStone"),
                     ("reply", "BlueLake", reply.message.id, "GreenCastle")]
    assert len({e.id for e in events}) == 3
    again = mail.wake_events(PROJECT, start, end)  # seen in one step instead of two: the same IDs
    assert {e.id for e in again} == {e.id for e in events}
    assert mail.wake_events(PROJECT, None, end) == []  # a first look only learns where the project stands
