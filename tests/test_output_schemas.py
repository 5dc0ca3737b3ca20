"""Every tool's ``outputSchema`` describes what it answers, over a real server, read by both official clients.

The walk of :mod:`tests.test_access` calls each tool once with valid
arguments as an agent that proved itself; each answer's ``structuredContent``
must validate against the schema ``tools/list`` gave (jsonschema, as the
official clients check it). The results the server declares typed list their
fields; the others still list a bare object, and that list only shrinks.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from typing import Any

import jsonschema
import pytest

from gitmail import Mail, Store

from . import mcp1
from .mcp_harness import ROOT, call, child_env, error_body, run
from .test_access import World, arguments_for, built_world

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

PNG_URI = ("data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAAB"
           "JRU5ErkJggg==")
"""A one-pixel PNG, stored as an attachment of a message in the walk's world."""

TEXT_ONLY = {"catch_up", "read_messages", "read_compact"}
"""Tools answering one text document sized to a byte budget: no structured copy, so no output schema."""

# Tools whose domain answer is still a loose dictionary: their schema says only "an object" (or "a list").
# Empty now that every tool declares its typed result; a tool added without one fails the walk.
NOT_YET_TYPED: frozenset[str] = frozenset()


def described(schema: dict) -> bool:
    """Whether a listed output schema names the result's fields (a list's: its items' fields).

    A field is named under ``properties`` or, when every answer has it and it
    is a string, in ``required`` alone (``additionalProperties`` types it).
    """
    properties = schema.get("properties") or {}
    if list(properties) == ["result"] and schema.get("required") == ["result"]:
        items = properties["result"].get("items", {})
        return bool(items.get("properties") or items.get("required"))
    return bool(properties or schema.get("required"))


@pytest.fixture(scope="module")
def world(server, tmp_path_factory):
    made = built_world(server, str(tmp_path_factory.mktemp("schemas")))
    # Bob's holding of a slot whose lease ran out an hour ago (written with a clock set back an hour), for
    # force_release_build_slot to end without anyone waiting; the walk's own acquire takes another slot.
    earlier = Store(made.server.home, background=False, wall=lambda: time.time() - 3600)
    Mail(earlier).acquire_build_slot(made.p, "Bob", "stale-slot", ttl_seconds=60)

    async def released_reservation() -> str:
        """A reservation Bob made and released: force-releasing it answers without waiting for it to go stale."""
        async with server.client() as bob:
            proof = {"agent_name": "Bob", "agent_token": made.tokens["Bob"], "project_key": made.p}
            granted = (await call(bob, "file_reservation_paths", paths=["docs/walk.md"], **proof))["granted"]
            await call(bob, "release_file_reservations", file_reservation_ids=[granted[0]["id"]], **proof)
            return granted[0]["id"]

    async def asked_by_bob() -> None:
        """Bob asks Alice for contact, so her answer to him (respond_contact) has a request to answer."""
        async with server.client() as bob:
            await call(bob, "request_contact", project_key=made.p, from_agent="Bob", to_agent="Alice",
                       agent_token=made.tokens["Bob"])

    async def attached() -> str:
        """A message from Bob with a stored image: the path get_attachment fetches."""
        async with server.client() as bob:
            sent = await call(bob, "send_message", project_key=made.p, sender_name="Bob", to=["Alice"], subject="shot",
                              body_md=f"![dot]({PNG_URI})", attachments_policy="file", sender_token=made.tokens["Bob"])
            return sent["deliveries"][0]["payload"]["attachments"][0]["path"]

    async def uploaded() -> str:
        """A file Bob uploaded: the one describe_file and download_file read."""
        async with server.client() as bob:
            up = await call(bob, "upload_file", project_key=made.p, agent_name="Bob", name="walk.bin",
                            content_base64="d2FsayBmaWxl", agent_token=made.tokens["Bob"])
            return up["file"]["file_id"]

    made.file_id = run(uploaded())
    made.released_reservation = run(released_reservation())
    made.attachment = run(attached())
    run(asked_by_bob())
    hub = str(tmp_path_factory.mktemp("hub"))  # a remote for sync_project, named on the machine as an operator does
    subprocess.run(["git", "init", "-q", "--bare", hub], check=True)
    subprocess.run([sys.executable, "-m", "gitmail", "remote", "add", made.p, "hub", "file://" + hub], check=True,
                   capture_output=True, env=child_env(server.home), cwd=ROOT, timeout=120)
    return made


