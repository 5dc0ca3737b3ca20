"""Tools declared at module level, and how a server adds them.

A tool is a plain module-level function whose first parameter is the
:class:`~gitmail.server.runtime.Runtime`; the rest are its arguments, typed and
described (they become the input schema), and its docstring is its
description. Each tool module has one :class:`Toolbox` naming the family its
tools belong to (see :mod:`gitmail.server.profiles`) and records each tool
with its annotations and access rule. :func:`install` binds a recorded tool
to a runtime and adds it to a FastMCP server, so a tool can be imported, read
and called on its own (``tools_messages.send_message(rt, ctx, ...)``).
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
from fastmcp import Context, FastMCP
from fastmcp.tools.base import ToolResult
from fastmcp.tools.function_tool import FunctionTool
from mcp_types import Tool as MCPTool
from mcp_types import ToolAnnotations

from gitmail.model.errors import GitmailError, invalid

from .access import ACTING_AS, AGENT, AGENT_ID, Access, Rule
from .params import ActingAs, AgentId
from .results import error_result, log_failure, shown
from .runtime import Runtime
from .schemas import UNLISTED, listed, output_schema, type_list

RuleOf = Callable[[Access], Rule]
"""An access rule before there is a server: made from the server's :class:`Access` when the tool is installed."""

ANYONE: RuleOf = Access.open
ITSELF: RuleOf = Access.agent
MEMBER: RuleOf = Access.member
PRODUCT: RuleOf = Access.product


def agent(name: str, token: str = "agent_token") -> RuleOf:
    """Proof of the agent the argument ``name`` names (with its token in ``token``)."""
    return lambda access: access.agent(name, token)


TOKEN_ARGUMENTS = ("agent_token", "sender_token")


@dataclass(frozen=True)
class ToolSpec:
    """One tool as its module declares it."""

    name: str
    family: str
    fn: Callable[..., Any]
    hints: Mapping[str, bool]
    rule: RuleOf


