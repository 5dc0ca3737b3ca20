"""Coordination over MCP against a real `gitmail serve`: reservations, guard, seats, journals, roles, attachments."""

from __future__ import annotations

import base64
import io
import os
import subprocess
import sys
import uuid

import pytest
from PIL import Image

from .mcp_harness import call, child_env, fail, read_json, run

SHARES_SERVER = True  # each test makes a project of its own: the process's one server serves them all

pytestmark = pytest.mark.slow  # a real gitmail serve process


async def team(client, project: str, *names: str) -> dict[str, str]:
    await call(client, "ensure_project", human_key=project)
    tokens = {}
    for name in names:
        out = await call(client, "register_agent", project_key=project, program="test", model="test", name=name)
        tokens[name] = out["registration_token"]
        await call(client, "set_contact_policy", project_key=project, agent_name=name, policy="open")
    return tokens


def fresh_project() -> str:
    return f"/work/mcp-coord/{uuid.uuid4().hex[:10]}"


def test_reservations_conflicts_renew_release(server):
    project = fresh_project()

    async def scenario():
        async with server.client() as admin:
            tokens = await team(admin, project, "Blue", "Green")
        async with server.client() as blue, server.client() as green:
            mine = await call(blue, "file_reservation_paths", project_key=project, agent_name="Blue",
                              paths=["src/**/*.py"], ttl_seconds=600, reason="refactor", agent_token=tokens["Blue"])
            assert [g["path_pattern"] for g in mine["granted"]] == ["src/**/*.py"]
            theirs = await call(green, "file_reservation_paths", project_key=project, agent_name="Green",
                                paths=["src/api/*", "docs/"], agent_token=tokens["Green"])
            assert [g["path_pattern"] for g in theirs["granted"]] == ["docs"]
            assert theirs["conflicts"][0]["holders"][0]["agent"] == "Blue"
            short = await fail(green, "file_reservation_paths", project_key=project, agent_name="Green",
                               paths=["x"], ttl_seconds=30, agent_token=tokens["Green"])
            assert short["code"] == "INVALID_ARGUMENT"
            absolute = await fail(green, "file_reservation_paths", project_key=project, agent_name="Green",
                                  paths=["/etc"], agent_token=tokens["Green"])
            assert absolute["code"] == "INVALID_ARGUMENT" and absolute["data"]["field"] == "paths"
            unproven = await fail(green, "file_reservation_paths", project_key=project, agent_name="Blue",
                                  paths=["x"])
            assert unproven["code"] == "UNAUTHORIZED"
            renewed = await call(blue, "renew_file_reservations", project_key=project, agent_name="Blue",
                                 extend_seconds=120, agent_token=tokens["Blue"])
            assert renewed["renewed"] == 1
            assert renewed["file_reservations"][0]["new_expires_ts"] > renewed["file_reservations"][0]["old_expires_ts"]
            listed = await call(green, "list_file_reservations", project_key=project)
            assert len(listed["file_reservations"]) == 2
            released = await call(blue, "release_file_reservations", project_key=project, agent_name="Blue",
                                  agent_token=tokens["Blue"])
            assert released["released"] == 1
            again = await call(green, "file_reservation_paths", project_key=project, agent_name="Green",
                               paths=["src/api/*"], agent_token=tokens["Green"])
            assert again["conflicts"] == []
            history = await call(green, "list_file_reservations", project_key=project, active_only=False)
            assert any(r["released_ts"] for r in history["file_reservations"])
            slug = (await call(green, "ensure_project", human_key=project))["slug"]
            shown = await read_json(green, f"resource://file_reservations/{slug}?active_only=false")
            assert len(shown["file_reservations"]) == len(history["file_reservations"])
            active = await read_json(green, f"resource://file_reservations/{slug}")
            assert [r["agent"] for r in active["file_reservations"]] == ["Green", "Green"]
            stale = await fail(blue, "force_release_file_reservation", project_key=project, agent_name="Blue",
                               file_reservation_id=again["granted"][0]["id"], agent_token=tokens["Blue"])
            assert stale["code"] == "RESERVATION_NOT_STALE"

    run(scenario())


