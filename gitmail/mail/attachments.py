"""Attachments and images: converted, content-addressed, verified on read.

A message can carry files in two ways: ``attachment_paths`` (files listed
beside the message) and image references in the Markdown body
(``![alt](shots/a.png)`` or ``![alt](data:image/png;base64,...)``). Images are
converted to WebP with Pillow; other files are stored as they are. Every
stored file lives at ``attachments/<xx>/<yy>/<sha256>.<ext>`` (``<xx>/`` alone
in an archive still at layout 1), named by the SHA-256 of the stored bytes, so
the same content is stored once and any change to it is detectable. Each
attachment's type, size, hash and stored path go into the message's front
matter.

An image referenced in the body is either inlined (the reference becomes a
``data:image/webp;base64,...`` URI) or replaced by its stored path, following
the policy: ``auto`` inlines images up to ``inline_max_bytes``, ``inline``
always inlines, ``file`` never does. The policy comes from the call, else from
the sender's profile. Files listed in ``attachment_paths`` are always stored
as files.

Where files may come from: a relative path names an attachment already
stored in the archive (``attachments/<xx>/<yy>/<sha256>.<ext>``, as a message's
front matter lists it, read at the tip with its hash checked), so a message
can carry on a file an earlier one brought; an absolute path is read only
from inside the configured allowed roots (``GITMAIL_ATTACHMENT_ROOTS``,
separated by ``os.pathsep``, or passed in). Nothing else in the archive
(profiles, mailbox copies, contacts, any record) is ever read as an
attachment, however the path is spelled (``./``, ``..``, a symlink, another
case): the access model hides some of them. Any other path, a file over the
size limit and an image Pillow cannot decode is refused with a clear error
before anything is written: :func:`prepare` runs before the message's
transaction and only returns bytes to commit with it. Reading a stored
attachment (:func:`read_attachment`, behind ``get_attachment`` and the web
view) serves only plain files at attachment paths, hash checked.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import io
import mimetypes
import os
import posixpath
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypedDict, cast

from gitmail.coord.acting import update_own_profile
from gitmail.coord.context import Context
from gitmail.model.errors import (
    ATTACHMENT_TOO_LARGE,
    ATTACHMENT_UNDECODABLE,
    CORRUPT_RECORD,
    NOT_FOUND,
    PATH_NOT_ALLOWED,
    GitmailError,
    invalid,
)
from gitmail.model.limits import MAX_ATTACHMENT_BYTES
from gitmail.model.records import ATTACHMENT_POLICIES, ATTACHMENT_RE, MAX_BODY_BYTES, attachment_path
from gitmail.model.results import Result, result
from gitmail.storage.snapshot import Snapshot

ROOTS_ENV = "GITMAIL_ATTACHMENT_ROOTS"
IMAGE_REF_RE = re.compile(r"!\[(?P<alt>[^\]]*)\]\(\s*(?P<ref><[^>\n]+>|[^)\s]+)(?P<title>\s+\"[^\"\n]*\")?\s*\)")
_DATA_URI_RE = re.compile(r"^data:(?P<type>[A-Za-z0-9.+-]+/[A-Za-z0-9.+-]+)?(?P<params>(;[^;,]*)*?)"
                          r"(?P<b64>;base64)?,(?P<data>.*)$", re.DOTALL)
_EXT_RE = re.compile(r"^[a-z0-9]{1,10}$")
MAX_ATTACHMENTS = 50


@dataclass
class Settings:
    """Limits and defaults for attachments; one per server or CLI invocation."""

    inline_max_bytes: int = 64 * 1024
    max_file_bytes: int = MAX_ATTACHMENT_BYTES  # lowered by the setting, never raised: the doors refuse more
    max_pixels: int = 40_000_000
    keep_originals: bool = False
    webp_quality: int = 80
    roots: list[str] = field(default_factory=list)

    @classmethod
    def from_env(cls, **overrides: Any) -> Settings:
        """Settings from the environment: ``GITMAIL_ATTACHMENT_ROOTS``, ``GITMAIL_INLINE_MAX_BYTES``,
        ``GITMAIL_ATTACHMENT_MAX_BYTES`` (at most :data:`MAX_ATTACHMENT_BYTES`, which every door of every
        archive holds attachments to) and ``GITMAIL_KEEP_ORIGINAL_IMAGES`` (1 to keep originals)."""
        env = os.environ
        roots = [r for r in env.get(ROOTS_ENV, "").split(os.pathsep) if r.strip()]
        settings = cls(roots=roots)
        for name, attr in (("GITMAIL_INLINE_MAX_BYTES", "inline_max_bytes"),
                           ("GITMAIL_ATTACHMENT_MAX_BYTES", "max_file_bytes")):
            if env.get(name, "").strip().isdigit():
                setattr(settings, attr, int(env[name]))
        settings.max_file_bytes = min(settings.max_file_bytes, MAX_ATTACHMENT_BYTES)
        settings.keep_originals = env.get("GITMAIL_KEEP_ORIGINAL_IMAGES", "").strip().lower() in ("1", "true", "yes")
        for key, value in overrides.items():
            setattr(settings, key, value)
        return settings


class AttachmentEntry(TypedDict, total=False):
    """One attachment as a message's front matter lists it (``type`` first), and, read back, whether its bytes hold.

    Entries written here have ``type``, ``name``, ``media_type``, ``size``,
    ``sha256`` and ``path``; a converted image adds ``width`` and ``height``
    and, with originals kept, ``original_path`` and ``original_sha256``.
    A file uploaded to the project and carried by ID adds ``file_id`` (see
    :mod:`gitmail.mail.files`). :func:`mark_verified` adds ``verified``. An entry read from an archive
    may carry keys written elsewhere: they are kept as they are.
    """

    type: str
    name: str
    width: int
    height: int
    original_path: str
    original_sha256: str
    media_type: str
    size: int
    sha256: str
    path: str
    file_id: str
    verified: bool


@dataclass
class Prepared:
    """What a message needs: the rewritten body, front matter entries, files to commit."""

    body: str
    attachments: list[dict[str, Any]]
    files: dict[str, bytes]


def _ext_for(name: str, media_type: str) -> str:
    ext = posixpath.splitext(name)[1].lstrip(".").lower()
    if _EXT_RE.match(ext):
        return ext
    guessed = mimetypes.guess_extension(media_type or "") or ".bin"
    ext = guessed.lstrip(".").lower()
    return ext if _EXT_RE.match(ext) else "bin"


def _media_type(name: str) -> str:
    return mimetypes.guess_type(name)[0] or "application/octet-stream"


def _is_convertible_image(media_type: str) -> bool:
    return media_type.startswith("image/") and media_type not in ("image/svg+xml",)


class _Loader:
    """Reads attachment sources: data URIs, archive paths and files under the allowed roots."""

    def __init__(self, snapshot: Snapshot, settings: Settings):
        self.snapshot = snapshot
        self.settings = settings
        self.roots = [os.path.realpath(os.path.expanduser(r)) for r in settings.roots]

    def _too_large(self, ref: str, size: int) -> GitmailError:
        limit = self.settings.max_file_bytes
        return GitmailError(ATTACHMENT_TOO_LARGE, f"{_short(ref)} is {size} bytes, over the limit of {limit}; "
                            "send a smaller file or a link to it", {"ref": _short(ref), "size": size, "limit": limit})

    def load(self, ref: str, field_name: str) -> tuple[bytes, str, str]:
        """(bytes, name, media type) for one reference."""
        if not isinstance(ref, str) or not ref.strip():
            raise invalid(f"{field_name}: each entry must be a file path or a data: URI", field=field_name)
        ref = ref.strip()
        if ref.startswith("<") and ref.endswith(">"):
            ref = ref[1:-1].strip()
        if ref.startswith("data:"):
            return self._data_uri(ref, field_name)
        if os.path.isabs(ref) or ref.startswith("~"):
            return self._outside(ref, field_name)
        return self._in_archive(ref, field_name)

    def _data_uri(self, ref: str, field_name: str) -> tuple[bytes, str, str]:
        match = _DATA_URI_RE.match(ref)
        if match is None or not match.group("b64"):
            raise invalid(f"{field_name}: a data: URI must be base64 encoded (data:image/png;base64,...)",
                          field=field_name)
        payload = match.group("data")
        if len(payload) * 3 // 4 > self.settings.max_file_bytes:
            raise self._too_large("data: URI", len(payload) * 3 // 4)
        try:
            data = base64.b64decode(payload, validate=True)
        except (binascii.Error, ValueError):
            raise invalid(f"{field_name}: the data: URI is not valid base64", field=field_name) from None
        media_type = (match.group("type") or "application/octet-stream").lower()
        return data, "inline" + (mimetypes.guess_extension(media_type) or ""), media_type

    def _outside(self, ref: str, field_name: str) -> tuple[bytes, str, str]:
        real = os.path.realpath(os.path.expanduser(ref))
        if not any(os.path.commonpath([real, root]) == root for root in self.roots):
            roots = ", ".join(self.roots) or f"none configured; set {ROOTS_ENV}"
            raise GitmailError(PATH_NOT_ALLOWED, f"{field_name}: {ref} is outside the folders attachments may be read "
                               f"from ({roots}); move it into one of them, or name an attachment already stored in the "
                               "archive (attachments/<xx>/<yy>/<sha256>.<ext>)",
                               {"field": field_name, "path": ref, "roots": self.roots})
        if not os.path.isfile(real):
            raise GitmailError(NOT_FOUND, f"{field_name}: no file at {ref}", {"field": field_name, "path": ref})
        size = os.stat(real).st_size
        if size > self.settings.max_file_bytes:
            raise self._too_large(ref, size)
        with open(real, "rb") as handle:
            data = handle.read(self.settings.max_file_bytes + 1)
        if len(data) > self.settings.max_file_bytes:
            raise self._too_large(ref, len(data))
        return data, os.path.basename(real), _media_type(real)

    def _in_archive(self, ref: str, field_name: str) -> tuple[bytes, str, str]:
        """A stored attachment named by its path in the archive; nothing else there is readable."""
        path = posixpath.normpath(ref.replace("\\", "/"))
        if ATTACHMENT_RE.match(path) is None:
            raise GitmailError(PATH_NOT_ALLOWED, f"{field_name}: {_short(ref)} is not a stored attachment; a relative "
                               "path names one (attachments/<xx>/<yy>/<sha256>.<ext>, as a message's attachments list "
                               f"it), any other file is attached by its absolute path inside {ROOTS_ENV}",
                               {"field": field_name, "path": _short(ref)})
        try:
            data = read_attachment(self.snapshot, path)
        except GitmailError as exc:
            raise GitmailError(exc.code, f"{field_name}: {exc.message}", {"field": field_name, **exc.data}) from None
        if len(data) > self.settings.max_file_bytes:
            raise self._too_large(ref, len(data))
        return data, posixpath.basename(path), _media_type(path)


def _short(ref: str) -> str:
    return ref if len(ref) <= 80 else ref[:77] + "..."


def to_webp(data: bytes, ref: str, settings: Settings) -> tuple[bytes, int, int]:
    """Re-encode an image as WebP; (bytes, width, height). WebP input is kept byte for byte."""
    from PIL import Image, UnidentifiedImageError  # loaded only when an image is stored

    try:
        with Image.open(io.BytesIO(data)) as image:
            width, height = image.size
            if width * height > settings.max_pixels:
                raise GitmailError(ATTACHMENT_TOO_LARGE, f"{_short(ref)} is {width}x{height} pixels, over the limit of "
                                   f"{settings.max_pixels}; scale it down first",
                                   {"ref": _short(ref), "pixels": width * height})
            if image.format == "WEBP":
                image.load()
                return data, width, height
            animated = getattr(image, "n_frames", 1) > 1
            image.load()
            picture: Image.Image = image
            if image.mode not in ("RGB", "RGBA"):
                has_alpha = image.mode in ("LA", "PA") or "transparency" in image.info
                picture = image.convert("RGBA" if has_alpha else "RGB")
            out = io.BytesIO()
            if animated:
                picture.save(out, format="WEBP", quality=settings.webp_quality, save_all=True)
            else:
                picture.save(out, format="WEBP", quality=settings.webp_quality)
            return out.getvalue(), width, height
    except GitmailError:
        raise
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError, Image.DecompressionBombError) as exc:
        raise GitmailError(ATTACHMENT_UNDECODABLE, f"{_short(ref)} claims to be an image but cannot be decoded "
                           f"({exc.__class__.__name__}); attach a valid PNG, JPEG, GIF or WebP file, or send it as a "
                           "file with a non-image extension", {"ref": _short(ref)}) from None


def effective_policy(call_policy: str | None, agent_policy: str | None) -> str:
    policy = call_policy or agent_policy or "auto"
    if policy not in ATTACHMENT_POLICIES:
        raise invalid(f"attachments_policy must be one of {', '.join(ATTACHMENT_POLICIES)}; got {policy!r}",
                      field="attachments_policy")
    return policy


def prepare(snapshot: Snapshot, body_md: str, attachment_paths: list[str] | None = None, *,
            policy: str = "auto", convert_images: bool | None = None, agent_policy: str | None = None,
            settings: Settings | None = None) -> Prepared:
    """Load, convert and address every attachment of a message before it is committed.

    ``policy`` decides inlining of body images (see the module docs);
    ``convert_images=False`` stores images as they are and inlines nothing,
    unless the sender's own policy is ``inline`` or ``file``, which always
    converts. Raises before anything is written on any bad reference.
    """
    settings = settings or Settings.from_env()
    policy = effective_policy(policy, None)
    convert = True if agent_policy in ("inline", "file") else (True if convert_images is None else bool(convert_images))
    if attachment_paths is not None and (isinstance(attachment_paths, str) or not isinstance(attachment_paths, list)):
        raise invalid("attachment_paths must be a list of file paths", field="attachment_paths")
    if len(attachment_paths or []) > MAX_ATTACHMENTS:
        raise invalid(f"at most {MAX_ATTACHMENTS} attachments per message", field="attachment_paths")
    batch = _Batch(snapshot, settings, convert=convert)
    for ref in attachment_paths or []:
        entry, _ = batch.store(ref, "attachment_paths")
        batch.add(entry, "file")
    body = _rewrite_body(body_md, batch, policy)
    return Prepared(body, [dict(entry) for entry in batch.entries.values()], batch.files)


class _Batch:
    """The attachments of one message as they are stored: the files to commit and their front matter entries.

    Entries are keyed by stored path, so content attached twice (listed and
    referenced in the body, or referenced twice) is stored and listed once.
    """

    def __init__(self, snapshot: Snapshot, settings: Settings, *, convert: bool):
        self.loader = _Loader(snapshot, settings)
        self.layout = snapshot.layout
        self.settings = settings
        self.convert = convert
        self.files: dict[str, bytes] = {}
        self.entries: dict[str, AttachmentEntry] = {}

    def store(self, ref: str, field_name: str) -> tuple[AttachmentEntry, bytes]:
        """Load ``ref``, convert it if it is an image to convert, and stage it (and the original, if kept)."""
        data, name, media_type = self.loader.load(ref, field_name)
        entry: AttachmentEntry = {"name": name[:200]}
        original = data
        if self.convert and _is_convertible_image(media_type):
            data, width, height = to_webp(data, ref, self.settings)
            media_type, ext = "image/webp", "webp"
            entry["width"], entry["height"] = width, height
            if self.settings.keep_originals and data is not original:
                digest = hashlib.sha256(original).hexdigest()
                original_path = attachment_path(digest, _ext_for(name, _media_type(name)), original=True,
                                                layout=self.layout)
                self.files[original_path] = original
                entry["original_path"], entry["original_sha256"] = original_path, digest
        else:
            ext = _ext_for(name, media_type)
        digest = hashlib.sha256(data).hexdigest()
        path = attachment_path(digest, ext, layout=self.layout)
        self.files[path] = data
        entry["media_type"], entry["size"], entry["sha256"], entry["path"] = media_type, len(data), digest, path
        return entry, data

    def add(self, entry: AttachmentEntry, kind: str) -> None:
        """List ``entry`` as ``kind`` (file or inline); content already listed becomes inline if this use is."""
        key = entry["path"]
        if key in self.entries:
            if kind == "inline":
                self.entries[key]["type"] = "inline"
            return
        self.entries[key] = {"type": kind, **entry}


def _rewrite_body(body_md: str, batch: _Batch, policy: str) -> str:
    """``body_md`` with each image reference stored and replaced by a data: URI (inlined) or its stored path.

    Links to the web and anchors stay as they are. An image is inlined as
    ``policy`` says, and only while the body stays within MAX_BODY_BYTES:
    past it, ``inline`` fails and ``auto`` falls back to the stored path.
    """
    body_bytes = len(body_md.encode("utf-8"))
    pieces: list[str] = []
    last = 0
    for match in IMAGE_REF_RE.finditer(body_md):
        ref = match.group("ref").strip("<>").strip()
        if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*://", ref) or ref.startswith("#"):
            continue  # links to the web or anchors stay as they are
        entry, data = batch.store(ref, "body_md")
        is_image = entry["media_type"].startswith("image/") and entry["media_type"] != "image/svg+xml"
        inline = batch.convert and is_image and (policy == "inline" or
                                                 (policy == "auto" and len(data) <= batch.settings.inline_max_bytes))
        target = entry["path"]
        if inline:
            uri = f"data:{entry['media_type']};base64,{base64.b64encode(data).decode('ascii')}"
            grown = body_bytes + len(uri) - len(match.group("ref"))
            if grown > MAX_BODY_BYTES:
                if policy == "inline":
                    raise GitmailError(ATTACHMENT_TOO_LARGE, f"inlining {_short(ref)} would make the body larger than "
                                       f"{MAX_BODY_BYTES} bytes; use attachments_policy 'auto' or 'file'",
                                       {"ref": _short(ref)})
                inline = False
            else:
                body_bytes, target = grown, uri
        batch.add(entry, "inline" if inline else "file")
        pieces.append(body_md[last:match.start("ref")])
        pieces.append(target)
        last = match.end("ref")
    pieces.append(body_md[last:])
    return "".join(pieces)


@result
class AttachmentsPolicySet(Result):
    """An agent's attachments policy, as set."""

    agent: str
    attachments_policy: str


