"""Agents of other projects: the ``name@project`` address and each archive's view of a message.

A caller writes ``Bob@/data/shop/backend`` (or ``Bob@<slug>``); records
always say ``Bob@<slug>``, because the slug is the same on every machine. A
name without ``@`` is an agent of the archive's own project, so one message
kept in two archives names its parties differently in each: the sender's
archive names the other project's recipients by address, and the
recipients' archive names the sender (and the sender's local recipients)
by address and its own agents by name.
"""

from __future__ import annotations

import dataclasses

from gitmail.model.errors import GitmailError, invalid, not_found
from gitmail.model.names import ADDRESS_RE, check_agent_name
from gitmail.model.records import Message
from gitmail.storage.store import Store


def is_address(name: str) -> bool:
    """Whether ``name`` names an agent of another project (``Name@project``)."""
    return "@" in name


def address(name: str, slug: str) -> str:
    return f"{name}@{slug}"


def split(text: str) -> tuple[str, str]:
    """``(name, slug)`` of an address as records write it."""
    match = ADDRESS_RE.match(text)
    if match is None:
        raise invalid(f"{text!r} is not a Name@project-slug address", value=text)
    return match.group(1), match.group(2)


def resolve(store: Store, text: object, field: str) -> tuple[str, str]:
    """``(name, slug)`` of ``Name@<project key or slug>``; the project must be in this store.

    The agent itself is looked up by the caller, in that project's archive.
    """
    if not isinstance(text, str) or "@" not in text:
        raise invalid(f"{field} must be Name@project (an agent of another project)", field=field)
    name, _, project = text.partition("@")
    check_agent_name(name, field)
    if not project:
        raise invalid(f"{field} {text!r} names no project after '@': write Name@/absolute/project/key or "
                      "Name@project-slug", field=field)
    try:
        slug = store.resolve(project)
    except GitmailError:
        raise invalid(f"{field} {text!r}: {project!r} is neither a project key (an absolute path) nor a slug",
                      field=field) from None
    if not store.exists(slug):
        raise not_found(f"{field} {text!r}: no project {project!r} on this server; cross-project mail needs both "
                        "projects in one store (sync the other project here first)", field=field, project=project)
    return name, slug


def view_in(message: Message, *, origin: str, here: str) -> Message:
    """The copy of ``message`` (written in project ``origin``) that the archive of project ``here`` keeps.

    Names local to ``origin`` become addresses, addresses of ``here`` become
    plain names, others stay as they are. ``bcc`` is never carried over.
    """

    def rename(name: str) -> str:
        if not is_address(name):
            return address(name, origin)
        agent, slug = split(name)
        return agent if slug == here else name

    return dataclasses.replace(message, sender=rename(message.sender), to=[rename(n) for n in message.to],
                               cc=[rename(n) for n in message.cc], bcc=[])


def projects_of(message: Message) -> list[str]:
    """The other projects a message (as its sender's archive keeps it) goes to, in order."""
    out: list[str] = []
    for name in message.to + message.cc:
        if is_address(name):
            slug = split(name)[1]
            if slug not in out:
                out.append(slug)
    return out