def test_seats_fence_writes_and_hand_over_the_journal(server):
    project = fresh_project()

    async def scenario():
        async with server.client() as admin:
            tokens = await team(admin, project, "Blue", "Green")
        async with server.client() as one, server.client() as two:
            seat = await call(one, "take_seat", project_key=project, agent_name="Blue", holder="session one",
                              lease_s=300, agent_token=tokens["Blue"])
            token = seat["seat"]["token"]
            assert seat["seat"]["epoch"] == 1 and seat["journal"] == []
            held = await fail(one, "send_message", project_key=project, sender_name="Blue", to=["Green"],
                              subject="s", body_md="b", sender_token=tokens["Blue"])
            assert held["code"] == "SEAT_HELD"
            await call(one, "send_message", project_key=project, sender_name="Blue", to=["Green"], subject="s",
                       body_md="b", seat=token, sender_token=tokens["Blue"])
            await call(one, "journal", project_key=project, agent_name="Blue", entry="Half-way through the parser.",
                       seat=token, agent_token=tokens["Blue"])
            busy = await fail(two, "take_seat", project_key=project, agent_name="Blue", agent_token=tokens["Blue"])
            assert busy["code"] == "SEAT_HELD"
            taken = await call(two, "take_seat", project_key=project, agent_name="Blue", holder="session two",
                               take_over=True, agent_token=tokens["Blue"])
            assert taken["seat"]["epoch"] == 2
            assert taken["journal"][-1]["entry"].startswith("Half-way through the parser.")
            fenced = await fail(one, "journal", project_key=project, agent_name="Blue", entry="late",
                                seat=token, agent_token=tokens["Blue"])
            assert fenced["code"] == "STALE_EPOCH"
            renewed = await call(two, "renew_seat", project_key=project, agent_name="Blue",
                                 seat=taken["seat"]["token"], lease_s=600, agent_token=tokens["Blue"])
            assert renewed["renewed"] is True
            released = await call(two, "release_seat", project_key=project, agent_name="Blue",
                                  seat=taken["seat"]["token"], agent_token=tokens["Blue"])
            assert released["released"] is True
            entries = await call(two, "read_journal", project_key=project, agent_name="Blue",
                                 agent_token=tokens["Blue"])
            assert len(entries["entries"]) == 1

    run(scenario())


def test_roles_sleep_and_wake(server):
    project = fresh_project()

    async def scenario():
        async with server.client() as admin:
            tokens = await team(admin, project, "Blue", "Green", "Red")
            for name in ("Green", "Red"):
                await call(admin, "publish_capabilities", project_key=project, agent_name=name,
                           capabilities=["review"])
            cards = await call(admin, "list_capabilities", project_key=project, capability="review")
            assert [a["name"] for a in cards["agents"]] == ["Green", "Red"]
            slug = (await call(admin, "ensure_project", human_key=project))["slug"]
            listed = await read_json(admin, f"resource://capabilities/{slug}")
            assert {a["name"]: a["capabilities"] for a in listed["agents"]}["Red"] == ["review"]
            sent = await call(admin, "send_message", project_key=project, sender_name="Blue", to=["role:review"],
                              subject="Review please", body_md="PR 12")
            assert sent["deliveries"][0]["payload"]["to"] == ["Green", "Red"]
            await call(admin, "sleep_agent", project_key=project, agent_name="Green")
            asleep = await fail(admin, "send_message", project_key=project, sender_name="Green", to=["Blue"],
                                subject="s", body_md="b")
            assert asleep["code"] == "AGENT_ASLEEP"
            await call(admin, "send_message", project_key=project, sender_name="Blue", to=["Green"], subject="still",
                       body_md="arrives")
            inbox = await call(admin, "fetch_inbox", project_key=project, agent_name="Green")
            assert inbox[0]["subject"] == "still"
            # Top-level agents are peers: none may put another to sleep or wake it; the operator may.
            other = await fail(admin, "sleep_agent", project_key=project, agent_name="Red", target="Blue")
            assert other["code"] == "NOT_ABOVE"
            refused = await fail(admin, "wake_agent", project_key=project, agent_name="Red", target="Green")
            assert refused["code"] == "NOT_ABOVE" and "gitmail wake PROJECT Green" in refused["message"]
            woken = subprocess.run([sys.executable, "-m", "gitmail", "--home", server.home, "wake", project, "Green"],
                                   capture_output=True, text=True, env=child_env(server.home))
            assert woken.returncode == 0, woken.stderr
            await call(admin, "send_message", project_key=project, sender_name="Green", to=["Blue"], subject="back",
                       body_md="awake")
            assert tokens

    run(scenario())


def test_attachments_over_mcp(server):
    project = fresh_project()
    image = io.BytesIO()
    Image.new("RGB", (16, 16), (0, 0, 255)).save(image, format="PNG")
    uri = "data:image/png;base64," + base64.b64encode(image.getvalue()).decode()

    async def scenario():
        async with server.client() as admin:
            await team(admin, project, "Blue", "Green")
            await call(admin, "set_attachments_policy", project_key=project, agent_name="Blue", policy="file")
            sent = await call(admin, "send_message", project_key=project, sender_name="Blue", to=["Green"],
                              subject="Screenshot", body_md=f"Look: ![shot]({uri})")
            payload = sent["deliveries"][0]["payload"]
            entry = payload["attachments"][0]
            assert entry["media_type"] == "image/webp" and entry["type"] == "file"
            assert payload["body_md"] == f"Look: ![shot]({entry['path']})"
            fetched = await call(admin, "get_attachment", project_key=project, path=entry["path"])
            assert fetched["sha256"] == entry["sha256"]
            assert base64.b64decode(fetched["content_base64"])[8:12] == b"WEBP"
            outside = await fail(admin, "send_message", project_key=project, sender_name="Blue", to=["Green"],
                                 subject="s", body_md="b", attachment_paths=["/etc/passwd"])
            assert outside["code"] == "PATH_NOT_ALLOWED"

    run(scenario())


