"""How tool outcomes reach the client: results, error results and annotations.

An expected failure is not a protocol error: the tool returns a normal result
with ``isError`` set and a JSON body ``{code, message, data}`` both as text and
as structured content, so an agent can read the stable ``code`` and follow the
``message``. Domain code raises :class:`GitmailError`; :func:`tool` turns it
into such a result. Arguments that do not match a tool's schema, or hold a
NUL character, are caught by :class:`ArgumentErrors` and reported the same
way with ``INVALID_ARGUMENT``.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from fastmcp.exceptions import ValidationError
from fastmcp.server.middleware import CallNext, Middleware, MiddlewareContext
from fastmcp.tools.base import ToolResult
from mcp_types import CallToolRequestParams
from pydantic import ValidationError as PydanticValidationError

from gitmail.model.controls import first_nul, nul_message
from gitmail.model.errors import INTERNAL, INVALID_ARGUMENT, GitmailError, coded
from gitmail.model.results import wire

_log = logging.getLogger("gitmail.server")

# Tool annotations (hints for clients deciding what needs a human's approval).
# A hint equal to the protocol's default (readOnlyHint false, destructiveHint true, idempotentHint false) is left
# out, and so are destructiveHint and idempotentHint of a read-only tool, which mean nothing there: every agent
# pays for each listed byte.
READ = {"readOnlyHint": True, "openWorldHint": False}
WRITE = {"destructiveHint": False, "openWorldHint": False}
IDEMPOTENT = {"idempotentHint": True, "destructiveHint": False, "openWorldHint": False}
DESTRUCTIVE = {"idempotentHint": True, "openWorldHint": False}


WRAPPED = {"fastmcp": {"wrap_result": True}}
"""The _meta of a result sent as ``{"result": ...}`` (a list), by which FastMCP's client unwraps it."""

OutputFormat = str | None  # json (default) or toon: the instructions say so once for the tools that take it


def formatted(result: Any, output_format: str | None) -> Any:
    """``result`` as asked: unchanged for json; for toon, its TOON text as the content.

    The structured content stays the JSON the tool's output schema describes
    (clients validate it, and the 1.x client refuses a result without it),
    so TOON only changes what a reader of the text sees.
    """
    choice = (output_format or "json").strip().lower()
    if choice == "json":
        return result
    if choice == "toon":
        from toon_format import encode  # only the calls that ask for TOON load the encoder

        data = wire(result)
        if isinstance(data, list):  # sent wrapped, as FastMCP sends every list
            return ToolResult(content=encode(data), structured_content={"result": data}, meta=WRAPPED)
        return ToolResult(content=encode(data), structured_content=data)
    raise GitmailError(INVALID_ARGUMENT, f"format must be json or toon; got {output_format!r}", {"argument": "format"})


def error_result(exc: GitmailError) -> ToolResult:
    body = exc.to_dict()
    return ToolResult(content=json.dumps(body, ensure_ascii=False), structured_content=body, is_error=True)


def shown(result: Any) -> Any:
    """A tool's result as sent (typed results as their JSON objects): an empty list still gets its text block."""
    result = wire(result)
    if isinstance(result, list) and not result:
        # FastMCP would send an empty list as no content block at all, and clients that read the
        # first block's text (as agent-mail clients do) would fail on an empty inbox
        return ToolResult(content="[]", structured_content={"result": []}, meta=WRAPPED)
    return result


def log_failure(what: str, exc: Exception) -> GitmailError:
    """The coded form of an unforeseen failure, logged as the server's operator needs it."""
    failure = coded(exc)
    if failure.code == INTERNAL:
        _log.error("%s failed", what, exc_info=exc)
    else:
        _log.warning("%s: %s", what, failure.message)
    return failure


class ArgumentErrors(Middleware):
    """Report schema violations and NUL characters as INVALID_ARGUMENT error results naming the argument.

    NUL is refused in every text argument of every tool before the tool runs
    (see :mod:`gitmail.model.controls`), whatever the tool does with it.

    The server's log gets one line per such call, naming the tool and the
    arguments (FastMCP's own multi-line warning, which names neither, is
    dropped by :class:`OneLineArgumentWarnings`).
    """

    async def on_call_tool(self, context: MiddlewareContext[CallToolRequestParams],
                           call_next: CallNext[CallToolRequestParams, ToolResult]) -> ToolResult:
        where = first_nul(dict(context.message.arguments or {}), "arguments")
        if where:
            argument = where.removeprefix("arguments.")
            return error_result(GitmailError(INVALID_ARGUMENT, nul_message(argument), {"argument": argument}))
        try:
            return await call_next(context)
        except ValidationError as exc:
            error = _describe(context.message.name, exc)
            problems = "; ".join(f"{p['argument']}: {p['problem']}" for p in error.data["problems"]) or "invalid"
            _log.warning("gitmail: %s called with bad arguments: %s", context.message.name,
                         " ".join(problems.split()))
            return error_result(error)


class OneLineArgumentWarnings(logging.Filter):
    """Drops FastMCP's warning about invalid tool arguments; ArgumentErrors logs one line instead."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Invalid arguments for tool")


def quiet_argument_warnings() -> None:
    """Install :class:`OneLineArgumentWarnings` on FastMCP's server logger (once)."""
    logger = logging.getLogger("fastmcp.server.server")
    if not any(isinstance(f, OneLineArgumentWarnings) for f in logger.filters):
        logger.addFilter(OneLineArgumentWarnings())


def _describe(tool_name: str, exc: ValidationError) -> GitmailError:
    cause = exc.__cause__
    problems = []
    if isinstance(cause, PydanticValidationError):
        for err in cause.errors():
            where = ".".join(str(part) for part in err.get("loc", ()) if part != tool_name) or "arguments"
            problems.append({"argument": where, "problem": err.get("msg", "invalid")})
    text = "; ".join(f"{p['argument']}: {p['problem']}" for p in problems) or str(exc)
    return GitmailError(
        INVALID_ARGUMENT,
        f"{tool_name} got arguments that do not fit its schema ({text}); fix them and call again "
        "(tools/list shows every argument with its type)",
        {"tool": tool_name, "problems": problems},
    )
