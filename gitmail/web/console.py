"""The overseer's console: the dashboard of what needs a person, and what that person may do about it.

Pages: ``/ui/dashboard`` (every project that is not archived) and
``/ui/p/<slug>/dashboard`` (one), built from :meth:`Mail.needs_attention`.
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

from gitmail.mail.facade import Mail
from gitmail.model.errors import invalid
from gitmail.model.names import OVERSEER

from .access import within_view

Build = Callable[[Request], dict[str, Any]]
Run = Callable[[Request, dict[str, str]], str]
Again = Callable[[Request, dict[str, str]], dict[str, Any]]
Confirm = Callable[[Request, dict[str, str]], str]

PER_LIST = 20  # items of each list a dashboard shows per project


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
        projects = [p["slug"] for p in self.mail.list_projects()]
        return {"boards": [self.mail.needs_attention(slug, limit=PER_LIST) for slug in projects], "project": None,
                "overseer": OVERSEER, "error": None}

    def one(self, request: Request) -> dict[str, Any]:
        project = self.mail.get_project(request.path_params["slug"])
        return {"boards": [self.mail.needs_attention(project["slug"], limit=PER_LIST)], "project": project,
                "overseer": OVERSEER, "error": None}

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
