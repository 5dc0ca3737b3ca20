"""The access model of docs/security.md, walked over every tool and resource of a real server.

The table at the end of docs/security.md is the specification: each tool and
resource the server lists must be in it with the rule the server publishes,
and then behave by it. The server under test listens on loopback without a
bearer token: the model holds there too.
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import uuid
from typing import Any

import pytest

from gitmail import Store

from .mcp_harness import ROOT, ServerProcess, call, error_body, fail, read_error, read_json, run

DOC = os.path.join(ROOT, "docs", "security.md")


def documented_rules() -> dict[str, str]:
    """``name -> rule`` from the table in docs/security.md, rules as tools/list publishes them."""
    with open(DOC, encoding="utf-8") as handle:
        text = handle.read()
    rules = {}
    for name, rule in re.findall(r"^\| `([^`]+)` \| ([a-z_: ]+) \|$", text, flags=re.M):
        rules[name] = rule.replace(": ", ":")
    return rules


def published_rules() -> dict[str, str]:
    import tempfile

    from gitmail.server import build_server
    from gitmail.server.profiles import choose

    with tempfile.TemporaryDirectory() as home:
        mcp = build_server(Store(home, background=False), tools=choose("all"))
        tools = asyncio.run(mcp.list_tools())
        templates = asyncio.run(mcp.list_resource_templates())
        plain = asyncio.run(mcp.list_resources())
    rules = {t.name: t.meta["gitmail/access"] for t in tools}
    for t in templates:
        rules[t.uri_template.split("{?")[0].replace("*}", "}")] = t.meta["gitmail/access"]
    for r in plain:
        rules[str(r.uri)] = r.meta["gitmail/access"]
    return rules


def test_every_tool_and_resource_has_the_documented_rule():
    documented, published = documented_rules(), published_rules()
    assert sorted(set(published) - set(documented)) == [], "undocumented in docs/security.md"
    assert sorted(set(documented) - set(published)) == [], "documented but not served"
    assert {n: r for n, r in published.items() if documented[n] != r} == {}


# -- the walk ---------------------------------------------------------------------------------------------

class World:
    """Project P (Alice, whose session is `owner`, and Bob) and project Q (Mallory, whose session is `intruder`)."""

    def __init__(self, server: ServerProcess, base: str):
        self.server = server
        self.p = os.path.join(base, "p-repo")  # P's key is a real git repository, as a project's usually is
        os.makedirs(self.p)
        subprocess.run(["git", "init", "-q", self.p], check=True)
        self.q = os.path.join(base, "q-" + uuid.uuid4().hex[:8])
        self.tokens: dict[str, str] = {}
        self.message_id = ""
        self.thread_id = ""
        self.slug = ""

    def tip(self) -> str | None:
        return Store(self.server.home, background=False).archive(self.p).tip()

    def samples(self) -> dict[str, Any]:
        """A valid value for each required argument a tool may have, naming P and Alice."""
        return {
            "project_key": self.p, "human_key": self.p, "agent_name": "Alice", "sender_name": "Alice",
            "from_agent": "Alice", "to_agent": "Alice", "requester": "Alice", "target": "Bob", "to": ["Bob"],
            "subject": "s", "body_md": "b", "message_id": self.message_id, "thread_id": self.thread_id,
            "topic_name": "walk", "query": "hello", "confirmation": "not yet", "paths": ["src/walk.py"],
            "file_reservation_id": "00000000000000000000000", "seat": "seat-1-aaaaaaaaaaaaaaaa", "entry": "note",
            "capabilities": ["review"], "accept": True, "path": "attachments/aa/none.webp", "code_repo_path": self.p,
            "program": "p", "model": "m", "policy": "open", "window_uuid": "0b5e7c1a-walk-4f00",
            "new_display_name": "Alice", "product_key": "walk-product", "slot": "walk-slot", "epoch": 1,
            "holder": "Bob", "scope": ["viewer@*"], "name": "walk.txt", "content_base64": "d2Fsaw==",
            "file_id": "0" * 64, "channel": "walk-channel", "folder": "walk", "file": "AGENTS.md", "text": "walk",
        }


PER_TOOL = {"set_attachments_policy": {"policy": "auto"}}


async def arguments_for(client, world: World) -> dict[str, dict[str, Any]]:
    """Each tool's required arguments from its input schema, filled from the samples."""
    samples = world.samples()
    rules = await read_json(client, "resource://tooling/access")
    out = {}
    for tool in await client.list_tools():
        schema = tool.input_schema
        required = schema.get("required", [])
        missing = [r for r in required if r not in samples]
        assert not missing, f"no sample value for {tool.name}'s {missing}: add one to World.samples"
        args = {name: samples[name] for name in required}
        # A member rule names its prover with agent_name when the tool has one; an agent rule names its agent.
        if "agent_name" in schema["properties"] and "agent_name" not in args:
            args["agent_name"] = "Alice"
        if tool.name == "uninstall_precommit_guard":
            args["project_key"] = world.p
        args.update(PER_TOOL.get(tool.name, {}))
        out[tool.name] = {"args": args, "rule": rules[tool.name],
                          "token": next((t for t in ("sender_token", "agent_token") if t in schema["properties"]),
                                        None)}
    return out


