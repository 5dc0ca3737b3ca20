"""Derived state damaged while the server runs: it never crashes, answers, and rebuilds.

Each test runs a real ``gitmail serve``, damages the files under
``derived/`` the way a person or a stray script would (truncating, deleting,
holding a lock), and then asks it over MCP.
"""

from __future__ import annotations

import glob
import os
import shutil
import sqlite3

import pytest

from gitmail import Mail, Store

from .mcp_harness import ServerProcess, call, run

PROJECT = "/work/projects/damaged"


@pytest.fixture
def served(tmp_path):
    home = str(tmp_path / "home")
    mail = Mail(Store(home, background=False))
    mail.ensure_project(PROJECT)
    tokens = {name: mail.register_agent(PROJECT, "test", "m", name=name)["registration_token"]
              for name in ("Sender", "Reader")}
    mail.set_contact_policy(PROJECT, "Reader", "open")
    server = ServerProcess(home)
    yield server, tokens
    server.stop()


def derived(server: ServerProcess) -> str:
    return glob.glob(os.path.join(server.home, "derived", "*", "index-v*"))[0]


async def send(client, tokens, subject: str) -> str:
    sent = await call(client, "send_message", project_key=PROJECT, sender_name="Sender", to=["Reader"],
                      subject=subject, body_md=f"the {subject} pangolin", sender_token=tokens["Sender"])
    return sent["deliveries"][0]["payload"]["id"]


async def inbox(client, tokens) -> list[str]:
    listed = await call(client, "fetch_inbox", project_key=PROJECT, agent_name="Reader", agent_token=tokens["Reader"])
    return [m["subject"] for m in (listed if isinstance(listed, list) else listed["result"])]


async def found(client) -> set[str]:
    hits = await call(client, "search_messages", project_key=PROJECT, query="pangolin")
    return {hit["subject"] for hit in (hits if isinstance(hits, list) else hits["result"])}


def test_no_shared_memory_file_can_be_truncated_under_the_server(served):
    server, tokens = served

    async def scenario():
        async with server.client() as client:
            await send(client, tokens, "first")
            assert await inbox(client, tokens) == ["first"]
            shm = os.path.join(derived(server), "meta.sqlite-shm")
            if os.path.exists(shm):  # SQLite's WAL index is memory-mapped: truncating it was SIGBUS
                os.truncate(shm, 0)
            await send(client, tokens, "second")
            return await inbox(client, tokens), await found(client)

    listed, hits = run(scenario())
    assert server.proc.poll() is None, "the server is still running"
    assert listed == ["second", "first"] and hits == {"first", "second"}


def test_a_truncated_metadata_store_is_rebuilt_and_reads_answer(served):
    server, tokens = served

    async def scenario():
        async with server.client() as client:
            await send(client, tokens, "first")
            assert await inbox(client, tokens) == ["first"]
            os.truncate(os.path.join(derived(server), "meta.sqlite"), 0)
            await send(client, tokens, "second")
            return await inbox(client, tokens), await found(client)

    listed, hits = run(scenario())
    assert listed == ["second", "first"] and hits == {"first", "second"}


def delete_while_served(folder: str) -> None:
    """Delete ``folder`` as `rm -rf` would, again if the server's index work wrote into it meanwhile."""
    for _ in range(50):
        shutil.rmtree(folder, ignore_errors=True)
        if not os.path.exists(folder):
            return
    raise AssertionError(f"{folder} keeps being written to")


def test_deleting_derived_state_while_serving_rebuilds_it(served):
    server, tokens = served

    async def scenario():
        async with server.client() as client:
            await send(client, tokens, "first")
            assert await found(client) == {"first"}
            delete_while_served(os.path.join(server.home, "derived"))
            after_search = await found(client)
            await send(client, tokens, "second")
            return after_search, await inbox(client, tokens), await found(client)

    after_search, listed, hits = run(scenario())
    assert after_search == {"first"}
    assert listed == ["second", "first"] and hits == {"first", "second"}
    assert os.path.exists(os.path.join(derived(server), "meta.sqlite"))


@pytest.mark.slow
def test_a_metadata_store_locked_by_another_process_is_answered_from_the_repository(served):
    server, tokens = served

    async def scenario():
        async with server.client() as client:
            await send(client, tokens, "first")
            assert await inbox(client, tokens) == ["first"]
            holder = sqlite3.connect(os.path.join(derived(server), "meta.sqlite"), isolation_level=None)
            try:
                holder.execute("BEGIN EXCLUSIVE")  # a stray process keeping the file locked
                await send(client, tokens, "second")
                listed = await inbox(client, tokens)
            finally:
                holder.execute("ROLLBACK")
                holder.close()
            return listed, await inbox(client, tokens)

    while_locked, after = run(scenario())
    assert while_locked == ["second", "first"], "answered from the repository while the index could not"
    assert after == ["second", "first"]
