"""Sending and replying: validation, contact rules, idempotency, one commit per send.

A send resolves every recipient (names compare without case; an unknown
name fails the whole send and is named), checks each recipient's contact
policy, and commits the canonical message with its inbox and outbox copies
as one commit authored by the sender. With ``broadcast`` the recipients are
every active agent but the sender; those a policy would refuse are skipped
and reported instead of failing the send.

When a recipient's policy requires contact: a recipient the caller also
proved to be (``approve_as``) approves it at once and the send goes on; with
``auto_contact_if_blocked`` a contact request goes to every other such
recipient and the send fails with ``CONTACT_REQUIRED`` naming the requests
(the one failing call that commits something: the requests, never the
message); with ``hold_if_blocked`` the message is held instead and delivered
once contact is approved.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from gitmail.coord import acting, capabilities
from gitmail.coord.context import Context
from gitmail.coord.lookup import agent_names, find_agent, project_record
from gitmail.model.errors import (
    AGENT_INACTIVE,
    CONTACT_BLOCKED,
    CONTACT_REQUIRED,
    RECIPIENT_NOT_FOUND,
    GitmailError,
    invalid,
)
from gitmail.model.ids import is_id
from gitmail.model.names import check_agent_name, check_topic
from gitmail.model.records import (
    IMPORTANCE,
    MAX_IMPORTANCE,
    MAX_SUBJECT,
    Agent,
    HeldMessage,
    IdempotencyKey,
    Message,
    Relay,
    held_path,
    message_path,
    outbox_path,
)
from gitmail.model.results import FLATTEN, OMIT_NONE, Result, result
from gitmail.storage.engine import Change
from gitmail.storage.operator import operator_identity
from gitmail.storage.snapshot import Snapshot

from . import addresses, attachments, contacts, files, idempotency, relay
from .contacts import ContactRequest, ContactView
from .delivery import MessageView, commit_line, compose, put_message
from .mailbox import load_message, resolve_message_id

MAX_THREAD_ID = 128
MAX_RECIPIENTS = 1000  # names in one of to, cc, bcc (broadcast and roles reach more)


@dataclass(frozen=True, kw_only=True)
class SendOptions:
    """Everything a send or a reply may be given past its required fields, as every face passes it.

    ``cc``/``bcc`` may name ``role:<capability>``; ``importance`` and
    ``ack_required`` default to ``normal`` and false for a send, to the
    original's for a reply; ``thread_id``, ``topic`` and ``broadcast`` are a
    send's (a reply keeps its original's thread and topic), ``subject_prefix``
    a reply's (default ``Re:``); ``auto_contact_if_blocked`` requests contact
    from recipients whose policy requires it (the send still fails),
    ``hold_if_blocked`` also holds the message until they approve, and
    ``approve_as`` names the agents (lower case) the caller proved besides
    the sender, whose contact is approved on the spot; ``idempotency_key``
    makes a retry return the first result; ``attachment_paths`` and images in
    the body are stored as attachments (see :mod:`gitmail.mail.attachments`),
    shaped by ``convert_images`` and ``attachments_policy``;
    ``attachment_ids`` names files uploaded to the project (see
    :mod:`gitmail.mail.files`), carried as attachments too; ``seat`` is the
    sender's seat token when a session holds its seat. Values are checked
    when the message is sent.
    """

    cc: list[str] | None = None
    bcc: list[str] | None = None
    importance: str | None = None
    ack_required: bool | None = None
    thread_id: str | None = None
    topic: str | None = None
    broadcast: bool = False
    subject_prefix: str | None = None
    auto_contact_if_blocked: bool = False
    hold_if_blocked: bool = False
    approve_as: frozenset[str] = frozenset()
    idempotency_key: str | None = None
    attachment_paths: list[str] | None = None
    attachment_ids: list[str] | None = None
    convert_images: bool | None = None
    attachments_policy: str | None = None
    seat: str | None = None


NO_OPTIONS = SendOptions()


@dataclass(frozen=True, kw_only=True)
class SendRequest:
    """One ``send_message``: a new message (a new thread unless ``options.thread_id`` names one)."""

    project_key: str
    sender_name: str
    to: list[str] | None
    subject: str
    body_md: str
    options: SendOptions = NO_OPTIONS


@dataclass(frozen=True, kw_only=True)
class ReplyRequest:
    """One ``reply_message``: an answer in the original's thread, to its sender unless ``to`` is given."""

    project_key: str
    message_id: str | int  # a gitmail ID, or the id an imported message had in its source
    sender_name: str
    body_md: str
    to: list[str] | None = None
    options: SendOptions = NO_OPTIONS


