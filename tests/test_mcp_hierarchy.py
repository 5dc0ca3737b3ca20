"""The agent hierarchy over MCP against a real `gitmail serve`: spawn, scopes, acting_as, sleep/wake authority, keys."""

from __future__ import annotations

import subprocess
import uuid

import pytest

from gitmail import Store

from .mcp_harness import call, fail, run

SHARES_SERVER = True  # each test makes a project of its own: the process's one server serves them all

pytestmark = pytest.mark.slow  # a real gitmail serve process


def fresh_project() -> str:
    return f"/work/mcp-hierarchy/{uuid.uuid4().hex[:10]}"


class Archive:
    """The server's archive of one project, read as the operator would (tip, last commit message)."""

    def __init__(self, home: str, project: str):
        self.home, self.project = home, project

    def tip(self) -> str | None:
        return Store(self.home, background=False).archive(self.project).tip()

    def last_message(self) -> str:
        git_dir = Store(self.home, background=False).archive(self.project).git_dir
        return subprocess.run(["git", "--git-dir", git_dir, "log", "-1", "--format=%B"],
                              capture_output=True, text=True, check=True).stdout


async def lead_and_peer(client, project: str) -> dict[str, str]:
    """Project with two top-level agents, Lead and Peer; returns their tokens."""
    await call(client, "ensure_project", human_key=project)
    tokens = {}
    for name in ("Lead", "Peer"):
        out = await call(client, "register_agent", project_key=project, program="p", model="m", name=name)
        tokens[name] = out["registration_token"]
        assert out["parent"] is None and out["scopes"] == ["manager@*"]  # a top-level agent holds its project
        await call(client, "set_contact_policy", project_key=project, agent_name=name, policy="open")
    return tokens


async def lead_peer_and_api_lead(client, project: str) -> dict[str, str]:
    """:func:`lead_and_peer`, and ApiLead below Lead, a manager of src/api only (not of the whole project)."""
    tokens = await lead_and_peer(client, project)
    await call(client, "spawn_agent", project_key=project, agent_name="Lead", name="ApiLead",
               scope=["manager@src/api"])
    return tokens


