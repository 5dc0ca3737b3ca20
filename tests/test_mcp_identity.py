"""Authority belongs to a registration, not to a name, over MCP against a real `gitmail serve`.

A name can be registered again once its agent is deleted; a token can be
replaced by the operator. Neither hands the new holder what the old one had:
children, session bindings, or the text of a journal it may not read.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid

import pytest

from gitmail import Store
from gitmail.model.records import Agent, profile_path
from gitmail.storage.engine import Change

from .mcp_harness import call, child_env, fail, run

SHARES_SERVER = True  # each test makes a project of its own: the process's one server serves them all

pytestmark = pytest.mark.slow  # a real gitmail serve process


def fresh_project() -> str:
    return f"/work/mcp-identity/{uuid.uuid4().hex[:10]}"


def tip(home: str, project: str) -> str | None:
    return Store(home, background=False).archive(project).tip()


def cli(home: str, *args: str) -> dict:
    """The operator at the shell of the server's machine: another process than the server."""
    proc = subprocess.run([sys.executable, "-m", "gitmail", *args, "--json"], env=child_env(home),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    return json.loads(proc.stdout)


def git_log(home: str, project: str) -> str:
    git_dir = Store(home, background=False).archive(project).git_dir
    return subprocess.run(["git", "--git-dir", git_dir, "log", "--format=%B"], capture_output=True, text=True,
                          check=True).stdout


async def first_agent(client, project: str, name: str) -> str:
    """Create the project and register ``name`` in this session; its token."""
    await call(client, "ensure_project", human_key=project)
    return (await call(client, "register_agent", project_key=project, program="p", model="m",
                       name=name))["registration_token"]


@pytest.fixture
def family(server) -> tuple[str, dict[str, str]]:
    """A fresh project: Parent1 (top-level) with Child1 below it (editor@src), and Peer; Child1 open to mail.

    Returns the project's key and the three tokens.
    """
    project = fresh_project()

    async def build() -> dict[str, str]:
        async with server.client() as client:
            tokens = {"Parent1": await first_agent(client, project, "Parent1")}
            tokens["Peer"] = (await call(client, "register_agent", project_key=project, program="p", model="m",
                                         name="Peer"))["registration_token"]
            child = await call(client, "spawn_agent", project_key=project, agent_name="Parent1", name="Child1",
                               scope=["editor@src"])
            tokens["Child1"] = child["registration_token"]
            await call(client, "set_contact_policy", project_key=project, agent_name="Parent1", acting_as="Child1",
                       policy="open")
            return tokens

    return project, run(build())


def test_a_new_registration_of_a_deleted_parents_name_has_no_hold_on_its_children(server, family):
    project, tokens = family

    async def scenario():
        async with server.client() as peer:
            await call(peer, "send_message", project_key=project, sender_name="Peer", to=["Child1"],
                       subject="private", body_md="the launch code is 0000", sender_token=tokens["Peer"])
        async with server.client() as parent:
            deleted = await call(parent, "hard_delete_agent", project_key=project, agent_name="Parent1",
                                 confirmation="I UNDERSTAND", agent_token=tokens["Parent1"])
        async with server.client() as stranger:
            again = await call(stranger, "register_agent", project_key=project, program="x", model="y",
                               name="Parent1")
            assert again["registration_token"]  # the name is free again: a new registration takes it
            before = tip(server.home, project)
            attempts = {
                "fetch_inbox": await fail(stranger, "fetch_inbox", project_key=project, agent_name="Parent1",
                                          acting_as="Child1", include_bodies=True),
                "send_message": await fail(stranger, "send_message", project_key=project, sender_name="Parent1",
                                           acting_as="Child1", to=["Peer"], subject="as the child", body_md="x"),
                "sleep_agent": await fail(stranger, "sleep_agent", project_key=project, agent_name="Parent1",
                                          target="Child1", until="woken"),
                "update_agent": await fail(stranger, "update_agent", project_key=project, agent_name="Parent1",
                                           target="Child1", scope=["viewer@*"]),
                "wake_agent": await fail(stranger, "wake_agent", project_key=project, agent_name="Parent1",
                                         target="Child1"),
            }
            assert {tool: body["code"] for tool, body in attempts.items()} == dict.fromkeys(attempts, "NOT_ABOVE")
            assert all("launch code" not in json.dumps(body) for body in attempts.values())
            assert tip(server.home, project) == before  # nothing was written
            position = await call(stranger, "agent_position", project_key=project, agent_name="Parent1")
            assert position["children"] == []
        async with server.client() as child:  # the child goes on as itself, with its own token
            inbox = await call(child, "fetch_inbox", project_key=project, agent_name="Child1", include_bodies=True,
                               agent_token=tokens["Child1"])
            assert [m["body_md"] for m in inbox] == ["the launch code is 0000"]
            whois = await call(child, "whois", project_key=project, agent_name="Child1")
            position = await call(child, "agent_position", project_key=project, agent_name="Child1")
        assert deleted["orphaned"] == ["Child1"]
        assert whois["parent"] is None and whois["scopes"] == ["editor@src"]
        assert whois["orphaned_from"]["name"] == "Parent1" and whois["orphaned_from"]["id"] == deleted["id"]
        assert position["ancestors"] == []

    run(scenario())
    log = git_log(server.home, project)
    assert "Child1 now answers to the operator" in log


def test_a_retired_parent_cannot_act_through_its_child_and_keeps_it(server, family):
    project, tokens = family

    async def scenario():
        async with server.client() as parent:
            await call(parent, "retire_agent", project_key=project, agent_name="Parent1", agent_token=tokens["Parent1"])
            before = tip(server.home, project)
            retired = await fail(parent, "journal", project_key=project, agent_name="Parent1", acting_as="Child1",
                                 entry="acting through a retired parent")
            assert retired["code"] == "AGENT_INACTIVE" and retired["data"]["agent"] == "Parent1"
            assert tip(server.home, project) == before
            child = await call(parent, "whois", project_key=project, agent_name="Child1")
            assert child["parent"] == "Parent1"  # retiring is reversible: the child stays below it
            await call(parent, "unretire_agent", project_key=project, agent_name="Parent1")
            entry = await call(parent, "journal", project_key=project, agent_name="Parent1", acting_as="Child1",
                               entry="back at work")
            assert entry["agent"] == "Child1"
            asleep = await call(parent, "sleep_agent", project_key=project, agent_name="Parent1")
            assert asleep["asleep"] is True
            slept = await fail(parent, "journal", project_key=project, agent_name="Parent1", acting_as="Child1",
                               entry="acting through an asleep parent")
            assert slept["code"] == "AGENT_ASLEEP" and slept["data"]["agent"] == "Parent1"

    run(scenario())


def test_a_binding_ends_with_the_token_or_the_registration_that_made_it(server):
    project = fresh_project()

    async def scenario():
        async with server.client() as registered, server.client() as proved, server.client() as other:
            old = await first_agent(registered, project, "Alice")
            await call(other, "register_agent", project_key=project, program="p", model="m", name="Bob")
            await call(proved, "list_contacts", project_key=project, agent_name="Alice", agent_token=old)
            for session in (registered, proved):  # both act as Alice without a token
                await call(session, "fetch_inbox", project_key=project, agent_name="Alice")
                await call(session, "search_messages", project_key=project, query="anything")
            issued = cli(server.home, "agents", "reset-token", project, "Alice")  # the operator, in another process
            new = issued["registration_token"]
            before = tip(server.home, project)
            for session in (registered, proved):
                refused = await fail(session, "fetch_inbox", project_key=project, agent_name="Alice")
                assert refused["code"] == "UNAUTHORIZED" and "new token" in refused["message"], refused
                member = await fail(session, "search_messages", project_key=project, query="anything")
                assert member["code"] == "UNAUTHORIZED", member
                retaken = await fail(session, "register_agent", project_key=project, program="p", model="m",
                                     name="Alice", task_description="still me?")
                assert retaken["code"] == "UNAUTHORIZED", retaken
                stale = await fail(session, "fetch_inbox", project_key=project, agent_name="Alice", agent_token=old)
                assert stale["code"] == "UNAUTHORIZED"
                whois = await call(session, "whois", project_key=project, agent_name="Bob")
                assert "recent_commits" not in whois  # no longer a member of the project
            assert tip(server.home, project) == before
            await call(proved, "fetch_inbox", project_key=project, agent_name="Alice", agent_token=new)
            await call(proved, "fetch_inbox", project_key=project, agent_name="Alice")  # bound again, to the new one
            # Alice deleted, and the name registered again: no session bound to her acts as the newcomer.
            await call(proved, "hard_delete_agent", project_key=project, agent_name="Alice",
                       confirmation="I UNDERSTAND")
            await call(other, "register_agent", project_key=project, program="p", model="m", name="Alice")
            for session in (registered, proved):
                gone = await fail(session, "fetch_inbox", project_key=project, agent_name="Alice")
                assert gone["code"] == "UNAUTHORIZED", gone
            await call(other, "fetch_inbox", project_key=project, agent_name="Alice")

    run(scenario())


def test_whois_shows_journal_text_only_to_whom_read_journal_shows_it(server, family):
    project, tokens = family  # Parent1 above Child1; Peer beside them
    secret = "the vendor contract ends in March"

    async def scenario():
        async with server.client() as parent:
            await call(parent, "journal", project_key=project, agent_name="Parent1", acting_as="Child1", entry=secret,
                       agent_token=tokens["Parent1"])
        seen = {}
        async with server.client() as peer:
            refused = await fail(peer, "read_journal", project_key=project, agent_name="Peer",
                                 acting_as="Child1", agent_token=tokens["Peer"])
            assert refused["code"] == "NOT_ABOVE"
            seen["Peer"] = await call(peer, "whois", project_key=project, agent_name="Child1")
        for reader in ("Child1", "Parent1"):
            async with server.client() as session:
                await call(session, "list_contacts", project_key=project, agent_name=reader,
                           agent_token=tokens[reader])
                seen[reader] = await call(session, "whois", project_key=project, agent_name="Child1")
        return seen

    seen = run(scenario())
    summaries = {who: [c["summary"] for c in view["recent_commits"]] for who, view in seen.items()}
    assert not any(secret in s for s in summaries["Peer"]), summaries["Peer"]
    assert any("journal" in s for s in summaries["Peer"])  # the commit is listed, its text is not
    for reader in ("Child1", "Parent1"):  # the journal's owner, and the agent above it, read the journal anyway
        assert any(secret in s for s in summaries[reader]), (reader, summaries[reader])


def test_no_token_proves_a_human_profile_even_one_that_holds_a_hash(server):
    project = fresh_project()

    async def scenario():
        async with server.client() as client:
            bob_token = await first_agent(client, project, "Bob")
        store = Store(server.home, background=False)
        archive = store.archive(project)
        # An Overseer profile carrying Bob's token hash, as a hostile remote could have brought in.
        profile = archive.snapshot().load(profile_path("Bob"), Agent)
        overseer = Agent(id=store.clock.new_id(), name="Overseer", program="human", model="overseer",
                         inception_ts=store.clock.now_ts(), hlc=store.clock.tick(), human=True,
                         token_hash=profile.token_hash)
        archive.transact(lambda snap: Change("an overseer with a token").put_record(overseer))
        before = archive.tip()
        async with server.client() as client:
            sent = await fail(client, "send_message", project_key=project, sender_name="Overseer", to=["Bob"],
                              subject="as the human", body_md="x", sender_token=bob_token)
            registered = await fail(client, "register_agent", project_key=project, program="p", model="m",
                                    name="Overseer", agent_token=bob_token)
        assert sent["code"] == "UNAUTHORIZED" and registered["code"] in ("UNAUTHORIZED", "INVALID_ARGUMENT")
        assert archive.tip() == before

    run(scenario())


def test_acting_as_reaches_only_down_and_names_are_taken_without_regard_to_case(server, family):
    project, tokens = family

    async def scenario():
        async with server.client() as child:
            before = tip(server.home, project)
            up = await fail(child, "send_message", project_key=project, sender_name="Child1", acting_as="Parent1",
                            to=["Peer"], subject="as my parent", body_md="x", sender_token=tokens["Child1"])
            assert up["code"] == "NOT_ABOVE"
            up_read = await fail(child, "fetch_inbox", project_key=project, agent_name="Child1",
                                 acting_as="parent1", agent_token=tokens["Child1"])
            assert up_read["code"] == "NOT_ABOVE"
            assert tip(server.home, project) == before
        async with server.client() as parent:
            await call(parent, "list_contacts", project_key=project, agent_name="Parent1",
                       agent_token=tokens["Parent1"])
            spawned = await fail(parent, "spawn_agent", project_key=project, agent_name="Parent1", name="CHILD1",
                                 scope=["viewer@*"])
            created = await fail(parent, "create_agent_identity", project_key=project, program="p", model="m",
                                 name_hint="peer")
            registered = await fail(parent, "register_agent", project_key=project, program="p", model="m",
                                    name="pEeR")
            assert (spawned["code"], created["code"], registered["code"]) == ("ALREADY_EXISTS", "ALREADY_EXISTS",
                                                                              "UNAUTHORIZED")
            assert tip(server.home, project) == before

    run(scenario())
