"""New mail is pushed: resource subscriptions on inboxes and threads, over both protocol eras and both transports.

Each test runs a real ``gitmail serve`` (or ``gitmail serve --stdio``) and
the official client: the handshake era's ``resources/subscribe`` (a
``mode="legacy"`` session, and the 1.x client in its own venv) and the
2026-07-28 era's ``subscriptions/listen`` (``mode="auto"``). A notice is
awaited, never a pause: the send that causes it has returned when the wait
starts, and a watchdog only keeps a broken build from hanging.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from typing import Any

import pytest
from fastmcp import Client
from mcp.client.subscriptions import listen

from . import mcp1
from .mcp_harness import call, child_env, run, stdio_client
from .test_http_guards import store_state
from .test_mcp_mail import fresh_project

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300),
              # the handshake era's resources/subscribe is what these tests exercise on purpose
              pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")]


class Notices:
    """The resource-updated notices a legacy session heard, in order, and a way to await the next."""

    def __init__(self) -> None:
        self.uris: list[str] = []
        self.arrived = asyncio.Event()

    async def __call__(self, message: Any) -> None:
        params = getattr(message, "params", None)
        if getattr(message, "method", "") == "notifications/resources/updated" and params is not None:
            self.uris.append(str(params.uri))
            self.arrived.set()

    async def next(self, count: int) -> list[str]:
        """The first ``count`` notices, once that many have arrived."""
        async def until() -> None:
            while len(self.uris) < count:
                self.arrived.clear()
                await self.arrived.wait()
        await asyncio.wait_for(until(), 60)  # a watchdog, not a budget
        return self.uris[:count]


async def _team(client: Client, project: str, *names: str) -> dict[str, str]:
    await call(client, "ensure_project", human_key=project)
    tokens = {}
    for name in names:
        made = await call(client, "register_agent", project_key=project, program="p", model="m", name=name)
        tokens[name] = made["registration_token"]
        await call(client, "set_contact_policy", project_key=project, agent_name=name, policy="open",
                   agent_token=tokens[name])
    return tokens


def test_a_legacy_session_hears_of_mail_to_the_inbox_and_thread_it_subscribed_to_and_of_nothing_else(server):
    project = fresh_project()
    notices = Notices()

    async def scenario():
        async with Client(server.url, mode="legacy", timeout=60, message_handler=notices) as client:
            await _team(client, project, "Ann", "Bob")
            first = await call(client, "send_message", project_key=project, sender_name="Ann", to=["Ann"],
                               subject="kickoff", body_md="a")
            thread = first["deliveries"][0]["payload"]["thread_id"]
            inbox, topic = f"resource://inbox/Bob?project={project}", f"resource://thread/{thread}?project={project}"
            await client.session.subscribe_resource(inbox)
            await client.session.subscribe_resource(topic)
            await call(client, "send_message", project_key=project, sender_name="Ann", to=["Ann"], subject="n",
                       body_md="not for Bob, not in the thread")
            await call(client, "send_message", project_key=project, sender_name="Ann", to=["Bob"], subject="hi",
                       body_md="for Bob")
            heard = await notices.next(1)
            await call(client, "reply_message", project_key=project, message_id=first["deliveries"][0]["payload"]["id"],
                       sender_name="Ann", body_md="in the thread")
            heard = await notices.next(2)
            await client.session.unsubscribe_resource(inbox)
            await call(client, "send_message", project_key=project, sender_name="Ann", to=["Bob"], thread_id=thread,
                       subject="both", body_md="to Bob, in the thread")
            return inbox, topic, heard, await notices.next(3)

    inbox, topic, heard, after = run(scenario())
    assert heard == [inbox, topic]
    assert after == [inbox, topic, topic]  # unsubscribed from the inbox: only the thread's notice


def test_a_listen_stream_hears_of_mail_and_of_mail_another_process_committed(server):
    project = fresh_project()

    async def scenario():
        async with Client(server.url, mode="auto", timeout=60) as client:
            tokens = await _team(client, project, "Cid", "Dee")
            uri = f"resource://inbox/Cid?project={project}&agent_token={tokens['Cid']}"
            async with listen(client.session, resource_subscriptions=[uri]) as stream:
                events = aiter(stream)
                await call(client, "send_message", project_key=project, sender_name="Dee", to=["Cid"], subject="1",
                           body_md="x", sender_token=tokens["Dee"])
                own = await asyncio.wait_for(anext(events), 60)
                # another process writes into the same store: the CLI, as an operator would
                subprocess.run([sys.executable, "-m", "gitmail", "send", project, "--from", "Dee", "--to", "Cid",
                                "--subject", "from the shell", "--body", "y"], env=child_env(server.home),
                               check=True, capture_output=True)
                outside = await asyncio.wait_for(anext(events), 60)
                return client.session.protocol_version, uri, own, outside

    version, uri, own, outside = run(scenario())
    assert version == "2026-07-28"
    assert str(own.uri) == uri and str(outside.uri) == uri


def test_a_subscription_is_allowed_exactly_when_reading_the_uri_is(server):
    project = fresh_project()

    async def scenario():
        async with server.client() as owner:
            await _team(owner, project, "Eve", "Fay")
        async with Client(server.url, mode="legacy", timeout=60) as stranger:
            before = store_state(server.home)
            refused = {
                "someone else's inbox": f"resource://inbox/Eve?project={project}",
                "no project": "resource://inbox/Eve",
                "not subscribable": f"resource://agents/{project}",
                "unknown agent": f"resource://inbox/Nobody?project={project}",
            }
            answers = {}
            for what, uri in refused.items():
                answers[what] = await _refused(stranger, uri)
            return before, store_state(server.home), answers

    before, after, answers = run(scenario())
    assert after == before
    assert answers["someone else's inbox"]["code"] == "UNAUTHORIZED"
    assert answers["no project"]["code"] == "INVALID_ARGUMENT" and "?project=" in answers["no project"]["message"]
    assert answers["not subscribable"]["code"] == "INVALID_ARGUMENT"
    assert answers["not subscribable"]["data"]["subscribable"] == ["inbox", "thread", "channel"]
    assert answers["unknown agent"]["code"] in ("NOT_FOUND", "UNAUTHORIZED")


def test_a_member_hears_of_each_post_to_a_channel_it_subscribed_to_and_a_stranger_may_not_subscribe(server):
    project = fresh_project()

    async def scenario():
        notices = Notices()
        async with Client(server.url, mode="legacy", timeout=60, message_handler=notices) as client:
            tokens = await _team(client, project, "Jo", "Kai")
            for name in ("deploys", "reviews"):
                await call(client, "create_channel", project_key=project, agent_name="Jo", channel=name,
                            agent_token=tokens["Jo"])
            uri = f"resource://channel/deploys?project={project}&agent_name=Kai&agent_token={tokens['Kai']}"
            await client.session.subscribe_resource(uri)
            await call(client, "post_channel", project_key=project, agent_name="Jo", channel="reviews",
                       body_md="not in deploys", agent_token=tokens["Jo"])
            await call(client, "post_channel", project_key=project, agent_name="Jo", channel="deploys",
                       body_md="v1 shipped", agent_token=tokens["Jo"])
            first = await notices.next(1)
            await call(client, "post_channel", project_key=project, agent_name="Kai", channel="deploys",
                       body_md="v2 shipped", agent_token=tokens["Kai"])
            heard = await notices.next(2)
            read = await client.read_resource(uri)
        async with Client(server.url, mode="legacy", timeout=60) as stranger:
            before = store_state(server.home)
            refusals = [await _refused(stranger, f"resource://channel/deploys?project={project}"),
                        await _refused(stranger, f"resource://channel/deploys?project={project}&agent_name=Kai"
                                                 "&agent_token=wrong"),
                        await _refused(stranger, f"resource://channel/nowhere?project={project}&agent_name=Kai"
                                                 f"&agent_token={tokens['Kai']}")]
            return uri, first, heard, json.loads(read[0].text), refusals, before, store_state(server.home)

    uri, first, heard, page, refusals, before, after = run(scenario())
    assert first == [uri] and heard == [uri, uri]  # once per post, and nothing for the other channel
    assert [p["body_md"] for p in page["posts"]] == ["v1 shipped", "v2 shipped"] and page["reader"] == "Kai"
    assert [r["code"] for r in refusals] == ["UNAUTHORIZED", "UNAUTHORIZED", "NOT_FOUND"]
    assert after == before


def test_a_stdio_client_hears_of_a_channel_post_on_its_listen_stream(tmp_path):
    project = fresh_project()

    async def scenario():
        async with stdio_client(str(tmp_path), tools="default,channels") as client:
            tokens = await _team(client, project, "Lu")
            await call(client, "create_channel", project_key=project, agent_name="Lu", channel="ops",
                       agent_token=tokens["Lu"])
            uri = f"resource://channel/ops?project={project}&agent_name=Lu&agent_token={tokens['Lu']}"
            async with listen(client.session, resource_subscriptions=[uri]) as stream:
                await call(client, "post_channel", project_key=project, agent_name="Lu", channel="ops",
                           body_md="restarted", agent_token=tokens["Lu"])
                heard = await asyncio.wait_for(anext(aiter(stream)), 60)
            return uri, heard

    uri, heard = run(scenario())
    assert str(heard.uri) == uri


async def _refused(client: Client, uri: str) -> dict[str, Any]:
    """The error body of a subscription that must be refused."""
    try:
        await client.session.subscribe_resource(uri)
    except Exception as exc:  # noqa: BLE001 - the client raises the protocol error it got
        text = str(exc)
        return json.loads(text[text.index("{"):])
    raise AssertionError(f"subscribing to {uri} did not fail")


def test_a_session_holds_at_most_64_subscriptions(server):
    project = fresh_project()

    async def scenario():
        async with Client(server.url, mode="legacy", timeout=60) as client:
            await _team(client, project, "Gus")
            for limit in range(1, 65):  # 64 distinct URIs of one inbox
                await client.session.subscribe_resource(f"resource://inbox/Gus?project={project}&limit={limit}")
            again = await client.session.subscribe_resource(f"resource://inbox/Gus?project={project}&limit=1")
            return again, await _refused(client, f"resource://inbox/Gus?project={project}&limit=65")

    again, past = run(scenario())
    assert again is not None  # the same URI again holds no second place
    assert past["code"] == "TOO_MANY_SUBSCRIPTIONS" and past["data"] == {"limit": 64, "scope": "session"}


def test_a_stdio_client_hears_of_new_mail_on_its_listen_stream(tmp_path):
    project = fresh_project()

    async def scenario():
        async with stdio_client(str(tmp_path)) as client:
            tokens = await _team(client, project, "Hal")
            uri = f"resource://inbox/Hal?project={project}&agent_token={tokens['Hal']}"
            async with listen(client.session, resource_subscriptions=[uri]) as stream:
                await call(client, "send_message", project_key=project, sender_name="Hal", to=["Hal"], subject="s",
                           body_md="b", sender_token=tokens["Hal"])
                heard = await asyncio.wait_for(anext(aiter(stream)), 60)
            return client.initialize_result, uri, heard

    initialized, uri, heard = run(scenario())
    assert str(heard.uri) == uri
    assert initialized is None or initialized.capabilities.resources.subscribe is True


def test_a_fresh_stdio_session_pauses_its_subscriptions_until_it_proves_its_agent_and_subscribes_again(tmp_path):
    """The same over stdio, where the process is the one session: the witness is a second subscription to Bob's
    inbox (another URI) admitted under the fresh proof. Within one look at the project, notices go out in the
    order the subscriptions were made, so had the paused one been delivered, its notice would precede the
    witness's; the session hears the witness first, then only the thread it subscribed to again."""
    project = fresh_project()
    mine = Notices()

    async def scenario():
        async with stdio_client(str(tmp_path), tools="default,coordination", mode="legacy",
                                message_handler=mine) as client:
            tokens, first, inbox, topic = await _subscribed_pair(client, project)
            started = await call(client, "new_session", project_key=project, agent_name="Ann")
            refused = await _refused(client, topic)  # no proof yet: it stays paused
            await call(client, "fetch_inbox", project_key=project, agent_name="Bob", agent_token=tokens["Bob"])
            witness = f"{inbox}&limit=1"
            await client.session.subscribe_resource(witness)  # Bob proved afresh: this one is delivered
            await call(client, "send_message", project_key=project, sender_name="Bob", to=["Bob"], subject="self",
                       body_md="to Bob's inbox")
            witnessed = await mine.next(1)
            await _resubscribe_and_reply(client, project, tokens["Ann"], first, topic)
            return inbox, topic, witness, started, refused, witnessed, await mine.next(2), list(mine.uris)

    inbox, topic, witness, started, refused, witnessed, heard, everything = run(scenario())
    assert sorted(started["paused_subscriptions"]) == sorted([inbox, topic]) and "subscribe" in started["note"]
    assert refused["code"] == "UNAUTHORIZED"
    assert witnessed == [witness]  # the change to Bob's inbox was notified, not to the paused subscription...
    assert heard == everything == [witness, topic]  # ...which never speaks: only the thread's notice follows


