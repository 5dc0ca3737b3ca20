"""Running the server: Streamable HTTP under uvicorn, or stdio.

While it serves, the server also keeps its store current: a watcher on every
archive's refs brings the index up to date after outside changes (a push into
the archive, another process's write, a human's commit), which also wakes
long-polling readers at once; and, when asked for, an interval syncer pulls
and pushes every project that has a remote, and an acknowledgement scanner
looks for overdue acknowledgements (``GITMAIL_ACK_TTL_ENABLED``). Search-index writes run in a
helper process, so they never hold this interpreter while it answers calls.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Iterator

import uvicorn
from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE, RequestBodyLimitMiddleware
from starlette.applications import Starlette
from starlette.responses import RedirectResponse
from starlette.routing import Mount, Route

from gitmail.index import indexer_for
from gitmail.mail.facade import Mail
from gitmail.storage.store import Store
from gitmail.sync.interval import IntervalSyncer
from gitmail.sync.watch import Watcher
from gitmail.web.app import build_web
from gitmail.web.events import Events

from .app import build_server
from .binding import DEFAULT_HOST, DEFAULT_PATH, DEFAULT_PORT, check_bind
from .filehttp import FileEndpoint
from .origins import AllowedOrigins, OriginCheck
from .profiles import Profile
from .runtime import Listen
from .sessionless import serve_sessionless
from .upkeep import Upkeep
from .wake import WakeEndpoint, Wakes

_log = logging.getLogger("gitmail.server")
WEB_PATH = "/ui"


@contextlib.contextmanager
def services(store: Store, sync_interval: float, events: Events | None = None, *,
             mail: Mail | None = None) -> Iterator[None]:
    """The store's background work for as long as the server runs; ``events`` hears of every change.

    With ``mail`` whose acknowledgement settings enable it, overdue acknowledgements are scanned on their interval.
    Memory upkeep (:mod:`.upkeep`) runs every half minute.
    """
    indexer = indexer_for(store)
    indexer.write_search_in_child()
    indexer.attach_all()
    try:  # a cross-project send cut short by the last run is completed first (see gitmail.mail.relay)
        completed = Mail(store).complete_relays()
        if completed:
            _log.warning("completed %d cross-project cop%s left owed by the last run", len(completed),
                         "y" if len(completed) == 1 else "ies")
    except Exception:  # noqa: BLE001 - the next sync completes them too; serving matters more
        _log.exception("completing owed cross-project copies failed")

    def on_change(slug: str) -> None:
        # The watcher also sees this server's own commits: poking the index's
        # background worker (rather than catching up here) lets both share one run.
        try:
            indexer.project(slug).poke()
        except Exception:  # noqa: BLE001 - the next change or read catches up again
            _log.exception("waking the index of %s after an outside change failed", slug)
        try:
            store.poke_checkout(slug)  # a push or another process moved main: the checkout follows
        except Exception:  # noqa: BLE001 - the next change pokes it again
            _log.exception("waking the checkout of %s after an outside change failed", slug)
        if events is not None:
            events.publish(slug)  # open web pages of the project refresh their lists

    syncer = IntervalSyncer(store, sync_interval).start() if sync_interval > 0 else None
    upkeep = Upkeep().start()
    acks = mail.ack_scanner() if mail is not None else None
    if acks is not None:
        acks.start()
    try:
        with Watcher(store, on_change):
            yield
    finally:
        upkeep.stop()
        if acks is not None:
            acks.stop()
        if syncer is not None:
            syncer.stop()
        if events is not None:
            events.close()
        indexer.close()


@contextlib.contextmanager
def _running(wakes: Wakes) -> Iterator[None]:
    """Wake agents (webhooks and streams) while the block runs."""
    wakes.start()
    try:
        yield
    finally:
        wakes.stop()


def http_app(store: Store, *, mail: Mail, host: str, port: int, token: str | None = None,
             path: str = DEFAULT_PATH, events: Events | None = None,
             allowed: AllowedOrigins | None = None, tools: Profile | None = None,
             wakes: Wakes | None = None) -> Starlette:
    """Everything ``gitmail serve`` answers over HTTP, as one application.

    MCP at ``path`` (with a session, and session-less), the web view at
    :data:`WEB_PATH`, ``/`` leading there, the file endpoint (:mod:`.filehttp`), the wake streams
    (:mod:`.wake`; ``wakes`` runs them, by default ones made here and not started); in front of all of it the
    ``Host`` / ``Origin`` check (``allowed``; by default the loopback names,
    the listening address and :data:`gitmail.server.origins.ORIGINS_ENV`);
    ``tools`` is the tool profile (see :mod:`.profiles`).
    """
    wakes = wakes if wakes is not None else Wakes.serving(store, mail)
    mcp = build_server(store, mail=mail, token=token, listen=Listen("http", host, port, path), tools=tools,
                       wakes=wakes)
    # Plain JSON responses instead of an event stream per call: no tool sends
    # progress or server requests mid-call, and on a small machine this halves
    # the cost of a trivial call (measured: p50 7.4 -> 4.3 ms, twice the calls/s).
    app = mcp.http_app(path=path, json_response=True)
    serve_sessionless(app, path)
    # The overseer's web view, beside MCP in the same process (see docs/security.md for its access rules);
    # its forms get the body limit MCP requests have.
    web = RequestBodyLimitMiddleware(build_web(mail, token=token, events=events), DEFAULT_MAX_REQUEST_BODY_SIZE)
    app.router.routes.append(Mount(WEB_PATH, app=web))
    app.router.routes.append(Route("/", lambda request: RedirectResponse(WEB_PATH + "/")))
    app.router.routes.extend(FileEndpoint(store, mail, token).routes())  # uploads and downloads past a call's size
    app.router.routes.extend(WakeEndpoint(store, mail, token, wakes).routes())  # wake-ups as server-sent events
    app.add_middleware(OriginCheck, allowed=allowed or AllowedOrigins.from_env(host, port), mcp_path=path)
    return app


def serve_http(store: Store, *, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT, token: str | None = None,
               path: str = DEFAULT_PATH, log_level: str = "warning", sync_interval: float = 0,
               allow_origins: tuple[str, ...] = (), tools: Profile | None = None) -> None:
    """Serve MCP over Streamable HTTP until interrupted; refuses non-loopback hosts without a token.

    ``allow_origins`` adds hosts and origins the server answers beside its own names (see :mod:`.origins`).
    """
    check_bind(host, token)
    allowed = AllowedOrigins.from_env(host, port, allow_origins)
    mail = Mail.serving(store)
    events = Events()
    wakes = Wakes.serving(store, mail)
    app = http_app(store, mail=mail, host=host, port=port, token=token, path=path, events=events, allowed=allowed,
                   tools=tools, wakes=wakes)
    shown = f"[{host}]" if ":" in host else host
    print(f"gitmail: serving MCP at http://{shown}:{port}{path} and the web view at http://{shown}:{port}{WEB_PATH}/ "
          f"(store {store.home}{', bearer token required' if token else ''})", file=sys.stderr, flush=True)
    with services(store, sync_interval, events, mail=mail), _running(wakes):
        # Event streams of open pages never end by themselves: give them a moment, then close them.
        uvicorn.run(app, host=host, port=port, log_level=log_level, timeout_graceful_shutdown=2)


def serve_stdio(store: Store, *, sync_interval: float = 0, tools: Profile | None = None) -> None:
    """Serve MCP over standard input and output (one client, the parent process).

    Standard output carries JSON-RPC and nothing else, ever: the protocol
    keeps the real stdout to itself, and file descriptor 1 is pointed at
    standard error, so whatever else prints (a library, the search-index
    helper process this server starts, a warning) lands there instead.
    """
    protocol = os.fdopen(os.dup(sys.stdout.fileno()), "w", encoding="utf-8")  # not inherited by children
    sys.stdout.flush()
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    sys.stdout = protocol
    mail = Mail.serving(store)
    wakes = Wakes.serving(store, mail)
    mcp = build_server(store, mail=mail, listen=Listen("stdio"), tools=tools, wakes=wakes)
    try:
        with services(store, sync_interval, mail=mail), _running(wakes):
            mcp.run(transport="stdio", show_banner=False)
    finally:
        sys.stdout = sys.__stdout__  # now standard error, as descriptor 1 is
        protocol.close()
