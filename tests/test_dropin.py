"""The calls an agent prompted with the agent-mail tool documentation makes, as it makes them, on a real server."""

from __future__ import annotations

import time
import uuid

import pytest

from .mcp_harness import ServerProcess, call, fail, read_json, run


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """A real ``gitmail serve`` on the default tool profile, as agents prompted for agent-mail meet it."""
    proc = ServerProcess(str(tmp_path_factory.mktemp("home")),
                         env={"GITMAIL_GUARD_ROOTS": str(tmp_path_factory.getbasetemp())})
    yield proc
    proc.stop()


def fresh() -> str:
    return f"/work/dropin/{uuid.uuid4().hex[:10]}"


def test_a_session_starts_with_reservations_and_a_cycle_releases_what_it_took(server):
    project = fresh()

    async def scenario():
        async with server.client() as client:
            started = await call(client, "macro_start_session", human_key=project, program="codex-cli",
                                 model="gpt5", task_description="auth", file_reservation_paths=["src/auth/*.py"],
                                 file_reservation_reason="auth refactor")
            name = started["agent"]["name"]
            cycle = await call(client, "macro_file_reservation_cycle", project_key=project, agent_name=name,
                               paths=["docs/*.md"], ttl_seconds=120, auto_release=True)
            held = await call(client, "list_file_reservations", project_key=project)
            return started, cycle, held

    started, cycle, held = run(scenario())
    assert [g["path_pattern"] for g in started["file_reservations"]["granted"]] == ["src/auth/*.py"]
    assert started["file_reservations"]["granted"][0]["reason"] == "auth refactor"
    assert [g["path_pattern"] for g in cycle["file_reservations"]["granted"]] == ["docs/*.md"]
    assert cycle["released"]["released"] == 1
    assert [r["path_pattern"] for r in held["file_reservations"]] == ["src/auth/*.py"]


def test_window_identities_keep_a_name_across_relaunches(server):
    project, window = fresh(), str(uuid.uuid4())

    async def scenario():
        async with server.client() as first:
            started = await call(first, "macro_start_session", human_key=project, program="p", model="m",
                                 window_uuid=window)
            name, token = started["agent"]["name"], started["agent"]["registration_token"]
        async with server.client() as relaunched:  # the same window, a new process: the name comes back
            again = await call(relaunched, "register_agent", project_key=project, program="p", model="m",
                               window_uuid=window, registration_token=token)
            listed = await call(relaunched, "list_window_identities", project_key=project)
            renamed = await call(relaunched, "rename_window", project_key=project, window_uuid=window,
                                 new_display_name="QuietOwl")
            expired = await call(relaunched, "expire_window", project_key=project, window_uuid=window)
            after = await call(relaunched, "list_window_identities", project_key=project)
        async with server.client() as impostor:  # the window picks the name, the token still decides who acts
            refused = await fail(impostor, "register_agent", project_key=project, program="x", model="y",
                                 name=name)
        return name, again, listed, renamed, expired, after, refused

    name, again, listed, renamed, expired, after, refused = run(scenario())
    assert again["name"] == name
    (identity,) = listed["identities"]
    assert identity["window_uuid"] == window and identity["display_name"] == name
    assert set(identity) >= {"id", "window_uuid", "display_name", "created_ts", "last_active_ts", "expires_ts"}
    assert renamed["display_name"] == "QuietOwl"
    assert expired["window_uuid"] == window and expired["expired"] is True and expired["expired_at"]
    assert after["identities"] == []
    assert refused["code"] == "UNAUTHORIZED"
    assert "registration_token" in refused["message"] and "gitmail agents reset-token" in refused["message"]


def test_summaries_say_their_mode_and_speak_toon(server, tmp_path):
    project = str(tmp_path / "repo")
    import subprocess

    subprocess.run(["git", "init", "-q", project], check=True)

    async def scenario():
        async with server.client() as client:
            await call(client, "ensure_project", human_key=project)
            await call(client, "register_agent", project_key=project, program="p", model="m", name="BlueLake")
            sent = await call(client, "send_message", project_key=project, sender_name="BlueLake", to=["BlueLake"],
                              subject="Plan", body_md="- TODO: write the plan")
            thread = sent["deliveries"][0]["payload"]["thread_id"]
            single = await call(client, "summarize_thread", project_key=project, thread_id=thread, llm_mode=True,
                                llm_model="gpt-5")
            recent = await client.call_tool("summarize_recent", {"project_key": project, "format": "toon",
                                                                 "llm_mode": True})
            stored = await client.call_tool("fetch_summary", {"project_key": project, "format": "toon"})
            as_json = await call(client, "fetch_summary", project_key=project, format="json")
            guard = await client.call_tool("install_precommit_guard", {"project_key": project,
                                                                       "code_repo_path": project, "format": "toon"})
            removed = await call(client, "uninstall_precommit_guard", code_repo_path=project, format="json")
            bad = await fail(client, "fetch_summary", project_key=project, format="yaml")
            return single, recent, stored, as_json, guard, removed, bad

    single, recent, stored, as_json, guard, removed, bad = run(scenario())
    assert single["mode"] == "extractive" and "no language model" in single["note"]
    assert set(single["summary"]) >= {"participants", "key_points", "action_items"}
    text = recent.content[0].text
    assert "mode: extractive" in text and not text.lstrip().startswith("{")  # TOON, not JSON
    assert stored.content[0].text.startswith("[1]") and as_json[0]["message_count"] == 1
    assert "hook: " in guard.content[0].text
    assert removed["removed"] is True
    assert bad["code"] == "INVALID_ARGUMENT" and "toon" in bad["message"]


