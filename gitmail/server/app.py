"""Builds the MCP server: one FastMCP instance over one store.

Each ``tools_*`` module declares its tools in a :class:`~.registry.Toolbox`;
:data:`TOOL_MODULES` lists them in the order their tools appear in
``tools/list``. :mod:`resources` (and a tool module with resources of its
own, through ``register_resources``) adds the resources.
"""

from __future__ import annotations

import os

from fastmcp import FastMCP

from gitmail.mail.facade import Mail
from gitmail.model.version import __version__
from gitmail.storage.store import Store

from . import (
    resources,
    tools_acks,
    tools_admin,
    tools_attachments,
    tools_channels,
    tools_compact,
    tools_contacts,
    tools_coordination,
    tools_files,
    tools_health,
    tools_hierarchy,
    tools_identity,
    tools_macros,
    tools_messages,
    tools_products,
    tools_reads,
    tools_reservations,
    tools_search,
    tools_slots,
    tools_sync,
)
from .auth import BearerToken
from .guesses import Guesses, Surface
from .identity import Identities
from .profiles import TOOLS_ENV, Profile, choose
from .push import Push
from .registry import ToolSpec, access_rule, install, proof_argument
from .results import ArgumentErrors, quiet_argument_warnings
from .runtime import Listen, Runtime
from .wake import Wakes

TOOL_MODULES = (tools_health, tools_identity, tools_macros, tools_messages, tools_reads, tools_compact, tools_search,
                tools_attachments, tools_files, tools_contacts, tools_reservations, tools_admin, tools_coordination,
                tools_slots, tools_acks, tools_hierarchy, tools_products, tools_sync, tools_channels)


def catalog() -> list[ToolSpec]:
    """Every tool this server can serve, in ``tools/list`` order."""
    return [spec for module in TOOL_MODULES for spec in module.tools.specs]

INSTRUCTIONS = """\
gitmail is mail for coding agents, stored in a git repository per project.
Start with macro_start_session (or ensure_project + register_agent) using the
absolute path of your working directory as project_key (its slug also works;
every tool's project_key takes either) and your tool and model as program and
model (e.g. claude-code, opus-4.1); keep the registration_token it returns. Tools that act as an agent take its
token as agent_token or sender_token (registration_token is accepted too);
calls in the MCP session that registered the agent need none. Use catch_up
when you start or resume work, then read_messages with the cursor it returns.
Recipients are agent names (name@project for another project's agent; @Name
works too). A seat token (take_seat) goes in seat on every write while a
session holds that agent's seat, and always for a persistent agent or one
whose seat was ever taken; acting_as makes a call as an agent below you.
A format argument asks for json (the default) or toon (fewer tokens).
Errors come back as JSON {code, message, data}: the message says what to do
next; a tool this server's profile leaves out answers with one naming the
profile that has it.
"""


def build_server(store: Store | None = None, *, mail: Mail | None = None, token: str | None = None,
                 listen: Listen | None = None, tools: Profile | None = None, wakes: Wakes | None = None) -> FastMCP:
    """The FastMCP server for ``store``; ``token`` makes every HTTP request need that bearer.

    ``wakes`` is the running server's wake channels (:mod:`.wake`); without it, ``set_card`` keeps webhooks
    for a server that runs them later.

    ``tools`` is the profile of tools it lists (default: :data:`~.profiles.TOOLS_ENV`, else ``default``).
    """
    profile = tools if tools is not None else choose(os.environ.get(TOOLS_ENV))
    store = store if store is not None else Store()
    if mail is None:
        mail = Mail(store)
    listen = listen or Listen()
    listen.bearer = bool(token)
    runtime = Runtime(store, mail, Identities(store, mail), listen, wakes=wakes)
    mcp = FastMCP("gitmail", instructions=INSTRUCTIONS, version=__version__,
                  auth=BearerToken(token) if token else None)
    every = catalog()
    surface = Surface(profile, {spec.name: spec.family for spec in every}, profile.left_out())
    mcp.add_middleware(Guesses(surface))
    mcp.add_middleware(ArgumentErrors())
    quiet_argument_warnings()
    installed = {spec.name: install(mcp, runtime, spec, leave_out=surface.left_out)
                 for spec in every if profile.serves(spec.name, spec.family)}
    surface.tokens.update({name: proof_argument(tool) for name, tool in installed.items()})
    for module in TOOL_MODULES:
        if hasattr(module, "register_resources"):
            module.register_resources(mcp, runtime)
    push = Push(runtime.mail)
    push.install(mcp._mcp_server)
    runtime.pause_subscriptions = push.pause
    resources.register(mcp, runtime, tool_rules={name: access_rule(tool) for name, tool in installed.items()})
    return mcp
