"""mcp_agent_mail rows as gitmail records: what maps to what.

Each builder turns source rows into :class:`~gitmail.importers.timeline.Entry`
values for one project's archive, built with gitmail's own record classes,
path functions and delivery, so an imported record is exactly what gitmail
would have written:

- **IDs.** A record's gitmail ID is derived from the row (its kind, its
  project and its id in the source) with the original creation time as its
  time part (:func:`gitmail.model.ids.derived_id`), so day folders and
  ordering are true to history, an import run again (here or on another
  machine) computes the same IDs and paths, and two machines importing the
  same database write the same files. Every record keeps its id in the
  source as ``x-agent-mail-id``.
- **Clocks.** A record's hybrid clock is the moment the source last changed
  it (an agent's last activity, a link's update, a reservation's release),
  on the node ``agent-mail``: later writes in gitmail win over it, and a
  record imported twice merges with itself.
- **Threads.** ``thread_id`` is kept as the source had it; a message that
  started a thread (no ``thread_id`` there) gets its own source id, which is
  what the source's replies name as their thread.
- **Tokens.** The registration token (kept in clear by the server) becomes the
  token hash of the profile, so an agent keeps working with its old token
  and the archive never holds the token itself.
- **Projects.** A message lives in its recipients' project there; sent by an
  agent of another project, it is kept in both archives the gitmail way: the
  sender's with the outbox copy and a relay record, the recipients' with
  their copies, each naming the other project's agents ``Name@<slug>``.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import datetime as dt
import hashlib
import mimetypes
import posixpath
import re
from dataclasses import dataclass

from gitmail.coord.globs import normalize
from gitmail.mail.addresses import address, view_in
from gitmail.mail.delivery import put_message
from gitmail.mail.tokens import hash_token
from gitmail.mail.windows import WINDOW_TTL_SECONDS
from gitmail.model.clock import HLC, format_ts
from gitmail.model.errors import GitmailError
from gitmail.model.ids import derived_id
from gitmail.model.names import AGENT_NAME_RE, PRODUCT_KEY_RE, TOPIC_RE, is_reserved_name
from gitmail.model.records import (
    ATTACHMENT_POLICIES,
    CONTACT_POLICIES,
    CONTACT_STATUS,
    LAYOUT,
    MAX_SHORT,
    WINDOW_UUID_RE,
    Agent,
    Contact,
    Message,
    ProductLink,
    Project,
    Receipt,
    Relay,
    Reservation,
    Summary,
    Window,
    attachment_path,
)
from gitmail.storage.engine import Change

from .agentmail_db import (
    SourceAgent,
    SourceLink,
    SourceMessage,
    SourceProduct,
    SourceProductLink,
    SourceProject,
    SourceReservation,
    SourceSummary,
    SourceWindow,
)
from .agentmail_files import SourceArchive, Unreadable
from .report import ImportReport
from .timeline import FOLLOW_UP, MESSAGES, SETUP, Entry

SOURCE = "mcp_agent_mail"
ID_KEY = "x-agent-mail-id"  # the id a record had in the source
NODE = "agent-mail"  # the clock node of imported records
MAX_KEY_POINTS = 50


@dataclass(frozen=True)
class Party:
    """An agent of the source as gitmail names it, in the project that holds it."""

    id: int
    project_id: int
    name: str


@dataclass
class Plan:
    """What every builder of one import needs to know."""

    report: ImportReport
    operator: tuple[str, str]  # the git identity of the person importing: author of what no agent did
    keys: dict[int, str]  # source project id -> gitmail human key (projects that can be imported)
    slugs: dict[int, str]  # source project id -> gitmail slug
    parties: dict[int, Party]  # source agent id -> the agent as gitmail names it
    excluded: set[int]  # agents left out (reported once): their mail is left out without another report
    delivered: set[int]  # projects whose archive gets its copies in this run (or has them already)
    files: SourceArchive | None

    def party(self, agent_id: int, what: str) -> Party | None:
        """The agent as gitmail names it; None if it is not imported (reported unless it was left out by name)."""
        found = self.parties.get(agent_id)
        if found is None and agent_id not in self.excluded:
            self.report.problem("dangling_reference", f"{what}: agent {agent_id} is not in the database")
        return found


def ms(moment: dt.datetime) -> int:
    return int(moment.timestamp() * 1000)


def _ts(moment: dt.datetime) -> str:
    return format_ts(moment)


def _clock(moment: dt.datetime) -> HLC:
    return HLC(ms(moment), 0, NODE)


def gid(kind: str, moment: dt.datetime, *parts: object) -> str:
    """The gitmail ID of a source row: its time, and bits of what names it in the source."""
    seed = "\0".join([SOURCE, kind, *(str(part) for part in parts)]).encode("utf-8")
    return derived_id(ms(moment), seed)


def _line(text: str, limit: int = MAX_SHORT) -> str:
    return " ".join(text.split())[:limit]


def usable_name(name: str) -> bool:
    return bool(AGENT_NAME_RE.match(name)) and not is_reserved_name(name)


Single = Agent | Contact | ProductLink | Project | Receipt | Reservation | Summary | Window
"""A record an entry holds alone (a message comes with its copies)."""


def _entry(plan: Plan, what: str, record: Single, *, when_ms: int, phase: int, author: str, email: str | None,
           kind: str, line: str, mutable: bool = False, also: str | None = None) -> Entry | None:
    """An entry holding one record, or None (reported) when the record breaks a rule."""
    try:
        data = record.to_bytes()
    except GitmailError as exc:
        plan.report.problem("invalid_record", f"{what}: {exc.message}")
        return None
    return Entry(when_ms=when_ms, phase=phase, author=author, email=email, kind=kind, line=line,
                 files={record.path(): data}, mutable=mutable, also=also)


# -- projects and agents ---------------------------------------------------------

def project_entry(plan: Plan, project: SourceProject, at: dt.datetime) -> Entry | None:
    key, slug = plan.keys[project.id], plan.slugs[project.id]
    record = Project(id=gid("project", at, key), slug=slug, human_key=key, created_at=_ts(at), hlc=_clock(at),
                     archived_at=_ts(project.archived) if project.archived else None, layout=LAYOUT)
    record.extra = {ID_KEY: project.id}
    name, email = plan.operator
    return _entry(plan, f"project {project.id}", record, when_ms=ms(at), phase=SETUP, author=name, email=email,
                  kind="projects", line=f"Project {key} (was {project.slug or project.id})", mutable=True)


def _policy(plan: Plan, value: str, allowed: tuple[str, ...], what: str) -> str:
    if value in allowed:
        return value
    plan.report.problem("value_dropped", f"{what} {value!r} (auto used)")
    return "auto"


def agent_entries(plan: Plan, agent: SourceAgent, party: Party, key: str, first: dt.datetime) -> list[Entry]:
    """The profile at registration, and its retirement as a later change."""
    born = min(moment for moment in (agent.inception, first) if moment is not None)
    last = max(moment for moment in (agent.last_active, agent.inception, first) if moment is not None)
    what = f"agent {agent.id} ({agent.name})"
    profile = Agent(
        id=gid("agent", born, key, agent.id), name=party.name, program=_line(agent.program) or "unknown",
        model=_line(agent.model) or "unknown", inception_ts=_ts(born), hlc=_clock(last),
        task_description=agent.task_description[:4096],
        contact_policy=_policy(plan, agent.contact_policy, CONTACT_POLICIES, f"{what}: contact_policy"),
        attachments_policy=_policy(plan, agent.attachments_policy, ATTACHMENT_POLICIES, f"{what}: attachments_policy"),
        token_hash=hash_token(agent.token) if agent.token else None)
    profile.extra = {ID_KEY: agent.id}
    out = []
    token = "tokens" if profile.token_hash else None  # counted once, with the registration
    retired = agent.retired or (None if agent.active else last)
    if retired is not None:  # registered active, retired later: two changes of one record
        profile.hlc = _clock(born)
        registered = _entry(plan, what, profile, when_ms=ms(born), phase=SETUP, author=party.name, email=None,
                            kind="agents", line=f"Register {party.name} ({profile.program}, {profile.model})",
                            mutable=True, also=token)
        if registered is not None:
            out.append(registered)
        profile = dataclasses.replace(profile, status="retired", retired_at=_ts(retired),
                                      hlc=_clock(max(retired, last, born)))
        profile.extra = {ID_KEY: agent.id}
        at, line, token = max(retired, born), f"Retire {party.name}", None
    else:
        at, line = born, f"Register {party.name} ({profile.program}, {profile.model})"
    entry = _entry(plan, what, profile, when_ms=ms(at), phase=SETUP, author=party.name, email=None,
                   kind="agents", line=line, mutable=True, also=token)
    if entry is not None:
        out.append(entry)
    return out


# -- messages -----------------------------------------------------------------------

def _name_in(plan: Plan, party: Party, here: int) -> str:
    """How the archive of project ``here`` names an agent: by name at home, by address elsewhere."""
    return party.name if party.project_id == here else address(party.name, plan.slugs[party.project_id])


def message_gid(plan: Plan, message: SourceMessage) -> str | None:
    """The gitmail ID of a message (the same in every archive that keeps it); None if its project is left out."""
    key = plan.keys.get(message.project_id)
    return None if key is None else gid("message", message.created, key, message.id, _ts(message.created))


def message_entries(plan: Plan, here: int, message: SourceMessage, files: dict[str, bytes],
                    body: str, attachments: list[dict[str, object]]) -> list[Entry]:
    """The message as the archive of project ``here`` keeps it, then each of its receipts kept there."""
    what = f"message {message.id}"
    sender = plan.party(message.sender_id, what)
    if sender is None or message.project_id not in plan.keys:
        return []
    home = sender.project_id
    parties = {kind: [] for kind in ("to", "cc", "bcc")}  # type: dict[str, list[Party]]
    for recipient in message.recipients:
        party = plan.party(recipient.agent_id, what)
        if party is None:
            continue
        if recipient.kind == "bcc" and party.project_id != home:
            plan.report.problem("value_dropped", f"{what}: blind copy to {party.name} of another project")
        elif party not in parties["to"] + parties["cc"] + parties["bcc"]:
            parties[recipient.kind].append(party)
    message_id = message_gid(plan, message)
    assert message_id is not None  # its project is imported
    topic = message.topic if message.topic and TOPIC_RE.match(message.topic) else None
    if message.topic and topic is None:
        plan.report.problem("value_dropped", f"{what}: topic {message.topic!r}")
    original = Message(
        id=message_id,
        thread_id=message.thread_id or str(message.id), sender=sender.name, subject=_line(message.subject, 512),
        created_ts=_ts(message.created), to=[_name_in(plan, p, home) for p in parties["to"]],
        cc=[_name_in(plan, p, home) for p in parties["cc"]], bcc=[p.name for p in parties["bcc"]],
        importance=_line(message.importance, 32) or "normal", ack_required=message.ack_required, topic=topic,
        attachments=list(attachments), body=body)
    original.extra = {ID_KEY: message.id}
    kept = original if here == home else view_in(original, origin=plan.slugs[home], here=plan.slugs[here])
    change = Change("")
    try:
        put_message(change, kept)
        if here == home:
            for project_id in sorted({p.project_id for p in parties["to"] + parties["cc"]} - {home}):
                delivered = _ts(message.created) if project_id in plan.delivered else None
                change.put_record(Relay(message_id=kept.id, project=plan.slugs[project_id], created_ts=kept.created_ts,
                                        hlc=_clock(message.created), delivered_at=delivered))
    except GitmailError as exc:
        plan.report.problem("invalid_record", f"{what}: {exc.message}")
        return []
    names = ", ".join(kept.to + kept.cc) or "blind-copy recipients"
    entry = Entry(when_ms=ms(message.created), phase=MESSAGES, author=sender.name,
                  email=None if here == home else address(sender.name, plan.slugs[home]), kind="messages",
                  line=_line(f"{kept.sender} sent {kept.id} (was {message.id}) to {names}: {kept.subject}", 200),
                  files={path: data for path, data in change.edits.items() if data is not None}, shared=files)
    return [entry, *receipt_entries(plan, here, message, kept.id)]


def receipt_entries(plan: Plan, here: int, message: SourceMessage, message_id: str) -> list[Entry]:
    """The read and acknowledgement receipts of a message's recipients in project ``here``."""
    out = []
    for recipient in message.recipients:
        party = plan.parties.get(recipient.agent_id)
        if party is None or party.project_id != here or not (recipient.read or recipient.acked):
            continue
        read = recipient.read or recipient.acked  # an acknowledgement is a reading too
        assert read is not None
        at = max(moment for moment in (read, recipient.acked, message.created) if moment is not None)
        receipt = Receipt(message_id=message_id, agent=party.name, hlc=_clock(at), read_at=_ts(read),
                          acked_at=_ts(recipient.acked) if recipient.acked else None)
        verb = "acknowledged" if recipient.acked else "read"
        entry = _entry(plan, f"receipt {message.id}/{recipient.agent_id}", receipt, when_ms=ms(at), phase=FOLLOW_UP,
                       author=party.name, email=None, kind="receipts", line=f"{party.name} {verb} {message_id}",
                       mutable=True)
        if entry is not None:
            out.append(entry)
    return out


