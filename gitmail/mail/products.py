"""Products: several projects of one team, read together.

A product (a frontend, a backend and an infrastructure repository, say) has
no archive of its own. It is the set of its links: ``products/<key>.yaml`` in
the archive of each linked project (:class:`~gitmail.model.records.ProductLink`),
so a link syncs and merges with its project, a machine that syncs the
projects learns the product, and deleting a project takes its link along.
Unlinking marks the link (``unlinked_at``) rather than deleting the file, so
a link and an unlink made on two machines merge by the clock.

The product-wide reads (search, inbox, thread summary) take the projects the
caller may read (the server passes those it proved an agent in) and tag
every hit with the project it came from.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import field
from typing import Any

from gitmail.coord.context import Context
from gitmail.coord.lookup import project_record
from gitmail.index import search_messages
from gitmail.model.errors import invalid, not_found
from gitmail.model.limits import READ_BUDGET_DEFAULT
from gitmail.model.names import check_product_key
from gitmail.model.records import PRODUCTS, Message, ProductLink, product_path
from gitmail.model.results import OMIT_NONE, Result, renamed, result
from gitmail.storage.engine import Change
from gitmail.storage.snapshot import Snapshot

from . import mailbox
from .budget import Bodied, MoreMessages, check_budget, fill, kept_body, newest_first
from .delivery import MessageHeader, MessageView
from .mailbox import SearchHit
from .summaries import ThreadSummary, thread_summary

MAX_NAME = 200


@result
class LinkedProject(Result):
    """A project linked to a product, and when."""

    slug: str
    human_key: str
    linked_at: str


@result
class ProductView(Result):
    """A product: its key, the name it goes by, and the projects linked to it (by human key)."""

    product_key: str
    name: str
    projects: list[LinkedProject]


@result
class ProductShown(ProductView):
    """A product as ensure_product shows it: ``stored`` once a project is linked, else a ``note`` on how."""

    stored: bool
    note: str | None = field(default=None, metadata=OMIT_NONE)


@result
class ProductLinked(ProductView):
    """A product after a project (``linked``, its slug) was linked; ``changed``: whether anything was written."""

    linked: str
    changed: bool


@result
class ProductUnlinked(ProductView):
    """A product after a project (``unlinked``, its slug) left it; ``changed``: whether anything was written."""

    unlinked: str
    changed: bool


@result
class ProductHit(SearchHit):
    """A search hit in one of a product's projects, naming the project."""

    project: str
    project_slug: str

    @classmethod
    def tagged(cls, hit: Mapping[str, Any], *, project: str, slug: str) -> ProductHit:
        """A hit of the search index of project ``slug`` (``project``: its human key)."""
        found = SearchHit.of(hit)
        return cls(**{f.name: getattr(found, f.name) for f in dataclasses.fields(found)}, project=project,
                   project_slug=slug)


@result
class ProductInboxMessage(MessageHeader, Bodied):
    """An inbox message in one of a product's projects: as :class:`InboxMessage`, naming its project."""

    kind: str
    read_at: str | None
    acknowledged_at: str | None
    project: str
    project_slug: str
    body_md: str | None = field(default=None, metadata=OMIT_NONE)
    body_omitted: bool | None = field(default=None, metadata=OMIT_NONE)
    body_bytes: int | None = field(default=None, metadata=OMIT_NONE)
    more: MoreMessages | None = field(default=None, metadata=OMIT_NONE)


@result
class ProductExample(MessageHeader, Bodied):
    """A message shown as an example of a thread read across projects: as in a thread, naming its projects."""

    body_md: str | None = field(default=None, metadata=OMIT_NONE)
    projects: list[str]
    body_omitted: bool | None = field(default=None, metadata=OMIT_NONE)
    body_bytes: int | None = field(default=None, metadata=OMIT_NONE)


@result
class ThreadEntry(Result):
    """A message of a thread read across projects: who sent it, when, and the projects that hold it."""

    id: str
    sender: str = field(metadata=renamed("from"))
    created_ts: str
    projects: list[str]


@result
class ProductThread(Result):
    """A thread summarized across a product's projects (with up to three examples when asked)."""

    thread_id: str
    summary: ThreadSummary
    projects: list[str]
    messages: list[ThreadEntry]
    examples: list[ProductExample] | None = field(default=None, metadata=OMIT_NONE)


def _check_name(name: object) -> str | None:
    if name is None:
        return None
    if not isinstance(name, str) or not name.strip() or len(name) > MAX_NAME or any(c in name for c in "\r\n"):
        raise invalid(f"name must be one line of at most {MAX_NAME} characters", field="name")
    return name.strip()