def test_scopes_refuse_what_they_do_not_grant_and_acting_as_narrows_a_call(server):
    project = fresh_project()
    archive = Archive(server.home, project)

    async def scenario():
        async with server.client() as lead:
            tokens = await lead_and_peer(lead, project)
            helper = await call(lead, "spawn_agent", project_key=project, agent_name="Lead", name="Helper",
                                scope=["editor@src/api", "viewer@*"], lifecycle="ephemeral", vendor="acme",
                                purpose="api fixes", risk_tier="low", environment="ci", capabilities=["api"],
                                reason="split the api work off")
            assert helper["parent"] == "Lead" and helper["scopes"] == ["editor@src/api", "viewer@*"]
            assert helper["lifecycle"] == "ephemeral" and helper["expires_at"]  # ephemeral: it ends by itself
            assert (helper["vendor"], helper["risk_tier"], helper["environment"]) == ("acme", "low", "ci")
            assert "Reason: split the api work off" in archive.last_message()
            watcher = await call(lead, "spawn_agent", project_key=project, agent_name="Lead", name="Watcher",
                                 scope=["viewer@*"])
        async with server.client() as helper_session, server.client() as watcher_session:
            # Its own token: the helper edits inside its location only.
            mine = await call(helper_session, "file_reservation_paths", project_key=project, agent_name="Helper",
                              paths=["src/api/users.py"], agent_token=helper["registration_token"])
            assert [g["path_pattern"] for g in mine["granted"]] == ["src/api/users.py"]
            before = archive.tip()
            outside = await fail(helper_session, "file_reservation_paths", project_key=project,
                                 agent_name="Helper", paths=["src/api/x.py", "docs/"])
            assert outside["code"] == "SCOPE_DENIED" and outside["data"]["paths"] == ["docs"]
            assert "editor" in outside["message"] and "docs" in outside["message"]
            assert archive.tip() == before  # refused whole: nothing granted, nothing written
            # Not a manager: it may not spawn.
            denied = await fail(helper_session, "spawn_agent", project_key=project, agent_name="Helper",
                                scope=["viewer@*"])
            assert denied["code"] == "SCOPE_DENIED" and "manager" in denied["message"]
            # A viewer reserves nothing, writes no journal and publishes no card; it still mails.
            token = watcher["registration_token"]
            for tool, extra in (("file_reservation_paths", {"paths": ["README.md"]}),
                                ("journal", {"entry": "noted"}),
                                ("publish_capabilities", {"capabilities": ["watch"]})):
                refused = await fail(watcher_session, tool, project_key=project, agent_name="Watcher",
                                     agent_token=token, **extra)
                assert refused["code"] == "SCOPE_DENIED", (tool, refused)
            assert archive.tip() == before
            await call(watcher_session, "send_message", project_key=project, sender_name="Watcher", to=["Lead"],
                       subject="seen", body_md="all quiet", sender_token=token)
        async with server.client() as lead, server.client() as peer:
            await call(lead, "register_agent", project_key=project, program="p", model="m", name="Lead",
                       agent_token=tokens["Lead"])
            # Lead may reserve docs/ itself, but acting as Helper the same call has Helper's narrower scopes.
            before = archive.tip()
            narrowed = await fail(lead, "file_reservation_paths", project_key=project, agent_name="Lead",
                                  acting_as="Helper", paths=["docs/"])
            assert narrowed["code"] == "SCOPE_DENIED" and narrowed["data"]["agent"] == "Helper"
            assert archive.tip() == before
            as_helper = await call(lead, "file_reservation_paths", project_key=project, agent_name="Lead",
                                   acting_as="helper", paths=["src/api/orders.py"])
            assert as_helper["granted"][0]["agent"] == "Helper"
            listed = await call(lead, "list_file_reservations", project_key=project, agent_name="Helper")
            assert sorted(r["path_pattern"] for r in listed["file_reservations"]) == ["src/api/orders.py",
                                                                                      "src/api/users.py"]
            sent = await call(lead, "send_message", project_key=project, sender_name="Lead", acting_as="Helper",
                              to=["Peer"], subject="from the helper", body_md="hi")
            assert sent["deliveries"][0]["payload"]["from"] == "Helper"
            # Nobody else's descendant: Peer proves itself, but is not above Helper.
            before = archive.tip()
            stranger = await fail(peer, "file_reservation_paths", project_key=project, agent_name="Peer",
                                  acting_as="Helper", paths=["src/api/a.py"], agent_token=tokens["Peer"])
            assert stranger["code"] == "NOT_ABOVE" and stranger["data"]["above"] == ["Lead"]
            # acting_as never replaces the proof of the agent named.
            unproven = await fail(peer, "file_reservation_paths", project_key=project, agent_name="Lead",
                                  acting_as="Helper", paths=["src/api/a.py"])
            assert unproven["code"] == "UNAUTHORIZED"
            assert archive.tip() == before
            # A grandparent acts as a grandchild; a child is spawned only within its parent's scopes.
            mid = await call(lead, "spawn_agent", project_key=project, agent_name="Lead", name="Mid",
                             scope=["manager@src"])
            wider = await fail(lead, "spawn_agent", project_key=project, agent_name="Lead", acting_as="Mid",
                               scope=["editor@docs"])
            assert wider["code"] == "SCOPE_DENIED" and wider["data"]["refused"] == ["editor@docs"]
            leaf = await call(lead, "spawn_agent", project_key=project, agent_name="Lead", acting_as="Mid",
                              name="Leaf", scope=["editor@src/ui"])
            assert leaf["parent"] == "Mid" and mid["parent"] == "Lead"
            deep = await call(lead, "journal", project_key=project, agent_name="Lead", acting_as="Leaf",
                              entry="started on the ui")
            assert deep["agent"] == "Leaf"
            position = await call(lead, "agent_position", project_key=project, agent_name="Leaf")
            assert [a["name"] for a in position["ancestors"]] == ["Mid", "Lead"]

    run(scenario())