_IMAGE_EXT = re.compile(r"^[a-z0-9]{1,10}$")


def attachments_of(plan: Plan, message: SourceMessage, folder: str | None,
                   slug: str) -> tuple[str, list[dict[str, object]], dict[str, bytes]]:
    """The body with stored paths rewritten, the gitmail attachment entries, and the files to store."""
    body, entries, files = message.body, [], {}
    for item in message.attachments:
        ref = item.get("path")
        try:
            data = _attachment_bytes(plan, item, folder, slug)
        except Unreadable as exc:
            plan.report.problem("attachment_unreadable", f"message {message.id}: {exc}")
            continue
        if data is None:
            continue  # an image inlined in the body, whose bytes the source did not keep apart
        name = posixpath.basename(ref) if isinstance(ref, str) and ref else f"{item.get('sha1', 'inline')}.webp"
        media_type = str(item.get("media_type") or mimetypes.guess_type(name)[0] or "application/octet-stream")
        ext = posixpath.splitext(name)[1].lstrip(".").lower()
        if not _IMAGE_EXT.match(ext):
            ext = (mimetypes.guess_extension(media_type) or ".bin").lstrip(".")
        digest = hashlib.sha256(data).hexdigest()
        stored = attachment_path(digest, ext)
        entry: dict[str, object] = {"type": "inline" if item.get("type") == "inline" else "file",
                                    "name": name[:200], "media_type": media_type, "size": len(data),
                                    "sha256": digest, "path": stored}
        for dimension in ("width", "height"):
            if isinstance(item.get(dimension), int) and not isinstance(item.get(dimension), bool):
                entry[dimension] = item[dimension]
        entries.append(entry)
        files[stored] = data
        if isinstance(ref, str) and ref:
            body = body.replace(ref, stored)
    return body, entries, files