def links(ctx: Context, product: str) -> list[tuple[str, str, ProductLink]]:
    """``(slug, human_key, link)`` for every project of the store linked to ``product`` now, by human key."""
    out = []
    for slug in ctx.store.slugs():
        snap = ctx.store.archive(slug).snapshot()
        link = snap.load(product_path(product), ProductLink)
        if link is not None and link.unlinked_at is None:
            out.append((slug, project_record(snap).human_key, link))
    return sorted(out, key=lambda item: item[1])


def linked_slugs(ctx: Context, product_key: str) -> list[str]:
    """The slugs of the projects linked to a product (empty when none is)."""
    return [slug for slug, _, _ in links(ctx, check_product_key(product_key))]


def _view(product: str, found: list[tuple[str, str, ProductLink]]) -> ProductView:
    newest = max(found, key=lambda item: item[2].hlc)[2].name if found else product  # the latest naming wins
    return ProductView(product_key=product, name=newest,
                       projects=[LinkedProject(slug=slug, human_key=key, linked_at=link.linked_at)
                                 for slug, key, link in found])


def product_view(ctx: Context, product_key: str) -> ProductView:
    """A product and the projects linked to it."""
    product = check_product_key(product_key)
    return _view(product, links(ctx, product))


def ensure_product(ctx: Context, product_key: str) -> ProductShown:
    """The product named by ``product_key`` and its linked projects; nothing is written.

    A product lives in its projects' archives, so it comes into being with
    its first link (:func:`products_link`); until then ``stored`` is false.
    """
    view = product_view(ctx, product_key)
    note = None if view.projects else ("a product is kept in the archives of its projects: products_link creates "
                                       "it with its first project")
    return ProductShown(product_key=view.product_key, name=view.name, projects=view.projects,
                        stored=bool(view.projects), note=note)


def _write(ctx: Context, project_key: str, product: str, *, name: str | None, relink: bool) -> bool:
    """Link (``relink``) the project to the product, or rename the product there; whether anything changed."""
    archive = ctx.archive(project_key)
    stamp, hlc = ctx.clock.now_ts(), ctx.tick()

    def fn(snap: Snapshot) -> Change:
        project = project_record(snap)
        link = snap.load(product_path(product), ProductLink)
        if link is None:
            link = ProductLink(product=product, name=name or _known_name(ctx, product) or product,
                               linked_at=stamp, hlc=hlc)
            verb = "Link"
        elif relink and link.unlinked_at is not None:
            link.unlinked_at, link.hlc = None, hlc
            link.name = name or link.name
            verb = "Link"
        elif name is not None and link.name != name:
            link.name, link.hlc = name, hlc
            verb = "Rename"
        else:
            return Change("", result=False)
        message = (f"{verb} project {project.human_key} to product {product}" if verb == "Link"
                   else f"Rename product {product} to {name}")
        return Change(message, result=True).put_record(link)

    return bool(archive.transact(fn).result)


def _known_name(ctx: Context, product: str) -> str | None:
    found = links(ctx, product)
    return _view(product, found).name if found else None


def products_link(ctx: Context, product_key: str, project_key: str, *, name: str | None = None) -> ProductLinked:
    """Link a project to a product (creating the product on its first link); linking twice changes nothing.

    ``name`` is the product's display name as this project records it (the
    most recent naming across the linked projects is the one shown);
    without it a new link takes the name the product already goes by.
    """
    product = check_product_key(product_key)
    wanted = _check_name(name)
    ctx.archive(project_key)  # NOT_FOUND for an unknown project, before anything is written
    changed = _write(ctx, project_key, product, name=wanted, relink=True)
    view = product_view(ctx, product)
    return ProductLinked(product_key=view.product_key, name=view.name, projects=view.projects,
                         linked=ctx.slug(project_key), changed=changed)


def products_unlink(ctx: Context, product_key: str, project_key: str) -> ProductUnlinked:
    """Take a project out of a product; the link is marked undone in the project's archive."""
    product = check_product_key(product_key)
    archive = ctx.archive(project_key)
    stamp, hlc = ctx.clock.now_ts(), ctx.tick()

    def fn(snap: Snapshot) -> Change:
        project = project_record(snap)
        link = snap.load(product_path(product), ProductLink)
        if link is None:
            raise not_found(f"project {project.human_key} was never linked to product {product}; "
                            "ensure_product lists the projects that are", product_key=product)
        if link.unlinked_at is not None:
            return Change("", result=False)
        link.unlinked_at, link.hlc = stamp, hlc
        return Change(f"Unlink project {project.human_key} from product {product}", result=True).put_record(link)

    changed = bool(archive.transact(fn).result)
    view = product_view(ctx, product)
    return ProductUnlinked(product_key=view.product_key, name=view.name, projects=view.projects,
                           unlinked=ctx.slug(project_key), changed=changed)


