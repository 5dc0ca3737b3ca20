"""The archive folder of an mcp_agent_mail server: its message files and attachment bytes.

That server keeps, beside its database, a git work tree
(``<root>/projects/<slug>/``) with every message as a Markdown file named
``<time>__<subject>__<id>.md`` and every stored image under
``attachments/<xx>/<sha1>.webp``. The database holds each message's text, so
the import reads the folder for two things only: which messages still have
their file (one whose file is gone is reported) and the bytes of
attachments, which live nowhere else.

Paths come from the database, so every read is confined to the archive
folder (after resolving links) and bounded in size; anything else is
refused as unreadable.
"""

from __future__ import annotations

import os
import re

from gitmail.model.errors import NOT_FOUND, GitmailError

_MESSAGE_FILE = re.compile(r"__(\d+)\.md$")
MAX_ATTACHMENT_BYTES = 25 * 1024 * 1024  # as gitmail's own attachments


class Unreadable(ValueError):
    """An attachment whose bytes cannot be had; the message says why."""


class SourceArchive:
    """One archive folder: a server's storage root (``projects/<slug>/`` inside) or one project's folder."""

    def __init__(self, root: str, *, max_bytes: int = MAX_ATTACHMENT_BYTES):
        self.root = os.path.realpath(root)
        self.max_bytes = max_bytes
        if not os.path.isdir(self.root):
            raise GitmailError(NOT_FOUND, f"no archive folder at {root}: give the mcp_agent_mail server's storage "
                               "root (its STORAGE_ROOT, holding projects/<slug>/), or leave --archive out",
                               {"path": root})

    def project_folder(self, slug: str) -> str | None:
        """The folder of the project with the server's ``slug``, or None if the archive has none."""
        nested = os.path.join(self.root, "projects", slug)
        if os.path.isdir(nested):
            return nested
        if os.path.basename(self.root) == slug and os.path.isdir(os.path.join(self.root, "messages")):
            return self.root
        return None

    @staticmethod
    def message_ids(folder: str) -> set[int]:
        """The ids of the messages that have a file under ``folder/messages``."""
        found: set[int] = set()
        for _folder, dirnames, files in os.walk(os.path.join(folder, "messages")):
            dirnames[:] = [name for name in dirnames if name != "threads"]
            for name in files:
                match = _MESSAGE_FILE.search(name)
                if match:
                    found.add(int(match.group(1)))
        return found

    def attachment(self, folder: str, slug: str, ref: str) -> bytes:
        """The bytes of an attachment the database names by ``ref`` (relative to the storage root or project)."""
        if not ref or "\0" in ref or os.path.isabs(ref):
            raise Unreadable(f"{ref!r} is not a path inside the archive")
        prefix = f"projects/{slug}/"
        candidates = [os.path.join(self.root, ref), os.path.join(folder, ref)]
        if ref.startswith(prefix):
            candidates.append(os.path.join(folder, ref[len(prefix):]))
        for candidate in candidates:
            real = os.path.realpath(candidate)
            if os.path.commonpath([real, self.root]) != self.root or not os.path.isfile(real):
                continue
            size = os.path.getsize(real)
            if size > self.max_bytes:
                raise Unreadable(f"{ref} is larger than {self.max_bytes} bytes")
            try:
                with open(real, "rb") as handle:
                    return handle.read()
            except OSError as exc:
                raise Unreadable(f"{ref}: {exc.strerror}") from None
        raise Unreadable(f"{ref} is not in the archive folder")
