"""The mail domain's inbox served from the cache equals the inbox read from a snapshot."""

from __future__ import annotations

import dataclasses
import itertools

from gitmail.coord.lookup import profiles
from gitmail.index import indexer_for, search_messages
from gitmail.mail import mailbox

from .mail_helpers import PROJECT, make_mail, open_agents, send


def test_cached_inbox_matches_the_snapshot_inbox(store):
    mail = make_mail(store)
    open_agents(mail, "BlueLake", "GreenCastle", "RedStone")
    sent = []
    for i in range(6):
        sent.append(send(mail, "BlueLake", ["GreenCastle"], f"Step {i}", f"Body {i} about the plan",
                         cc=["RedStone"] if i % 2 else None, bcc=["RedStone"] if i == 4 else None,
                         importance=["normal", "urgent", "high"][i % 3], topic="ops" if i % 2 else None,
                         ack_required=i == 3))
    send(mail, "RedStone", ["GreenCastle", "BlueLake"], "From Red", "Red's plan")
    mail.mark_message_read(PROJECT, "GreenCastle", sent[1]["id"])
    mail.acknowledge_message(PROJECT, "GreenCastle", sent[3]["id"])

    index = indexer_for(store).project(PROJECT)
    snap = store.archive(PROJECT).snapshot()
    since = sent[2]["created_ts"]
    options = itertools.product([None, since], [False, True], [False, True], [None, "ops", "OPS"], [2, 20],
                                [False, True])
    for since_ts, urgent_only, unread_only, topic, limit, bodies in options:
        for agent in ("GreenCastle", "RedStone", "BlueLake"):
            kwargs = dict(since_ts=since_ts, urgent_only=urgent_only, unread_only=unread_only, topic=topic,
                          limit=limit)
            expected = mailbox.inbox(snap, agent, include_bodies=bodies, **kwargs)
            assert index.inbox(agent, include_bodies=bodies, **kwargs) == expected, (agent, kwargs, bodies)

    for since_ts, limit, bodies in itertools.product([None, since], [2, 20], [False, True]):
        for agent in ("GreenCastle", "RedStone", "BlueLake"):
            expected = mailbox.outbox(snap, agent, since_ts=since_ts, limit=limit, include_bodies=bodies)
            assert index.outbox(agent, since_ts=since_ts, limit=limit, include_bodies=bodies) == expected, agent

    via_facade = mail.fetch_inbox(PROJECT, "GreenCastle", limit=50, include_bodies=True)
    assert via_facade == mailbox.inbox(snap, "GreenCastle", limit=50, include_bodies=True)
    assert len(via_facade) == 7


def test_messages_sent_through_the_facade_are_searchable(store):
    mail = make_mail(store)
    open_agents(mail, "BlueLake", "GreenCastle")
    payload = send(mail, "BlueLake", ["GreenCastle"], "Deploy window", "The deploy window opens at noon")
    [hit] = search_messages(store, PROJECT, '"deploy window"', agent_name="GreenCastle")
    assert hit["id"] == payload["id"] and hit["from"] == "BlueLake"


def test_the_facade_exposes_search(store):
    mail = make_mail(store)
    open_agents(mail, "BlueLake", "GreenCastle", "RedStone")
    payload = send(mail, "BlueLake", ["GreenCastle"], "Canary", "The canary build is green")
    assert [hit["id"] for hit in mail.search_messages(PROJECT, "canary", limit=5)] == [payload["id"]]
    assert mail.search_messages(PROJECT, "canary", agent_name="RedStone") == []


def test_the_agent_directory_from_the_index_matches_the_profiles(store):
    mail = make_mail(store)
    open_agents(mail, "BlueLake", "GreenCastle", "RedStone")
    mail.retire_agent(PROJECT, "RedStone")
    mail.publish_capabilities(PROJECT, "BlueLake", ["review"])
    snap = store.archive(PROJECT).snapshot()
    kept = [dataclasses.replace(agent, token_hash=None) for agent in profiles(snap)]  # the index keeps no secrets
    assert indexer_for(store).project(PROJECT).agents() == kept
    assert [a["name"] for a in mail.list_agents(PROJECT)] == ["BlueLake", "GreenCastle"]
    every = mail.list_agents(PROJECT, active_only=False)
    assert [(a["name"], a["status"]) for a in every] == [("BlueLake", "active"), ("GreenCastle", "active"),
                                                         ("RedStone", "retired")]
    assert all("token_hash" not in a and "registration_token" not in a for a in every)