def set_agent_policy(ctx: Context, project_key: str, agent: str, policy: str, *,
                     seat: str | None = None) -> AttachmentsPolicySet:
    """Set how ``agent``'s outgoing images are handled when a send names no policy."""
    policy = effective_policy(policy, None)
    name = update_own_profile(ctx, project_key, agent, seat,
                              lambda name: f"{name} set its attachments policy to {policy}",
                              attachments_policy=policy)
    return AttachmentsPolicySet(agent=name, attachments_policy=policy)


def read_attachment(snapshot: Snapshot, path: str, sha256: str | None = None) -> bytes:
    """The bytes of a stored attachment (a plain file at an attachment path), after checking them against their hash."""
    match = ATTACHMENT_RE.match(path) if isinstance(path, str) else None
    if match is None:
        raise invalid(f"{path!r} is not an attachment path (attachments/<xx>/<yy>/<sha256>.<ext>)", field="path")
    data = snapshot.read_regular(path)
    if data is None:
        raise GitmailError(NOT_FOUND, f"no attachment {path} in this project", {"path": path})
    digest = hashlib.sha256(data).hexdigest()
    if digest != match.group(3) or (sha256 is not None and digest != sha256):
        raise GitmailError(CORRUPT_RECORD, f"{path}: content hash is {digest}, which does not match its name or the "
                           "message's front matter; the attachment was altered (on the machine, `gitmail fsck` lists "
                           "every damaged record)",
                           {"path": path, "sha256": digest})
    return data