def _attachment_bytes(plan: Plan, item: dict[str, object], folder: str | None, slug: str) -> bytes | None:
    ref, inline = item.get("path"), item.get("data_base64")
    if isinstance(ref, str) and ref:
        if plan.files is None:
            raise Unreadable(f"{ref} is in the archive folder, and none was given (--archive)")
        if folder is None:
            raise Unreadable(f"{ref}: the archive folder has no folder for this project")
        return plan.files.attachment(folder, slug, ref)
    if isinstance(inline, str) and inline:
        try:
            return base64.b64decode(inline, validate=True)
        except (binascii.Error, ValueError):
            raise Unreadable("its inline data is not base64") from None
    return None


# -- what follows messages ---------------------------------------------------------------

def reservation_entries(plan: Plan, item: SourceReservation, key: str) -> list[Entry]:
    """The reservation when it was taken, and its release as a later change (a release is final)."""
    what = f"file_reservation {item.id}"
    holder = plan.party(item.agent_id, what)
    if holder is None:
        return []
    try:
        pattern = normalize(item.pattern, "path_pattern")
    except GitmailError as exc:
        plan.report.problem("invalid_record", f"{what}: {exc.message}")
        return []
    record = Reservation(id=gid("reservation", item.created, key, item.id), agent=holder.name, path_pattern=pattern,
                         created_ts=_ts(item.created), expires_ts=_ts(item.expires), hlc=_clock(item.created),
                         exclusive=item.exclusive, reason=item.reason[:4096])
    record.extra = {ID_KEY: item.id}
    kind = "exclusive" if item.exclusive else "shared"
    out = [_entry(plan, what, record, when_ms=ms(item.created), phase=FOLLOW_UP, author=holder.name, email=None,
                  kind="reservations", line=f"{holder.name} reserved {pattern} ({kind})", mutable=True)]
    if item.released is not None:
        released = max(item.released, item.created)
        record = dataclasses.replace(record, released_ts=_ts(released), hlc=_clock(released))
        record.extra = {ID_KEY: item.id}
        out.append(_entry(plan, what, record, when_ms=ms(released), phase=FOLLOW_UP, author=holder.name,
                          email=None, kind="reservations", line=f"{holder.name} released {pattern}", mutable=True))
    return [entry for entry in out if entry is not None]