def test_no_member_reads_records_of_the_archive_as_attachments(server):
    """Another agent's outbox copy (with its bcc list), a profile (with its token hash) and a contact record
    neither go out as attachments nor come back through get_attachment or the web view."""
    from gitmail.model.records import contact_path, outbox_path, profile_path

    from .test_mcp_mail import server_tip
    from .test_web import _get

    project = fresh_project()

    async def scenario():
        async with server.client() as alice, server.client() as mallory:
            tokens = await team(alice, project, "Alice", "Bob", "Carol")
            sent = await call(alice, "send_message", project_key=project, sender_name="Alice", to=["Bob"],
                              bcc=["Carol"], subject="private", body_md="for Bob", sender_token=tokens["Alice"])
            await call(alice, "request_contact", project_key=project, from_agent="Bob", to_agent="Carol",
                       agent_token=tokens["Bob"])
            await call(mallory, "register_agent", project_key=project, program="p", model="m", name="Mallory")
            slug = (await call(mallory, "ensure_project", human_key=project))["slug"]
            paths = [outbox_path("Alice", sent["deliveries"][0]["payload"]["id"]), profile_path("Alice"),
                     contact_path("Bob", "Carol"), "project.yaml"]
            before = server_tip(server, slug)
            refusals = [await fail(mallory, "send_message", project_key=project, sender_name="Mallory", to=["Bob"],
                                   subject="s", body_md="b", attachment_paths=[path], attachments_policy="file")
                        for path in paths]
            reads = [await fail(mallory, "get_attachment", project_key=project, path=path) for path in paths]
            return slug, paths, refusals, reads, before

    slug, paths, refusals, reads, before = run(scenario())
    assert [r["code"] for r in refusals] == ["PATH_NOT_ALLOWED"] * 4, refusals
    assert [r["code"] for r in reads] == ["INVALID_ARGUMENT"] * 4, reads
    assert server_tip(server, slug) == before
    for path in paths:
        status, body, _ = _get(f"http://127.0.0.1:{server.port}/ui/p/{slug}/file/{path}")
        assert status == 400 and "token_hash" not in body and "bcc" not in body, (path, status, body)


def test_guard_installed_through_mcp_blocks_a_real_commit(server, tmp_path):
    repo = str(tmp_path / "code")
    project = repo  # under the tests' temporary folder, where the server lets agents install the guard
    os.makedirs(repo)
    env = dict(os.environ, GITMAIL_HOME=server.home, GIT_AUTHOR_NAME="Dev", GIT_AUTHOR_EMAIL="d@example.org",
               GIT_COMMITTER_NAME="Dev", GIT_COMMITTER_EMAIL="d@example.org", AGENT_NAME="Green")
    subprocess.run(["git", "init", "-q", repo], check=True, env=env)

    async def scenario():
        async with server.client() as admin:
            tokens = await team(admin, project, "Blue", "Green")
            await call(admin, "file_reservation_paths", project_key=project, agent_name="Blue", paths=["core/"])
            out = await call(admin, "install_precommit_guard", project_key=project, code_repo_path=repo)
            assert out["hook"].endswith("pre-commit")
            return tokens

    tokens = run(scenario())
    os.makedirs(os.path.join(repo, "core"))
    with open(os.path.join(repo, "core", "x.py"), "w", encoding="utf-8") as handle:
        handle.write("x = 1\n")
    subprocess.run(["git", "add", "."], cwd=repo, check=True, env=env)
    blocked = subprocess.run(["git", "commit", "-m", "x"], cwd=repo, env=env, capture_output=True, text=True)
    assert blocked.returncode != 0 and "Blue holds core" in blocked.stdout + blocked.stderr

    async def remove():
        async with server.client() as admin:
            # another session: it proves an agent of the project the guard records
            assert (await call(admin, "uninstall_precommit_guard", code_repo_path=repo, agent_name="Blue",
                               agent_token=tokens["Blue"]))["removed"] is True

    run(remove())
    assert subprocess.run(["git", "commit", "-qm", "x"], cwd=repo, env=env).returncode == 0