LEAVES = ("hard_delete_agent", "retire_agent", "deregister_agent", "sleep_agent")
"""Tools that would take Alice out of the rest of the walk."""
LAST = ("products_unlink", "take_seat", "renew_seat", "release_seat", "hard_delete_project")
"""Called after the others, in this order: the product reads need its link; a held seat refuses Alice's writes
without its token."""


def walk_arguments(world: World) -> dict[str, dict[str, Any]]:
    """What the access walk's sample arguments leave out for a call that succeeds."""
    window = world.samples()["window_uuid"]
    return {
        "send_message": {"to": ["Bob"]},
        "register_agent": {"name": "Alice", "window_uuid": window},
        "hard_delete_project": {"confirmation": "I UNDERSTAND"},
        "request_contact": {"to_agent": "Bob"},
        "respond_contact": {"from_agent": "Bob", "accept": True},
        "get_attachment": {"path": world.attachment},
        "describe_file": {"file_id": world.file_id},
        "download_file": {"file_id": world.file_id},
        "force_release_file_reservation": {"file_reservation_id": world.released_reservation},
        "force_release_build_slot": {"slot": "stale-slot"},
        "update_agent": {"purpose": "walks every tool"},
        "write_memory": {"text": "# Walk\nevery tool\n"},
    }


def test_every_answer_validates_against_its_listed_output_schema(world):
    async def walk():
        answers = {}
        async with world.server.client() as fresh:
            listed = {tool.name: tool for tool in await fresh.list_tools()}
            specs = await arguments_for(fresh, world)
        extra_args = walk_arguments(world)
        order = sorted(specs, key=lambda name: (name in LAST, LAST.index(name) if name in LAST else 0))
        order.insert(0, order.pop(order.index("register_agent")))  # binds the window rename and expire act on
        seat = None
        for name in order:
            if name in LEAVES:
                continue
            spec = specs[name]
            proof = {spec["token"]: world.tokens["Alice"]} if spec["token"] else {}
            seat_args = {"seat": seat} if seat and name in ("renew_seat", "release_seat") else {}
            async with world.server.client() as fresh:
                answers[name] = await fresh.call_tool(name, {**spec["args"], **extra_args.get(name, {}), **proof,
                                                             **seat_args}, raise_on_error=False)
            if name == "take_seat" and not answers[name].is_error:
                seat = answers[name].structured_content["seat"]["token"]
        return listed, answers

    listed, answers = run(walk())
    validated = set()
    for name, result in answers.items():
        schema = listed[name].output_schema
        if name in TEXT_ONLY:
            assert schema is None and result.structured_content is None, name
            continue
        assert schema is not None and schema.get("type") == "object", name
        assert schema.get("additionalProperties") is not True, f"{name} lists a bare open object"
        assert described(schema) == (name not in NOT_YET_TYPED), name
        if not result.is_error:
            jsonschema.validate(result.structured_content, schema)
            validated.add(name)
    refused = {name: (error_body(r)["code"], error_body(r)["message"][:120]) for name, r in answers.items()
               if r.is_error}
    typed = {name for name in answers if name not in NOT_YET_TYPED | TEXT_ONLY}
    assert typed <= validated, json.dumps(refused, indent=0)  # every typed answer was seen and validated
    assert len(validated) >= 50, json.dumps(refused, indent=0)  # placeholder IDs leave a few answering an error


