"""Memory and skills over MCP against a real `gitmail serve`: the folders an identity loads, and the project's default.

The project's key is a code repository in the tests' temporary folder,
which the server's operator lists in ``GITMAIL_GUARD_ROOTS``; its folders
hold real memory files and skills, and links that try to leave them.
"""

from __future__ import annotations

import hashlib
import os

import pytest

from .mcp_harness import call, fail, run
from .test_mcp_hierarchy import Archive, lead_and_peer, lead_peer_and_api_lead

SHARES_SERVER = True  # each test makes a project of its own

pytestmark = pytest.mark.slow  # a real gitmail serve process

LONG = "remember this\n" * 2000  # 28,000 characters: handed over up to the bound, hashed whole


def code_repo(tmp_path) -> str:
    """A code repository with memory and skills in src/api, a link out of it, and a folder of docs."""
    repo = tmp_path / "repo"
    api = repo / "src" / "api"
    (api / "skills" / "deploy").mkdir(parents=True)
    (api / "skills" / "lint").mkdir()
    (api / "skills" / "escape").mkdir()
    (repo / "docs").mkdir()
    (api / "AGENTS.md").write_text("# API\nRun the api tests before you push.\n")
    (api / "CLAUDE.md").write_text(LONG)
    (api / "skills" / "deploy" / "SKILL.md").write_text("---\nname: deploy\ndescription: Ship a release to "
                                                          "staging\n---\n# Deploy\n")
    (api / "skills" / "lint" / "SKILL.md").write_text("\n# Lint the api code\nmore\n")
    secret = tmp_path / "secret.md"
    secret.write_text("not for agents\n")
    (api / "skills" / "escape" / "SKILL.md").symlink_to(secret)  # a link out of the folder is not read
    (repo / "docs" / "AGENTS.md").write_text("docs memory\n")
    (repo / "outside").symlink_to("/etc")  # inside the roots by name, outside them by its real path
    return str(os.path.realpath(repo))


def test_a_spawned_agent_is_handed_its_folders_memory_and_skills_when_it_takes_its_seat(server, tmp_path):
    project = code_repo(tmp_path)
    api = f"{project}/src/api"

    async def scenario():
        async with server.client() as lead:
            await lead_and_peer(lead, project)
            made = await call(lead, "spawn_agent", project_key=project, agent_name="Lead", name="Helper",
                              scope=["editor@src/api"], load_memory_and_skills=[api, api + "/"])
            seat = await call(lead, "take_seat", project_key=project, agent_name="Helper",
                              agent_token=made["registration_token"])
            emptied = await call(lead, "update_agent", project_key=project, agent_name="Lead", target="Helper",
                                 load_memory_and_skills=[])
            again = await call(lead, "take_seat", project_key=project, agent_name="Helper", take_over=True,
                               agent_token=made["registration_token"])
            return made, seat["loads"], emptied, again["loads"]

    made, loads, emptied, again = run(scenario())
    assert made["load_memory_and_skills"] == [api]  # the same folder twice is one
    assert loads["source"] == "agent" and loads["folders"] == [api] and loads["unavailable"] == []
    agents_md, claude_md = loads["memory"]
    assert agents_md == {"folder": api, "path": "AGENTS.md", "size": 41, "truncated": False,
                         "sha256": hashlib.sha256(b"# API\nRun the api tests before you push.\n").hexdigest(),
                         "text": "# API\nRun the api tests before you push.\n"}
    assert claude_md["size"] == len(LONG) and claude_md["sha256"] == hashlib.sha256(LONG.encode()).hexdigest()
    assert claude_md["truncated"] is True and claude_md["text"] == LONG[:16_000]
    assert [(s["name"], s["description"], s["path"]) for s in loads["skills"]] == [
        ("deploy", "Ship a release to staging", "skills/deploy/SKILL.md"),
        ("lint", "Lint the api code", "skills/lint/SKILL.md")]  # escape links out of the folder: not read
    assert "not instructions" in loads["note"]
    assert emptied["changed"] is True and emptied["load_memory_and_skills"] == []
    assert again == {"source": "agent", "folders": [], "memory": [], "skills": [], "unavailable": []}


def test_folders_an_agent_may_not_name_are_refused_with_codes_and_nothing_written(server, tmp_path):
    project = code_repo(tmp_path)
    archive = Archive(server.home, project)

    async def scenario():
        async with server.client() as lead:
            await lead_peer_and_api_lead(lead, project)
            before = archive.tip()
            spawn = {"project_key": project, "scope": ["viewer@src/api"]}
            refusals = {
                "relative": await fail(lead, "spawn_agent", agent_name="Lead", **spawn,
                                       load_memory_and_skills=["src/api"]),
                "dot-dot": await fail(lead, "spawn_agent", agent_name="Lead", **spawn,
                                      load_memory_and_skills=[f"{project}/src/../docs"]),
                "outside the roots": await fail(lead, "spawn_agent", agent_name="Lead", **spawn,
                                                load_memory_and_skills=["/etc"]),
                "a link out": await fail(lead, "spawn_agent", agent_name="Lead", **spawn,
                                         load_memory_and_skills=[f"{project}/outside"]),
                "missing": await fail(lead, "spawn_agent", agent_name="Lead", **spawn,
                                      load_memory_and_skills=[f"{project}/nowhere"]),
                "beyond its scopes": await fail(lead, "spawn_agent", agent_name="Lead", acting_as="ApiLead",
                                                **spawn, load_memory_and_skills=[f"{project}/docs"]),
                "its own": await fail(lead, "update_agent", project_key=project, agent_name="Lead",
                                      acting_as="ApiLead", load_memory_and_skills=[f"{project}/src/api"]),
                "too many": await fail(lead, "spawn_agent", agent_name="Lead", **spawn,
                                       load_memory_and_skills=[f"{project}/f{i}" for i in range(17)]),
            }
            return before, archive.tip(), refusals

    before, after, refusals = run(scenario())
    assert after == before
    codes = {what: body["code"] for what, body in refusals.items()}
    assert codes == {"relative": "INVALID_ARGUMENT", "dot-dot": "INVALID_ARGUMENT",
                     "outside the roots": "PATH_NOT_ALLOWED", "a link out": "PATH_NOT_ALLOWED",
                     "missing": "NOT_FOUND", "beyond its scopes": "SCOPE_DENIED", "its own": "NOT_ABOVE",
                     "too many": "INVALID_ARGUMENT"}
    assert "GITMAIL_GUARD_ROOTS" in refusals["outside the roots"]["message"]
    assert refusals["beyond its scopes"]["data"]["needed"] == "viewer@docs"