def mark_verified(snapshot: Snapshot, entries: Sequence[Mapping[str, Any]]) -> list[AttachmentEntry]:
    """Copies of a message's attachment entries, each with ``verified`` (its stored bytes match its hash)."""
    out = []
    for entry in entries:
        try:
            read_attachment(snapshot, entry.get("path", ""), entry.get("sha256"))
            ok = True
        except GitmailError:
            ok = False
        out.append(cast(AttachmentEntry, {**entry, "verified": ok}))  # the entry as stored, keys written elsewhere too
    return out


def verify_entries(snapshot: Snapshot, entries: list[dict[str, Any]]) -> None:
    """Check every attachment of a message against its recorded hash (CORRUPT_RECORD on mismatch)."""
    for entry in entries:
        read_attachment(snapshot, entry.get("path", ""), entry.get("sha256"))


@result
class AttachmentContent(Result):
    """A stored attachment: its path, media type, size, SHA-256 and its bytes in base64."""

    path: str
    media_type: str
    size: int
    sha256: str
    content_base64: str


def fetch(snapshot: Snapshot, path: str) -> AttachmentContent:
    """A stored attachment as a tool result: type, size, hash and base64 content."""
    data = read_attachment(snapshot, path)
    return AttachmentContent(path=path, media_type=_media_type(path), size=len(data),
                             sha256=hashlib.sha256(data).hexdigest(),
                             content_base64=base64.b64encode(data).decode("ascii"))
