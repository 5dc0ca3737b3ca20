"""Tool profiles: which tools a server lists, chosen when it starts.

Every tool an agent is offered costs its description and schema in the
agent's context window before its first call, so a server lists only the
tools its agents need. Each tool belongs to one family (the ``Toolbox`` of its
module); a profile is a comma-separated list of profile and family names, and
the server lists the union:

* ``core`` - the everyday loop: start a session, send, reply, read the inbox
  and catch up, acknowledge, search, reserve and release files;
* ``default`` - every tool of the agent-mail surface (families messages,
  identity, contacts, reservations and admin), which agents prompted for
  that surface call;
* ``all`` - every tool;
* a family name - its tools: identity, messages, contacts, reservations,
  attachments, files, coordination, hierarchy, products, sync, admin, compact, channels.

``gitmail serve --tools core,hierarchy`` (or :data:`TOOLS_ENV`) picks one; a
call to a tool the profile leaves out is answered with an error naming the
profile or family that has it. This module knows names only (no FastMCP), so
the command line checks a profile before it loads the server.
"""

from __future__ import annotations

from dataclasses import dataclass

from gitmail.model.errors import INVALID_ARGUMENT, GitmailError

TOOLS_ENV = "GITMAIL_TOOLS"
"""The profile ``gitmail serve`` uses when ``--tools`` is not given."""

FAMILIES = ("messages", "identity", "contacts", "reservations", "attachments", "files", "coordination", "hierarchy",
            "products", "sync", "admin", "compact", "channels")
CORE = frozenset({
    "macro_start_session", "send_message", "reply_message", "fetch_inbox", "acknowledge_message", "catch_up",
    "read_messages", "search_messages", "file_reservation_paths", "release_file_reservations",
})
DEFAULT_FAMILIES = frozenset({"messages", "identity", "contacts", "reservations", "admin"})
FAMILY_ARGUMENTS = {"seat": "coordination", "acting_as": "hierarchy", "agent_id": "hierarchy",
                    "attachment_ids": "files", "channel": "channels"}
"""Optional arguments of many tools that only the tools of one family make useful: listed only with that family.

A seat token comes from take_seat, acting_as names an agent spawn_agent made (agent_id one made on first use),
attachment_ids names files upload_file stored, and a channel (read by catch_up and read_compact) is one
create_channel made."""
PROFILES = ("core", "default", "all")
DEFAULT = "default"


@dataclass(frozen=True)
class Profile:
    """The profile and family names a server was started with."""

    names: tuple[str, ...] = (DEFAULT,)

    def __str__(self) -> str:
        return ",".join(self.names)

    def serves(self, tool: str, family: str) -> bool:
        """Whether the tool ``tool`` of ``family`` is listed under this profile."""
        return any(_holds(name, tool, family) for name in self.names)

    def left_out(self) -> frozenset[str]:
        """The arguments of :data:`FAMILY_ARGUMENTS` whose family this profile leaves out."""
        return frozenset(a for a, family in FAMILY_ARGUMENTS.items() if not self.serves("", family))


def _holds(name: str, tool: str, family: str) -> bool:
    if name == "all" or name == family:
        return True
    if name == "default":
        return family in DEFAULT_FAMILIES
    return name == "core" and tool in CORE


def choose(spec: str | None) -> Profile:
    """The profile ``spec`` names (``None`` or empty: the default); INVALID_ARGUMENT for an unknown name."""
    names = tuple(dict.fromkeys(n.strip().lower() for n in (spec or "").split(",") if n.strip()))
    unknown = [n for n in names if n not in PROFILES and n not in FAMILIES]
    if unknown:
        raise GitmailError(INVALID_ARGUMENT, f"unknown tool profile or family {', '.join(map(repr, unknown))}; "
                           f"choose from the profiles {', '.join(PROFILES)} and the families {', '.join(FAMILIES)} "
                           "(several separated by commas, e.g. core,hierarchy)",
                           {"argument": "tools", "profiles": list(PROFILES), "families": list(FAMILIES)})
    return Profile(names or (DEFAULT,))


def smallest_with(tool: str, family: str) -> str:
    """The smallest profile that lists ``tool``: core, default, else its family."""
    if tool in CORE:
        return "core"
    return "default" if family in DEFAULT_FAMILIES else family
