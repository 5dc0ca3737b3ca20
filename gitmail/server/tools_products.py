"""Product tools: group projects into a product, and read the product's projects together."""

from __future__ import annotations

from dataclasses import field
from typing import Annotated

from fastmcp import Context
from pydantic import Field

from gitmail.mail.facade import (
    ProductHit,
    ProductInboxMessage,
    ProductLinked,
    ProductShown,
    ProductThread,
    ProductUnlinked,
)
from gitmail.model.limits import READ_BUDGET_DEFAULT
from gitmail.model.results import FLATTEN, Result, result

from .params import AgentName, AgentToken, MaxBytes, ProjectKey, ProverName, SinceTs
from .registry import ANYONE, MEMBER, PRODUCT, Toolbox
from .results import IDEMPOTENT, READ
from .runtime import Runtime
from .tools_messages import IncludeBodies, Limit, Topic, UnreadOnly, UrgentOnly

ProductKey = Annotated[str, Field(max_length=64, description=(
    "The product: a short key such as 'shop' or 'acme-web' (letters, digits, '.', '_', '-'; compared without "
    "regard to case)."))]
ProductReader = Annotated[str | None, Field(description=(
    "You: an agent name, proven with agent_token (or by this MCP session) in each linked project you want "
    "read. Left out: every linked project in which this session proved some agent."))]

tools = Toolbox("products")


@result
class ProductRead(Result):
    """What a read across a product covered: the projects read (human keys) and those left out, with why."""

    product_key: str
    projects_read: list[str]
    not_read: list[dict[str, str]]


@result
class ProductSearch(ProductRead):
    """A search across a product's projects: the hits, best first."""

    results: list[ProductHit]


@result
class ProductInbox(ProductRead):
    """An agent's inbox across a product's projects, newest first."""

    messages: list[ProductInboxMessage]


@result
class ProductThreadRead(ProductRead):
    """A thread summarized across a product's projects, with the mode that made the summary."""

    found: ProductThread = field(metadata=FLATTEN)
    mode: str


def reach(rt: Runtime, ctx: Context, product_key: str, agent_name: str | None,
          agent_token: str | None) -> tuple[list[str], ProductRead]:
    """The slugs of the product's projects a read covers, and what the answer says about them."""
    projects, left_out = rt.access.reach(ctx, product_key, agent_name, agent_token)
    keys = [rt.mail.human_key(slug) for slug in projects]
    return projects, ProductRead(product_key=product_key.lower(), projects_read=keys, not_read=left_out)


@tools.tool(READ, access=ANYONE)
def ensure_product(rt: Runtime, product_key: ProductKey) -> ProductShown:
    """Show a product: its name and linked projects."""
    return rt.mail.ensure_product(product_key=product_key)


@tools.tool(IDEMPOTENT, access=MEMBER)
def products_link(
    rt: Runtime,
    product_key: ProductKey,
    project_key: ProjectKey,
    name: Annotated[str | None, Field(max_length=200, description=(
        "The product's display name, recorded with this link (default: the name it already goes by, "
        "else its key)."))] = None,
    agent_name: ProverName = None,
    agent_token: AgentToken = None,
) -> ProductLinked:
    """Link a project to a product; the first link creates the product."""
    return rt.mail.products_link(product_key=product_key, project_key=project_key, name=name)


@tools.tool(IDEMPOTENT, access=MEMBER)
def products_unlink(
    rt: Runtime,
    product_key: ProductKey,
    project_key: ProjectKey,
    agent_name: ProverName = None,
    agent_token: AgentToken = None,
) -> ProductUnlinked:
    """Take a project out of a product."""
    return rt.mail.products_unlink(product_key=product_key, project_key=project_key)


@tools.tool(READ, access=PRODUCT)
def search_messages_product(
    rt: Runtime,
    ctx: Context,
    product_key: ProductKey,
    query: Annotated[str, Field(min_length=1, max_length=1000, description=(
        "Words to find, in the query language of search_messages."))],
    limit: Annotated[int, Field(ge=1, le=200, description="At most this many results in all.")] = 20,
    exhaustive: Annotated[bool, Field(description="Rank every match in each project (see search_messages).")]
    = False,
    agent_name: ProductReader = None,
    agent_token: AgentToken = None,
) -> ProductSearch:
    """Full-text search across a product's projects in which you proved an agent."""
    projects, read = reach(rt, ctx, product_key, agent_name, agent_token)
    return ProductSearch(product_key=read.product_key, projects_read=read.projects_read, not_read=read.not_read,
                         results=rt.mail.search_product(product_key, query, projects=projects, limit=limit,
                                                        exhaustive=exhaustive))


@tools.tool(READ, access=PRODUCT)
def fetch_inbox_product(
    rt: Runtime,
    ctx: Context,
    product_key: ProductKey,
    agent_name: AgentName,
    limit: Limit = 20,
    urgent_only: UrgentOnly = False,
    include_bodies: IncludeBodies = False,
    since_ts: SinceTs = None,
    topic: Topic = None,
    unread_only: UnreadOnly = False,
    max_bytes: MaxBytes = READ_BUDGET_DEFAULT,
    agent_token: AgentToken = None,
) -> ProductInbox:
    """Your inbox across a product's projects in which you proved agent_name."""
    projects, read = reach(rt, ctx, product_key, agent_name, agent_token)
    messages = rt.mail.fetch_inbox_product(product_key, agent_name, projects=projects, limit=limit,
                                           urgent_only=urgent_only, include_bodies=include_bodies,
                                           since_ts=since_ts, topic=topic, unread_only=unread_only,
                                           max_bytes=max_bytes)
    return ProductInbox(product_key=read.product_key, projects_read=read.projects_read, not_read=read.not_read,
                        messages=messages)


@tools.tool(READ, access=PRODUCT)
def summarize_thread_product(
    rt: Runtime,
    ctx: Context,
    product_key: ProductKey,
    thread_id: Annotated[str, Field(description="One thread ID.")],
    include_examples: Annotated[bool, Field(description="Include up to 3 messages of the thread.")] = False,
    per_thread_limit: Annotated[int, Field(ge=1, le=500, description="Messages considered.")] = 50,
    agent_name: ProductReader = None,
    agent_token: AgentToken = None,
) -> ProductThreadRead:
    """Summarize a thread across a product's projects in which you proved an agent."""
    projects, read = reach(rt, ctx, product_key, agent_name, agent_token)
    found = rt.mail.summarize_thread_product(product_key, thread_id, projects=projects,
                                             include_examples=include_examples, per_thread_limit=per_thread_limit)
    return ProductThreadRead(product_key=read.product_key, projects_read=read.projects_read, not_read=read.not_read,
                             found=found, mode="extractive")
