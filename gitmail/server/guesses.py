"""Answers for callers who guess: a tool this server does not list, an older tool or argument name, a token alias.

Agents are often prompted with another server's names, or with this one's
from before a rename, and call a tool their ``tools/list`` never showed. Such
a call gets the error body every other failure has (``{code, message,
data}``), never a bare text:

* a tool of gitmail that the server's profile leaves out: ``TOOL_NOT_SERVED``
  naming the smallest profile (or family) that has it;
* an older name (:data:`RENAMED_TOOLS`): ``UNKNOWN_TOOL`` naming the tool to
  call now (``data.use``);
* any other name: ``UNKNOWN_TOOL`` with the nearest tool names.

Older names are answered, not served: each maps to a tool whose arguments and
results differ from what the older server had, so running it silently would
hand the caller something it did not ask for; one error names the call to
make, and nothing runs outside ``tools/list``. Older argument names
(:data:`RENAMED_ARGUMENTS`) are answered the same way, and so is an
argument that only the tools of a family the profile leaves out make useful
(:data:`~.profiles.FAMILY_ARGUMENTS`). The token alias
``registration_token`` is different: it is the same proof under another
name, so it is moved into the tool's own token argument (``agent_token`` or
``sender_token``) before the arguments are checked, and no schema lists it.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from fastmcp.server.middleware import CallNext, Middleware, MiddlewareContext
from fastmcp.tools.base import ToolResult
from mcp_types import CallToolRequestParams

from gitmail.model.errors import INVALID_ARGUMENT, TOOL_NOT_SERVED, UNKNOWN_TOOL, GitmailError

from .access import TOKEN_ALIAS
from .profiles import FAMILY_ARGUMENTS, TOOLS_ENV, Profile, smallest_with
from .results import error_result

RENAMED_TOOLS = {
    "create_agent": ("register_agent", "create_agent_identity makes a new identity that never reuses a name"),
    "check_my_messages": ("fetch_inbox", "catch_up and read_messages read what is new since your cursor"),
    "claim_paths": ("file_reservation_paths", "paths and ttl_seconds as before; exclusive defaults to true"),
    "release_claims": ("release_file_reservations", "paths or file_reservation_ids; neither releases all yours"),
    "renew_claims": ("renew_file_reservations", "extend_seconds; paths or file_reservation_ids narrow it"),
    "summarize_threads": ("summarize_thread", "thread_id takes several IDs separated by commas"),
}
"""Older tool name -> (the tool to call now, a note on its arguments)."""

RENAMED_ARGUMENTS = {
    ("send_message", "from_agent"): ("sender_name", None),
    ("reply_message", "from_agent"): ("sender_name", None),
    ("reply_message", "reply_to_message_id"): ("message_id", None),
    ("send_message", "reply_to_message_id"): ("message_id", "reply_message"),
}
"""(tool, older argument) -> (the argument to use now, the tool that takes it when another one does)."""


@dataclass(frozen=True)
class Surface:
    """What a server lists: its profile, every tool of gitmail with its family, and each listed tool's token."""

    profile: Profile
    families: Mapping[str, str]  # every tool gitmail has -> its family
    left_out: frozenset[str] = frozenset()  # arguments of FAMILY_ARGUMENTS the profile does not list
    tokens: dict[str, str | None] = field(default_factory=dict)  # each listed tool -> its token argument

    def unknown(self, name: str) -> GitmailError:
        """The error for a call to ``name``, which this server does not list."""
        served = sorted(self.tokens)
        if name in self.families:
            family = self.families[name]
            holder = smallest_with(name, family)
            return GitmailError(
                TOOL_NOT_SERVED,
                f"{name} is a gitmail tool of the {family} family, which this server's tool profile "
                f"({self.profile}) leaves out; the {holder!r} profile has it. Ask the operator to start the server "
                f"with --tools {self.profile},{family} (or {TOOLS_ENV}={self.profile},{family}), or do without it",
                {"tool": name, "family": family, "profile": str(self.profile), "served_by": holder})
        if name in RENAMED_TOOLS:
            use, note = RENAMED_TOOLS[name]
            where = "" if use in self.tokens else f" (this server's profile {self.profile} leaves it out)"
            return GitmailError(UNKNOWN_TOOL, f"{name} is an older name: call {use} instead{where}; {note}",
                                {"tool": name, "use": use})
        nearest = difflib.get_close_matches(name, served, n=3, cutoff=0.5)
        hint = (f"did you mean {', '.join(nearest)}?" if nearest
                else "tools/list shows every tool this server has")
        return GitmailError(UNKNOWN_TOOL, f"no tool named {name!r} on this server; {hint}",
                            {"tool": name, "nearest": nearest})

    def renamed(self, name: str, arguments: Mapping[str, Any]) -> GitmailError | None:
        """The error for an older argument name, or one whose family the profile leaves out, if any."""
        for argument in arguments:
            if argument in self.left_out:
                family = FAMILY_ARGUMENTS[argument]
                return GitmailError(
                    TOOL_NOT_SERVED,
                    f"{argument} goes with the {family} tools, which this server's tool profile ({self.profile}) "
                    f"leaves out, so no tool here takes it; ask the operator for --tools {self.profile},{family}",
                    {"argument": argument, "family": family, "profile": str(self.profile)})
            if (name, argument) in RENAMED_ARGUMENTS:
                use, tool = RENAMED_ARGUMENTS[(name, argument)]
                call = f"call {tool} with {use}" if tool else f"pass {use}"
                return GitmailError(INVALID_ARGUMENT, f"{argument} is an older argument name of {name}: {call} "
                                    "(same value)", {"argument": argument, "use": use, "tool": tool or name})
        return None

    def move_alias(self, name: str, arguments: dict[str, Any]) -> GitmailError | None:
        """Move ``registration_token`` into the tool's own token argument; an error when the two differ."""
        token = self.tokens.get(name)
        if token is None or TOKEN_ALIAS not in arguments:
            return None
        alias = arguments.pop(TOKEN_ALIAS)
        given = arguments.get(token)
        if alias and given and given != alias:
            return GitmailError(INVALID_ARGUMENT, f"{token} and {TOKEN_ALIAS} name the same proof but differ; pass "
                                "one of them", {"argument": TOKEN_ALIAS})
        if alias:
            arguments[token] = alias
        return None


class Guesses(Middleware):
    """Answers calls to tools the server does not list, and older argument names, before anything runs."""

    def __init__(self, surface: Surface):
        self.surface = surface

    async def on_call_tool(self, context: MiddlewareContext[CallToolRequestParams],
                           call_next: CallNext[CallToolRequestParams, ToolResult]) -> ToolResult:
        name = context.message.name
        if name not in self.surface.tokens:
            return error_result(self.surface.unknown(name))
        arguments = context.message.arguments
        if arguments:
            refused = self.surface.renamed(name, arguments) or self.surface.move_alias(name, arguments)
            if refused is not None:
                return error_result(refused)
        return await call_next(context)
