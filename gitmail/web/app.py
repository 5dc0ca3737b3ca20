"""The web view's routes: each page gathers what it shows through the mail facade and renders a template.

Pages (below ``/ui``): the projects; a project (agents, threads, sync state
per remote); an agent (profile, seat, counts, and its inbox, outbox,
unread, urgent, ack-required and ack-overdue lists); a thread with its
messages; search; the board of reservations, build slots and seats; journals; the git
history of a message, thread, agent or reservation with the ``git`` command
that shows the same; compose and reply as the human overseer; attachments;
and ``/ui/events``, the server-sent events that keep pages live. Signing in
and out: ``/ui/login`` and ``/ui/logout``. A query parameter a page cannot
use (``?page=abc``) is a 400 page saying what it takes, never a server error.
"""

from __future__ import annotations

import base64
import datetime as dt
import os
import shlex
import urllib.parse
from collections.abc import Callable
from typing import Any

import jinja2
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from gitmail.mail.facade import (
    ChannelPostView,
    FileView,
    JournalView,
    Mail,
    MessageView,
    SearchHit,
    SendOptions,
)
from gitmail.model.errors import FILE_NOT_FOUND, INVALID_ARGUMENT, NOT_FOUND, GitmailError
from gitmail.model.names import OVERSEER, is_reserved_name
from gitmail.sync.status import remote_states

from . import render
from .access import COOKIE, LoginLimit, Session, Sessions, csrf_ok, within_view
from .console import Console
from .events import Events
from .paging import PAGE, head, link, paged, sliced

DEEP = 10_000 * PAGE  # how deep a list read whole, or by offset, pages (any page costs the same there)
HISTORY_ROWS = 200  # the derived history's bound on one read
RECIPIENTS_SHOWN = 10  # recipients a thread shows under a message: the rest are on the message's page of recipients
FILES_PAGE = 500  # files read per call while paging the project's files (list_files' largest page)
HOLDERS_SHOWN = 5  # holders the board shows in a build slot's row: the rest are on the slot's page

HERE = os.path.dirname(os.path.abspath(__file__))
VIEWS = {  # an agent's lists: title, and how to fetch them
    "inbox": "Inbox", "outbox": "Outbox", "unread": "Unread", "urgent": "Urgent, unread",
    "ack": "Awaiting acknowledgement", "overdue": "Acknowledgement overdue",
}
KINDS = ("message", "thread", "agent", "reservation")