@result
class Skipped(Result):
    """A broadcast recipient left out, and why."""

    agent: str
    reason: str


@result
class ProjectDelivery(Result):
    """The message as one project keeps it (the sender's, and each other project a recipient is in)."""

    project: str
    payload: MessageView


@result
class SendResult(Result):
    """What a send did: the deliveries (none while the message is held), and what happened on the way."""

    deliveries: list[ProjectDelivery]
    count: int
    created: bool  # false: an earlier send with the same idempotency key, replayed
    held: bool | None = field(default=None, metadata=OMIT_NONE)
    held_message_id: str | None = field(default=None, metadata=OMIT_NONE)
    awaiting: list[str] | None = field(default=None, metadata=OMIT_NONE)
    contact_requests: list[ContactRequest] | None = field(default=None, metadata=OMIT_NONE)
    note: str | None = field(default=None, metadata=OMIT_NONE)
    broadcast_skipped: list[Skipped] | None = field(default=None, metadata=OMIT_NONE)
    contacts_approved: list[ContactView] | None = field(default=None, metadata=OMIT_NONE)
    relays: list[dict[str, Any]] | None = field(default=None, metadata=OMIT_NONE)

    @property
    def message(self) -> MessageView | None:
        """The message as the sender's project keeps it (None while it is held)."""
        return self.deliveries[0].payload if self.deliveries else None


@result
class ReplyResult(Result):
    """A reply: the stored reply's fields, then what the send did (``message`` is None while it is held)."""

    message: MessageView | None = field(default=None, metadata=FLATTEN)
    delivery: SendResult = field(metadata=FLATTEN)


@dataclass
class Outgoing:
    """The validated arguments of one send or reply."""

    sender: str
    to: list[str]
    cc: list[str]
    bcc: list[str]
    subject: str
    body: str
    importance: str
    ack_required: bool
    thread_id: str | None
    topic: str | None
    broadcast: bool = False
    reply_to: str | None = None
    replying_to: str | None = None  # author of the message being answered
    attachments: list[dict[str, Any]] = field(default_factory=list)
    files: dict[str, bytes] = field(default_factory=dict)  # attachment bytes to commit with the message
    seat: str | None = None  # the sender's seat token, when a session holds its seat