MCP1_SUBSCRIBE = """
import asyncio, json, sys
from mcp import ClientSession
from mcp.client.streamable_http import streamablehttp_client

async def main(url, project):
    heard = asyncio.Event()
    uris = []

    async def on_message(message):
        root = getattr(message, "root", None)
        if getattr(root, "method", "") == "notifications/resources/updated":
            uris.append(str(root.params.uri))
            heard.set()

    async with streamablehttp_client(url) as streams:
        async with ClientSession(streams[0], streams[1], message_handler=on_message) as session:
            init = await session.initialize()
            made = await session.call_tool("register_agent", {"project_key": project, "program": "p", "model": "m",
                                                              "name": "Ivy"})
            uri = f"resource://inbox/Ivy?project={project}"
            await session.subscribe_resource(uri)
            await session.call_tool("send_message", {"project_key": project, "sender_name": "Ivy", "to": ["Ivy"],
                                                     "subject": "s", "body_md": "b"})
            await asyncio.wait_for(heard.wait(), 60)
            print(json.dumps({"subscribe": init.capabilities.resources.subscribe, "uris": uris, "uri": uri,
                              "error": made.isError}))

asyncio.run(main(sys.argv[1], sys.argv[2]))
"""


def test_the_mcp1_client_subscribes_and_hears_of_new_mail(server):
    python = mcp1.ensure()
    project = fresh_project()

    async def setup():
        async with server.client() as client:
            await call(client, "ensure_project", human_key=project)

    run(setup())
    out = subprocess.run([python, "-c", MCP1_SUBSCRIBE, server.url, project], env=child_env(server.home),
                         capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stderr[-3000:]
    answer = json.loads(out.stdout.strip().splitlines()[-1])
    assert answer["subscribe"] is True and answer["error"] is False
    assert answer["uris"] == [answer["uri"]]



async def _subscribed_pair(client: Client, project: str) -> tuple[dict[str, str], str, str, str]:
    """Ann and Bob; Ann's kickoff to herself; the session subscribed to Bob's inbox and the kickoff's thread.

    Returns the tokens, the kickoff's ID and the two URIs.
    """
    tokens = await _team(client, project, "Ann", "Bob")
    first = await call(client, "send_message", project_key=project, sender_name="Ann", to=["Ann"],
                       subject="kickoff", body_md="a")
    payload = first["deliveries"][0]["payload"]
    inbox = f"resource://inbox/Bob?project={project}"
    topic = f"resource://thread/{payload['thread_id']}?project={project}"
    await client.session.subscribe_resource(inbox)
    await client.session.subscribe_resource(topic)
    return tokens, payload["id"], inbox, topic


async def _resubscribe_and_reply(client: Client, project: str, token: str, first: str, topic: str) -> None:
    """Ann proves herself again, subscribes to the thread again, and replies in it."""
    await call(client, "fetch_inbox", project_key=project, agent_name="Ann", agent_token=token)
    await client.session.subscribe_resource(topic)  # proved again: the thread is delivered again
    await call(client, "reply_message", project_key=project, message_id=first, sender_name="Ann",
               body_md="in the thread")


def test_a_fresh_session_pauses_its_subscriptions_until_it_proves_its_agent_and_subscribes_again(server):
    """new_session forgets the proofs the subscriptions were admitted under, so they stop delivering; a witness
    session subscribed to the same inbox shows each change was notified, and the paused session's stream, ordered,
    shows it heard nothing before the subscription it renewed."""
    project = fresh_project()
    mine, witness = Notices(), Notices()

    async def scenario():
        async with Client(server.url, mode="legacy", timeout=60, message_handler=mine) as client, \
                Client(server.url, mode="legacy", timeout=60, message_handler=witness) as other:
            tokens, first, inbox, topic = await _subscribed_pair(client, project)
            await call(other, "fetch_inbox", project_key=project, agent_name="Bob", agent_token=tokens["Bob"])
            await other.session.subscribe_resource(inbox)
            started = await call(client, "new_session", project_key=project, agent_name="Ann")
            refused = await _refused(client, topic)  # no proof yet: it stays paused
            await call(other, "send_message", project_key=project, sender_name="Bob", to=["Bob"], subject="self",
                       body_md="to Bob's inbox")
            witnessed = await witness.next(1)
            await _resubscribe_and_reply(client, project, tokens["Ann"], first, topic)
            return inbox, topic, started, refused, witnessed, await mine.next(1), list(mine.uris)

    inbox, topic, started, refused, witnessed, heard, everything = run(scenario())
    assert sorted(started["paused_subscriptions"]) == sorted([inbox, topic]) and "subscribe" in started["note"]
    assert refused["code"] == "UNAUTHORIZED"
    assert witnessed == [inbox]  # the change to Bob's inbox was notified...
    assert heard == [topic] and everything == [topic]  # ...but not to the paused session, which hears only the thread
