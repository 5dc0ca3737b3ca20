"""Contact links and policies: who may write to whom.

Each agent has a policy: ``open`` (anyone in the project), ``auto`` (anyone
with an evident reason: an approved link, a shared thread, overlapping active
reservations, or mail exchanged recently), ``contacts_only`` (approved links
only) or ``block_all``. A link ``contacts/<requester>/<target>.yaml`` is
requested (pending, with an introduction message the target must
acknowledge), then approved or denied by the target.

A send that a policy refuses can ask for contact on the way
(``auto_contact_if_blocked``): the requests are filed and the send fails, so
the sender sends again after approval; a recipient the sender's own session
also acts as approves at once (:func:`approve_in_band`). With
``hold_if_blocked`` the message is held instead: it waits in the sender's
``held`` folder and is delivered in the commit that approves the last contact
it was waiting for.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from dataclasses import field

from gitmail.coord import reservations
from gitmail.coord.acting import check_acting
from gitmail.coord.context import Context
from gitmail.coord.globs import overlaps
from gitmail.coord.lookup import find_agent, project_record, require_agent
from gitmail.model.clock import HLC, HybridClock, format_ts
from gitmail.model.errors import CONTACT_BLOCKED, CONTACT_REQUIRED, GitmailError, invalid, not_found
from gitmail.model.ids import id_time, is_id
from gitmail.model.records import (
    CONTACT_POLICIES,
    CONTACTS,
    HELD,
    INBOX,
    OUTBOX,
    Agent,
    Contact,
    HeldMessage,
    Message,
    agent_folder,
    contact_path,
)
from gitmail.model.results import FLATTEN, OMIT_NONE, Result, renamed, result
from gitmail.storage.engine import Change
from gitmail.storage.snapshot import Snapshot

from .addresses import address
from .addresses import resolve as resolve_address
from .delivery import compose, put_message
from .idempotency import find as find_key

PENDING_TTL_SECONDS = 7 * 24 * 3600
APPROVED_TTL_SECONDS = 30 * 24 * 3600
RECENT_CONTACT_DAYS = 7
MAX_TTL_SECONDS = 10 * 365 * 24 * 3600
INTRO_TOPIC = "contact-request"  # tags introduction messages, which are no evidence of contact


def check_ttl(ttl_seconds: object) -> int:
    if not isinstance(ttl_seconds, int) or isinstance(ttl_seconds, bool) or not 60 <= ttl_seconds <= MAX_TTL_SECONDS:
        raise invalid("ttl_seconds must be a whole number of seconds, at least 60", field="ttl_seconds")
    return ttl_seconds


def _later(clock: HybridClock, seconds: int) -> str:
    return format_ts(clock.now() + dt.timedelta(seconds=seconds))


def _live(link: Contact | None, at: str) -> bool:
    return link is not None and (link.expires_at is None or link.expires_at > at)


def link_between(snap: Snapshot, requester: str, target: str) -> Contact | None:
    return snap.load(contact_path(requester, target), Contact)


def approved_between(snap: Snapshot, a: str, b: str, at: str) -> bool:
    """Whether a live approved link joins the two agents, in either direction."""
    return any(link is not None and link.status == "approved" and _live(link, at)
               for link in (link_between(snap, a, b), link_between(snap, b, a)))


def _exchanged_recently(snap: Snapshot, sender: str, recipient: str, since: str) -> bool:
    for folder, other_side in ((INBOX, "from"), (OUTBOX, "to")):
        for _, path in snap.day_files(agent_folder(sender, folder), since):
            message = snap.load(path, Message)
            if message is None or message.created_ts <= since:
                continue
            if other_side == "from" and message.sender == recipient:
                return True
            if (other_side == "to" and recipient in message.to + message.cc + message.bcc
                    and message.topic != INTRO_TOPIC):
                return True
    return False


def _share_thread(snap: Snapshot, sender: str, recipient: str, thread_id: str) -> bool:
    # A thread named by a message ID began with that message: nothing older can be part of it.
    since = format_ts(id_time(thread_id)) if is_id(thread_id) else None
    for folder in (INBOX, OUTBOX):
        for _, path in snap.day_files(agent_folder(sender, folder), since):
            message = snap.load(path, Message)
            if message is None or thread_id not in (message.thread_id, message.id):
                continue
            if recipient == message.sender or recipient in message.to + message.cc + message.bcc:
                return True
    return False


def _reservations_overlap(ctx: Context, project_key: str, snap: Snapshot, sender: str, recipient: str,
                          at: dt.datetime) -> bool:
    mine = [r.path_pattern for r in reservations.active(ctx, project_key, snap, at, held_by=sender)]
    theirs = [r.path_pattern for r in reservations.active(ctx, project_key, snap, at, held_by=recipient)]
    return any(overlaps(a, b) for a in mine for b in theirs)


def gate(ctx: Context, project_key: str, snap: Snapshot, sender: Agent, recipient: Agent, *,
         thread_id: str | None = None, replying_to: str | None = None) -> tuple[str, str] | None:
    """None if ``sender`` may write to ``recipient``; else ``(code, reason)``.

    The project's human overseer (a profile marked ``human``) is never refused.

    ``replying_to`` names the author of the message being answered: answering
    someone who wrote to you is always allowed unless they block everyone.
    """
    if sender.human or sender.name == recipient.name or recipient.contact_policy == "open":
        return None  # the human overseer writes to anyone, as does anyone to an open agent
    moment = ctx.clock.now()
    at = format_ts(moment)
    if approved_between(snap, sender.name, recipient.name, at):
        return None
    if recipient.contact_policy == "block_all":
        return CONTACT_BLOCKED, f"{recipient.name} accepts no new contacts (policy block_all)"
    asked = link_between(snap, sender.name, recipient.name)
    if asked is not None and asked.status in ("denied", "blocked") and _live(asked, at):
        return CONTACT_BLOCKED, f"{recipient.name} declined contact with {sender.name}"
    if replying_to == recipient.name:
        return None
    if recipient.contact_policy == "contacts_only":
        return CONTACT_REQUIRED, f"{recipient.name} accepts mail only from approved contacts"
    if thread_id and _share_thread(snap, sender.name, recipient.name, thread_id):
        return None
    if _reservations_overlap(ctx, project_key, snap, sender.name, recipient.name, moment):
        return None
    since = format_ts(moment - dt.timedelta(days=RECENT_CONTACT_DAYS))
    if _exchanged_recently(snap, sender.name, recipient.name, since):
        return None
    return CONTACT_REQUIRED, (f"{recipient.name} has not been in contact with {sender.name} "
                              "(no shared thread, overlapping reservation or recent mail)")


def gate_across(ctx: Context, snap: Snapshot, sender: Agent, sender_slug: str, recipient: Agent,
                recipient_slug: str, *, replying_to: str | None = None) -> tuple[str, str] | None:
    """None if ``sender`` (of the project whose snapshot is ``snap``) may write to ``recipient`` of another project.

    The recipient's policy decides, as within a project, but the evidence
    ``auto`` accepts (shared threads, reservations, recent mail) does not
    cross projects: it takes an approved link, asked either way (the
    sender's request lives in the recipient's archive, the recipient's in
    the sender's), or an answer to a message the recipient wrote.
    """
    if sender.human or recipient.contact_policy == "open":
        return None
    at = ctx.clock.now_ts()
    there = ctx.archive(recipient_slug).snapshot()
    me, them = address(sender.name, sender_slug), address(recipient.name, recipient_slug)
    asked = link_between(there, me, recipient.name)
    for link in (asked, link_between(snap, them, sender.name)):
        if link is not None and link.status == "approved" and _live(link, at):
            return None
    if recipient.contact_policy == "block_all":
        return CONTACT_BLOCKED, f"{them} accepts no new contacts (policy block_all)"
    if asked is not None and asked.status in ("denied", "blocked") and _live(asked, at):
        return CONTACT_BLOCKED, f"{them} declined contact with {me}"
    if replying_to == them:
        return None
    return CONTACT_REQUIRED, f"{them} has approved no contact with {me} (needed across projects)"


@result
class ContactView(Result):
    """A contact link as callers see it."""

    requester: str = field(metadata=renamed("from"))
    to: str
    status: str
    reason: str
    requested_at: str
    responded_at: str | None
    expires_ts: str | None
    expired: bool


@result
class ContactRequest(Result):
    """A contact request opened (or the live link that made one needless), with its introduction message.

    A request to another project's agent also names that project.
    """

    link: ContactView = field(metadata=FLATTEN)
    intro_message_id: str | None
    to_project: str | None = field(default=None, metadata=OMIT_NONE)


@result
class HeldDelivery(Result):
    """A held message delivered once contact was approved: its held ID and the message it became."""

    held_id: str
    message_id: str


@result
class ContactResponse(Result):
    """A contact request answered, and the held messages the approval delivered."""

    link: ContactView = field(metadata=FLATTEN)
    approved: bool
    delivered_held: list[HeldDelivery]


@result
class ContactListing(Result):
    """A link as an agent lists it: which way it goes, and the other project of a request made across."""

    link: ContactView = field(metadata=FLATTEN)
    direction: str
    to_project: str | None = field(default=None, metadata=OMIT_NONE)


@result
class HeldView(Result):
    """A message held until its recipients approve contact (or declined by all of them)."""

    held_id: str
    subject: str
    to: list[str]
    cc: list[str]
    bcc: list[str]
    created_ts: str
    awaiting: list[str]
    denied: list[str]


@result
class PolicySet(Result):
    """An agent's contact policy, as set."""

    agent: str
    policy: str


def contact_view(link: Contact, at: str) -> ContactView:
    """A link as callers see it; ``expired`` is judged at ``at``."""
    return ContactView(requester=link.requester, to=link.target, status=link.status, reason=link.reason,
                       requested_at=link.requested_at, responded_at=link.responded_at, expires_ts=link.expires_at,
                       expired=not _live(link, at))


def open_request(snap: Snapshot, change: Change, requester: Agent, target: Agent, reason: str, ttl_seconds: int,
                 hlc: HLC, note: str = "", *, clock: HybridClock) -> ContactRequest:
    """Queue a pending link (or refresh one) and an ack-required introduction message.

    A live approved link is left as it is and no introduction is sent.
    """
    at = clock.now_ts()
    existing = link_between(snap, requester.name, target.name)
    if approved_between(snap, requester.name, target.name, at) and existing is not None:
        return ContactRequest(link=contact_view(existing, at), intro_message_id=None)
    link = Contact(requester=requester.name, target=target.name, status="pending", requested_at=at, hlc=hlc,
                   reason=reason, expires_at=_later(clock, ttl_seconds))
    change.put_record(link)
    body = (f"{requester.name} asks to be able to write to you.\n\n"
            + (f"Reason: {reason}\n\n" if reason else "")
            + note
            + f"Approve with respond_contact(to_agent=\"{target.name}\", from_agent=\"{requester.name}\", "
              "accept=true), or decline with accept=false.\n")
    intro = compose(clock, sender=requester.name, to=[target.name], cc=[], bcc=[],
                    subject=f"Contact request from {requester.name}", body=body, importance="normal",
                    ack_required=True, thread_id=None, topic=INTRO_TOPIC)
    put_message(change, intro)
    return ContactRequest(link=contact_view(link, at), intro_message_id=intro.id)


def approve_in_band(snap: Snapshot, change: Change, requester: Agent, target: Agent, hlc: HLC, *,
                    clock: HybridClock) -> ContactView:
    """Approve ``requester``'s contact with ``target`` in ``change``, for a caller proven to be both."""
    at = clock.now_ts()
    link = link_between(snap, requester.name, target.name)
    link = Contact(requester=requester.name, target=target.name, status="approved",
                   requested_at=link.requested_at if link is not None else at, hlc=hlc,
                   reason="approved in the session that acts as both", responded_at=at,
                   expires_at=_later(clock, APPROVED_TTL_SECONDS))
    change.put_record(link)
    return contact_view(link, at)


def request_contact(ctx: Context, project_key: str, from_agent: str, to_agent: str, *, reason: str = "",
                    ttl_seconds: int = PENDING_TTL_SECONDS, seat: str | None = None,
                    to_project: str | None = None) -> ContactRequest:
    """Ask ``to_agent`` (of ``to_project``, default the same project) to accept mail from ``from_agent``."""
    check_ttl(ttl_seconds)
    if not isinstance(reason, str):
        raise invalid("reason must be text", field="reason")
    if to_project not in (None, "") and ctx.slug(_project_key(to_project)) != ctx.slug(project_key):
        return _request_across(ctx, project_key, from_agent, to_agent, _project_key(to_project), reason=reason,
                               ttl_seconds=ttl_seconds, seat=seat)
    archive = ctx.archive(project_key)
    hlc = ctx.tick()

    def fn(snap: Snapshot) -> Change:
        requester = check_acting(snap, require_agent(snap, from_agent, "from_agent", active=True), seat,
                                 at=ctx.clock.now())
        target = require_agent(snap, to_agent, "to_agent", active=True)
        if requester.name == target.name:
            raise invalid("an agent needs no contact with itself", field="to_agent")
        if target.contact_policy == "block_all" and not approved_between(snap, requester.name, target.name,
                                                                          ctx.clock.now_ts()):
            raise GitmailError(CONTACT_BLOCKED, f"{target.name} accepts no new contacts (policy block_all); "
                               "coordinate through another agent or a human", {"to_agent": target.name})
        change = Change(f"{requester.name} asked {target.name} for contact", author=requester.name)
        change.result = open_request(snap, change, requester, target, reason, ttl_seconds, hlc, clock=ctx.clock)
        return change

    result = archive.transact(fn).result
    ctx.touch(project_key, result.link.requester)
    return result


def _project_key(value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise invalid("to_project must be a project key (an absolute path) or a project slug", field="to_project")
    return value


def _request_across(ctx: Context, project_key: str, from_agent: str, to_agent: str, to_project: str, *,
                    reason: str, ttl_seconds: int, seat: str | None) -> ContactRequest:
    """A request to an agent of another project: the link and the introduction go into the target's archive.

    The requester is checked in its own project (registered, active, awake,
    holding its seat); the target answers in its own, with
    ``respond_contact(from_agent="Name@project")``.
    """
    here = ctx.slug(project_key)
    target_archive = ctx.archive(to_project)  # NOT_FOUND for a project not in this store
    requester = check_acting(ctx.archive(project_key).snapshot(),
                             require_agent(ctx.archive(project_key).snapshot(), from_agent, "from_agent", active=True),
                             seat, at=ctx.clock.now())
    me = dataclasses.replace(requester, name=address(requester.name, here))  # as the target's archive names it
    hlc = ctx.tick()

    def fn(snap: Snapshot) -> Change:
        target = require_agent(snap, to_agent, "to_agent", active=True)
        at = ctx.clock.now_ts()
        if target.contact_policy == "block_all" and not approved_between(snap, me.name, target.name, at):
            raise GitmailError(CONTACT_BLOCKED, f"{target.name} accepts no new contacts (policy block_all); "
                               "coordinate through another agent or a human", {"to_agent": target.name})
        change = Change(f"{me.name} asked {target.name} for contact", author=requester.name,
                        author_email=me.name)
        opened = open_request(snap, change, me, target, reason, ttl_seconds, hlc, clock=ctx.clock)
        change.result = dataclasses.replace(opened, to_project=project_record(snap).human_key)
        return change

    result = target_archive.transact(fn).result
    ctx.touch(project_key, requester.name)
    return result


def _requester(ctx: Context, from_agent: str) -> str | None:
    """``Name@slug`` of a requester of another project named ``Name@project`` (None for a plain name)."""
    if not isinstance(from_agent, str) or "@" not in from_agent:
        return None
    name, slug = resolve_address(ctx.store, from_agent, "from_agent")
    agent = find_agent(ctx.archive(slug).snapshot(), name)
    if agent is None:
        raise not_found(f"no agent {from_agent!r}: check the name in its project", field="from_agent")
    return address(agent.name, slug)


def respond_contact(ctx: Context, project_key: str, to_agent: str, from_agent: str, accept: bool,
                    *, ttl_seconds: int = APPROVED_TTL_SECONDS, seat: str | None = None) -> ContactResponse:
    """``to_agent`` approves or denies the request of ``from_agent``; held mail moves on."""
    check_ttl(ttl_seconds)
    if not isinstance(accept, bool):
        raise invalid("accept must be true or false", field="accept")
    archive = ctx.archive(project_key)
    foreign = _requester(ctx, from_agent)
    if foreign is not None and foreign.endswith("@" + ctx.slug(project_key)):
        from_agent = foreign.split("@", 1)[0]  # an address of this very project is a name
        foreign = None
    hlc = ctx.tick()

    def fn(snap: Snapshot) -> Change:
        target = check_acting(snap, require_agent(snap, to_agent, "to_agent"), seat, at=ctx.clock.now())
        requester_name = foreign or require_agent(snap, from_agent, "from_agent").name
        link = link_between(snap, requester_name, target.name)
        if link is None:
            raise not_found(f"{requester_name} has not asked {target.name} for contact; there is nothing "
                            "to respond to (list_contacts shows pending requests)",
                            from_agent=requester_name, to_agent=target.name)
        at = ctx.clock.now_ts()
        link.status = "approved" if accept else "denied"
        link.responded_at, link.hlc = at, hlc
        link.expires_at = _later(ctx.clock, ttl_seconds) if accept else None
        verb = "approved" if accept else "declined"
        change = Change(f"{target.name} {verb} contact from {requester_name}", author=target.name).put_record(link)
        delivered = ([] if foreign else
                     release_held(snap, change, requester_name, target.name, accept, hlc, clock=ctx.clock))
        if delivered:
            change.message += f"; delivered {len(delivered)} held message(s) from {requester_name}"
        change.result = ContactResponse(link=contact_view(link, at), approved=accept, delivered_held=delivered)
        return change

    result = archive.transact(fn).result
    ctx.touch(project_key, result.link.to)
    return result


def release_held(snap: Snapshot, change: Change, sender: str, responder: str, approved: bool,
                 hlc: HLC, *, clock: HybridClock) -> list[HeldDelivery]:
    """Settle ``sender``'s held messages that were waiting for ``responder``.

    Returns the held ID and the new message ID of each message delivered now. A message
    whose every recipient declined stays held (nothing is lost) with nobody
    awaited.
    """
    delivered = []
    for _, path in snap.day_files(agent_folder(sender, HELD)):
        held = snap.load(path, HeldMessage)
        if held is None or responder not in held.awaiting:
            continue
        held.awaiting = [name for name in held.awaiting if name != responder]
        if not approved:
            held.denied = sorted(set(held.denied) | {responder})
        if held.awaiting:
            change.put_record(held)
            continue
        keep = [n for n in recipients_of(held) if n not in held.denied and _active(snap, n)]
        if not keep:
            change.put_record(held)
            continue
        message = compose(clock, sender=held.sender, to=[n for n in held.to if n in keep],
                          cc=[n for n in held.cc if n in keep], bcc=[n for n in held.bcc if n in keep],
                          subject=held.subject, body=held.body,
                          importance=held.importance, ack_required=held.ack_required, thread_id=held.thread_id,
                          topic=held.topic, reply_to=held.reply_to, attachments=held.attachments)
        put_message(change, message)
        change.delete(path)
        if held.idempotency_key_hash:
            key = find_key(snap, sender, held.idempotency_key_hash, clock.now())
            if key is not None and key.message_id == held.id:
                key.message_id, key.held = message.id, False
                change.put_record(key)
        delivered.append(HeldDelivery(held_id=held.id, message_id=message.id))
    return delivered


def recipients_of(held: HeldMessage) -> list[str]:
    return list(dict.fromkeys(held.to + held.cc + held.bcc))


def _active(snap: Snapshot, name: str) -> bool:
    agent = find_agent(snap, name)
    return agent is not None and agent.status == "active"


def list_held(ctx: Context, project_key: str, agent_name: str) -> list[HeldView]:
    """The sender's messages still waiting for contact approval (or declined by all)."""
    snap = ctx.archive(project_key).snapshot()
    agent = require_agent(snap, agent_name)
    ctx.touch(project_key, agent.name)
    out = []
    for _, path in snap.day_files(agent_folder(agent.name, HELD)):
        held = snap.load(path, HeldMessage)
        if held is not None:
            out.append(HeldView(held_id=held.id, subject=held.subject, to=held.to, cc=held.cc, bcc=held.bcc,
                                created_ts=held.created_ts, awaiting=held.awaiting, denied=held.denied))
    return out


def list_contacts(ctx: Context, project_key: str, agent_name: str) -> list[ContactListing]:
    """Links the agent asked for and links asked of it, with status and expiry.

    Requests it made to agents of other projects of this store are kept in
    their archives, and listed with ``to_project``.
    """
    snap = ctx.archive(project_key).snapshot()
    agent = require_agent(snap, agent_name)
    ctx.touch(project_key, agent.name)
    at, out = ctx.clock.now_ts(), []
    here = ctx.slug(project_key)
    me = address(agent.name, here)
    for slug in ctx.store.slugs():
        if slug == here:
            continue
        there = ctx.archive(slug).snapshot()
        for name in there.listdir(f"{CONTACTS}/{me}"):
            link = link_between(there, me, name[: -len(".yaml")])
            if link is not None:
                seen = dataclasses.replace(contact_view(link, at), requester=agent.name)
                out.append(ContactListing(link=seen, direction="outgoing",
                                          to_project=project_record(there).human_key))
    for requester in snap.listdir(CONTACTS):
        for name in snap.listdir(f"{CONTACTS}/{requester}"):
            target = name[: -len(".yaml")]
            if agent.name not in (requester, target):
                continue
            link = link_between(snap, requester, target)
            if link is not None:
                out.append(ContactListing(link=contact_view(link, at),
                                          direction="outgoing" if requester == agent.name else "incoming"))
    return out


def set_contact_policy(ctx: Context, project_key: str, agent_name: str, policy: str,
                       *, seat: str | None = None) -> PolicySet:
    """Set who may write to the agent: open, auto, contacts_only or block_all."""
    if policy not in CONTACT_POLICIES:
        raise invalid(f"policy must be one of {', '.join(CONTACT_POLICIES)}; got {policy!r}", field="policy")
    archive = ctx.archive(project_key)
    hlc = ctx.tick()

    def fn(snap: Snapshot) -> Change:
        agent = check_acting(snap, require_agent(snap, agent_name), seat, at=ctx.clock.now())
        if agent.contact_policy == policy:
            return Change("", result=agent.name)
        agent.contact_policy, agent.hlc = policy, hlc
        return Change(f"{agent.name} set contact policy to {policy}", author=agent.name,
                      result=agent.name).put_record(agent)

    name = archive.transact(fn).result
    ctx.touch(project_key, name)
    return PolicySet(agent=name, policy=policy)


def hold(change: Change, message: Message, awaiting: list[str], key_hash: str | None) -> HeldMessage:
    """Queue ``message`` as held until every name in ``awaiting`` approves contact."""
    held = HeldMessage(id=message.id, sender=message.sender, subject=message.subject, created_ts=message.created_ts,
                       awaiting=awaiting, to=message.to, cc=message.cc, bcc=message.bcc,
                       thread_id=message.thread_id if message.thread_id != message.id else None,
                       importance=message.importance, ack_required=message.ack_required, topic=message.topic,
                       reply_to=message.reply_to, attachments=message.attachments, idempotency_key_hash=key_hash,
                       body=message.body)
    change.put_record(held)
    return held

