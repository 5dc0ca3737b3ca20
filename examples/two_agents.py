"""Two agents coordinate through gitmail over MCP, then a human reads the archive with git.

Run it from anywhere:

    python examples/two_agents.py

It starts `gitmail serve` on a free loopback port with a throw-away store,
connects two MCP clients (two agents, each in its own MCP session), and has
them register, send, reply, acknowledge and search. Then it inspects the
project's archive with nothing but the `git` command: `git log`, `git show`
and `git grep`.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
import time

from fastmcp import Client

PROJECT = "/work/acme/backend"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_server(home: str, port: int) -> subprocess.Popen:
    env = dict(os.environ, GITMAIL_HOME=home)
    env.pop("GITMAIL_TOKEN", None)
    proc = subprocess.Popen([sys.executable, "-m", "gitmail", "serve", "--port", str(port)], env=env)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"gitmail serve exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return proc
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise SystemExit("gitmail serve did not start")


async def tool(client: Client, tool_name: str, /, **arguments: object) -> object:
    """Call a tool; stop with its error body if it fails."""
    result = await client.call_tool(tool_name, arguments, raise_on_error=False)
    if result.is_error:
        raise SystemExit(f"{tool_name} failed: {result.content[0].text}")
    if result.structured_content is None:
        return json.loads(result.content[0].text)
    if ((result.meta or {}).get("fastmcp") or {}).get("wrap_result"):  # a list arrives as {"result": [...]}
        return result.structured_content["result"]
    return result.structured_content  # the JSON as sent (result.data: objects built from the output schema)


async def coordinate(url: str) -> dict[str, str]:
    # Each client keeps one MCP session, so an agent registered in it needs no token afterwards.
    async with Client(url, mode="legacy") as blue, Client(url, mode="legacy") as green:
        project = await tool(blue, "ensure_project", human_key=PROJECT)
        await tool(blue, "register_agent", project_key=PROJECT, program="claude-code", model="opus",
                   name="BlueLake", task_description="API routes for /users")
        await tool(green, "register_agent", project_key=PROJECT, program="codex-cli", model="gpt5",
                   name="GreenCastle", task_description="database migrations")
        print(f"project {project['slug']}: BlueLake and GreenCastle registered")

        # A first message to a stranger needs a contact: ask, and the other side accepts.
        await tool(blue, "request_contact", project_key=PROJECT, from_agent="BlueLake", to_agent="GreenCastle",
                   reason="the users API needs a schema change")
        await tool(green, "respond_contact", project_key=PROJECT, to_agent="GreenCastle", from_agent="BlueLake",
                   accept=True)
        print("GreenCastle accepted contact from BlueLake")

        sent = await tool(blue, "send_message", project_key=PROJECT, sender_name="BlueLake", to=["GreenCastle"],
                          subject="Plan for the users table",
                          body_md="I will add `GET /users/{id}`. Can you add an `email` column first?",
                          ack_required=True, importance="high")
        first = sent["deliveries"][0]["payload"]
        print(f"BlueLake -> GreenCastle: {first['subject']!r} ({first['id']})")

        inbox = await tool(green, "fetch_inbox", project_key=PROJECT, agent_name="GreenCastle", include_bodies=True)
        print(f"GreenCastle's inbox: {[m['subject'] for m in inbox if m['id'] == first['id']]}")
        await tool(green, "acknowledge_message", project_key=PROJECT, agent_name="GreenCastle", message_id=first["id"])
        reply = await tool(green, "reply_message", project_key=PROJECT, message_id=first["id"],
                           sender_name="GreenCastle", body_md="Done: migration 0042 adds `email` (unique).")
        print(f"GreenCastle replied in thread {reply['thread_id']}")

        caught_up = await tool(blue, "catch_up", project_key=PROJECT, agent_name="BlueLake")
        print(f"BlueLake catches up: {[m['subject'] for m in caught_up['messages']]}")
        # The search index takes new mail in moments after it is committed, never blocking the sender.
        hits: list = []
        for _ in range(50):
            hits = await tool(blue, "search_messages", project_key=PROJECT, query="migration")
            if hits:
                break
            await asyncio.sleep(0.1)
        print(f"search 'migration': {[h['subject'] for h in hits]}")
        return {"slug": project["slug"], "message": first["id"], "thread": reply["thread_id"]}


def git(git_dir: str, *args: str) -> str:
    return subprocess.run(["git", "--git-dir", git_dir, *args], check=True, capture_output=True, text=True).stdout


def main() -> None:
    with tempfile.TemporaryDirectory() as home:
        port = free_port()
        server = start_server(home, port)
        try:
            ids = asyncio.run(coordinate(f"http://127.0.0.1:{port}/mcp"))
        finally:
            server.terminate()
            server.wait(10)
        archive = os.path.join(home, "projects", ids["slug"], "archive.git")
        print("\n$ git log --format='%h %an: %s' main")
        print(git(archive, "log", "--format=%h %an: %s", "main"))
        print(f"$ git ls-tree -r --name-only main | grep {ids['message']}")
        listing = git(archive, "ls-tree", "-r", "--name-only", "main")
        print("\n".join(line for line in listing.splitlines() if ids["message"] in line))
        path = next(line for line in listing.splitlines() if line.startswith("messages/") and ids["message"] in line)
        print(f"\n$ git show main:{path}")
        print(git(archive, "show", f"main:{path}"))
        print("$ git grep -l migration main")
        print(git(archive, "grep", "-l", "migration", "main"))


if __name__ == "__main__":
    main()