async def build(world: World, owner, intruder) -> None:
    await call(owner, "ensure_project", human_key=world.p)
    alice = await call(owner, "register_agent", project_key=world.p, program="p", model="m", name="Alice")
    world.tokens["Alice"] = alice["registration_token"]
    await call(owner, "set_contact_policy", project_key=world.p, agent_name="Alice", policy="open")
    world.slug = (await call(owner, "ensure_project", human_key=world.p))["slug"]
    await call(owner, "products_link", product_key="walk-product", project_key=world.p)
    async with world.server.client() as bob:
        b = await call(bob, "register_agent", project_key=world.p, program="p", model="m", name="Bob")
        world.tokens["Bob"] = b["registration_token"]
        await call(bob, "set_contact_policy", project_key=world.p, agent_name="Bob", policy="open")
        await call(bob, "register_agent", project_key=world.p, program="p", model="m", name="Carol")
        sent = await call(bob, "send_message", project_key=world.p, sender_name="Bob", to=["Alice"],
                          subject="hello walk", body_md="the secret plan", topic="walk", bcc=["Carol"])
    world.message_id = sent["deliveries"][0]["payload"]["id"]
    world.thread_id = sent["deliveries"][0]["payload"]["thread_id"]
    await call(intruder, "ensure_project", human_key=world.q)
    mallory = await call(intruder, "register_agent", project_key=world.q, program="p", model="m", name="Mallory")
    world.tokens["Mallory"] = mallory["registration_token"]


def built_world(server: ServerProcess, base: str) -> World:
    """The world of the walk on ``server``, its projects under ``base``."""
    world = World(server, base)

    async def setup():
        async with server.client() as owner, server.client() as intruder:
            await build(world, owner, intruder)

    run(setup())
    return world


@pytest.fixture(scope="module")
def world(server, tmp_path_factory):
    return built_world(server, str(tmp_path_factory.mktemp("access")))


def test_without_proof_every_guarded_tool_is_refused_and_changes_nothing(world):
    async def walk():
        refused = {}
        async with world.server.client() as intruder:
            # the intruder proved Mallory, an agent of another project
            await call(intruder, "whois", project_key=world.q, agent_name="Mallory")
            await call(intruder, "list_contacts", project_key=world.q, agent_name="Mallory",
                       agent_token=world.tokens["Mallory"])
            for name, spec in (await arguments_for(intruder, world)).items():
                if spec["rule"] == "open":
                    continue
                attempts = [dict(spec["args"])]  # no token at all
                if spec["token"]:  # Mallory's token, under both names
                    attempts.append({**spec["args"], spec["token"]: world.tokens["Mallory"]})
                    attempts.append({**spec["args"], "registration_token": world.tokens["Mallory"]})
                for args in attempts:
                    before = world.tip()
                    result = await intruder.call_tool(name, args, raise_on_error=False)
                    body = error_body(result) if result.is_error else {"code": "OK", "data": {}}
                    code = body["code"] if "rule" in body["data"] else f"{body['code']} (not by the access rule)"
                    refused.setdefault(name, []).append((code, world.tip() == before))
        return refused

    refused = run(walk())
    wrong = {name: outcomes for name, outcomes in refused.items()
             if any(code != "UNAUTHORIZED" or not unchanged for code, unchanged in outcomes)}
    assert wrong == {}
    assert len(refused) >= 40


def test_with_proof_no_guarded_tool_is_refused(world):
    """The same calls pass the access check for Alice: by her session, by her token, and by the token's alias."""

    async def walk():
        outcomes: dict[str, list[dict[str, Any]]] = {}
        async with world.server.client() as fresh:
            specs = await arguments_for(fresh, world)
        for name, spec in specs.items():
            if spec["rule"] == "open" or name in ("hard_delete_agent", "retire_agent", "deregister_agent",
                                                  "sleep_agent"):
                continue  # these would take Alice out of the rest of the walk; checked below on their own
            ways = [{spec["token"]: world.tokens["Alice"]}] if spec["token"] else []
            ways.append({"registration_token": world.tokens["Alice"]})
            for extra in ways:
                async with world.server.client() as fresh:  # a new session: only the token proves Alice
                    result = await fresh.call_tool(name, {**spec["args"], **extra}, raise_on_error=False)
                outcomes.setdefault(name, []).append(error_body(result) if result.is_error
                                                     else {"code": "OK", "data": {}})
        return outcomes

    outcomes = run(walk())
    refused = {n: o for n, o in outcomes.items()
               if any(x["code"] == "UNAUTHORIZED" and "rule" in x["data"] for x in o)}
    assert refused == {}


