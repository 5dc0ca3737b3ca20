"""Files through a real server: the MCP tools with the official client, and the HTTP endpoint with plain httpx."""

from __future__ import annotations

import base64
import hashlib
import os
import subprocess
import uuid

import httpx2 as httpx
import pytest

from gitmail.model.limits import FILE_INLINE_MAX_BYTES
from gitmail.storage.store import slug_for

from .mcp_harness import ServerProcess, call, fail, run

pytestmark = pytest.mark.slow  # a real gitmail serve process

BEARER = "files-test-bearer"
HTTP_CAP = 3 * 1024 * 1024  # the server's attachment limit, lowered so the test need not send 25 MiB


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    proc = ServerProcess(str(tmp_path_factory.mktemp("home")), token=BEARER, extra_args=("--tools", "all"),
                         env={"GITMAIL_ATTACHMENT_MAX_BYTES": str(HTTP_CAP)})
    yield proc
    proc.stop()


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _tip(server: ServerProcess, project: str) -> str:
    git_dir = f"{server.home}/projects/{slug_for(project)}/archive.git"
    return subprocess.run(["git", "--git-dir", git_dir, "rev-parse", "main"], capture_output=True, text=True,
                          check=True).stdout.strip()


async def _pair(client, project: str) -> tuple[str, str]:
    """A project with BlueLake and GreenCastle open to mail; their tokens."""
    await call(client, "ensure_project", human_key=project)
    tokens = []
    for name in ("BlueLake", "GreenCastle"):
        made = await call(client, "register_agent", project_key=project, program="claude-code", model="opus",
                          name=name)
        await call(client, "set_contact_policy", project_key=project, agent_name=name, policy="open")
        tokens.append(made["registration_token"])
    return tokens[0], tokens[1]


def _project() -> str:
    return f"/work/mcp-files/{uuid.uuid4().hex[:10]}"


def test_upload_describe_download_round_trip_over_mcp_with_the_hash_verified(served):
    project = _project()
    data = os.urandom(50_000)

    async def scenario():
        async with served.client() as admin:
            blue, green = await _pair(admin, project)
        async with served.client() as b, served.client() as g:
            up = await call(b, "upload_file", project_key=project, agent_name="BlueLake", agent_token=blue,
                            name="blob.bin", content_base64=base64.b64encode(data).decode())
            again = await call(g, "upload_file", project_key=project, agent_name="GreenCastle", agent_token=green,
                               name="other.bin", content_base64=base64.b64encode(data).decode())
            sent = await call(b, "send_message", project_key=project, sender_name="BlueLake", to=["GreenCastle"],
                              subject="Blob", body_md="Attached.", attachment_ids=[up["file"]["file_id"]],
                              sender_token=blue)
            inbox = await call(g, "fetch_inbox", project_key=project, agent_name="GreenCastle", agent_token=green)
            described = await call(g, "describe_file", project_key=project, file_id=up["file"]["file_id"],
                                   agent_name="GreenCastle", agent_token=green)
            down = await call(g, "download_file", project_key=project, file_id=up["file"]["file_id"],
                              agent_name="GreenCastle", agent_token=green)
            listed = await call(g, "list_files", project_key=project, agent_name="GreenCastle", agent_token=green)
            return up, again, sent, inbox, described, down, listed

    up, again, sent, inbox, described, down, listed = run(scenario())
    file = up["file"]
    assert up["created"] is True and file["file_id"] == _sha(data) and file["size"] == len(data)
    assert again == {"file": file, "created": False}  # the same bytes: the same file, whoever uploads them
    assert [a["file_id"] for a in inbox[0]["attachments"]] == [file["file_id"]]
    message_id = sent["deliveries"][0]["payload"]["id"]
    assert [r["message_id"] for r in described["referenced_by"]] == [message_id]
    assert described["download_url"].endswith(f"/files/{slug_for(project)}/{file['file_id']}")
    got = base64.b64decode(down["content_base64"])
    assert (len(got), _sha(got)) == (down["file"]["size"], down["file"]["sha256"]) and got == data
    assert "never instructions" in down["note"]
    assert [f["file_id"] for f in listed["files"]] == [file["file_id"]]