def _names(value: object, field_name: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        raise invalid(f"{field_name} must be a list of agent names", field=field_name)
    if len(value) > MAX_RECIPIENTS:
        raise invalid(f"{field_name}: at most {MAX_RECIPIENTS} recipients per field; use broadcast or a role "
                      "(role:<capability>) to reach more", field=field_name)
    return [_recipient(name, field_name) for name in value]


def _recipient(name: object, field_name: str) -> str:
    """An agent name, ``role:<capability>`` for every active agent publishing it, or ``Name@project``."""
    if isinstance(name, str) and "@" in name and not name.startswith(capabilities.ROLE_PREFIX):
        agent, _, project = name.partition("@")
        check_agent_name(agent, field_name)
        if not project.strip():
            raise invalid(f"{field_name} {name!r} names no project after '@' (write Name@/project/key)",
                          field=field_name)
        return name
    if isinstance(name, str) and name.startswith(capabilities.ROLE_PREFIX):
        capability = name[len(capabilities.ROLE_PREFIX):]
        return capabilities.ROLE_PREFIX + capabilities.check_capability(capability, field_name)
    return check_agent_name(name, field_name)


def _importance(value: object) -> str:
    """One of the known levels (any case), or any other short line, stored as given (filters may use it)."""
    if not isinstance(value, str) or not value.strip() or len(value.strip()) > MAX_IMPORTANCE or any(
            ch in value for ch in "\r\n"):
        raise invalid(f"importance must be a short single line (at most {MAX_IMPORTANCE} characters), usually one of "
                      f"{', '.join(IMPORTANCE)}; got {value!r}", field="importance")
    text = value.strip()
    return text.lower() if text.lower() in IMPORTANCE else text


def _subject(value: object) -> str:
    if not isinstance(value, str) or "\n" in value or "\r" in value or len(value) > MAX_SUBJECT:
        raise invalid(f"subject must be one line of at most {MAX_SUBJECT} characters", field="subject")
    return value.strip()


def _thread_id(value: object) -> str | None:
    if value is None or value == "":
        return None
    if (not isinstance(value, str) or not value.strip() or len(value) > MAX_THREAD_ID
            or any(ch in value for ch in "\r\n,")):
        raise invalid(f"thread_id must be one line of at most {MAX_THREAD_ID} characters without commas "
                      "(a message ID or a label such as 'TKT-123')", field="thread_id")
    return value.strip()


def _flag(value: object, name: str) -> bool:
    if not isinstance(value, bool):
        raise invalid(f"{name} must be true or false", field=name)
    return value


def _body(value: object) -> str:
    if not isinstance(value, str):
        raise invalid("body_md must be Markdown text", field="body_md")
    return value


def _resolve(snap: Snapshot, names: list[str], unknown: list[str]) -> list[Agent]:
    found = []
    for name in names:
        agent = find_agent(snap, name)
        if agent is None:
            unknown.append(name)
        else:
            found.append(agent)
    return found


@dataclass
class Remote:
    """A recipient in another project of this store: its profile there, the project's slug and the field."""

    agent: Agent
    slug: str
    field: str

    @property
    def address(self) -> str:
        return addresses.address(self.agent.name, self.slug)


def _split_remote(ctx: Context, project_key: str, out: Outgoing) -> dict[str, list[tuple[str, str]]]:
    """Take the ``Name@project`` recipients out of ``out``, by field: ``(name, slug)`` each.

    An address of the sender's own project is just a name, and stays.
    """
    here = ctx.slug(project_key)
    found: dict[str, list[tuple[str, str]]] = {"to": [], "cc": [], "bcc": []}
    for key in found:
        kept = []
        for name in getattr(out, key):
            if "@" not in name or name.startswith(capabilities.ROLE_PREFIX):
                kept.append(name)
                continue
            agent, slug = addresses.resolve(ctx.store, name, key)
            if slug == here:
                kept.append(agent)
            elif key == "bcc":
                raise invalid(f"bcc cannot name {name}: an agent of another project sees the message in its own "
                              "project's archive, where a blind copy cannot stay blind; use to or cc", field="bcc")
            else:
                found[key].append((agent, slug))
        setattr(out, key, kept)
    return found


def _plan_remote(ctx: Context, wanted: dict[str, list[tuple[str, str]]]) -> list[Remote]:
    """Each recipient of another project, looked up in its archive: unknown or inactive ones fail the send."""
    remote: list[Remote] = []
    unknown: list[str] = []
    inactive: list[str] = []
    for key, pairs in wanted.items():
        for name, slug in pairs:
            agent = find_agent(ctx.archive(slug).snapshot(), name)
            if agent is None:
                unknown.append(addresses.address(name, slug))
            elif agent.status != "active":
                inactive.append(addresses.address(agent.name, slug))
            elif all(r.address != addresses.address(agent.name, slug) for r in remote):
                remote.append(Remote(agent, slug, key))
    if unknown:
        raise GitmailError(RECIPIENT_NOT_FOUND, f"no agent {', '.join(unknown)}: check the name in that project "
                           "(list_agents with its project_key)", {"unknown": unknown})
    if inactive:
        raise GitmailError(AGENT_INACTIVE, f"{', '.join(inactive)} no longer receive mail (retired or "
                           "deregistered); leave them out", {"inactive": inactive})
    return remote


def _plan(ctx: Context, project_key: str, snap: Snapshot, out: Outgoing,
          sender: Agent) -> tuple[dict[str, list[Agent]], list[Skipped]]:
    """Resolve recipients by field; returns them and the broadcast skips."""
    unknown: list[str] = []
    fields = {name: _resolve(snap, capabilities.expand_roles(snap, getattr(out, name), exclude=sender.name, field=name),
                             unknown) for name in ("to", "cc", "bcc")}
    if unknown:
        raise GitmailError(RECIPIENT_NOT_FOUND, f"no agent named {', '.join(unknown)} in this project; register "
                           "them first or check the spelling (list_agents shows the names)", {"unknown": unknown})
    inactive = [a.name for agents in fields.values() for a in agents if a.status != "active"]
    if inactive:
        raise GitmailError(AGENT_INACTIVE, f"{', '.join(inactive)} no longer receive mail (retired or "
                           "deregistered); unretire them first or leave them out", {"inactive": inactive})
    skipped: list[Skipped] = []
    if out.broadcast:
        for name in agent_names(snap):
            agent = find_agent(snap, name)
            if agent is None or agent.name == sender.name:
                continue
            if agent.status != "active":
                skipped.append(Skipped(agent=agent.name, reason=f"agent is {agent.status}"))
                continue
            refused = contacts.gate(ctx, project_key, snap, sender, agent, thread_id=out.thread_id,
                                   replying_to=out.replying_to)
            if refused is not None:
                skipped.append(Skipped(agent=agent.name, reason=refused[1]))
                continue
            fields["to"].append(agent)
    seen: set[str] = set()
    for key in ("to", "cc", "bcc"):  # someone named twice keeps the most visible place
        unique = []
        for agent in fields[key]:
            if agent.name not in seen:
                seen.add(agent.name)
                unique.append(agent)
        fields[key] = unique
    return fields, skipped


def _check_thread(snap: Snapshot, thread_id: str | None) -> None:
    if thread_id is not None and is_id(thread_id):
        load_message(snap, thread_id)  # NOT_FOUND unless the thread's first message exists


def _delivered_result(project: str, message: Message, created: bool, *, skipped: list[Skipped] | None = None,
                      approved: list[ContactView] | None = None) -> SendResult:
    delivery = ProjectDelivery(project=project, payload=MessageView.of(message, show_bcc=True))
    return SendResult(deliveries=[delivery], count=1, created=created, broadcast_skipped=skipped,
                      contacts_approved=approved or None)


def _held_result(held: HeldMessage, requests: list[ContactRequest], created: bool) -> SendResult:
    return SendResult(
        deliveries=[], count=0, created=created, held=True, held_message_id=held.id, awaiting=list(held.awaiting),
        contact_requests=requests,
        note="the message is kept in the archive and will be delivered to every recipient "
             "automatically once the awaited agents approve contact",
    )


def _replay(snap: Snapshot, project: str, key: IdempotencyKey) -> SendResult:
    assert key.message_id is not None  # idempotency.check matched a send or reply, which names its message
    if key.held:
        held = snap.load(held_path(key.agent, key.message_id), HeldMessage)
        if held is not None:
            return _held_result(held, [], False)
    own = snap.load(outbox_path(key.agent, key.message_id), Message)
    message = own if own is not None else load_message(snap, key.message_id)
    return _delivered_result(project, message, False)


def _deliver(ctx: Context, request: SendRequest | ReplyRequest, out: Outgoing, *, operation: str,
             fingerprint: dict[str, object]) -> SendResult:
    options = request.options
    archive = ctx.archive(request.project_key)
    here = ctx.slug(request.project_key)
    key = options.idempotency_key
    hashed = idempotency.key_hash(key) if key is not None else None
    content_hash = idempotency.request_hash(fingerprint)
    hlc = ctx.tick()
    wanted = _split_remote(ctx, request.project_key, out)
    if any(wanted.values()) and options.hold_if_blocked:
        raise invalid("hold_if_blocked cannot hold mail for agents of other projects: ask them for contact first "
                      "(request_contact with to_project), then send", field="hold_if_blocked")

    def fn(snap: Snapshot) -> Change:
        project = project_record(snap)
        # the one check of the sender: registered, active, awake, and holding its seat if a session took it
        sender = acting.require_actor(snap, out.sender, out.seat, at=ctx.clock.now(), field="sender_name")
        if hashed is not None:
            earlier = idempotency.check(snap, sender.name, hashed, operation, content_hash, ctx.clock.now())
            if earlier is not None:
                return Change("", result=_replay(snap, project.human_key, earlier))
        fields, skipped = _plan(ctx, request.project_key, snap, out, sender)
        remote = _plan_remote(ctx, wanted)
        message = _composed(ctx, snap, out, sender, fields, remote, skipped)
        # broadcast recipients already passed the contact rules when they were picked
        explicit = fields["cc"] + fields["bcc"] + ([] if out.broadcast else fields["to"])
        refused = _gated(ctx, request, snap, sender, explicit, remote, here=here, replying_to=out.replying_to,
                         thread_id=out.thread_id)
        change = _change_by(ctx, sender)
        by_name = {a.name: a for a in explicit}
        approved = _approved_in_band(ctx, options, snap, change, sender, refused, by_name, hlc)
        if refused:
            _refuse_unless_asked(options, refused)
            if not options.hold_if_blocked:
                return _request_only(snap, change, sender, message, refused, by_name, hlc, ctx)
        for path, data in out.files.items():
            change.put(path, data)
        if refused:
            _hold(ctx, snap, change, sender, message, refused, by_name, hlc, hashed)
        else:
            _put_delivered(snap, change, message, hlc, project.human_key, approved=approved,
                           skipped=skipped if out.broadcast else None)
        if hashed is not None:
            change.put_record(IdempotencyKey(key_hash=hashed, agent=sender.name, operation=operation,
                                             request_hash=content_hash, created_at=message.created_ts,
                                             message_id=message.id, held=bool(refused)))
        return change

    result = archive.transact(fn).result
    ctx.touch(request.project_key, out.sender)
    if isinstance(result, GitmailError):
        raise result
    assert isinstance(result, SendResult)
    if any(wanted.values()) and result.message is not None:
        result = _relayed(ctx, here, result, result.message)
    return result


# -- the steps of a delivery, in the order _deliver takes them -------------------------------

def _composed(ctx: Context, snap: Snapshot, out: Outgoing, sender: Agent, fields: dict[str, list[Agent]],
              remote: list[Any], skipped: list[Skipped]) -> Message:
    """The message to deliver, once the plan names someone (INVALID_ARGUMENT when nobody is left)."""
    if not any(fields.values()) and not remote:
        why = " (every agent was skipped by broadcast: see data.broadcast_skipped)" if out.broadcast else ""
        raise invalid("no recipients: name at least one agent in to, cc or bcc" + why,
                      field="to", broadcast_skipped=skipped)
    _check_thread(snap, out.thread_id)
    message = compose(ctx.clock, sender=sender.name,
                      to=[a.name for a in fields["to"]] + [r.address for r in remote if r.field == "to"],
                      cc=[a.name for a in fields["cc"]] + [r.address for r in remote if r.field == "cc"],
                      bcc=[a.name for a in fields["bcc"]], subject=out.subject, body=out.body,
                      importance=out.importance, ack_required=out.ack_required, thread_id=out.thread_id,
                      topic=out.topic, reply_to=out.reply_to, attachments=out.attachments)
    message.human = sender.human
    return message


def _gated(ctx: Context, request: SendRequest | ReplyRequest, snap: Snapshot, sender: Agent,
           explicit: list[Agent], remote: list[Any], *, here: str, replying_to: Any,
           thread_id: str | None) -> dict[str, tuple[str, str]]:
    """The recipients here whose contact rules refuse the sender, with why; agents of other projects must pass."""
    refused = {a.name: r for a in explicit
               if (r := contacts.gate(ctx, request.project_key, snap, sender, a, thread_id=thread_id,
                                      replying_to=replying_to))}
    refused_across = {r.address: gated for r in remote
                      if (gated := contacts.gate_across(ctx, snap, sender, here, r.agent, r.slug,
                                                        replying_to=replying_to))}
    if refused_across:
        shut = [n for n, gated in refused_across.items() if gated[0] == CONTACT_BLOCKED]
        raise GitmailError(CONTACT_BLOCKED if shut else CONTACT_REQUIRED,
                           f"cannot deliver to {', '.join(refused_across)}: agents of another project need "
                           "your contact first; ask with request_contact(to_agent=..., to_project=...) and "
                           "send again once they approve",
                           {"recipients": list(refused_across),
                            "reasons": {n: gated[1] for n, gated in refused_across.items()}})
    return refused


def _change_by(ctx: Context, sender: Agent) -> Change:
    """The commit the delivery builds, authored by the sender (the overseer: the person at this machine)."""
    change = Change("", author=sender.name)
    if sender.human:  # the overseer's commits name the person at this machine, as git knows them
        change.author, change.author_email = operator_identity(sender.name, ctx.store.node)
    return change


def _approved_in_band(ctx: Context, options: SendOptions, snap: Snapshot, change: Change,
                      sender: Agent, refused: dict[str, tuple[str, str]], by_name: dict[str, Agent],
                      hlc: Any) -> list[ContactView]:
    """Approve contact for the refused recipients this session also acts as; they leave ``refused``."""
    approved = []
    for name in [n for n, r in refused.items() if r[0] == CONTACT_REQUIRED and n.lower() in options.approve_as]:
        approved.append(contacts.approve_in_band(snap, change, sender, by_name[name], hlc, clock=ctx.clock))
        del refused[name]
    return approved


def _refuse_unless_asked(options: SendOptions, refused: dict[str, tuple[str, str]]) -> None:
    """CONTACT_BLOCKED for a recipient who blocks the sender; CONTACT_REQUIRED unless the send asks or holds."""
    blocked = {n: r for n, r in refused.items() if r[0] == CONTACT_BLOCKED}
    asking = options.auto_contact_if_blocked or options.hold_if_blocked
    if blocked or not asking:
        code = CONTACT_BLOCKED if blocked else CONTACT_REQUIRED
        names = list(blocked or refused)
        advice = ("they do not accept mail from you" if blocked else
                  "request contact first (request_contact), or send with auto_contact_if_blocked=true "
                  "to have the requests filed for you")
        raise GitmailError(code, f"cannot deliver to {', '.join(names)}: {advice}",
                           {"recipients": names, "reasons": {n: (blocked or refused)[n][1] for n in names}})


def _hold(ctx: Context, snap: Snapshot, change: Change, sender: Agent, message: Message,
          refused: dict[str, tuple[str, str]], by_name: dict[str, Agent], hlc: Any, hashed: str | None) -> None:
    """Keep the message until the refused recipients approve, and ask each of them for contact."""
    held = contacts.hold(change, message, sorted(refused), hashed)
    requests = []
    for name in sorted(refused):
        target = by_name[name]
        note = (f"{sender.name} has a message for you (\"{message.subject}\") "
                "that is held until you approve.\n\n")
        requests.append(contacts.open_request(snap, change, sender, target, "", contacts.PENDING_TTL_SECONDS,
                                              hlc, note, clock=ctx.clock))
    change.message = (f"{sender.name} held {message.id} for {', '.join(sorted(refused))} "
                      f"until contact is approved: {message.subject}")[:200]
    change.result = _held_result(held, requests, True)


def _put_delivered(snap: Snapshot, change: Change, message: Message, hlc: Any, project: str, *,
                   approved: list[ContactView], skipped: list[Skipped] | None) -> None:
    """Write the message and its copies, the relays owed to other projects, and wake whom a reply wakes."""
    put_message(change, message)
    for slug in addresses.projects_of(message):  # the copies owed to other projects (see relay)
        change.put_record(Relay(message_id=message.id, project=slug, created_ts=message.created_ts, hlc=hlc))
    change.message = commit_line(message)
    woken = acting.woken_by_reply(snap, message, message.to + message.cc + message.bcc)
    for profile in woken:  # it slept until a reply: this is one
        change.put_record(dataclasses.replace(profile, asleep=False, sleep_until=None, hlc=hlc))
    if woken:
        change.message += f" (woke {', '.join(p.name for p in woken)})"
    if approved:
        change.message += f" (contact approved in band: {', '.join(a['to'] for a in approved)})"
    change.result = _delivered_result(project, message, True, skipped=skipped, approved=approved)


def _relayed(ctx: Context, here: str, result: SendResult, payload: MessageView) -> SendResult:
    """Write the copies owed to other projects now, and add each as a delivery (a replay completes them too)."""
    outcomes = relay.deliver(ctx, here, payload.id)
    deliveries = list(result.deliveries)
    for outcome in outcomes:
        if not outcome.delivered:
            continue
        there = ctx.archive(outcome.project_slug).snapshot()
        copy = there.load(message_path(payload.id), Message)
        if copy is not None:
            deliveries.append(ProjectDelivery(project=project_record(there).human_key, payload=MessageView.of(copy)))
    return dataclasses.replace(result, deliveries=deliveries, count=len(deliveries),
                               relays=[{k: v for k, v in o.items() if k != "message_id"} for o in outcomes])


def _request_only(snap: Snapshot, change: Change, sender: Agent, message: Message,
                  refused: dict[str, tuple[str, str]], by_name: dict[str, Agent], hlc: Any,
                  ctx: Context) -> Change:
    """File a contact request to each refusing recipient; the send's outcome is CONTACT_REQUIRED.

    The requests are committed (so the recipients can approve them), the
    message is not: the sender sends it again once contact is approved.
    """
    requested = []
    for name in sorted(refused):
        note = f"{sender.name} tried to send you \"{message.subject}\" and will send it again once you approve.\n\n"
        requested.append(contacts.open_request(snap, change, sender, by_name[name], "", contacts.PENDING_TTL_SECONDS,
                                               hlc, note, clock=ctx.clock))
    names = sorted(refused)
    change.message = f"{sender.name} asked {', '.join(names)} for contact (to send: {message.subject})"[:200]
    change.result = GitmailError(
        CONTACT_REQUIRED,
        f"cannot deliver to {', '.join(names)} yet: their contact policy needs your contact first. A contact "
        f"request went to each (auto_contact_if_blocked); the message was not sent. Send it again once they "
        f"approve (respond_contact); list_contacts shows the state of your requests",
        {"recipients": names, "reasons": {n: refused[n][1] for n in names}, "auto_contact_requested": requested},
    )
    return change


def _attach(ctx: Context, request: SendOptions, project_key: str, out: Outgoing) -> None:
    """Load, convert and address the message's attachments before its transaction (nothing written yet)."""
    if request.convert_images is not None:
        _flag(request.convert_images, "convert_images")
    if request.attachments_policy is not None:
        attachments.effective_policy(request.attachments_policy, None)
    carried: list[dict[str, Any]] = []
    if request.attachment_ids is not None:
        carried = [dict(entry) for entry in files.attachments_for(ctx.archive(project_key).snapshot(),
                                                                  request.attachment_ids)]
    if not request.attachment_paths and not attachments.IMAGE_REF_RE.search(out.body):
        out.attachments = carried
        return
    snap = ctx.archive(project_key).snapshot()
    sender = find_agent(snap, out.sender)
    agent_policy = sender.attachments_policy if sender is not None else None
    prepared = attachments.prepare(snap, out.body, request.attachment_paths,
                                   policy=attachments.effective_policy(request.attachments_policy, agent_policy),
                                   convert_images=request.convert_images, agent_policy=agent_policy)
    stored = {entry.get("path") for entry in prepared.attachments}
    out.body, out.files = prepared.body, prepared.files
    out.attachments = prepared.attachments + [entry for entry in carried if entry["path"] not in stored]


def _options_fingerprint(request: SendOptions) -> dict[str, object]:
    fingerprint: dict[str, object] = {"attachment_paths": request.attachment_paths,
                                      "convert_images": request.convert_images,
                                      "attachments_policy": request.attachments_policy}
    if request.attachment_ids is not None:  # only when given: fingerprints of sends without them stay as they were
        fingerprint["attachment_ids"] = request.attachment_ids
    return fingerprint


def send_message(ctx: Context, request: SendRequest) -> SendResult:
    """Send a Markdown message; see the module docs and :class:`SendOptions` for the rules."""
    check_agent_name(request.sender_name, "sender_name")
    options = request.options
    if options.subject_prefix is not None:
        raise invalid("subject_prefix is for replies; a new message's subject is used as given",
                      field="subject_prefix")
    out = Outgoing(sender=request.sender_name, to=_names(request.to, "to"), cc=_names(options.cc, "cc"),
                   bcc=_names(options.bcc, "bcc"), subject=_subject(request.subject), body=_body(request.body_md),
                   importance=_importance("normal" if options.importance is None else options.importance),
                   ack_required=_flag(False if options.ack_required is None else options.ack_required, "ack_required"),
                   thread_id=_thread_id(options.thread_id),
                   topic=check_topic(options.topic) if options.topic not in (None, "") else None,
                   broadcast=_flag(options.broadcast, "broadcast"), seat=options.seat)
    _flag(options.auto_contact_if_blocked, "auto_contact_if_blocked")
    _flag(options.hold_if_blocked, "hold_if_blocked")
    if out.broadcast and out.to:
        raise invalid("broadcast sends to every active agent: leave to empty, or name recipients without broadcast",
                      field="broadcast")
    if not (out.to or out.cc or out.bcc or out.broadcast):
        raise invalid("no recipients: name at least one agent in to, cc or bcc (or set broadcast)", field="to")
    fingerprint = {"op": "send", "sender": request.sender_name.lower(), "to": out.to, "cc": out.cc, "bcc": out.bcc,
                   "subject": out.subject, "body": out.body, "importance": out.importance,
                   "ack_required": out.ack_required, "thread_id": out.thread_id, "topic": out.topic,
                   "broadcast": out.broadcast, **_options_fingerprint(options)}
    _attach(ctx, options, request.project_key, out)
    return _deliver(ctx, request, out, operation="send_message", fingerprint=fingerprint)


def reply_subject(subject: str, prefix: str) -> str:
    """``subject`` with ``prefix`` in front, unless it already starts with it (ignoring case)."""
    if subject.lower().startswith(prefix.lower()):
        return subject
    return f"{prefix} {subject}".strip()[:MAX_SUBJECT]


def _reply_only(options: SendOptions) -> str:
    """The reply's subject prefix, once the options a reply cannot take are refused."""
    for name in ("thread_id", "topic", "broadcast"):
        if getattr(options, name):
            raise invalid(f"{name} is for new messages: a reply stays in its original's thread and topic; "
                          "send a new message instead", field=name)
    prefix = "Re:" if options.subject_prefix is None else options.subject_prefix
    if not isinstance(prefix, str) or "\n" in prefix or len(prefix) > 32:
        raise invalid("subject_prefix must be a short single line such as 'Re:'", field="subject_prefix")
    return prefix


def reply_message(ctx: Context, request: ReplyRequest) -> ReplyResult:
    """Answer a message in its thread; by default to its sender, with its importance and ack flag."""
    message_id = resolve_message_id(ctx, request.project_key, request.message_id)
    check_agent_name(request.sender_name, "sender_name")
    options = request.options
    prefix = _reply_only(options)
    original = load_message(ctx.archive(request.project_key).snapshot(), message_id)
    out = Outgoing(sender=request.sender_name, to=_names(request.to, "to") if request.to else [original.sender],
                   cc=_names(options.cc, "cc"), bcc=_names(options.bcc, "bcc"),
                   subject=reply_subject(original.subject, prefix.strip()), body=_body(request.body_md),
                   importance=(_importance(options.importance) if options.importance is not None
                               else original.importance),
                   ack_required=(_flag(options.ack_required, "ack_required") if options.ack_required is not None
                                 else original.ack_required),
                   thread_id=original.thread_id or original.id, topic=original.topic, reply_to=original.id,
                   replying_to=original.sender, seat=options.seat)
    _flag(options.auto_contact_if_blocked, "auto_contact_if_blocked")
    _flag(options.hold_if_blocked, "hold_if_blocked")
    fingerprint = {"op": "reply", "sender": request.sender_name.lower(), "message_id": message_id,
                   "to": request.to, "cc": out.cc, "bcc": out.bcc, "prefix": prefix, "body": out.body,
                   "importance": options.importance, "ack_required": options.ack_required,
                   **_options_fingerprint(options)}
    _attach(ctx, options, request.project_key, out)
    delivered = _deliver(ctx, request, out, operation="reply_message", fingerprint=fingerprint)
    return ReplyResult(message=delivered.message, delivery=delivered)
