"""Products over MCP: a real server on loopback, the official client, two projects read together."""

from __future__ import annotations

import pytest

from .mcp_harness import call, fail, run

SHARES_SERVER = True  # each test makes a project of its own: the process's one server serves them all

pytestmark = pytest.mark.slow

FRONT, BACK = "/data/shop-mcp/frontend", "/data/shop-mcp/backend"


async def _setup(server) -> dict[str, str]:
    """Alice in both projects (one session registers both), Bob writing to her in each; the shop links both."""
    tokens = {}
    async with server.client() as bob:
        for key in (FRONT, BACK):
            await call(bob, "ensure_project", human_key=key)
            tokens[f"Bob@{key}"] = (await call(bob, "register_agent", project_key=key, program="p", model="m",
                                               name="Bob"))["registration_token"]
    async with server.client() as alice:
        for key in (FRONT, BACK):
            tokens[f"Alice@{key}"] = (await call(alice, "register_agent", project_key=key, program="p", model="m",
                                                 name="Alice"))["registration_token"]
            await call(alice, "set_contact_policy", project_key=key, agent_name="Alice", policy="open")
            await call(alice, "products_link", product_key="Shop-MCP", project_key=key, name="Shop")
    async with server.client() as bob:
        for key in (FRONT, BACK):
            where = key.rsplit("/", 1)[1]
            await call(bob, "send_message", project_key=key, sender_name="Bob", to=["Alice"],
                       subject=f"invoice totals in the {where}", body_md="totals are off by a cent",
                       sender_token=tokens[f"Bob@{key}"])
    return tokens


def test_product_wide_search_and_inbox_across_two_projects(server):
    async def scenario():
        tokens = await _setup(server)
        out = {}
        async with server.client() as alice:
            for key in (FRONT, BACK):  # this session proves Alice in both projects
                await call(alice, "whois", project_key=key, agent_name="Alice")
                await call(alice, "list_contacts", project_key=key, agent_name="Alice",
                           agent_token=tokens[f"Alice@{key}"])
            out["product"] = await call(alice, "ensure_product", product_key="shop-mcp")
            out["search"] = await call(alice, "search_messages_product", product_key="shop-mcp", query="invoice")
            out["inbox"] = await call(alice, "fetch_inbox_product", product_key="shop-mcp", agent_name="Alice",
                                      include_bodies=True)
        async with server.client() as front_only:  # a token proves Alice in the frontend only
            out["front"] = await call(front_only, "fetch_inbox_product", product_key="shop-mcp", agent_name="Alice",
                                      agent_token=tokens[f"Alice@{FRONT}"])
            out["front search"] = await call(front_only, "search_messages_product", product_key="shop-mcp",
                                             query="invoice")
        async with server.client() as stranger:
            out["stranger"] = await fail(stranger, "search_messages_product", product_key="shop-mcp",
                                         query="invoice")
            out["unknown"] = await fail(stranger, "fetch_inbox_product", product_key="no-such-product",
                                        agent_name="Alice")
        return out

    out = run(scenario())
    assert out["product"]["name"] == "Shop" and [p["human_key"] for p in out["product"]["projects"]] == [BACK, FRONT]
    assert sorted(h["project"] for h in out["search"]["results"]) == [BACK, FRONT]
    assert all(h["project"].endswith(h["subject"].rsplit(" ", 1)[1]) for h in out["search"]["results"])
    assert out["search"]["not_read"] == []
    inbox = out["inbox"]["messages"]
    assert sorted(m["project"] for m in inbox) == [BACK, FRONT]
    assert {m["body_md"] for m in inbox} == {"totals are off by a cent"}
    # only what was proved is read; the rest is named, not read
    assert [m["project"] for m in out["front"]["messages"]] == [FRONT]
    assert [p["project"] for p in out["front"]["not_read"]] == [BACK]
    assert [h["project"] for h in out["front search"]["results"]] == [FRONT]
    assert out["stranger"]["code"] == "UNAUTHORIZED" and len(out["stranger"]["data"]["not_read"]) == 2
    assert out["unknown"]["code"] == "NOT_FOUND"