def test_sleep_wake_and_update_follow_the_hierarchy(server):
    project = fresh_project()
    archive = Archive(server.home, project)

    async def scenario():
        async with server.client() as lead:
            tokens = await lead_and_peer(lead, project)
            helper = await call(lead, "spawn_agent", project_key=project, agent_name="Lead", name="Helper",
                                scope=["editor@*"])
        async with server.client() as helper_session, server.client() as peer, server.client() as lead:
            await call(helper_session, "whois", project_key=project, agent_name="Helper")
            h_token, p_token, l_token = helper["registration_token"], tokens["Peer"], tokens["Lead"]
            # Authority: only the agent itself or one above it.
            before = archive.tip()
            for who, token, target in (("Peer", p_token, "Helper"), ("Helper", h_token, "Lead")):
                refused = await fail(peer if who == "Peer" else helper_session, "sleep_agent", project_key=project,
                                     agent_name=who, target=target, agent_token=token)
                assert refused["code"] == "NOT_ABOVE", refused
            update = await fail(peer, "update_agent", project_key=project, agent_name="Peer", target="Helper",
                                purpose="hijack", agent_token=p_token)
            assert update["code"] == "NOT_ABOVE"
            widen = await fail(helper_session, "update_agent", project_key=project, agent_name="Helper",
                               scope=["manager@*"], agent_token=h_token)
            assert widen["code"] == "NOT_ABOVE" and "own" in widen["message"]
            assert archive.tip() == before
            # until=woken: the agent itself may not end it; the agent above it may.
            slept = await call(helper_session, "sleep_agent", project_key=project, agent_name="Helper",
                               until="woken", agent_token=h_token, reason="waiting for the schema decision")
            assert slept == {"agent": "Helper", "asleep": True, "until": "woken", "changed": True}
            assert "Reason: waiting for the schema decision" in archive.last_message()
            before = archive.tip()
            self_wake = await fail(helper_session, "wake_agent", project_key=project, agent_name="Helper",
                                   agent_token=h_token)
            assert self_wake["code"] == "WAKE_REFUSED" and "above it" in self_wake["message"]
            stranger = await fail(peer, "wake_agent", project_key=project, agent_name="Peer", target="Helper",
                                  agent_token=p_token)
            assert stranger["code"] == "NOT_ABOVE"
            assert archive.tip() == before
            woken = await call(lead, "wake_agent", project_key=project, agent_name="Lead", target="Helper",
                               agent_token=l_token)
            assert woken["asleep"] is False and woken["changed"] is True
            # until=reply: a reply to one of its messages wakes it; so may the agent itself.
            asked = await call(helper_session, "send_message", project_key=project, sender_name="Helper",
                               to=["Lead"], subject="which schema?", body_md="v1 or v2", sender_token=h_token)
            await call(helper_session, "sleep_agent", project_key=project, agent_name="Helper", agent_token=h_token)
            asleep = await fail(helper_session, "journal", project_key=project, agent_name="Helper", entry="x",
                                agent_token=h_token)
            assert asleep["code"] == "AGENT_ASLEEP" and asleep["data"]["until"] == "reply"
            message_id = asked["deliveries"][0]["payload"]["id"]
            await call(lead, "reply_message", project_key=project, message_id=message_id, sender_name="Lead",
                       body_md="v2", sender_token=l_token)
            assert "woke Helper" in archive.last_message()
            profile = await call(peer, "whois", project_key=project, agent_name="Helper")
            assert profile["asleep"] is False
            await call(helper_session, "sleep_agent", project_key=project, agent_name="Helper", agent_token=h_token)
            ended = await call(helper_session, "wake_agent", project_key=project, agent_name="Helper",
                               agent_token=h_token)
            assert ended["changed"] is True
            # The agent above narrows it; the narrower scope holds at once.
            narrowed = await call(lead, "update_agent", project_key=project, agent_name="Lead", target="Helper",
                                  scope=["viewer@*"], purpose="read only now", agent_token=l_token)
            assert narrowed["scopes"] == ["viewer@*"] and narrowed["changed"] is True
            refused = await fail(helper_session, "file_reservation_paths", project_key=project,
                                 agent_name="Helper", paths=["src/a.py"], agent_token=h_token)
            assert refused["code"] == "SCOPE_DENIED"

    run(scenario())