@dataclass
class Toolbox:
    """The tools of one module, all of one family, in the order they appear in ``tools/list``."""

    family: str
    specs: list[ToolSpec] = field(default_factory=list)

    def tool(self, hints: Mapping[str, bool], *, access: RuleOf,
             name: str | None = None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Record ``fn`` as a tool of this family; ``fn`` itself is returned unchanged."""

        def record(fn: Callable[..., Any]) -> Callable[..., Any]:
            self.specs.append(ToolSpec(name or fn.__name__, self.family, fn, dict(hints), access))
            return fn

        return record


def install(mcp: FastMCP, rt: Runtime, spec: ToolSpec, *, leave_out: frozenset[str] = frozenset()) -> FunctionTool:
    """Add ``spec`` to ``mcp``, bound to ``rt``: it checks its access rule first and answers errors as results.

    Failures become error results with a code: a GitmailError keeps its own,
    the OS running out of file handles, disk or memory is
    RESOURCE_EXHAUSTED, anything else INTERNAL (and logged). Returns the
    tool as added, which :func:`proof_argument` and :func:`access_rule` read. The rule is kept in the tool's
    ``_meta`` (``gitmail/access``; served by ``resource://tooling/access``) and is checked before the body runs, so
    a refused call changes nothing. A tool that acts as one agent (rule ``agent``)
    also takes ``acting_as``: the caller proves the agent it names as usual,
    and the call then runs as the agent below it that ``acting_as`` names.
    Optional arguments named in ``leave_out`` (``seat``, ``acting_as`` when the
    profile leaves out the tools that make them useful) are not taken. The
    listed input schema is :func:`compact`.
    """
    fn, rule = spec.fn, spec.rule(rt.access)
    hints = typing.get_type_hints(fn, include_extras=True)
    parameters = [p.replace(annotation=hints.get(p.name, p.annotation))
                  for p in list(inspect.signature(fn).parameters.values())[1:]
                  if not (p.name in leave_out and p.default is None)]
    token_argument = next((t for t in TOKEN_ARGUMENTS if any(p.name == t for p in parameters)), None)
    delegable = ACTING_AS not in leave_out and rule.kind == AGENT and token_argument is not None
    named_identities = delegable and AGENT_ID not in leave_out

    def check(kwargs: dict[str, Any]) -> None:
        """The access rule, on the call's arguments (which it may rewrite for acting_as or agent_id)."""
        below = kwargs.pop(ACTING_AS, None) if delegable else None
        named = kwargs.pop(AGENT_ID, None) if named_identities else None
        if below is not None and named is not None:
            raise invalid("pass acting_as (an agent below you) or agent_id (this task's identity), not both",
                          field=AGENT_ID)
        ctx = next((v for v in kwargs.values() if isinstance(v, Context)), None)
        rule.check(kwargs, ctx)
        if below is not None:
            rule.act_as(kwargs, below)
        if named is not None:
            rule.act_as_named(kwargs, named)

    guarded: Any  # a function that also carries the signature, name and docstring FastMCP reads
    if inspect.iscoroutinefunction(fn):
        # A tool that awaits (a waiting read) runs on the event loop; its checks read the archive,
        # so they run in a worker thread, as a synchronous tool's whole body does.
        async def guarded(*args: Any, **kwargs: Any) -> Any:
            try:
                await anyio.to_thread.run_sync(check, kwargs)
                return shown(await fn(rt, *args, **kwargs))
            except GitmailError as exc:
                return error_result(exc)
            except Exception as exc:  # noqa: BLE001 - every failure reaches the caller with a code
                return error_result(log_failure(spec.name, exc))
    else:
        def guarded(*args: Any, **kwargs: Any) -> Any:
            try:
                check(kwargs)
                return shown(fn(rt, *args, **kwargs))
            except GitmailError as exc:
                return error_result(exc)
            except Exception as exc:  # noqa: BLE001 - every failure reaches the caller with a code
                return error_result(log_failure(spec.name, exc))

    if delegable:
        parameters.append(inspect.Parameter(ACTING_AS, inspect.Parameter.KEYWORD_ONLY, default=None,
                                            annotation=ActingAs))
    if named_identities:
        parameters.append(inspect.Parameter(AGENT_ID, inspect.Parameter.KEYWORD_ONLY, default=None,
                                            annotation=AgentId))
    guarded.__name__, guarded.__qualname__, guarded.__doc__ = fn.__name__, fn.__qualname__, fn.__doc__
    returns = hints.get("return", inspect.Signature.empty)
    # the declared result gives the output schema; the value itself is sent as the JSON it already is
    guarded.__signature__ = inspect.Signature(parameters, return_annotation=Any)
    guarded.__annotations__ = {**{p.name: p.annotation for p in parameters}, "return": Any}
    hints = dict(spec.hints)
    if named_identities and hints.get("readOnlyHint"):  # a read naming a new agent_id makes that identity
        hints = {"readOnlyHint": False, "destructiveHint": False, "idempotentHint": True, "openWorldHint": False}
    added = Listed.from_function(guarded, name=spec.name, annotations=ToolAnnotations.model_validate(hints),
                               tags={spec.family}, meta={ACCESS_META: rule.describe()}, run_in_thread=True,
                               output_schema=None if returns is ToolResult else output_schema(returns))
    added.parameters = compact(added.parameters)
    mcp.add_tool(added)
    return added


def proof_argument(tool: FunctionTool) -> str | None:
    """The argument an installed tool takes its caller's proof in (``agent_token`` or ``sender_token``), if any.

    :class:`~.guesses.Guesses` moves a ``registration_token`` there.
    """
    return next((t for t in TOKEN_ARGUMENTS if t in tool.parameters.get("properties", {})), None)


def access_rule(tool: FunctionTool) -> str:
    """The access rule an installed tool checks, as ``resource://tooling/access`` serves it."""
    return str((tool.meta or {})[ACCESS_META])


class Listed(FunctionTool):
    """A tool as ``tools/list`` shows it: without the title made from its name and FastMCP's own metadata or marks.

    A title that only re-spells the name (``Send Message``) and FastMCP's
    ``_meta.fastmcp`` (its tags) tell an agent nothing the name does not, and
    every agent pays for them in its context. The tool's access rule
    (``gitmail/access``) stays on the tool and is served once for all tools
    by ``resource://tooling/access`` instead of in each listed tool (1.4 KB of
    the default listing): the server enforces it either way, and a refused
    call's error says what proof it needs.
    """

    def to_mcp_tool(self, **overrides: Any) -> MCPTool:
        shown = super().to_mcp_tool(**overrides)
        shown.title = None
        if shown.meta:
            shown.meta = {key: value for key, value in shown.meta.items() if key not in _UNLISTED_META} or None
        if shown.output_schema is not None:
            shown.output_schema = listed(shown.output_schema)
        return shown


ACCESS_META = "gitmail/access"
"""The key of a tool's ``_meta`` that holds its access rule (described)."""

_UNLISTED_META = frozenset({"fastmcp", ACCESS_META})

_UNLISTED_BOUNDS = frozenset({"maxLength", "minLength", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})


def compact(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` as listed: an optional argument shows its type without ``null`` and its ``null`` default.

    Every agent pays for the listed schemas in its context window, and an
    argument left out already means "none": ``{"anyOf": [{"type": "string"},
    {"type": "null"}], "default": null}`` says no more than ``{"type":
    "string"}`` outside ``required``. Arguments are still validated by their
    Python types, so an explicit ``null`` stays accepted; for the same reason
    the listing leaves out ``additionalProperties: false`` (an argument the
    schema does not name is refused all the same, with the tool's arguments
    named). A flag whose default is ``false`` is listed without it: a flag
    left out is off. Bounds on a text's length or a number's range
    (``maxLength``, ``minimum``, ``maximum``) are not listed either: a value
    past one is refused as INVALID_ARGUMENT naming the argument and the
    bound, and agents rarely come near them. ``maxItems`` stays listed, the
    cap on every list argument a caller builds. A choice of plain types is
    a type list (``{"type": ["string", "integer"]}``), not an ``anyOf``. An
    argument marked :data:`~.schemas.UNLISTED` (one the server takes only so
    that older calls keep working, and ignores) is not listed.
    """
    properties = {}
    for name, prop in schema.get("properties", {}).items():
        if prop.get(UNLISTED):
            continue
        options = prop.get("anyOf")
        if prop.get("default", 0) is None and isinstance(options, list) and {"type": "null"} in options:
            kept = [o for o in options if o != {"type": "null"}]
            prop = {k: v for k, v in prop.items() if k not in ("anyOf", "default")}
            prop = {**(kept[0] if len(kept) == 1 else {"anyOf": kept}), **prop}
        if prop.get("type") == "boolean" and prop.get("default", True) is False:
            prop = {k: v for k, v in prop.items() if k != "default"}
        prop = {k: v for k, v in prop.items() if k not in _UNLISTED_BOUNDS}
        properties[name] = type_list(prop)
    listed = {key: value for key, value in schema.items() if key != "additionalProperties"}
    if "required" in listed:
        listed["required"] = [name for name in listed["required"] if name in properties]
    return {**listed, "properties": properties} if properties else listed