def span(seconds: float) -> str:
    """A length of time as a person says it: ``45 s``, ``12 min``, ``3 h 5 min``, ``2 d 4 h``."""
    seconds = int(abs(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min"
    if seconds < 86400:
        hours, minutes = divmod(seconds // 60, 60)
        return f"{hours} h" + (f" {minutes} min" if minutes else "")
    days, hours = divmod(seconds // 3600, 24)
    return f"{days} d" + (f" {hours} h" if hours else "")


def size(count: object) -> str:
    """A number of bytes as a person reads it: ``512 bytes``, ``3.4 KiB``, ``1.2 MiB``."""
    if not isinstance(count, int) or isinstance(count, bool):
        return ""
    if count < 1024:
        return f"{count} bytes"
    return f"{count / 1024:.1f} KiB" if count < 1024 * 1024 else f"{count / (1024 * 1024):.1f} MiB"


def _ago(ts: str | None) -> str:
    """A moment relative to now: ``5 min ago``, ``in 2 h``, ``just now``."""
    if not ts:
        return "never"
    try:
        moment = dt.datetime.fromisoformat(ts.replace("Z", "+00:00"))
    except ValueError:
        return ts
    seconds = (dt.datetime.now(dt.UTC) - moment).total_seconds()
    if abs(seconds) < 60:
        return "just now"
    return f"{span(seconds)} ago" if seconds > 0 else f"in {span(seconds)}"


UNBORN = "not created yet"  # the status shown for the overseer before its first message


def _overseer_to_be() -> dict[str, Any]:
    """What the overseer's page shows before its first message creates the profile (nothing has reached it)."""
    return {"name": OVERSEER, "human": True, "program": "human", "model": "overseer", "status": UNBORN,
            "task_description": "Created the first time you write as the overseer.", "contact_policy": "open",
            "last_active_ts": None}


def _epoch(seconds: int) -> str:
    return dt.datetime.fromtimestamp(seconds, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _names(value: str | None) -> list[str]:
    """Agent names typed into a field, separated by commas or spaces."""
    return [n for n in (value or "").replace(",", " ").split() if n]


def _stale_form() -> Response:
    """The answer to a form without its session's CSRF token."""
    return HTMLResponse("This form is stale or did not come from this page: reload the page and send it again.",
                        status_code=403)


class WebView:
    """The pages over one :class:`Mail`; ``events`` is fed by the server's watcher."""

    def __init__(self, mail: Mail, *, token: str | None = None, events: Events | None = None):
        self.mail = mail
        self.store = mail.store
        self.sessions = Sessions(token, clock=mail.store.clock.time)
        self.logins = LoginLimit(clock=mail.store.clock.time)
        self.events = events or Events()
        self.templates = jinja2.Environment(loader=jinja2.FileSystemLoader(os.path.join(HERE, "templates")),
                                            autoescape=True, undefined=jinja2.StrictUndefined)
        self.templates.filters.update(ago=_ago, epoch=_epoch, span=span, size=size)

    # -- plumbing -------------------------------------------------------------
    def _session(self, request: Request) -> tuple[Session | None, bool]:
        """The caller's session, and whether it was opened just now (its cookie must be set)."""
        found = self.sessions.get(request.cookies.get(COOKIE))
        if found is not None:
            return found, False
        if self.sessions.needs_login:
            return None, False
        return self.sessions.open(signed_in=True), True

    @staticmethod
    def _cookie(response: Response, session: Session) -> None:
        response.set_cookie(COOKIE, session.id, httponly=True, samesite="strict", path="/ui")

    def _render(self, request: Request, session: Session, name: str, status: int = 200, **values: Any) -> Response:
        page = self.templates.get_template(name).render(csrf=session.csrf, request_path=request.url.path,
                                                        login=self.sessions.needs_login, **values)
        return HTMLResponse(page, status_code=status, headers={
            "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; style-src 'self'; "
                                       "script-src 'self'; frame-ancestors 'none'; form-action 'self'",
            "X-Content-Type-Options": "nosniff", "Referrer-Policy": "same-origin", "Cache-Control": "no-store"})

    def _error(self, request: Request, session: Session, exc: GitmailError) -> Response:
        """The page for a refused read: 404 when what it names is not there, 400 when the address is malformed."""
        missing = exc.code == NOT_FOUND
        return self._render(request, session, "error.html", 404 if missing else 400, error=exc,
                            title="Not found" if missing else "This address cannot be read")

    def page(self, name: str, build: Callable[[Request], dict[str, Any]]) -> Callable[[Request], Any]:
        """A GET route rendering template ``name`` with what ``build`` gathers (in a worker thread)."""
        async def endpoint(request: Request) -> Response:
            session, fresh = self._session(request)
            if session is None:
                return RedirectResponse(f"/ui/login?next={request.url.path}", status_code=303)
            try:
                values = await run_in_threadpool(build, request)
                response = self._render(request, session, name, **values)
            except GitmailError as exc:
                response = self._error(request, session, exc)
            if fresh:
                self._cookie(response, session)
            return response
        return endpoint

    def action(self, run: Callable[[Request, dict[str, str]], str], template: str,
               again: Callable[[Request, dict[str, str]], dict[str, Any]], *,
               confirm: Callable[[Request, dict[str, str]], str] | None = None) -> Callable[[Request], Any]:
        """A POST route: checks the session and CSRF token, runs ``run``, redirects to the URL it returns.

        ``run`` acts as the operator: every commit it makes names the person
        at this machine (:meth:`Mail.acting_as_operator`). With ``confirm``, a
        form without ``confirmed=yes`` only shows what would happen (the text
        ``confirm`` returns) and a button that sends the same form confirmed.
        A refused write shows ``template`` again with the error and what was typed.
        """
        def operated(request: Request, form: dict[str, str]) -> str:
            with self.mail.acting_as_operator("the web view"):
                return run(request, form)

        async def endpoint(request: Request) -> Response:
            session = self.sessions.get(request.cookies.get(COOKIE))
            form = {k: v for k, v in (await request.form()).items() if isinstance(v, str)}
            if session is None or not csrf_ok(session, form.get("csrf")):
                return _stale_form()
            try:
                if confirm is not None and form.get("confirmed") != "yes":
                    what = await run_in_threadpool(confirm, request, form)
                    fields = {k: v for k, v in form.items() if k not in ("csrf", "confirmed")}
                    return self._render(request, session, "confirm.html", what=what, fields=fields,
                                        back=within_view(form.get("back", "")))
                target = await run_in_threadpool(operated, request, form)
            except GitmailError as exc:
                values = await run_in_threadpool(again, request, form)
                return self._render(request, session, template, 400, error=exc, form=form, **values)
            return RedirectResponse(target, status_code=303)
        return endpoint

    # -- pages ----------------------------------------------------------------
    def projects(self, request: Request) -> dict[str, Any]:
        listed = paged(request, sliced(self.mail.list_projects(include_archived=True)), cap=DEEP)
        rows = []
        for project in listed.items:  # figures only for the projects this page shows
            slug = project["slug"]
            agents = self.mail.list_agents(slug, active_only=False)
            rows.append({**project, **self.mail.project_stats(slug), "agents": len(agents),
                         "last_active": max((a.last_active_ts for a in agents), default=None),
                         "remotes": self._sync_state(slug)})
        return {"projects": rows, "pages": listed}

    def _sync_state(self, slug: str) -> list[dict[str, Any]]:
        """Each remote's sync state, as gitmail.sync.status keeps it (the same the CLI and MCP show)."""
        return [state.to_dict() for state in remote_states(self.store, slug)]

    def _project(self, request: Request) -> dict[str, Any]:
        slug = request.path_params["slug"]
        return self.mail.get_project(slug)

    def project(self, request: Request) -> dict[str, Any]:
        project = self._project(request)
        slug = project["slug"]
        agents = paged(request, sliced(self.mail.list_agents(slug, active_only=False)), name="agents",
                       cap=DEEP)
        counted = [{**a, **self.mail.agent_counts(slug, a.name)} for a in agents.items]
        threads = paged(request, lambda offset, count: self.mail.recent_threads(slug, limit=count, offset=offset),
                        cap=DEEP)
        return {"project": project, "agents": counted, "agent_pages": agents, "threads": threads,
                "stats": self.mail.project_stats(slug), "remotes": self._sync_state(slug)}

    def agent(self, request: Request) -> dict[str, Any]:
        project = self._project(request)
        slug, name = project["slug"], request.path_params["name"]
        view = request.query_params.get("view", "inbox")
        if view not in VIEWS:
            view = "inbox"
        profile: dict[str, Any] | None = next(
            (a for a in self.mail.list_agents(slug, active_only=False) if a.name.lower() == name.lower()), None)
        if profile is None and is_reserved_name(name):
            profile = _overseer_to_be()
        if profile is None:
            raise GitmailError(NOT_FOUND, f"no agent named {name!r} in this project", {"agent": name})
        name = profile["name"]
        unborn = profile.get("status") == UNBORN  # the overseer's profile is made by its first message
        messages = paged(request, head(lambda limit: [] if unborn else self._view_of(slug, name, view, limit)))
        cards = {card.name: card for card in self.mail.list_capabilities(slug).agents}
        card = cards.get(name)
        seat = {"held": False} if profile["status"] == UNBORN else self.mail.seat_status(slug, name)
        wake = None if profile["status"] == UNBORN else self.mail.card_state(slug, name)
        return {"project": project, "agent": profile, "view": view, "views": VIEWS, "messages": messages.items,
                "pages": messages, "wake": wake,
                "overseer": OVERSEER,
                "counts": self.mail.agent_counts(slug, name), "seat": seat,
                "capabilities": card.capabilities if card else [], "asleep": card.asleep if card else False}

    def _view_of(self, slug: str, name: str, view: str, limit: int) -> list[dict[str, Any]]:
        """The first ``limit`` messages of one of an agent's lists (:data:`VIEWS`)."""
        if view == "inbox":
            return list[dict[str, Any]](self.mail.fetch_inbox(slug, name, limit=limit))
        if view == "outbox":
            return list[dict[str, Any]](self.mail.fetch_outbox(slug, name, limit=limit).messages)
        if view == "unread":
            return list[dict[str, Any]](self.mail.fetch_inbox(slug, name, limit=limit, unread_only=True))
        if view == "urgent":
            return list[dict[str, Any]](self.mail.view_urgent_unread(slug, name, limit=limit).messages)
        if view == "ack":
            return list[dict[str, Any]](self.mail.view_ack_required(slug, name, limit=limit).messages)
        return list[dict[str, Any]](self.mail.view_ack_overdue(slug, name, limit=limit).messages)

    def thread(self, request: Request) -> dict[str, Any]:
        project = self._project(request)
        slug = project["slug"]
        after = request.query_params.get("after") or None
        found = self.mail.get_thread(slug, request.path_params["thread_id"], after=after)
        if not found.messages:
            raise GitmailError(NOT_FOUND, "no message in this thread", {"thread_id": request.path_params["thread_id"]})
        base = f"/ui/p/{slug}/file"
        humans = {a.name for a in self.mail.list_agents(slug, active_only=False) if a.human}
        receipts = self.mail.message_receipts(slug, [m.id for m in found.messages], viewer=OVERSEER)
        messages = [{**m, "html": render.markdown(m.get("body_md", ""), attachment_base=base),
                     "human": m["from"] in humans, "deliveries": receipts.get(m["id"], [])[:RECIPIENTS_SHOWN],
                     "more_recipients": max(0, len(receipts.get(m["id"], [])) - RECIPIENTS_SHOWN),
                     "answer_to": m["to"] if m["from"] == OVERSEER else [m["from"]]} for m in found.messages]
        return {"project": project, "thread_id": found.thread_id, "messages": messages,
                "subject": messages[0]["subject"], "overseer": OVERSEER, "after": after,
                "next_after": found.next_after}

    def recipients(self, request: Request) -> dict[str, Any]:
        """Every recipient of one message with their receipts, a page at a time: a broadcast can reach hundreds."""
        project = self._project(request)
        slug = project["slug"]
        found = self.mail.get_message(slug, request.path_params["message_id"])
        receipts = self.mail.message_receipts(slug, [found.message.id], viewer=OVERSEER).get(found.message.id, [])
        listed = paged(request, sliced(receipts), cap=DEEP)
        return {"project": project, "message": found, "pages": listed, "count": len(receipts)}

    def message(self, request: Request) -> dict[str, Any]:
        project = self._project(request)
        found = self.mail.get_message(project["slug"], request.path_params["message_id"])
        return {"redirect": f"/ui/p/{project['slug']}/thread/{found.message.thread_id}#m-{found.message.id}"}

    def search(self, request: Request) -> dict[str, Any]:
        project = self._project(request)
        query = request.query_params.get("q", "").strip()
        error = None

        def found(limit: int) -> list[SearchHit]:
            nonlocal error
            if not query:
                return []
            try:
                return self.mail.search_messages(project["slug"], query, limit=limit)
            except GitmailError as exc:
                if exc.code != INVALID_ARGUMENT:
                    raise
                error = exc  # a query the language cannot read: say so beside the query, kept as typed
                return []

        hits = paged(request, head(found))
        terms = render.query_terms(query)
        shown = [{**h, "subject_html": render.highlight(h.subject, terms),
                  "snippet_html": render.snippet(h.snippet, terms)} for h in hits.items]
        return {"project": project, "query": query, "hits": shown, "pages": hits, "error": error}

    def board(self, request: Request) -> dict[str, Any]:
        project = self._project(request)
        slug = project["slug"]
        show_all = request.query_params.get("all") == "1"
        reservations = paged(request, sliced(self.mail.list_file_reservations(slug, active_only=not show_all)
                                             .file_reservations), name="reservations", cap=DEEP)
        agents = paged(request, sliced(self.mail.list_agents(slug)), name="seats", cap=DEEP)
        seats = [self.mail.seat_status(slug, a.name) for a in agents.items]
        build_slots = paged(request, sliced(self.mail.list_build_slots(slug, active_only=not show_all).build_slots),
                            name="slots", cap=DEEP)
        slots = [{**s, "shown": s.holders[:HOLDERS_SHOWN], "more": max(0, len(s.holders) - HOLDERS_SHOWN)}
                 for s in build_slots.items]
        path = request.query_params.get("path", "").strip()
        found: list[Any] = []
        lookup_error = None
        if path:
            try:
                found = self.mail.holders_of(slug, path)
            except GitmailError as exc:
                lookup_error = exc
        holders = paged(request, sliced(found), name="holders", cap=DEEP)
        return {"project": project, "reservations": reservations, "seats": seats, "seat_pages": agents,
                "build_slots": build_slots, "slots": slots, "show_all": show_all, "path": path, "holders": holders,
                "lookup_error": lookup_error}

    def slot(self, request: Request) -> dict[str, Any]:
        """One build slot's terms and its holders a page at a time: a shared slot can admit many."""
        project = self._project(request)
        name = request.path_params["slot"]
        found = [s for s in self.mail.list_build_slots(project["slug"]).build_slots if s.slot == name]
        if not found:
            raise GitmailError(NOT_FOUND, f"no build slot {name[:80]!r}: the board lists those in use", {"slot": name})
        holders = paged(request, sliced(found[0].holders), cap=DEEP)
        return {"project": project, "slot": found[0], "pages": holders}

    def channels(self, request: Request) -> dict[str, Any]:
        """The project's channels, by name, with what each is for and how many posts it holds."""
        project = self._project(request)
        listed = paged(request, sliced(self.mail.channel_overview(project["slug"]).channels), cap=DEEP)
        return {"project": project, "pages": listed}

    def channel(self, request: Request) -> dict[str, Any]:
        """One channel's posts, newest first a page at a time, each body rendered and sanitized as a message's."""
        project = self._project(request)
        slug, name = project["slug"], request.path_params["name"]
        high = self.mail.observe_channel(slug, name, limit=1).high_watermark

        def newest_first(offset: int, count: int) -> list[ChannelPostView]:
            after = max(0, high - offset - count)
            if high - offset <= after:
                return []
            return self.mail.observe_channel(slug, name, after=after, limit=high - offset - after).posts[::-1]

        pages = paged(request, newest_first, cap=DEEP)
        posts = [{**p, "html": render.markdown(p.body_md, attachment_base=f"/ui/p/{slug}/file")} for p in pages.items]
        found = [c for c in self.mail.channel_overview(slug).channels if c.name == name]
        return {"project": project, "channel": found[0] if found else None, "channel_name": name, "posts": posts,
                "pages": pages}

    def memory(self, request: Request) -> dict[str, Any]:
        """The project's defaults for new agents (org_context) and its archive's memory folders, with their files."""
        project = self._project(request)
        shown = self.mail.memory_overview(project["slug"])
        return {"project": project, "defaults": shown.defaults, "pages": paged(request, sliced(shown.folders),
                                                                               per=10)}

    def files(self, request: Request) -> dict[str, Any]:
        """The project's files, newest first a page at a time, each with the messages that carry it."""
        project = self._project(request)
        slug = project["slug"]
        pages = paged(request, lambda offset, count: self._files_slice(slug, offset, count), cap=DEEP)
        rows = [{**f, "described": self.mail.describe_file(slug, f.file_id)} for f in pages.items]
        return {"project": project, "files": rows, "pages": pages}

    def _files_slice(self, slug: str, offset: int, count: int) -> list[FileView]:
        """``count`` of the project's files from ``offset`` (newest first), read a cursor's page at a time."""
        found: list[FileView] = []
        cursor = None
        while True:
            page = self.mail.list_files(slug, limit=FILES_PAGE, cursor=cursor)
            found.extend(page.files)
            if len(found) >= offset + count or page.next_cursor is None:
                return found[offset:offset + count]
            cursor = page.next_cursor

    async def file(self, request: Request) -> Response:
        """A file's bytes as a download, checked against its SHA-256 (never shown in place: contents are data)."""
        session, _ = self._session(request)
        if session is None:
            return Response("sign in first", status_code=401)
        slug, file_id = request.path_params["slug"], request.path_params["file_id"]
        try:
            name, _, data = await run_in_threadpool(self.mail.read_file, slug, file_id)
        except GitmailError as exc:
            return Response(exc.message, status_code=404 if exc.code in (NOT_FOUND, FILE_NOT_FOUND) else 400)
        quoted = urllib.parse.quote(os.path.basename(name) or file_id)
        return Response(data, media_type="application/octet-stream", headers={
            "X-Content-Type-Options": "nosniff", "Content-Security-Policy": "default-src 'none'",
            "Content-Disposition": f"attachment; filename*=UTF-8''{quoted}"})

    def journals(self, request: Request) -> dict[str, Any]:
        project = self._project(request)
        slug = project["slug"]
        agents = [a.name for a in self.mail.list_agents(slug, active_only=False)]
        chosen = request.query_params.get("agent") or (agents[0] if agents else None)

        def newest_first(limit: int) -> list[JournalView]:
            return [] if not chosen else \
                list(self.mail.read_journal(slug, chosen, limit=limit, observe=True).entries)[::-1]

        pages = paged(request, head(newest_first))
        entries = [{**e, "html": render.markdown(e.entry, attachment_base=f"/ui/p/{slug}/file")}
                   for e in reversed(pages.items)]  # a page reads oldest first, as a journal is written
        tabs = paged(request, sliced(agents), name="agents", cap=DEEP)
        return {"project": project, "tabs": [(a, link(request, agent=a, page=None)) for a in tabs.items],
                "tab_pages": tabs, "chosen": chosen, "entries": entries, "pages": pages}

    def history(self, request: Request) -> dict[str, Any]:
        project = self._project(request)
        slug = project["slug"]
        kind, key = request.query_params.get("kind", ""), request.query_params.get("key", "")
        if kind not in KINDS or not key:
            raise GitmailError("INVALID_ARGUMENT", f"name what to show: kind is one of {', '.join(KINDS)}, "
                               "key its ID or name", {"kind": kind})
        paths = self.mail.record_paths(slug, kind, key)
        commits = paged(request, lambda offset, count: self.mail.history(slug, paths, limit=count, offset=offset),
                        cap=HISTORY_ROWS)
        shown = [{**c, "file_pages": paged(request, sliced(c["files"]), name="files-" + c["commit"][:12], cap=DEEP)}
                 for c in commits.items]  # a commit can touch hundreds of files (a broadcast's copies)
        git_dir = self.store.archive(slug).git_dir
        command = shlex.join(["git", "--git-dir", git_dir, "log", "-p", "main", "--", *paths])
        return {"project": project, "kind": kind, "key": key, "commits": shown, "pages": commits,
                "command": command, "paths": paths}

    def compose(self, request: Request) -> dict[str, Any]:
        project = self._project(request)
        agents = [a.name for a in self.mail.list_agents(project["slug"]) if a.name != OVERSEER]
        threads = self.mail.recent_threads(project["slug"], limit=PAGE)
        return {"project": project, "agents": agents, "form": dict(request.query_params), "error": None,
                "overseer": OVERSEER, "threads": threads}

    # -- writes -----------------------------------------------------------------
    def send(self, request: Request, form: dict[str, str]) -> str:
        slug = self.mail.get_project(request.path_params["slug"]).slug
        result = self.mail.send_as_overseer(
            slug, _names(form.get("to")), form.get("subject", ""), form.get("body", ""),
            SendOptions(importance=form.get("importance", "normal"), ack_required=form.get("ack_required") == "on",
                        broadcast=form.get("broadcast") == "on", cc=_names(form.get("cc")) or None,
                        bcc=_names(form.get("bcc")) or None, thread_id=form.get("thread_id") or None))
        return self._sent_to(slug, result.message)

    def reply(self, request: Request, form: dict[str, str]) -> str:
        slug = self.mail.get_project(request.path_params["slug"]).slug
        result = self.mail.reply_as_overseer(
            slug, request.path_params["message_id"], form.get("body", ""),
            SendOptions(cc=_names(form.get("cc")) or None, bcc=_names(form.get("bcc")) or None,
                        importance=form.get("importance") or None, ack_required=form.get("ack_required") == "on"),
            to=_names(form.get("to")) or None)
        return self._sent_to(slug, result.message)

    @staticmethod
    def _sent_to(slug: str, sent: MessageView | None) -> str:
        """Where a send or reply leads: the message in its thread (the overseer's mail is never held)."""
        assert sent is not None
        return f"/ui/p/{slug}/thread/{sent.thread_id}#m-{sent.id}"

    async def preview(self, request: Request) -> Response:
        """A Markdown body as the thread will show it (the same renderer and sanitizer); writes nothing."""
        session = self.sessions.get(request.cookies.get(COOKIE))
        form = await request.form()
        if session is None or not csrf_ok(session, form.get("csrf")):
            return _stale_form()
        body = form.get("body")
        html = render.markdown(body if isinstance(body, str) else "",
                               attachment_base=f"/ui/p/{request.path_params['slug']}/file")
        return HTMLResponse(str(html) or "<p class=\"empty\">Nothing to show yet.</p>",
                            headers={"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"})

    def _compose_again(self, request: Request, form: dict[str, str]) -> dict[str, Any]:
        values = self.compose(request)
        values.pop("form")
        values.pop("error")
        return values

    def _thread_again(self, request: Request, form: dict[str, str]) -> dict[str, Any]:
        slug = request.path_params["slug"]
        found = self.mail.get_message(slug, request.path_params["message_id"])
        request.path_params["thread_id"] = found.message.thread_id
        return self.thread(request)

    # -- the rest -------------------------------------------------------------
    def _login_page(self, request: Request, target: str, error: str | None = None, *, status: int = 200,
                    headers: dict[str, str] | None = None) -> Response:
        page = self.templates.get_template("login.html").render(error=error, next=target, login=True, csrf="",
                                                               request_path=request.url.path)
        return HTMLResponse(page, status_code=status, headers=headers)

    async def login(self, request: Request) -> Response:
        target = within_view(request.query_params.get("next", ""))
        if request.method == "GET":
            return self._login_page(request, target)
        address = request.client.host if request.client else "unknown"
        retry = self.logins.retry_at(address)
        if retry is not None:
            wait = max(1, int(retry - self.store.clock.time()) + 1)
            return self._login_page(
                request, target, f"Too many wrong tokens from your address ({address}): sign-in from it is closed "
                f"until {_epoch(int(retry) + 1)}. Try again then, with the server's token (GITMAIL_TOKEN).",
                status=429, headers={"Retry-After": str(wait)})
        form = await request.form()
        offered = form.get("token")
        if not isinstance(offered, str) or not self.sessions.check_token(offered):
            self.logins.failed(address)
            return self._login_page(request, target, "That is not the server's token (GITMAIL_TOKEN).", status=401)
        response = RedirectResponse(target, status_code=303)
        self._cookie(response, self.sessions.open(signed_in=True))
        return response

    async def logout(self, request: Request) -> Response:
        """Ends the session (server side and cookie); a live session's form must carry its CSRF token."""
        session = self.sessions.get(request.cookies.get(COOKIE))
        form = await request.form()
        if session is not None and not csrf_ok(session, form.get("csrf")):
            return _stale_form()
        if session is not None:
            self.sessions.close(session)
        response = RedirectResponse("/ui/login" if self.sessions.needs_login else "/ui/", status_code=303)
        response.delete_cookie(COOKIE, path="/ui", httponly=True, samesite="strict")
        return response

    async def attachment(self, request: Request) -> Response:
        session, _ = self._session(request)
        if session is None:
            return Response("sign in first", status_code=401)
        slug, path = request.path_params["slug"], request.path_params["path"]
        try:
            found = await run_in_threadpool(self.mail.get_attachment, slug, path)
        except GitmailError as exc:
            return Response(exc.message, status_code=404 if exc.code == NOT_FOUND else 400)
        data = base64.b64decode(found.content_base64)
        media = found.media_type
        if not media.startswith("image/"):
            media = "application/octet-stream"  # only images are shown in place; the rest is a download
        return Response(data, media_type=media, headers={"X-Content-Type-Options": "nosniff",
                                                         "Content-Security-Policy": "default-src 'none'"})

    async def stream(self, request: Request) -> Response:
        session, _ = self._session(request)
        if session is None:
            return Response("sign in first", status_code=401)
        slug = request.query_params.get("project") or None
        return StreamingResponse(self.events.stream(slug), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})

    async def redirect_message(self, request: Request) -> Response:
        session, _ = self._session(request)
        if session is None:
            return RedirectResponse(f"/ui/login?next={request.url.path}", status_code=303)
        try:
            values = await run_in_threadpool(self.message, request)
        except GitmailError as exc:
            return self._error(request, session, exc)
        return RedirectResponse(values["redirect"], status_code=303)

    def routes(self) -> list[Any]:
        p = "/p/{slug}"
        return [
            Route("/", self.page("projects.html", self.projects)),
            Route("/login", self.login, methods=["GET", "POST"]),
            Route("/logout", self.logout, methods=["POST"]),
            Route("/events", self.stream),
            Route(p, self.page("project.html", self.project)),
            Route(p + "/agents/{name}", self.page("agent.html", self.agent)),
            Route(p + "/thread/{thread_id}", self.page("thread.html", self.thread)),
            Route(p + "/m/{message_id}", self.redirect_message),
            Route(p + "/recipients/{message_id}", self.page("recipients.html", self.recipients)),
            Route(p + "/slot/{slot}", self.page("slot.html", self.slot)),
            Route(p + "/search", self.page("search.html", self.search)),
            Route(p + "/board", self.page("board.html", self.board)),
            Route(p + "/journals", self.page("journals.html", self.journals)),
            Route(p + "/channels", self.page("channels.html", self.channels)),
            Route(p + "/channels/{name}", self.page("channel.html", self.channel)),
            Route(p + "/memory", self.page("memory.html", self.memory)),
            Route(p + "/files", self.page("files.html", self.files)),
            Route(p + "/files/{file_id}", self.file),
            Route(p + "/history", self.page("history.html", self.history)),
            Route(p + "/compose", self.page("compose.html", self.compose)),
            Route(p + "/compose", self.action(self.send, "compose.html", self._compose_again), methods=["POST"]),
            Route(p + "/reply/{message_id}", self.action(self.reply, "thread.html", self._thread_again),
                  methods=["POST"]),
            Route(p + "/preview", self.preview, methods=["POST"]),
            Route(p + "/file/{path:path}", self.attachment),
            *Console(self).routes(),
            Mount("/static", app=StaticFiles(directory=os.path.join(HERE, "static")), name="static"),
        ]


def build_web(mail: Mail, *, token: str | None = None, events: Events | None = None) -> Starlette:
    """The web view as an application to mount at ``/ui`` (see :class:`WebView`)."""
    view = WebView(mail, token=token, events=events)
    app = Starlette(routes=view.routes())
    app.state.view = view
    return app