def test_identity_writes_are_idempotent(server):
    project = fresh_project()
    archive = Archive(server.home, project)

    async def scenario():
        async with server.client() as lead:
            await lead_and_peer(lead, project)
            key = str(uuid.uuid4())
            first = await call(lead, "spawn_agent", project_key=project, agent_name="Lead", scope=["viewer@*"],
                               idempotency_key=key, purpose="watch the build")
            assert first["registration_token"]
            tip = archive.tip()
            again = await call(lead, "spawn_agent", project_key=project, agent_name="Lead", scope=["viewer@*"],
                               idempotency_key=key, purpose="watch the build")
            assert again["name"] == first["name"] and again["replayed"] is True
            assert "registration_token" not in again and "acting_as" in again["note"]
            assert archive.tip() == tip  # nothing written twice
            other = await fail(lead, "spawn_agent", project_key=project, agent_name="Lead", scope=["viewer@*"],
                               idempotency_key=key, purpose="something else")
            assert other["code"] == "IDEMPOTENCY_CONFLICT" and other["data"]["target"] == first["name"]
            assert archive.tip() == tip
            child = first["name"]
            sleep_key = str(uuid.uuid4())
            slept = await call(lead, "sleep_agent", project_key=project, agent_name="Lead", target=child,
                               until="woken", idempotency_key=sleep_key)
            assert slept["changed"] is True
            tip = archive.tip()
            replay = await call(lead, "sleep_agent", project_key=project, agent_name="Lead", target=child,
                                until="woken", idempotency_key=sleep_key)
            assert replay == {**slept, "replayed": True} and archive.tip() == tip
            update_key = str(uuid.uuid4())
            updated = await call(lead, "update_agent", project_key=project, agent_name="Lead", target=child,
                                 environment="ci", idempotency_key=update_key, reason="moved to ci")
            assert updated["environment"] == "ci" and "Reason: moved to ci" in archive.last_message()
            tip = archive.tip()
            replay = await call(lead, "update_agent", project_key=project, agent_name="Lead", target=child,
                                environment="ci", idempotency_key=update_key, reason="moved to ci")
            assert replay["replayed"] is True and archive.tip() == tip
            register_key = str(uuid.uuid4())
            new = await call(lead, "register_agent", project_key=project, program="p", model="m", name="Late",
                             idempotency_key=register_key, reason="joins for the release")
            assert new["registration_token"] and "Reason: joins for the release" in archive.last_message()
            tip = archive.tip()
            retry = await call(lead, "register_agent", project_key=project, program="p", model="m", name="Late",
                               idempotency_key=register_key, reason="joins for the release")
            assert retry["id"] == new["id"] and "registration_token" not in retry and archive.tip() == tip

    run(scenario())


def test_a_headless_agent_proves_itself_with_its_key_until_it_is_retired(server):
    from gitmail import Mail

    project = fresh_project()

    async def scenario():
        async with server.client() as lead:
            await lead_and_peer(lead, project)
            bot = await call(lead, "spawn_agent", project_key=project, agent_name="Lead", name="Bot",
                             scope=["editor@*"], bootstrap_key=True, refresh_window_s=86_400)
            assert bot["bootstrap_key"].startswith("gmk_") and bot["key_expires_at"]
        async with server.client() as headless:  # a new session, with nothing but the key
            sent = await call(headless, "send_message", project_key=project, sender_name="Bot", to=["Peer"],
                              subject="nightly", body_md="from a headless agent", sender_token=bot["bootstrap_key"])
            assert sent["deliveries"][0]["payload"]["from"] == "Bot"
        operator = Mail(Store(server.home, background=False))  # the operator, beside the server
        operator.retire_agent(project, "Bot")
        operator.unretire_agent(project, "Bot")
        async with server.client() as later:
            refused = await fail(later, "send_message", project_key=project, sender_name="Bot", to=["Peer"],
                                 subject="again", body_md="x", sender_token=bot["bootstrap_key"])
            assert refused["code"] == "UNAUTHORIZED"
            assert await call(later, "send_message", project_key=project, sender_name="Bot", to=["Peer"],
                              subject="token", body_md="x", sender_token=bot["registration_token"])

    run(scenario())