def test_sending_as_the_seed_allows(server):
    project = fresh()

    async def scenario():
        async with server.client() as client:
            await call(client, "ensure_project", human_key=project)
            for name in ("BlueLake", "GreenCastle"):
                await call(client, "register_agent", project_key=project, program="p", model="m", name=name)
                await call(client, "set_contact_policy", project_key=project, agent_name=name, policy="open")
            cc_only = await call(client, "send_message", project_key=project, sender_name="BlueLake",
                                 cc=["GreenCastle"], subject="FYI", body_md="cc only")
            labelled = await call(client, "send_message", project_key=project, sender_name="BlueLake",
                                  to=["GreenCastle"], subject="Blocker", body_md="b", importance="blocker")
            urgent = await call(client, "send_message", project_key=project, sender_name="BlueLake",
                                to=["GreenCastle"], subject="Now", body_md="b", importance="URGENT")
            inbox = await call(client, "fetch_inbox", project_key=project, agent_name="GreenCastle")
            urgent_only = await call(client, "fetch_inbox", project_key=project, agent_name="GreenCastle",
                                     urgent_only=True)
            nobody = await fail(client, "send_message", project_key=project, sender_name="BlueLake",
                                subject="s", body_md="b")
            return cc_only, labelled, urgent, inbox, urgent_only, nobody

    cc_only, labelled, urgent, inbox, urgent_only, nobody = run(scenario())
    assert cc_only["count"] == 1 and cc_only["deliveries"][0]["payload"]["cc"] == ["GreenCastle"]
    assert labelled["deliveries"][0]["payload"]["importance"] == "blocker"
    assert urgent["deliveries"][0]["payload"]["importance"] == "urgent"
    assert {m["subject"]: m["importance"] for m in inbox}["Blocker"] == "blocker"
    assert [m["subject"] for m in urgent_only] == ["Now"]
    assert nobody["code"] == "INVALID_ARGUMENT"


def test_reads_take_the_seeds_forms(server):
    project = fresh()

    async def setup():
        async with server.client() as client:
            await call(client, "ensure_project", human_key=project)
            for name in ("BlueLake", "GreenCastle"):
                await call(client, "register_agent", project_key=project, program="p", model="m", name=name)

    async def reading():
        async with server.client() as client:
            blue = await call(client, "register_agent", project_key=project, program="p", model="m", name="Viewer")
            await call(client, "set_contact_policy", project_key=project, agent_name="Viewer", policy="open")
            sent = await call(client, "send_message", project_key=project, sender_name="Viewer", to=["Viewer"],
                              subject="tagged", body_md="b", topic="release")
            created = sent["deliveries"][0]["payload"]["created_ts"]
            # the viewer of fetch_topic is the session's one agent
            unread = await call(client, "fetch_topic", project_key=project, topic_name="release", unread_only=True)
            by_epoch = await call(client, "fetch_inbox", project_key=project, agent_name="Viewer",
                                  since_ts=time.time() - 3600)
            naive = await call(client, "fetch_inbox", project_key=project, agent_name="Viewer",
                               since_ts=created[:19])  # no zone: UTC
            later = await call(client, "fetch_inbox", project_key=project, agent_name="Viewer",
                               since_ts=time.time() + 3600)
            listed = await call(client, "list_agents", project_key=project)
            resource = await read_json(client, f"resource://agents/{project}")
            reserved = await call(client, "file_reservation_paths", project_key=project, agent_name="Viewer",
                                  paths=["a.py"], ttl_seconds=60)
            renewed = await call(client, "renew_file_reservations", project_key=project, agent_name="Viewer",
                                 extend_seconds=10)
            return blue, unread, by_epoch, naive, later, listed, resource, reserved, renewed

    run(setup())
    blue, unread, by_epoch, naive, later, listed, resource, reserved, renewed = run(reading())
    assert [m["subject"] for m in unread] == ["tagged"]
    assert [m["subject"] for m in by_epoch] == ["tagged"] and [m["subject"] for m in naive] == ["tagged"]
    assert later == []
    assert [a["name"] for a in listed["agents"]] == ["BlueLake", "GreenCastle", "Viewer"]
    assert listed == resource
    assert renewed["extend_seconds"] == 60 and "raised" in renewed["note"] and renewed["renewed"] == 1
    assert blue["name"] == "Viewer" and reserved["granted"]


def test_updates_change_only_the_fields_given(server):
    project = fresh()

    async def scenario():
        async with server.client() as client:
            await call(client, "ensure_project", human_key=project)
            await call(client, "register_agent", project_key=project, program="claude-code", model="opus",
                       name="BlueLake", task_description="keep me")
            sent = await call(client, "send_message", project_key=project, sender_name="BlueLake", to=["BlueLake"],
                              subject="t", body_md="b")
            await call(client, "macro_prepare_thread", project_key=project,
                       thread_id=sent["deliveries"][0]["payload"]["thread_id"], program="claude-code", model="opus",
                       agent_name="BlueLake")
            return await call(client, "whois", project_key=project, agent_name="BlueLake")

    who = run(scenario())
    assert who["task_description"] == "keep me" and who["program"] == "claude-code"