def test_the_project_default_is_set_by_a_manager_of_the_whole_project_and_loaded_by_agents_spawned_without_folders(
        server, tmp_path):
    project = code_repo(tmp_path)
    archive = Archive(server.home, project)
    docs = f"{project}/docs"

    async def scenario():
        async with server.client() as lead:
            await lead_peer_and_api_lead(lead, project)
            unset = await call(lead, "org_context", project_key=project, agent_name="Peer")
            before = archive.tip()
            denied = await fail(lead, "org_context", project_key=project, agent_name="Lead", acting_as="ApiLead",
                                load_memory_and_skills=[f"{project}/src/api"])
            after_denied = archive.tip()
            made = await call(lead, "org_context", project_key=project, agent_name="Peer",
                              load_memory_and_skills=[docs], folder_hints=False, reason="docs for everyone")
            same = await call(lead, "org_context", project_key=project, agent_name="Peer", folder_hints=False)
            default = await call(lead, "spawn_agent", project_key=project, agent_name="Lead", name="Plain",
                                 scope=["viewer@*"])
            bare = await call(lead, "spawn_agent", project_key=project, agent_name="Lead", name="Bare",
                              scope=["viewer@*"], load_memory_and_skills=[])
            seats = [await call(lead, "take_seat", project_key=project, agent_name=name,
                                agent_token=agent["registration_token"]) for name, agent in
                     (("Plain", default), ("Bare", bare))]
            read = await call(lead, "org_context", project_key=project, agent_name="Plain",
                              agent_token=default["registration_token"])
            return unset, before, after_denied, denied, made, same, seats, read, archive.last_message()

    unset, before, after_denied, denied, made, same, seats, read, message = run(scenario())
    assert unset["load_memory_and_skills"] == [] and unset["folder_hints"] is True and "set_by" not in unset
    assert denied["code"] == "SCOPE_DENIED" and after_denied == before
    assert made["changed"] is True and made["set_by"] == "Peer" and made["load_memory_and_skills"] == [docs]
    assert same["changed"] is False and same["folder_hints"] is False
    plain, bare = seats[0]["loads"], seats[1]["loads"]
    assert plain["source"] == "project" and [m["text"] for m in plain["memory"]] == ["docs memory\n"]
    assert bare == {"source": "agent", "folders": [], "memory": [], "skills": [], "unavailable": []}
    assert read == {**made, "changed": False}
    assert "Reason: docs for everyone" not in message  # the last commit is a seat, not the default


def test_a_folder_gone_from_the_machine_is_listed_as_unavailable_and_the_seat_is_still_taken(server, tmp_path):
    project = code_repo(tmp_path)
    gone = tmp_path / "repo" / "later"
    gone.mkdir()

    async def scenario():
        async with server.client() as lead:
            await lead_and_peer(lead, project)
            made = await call(lead, "spawn_agent", project_key=project, agent_name="Lead", name="Helper",
                              scope=["viewer@*"], load_memory_and_skills=[str(gone), f"{project}/docs"])
            gone.rmdir()
            return await call(lead, "take_seat", project_key=project, agent_name="Helper",
                              agent_token=made["registration_token"])

    loads = run(scenario())["loads"]
    assert [(u["folder"], u["code"]) for u in loads["unavailable"]] == [(f"{project}/later", "NOT_FOUND")]
    assert [m["folder"] for m in loads["memory"]] == [f"{project}/docs"]


def test_a_reservation_names_the_memory_and_skills_of_the_folders_it_touches_until_hints_are_turned_off(
        server, tmp_path):
    project = code_repo(tmp_path)
    (tmp_path / "repo" / "src" / "api" / "handlers").mkdir()

    async def scenario():
        async with server.client() as lead:
            await lead_and_peer(lead, project)
            hinted = await call(lead, "file_reservation_paths", project_key=project, agent_name="Lead",
                                paths=["src/api/handlers/*.py", "docs/guide.md"])
            await call(lead, "org_context", project_key=project, agent_name="Lead", folder_hints=False)
            quiet = await call(lead, "file_reservation_paths", project_key=project, agent_name="Peer",
                               paths=["src/api/other.py"])
            return hinted, quiet

    hinted, quiet = run(scenario())
    assert hinted["folder_hints"] == [
        {"folder": "src/api", "memory": ["AGENTS.md", "CLAUDE.md"], "skills": ["deploy", "lint"]},
        {"folder": "docs", "memory": ["AGENTS.md"], "skills": []}]
    assert len(quiet["granted"]) == 1 and "folder_hints" not in quiet
