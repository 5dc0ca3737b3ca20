"""Every read that carries bodies holds a byte budget, and paging by its usual arguments reaches everything.

Big messages (800 kB bodies, 2 MiB default budget) are written through the
library into a store that gitmail serve's own application serves in this
process; the official MCP client and raw HTTP read them back. The store's
clock moves by hand, so messages are a second apart (or, where the test
says, written in the same millisecond).
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import httpx2 as httpx
import pytest

from gitmail import Mail
from gitmail.mail.budget import MARKER_BYTES, item_bytes, newest_first, oldest_first
from gitmail.mail.facade import SendOptions
from gitmail.mail.mailbox import InboxMessage, ThreadMessage
from gitmail.model.limits import READ_BUDGET_DEFAULT

from .inprocess_server import InProcessServer
from .mcp_harness import call, fail, read_error, read_json, run

PROJECT, OTHER = "/work/budgets/project", "/work/budgets/other"
BIG = 800_000
SENT = 6  # 4.8 MB of bodies: three pages at the default budget


def body(n: int) -> str:
    return f"message {n}\n" + "x" * BIG


@pytest.fixture
def world(store, wall) -> Iterator[tuple[InProcessServer, dict[str, Any]]]:
    """Blue sent Green SENT big messages, in one thread and with one topic, in two linked projects."""
    mail = Mail(store)
    tokens: dict[str, str] = {}
    ids: dict[str, list[str]] = {PROJECT: [], OTHER: []}
    for key in (PROJECT, OTHER):
        mail.ensure_project(key)
        for name in ("Blue", "Green"):
            tokens[f"{name}@{key}"] = mail.register_agent(key, "p", "m", name=name)["registration_token"]
            mail.set_contact_policy(key, name, "open")
        mail.products_link("budgets", key)
    thread = None
    for n in range(SENT):
        wall.advance(seconds=1)
        for key in (PROJECT, OTHER):
            sent = mail.send_message(key, "Blue", ["Green"], f"part {n}", body(n),
                                     options=SendOptions(topic="bulk", thread_id=thread if key == PROJECT else None))
            payload = sent["deliveries"][0]["payload"]
            thread = thread or payload["thread_id"]
            ids[key].append(payload["id"])
    with InProcessServer(store, mail=mail) as server:
        yield server, {"tokens": tokens, "ids": ids, "thread": thread}


def page_bytes(items: list[dict[str, Any]]) -> int:
    return sum(item_bytes(item) for item in items)


async def read_all(fetch: Callable[[str | None], Awaitable[list[dict[str, Any]]]]) -> list[list[dict[str, Any]]]:
    """Pages of a newest-first list read as a poller does: again with the since_ts that ``more`` names."""
    pages, since = [], None
    while True:
        page = await fetch(since)
        pages.append(page)
        assert len(pages) <= SENT, "paging must end"
        if not page or "more" not in page[0]:
            return pages
        since = page[0]["more"]["since_ts"]
        assert since == page[0]["created_ts"]


def check_pages(pages: list[list[dict[str, Any]]], ids: list[str], budget: int = READ_BUDGET_DEFAULT) -> None:
    """Each page within its budget and newest first; together, every message exactly once, bodies whole."""
    for page in pages:
        assert page_bytes(page) <= budget or len(page) == 1
        assert [m["created_ts"] for m in page] == sorted((m["created_ts"] for m in page), reverse=True)
    seen = [m["id"] for page in pages for m in page]
    assert sorted(seen) == sorted(ids) and len(seen) == len(set(seen))
    assert all(m["body_md"] == body(int(m["subject"].split()[1])) for page in pages for m in page)


def test_fetch_inbox_topic_and_product_inbox_hold_their_budget_and_since_ts_reaches_the_rest(world):
    server, seed = world
    tokens = seed["tokens"]

    async def scenario():
        async with server.client() as green:
            for key in (PROJECT, OTHER):  # this session proves Green in both projects of the product
                await call(green, "list_contacts", project_key=key, agent_name="Green",
                           agent_token=tokens[f"Green@{key}"])

            async def inbox(since):
                return await call(green, "fetch_inbox", project_key=PROJECT, agent_name="Green", limit=100,
                                  include_bodies=True, since_ts=since)

            async def topic(since):
                return await call(green, "fetch_topic", project_key=PROJECT, topic_name="bulk", limit=100,
                                  since_ts=since)

            async def product(since):
                found = await call(green, "fetch_inbox_product", product_key="budgets", agent_name="Green",
                                   limit=100, include_bodies=True, since_ts=since)
                return found["messages"]

            return [await read_all(fetch) for fetch in (inbox, topic, product)]

    inbox, topic, product = run(scenario())
    first = inbox[0]
    assert len(inbox) == 3 and len(first) == 2  # 800 kB each: two fit in 2 MiB
    assert first[0]["more"]["left_out"] == SENT - 2 and "since_ts=" in first[0]["more"]["hint"]
    assert [m["subject"] for m in first] == ["part 1", "part 0"]  # filled from the oldest
    check_pages(inbox, seed["ids"][PROJECT])
    check_pages(topic, seed["ids"][PROJECT])
    check_pages(product, seed["ids"][PROJECT] + seed["ids"][OTHER])
    # Without bodies nothing changes: the whole window, no marker.
    assert all("more" not in page[0] for page in (inbox[-1], topic[-1]))


def test_a_message_too_large_for_the_budget_alone_is_listed_without_its_body(world):
    server, seed = world

    async def scenario():
        async with server.client() as client:
            args = dict(project_key=PROJECT, agent_name="Green", agent_token=seed["tokens"][f"Green@{PROJECT}"],
                        limit=3, include_bodies=True)
            small = await call(client, "fetch_inbox", max_bytes=1024, **args)
            refused = [await fail(client, "fetch_inbox", max_bytes=value, **args) for value in (10, 10**9)]
            return small, refused

    small, refused = run(scenario())
    (only,) = small  # progress: the oldest of the three asked for, its body left out
    assert only["body_omitted"] is True and only["body_bytes"] == len(body(3).encode()) and "body_md" not in only
    assert only["subject"] == "part 3" and only["more"]["left_out"] == 2
    assert page_bytes(small) <= 1024
    assert [r["code"] for r in refused] == ["INVALID_ARGUMENT"] * 2


def test_messages_of_one_millisecond_are_never_split_by_the_budget(store, wall):
    mail = Mail(store)
    mail.ensure_project(PROJECT)
    for name in ("Blue", "Green"):
        mail.register_agent(PROJECT, "p", "m", name=name)
        mail.set_contact_policy(PROJECT, name, "open")
    wall.advance(seconds=1)
    for n in range(3):  # the clock stands still: one created_ts for all three
        mail.send_message(PROJECT, "Blue", ["Green"], f"part {n}", body(n))
    wall.advance(seconds=1)
    mail.send_message(PROJECT, "Blue", ["Green"], "part 3", body(3))
    page = mail.fetch_inbox(PROJECT, "Green", include_bodies=True, max_bytes=BIG + 1000)
    assert len({m["created_ts"] for m in page}) == 1 and len(page) == 3  # the whole millisecond
    assert [m.get("body_omitted", False) for m in page] == [True, True, False]  # the oldest has its body
    rest = mail.fetch_inbox(PROJECT, "Green", include_bodies=True, max_bytes=BIG + 1000,
                            since_ts=page[0]["more"]["since_ts"])
    assert [m["subject"] for m in rest] == ["part 3"] and "more" not in rest[0]


def test_a_thread_is_read_a_budget_at_a_time_over_mcp_and_in_the_web_view(world):
    server, seed = world
    thread, member = seed["thread"], seed["tokens"][f"Green@{PROJECT}"]
    base = f"resource://thread/{thread}?project={PROJECT}&agent_name=Green&agent_token={member}"

    async def scenario():
        async with server.client() as client:
            pages = [await read_json(client, base)]
            while pages[-1]["has_more"]:
                pages.append(await read_json(client, f"{base}&after={pages[-1]['next_after']}"))
                assert len(pages) <= SENT
            small = await read_json(client, f"{base}&max_bytes=1024")
            wrong = await read_error(client, f"{base}&after={seed['ids'][OTHER][0]}")
            return pages, small, wrong

    pages, small, wrong = run(scenario())
    assert [len(p["messages"]) for p in pages] == [2, 2, 2]
    assert [p["has_more"] for p in pages] == [True, True, False] and pages[-1]["next_after"] is None
    messages = [m for p in pages for m in p["messages"]]
    assert [m["id"] for m in messages] == seed["ids"][PROJECT]  # oldest first, each once
    assert all(page_bytes(p["messages"]) <= READ_BUDGET_DEFAULT for p in pages)
    assert small["messages"][0]["body_omitted"] is True and small["has_more"] is True
    assert wrong["code"] == "INVALID_ARGUMENT" and "next_after" in wrong["message"]

    slug = server.store.resolve(PROJECT)
    with httpx.Client(base_url=server.base, timeout=60) as tab:
        url, shown = f"/ui/p/{slug}/thread/{thread}", []
        while url:
            page = tab.get(url)
            assert page.status_code == 200 and len(page.content) < 2 * READ_BUDGET_DEFAULT
            shown += re.findall(r'<article class="message[^"]*" id="m-([0-9a-z]+)"', page.text)
            later = re.search(r'href="([^"]+)" id="thread-more"', page.text)
            url = later.group(1) if later else None
        assert shown == seed["ids"][PROJECT]
        assert tab.get(f"/ui/p/{slug}/thread/{thread}?after=nonsense").status_code == 400


def test_resources_and_summaries_with_bodies_hold_the_budget(world):
    server, seed = world
    token = seed["tokens"][f"Green@{PROJECT}"]
    blue = seed["tokens"][f"Blue@{PROJECT}"]

    async def scenario():
        async with server.client() as client:
            inbox = await read_json(client, f"resource://inbox/Green?project={PROJECT}&include_bodies=true&limit=50"
                                            f"&agent_token={token}")
            outbox = await read_json(client, f"resource://outbox/Blue?project={PROJECT}&include_bodies=true"
                                             f"&limit=50&agent_token={blue}")
            summary = await call(client, "summarize_thread", project_key=PROJECT, thread_id=seed["thread"],
                                 include_examples=True, agent_name="Green", agent_token=token)
            prepared = await call(client, "macro_prepare_thread", project_key=PROJECT, thread_id=seed["thread"],
                                  program="p", model="m", agent_name="Green", agent_token=token,
                                  include_inbox_bodies=True, inbox_limit=50)
            return inbox, outbox, summary, prepared

    inbox, outbox, summary, prepared = run(scenario())
    for listed in (inbox["messages"], outbox["messages"], prepared["inbox"]):
        assert len(listed) == 2 and listed[0]["more"]["left_out"] == SENT - 2
        assert page_bytes(listed) <= READ_BUDGET_DEFAULT
    assert len(summary["examples"]) == 2 and page_bytes(summary["examples"]) <= READ_BUDGET_DEFAULT
    assert len(json.dumps(prepared["thread"])) < READ_BUDGET_DEFAULT


def test_a_page_holds_the_typed_messages_it_was_given_and_their_json_is_as_before():
    """Budgets page typed messages: each keeps its class, with its body, without it, or marked with ``more``."""

    def head(n: int, ts: str) -> dict[str, Any]:
        return {"id": f"m{n}", "thread_id": "t", "subject": f"s{n}", "from": "Blue", "to": ["Green"], "cc": [],
                "created_ts": ts, "importance": "normal", "ack_required": False, "topic": None, "reply_to": None,
                "attachments": []}

    bodies = {"m1": "a" * 300, "m2": "b" * 300, "m3": "c" * 300}
    inbox = [InboxMessage.from_wire(head(n, f"2026-01-01T00:00:0{n}Z"), kind="to", read_at=None, acknowledged_at=None)
             for n in (3, 2, 1)]  # newest first
    room = MARKER_BYTES + 2 * item_bytes(inbox[0].with_body(bodies["m3"])) + 10  # two of them, not three
    page = newest_first(inbox, lambda m: bodies[m.id], room)
    assert [type(m) for m in page] == [InboxMessage, InboxMessage] and [m.id for m in page] == ["m2", "m1"]
    assert page[0].more is not None and page[0].more.left_out == 1 and page[1].more is None
    assert list(page[0])[-3:] == ["acknowledged_at", "body_md", "more"] and page[1]["body_md"] == bodies["m1"]

    thread = [ThreadMessage.from_wire(head(n, "2026-01-01T00:00:00Z")) for n in (1, 2)]
    room = item_bytes(thread[0].with_body(bodies["m1"])) + 10  # the first whole; the second of its millisecond too
    listed, more = oldest_first(thread, lambda m: bodies[m.id], room)
    assert not more and [type(m) for m in listed] == [ThreadMessage, ThreadMessage]
    assert listed[0]["body_md"] == bodies["m1"] and "body_md" not in listed[1]
    assert (listed[1].body_omitted, listed[1].body_bytes) == (True, 300) and list(listed[1])[-2:] == [
        "body_omitted", "body_bytes"]
