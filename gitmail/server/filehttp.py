"""The HTTP file endpoint beside MCP: uploads too large for a call, and downloads of any size.

``POST /files/<project slug>?agent_name=<you>&name=<file name>[&media_type=...]``
stores the request body as a file of the project uploaded by ``agent_name``
(answer: the ``upload_file`` tool's, HTTP 201, or 200 when the same bytes were
already stored). ``GET /files/<project slug>/<file id>[?agent_name=<you>]``
answers the file's bytes. The checks are the tools': the server's bearer
token when it has one (``Authorization: Bearer``), then the agent's proof, its
registration token in the ``X-Agent-Token`` header (never in the URL, which
logs keep; a seat token, when a session holds the agent's seat, goes in
``X-Agent-Seat``); an upload needs proof of the uploader, a download of any agent
of the project. The ``Host`` / ``Origin`` rules of :mod:`.origins` stand in
front of this endpoint as of every other.

An upload is streamed to a temporary file and cut off past the limit
(:meth:`~gitmail.mail.facade.Mail.file_upload_limit`; HTTP 413,
FILE_TOO_LARGE), before anything is written to the archive. A download is
always served as ``application/octet-stream`` with ``Content-Disposition:
attachment``, ``nosniff`` and a sandboxing content policy, so no uploaded page
ever runs as this server's origin: its media type, size and SHA-256 come in
``X-File-Media-Type``, ``Content-Length`` and ``X-File-Sha256`` (and the
standard ``Repr-Digest``), for the caller to verify. Refusals are JSON
``{code, message, data}`` as MCP's are.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import tempfile
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

import anyio
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from gitmail.mail.facade import FILES_HTTP_PATH, Mail
from gitmail.model.errors import FILE_NOT_FOUND, FILE_TOO_LARGE, NOT_FOUND, UNAUTHORIZED, GitmailError, invalid
from gitmail.model.results import wire
from gitmail.storage.store import Store

from .access import Access
from .identity import Identities

TOKEN_HEADER = "x-agent-token"
SEAT_HEADER = "x-agent-seat"
_STATUS = {UNAUTHORIZED: 401, NOT_FOUND: 404, FILE_NOT_FOUND: 404, FILE_TOO_LARGE: 413}
_CHUNK = 1024 * 1024


def _refusal(error: GitmailError) -> JSONResponse:
    status = _STATUS.get(error.code, 400 if error.code != "INTERNAL" else 500)
    return JSONResponse(error.to_dict(), status_code=status)


class FileEndpoint:
    """The two routes, over one store, with the server's bearer token (None: the server needs none)."""

    def __init__(self, store: Store, mail: Mail, token: str | None):
        self.mail = mail
        self.access = Access(store, mail, Identities(store, mail))
        self._token = token.encode("utf-8") if token else None

    def routes(self) -> list[Route]:
        return [Route(FILES_HTTP_PATH + "/{project}", self.upload, methods=["POST"]),
                Route(FILES_HTTP_PATH + "/{project}/{file_id}", self.download, methods=["GET"])]

    def _bearer(self, request: Request) -> None:
        """UNAUTHORIZED unless the request carries the server's bearer token (when it has one)."""
        if self._token is None:
            return
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode("utf-8"), self._token):
            raise GitmailError(UNAUTHORIZED, "this server needs its bearer token: send Authorization: Bearer <token> "
                               "(the GITMAIL_TOKEN the server was started with)", {"header": "authorization"})

    async def _run(self, request: Request, handler: Callable[[], Any]) -> Response:
        try:
            self._bearer(request)
            answer: Response = await handler()
            return answer
        except GitmailError as exc:
            return _refusal(exc)

    async def upload(self, request: Request) -> Response:
        """Store the body as a file of the project (see the module docs)."""
        async def handle() -> Response:
            project, query = request.path_params["project"], request.query_params
            agent, token = query.get("agent_name"), request.headers.get(TOKEN_HEADER)
            if not query.get("name"):
                raise invalid("name the file: ?name=<file name> (such as report.pdf)", field="name")
            await anyio.to_thread.run_sync(
                lambda: self.access.require_agent(None, project, agent, token, argument="X-Agent-Token header"))
            limit = self.mail.file_upload_limit()
            declared = request.headers.get("content-length", "")
            if declared.isdigit() and int(declared) > limit:
                raise _too_large(int(declared), limit)
            with tempfile.TemporaryFile() as spool:
                size = 0
                async for chunk in request.stream():
                    size += len(chunk)
                    if size > limit:
                        raise _too_large(size, limit)
                    spool.write(chunk)
                spool.seek(0)
                data = spool.read()
            media_type = query.get("media_type") or _plain(request.headers.get("content-type"))
            assert isinstance(agent, str)
            done = await anyio.to_thread.run_sync(lambda: self.mail.upload_file(
                project, agent, data, name=query.get("name"), media_type=media_type,
                seat=request.headers.get(SEAT_HEADER)))
            return JSONResponse(wire(done), status_code=201 if done.created else 200)
        return await self._run(request, handle)

    async def download(self, request: Request) -> Response:
        """Serve a file's bytes, checked against its hash, to a proved agent of the project."""
        async def handle() -> Response:
            project, file_id = request.path_params["project"], request.path_params["file_id"]
            agent, token = request.query_params.get("agent_name"), request.headers.get(TOKEN_HEADER)
            if token and not agent:
                raise invalid("the X-Agent-Token header needs agent_name: name the agent whose token it is",
                              field="agent_name")
            if not token:
                raise GitmailError(UNAUTHORIZED, "a download needs proof of an agent of the project: pass "
                                   "?agent_name=<you> and your registration_token in the X-Agent-Token header",
                                   {"header": "X-Agent-Token"})

            def read() -> tuple[str, str, bytes]:
                self.access.require_member(None, project, agent, token, argument="X-Agent-Token header")
                return self.mail.read_file(project, file_id)

            name, media_type, data = await anyio.to_thread.run_sync(read)
            digest = hashlib.sha256(data)
            return Response(data, media_type="application/octet-stream", headers={
                "content-disposition": f"attachment; filename*=UTF-8''{quote(name, safe='')}",
                "x-content-type-options": "nosniff", "content-security-policy": "sandbox; default-src 'none'",
                "x-file-media-type": media_type, "x-file-sha256": digest.hexdigest(),
                "repr-digest": f"sha-256=:{base64.b64encode(digest.digest()).decode('ascii')}:",
                "cache-control": "private, no-store"})
        return await self._run(request, handle)


def _plain(content_type: str | None) -> str | None:
    """The media type of a ``Content-Type`` header without its parameters (None for a form's generic type)."""
    kind = (content_type or "").split(";")[0].strip().lower()
    return None if kind in ("", "application/x-www-form-urlencoded") else kind


def _too_large(size: int, limit: int) -> GitmailError:
    return GitmailError(FILE_TOO_LARGE, f"the upload is {size} bytes or more, over the limit of {limit} bytes this "
                        "server stores (no door of an archive takes a larger file); share it another way",
                        {"size": size, "limit": limit})
