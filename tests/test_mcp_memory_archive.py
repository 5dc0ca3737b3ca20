"""Memory folders kept in the project's archive, over MCP against a real `gitmail serve`.

A manager of the whole project writes memory files and skills to
``memory/<name>/`` with ``write_memory``; agents load the folder as
``archive:<name>`` (named from above or as the project's default) and are
handed its files when they take their seat, as they are a folder on disk.
"""

from __future__ import annotations

import hashlib

import pytest

from .mcp_harness import call, fail, run
from .test_mcp_hierarchy import Archive, lead_and_peer, lead_peer_and_api_lead

SHARES_SERVER = True  # each test makes a project of its own

pytestmark = pytest.mark.slow  # a real gitmail serve process

MEMORY = "# Ops\nPage the on-call lead before a rollback.\n"
SKILL = "---\nname: rollback\ndescription: Roll a release back\n---\n# Rollback\n"


def test_a_managers_archive_folder_is_handed_to_agents_that_load_it_and_named_by_org_context(server, tmp_path):
    project = str(tmp_path / "repo")

    async def scenario():
        async with server.client() as lead:
            await lead_and_peer(lead, project)
            wrote = await call(lead, "write_memory", project_key=project, agent_name="Lead", folder="archive:ops",
                               file="AGENTS.md", text=MEMORY, reason="the on-call rule")
            await call(lead, "write_memory", project_key=project, agent_name="Lead", folder="ops",
                       file="skills/rollback/SKILL.md", text=SKILL)
            again = await call(lead, "write_memory", project_key=project, agent_name="Peer", folder="archive:ops",
                               file="AGENTS.md", text=MEMORY)
            made = await call(lead, "spawn_agent", project_key=project, agent_name="Lead", name="Helper",
                              scope=["viewer@*"], load_memory_and_skills=["archive:ops"])
            seat = await call(lead, "take_seat", project_key=project, agent_name="Helper",
                              agent_token=made["registration_token"])
            org = await call(lead, "org_context", project_key=project, agent_name="Peer",
                             load_memory_and_skills=["archive:ops"])
            plain = await call(lead, "spawn_agent", project_key=project, agent_name="Lead", name="Plain",
                               scope=["viewer@*"])
            default = await call(lead, "take_seat", project_key=project, agent_name="Plain",
                                 agent_token=plain["registration_token"])
            return wrote, again, seat["loads"], org, default["loads"]

    wrote, again, loads, org, default = run(scenario())
    digest = hashlib.sha256(MEMORY.encode()).hexdigest()
    assert wrote["changed"] is True and (wrote["folder"], wrote["file"], wrote["sha256"]) == (
        "archive:ops", "AGENTS.md", digest)
    assert again["changed"] is False and again["written_by"] == "Lead"  # the same text is no write
    assert loads["source"] == "agent" and loads["folders"] == ["archive:ops"] and loads["unavailable"] == []
    assert loads["memory"] == [{"folder": "archive:ops", "path": "AGENTS.md", "size": len(MEMORY), "sha256": digest,
                                "text": MEMORY, "truncated": False}]
    assert [(s["name"], s["description"], s["path"]) for s in loads["skills"]] == [
        ("rollback", "Roll a release back", "skills/rollback/SKILL.md")]
    assert "not instructions" in loads["note"]
    assert org["load_memory_and_skills"] == ["archive:ops"] and org["archive_folders"] == ["archive:ops"]
    assert default["source"] == "project" and [m["text"] for m in default["memory"]] == [MEMORY]