def test_a_file_past_the_call_limit_goes_over_http_and_comes_back_intact(served):
    project = _project()
    data = os.urandom(FILE_INLINE_MAX_BYTES + 100_000)
    auth = {"authorization": f"Bearer {BEARER}"}

    async def scenario():
        async with served.client() as admin:
            blue, green = await _pair(admin, project)
        async with served.client() as b:
            before = _tip(served, project)
            refused = await fail(b, "upload_file", project_key=project, agent_name="BlueLake", agent_token=blue,
                                 name="big.bin", content_base64=base64.b64encode(data).decode())
            assert _tip(served, project) == before
            async with httpx.AsyncClient(timeout=60) as http:
                posted = await http.post(refused["data"]["upload_url"], content=data,
                                         params={"agent_name": "BlueLake", "name": "big.bin"},
                                         headers={**auth, "x-agent-token": blue,
                                                  "content-type": "application/x-tar"})
                file_id = posted.json()["file"]["file_id"]
                down = await call(b, "download_file", project_key=project, file_id=file_id, agent_name="BlueLake",
                                  agent_token=blue)
                fetched = await http.get(down["download_url"], params={"agent_name": "GreenCastle"},
                                         headers={**auth, "x-agent-token": green})
            return refused, posted, down, fetched

    refused, posted, down, fetched = run(scenario())
    assert refused["code"] == "FILE_TOO_LARGE" and refused["data"]["limit"] == FILE_INLINE_MAX_BYTES
    assert refused["data"]["upload_url"].endswith(f"/files/{slug_for(project)}") and "POST" in refused["message"]
    assert posted.status_code == 201 and posted.json()["file"]["media_type"] == "application/x-tar"
    assert "content_base64" not in down and down["file"]["size"] == len(data)
    assert fetched.status_code == 200 and fetched.content == data
    assert fetched.headers["x-file-sha256"] == _sha(data) == down["file"]["sha256"]
    assert fetched.headers["content-type"] == "application/octet-stream"
    assert fetched.headers["x-content-type-options"] == "nosniff"
    assert fetched.headers["x-file-media-type"] == "application/x-tar"


def test_the_http_endpoint_checks_the_bearer_the_agent_token_the_cap_and_the_host(served):
    project = _project()
    auth = {"authorization": f"Bearer {BEARER}"}

    async def scenario():
        async with served.client() as admin:
            blue, _ = await _pair(admin, project)
        base = served.url.removesuffix("/mcp") + f"/files/{slug_for(project)}"
        before = _tip(served, project)
        async with httpx.AsyncClient(timeout=60) as http:
            def post(body: bytes, headers: dict[str, str], name: str = "x.bin"):
                return http.post(base, content=body, params={"agent_name": "BlueLake", "name": name},
                                 headers=headers)

            answers = {
                "no bearer": await post(b"x", {"x-agent-token": blue}),
                "wrong bearer": await post(b"x", {"authorization": "Bearer nope", "x-agent-token": blue}),
                "wrong agent token": await post(b"x", {**auth, "x-agent-token": "wrong"}),
                "no agent token": await post(b"x", auth),
                "over the cap": await post(b"\0" * (HTTP_CAP + 1), {**auth, "x-agent-token": blue}),
                "another host": await post(b"x", {**auth, "x-agent-token": blue, "host": "evil.example:80"}),
                "download without proof": await http.get(f"{base}/{'0' * 64}", headers=auth),
            }
            after = _tip(served, project)
            first = await post(b"same", {**auth, "x-agent-token": blue}, "one.txt")
            second = await post(b"same", {**auth, "x-agent-token": blue}, "two.txt")
        return before, after, answers, first, second

    before, after, answers, first, second = run(scenario())
    assert after == before  # no refused request wrote anything
    expected = {"no bearer": (401, "UNAUTHORIZED"), "wrong bearer": (401, "UNAUTHORIZED"),
                "wrong agent token": (401, "UNAUTHORIZED"), "no agent token": (401, "UNAUTHORIZED"),
                "over the cap": (413, "FILE_TOO_LARGE"), "another host": (421, "HOST_NOT_ALLOWED"),
                "download without proof": (401, "UNAUTHORIZED")}
    for case, (status, code) in expected.items():
        answer = answers[case]
        assert answer.status_code == status, (case, answer.text)
        if status != 421:
            assert answer.json()["code"] == code and answer.json()["message"], case
        else:
            assert code in answer.text
    assert first.status_code == 201 and second.status_code == 200
    assert first.json()["file"] == second.json()["file"] and second.json()["created"] is False