def test_a_typed_answer_lists_its_fields_types_and_which_are_optional(server):
    async def listing():
        async with server.client() as client:
            return {tool.name: tool.output_schema for tool in await client.list_tools()}

    schemas = run(listing())
    sent = schemas["send_message"]
    assert sent["required"] == ["deliveries", "count", "created"]
    assert sent["properties"]["count"] == {"type": "integer"}
    assert sent["properties"]["held_message_id"] == {"type": "string"}  # present only while held
    reply = schemas["reply_message"]["properties"]
    assert reply["from"] == {"type": "string"} and reply["topic"] == {"type": ["string", "null"]}
    assert "sender" not in reply  # the key on the wire, not the field's Python name
    item = schemas["fetch_inbox"]["properties"]["result"]["items"]
    # a string every answer has is named in required alone, additionalProperties giving its type
    assert "from" in item["required"] and "from" not in item["properties"]
    assert item["additionalProperties"] == {"type": "string"} and item["properties"]["read_at"] == {
        "type": ["string", "null"]}
    assert "x-fastmcp-wrap-result" not in json.dumps(schemas) and "title" not in json.dumps(schemas)
    assert {name for name, schema in schemas.items() if schema and not described(schema)} == NOT_YET_TYPED


def test_whois_lists_the_profile_in_full_and_the_tools_that_register_list_its_name_and_token(server, tmp_path):
    async def scenario():
        async with server.client() as client:
            schemas = {tool.name: tool.output_schema for tool in await client.list_tools()}
            project = str(tmp_path / "brief")
            await call(client, "ensure_project", human_key=project)
            made = await client.call_tool("register_agent", {"project_key": project, "program": "p", "model": "m"})
            shown = await client.call_tool("whois", {"project_key": project, "agent_name": made.structured_content[
                "name"], "include_recent_commits": False})
            return schemas, made.structured_content, shown.structured_content

    schemas, made, shown = run(scenario())
    whois = schemas["whois"]
    assert {"status", "program", "lifecycle"} <= set(whois["required"]) and whois["properties"]["scopes"] == {
        "type": "array", "items": {"type": "string"}}
    for name in ("register_agent", "create_agent_identity"):
        brief = schemas[name]
        assert brief["properties"] == {"name": {"type": "string"}, "registration_token": {"type": "string"},
                                       "replayed": {"type": "boolean"}}, name
        assert brief["required"] == ["name"] and "additionalProperties" not in brief, name  # open to the profile
    # the answer is the whole profile all the same, valid against both listings
    jsonschema.validate(made, schemas["register_agent"])
    jsonschema.validate({k: v for k, v in made.items() if k != "registration_token"}, whois)
    assert set(made) - {"registration_token"} == set(shown) and made["registration_token"]
    # a choice of plain types is one type list, in both directions
    assert schemas["acknowledge_message"]["properties"]["message_id"] == {"type": ["string", "integer"]}


def test_toon_keeps_the_structured_content_and_carries_the_text(server, tmp_path):
    async def scenario():
        async with server.client() as client:
            project = str(tmp_path / "toon")
            await call(client, "ensure_project", human_key=project)
            for name in ("Toon", "Json"):
                await call(client, "register_agent", project_key=project, program="p", model="m", name=name)
                await call(client, "set_contact_policy", project_key=project, agent_name=name, policy="open")
            await call(client, "send_message", project_key=project, sender_name="Toon", to=["Json"], subject="s",
                       body_md="b")
            made = await client.call_tool("summarize_recent", {"project_key": project, "format": "toon"})
            plain = await client.call_tool("fetch_summary", {"project_key": project})
            toon = await client.call_tool("fetch_summary", {"project_key": project, "format": "toon"})
            return made, plain, toon

    made, plain, toon = run(scenario())  # the client validated each structuredContent against the listed schema
    assert made.structured_content["mode"] == "extractive" and not is_json(made.content[0].text)
    assert plain.structured_content["result"] and toon.structured_content == plain.structured_content
    assert json.loads(plain.content[0].text) == plain.structured_content["result"]
    assert not is_json(toon.content[0].text) and "cached: true" in toon.content[0].text


