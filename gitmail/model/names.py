"""Validation of the names that become parts of paths in the archive.

Agent names, project keys and topics are user input that ends up in file
names and tree entries, so each is checked here before anything is written.
"""

from __future__ import annotations

import posixpath
import re

from .errors import invalid

AGENT_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
TOPIC_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
# A channel's name, as its folder is named: lower case, so ``Deploys`` and ``deploys`` are one channel.
CHANNEL_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
# An agent of another project, as records name it: ``Name@<project slug>``.
ADDRESS_RE = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]{0,127})@([a-z0-9][a-z0-9-]{0,80}-[0-9a-f]{12})$")
# A product's key: a short name such as ``shop`` or ``acme.web``; compared without case.
PRODUCT_KEY_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_WINDOWS_ABS = re.compile(r"^[A-Za-z]:[\\/]")
MAX_HUMAN_KEY = 1024
# The project's human overseer writes under this name; no agent may register it.
OVERSEER = "Overseer"


def is_reserved_name(name: str) -> bool:
    """Whether ``name`` (compared without case) is kept for the human overseer."""
    return name.lower() == OVERSEER.lower()


def check_agent_name(name: object, field: str = "name") -> str:
    if not isinstance(name, str) or not AGENT_NAME_RE.match(name):
        raise invalid(
            f"{field} {name!r} is not a valid agent name: use 1-128 characters from "
            "letters, digits, '.', '_' and '-', starting with a letter or digit "
            "(for example 'BlueLake' or 'worker-3'), or omit it to get a generated name",
            field=field,
            value=name if isinstance(name, str) else repr(name),
        )
    return name


def check_product_key(key: object, field: str = "product_key") -> str:
    """A product key, lower-cased (products compare without regard to case)."""
    if not isinstance(key, str) or not PRODUCT_KEY_RE.match(key):
        raise invalid(
            f"{field} {key!r} is not a valid product key: use 1-64 characters from letters, digits, '.', '_' "
            "and '-', starting with a letter or digit (for example 'shop' or 'acme-web')",
            field=field,
        )
    return key.lower()


def check_channel_name(name: object, field: str = "channel") -> str:
    """A channel's name as stored: a leading ``#`` dropped and lower-cased (``#Deploys`` is ``deploys``)."""
    text = name.removeprefix("#").lower() if isinstance(name, str) else None
    if text is None or not CHANNEL_NAME_RE.match(text):
        raise invalid(
            f"{field} {name!r} is not a valid channel name: use 1-64 characters from letters, digits, '_' and '-', "
            "starting with a letter or digit, optionally written with a leading '#' (for example '#deploys')",
            field=field,
        )
    return text


def check_topic(topic: object, field: str = "topic") -> str:
    if not isinstance(topic, str) or not TOPIC_RE.match(topic):
        raise invalid(
            f"{field} {topic!r} is not a valid topic: use 1-64 characters from letters, "
            "digits, '.', '_' and '-', starting with a letter or digit (for example 'build-status')",
            field=field,
        )
    return topic


def normalize_human_key(key: object) -> str:
    """The canonical form of a project key, or an INVALID_ARGUMENT error.

    A key is an absolute path-like string (``/data/projects/backend`` or
    ``C:\\work\\api``). It need not exist on this machine; it only names the
    project. Redundant separators and a trailing slash are dropped, so the same
    directory written two ways is one project.
    """
    if not isinstance(key, str) or not key.strip():
        raise invalid("human_key must be a non-empty absolute path such as '/data/projects/backend'", field="human_key")
    if len(key) > MAX_HUMAN_KEY:
        raise invalid(f"human_key is longer than {MAX_HUMAN_KEY} characters", field="human_key")
    if any(ord(ch) < 32 for ch in key):
        raise invalid("human_key must not contain control characters", field="human_key")
    if _WINDOWS_ABS.match(key):
        drive, rest = key[0].upper(), key[2:].replace("\\", "/")
        return drive + ":" + (posixpath.normpath(rest) if rest.strip("/") else "/")
    if not key.startswith("/"):
        raise invalid(
            f"human_key {key!r} is relative; pass the absolute path of the working directory "
            "(for example the output of `pwd`), such as '/data/projects/backend'",
            field="human_key",
        )
    return "/" + posixpath.normpath(key).lstrip("/")