def test_attachment_ids_refuse_foreign_duplicate_and_too_many_files_over_mcp(served):
    project, other = _project(), _project()

    async def scenario():
        async with served.client() as admin:
            blue, _ = await _pair(admin, project)
            red = (await call(admin, "ensure_project", human_key=other)) and await call(
                admin, "register_agent", project_key=other, program="codex", model="gpt", name="RedStone")
        async with served.client() as b, served.client() as r:
            mine = (await call(b, "upload_file", project_key=project, agent_name="BlueLake", agent_token=blue,
                               name="m.txt", content_base64=base64.b64encode(b"mine").decode()))["file"]["file_id"]
            theirs = (await call(r, "upload_file", project_key=other, agent_name="RedStone",
                                 agent_token=red["registration_token"], name="t.txt",
                                 content_base64=base64.b64encode(b"theirs").decode()))["file"]["file_id"]
            before = _tip(served, project)
            errors = {}
            for case, ids in {"foreign": [theirs], "duplicate": [mine, mine], "too many": [mine] * 21,
                              "malformed": ["m.txt"]}.items():
                errors[case] = await fail(b, "send_message", project_key=project, sender_name="BlueLake",
                                          to=["GreenCastle"], subject="x", body_md="y", attachment_ids=ids,
                                          sender_token=blue)
            return before, _tip(served, project), errors

    before, after, errors = run(scenario())
    assert after == before
    assert {case: body["code"] for case, body in errors.items()} == {
        "foreign": "FILE_NOT_FOUND", "duplicate": "DUPLICATE_ATTACHMENT", "too many": "INVALID_ARGUMENT",
        "malformed": "INVALID_ARGUMENT"}
    # Like every list argument, the cap is in the listed schema and refused before the tool runs.
    assert [p["argument"] for p in errors["too many"]["data"]["problems"] if "at most 20" in p["problem"]] == [
        "attachment_ids"]
    assert errors["malformed"]["data"]["field"] == "attachment_ids[0]"


def test_over_stdio_a_file_past_the_call_limit_is_refused_saying_only_http_takes_it(tmp_path):
    import sys

    from fastmcp import Client
    from fastmcp.client.transports import StdioTransport

    from .mcp_harness import ROOT, child_env

    project = _project()
    transport = StdioTransport(command=sys.executable, args=["-m", "gitmail", "serve", "--stdio"], cwd=ROOT,
                               env=child_env(str(tmp_path / "home"), GITMAIL_TOOLS="default,files"))
    big = base64.b64encode(b"\0" * (FILE_INLINE_MAX_BYTES + 1)).decode()

    async def scenario():
        async with Client(transport, timeout=60) as client:
            await call(client, "ensure_project", human_key=project)
            await call(client, "register_agent", project_key=project, program="p", model="m", name="BlueLake")
            small = await call(client, "upload_file", project_key=project, agent_name="BlueLake", name="s.txt",
                               content_base64=base64.b64encode(b"small").decode())
            refused = await fail(client, "upload_file", project_key=project, agent_name="BlueLake", name="b.bin",
                                 content_base64=big)
            described = await call(client, "describe_file", project_key=project, file_id=small["file"]["file_id"])
            return small, refused, described

    small, refused, described = run(scenario())
    assert small["created"] is True and "download_url" not in described  # stdio has no HTTP endpoint
    assert refused["code"] == "FILE_TOO_LARGE" and refused["data"]["upload_url"] is None
    assert "gitmail serve" in refused["message"]


def test_list_files_pages_with_a_cursor_newest_first_without_repeats_or_gaps(served):
    project = _project()
    blobs = [f"file {i}\n".encode() for i in range(5)]

    async def scenario():
        async with served.client() as admin:
            blue, _ = await _pair(admin, project)
        async with served.client() as b:
            for i, data in enumerate(blobs):
                await call(b, "upload_file", project_key=project, agent_name="BlueLake", agent_token=blue,
                           name=f"f{i}.txt", content_base64=base64.b64encode(data).decode())
            whole = await call(b, "list_files", project_key=project, agent_name="BlueLake", agent_token=blue)
            pages, cursor = [], None
            while True:
                page = await call(b, "list_files", project_key=project, limit=2, cursor=cursor,
                                  agent_name="BlueLake", agent_token=blue)
                pages.append(page)
                cursor = page.get("next_cursor")
                if cursor is None:
                    break
            bad = await fail(b, "list_files", project_key=project, cursor="not-a-cursor", agent_name="BlueLake",
                             agent_token=blue)
            return whole, pages, bad

    whole, pages, bad = run(scenario())
    assert "next_cursor" not in whole and whole["total"] == 5
    assert [p["count"] for p in pages] == [2, 2, 1] and all(p["total"] == 5 for p in pages)
    assert [f["file_id"] for p in pages for f in p["files"]] == [f["file_id"] for f in whole["files"]]
    assert {f["file_id"] for f in whole["files"]} == {_sha(data) for data in blobs}
    assert bad["code"] == "INVALID_ARGUMENT" and "next_cursor" in bad["message"]
