"""Control characters: refused where they break git, escaped where they reach a terminal.

A NUL byte in a commit message makes ``git fsck`` report ``nulInCommit``, and
a hub with ``receive.fsckObjects`` then refuses every later push for good
(history cannot be purged of a commit). So NUL is refused in every text that
gitmail accepts. Other control characters may stay in stored text (a body
may hold a tab), but commit messages are kept to printable text, and text
shown in a terminal has them escaped, so that a subject cannot move the
cursor, recolour the screen or retitle the window of whoever reads it.
"""

from __future__ import annotations

import re
from typing import Any

NUL = "\0"
# C0 controls and DEL and C1 controls, except newline and tab (layout, not commands).
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_CONTROL_ANY = re.compile("[\x00-\x1f\x7f-\x9f]")


def _escape(match: re.Match[str]) -> str:
    return f"\\x{ord(match.group()):02x}"


def printable(text: str, *, multiline: bool = True) -> str:
    """``text`` with control characters shown as ``\\xNN`` (newlines and tabs kept when ``multiline``)."""
    return (_CONTROL if multiline else _CONTROL_ANY).sub(_escape, text)


def first_nul(value: Any, name: str) -> str | None:
    """The name (``name``, ``name[2]``, ``name.key``) of the first text inside ``value`` holding a NUL, or None."""
    if isinstance(value, str):
        return name if NUL in value else None
    if isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            found = first_nul(item, f"{name}[{i}]")
            if found:
                return found
    elif isinstance(value, dict):
        for key, item in value.items():
            found = first_nul(key, f"{name}.<key>") or first_nul(item, f"{name}.{key}")
            if found:
                return found
    return None


def nul_message(where: str) -> str:
    """What an INVALID_ARGUMENT for a NUL character tells the caller."""
    return (f"{where} contains a NUL character (\\0), which git cannot store in a commit and most tools "
            "cut text at; remove it and call again")
