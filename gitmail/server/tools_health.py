"""``health_check``: is the server up, and what store does it serve."""

from __future__ import annotations

import time
from typing import Any

from gitmail.index import indexer_for
from gitmail.model.version import __version__
from gitmail.sync.status import store_states

from .binding import is_loopback
from .registry import ANYONE, Toolbox
from .results import READ
from .runtime import Runtime


def environment(rt: Runtime) -> dict[str, Any]:
    """The server's settings as clients may see them (no secrets)."""
    listen = rt.listen
    return {
        "environment": "local" if listen.transport == "stdio" or is_loopback(listen.host or "") else "network",
        "version": __version__,
        "transport": listen.transport,
        "http_host": listen.host,
        "http_port": listen.port,
        "http_path": listen.path if listen.transport == "http" else None,
        "bearer_token_required": listen.bearer,
        "store": rt.store.home,
        "database_url": f"git+file://{rt.store.home}/projects",
        "node": rt.store.node,
        "ack_overdue": rt.mail.ack.to_dict(),
    }


def sync_summary(rt: Runtime) -> dict[str, Any]:
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
    return {"status": worst, "remotes": states}


def search_rebuilds(rt: Runtime) -> list[dict[str, Any]]:
    """The search-index rebuilds this server is running: each project's messages indexed so far, of how many.

    Inbox pages, threads and the other reads keep answering meanwhile (from
    the metadata store, or the repository); searches answer from the index
    as it was until the new one is swapped in.
    """
    return [{"project": slug, "indexed": done, "of": total}
            for slug, (done, total) in sorted(indexer_for(rt.store).rebuilds().items())]

tools = Toolbox("admin")


@tools.tool(READ, access=ANYONE)
def health_check(rt: Runtime, ) -> dict[str, Any]:
    """Check that the server answers: version, transport, store, sync and search state."""
    return {"status": "ok", **environment(rt), "projects": len(rt.store.slugs()),
            "uptime_seconds": round(time.time() - rt.started, 3), "sync": sync_summary(rt),
            "long_polls": rt.long_polls.state(), "search_rebuilds": search_rebuilds(rt)}