_STATUS = {"rejected": "denied", "declined": "denied"}


def contact_entry(plan: Plan, link: SourceLink, here: int) -> Entry | None:
    """A contact link, kept in the archive of its target's project."""
    what = f"agent_link {link.id}"
    requester, target = plan.party(link.a_agent_id, what), plan.party(link.b_agent_id, what)
    if requester is None or target is None:
        return None
    status = _STATUS.get(link.status, link.status)
    if status not in CONTACT_STATUS:
        plan.report.problem("invalid_record", f"{what}: status {link.status!r}")
        return None
    created = link.created or link.updated
    if created is None:
        plan.report.problem("unreadable_timestamp", f"{what}: no created_ts")
        return None
    changed = max(moment for moment in (created, link.updated) if moment is not None)
    record = Contact(requester=_name_in(plan, requester, here), target=target.name, status=status,
                     requested_at=_ts(created), hlc=_clock(changed), reason=link.reason[:4096],
                     responded_at=_ts(changed) if status != "pending" else None,
                     expires_at=_ts(link.expires) if link.expires else None)
    record.extra = {ID_KEY: link.id} if link.id is not None else {}
    email = None if requester.project_id == here else record.requester
    return _entry(plan, what, record, when_ms=ms(created), phase=FOLLOW_UP, author=requester.name, email=email,
                  kind="contacts", line=f"{record.requester} asked {target.name} for contact ({status})", mutable=True)