def products_of(snap: Snapshot) -> list[str]:
    """The products a project's archive links it to now."""
    out = []
    for entry in snap.listdir(PRODUCTS):
        link = snap.load(f"{PRODUCTS}/{entry}", ProductLink)
        if link is not None and link.unlinked_at is None:
            out.append(link.product)
    return out


# -- product-wide reads --------------------------------------------------------------

def _tag(ctx: Context, slugs: list[str]) -> dict[str, str]:
    return {slug: project_record(ctx.archive(slug).snapshot()).human_key for slug in slugs}


def search_product(ctx: Context, product_key: str, query: str, *, slugs: list[str], limit: int = 20,
                   exhaustive: bool = False) -> list[ProductHit]:
    """Search each of ``slugs`` (projects of the product) and merge the hits, best first, each naming its project."""
    check_product_key(product_key)
    hits = []
    for slug, key in _tag(ctx, slugs).items():
        for hit in search_messages(ctx.store, slug, query, limit, None, exhaustive=exhaustive):
            hits.append(ProductHit.tagged(hit, project=key, slug=slug))
    hits.sort(key=lambda h: (-float(h.score or 0), h.created_ts or "", h.project_slug))
    return hits[:limit]


def fetch_inbox_product(ctx: Context, product_key: str, agent_name: str, *, slugs: list[str], limit: int = 20,
                        urgent_only: bool = False, include_bodies: bool = False, since_ts: object = None,
                        topic: str | None = None, unread_only: bool = False,
                        max_bytes: int = READ_BUDGET_DEFAULT) -> list[ProductInboxMessage]:
    """The agent's inbox in each of ``slugs``, newest first, each message naming its project.

    Bodies fit in ``max_bytes`` across the projects, by the rules of :mod:`.budget`.
    """
    check_product_key(product_key)
    check_budget(max_bytes)
    items: list[ProductInboxMessage] = []
    for slug, key in _tag(ctx, slugs).items():
        for item in mailbox.fetch_inbox(ctx, slug, agent_name, limit=limit, urgent_only=urgent_only,
                                        since_ts=since_ts, topic=topic, unread_only=unread_only):
            items.append(ProductInboxMessage.from_wire(item, project=key, project_slug=slug))
    items.sort(key=lambda m: (m.created_ts or "", m.id, m.project_slug), reverse=True)
    items = items[:limit]
    if include_bodies:
        readers = {slug: mailbox.body_reader(ctx, slug) for slug in {item.project_slug for item in items}}
        items = newest_first(items, lambda head: readers[head.project_slug](head), max_bytes)
    return items


def summarize_thread_product(ctx: Context, product_key: str, thread_id: str, *, slugs: list[str],
                             include_examples: bool = False, per_thread_limit: int = 50) -> ProductThread:
    """One thread across the projects in ``slugs``: a message in several archives counts once and names each."""
    check_product_key(product_key)
    if not isinstance(thread_id, str) or not thread_id.strip() or "," in thread_id:
        raise invalid("thread_id must name one thread", field="thread_id")
    if not isinstance(per_thread_limit, int) or isinstance(per_thread_limit, bool) or not 1 <= per_thread_limit <= 500:
        raise invalid("per_thread_limit must be a whole number from 1 to 500", field="per_thread_limit")
    found: dict[str, Message] = {}
    where: dict[str, list[str]] = {}
    for slug, key in _tag(ctx, slugs).items():
        for message in mailbox.thread_messages(ctx, slug, thread_id.strip()):
            found.setdefault(message.id, message)
            where.setdefault(message.id, []).append(key)
    if not found:
        raise not_found(f"no messages in thread {thread_id!r} in the projects read; thread IDs come from the "
                        "thread_id of a message", thread_id=thread_id)
    messages = sorted(found.values(), key=lambda m: (m.created_ts, m.id))[-per_thread_limit:]
    examples = (fill([ProductExample.from_wire(MessageView.of(m), body_md=m.body, projects=where[m.id])
                      for m in messages[:3]], kept_body,
                     READ_BUDGET_DEFAULT) if include_examples else None)
    return ProductThread(thread_id=thread_id.strip(), summary=thread_summary(messages),
                         projects=sorted({key for keys in where.values() for key in keys}),
                         messages=[ThreadEntry(id=m.id, sender=m.sender, created_ts=m.created_ts, projects=where[m.id])
                                   for m in messages], examples=examples)
