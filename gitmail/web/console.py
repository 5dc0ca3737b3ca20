"""The overseer's console: the dashboard of what needs a person, all mail, and what that person may do about it.

Pages: ``/ui/dashboard`` (every project that is not archived, ten to a
page: ``?projects=2``) and
``/ui/p/<slug>/dashboard`` (one), built from :meth:`Mail.needs_attention`,
each list paged on its own (``?owed=2``); ``/ui/mail``, the mail of every
project newest first or searched, with filters (:meth:`Mail.all_mail`).
Writes, each a form with the session's CSRF token behind the same Host and
Origin checks as every route, each committed under the operator's git
identity (:meth:`WebView.action`): the overseer marks its own mail read or
acknowledges it, answers a contact request for the agent it was made to,
retires or restores an agent, force-releases an abandoned reservation (the
rules and the notice any agent's forced release has), archives or restores
a project. The last three ask for a confirmation first.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from starlette.requests import Request
from starlette.routing import Route

from gitmail.mail.allmail import ACK_STATES, IMPORTANCES, MAX_HITS
from gitmail.mail.attention import LISTS
from gitmail.mail.facade import Mail, MailQuery
from gitmail.model.errors import INVALID_ARGUMENT, GitmailError, invalid
from gitmail.model.names import OVERSEER

from . import render
from .access import within_view
from .paging import PAGE, Paged, head, link, paged, sliced, whole_number

Build = Callable[[Request], dict[str, Any]]
Run = Callable[[Request, dict[str, str]], str]
Again = Callable[[Request, dict[str, str]], dict[str, Any]]
Confirm = Callable[[Request, dict[str, str]], str]

PER_LIST = 20  # items of each list a dashboard shows per project
BOARDS = 10  # projects the dashboard across projects shows a page (each up to six lists of PER_LIST)
DEEPEST = 999  # how far into a dashboard list its pages reach (a read asks for one more than it shows, up to 1000)


class Pages(Protocol):
    """What the console needs of the view (:class:`gitmail.web.app.WebView`): its facade and its route makers."""

    mail: Mail

    def page(self, name: str, build: Build) -> Callable[[Request], Any]: ...

    def action(self, run: Run, template: str, again: Again, *,
               confirm: Confirm | None = None) -> Callable[[Request], Any]: ...


class Console:
    """The dashboard pages and the operator's actions over one view's :class:`Pages`."""

    def __init__(self, view: Pages):
        self.view = view
        self.mail = view.mail

    # -- pages ----------------------------------------------------------------
    def everything(self, request: Request) -> dict[str, Any]:
        projects = paged(request, sliced([p["slug"] for p in self.mail.list_projects()]), name="projects",
                         per=BOARDS, cap=BOARDS * 10_000)
        boards = [self.mail.needs_attention(slug, limit=PER_LIST) for slug in projects.items]
        return {"boards": [(b, self._pages(request, b, here=False)) for b in boards], "project": None,
                "board_pages": projects, "overseer": OVERSEER, "error": None}

    def one(self, request: Request) -> dict[str, Any]:
        project = self.mail.get_project(request.path_params["slug"])
        board = self.mail.needs_attention(project["slug"], limit=PER_LIST)
        return {"boards": [(board, self._pages(request, board, here=True))], "project": project,
                "overseer": OVERSEER, "error": None}

    def _pages(self, request: Request, board: Any, *, here: bool) -> dict[str, Paged]:
        """Each list of a project's dashboard as a page: the first from ``board``, a later one asked for by name.

        On the project's own dashboard (``here``) a list pages in place
        (``?owed=2``); across projects the next page is the project's dashboard.
        """
        out = {}
        for which in LISTS:
            if here and request.query_params.get(which):
                out[which] = paged(request, head(self._reader(board.slug, which)), name=which, per=PER_LIST,
                                   cap=DEEPEST)
                continue
            first = getattr(board, which)
            later = link(request, **{which: 2}) if here else f"/ui/p/{board.slug}/dashboard?{which}=2"
            out[which] = Paged(items=first.items, page=1, newer=None, older=later if first.more else None)
        return out

    def _reader(self, slug: str, which: str) -> Callable[[int], list[Any]]:
        """The first ``limit`` items of one list of a project's dashboard."""
        return lambda limit: list(self.mail.attention_list(slug, which, limit=limit).items)

    def all_mail(self, request: Request) -> dict[str, Any]:
        """Every project's mail, newest first or searched, filtered by the form's fields."""
        params = request.query_params
        query = MailQuery(text=params.get("q", ""), sender=params.get("from", ""), recipient=params.get("to", ""),
                          importance=params.get("importance", ""), ack=params.get("ack", ""),
                          since=params.get("since", ""), until=params.get("until", ""))
        error, found = None, None
        try:
            page = whole_number(request, "page", 1, high=MAX_HITS // PAGE)
            found = self.mail.all_mail(query, after=params.get("after") or None, page=page, limit=PAGE)
        except GitmailError as exc:
            if exc.code != INVALID_ARGUMENT:
                raise
            error, page = exc, 1  # shown beside the form, which keeps what was typed
        terms = render.query_terms(query.text)
        items = [(m, render.highlight(m.subject, terms), render.snippet(m.snippet, terms)) for m in found.items] \
            if found else []
        if found is None or found.searched:
            pages = Paged(items=items, page=page, newer=link(request, page=page - 1 if page > 2 else None)
                          if page > 1 else None, older=link(request, page=page + 1) if found and found.more else None)
        else:
            pages = Paged(items=items, page=page, newer=link(request, after=None) if params.get("after") else None,
                          older=link(request, after=found.cursor) if found.cursor else None)
        return {"form": {key: params.get(key, "") for key in ("q", "from", "to", "importance", "ack", "since",
                                                                "until")},
                "pages": pages, "error": error, "searched": found.searched if found else "",
                "bounded": bool(found and found.bounded), "importances": IMPORTANCES, "ack_states": ACK_STATES,
                "project": None}

    def _again(self, request: Request, form: dict[str, str]) -> dict[str, Any]:
        """The dashboard the form came from, to show a refused action's error on."""
        values = self.everything(request) if form.get("back", "").startswith("/ui/dashboard") else self.one(request)
        values.pop("error")
        return values

    # -- writes ---------------------------------------------------------------
    def _slug(self, request: Request) -> str:
        return self.mail.get_project(request.path_params["slug"]).slug

    @staticmethod
    def _back(form: dict[str, str], slug: str) -> str:
        back = form.get("back", "")
        return within_view(back) if back else f"/ui/p/{slug}/dashboard"

    def receipt(self, request: Request, form: dict[str, str]) -> str:
        slug = self._slug(request)
        message_id = request.path_params["message_id"]
        if form.get("what") == "ack":
            self.mail.acknowledge_message(slug, OVERSEER, message_id)
        elif form.get("what") == "read":
            self.mail.mark_message_read(slug, OVERSEER, message_id)
        else:
            raise invalid("what must be read or ack", field="what")
        return self._back(form, slug)

    def contact(self, request: Request, form: dict[str, str]) -> str:
        slug = self._slug(request)
        answer = form.get("answer")
        if answer not in ("approve", "deny"):
            raise invalid("answer must be approve or deny", field="answer")
        self.mail.respond_contact(slug, form.get("target", ""), form.get("requester", ""), answer == "approve")
        return self._back(form, slug)

    def agent_status(self, request: Request, form: dict[str, str]) -> str:
        slug = self._slug(request)
        name = request.path_params["name"]
        if form.get("status") == "retired":
            self.mail.retire_agent(slug, name)
        elif form.get("status") == "active":
            self.mail.unretire_agent(slug, name)
        else:
            raise invalid("status must be retired or active", field="status")
        return self._back(form, slug)

    def release(self, request: Request, form: dict[str, str]) -> str:
        slug = self._slug(request)
        self.mail.force_release_as_overseer(slug, request.path_params["reservation_id"], note=form.get("note", ""))
        return self._back(form, slug)

    def archive(self, request: Request, form: dict[str, str]) -> str:
        slug = self._slug(request)
        if form.get("archived") == "yes":
            self.mail.archive_project(slug)
        elif form.get("archived") == "no":
            self.mail.unarchive_project(slug)
        else:
            raise invalid("archived must be yes or no", field="archived")
        return "/ui/"

    # -- what a confirmation says -----------------------------------------------
    def _confirm_status(self, request: Request, form: dict[str, str]) -> str:
        name = request.path_params["name"]
        if form.get("status") == "retired":
            return (f"Retire {name}: it can no longer send or receive new mail, its history stays, and the commit "
                    "names you. You can restore it later.")
        return f"Restore {name}: it can send and receive mail again; the commit names you."

    def _confirm_release(self, request: Request, form: dict[str, str]) -> str:
        return (f"Release reservation {request.path_params['reservation_id']} as {OVERSEER}: allowed only if it "
                "has expired or its holder has shown no activity for a while; the holder gets a notice in its inbox "
                "and the commit names you.")

    def _confirm_archive(self, request: Request, form: dict[str, str]) -> str:
        key = self.mail.get_project(request.path_params["slug"]).human_key
        if form.get("archived") == "yes":
            return f"Archive {key}: it leaves the dashboard and the project lists; nothing is deleted."
        return f"Restore {key} from the archive."

    def routes(self) -> list[Route]:
        view, p = self.view, "/p/{slug}"
        return [
            Route("/dashboard", view.page("dashboard.html", self.everything)),
            Route("/mail", view.page("mail.html", self.all_mail)),
            Route(p + "/dashboard", view.page("dashboard.html", self.one)),
            Route(p + "/receipt/{message_id}", view.action(self.receipt, "dashboard.html", self._again),
                  methods=["POST"]),
            Route(p + "/contact", view.action(self.contact, "dashboard.html", self._again), methods=["POST"]),
            Route(p + "/agents/{name}/status", view.action(self.agent_status, "dashboard.html", self._again,
                                                           confirm=self._confirm_status), methods=["POST"]),
            Route(p + "/release/{reservation_id}", view.action(self.release, "dashboard.html", self._again,
                                                               confirm=self._confirm_release), methods=["POST"]),
            Route(p + "/archive", view.action(self.archive, "dashboard.html", self._again,
                                              confirm=self._confirm_archive), methods=["POST"]),
        ]
