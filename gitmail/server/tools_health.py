"""``health_check``: is the server up, and what store does it serve."""

from __future__ import annotations

import time
from dataclasses import field
from typing import Any

from gitmail.index import indexer_for
from gitmail.mail.facade import AckSettings
from gitmail.model.results import FLATTEN, Result, result
from gitmail.model.version import __version__
from gitmail.sync.status import store_states

from .binding import is_loopback
from .registry import ANYONE, Toolbox
from .results import READ
from .runtime import Runtime


@result
class Environment(Result):
    """The server's settings as clients may see them (no secrets)."""

    environment: str
    version: str
    transport: str
    http_host: str | None
    http_port: int | None
    http_path: str | None
    bearer_token_required: bool
    store: str
    database_url: str
    node: str
    ack_overdue: AckSettings


@result
class SyncSummary(Result):
    """Every remote's sync state without its URL or error text, and the worst state as ``status``."""

    status: str
    remotes: list[dict[str, Any]]


@result
class Rebuild(Result):
    """A search-index rebuild under way: the project's messages indexed so far, of how many."""

    project: str
    indexed: int
    of: int


@result
class Health(Result):
    """What ``health_check`` answers."""

    status: str
    settings: Environment = field(metadata=FLATTEN)
    projects: int
    uptime_seconds: float
    sync: SyncSummary
    long_polls: dict[str, int]
    search_rebuilds: list[Rebuild]


def environment(rt: Runtime) -> Environment:
    """The server's settings as clients may see them (no secrets)."""
    listen = rt.listen
    return Environment(
        environment="local" if listen.transport == "stdio" or is_loopback(listen.host or "") else "network",
        version=__version__, transport=listen.transport, http_host=listen.host, http_port=listen.port,
        http_path=listen.path if listen.transport == "http" else None, bearer_token_required=listen.bearer,
        store=rt.store.home, database_url=f"git+file://{rt.store.home}/projects", node=rt.store.node,
        ack_overdue=rt.mail.ack)


def sync_summary(rt: Runtime) -> SyncSummary:
    """Every remote's sync state, and the worst of them as ``status`` (``none`` without remotes).

    Anyone may call ``health_check``, so this leaves out what only members
    of a project see through ``sync_status``: remote URLs (which may carry
    credentials) and the text of errors (which quotes them); the error's
    code and time stay.
    """
    states = []
    for state in store_states(rt.store):
        shown = state.to_dict()
        del shown["url"]
        if shown["last_error"]:
            shown["last_error"] = {"code": shown["last_error"].get("code"), "at": shown["last_error"].get("at")}
        states.append(shown)
    worst = "none"
    for level in ("ok", "never", "syncing", "attention", "failing"):
        if any(state["state"] == level for state in states):
            worst = level
    return SyncSummary(status=worst, remotes=states)


def search_rebuilds(rt: Runtime) -> list[Rebuild]:
    """The search-index rebuilds this server is running: each project's messages indexed so far, of how many.

    Inbox pages, threads and the other reads keep answering meanwhile (from
    the metadata store, or the repository); searches answer from the index
    as it was until the new one is swapped in.
    """
    return [Rebuild(project=slug, indexed=done, of=total)
            for slug, (done, total) in sorted(indexer_for(rt.store).rebuilds().items())]

tools = Toolbox("admin")


@tools.tool(READ, access=ANYONE)
def health_check(rt: Runtime, ) -> Health:
    """Check that the server answers: version, transport, store, sync and search state."""
    return Health(status="ok", settings=environment(rt), projects=len(rt.store.slugs()),
                  uptime_seconds=round(time.time() - rt.started, 3), sync=sync_summary(rt),
                  long_polls=rt.long_polls.state(), search_rebuilds=search_rebuilds(rt))