def product_key(product: SourceProduct) -> str | None:
    """The product's name as a key when it is one (``shop``), else its uid."""
    for candidate in (product.name.lower(), product.uid.lower()):
        if candidate and PRODUCT_KEY_RE.match(candidate):
            return candidate
    return None


def product_entry(plan: Plan, product: SourceProduct, link: SourceProductLink, at: dt.datetime) -> Entry | None:
    key = product_key(product)
    if key is None:
        plan.report.problem("invalid_record", f"product {product.id}: neither its name nor its uid is a product key")
        return None
    record = ProductLink(product=key, name=_line(product.name, 200) or key, linked_at=_ts(at), hlc=_clock(at))
    record.extra = {ID_KEY: product.id}
    name, email = plan.operator
    return _entry(plan, f"product {product.id}", record, when_ms=ms(at), phase=SETUP, author=name, email=email,
                  kind="products", line=f"Link the project into product {key}", mutable=True)


def window_entry(plan: Plan, window: SourceWindow, key: str, fallback: dt.datetime) -> Entry | None:
    what = f"window_identity {window.id}"
    if not WINDOW_UUID_RE.match(window.uuid) or not usable_name(window.display_name):
        plan.report.problem("invalid_record", f"{what}: window {window.uuid!r} or name {window.display_name!r}")
        return None
    created = window.created or fallback
    last = max(moment for moment in (created, window.last_active) if moment is not None)
    expires = window.expires or last + dt.timedelta(seconds=WINDOW_TTL_SECONDS)
    record = Window(id=gid("window", created, key, window.uuid), window_uuid=window.uuid,
                    display_name=window.display_name, created_ts=_ts(created), last_active_ts=_ts(last),
                    expires_ts=_ts(expires), hlc=_clock(last))
    record.extra = {ID_KEY: window.id} if window.id is not None else {}
    return _entry(plan, what, record, when_ms=ms(created), phase=SETUP, author=window.display_name, email=None,
                  kind="windows", line=f"Window {window.uuid} goes by {window.display_name}", mutable=True)


def summary_entry(plan: Plan, summary: SourceSummary, key: str) -> Entry | None:
    made = summary.created or summary.end
    points = [_line(line.strip().lstrip("-*#• ").strip()) for line in summary.text.splitlines()]
    record = Summary(id=gid("summary", made, key, summary.id), start_ts=_ts(summary.start), end_ts=_ts(summary.end),
                     created_ts=_ts(made), message_count=summary.message_count,
                     thread_count=len(summary.thread_ids), key_points=[p for p in points if p][:MAX_KEY_POINTS],
                     threads=[{"thread_id": thread[:128]} for thread in summary.thread_ids])
    record.extra = {ID_KEY: summary.id, "x-agent-mail-text": summary.text}
    if summary.llm_model:
        record.extra["x-agent-mail-llm-model"] = summary.llm_model
    name, email = plan.operator
    return _entry(plan, f"message_summary {summary.id}", record, when_ms=ms(made), phase=FOLLOW_UP, author=name,
                  email=email, kind="summaries",
                  line=f"Summary of {summary.message_count} message(s) from {record.start_ts} to {record.end_ts}")