def test_an_agent_may_retire_sleep_and_delete_only_itself(world):
    async def scenario():
        async with world.server.client() as bob:
            await call(bob, "register_agent", project_key=world.p, program="p", model="m", name="Bob",
                       agent_token=world.tokens["Bob"])
            out = {}
            for tool in ("retire_agent", "deregister_agent"):
                out[tool] = (await fail(bob, tool, project_key=world.p, agent_name="Alice"))["code"]
            out["hard_delete_agent"] = (await fail(bob, "hard_delete_agent", project_key=world.p,
                                                   agent_name="Alice", confirmation="I UNDERSTAND"))["code"]
            out["sleep other"] = (await fail(bob, "sleep_agent", project_key=world.p, agent_name="Bob",
                                             target="Alice"))["code"]
            return out

    assert run(scenario()) == {"retire_agent": "UNAUTHORIZED", "deregister_agent": "UNAUTHORIZED",
                               "hard_delete_agent": "UNAUTHORIZED", "sleep other": "NOT_ABOVE"}


RESOURCES = {
    "resource://inbox/Alice": "agent", "resource://mailbox/Alice": "agent", "resource://outbox/Alice": "agent",
    "resource://views/urgent-unread/Alice": "agent", "resource://views/ack-required/Alice": "agent",
    "resource://views/ack-overdue/Alice": "agent",
}


def test_resources_follow_the_model(world):
    member = [f"resource://message/{world.message_id}", f"resource://thread/{world.thread_id}"]

    async def scenario():
        out: dict[str, Any] = {}
        async with world.server.client() as intruder, world.server.client() as owner:
            await call(intruder, "list_contacts", project_key=world.q, agent_name="Mallory",
                       agent_token=world.tokens["Mallory"])
            await call(owner, "list_contacts", project_key=world.p, agent_name="Alice",
                       agent_token=world.tokens["Alice"])
            for uri in [*RESOURCES, *member]:
                # the intruder, naming P: refused; not naming it: its own project Q, never a search of the store
                out[uri, "intruder"] = (await read_error(intruder, f"{uri}?project={world.p}"))["code"]
                out[uri, "owner"] = await read_json(owner, f"{uri}?project={world.p}")
                out[uri, "owner, no project"] = await read_json(owner, uri)
            async with world.server.client() as stranger:
                out["stranger"] = (await read_error(stranger, member[0]))["code"]
            out["agents"] = await read_json(intruder, f"resource://agents/{world.p}")
            out["message"] = await read_json(owner, f"{member[0]}?project={world.p}")
        return out

    out = run(scenario())
    for uri in [*RESOURCES, *member]:
        assert out[uri, "intruder"] == "UNAUTHORIZED", uri
        assert out[uri, "owner"] == out[uri, "owner, no project"], uri
    assert out["stranger"] == "INVALID_ARGUMENT"  # no project named, none proved: nothing is looked up
    assert [a["name"] for a in out["agents"]["agents"]] == ["Alice", "Bob", "Carol"]  # the directory is open
    assert "bcc" not in out["message"] and out["message"]["body_md"] == "the secret plan"


def test_a_body_reads_the_same_on_every_path_and_bcc_lists_never(world):
    async def scenario():
        async with world.server.client() as owner:
            args = {"project_key": world.p, "agent_name": "Alice", "agent_token": world.tokens["Alice"]}
            topic = await call(owner, "fetch_topic", topic_name="walk", **args)
            message = await read_json(owner, f"resource://message/{world.message_id}?project={world.p}")
            thread = await read_json(owner, f"resource://thread/{world.thread_id}?project={world.p}")
            inbox = await call(owner, "fetch_inbox", include_bodies=True, **args)
            hits = await call(owner, "search_messages", query="secret", **args)
            return topic, message, thread, inbox, hits

    topic, message, thread, inbox, hits = run(scenario())
    first = [next(m for m in listed if m["id"] == world.message_id) for listed in (topic, thread["messages"], inbox)]
    views = [*first, message]
    assert {v["body_md"] for v in views} == {"the secret plan"}
    assert all("bcc" not in v for v in views)
    assert [h["id"] for h in hits] == [world.message_id] and all("bcc" not in h for h in hits)