def is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


MCP1_TYPED = r"""
import asyncio, json, sys
from mcp import ClientSession
from mcp.client.streamable_http import streamablehttp_client

async def main(url, project):
    async with streamablehttp_client(url) as (read, write, _):
        async with ClientSession(read, write) as session:
            await session.initialize()
            async def call(tool, **args):
                result = await session.call_tool(tool, args)  # validates structuredContent against outputSchema
                assert not result.isError, result.content[0].text
                return result
            await call("ensure_project", human_key=project)
            for name in ("Ann", "Ben"):
                await call("register_agent", project_key=project, program="p", model="m", name=name)
                await call("set_contact_policy", project_key=project, agent_name=name, policy="open")
            sent = await call("send_message", project_key=project, sender_name="Ann", to=["Ben"], subject="s",
                              body_md="b")
            message = sent.structuredContent["deliveries"][0]["payload"]
            reply = await call("reply_message", project_key=project, message_id=message["id"],
                               sender_name="Ben", body_md="r")
            inbox = await call("fetch_inbox", project_key=project, agent_name="Ben", include_bodies=True)
            read = await call("mark_message_read", project_key=project, agent_name="Ben", message_id=message["id"])
            acked = await call("acknowledge_message", project_key=project, agent_name="Ben",
                               message_id=message["id"])
            started = await call("macro_start_session", human_key=project, program="p", model="m", agent_name="Ben",
                                 file_reservation_paths=["docs/*"])
            reserved = await call("file_reservation_paths", project_key=project, agent_name="Ann", paths=["src/*"])
            released = await call("release_file_reservations", project_key=project, agent_name="Ann")
            toon = await call("summarize_recent", project_key=project, format="toon")
            print(json.dumps({"started": started.structuredContent,
                              "reserved": reserved.structuredContent, "released": released.structuredContent,
                              "sent": sent.structuredContent, "reply": reply.structuredContent,
                              "inbox": inbox.structuredContent, "read": read.structuredContent,
                              "acked": acked.structuredContent,
                              "toon_text": toon.content[0].text, "toon": toon.structuredContent}))

asyncio.run(main(sys.argv[1], sys.argv[2]))
"""


def test_the_mcp1_client_validates_and_reads_typed_answers(server, tmp_path):
    python = mcp1.ensure()
    env = child_env(server.home)
    env.pop("PYTHONPATH", None)
    proc = subprocess.run([python, "-c", MCP1_TYPED, server.url, str(tmp_path / "one")], capture_output=True,
                          text=True, env=env, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    seen = json.loads(proc.stdout)
    assert seen["sent"]["created"] is True and seen["sent"]["count"] == 1
    assert seen["reply"]["from"] == "Ben" and seen["reply"]["thread_id"] == seen["sent"]["deliveries"][0][
        "payload"]["thread_id"]
    assert [(m["from"], m["kind"], m["body_md"], m["read_at"]) for m in seen["inbox"]["result"]] == [
        ("Ann", "to", "b", None)]
    assert seen["read"]["read"] is True and seen["acked"]["acknowledged"] is True
    assert seen["acked"]["read_at"] == seen["read"]["read_at"]
    started = seen["started"]
    assert started["agent"]["name"] == "Ben" and started["inbox"][0]["acknowledged_at"] == seen["acked"][
        "acknowledged_at"]
    assert [g["path_pattern"] for g in started["file_reservations"]["granted"]] == ["docs/*"]
    granted = seen["reserved"]["granted"]
    assert [g["path_pattern"] for g in granted] == ["src/*"] and seen["reserved"]["conflicts"] == []
    assert seen["released"]["file_reservation_ids"] == [granted[0]["id"]]
    assert seen["toon"]["mode"] == "extractive" and not is_json(seen["toon_text"])