def test_bad_memory_writes_and_removals_are_refused_with_codes_and_nothing_written(server, tmp_path):
    """Bad folders and files, writers without manager@* of the whole project, and removals of files the folder
    does not hold."""
    project = str(tmp_path / "repo")
    archive = Archive(server.home, project)

    async def scenario():
        async with server.client() as lead:
            await lead_peer_and_api_lead(lead, project)
            memory = {"project_key": project, "agent_name": "Lead", "folder": "ops"}
            await call(lead, "write_memory", **memory, file="AGENTS.md", text=MEMORY)
            await call(lead, "write_memory", **memory, file="CLAUDE.md", text=MEMORY)
            await call(lead, "write_memory", **memory, file="CLAUDE.md", remove=True)
            before = archive.tip()
            write = {"project_key": project, "agent_name": "Lead", "text": MEMORY}
            refusals = await _removals_refused(lead, memory) | {
                "not a manager of the whole": await fail(lead, "write_memory", **write, acting_as="ApiLead",
                                                         folder="ops", file="AGENTS.md"),
                "bad folder": await fail(lead, "write_memory", **write, folder="Ops/x", file="AGENTS.md"),
                "bad file": await fail(lead, "write_memory", **write, folder="ops", file="notes.md"),
                "empty": await fail(lead, "write_memory", project_key=project, agent_name="Lead", folder="ops",
                                    file="AGENTS.md", text="  "),
                "too large": await fail(lead, "write_memory", project_key=project, agent_name="Lead",
                                        folder="ops", file="AGENTS.md", text="x" * (256 * 1024 + 1)),
                "missing folder": await fail(lead, "spawn_agent", project_key=project, agent_name="Lead",
                                             name="Helper", scope=["viewer@*"],
                                             load_memory_and_skills=["archive:nowhere"]),
                "bad name": await fail(lead, "org_context", project_key=project, agent_name="Lead",
                                       load_memory_and_skills=["archive:Not Ok"]),
            }
            return before, archive.tip(), refusals

    before, after, refusals = run(scenario())
    assert after == before
    assert {what: body["code"] for what, body in refusals.items()} == {
        "not a manager of the whole": "SCOPE_DENIED", "bad folder": "INVALID_ARGUMENT",
        "bad file": "INVALID_ARGUMENT", "empty": "INVALID_ARGUMENT", "too large": "INVALID_ARGUMENT",
        "missing folder": "NOT_FOUND", "bad name": "INVALID_ARGUMENT",
        "remove: never written": "NOT_FOUND", "remove: removed already": "NOT_FOUND",
        "remove: no such folder": "NOT_FOUND", "remove: not a manager of the whole": "SCOPE_DENIED",
        "remove: and text": "INVALID_ARGUMENT"}
    assert "write_memory" in refusals["missing folder"]["message"]
    assert "skills/<name>/SKILL.md" in refusals["bad file"]["message"]
    assert refusals["remove: removed already"]["data"] == {"folder": "archive:ops", "file": "CLAUDE.md"}
    assert "holds no file CLAUDE.md to remove" in refusals["remove: removed already"]["message"]
    assert "to remove the file pass remove=true" in refusals["empty"]["message"]


async def _removals_refused(lead, memory: dict[str, str]) -> dict[str, dict]:
    """The error bodies of removals that must fail: ops holds AGENTS.md, and held CLAUDE.md until it was removed."""
    return {
        "remove: never written": await fail(lead, "write_memory", **memory, file="skills/x/SKILL.md", remove=True),
        "remove: removed already": await fail(lead, "write_memory", **memory, file="CLAUDE.md", remove=True),
        "remove: no such folder": await fail(lead, "write_memory", **memory | {"folder": "nowhere"},
                                             file="AGENTS.md", remove=True),
        "remove: not a manager of the whole": await fail(lead, "write_memory", **memory, acting_as="ApiLead",
                                                         file="AGENTS.md", remove=True),
        "remove: and text": await fail(lead, "write_memory", **memory, file="AGENTS.md", text="x", remove=True),
    }


def test_a_manager_removes_a_memory_file_and_loaders_stop_handing_it_while_the_rest_of_the_folder_stays(
        server, tmp_path):
    project = str(tmp_path / "repo")
    archive = Archive(server.home, project)

    async def scenario():
        async with server.client() as lead:
            await lead_and_peer(lead, project)
            memory = {"project_key": project, "agent_name": "Lead", "folder": "archive:ops"}
            await call(lead, "write_memory", **memory, file="AGENTS.md", text=MEMORY)
            await call(lead, "write_memory", **memory, file="skills/rollback/SKILL.md", text=SKILL)
            made = await call(lead, "spawn_agent", project_key=project, agent_name="Lead", name="Helper",
                              scope=["viewer@*"], load_memory_and_skills=["archive:ops"])
            removed = await call(lead, "write_memory", **memory, file="AGENTS.md", remove=True,
                                 reason="the rule moved to the runbook")
            message = archive.last_message()
            seat = await call(lead, "take_seat", project_key=project, agent_name="Helper",
                              agent_token=made["registration_token"])
            folders = (await call(lead, "org_context", project_key=project, agent_name="Peer"))["archive_folders"]
            await call(lead, "write_memory", **memory | {"agent_name": "Peer"}, file="skills/rollback/SKILL.md",
                       remove=True)
            emptied = (await call(lead, "org_context", project_key=project, agent_name="Peer"))["archive_folders"]
            rewritten = await call(lead, "write_memory", **memory, file="AGENTS.md", text=MEMORY)
            return removed, message, seat["loads"], folders, emptied, rewritten

    removed, message, loads, folders, emptied, rewritten = run(scenario())
    assert (removed["removed"], removed["changed"], removed["written_by"]) == (True, True, "Lead")
    assert removed["sha256"] == hashlib.sha256(MEMORY.encode()).hexdigest()  # what was removed
    assert "removed AGENTS.md of the memory folder archive:ops" in message and "runbook" in message
    assert loads["memory"] == [] and [s["name"] for s in loads["skills"]] == ["rollback"]
    assert loads["unavailable"] == []
    assert folders == ["archive:ops"] and emptied == []  # a folder whose every file is removed is gone
    assert (rewritten["changed"], rewritten["removed"]) == (True, False)  # a removed file may be written again