def test_a_mistyped_project_is_not_found_with_the_keys_nearby(world):
    async def scenario():
        async with world.server.client() as client:
            return await fail(client, "fetch_inbox", project_key=world.p + "x", agent_name="Alice",
                              agent_token=world.tokens["Alice"])

    body = run(scenario())
    assert body["code"] == "NOT_FOUND" and world.p in body["data"]["nearby"] and world.p in body["message"]


def test_whois_shows_recent_commits_only_to_a_member(world):
    async def scenario():
        async with world.server.client() as stranger, world.server.client() as owner:
            await call(owner, "list_contacts", project_key=world.p, agent_name="Alice",
                       agent_token=world.tokens["Alice"])
            return (await call(stranger, "whois", project_key=world.p, agent_name="Bob"),
                    await call(owner, "whois", project_key=world.p, agent_name="Bob"))

    outside, inside = run(scenario())
    assert "recent_commits" not in outside and "recent_commits_note" in outside
    assert any("hello walk" in c["summary"] for c in inside["recent_commits"])


async def _guard_calls(server: ServerProcess, key: str, repos: dict[str, str]) -> dict[str, Any]:
    """Install, then remove, the guard in each repository over MCP, as an agent of the project at ``key``."""
    async with server.client() as client:
        await call(client, "ensure_project", human_key=key)
        await call(client, "register_agent", project_key=key, program="p", model="m", name="Alice")
        out: dict[str, Any] = {}
        for name, path in repos.items():
            for tool in ("install_precommit_guard", "uninstall_precommit_guard"):
                result = await client.call_tool(tool, {"project_key": key, "code_repo_path": path},
                                                raise_on_error=False)
                out[f"{tool.split('_')[0]} {name}"] = error_body(result) if result.is_error else "OK"
        return out


@pytest.mark.slow  # two gitmail serve processes, and the CLI
def test_agents_touch_the_guard_only_under_the_operators_roots(tmp_path):
    """Not even in the project's own repository by default: hooks run as whoever commits there."""
    allowed = tmp_path / "allowed"
    repos = {"key": str(tmp_path / "key"), "inside": str(allowed / "inside"), "elsewhere": str(tmp_path / "else"),
             "climbing out": str(allowed / ".." / "else"), "linked out": str(allowed / "link")}
    for path in (repos["key"], repos["inside"], repos["elsewhere"]):
        os.makedirs(path)
        subprocess.run(["git", "init", "-q", path], check=True)
    os.symlink(repos["elsewhere"], repos["linked out"])
    hook = os.path.join(repos["key"], ".git", "hooks", "pre-commit")
    outcomes = {}
    for setting in (None, str(allowed)):
        server = ServerProcess(str(tmp_path / f"home-{bool(setting)}"),
                               env={"GITMAIL_GUARD_ROOTS": setting} if setting else None)
        try:
            outcomes[setting] = run(_guard_calls(server, repos["key"], repos))
        finally:
            server.stop()
        assert not os.path.exists(hook) and not os.path.exists(os.path.join(repos["elsewhere"], ".git", "hooks",
                                                                           "pre-commit"))
    by_default, with_roots = outcomes[None], outcomes[str(allowed)]
    assert all(body != "OK" and body["code"] == "PATH_NOT_ALLOWED" for body in by_default.values()), by_default
    assert {name for name, body in with_roots.items() if body == "OK"} == {"install inside", "uninstall inside"}
    assert all(body["code"] == "PATH_NOT_ALLOWED" for body in with_roots.values() if body != "OK"), with_roots
    refusal = by_default["install key"]
    assert "GITMAIL_GUARD_ROOTS" in refusal["message"] and "lists no folder on this server" in refusal["message"]
    assert f"`gitmail guard install {repos['key']} {repos['key']}`" in refusal["message"]
    assert refusal["data"]["setting"] == "GITMAIL_GUARD_ROOTS"
    assert f"`gitmail guard uninstall {repos['key']}`" in by_default["uninstall key"]["message"]
    assert "lists no folder that holds" in with_roots["install elsewhere"]["message"]
    # The operator is unaffected: the command the refusal names installs the guard.
    home = str(tmp_path / "home-False")
    cli = subprocess.run([sys.executable, "-m", "gitmail", "--home", home, "guard", "install", repos["key"],
                          repos["key"]], capture_output=True, text=True, cwd=ROOT)
    assert cli.returncode == 0, cli.stderr
    assert os.path.exists(hook)
