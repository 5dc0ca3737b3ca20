"""The mail facade: one method per agent-mail operation.

:class:`Mail` is what the MCP server and the CLI call. Its methods take the
argument names agents already use (``project_key``, ``sender_name``,
``body_md`` …) and return plain JSON-ready dicts and lists. Each method only
delegates to the module that owns the rule, passing the shared
:class:`gitmail.coord.context.Context` (the store, its clock and the in-memory
activity timestamps) first, as every domain entry point takes it. Options
past the required arguments are keyword-only.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from gitmail.coord import buildslots, capabilities, guard, journal, reservations, seats
from gitmail.coord.buildslots import SlotAcquired, SlotForceReleased, SlotList, SlotReleased, SlotRenewed, SlotView
from gitmail.coord.capabilities import CapabilitiesSet, CapabilityCards
from gitmail.coord.context import Activity, Context
from gitmail.coord.guard import GuardInstalled, GuardRemoved
from gitmail.coord.journal import JournalPage, JournalView
from gitmail.coord.loads import Loaded, guard_roots
from gitmail.coord.lookup import profiles as profiles_of
from gitmail.coord.reservations import (
    ForceRelease,
    NothingReleased,
    Released,
    Renewal,
    ReservationCycle,
    ReservationList,
    Reserved,
)
from gitmail.coord.seats import SeatRelease, SeatRenewal, SeatStatus, SeatTaken
from gitmail.model.errors import GitmailError, invalid
from gitmail.model.limits import (
    CATCH_UP_DEFAULT,
    DEFAULT_INACTIVITY,
    DEFAULT_LEASE_S,
    DEFAULT_SLOT_EXTEND,
    DEFAULT_SLOT_TTL,
    DEFAULT_TTL,
    FEED_DEFAULT_LIMIT,
    READ_BUDGET_DEFAULT,
)
from gitmail.model.names import OVERSEER
from gitmail.storage.operator import acting_as_operator
from gitmail.storage.store import Store

from . import (
    agents,
    allmail,
    attachments,
    attention,
    channels,
    contacts,
    feed,
    files,
    identities,
    mailbox,
    orgcontext,
    overdue,
    overseer,
    overview,
    products,
    projects,
    receipts,
    relay,
    retention,
    sending,
    summaries,
    wakeups,
    windows,
)
from .ackscanner import AckScanner
from .acksettings import AckSettings
from .agents import (
    AgentDeleted,
    AgentProfile,
    CardState,
    Credential,
    InactiveRetired,
    Registration,
    StatusChange,
    TokenReset,
    Whois,
)
from .allmail import MailQuery
from .attachments import AttachmentContent, AttachmentsPolicySet
from .channels import (
    ChannelCatchUp,
    ChannelCreated,
    ChannelList,
    ChannelPage,
    ChannelPostView,
    ChannelSearch,
    ChannelView,
    Posted,
)
from .contacts import ContactListing, ContactRequest, ContactResponse, HeldDelivery, HeldView, PolicySet
from .delivery import MessageView
from .feed import Arrivals, CatchUp, FeedMessage, FeedPage
from .files import HTTP_PATH as FILES_HTTP_PATH
from .files import FileDescription, FileDownload, FileList, FileUploaded, FileView
from .identities import AgentUpdated, CardSet, Position, SleepState, Spawned
from .mailbox import (
    InboxMessage,
    Listing,
    OverdueListing,
    Received,
    SearchHit,
    Sent,
    SentMessage,
    StoredMessage,
    ThreadPage,
    TopicMessage,
)
from .orgcontext import MemoryDocView, MemoryOverview, MemoryWritten, OrgContextView
from .overdue import OverdueScan
from .products import ProductHit, ProductInboxMessage, ProductLinked, ProductShown, ProductThread, ProductUnlinked
from .projects import ProjectDeleted, ProjectView
from .receipts import AckReceipt, ReadReceipt
from .retention import PurgeReport
from .sending import NO_OPTIONS, ReplyRequest, ReplyResult, SendOptions, SendRequest, SendResult
from .summaries import SummaryView, ThreadSummaries
from .wakeups import WakeEvent
from .windows import WindowExpired, WindowList, WindowView

# What the faces may take from here besides Mail: the options they pass and the typed results they read.
__all__ = ["AckReceipt", "AttachmentsPolicySet", "CapabilitiesSet", "CapabilityCards", "ContactListing",
           "ContactRequest", "ContactResponse", "ForceRelease", "GuardInstalled", "GuardRemoved", "HeldDelivery",
           "HeldView", "InboxMessage", "JournalPage", "JournalView", "Mail", "MailQuery", "MessageView", "NO_OPTIONS",
           "NothingReleased", "OverdueScan", "PolicySet", "ProjectDeleted", "ProjectView", "PurgeReport",
           "ReadReceipt", "Released", "Renewal", "ReplyResult", "ReservationCycle", "ReservationList", "Reserved",
           "SeatRelease", "SeatRenewal", "SeatTaken", "SendOptions", "SendResult", "WindowExpired", "WindowList",
           "WindowView"]
# The reads' results: summaries, searches, topics, products, attachments and the project's overview.
__all__ += ["AttachmentContent", "ProductHit", "ProductInboxMessage", "ProductLinked", "ProductShown",
            "ProductThread", "ProductUnlinked", "SearchHit", "SummaryView", "ThreadSummaries", "TopicMessage"]
# Capability cards and the wake-ups they ask for.
__all__ += ["CardSet", "WakeEvent"]

# The typed results of agents, the hierarchy and build slots, and the acknowledgement settings health_check shows.
__all__ += ["CardState", "Loaded", "MemoryDocView", "MemoryOverview", "MemoryWritten", "OrgContextView", "guard_roots"]
__all__ += ["AckSettings", "AgentDeleted", "AgentProfile", "AgentUpdated", "InactiveRetired", "Position",
            "Registration", "SleepState", "SlotAcquired", "SlotForceReleased", "SlotList", "SlotReleased",
            "SlotRenewed", "SlotView", "Spawned", "StatusChange", "TokenReset", "Whois"]
# Files: the typed results of their tools, and where the HTTP server serves them.
__all__ += ["FILES_HTTP_PATH", "FileDescription", "FileDownload", "FileList", "FileUploaded", "FileView"]
# The mail reads' results: the feed, listings of a mailbox, one message, a thread's page.
# Channels: named streams of posts beside direct mail.
__all__ += ["ChannelCatchUp", "ChannelCreated", "ChannelList", "ChannelPage", "ChannelPostView", "ChannelSearch",
            "ChannelView", "Posted"]
__all__ += ["Arrivals", "CatchUp", "FeedMessage", "FeedPage", "Listing", "OverdueListing", "Received", "Sent",
            "SentMessage", "StoredMessage", "ThreadPage"]

class Mail:
    """Agent mail over one :class:`Store` of project archives."""

    def __init__(self, store: Store, activity: Activity | None = None, *, ack: AckSettings | None = None):
        """``ack`` is how overdue acknowledgements are found and escalated (default: off, 30 minutes)."""
        self.store = store
        self.ctx = Context(store, activity or Activity())
        self.ack = ack or AckSettings()

    @classmethod
    def serving(cls, store: Store) -> Mail:
        """The facade a server runs: acknowledgement settings from the environment (``GITMAIL_ACK_*``)."""
        return cls(store, ack=AckSettings.from_env())

    def ack_scanner(self) -> AckScanner | None:
        """The interval scan of overdue acknowledgements when the settings enable it (not started)."""
        return AckScanner(self.ctx, self.ack) if self.ack.enabled else None

    # -- projects -------------------------------------------------------------
    def ensure_project(self, human_key: str) -> projects.ProjectView:
        return projects.ensure_project(self.ctx, human_key)

    def archive_project(self, project_key: str) -> projects.ProjectView:
        return projects.archive_project(self.ctx, project_key)

    def migrate_project(self, project_key: str) -> projects.ProjectMigration:
        return projects.migrate_project(self.ctx, project_key)

    def unarchive_project(self, project_key: str) -> projects.ProjectView:
        return projects.unarchive_project(self.ctx, project_key)

    def hard_delete_project(self, project_key: str, *, confirmation: str = "") -> projects.ProjectDeleted:
        return projects.hard_delete_project(self.ctx, project_key, confirmation=confirmation)

    def list_projects(self, *, include_archived: bool = False) -> list[projects.ProjectView]:
        return projects.list_projects(self.ctx, include_archived=include_archived)

    def get_project(self, slug: str) -> projects.ProjectDetails:
        return projects.get_project(self.ctx, slug)

    def human_key(self, project: str) -> str:
        """The key a project (named by key or slug) records for itself."""
        return projects.human_key(self.ctx, project)

    def complete_relays(self, projects: list[str] | None = None) -> list[relay.RelayOutcome]:
        """Write the cross-project copies still owed by ``projects`` (default: all); see :mod:`.relay`."""
        return relay.recover(self.ctx, projects)

    # -- products -------------------------------------------------------------
    def ensure_product(self, product_key: str) -> ProductShown:
        return products.ensure_product(self.ctx, product_key)

    def products_link(self, product_key: str, project_key: str, *, name: str | None = None) -> ProductLinked:
        return products.products_link(self.ctx, product_key, project_key, name=name)

    def products_unlink(self, product_key: str, project_key: str) -> ProductUnlinked:
        return products.products_unlink(self.ctx, product_key, project_key)

    def product_projects(self, product_key: str) -> list[str]:
        """The slugs of the projects linked to a product."""
        return products.linked_slugs(self.ctx, product_key)

    def search_product(self, product_key: str, query: str, *, projects: list[str], limit: int = 20,
                       exhaustive: bool = False) -> list[ProductHit]:
        """Search the product's ``projects`` (slugs), each hit naming its project."""
        return products.search_product(self.ctx, product_key, query, slugs=projects, limit=limit,
                                       exhaustive=exhaustive)

    def fetch_inbox_product(self, product_key: str, agent_name: str, *, projects: list[str],
                            **options: Any) -> list[ProductInboxMessage]:
        """The agent's inbox across the product's ``projects``; ``options`` as for :meth:`fetch_inbox`."""
        return products.fetch_inbox_product(self.ctx, product_key, agent_name, slugs=projects, **options)

    def summarize_thread_product(self, product_key: str, thread_id: str, *, projects: list[str],
                                 include_examples: bool = False, per_thread_limit: int = 50) -> ProductThread:
        return products.summarize_thread_product(self.ctx, product_key, thread_id, slugs=projects,
                                                 include_examples=include_examples,
                                                 per_thread_limit=per_thread_limit)

    # -- agents ---------------------------------------------------------------
    def register_agent(self, project_key: str, program: str | None, model: str | None, *, name: str | None = None,
                       task_description: str | None = None, claim: agents.Claim | None = None,
                       idempotency_key: str | None = None, reason: str | None = None) -> agents.Registration:
        return agents.register_agent(self.ctx, project_key, program, model, name=name,
                                     task_description=task_description, claim=claim,
                                     idempotency_key=idempotency_key, reason=reason)

    def create_agent_identity(self, project_key: str, program: str, model: str, *, name_hint: str | None = None,
                              task_description: str = "",
                              return_registration_token: bool = True) -> agents.Registration:
        return agents.create_agent_identity(self.ctx, project_key, program, model, name_hint=name_hint,
                                            task_description=task_description,
                                            return_registration_token=return_registration_token)

    def verify_agent_token(self, project_key: str, agent_name: str, token: str) -> bool:
        return agents.verify_agent_token(self.ctx, project_key, agent_name, token)

    def credential(self, project_key: str, agent_name: str) -> Credential | None:
        """What proves the agent holding ``agent_name`` now: its registration and token hash (None: nobody)."""
        return agents.credential(self.ctx, project_key, agent_name)

    def identity_clash(self, project_key: str, agent_name: str, *, token: str | None = None,
                       registration: str | None = None) -> GitmailError | None:
        return agents.identity_clash(self.ctx, project_key, agent_name, token=token, registration=registration)

    def reset_agent_token(self, project_key: str, agent_name: str) -> agents.TokenReset:
        return agents.reset_agent_token(self.ctx, project_key, agent_name)

    def whois(self, project_key: str, agent_name: str, *, include_recent_commits: bool = True,
              commit_limit: int = 5, readers: list[str] | None = None) -> agents.Whois:
        return agents.whois(self.ctx, project_key, agent_name, include_recent_commits=include_recent_commits,
                            commit_limit=commit_limit, readers=readers)

    def list_agents(self, project_key: str, *, active_only: bool = True) -> list[agents.AgentProfile]:
        return agents.list_agents(self.ctx, project_key, active_only=active_only)

    def retire_agent(self, project_key: str, agent_name: str) -> agents.AgentProfile:
        return agents.retire_agent(self.ctx, project_key, agent_name)

    def unretire_agent(self, project_key: str, agent_name: str) -> agents.AgentProfile:
        return agents.unretire_agent(self.ctx, project_key, agent_name)

    def deregister_agent(self, project_key: str, agent_name: str) -> agents.AgentProfile:
        return agents.deregister_agent(self.ctx, project_key, agent_name)

    def hard_delete_agent(self, project_key: str, agent_name: str, *,
                          confirmation: str = "") -> agents.AgentDeleted:
        return agents.hard_delete_agent(self.ctx, project_key, agent_name, confirmation=confirmation)

    def retire_inactive_agents(self, project_key: str, agent_name: str, *,
                               inactive_seconds: int = agents.DEFAULT_INACTIVE_SECONDS,
                               include_reserved: bool = False, dry_run: bool = False) -> agents.InactiveRetired:
        return agents.retire_inactive_agents(self.ctx, project_key, agent_name, inactive_seconds=inactive_seconds,
                                             include_reserved=include_reserved, dry_run=dry_run)

    # -- window identities ----------------------------------------------------
    def window_agent(self, project_key: str, window_uuid: str) -> str | None:
        """The agent name a live window goes by, if any."""
        return windows.window_agent(self.ctx, project_key, window_uuid)

    def use_window(self, project_key: str, window_uuid: str, agent_name: str) -> windows.WindowView:
        return windows.use_window(self.ctx, project_key, window_uuid, agent_name)

    def list_window_identities(self, project_key: str) -> windows.WindowList:
        return windows.list_windows(self.ctx, project_key)

    def rename_window(self, project_key: str, window_uuid: str, new_display_name: str) -> windows.WindowView:
        return windows.rename_window(self.ctx, project_key, window_uuid, new_display_name)

    def expire_window(self, project_key: str, window_uuid: str) -> windows.WindowExpired:
        return windows.expire_window(self.ctx, project_key, window_uuid)

    # -- messages -------------------------------------------------------------
    def send_message(self, project_key: str, sender_name: str, to: list[str] | None, subject: str, body_md: str,
                     options: SendOptions = NO_OPTIONS) -> SendResult:
        """Send a message (the rules: :mod:`gitmail.mail.sending`)."""
        return sending.send_message(self.ctx, SendRequest(project_key=project_key, sender_name=sender_name, to=to,
                                                          subject=subject, body_md=body_md, options=options))

    def reply_message(self, project_key: str, message_id: str | int, sender_name: str, body_md: str,
                      options: SendOptions = NO_OPTIONS, *, to: list[str] | None = None) -> ReplyResult:
        """Reply in a thread, to the original's sender unless ``to`` names recipients."""
        return sending.reply_message(self.ctx, ReplyRequest(project_key=project_key, message_id=message_id,
                                                            sender_name=sender_name, body_md=body_md, to=to,
                                                            options=options))

    def send_as_overseer(self, project_key: str, to: list[str] | None, subject: str, body_md: str,
                         options: SendOptions = NO_OPTIONS) -> SendResult:
        """Send as the project's human overseer (the operator only; see :mod:`gitmail.mail.overseer`)."""
        return overseer.send(self.ctx, project_key, to, subject, body_md, options)

    def reply_as_overseer(self, project_key: str, message_id: str, body_md: str,
                          options: SendOptions = NO_OPTIONS, *, to: list[str] | None = None) -> ReplyResult:
        """Reply as the project's human overseer in a message's thread."""
        return overseer.reply(self.ctx, project_key, message_id, body_md, options, to=to)

    # -- reading --------------------------------------------------------------
    def fetch_inbox(self, project_key: str, agent_name: str, *, limit: int = 20, urgent_only: bool = False,
                    include_bodies: bool = False, since_ts: str | float | None = None, topic: str | None = None,
                    unread_only: bool = False, max_bytes: int = READ_BUDGET_DEFAULT) -> list[InboxMessage]:
        """The agent's inbox, newest first; bodies fit in ``max_bytes`` (see :mod:`gitmail.mail.budget`)."""
        return mailbox.fetch_inbox(self.ctx, project_key, agent_name, limit=limit, urgent_only=urgent_only,
                                   include_bodies=include_bodies, since_ts=since_ts, topic=topic,
                                   unread_only=unread_only, max_bytes=max_bytes)

    def inbox_mark(self, project_key: str, agent_name: str) -> int:
        """What moves when mail arrives in the agent's inbox (:func:`feed.inbox_mark`), for pushed notices."""
        return feed.inbox_mark(self.ctx, project_key, agent_name)

    def thread_mark(self, project_key: str, thread_id: str) -> tuple[int, str]:
        """What moves when a message joins the thread (:func:`feed.thread_mark`), for pushed notices."""
        return feed.thread_mark(self.ctx, project_key, thread_id)

    def channel_mark(self, project_key: str, channel: str) -> int:
        """What moves when a post joins the channel (:func:`channels.channel_mark`), for pushed notices."""
        return channels.channel_mark(self.ctx, project_key, channel)

    def catch_up(self, project_key: str, agent_name: str, *, limit: int = CATCH_UP_DEFAULT) -> CatchUp:
        """The newest arrivals in the agent's feed, whole, with the cursor to continue from (see :mod:`.feed`)."""
        return feed.catch_up(self.ctx, project_key, agent_name, limit=limit)

    def read_messages(self, project_key: str, agent_name: str, *, after: int = 0, limit: int = FEED_DEFAULT_LIMIT,
                      wait_seconds: float = 0) -> FeedPage:
        """The feed after a cursor, oldest first, waiting up to ``wait_seconds`` for an arrival."""
        return feed.read_messages(self.ctx, project_key, agent_name, after=after, limit=limit,
                                  wait_seconds=wait_seconds)

    def read_arrivals(self, project_key: str, agent_name: str, *, after: int = 0,
                      limit: int = FEED_DEFAULT_LIMIT) -> feed.Arrivals:
        """:meth:`read_messages` without waiting, as the index's rows and bodies, for a reader that shapes each one."""
        return feed.read_arrivals(self.ctx, project_key, agent_name, after=after, limit=limit)

    # -- channels -------------------------------------------------------------
    def create_channel(self, project_key: str, agent_name: str, channel: str, *, purpose: str | None = None,
                       idempotency_key: str | None = None, seat: str | None = None) -> ChannelCreated:
        """Make a channel as the agent; a keyed retry answers the first call's channel (see :mod:`.channels`)."""
        return channels.create(self.ctx, project_key, agent_name, channel, purpose=purpose,
                               idempotency_key=idempotency_key, seat=seat)

    def list_channels(self, project_key: str, agent_name: str) -> ChannelList:
        """Every channel of the project, with its post count."""
        return channels.list_channels(self.ctx, project_key, agent_name)

    def post_channel(self, project_key: str, agent_name: str, channel: str, body_md: str, *,
                     seat: str | None = None) -> Posted:
        """Write a post to a channel as the agent."""
        return channels.post(self.ctx, project_key, agent_name, channel, body_md, seat=seat)

    def catch_up_channel(self, project_key: str, agent_name: str, channel: str, *,
                         limit: int = CATCH_UP_DEFAULT) -> ChannelCatchUp:
        """The newest posts of a channel and the cursor to continue from."""
        return channels.catch_up(self.ctx, project_key, agent_name, channel, limit=limit)

    def read_channel(self, project_key: str, agent_name: str, channel: str, *, after: int = 0,
                     limit: int = FEED_DEFAULT_LIMIT) -> ChannelPage:
        """A channel's posts after a cursor (its sequence numbers), oldest first."""
        return channels.read(self.ctx, project_key, agent_name, channel, after=after, limit=limit)

    def search_channel(self, project_key: str, agent_name: str, channel: str, query: str, *, after: int = 0,
                       limit: int = channels.SEARCH_DEFAULT_LIMIT) -> ChannelSearch:
        """A channel's posts holding ``query`` after a cursor, a bounded number looked at per call."""
        return channels.search(self.ctx, project_key, agent_name, channel, query, after=after, limit=limit)

    def channel_overview(self, project_key: str) -> ChannelList:
        """Every channel of the project, for the overseer's view."""
        return channels.overview(self.ctx, project_key)

    def observe_channel(self, project_key: str, channel: str, *, after: int = 0,
                        limit: int = FEED_DEFAULT_LIMIT) -> ChannelPage:
        """A channel's posts after a cursor, for the overseer's view (no member reads it)."""
        return channels.observe(self.ctx, project_key, channel, after=after, limit=limit)

    def watch_feed(self, project_key: str, listener: Callable[[], None]) -> feed.FeedWatch:
        """Call ``listener`` (from any thread) each time the project's feed may have moved, until closed."""
        return feed.watch(self.ctx, project_key, listener)

    def fetch_outbox(self, project_key: str, agent_name: str, *, limit: int = 20, include_bodies: bool = False,
                     since_ts: str | float | None = None,
                     max_bytes: int = READ_BUDGET_DEFAULT) -> Listing[SentMessage]:
        return mailbox.fetch_outbox(self.ctx, project_key, agent_name, limit=limit, include_bodies=include_bodies,
                                    since_ts=since_ts, max_bytes=max_bytes)

    def fetch_mailbox(self, project_key: str, agent_name: str, *,
                      limit: int = 20) -> Listing[Received | Sent]:
        return mailbox.fetch_mailbox(self.ctx, project_key, agent_name, limit=limit)

    def get_message(self, project_key: str, message_id: str | int, *,
                    agent_name: str | None = None) -> StoredMessage:
        found = mailbox.get_message(self.ctx, project_key, message_id, agent_name=agent_name)
        if not found.message.attachments:
            return found
        # each stored file is checked against the hash the message records
        checked = attachments.mark_verified(self.ctx.archive(project_key).snapshot(), found.message.attachments)
        return dataclasses.replace(found, message=dataclasses.replace(found.message,
                                                                      attachments=[dict(e) for e in checked]))

    def get_thread(self, project_key: str, thread_id: str, *, include_bodies: bool = True, after: str | None = None,
                   max_bytes: int = READ_BUDGET_DEFAULT) -> ThreadPage:
        """A thread, oldest first, a page of ``max_bytes`` at a time (``after``: the previous page's next_after)."""
        return mailbox.get_thread(self.ctx, project_key, thread_id, include_bodies=include_bodies, after=after,
                                  max_bytes=max_bytes)

    def search_messages(self, project_key: str, query: str, *, limit: int = 20, agent_name: str | None = None,
                        exhaustive: bool = False) -> list[SearchHit]:
        """Full-text search, best first; with ``agent_name``, only what that agent sent or received.

        The newest matches are ranked (each hit's ``bounded`` says whether
        older ones were left out); ``exhaustive`` ranks every match.
        """
        return mailbox.search(self.ctx, project_key, query, limit=limit, agent_name=agent_name, exhaustive=exhaustive)

    def fetch_topic(self, project_key: str, topic_name: str, *, limit: int = 50, include_bodies: bool = True,
                    since_ts: str | float | None = None, agent_name: str | None = None,
                    unread_only: bool = False, max_bytes: int = READ_BUDGET_DEFAULT) -> list[TopicMessage]:
        return mailbox.fetch_topic(self.ctx, project_key, topic_name, limit=limit, include_bodies=include_bodies,
                                   since_ts=since_ts, agent_name=agent_name, unread_only=unread_only,
                                   max_bytes=max_bytes)

    def view_urgent_unread(self, project_key: str, agent_name: str, *,
                           limit: int = 20) -> Listing[InboxMessage]:
        return mailbox.view_urgent_unread(self.ctx, project_key, agent_name, limit=limit)

    def view_ack_required(self, project_key: str, agent_name: str, *,
                          limit: int = 20) -> Listing[InboxMessage]:
        return mailbox.view_ack_required(self.ctx, project_key, agent_name, limit=limit)

    def scan_overdue_acks(self, project_key: str) -> OverdueScan:
        """Find the project's overdue acknowledgements now and escalate new ones as the settings say."""
        return overdue.scan(self.ctx, project_key, self.ack)

    def view_ack_overdue(self, project_key: str, agent_name: str, *, ttl_minutes: float | None = None,
                         limit: int = 20) -> OverdueListing:
        """``ttl_minutes`` defaults to the acknowledgement TTL of the settings."""
        ttl = self.ack.ttl_seconds / 60 if ttl_minutes is None else ttl_minutes
        return mailbox.view_ack_overdue(self.ctx, project_key, agent_name, ttl_minutes=ttl, limit=limit)

    # -- the overseer's views ------------------------------------------------
    def project_stats(self, project_key: str) -> overview.ProjectStats:
        return overview.stats(self.ctx, project_key)

    def recent_threads(self, project_key: str, *, limit: int = 50, offset: int = 0) -> list[overview.ThreadRow]:
        return overview.recent_threads(self.ctx, project_key, limit=limit, offset=offset)

    def agent_counts(self, project_key: str, agent_name: str) -> dict[str, int]:
        return overview.agent_counts(self.ctx, project_key, agent_name)

    def record_paths(self, project_key: str, kind: str, key: str) -> list[str]:
        """The files whose history is the history of one message, thread, agent or reservation."""
        return overview.record_paths(self.ctx, project_key, kind, key)

    def history(self, project_key: str, paths: list[str], *, limit: int = 100,
                offset: int = 0) -> list[overview.HistoryCommit]:
        """The commits that changed ``paths`` (from the derived history), newest first, with diffs."""
        return overview.history(self.ctx, project_key, paths, limit=limit, offset=offset)

    # -- receipts -------------------------------------------------------------
    def mark_message_read(self, project_key: str, agent_name: str, message_id: str | int, *,
                          seat: str | None = None) -> ReadReceipt:
        return receipts.mark_message_read(self.ctx, project_key, agent_name, message_id, seat=seat)

    def acknowledge_message(self, project_key: str, agent_name: str, message_id: str | int, *,
                            seat: str | None = None) -> AckReceipt:
        return receipts.acknowledge_message(self.ctx, project_key, agent_name, message_id, seat=seat)

    # -- contacts -------------------------------------------------------------
    def request_contact(self, project_key: str, from_agent: str, to_agent: str, *, reason: str = "",
                        ttl_seconds: int = contacts.PENDING_TTL_SECONDS, seat: str | None = None,
                        to_project: str | None = None) -> ContactRequest:
        return contacts.request_contact(self.ctx, project_key, from_agent, to_agent, reason=reason,
                                        ttl_seconds=ttl_seconds, seat=seat, to_project=to_project)

    def respond_contact(self, project_key: str, to_agent: str, from_agent: str, accept: bool, *,
                        ttl_seconds: int = contacts.APPROVED_TTL_SECONDS, seat: str | None = None) -> ContactResponse:
        return contacts.respond_contact(self.ctx, project_key, to_agent, from_agent, accept, ttl_seconds=ttl_seconds,
                                        seat=seat)

    def list_contacts(self, project_key: str, agent_name: str) -> list[ContactListing]:
        return contacts.list_contacts(self.ctx, project_key, agent_name)

    def set_contact_policy(self, project_key: str, agent_name: str, policy: str, *,
                           seat: str | None = None) -> PolicySet:
        return contacts.set_contact_policy(self.ctx, project_key, agent_name, policy, seat=seat)

    def list_held(self, project_key: str, agent_name: str) -> list[HeldView]:
        return contacts.list_held(self.ctx, project_key, agent_name)

    # -- summaries ------------------------------------------------------------
    def summarize_thread(self, project_key: str, thread_id: str, *, include_examples: bool = False,
                         per_thread_limit: int = 50) -> ThreadSummaries:
        return summaries.summarize_thread(self.ctx, project_key, thread_id, include_examples=include_examples,
                                          per_thread_limit=per_thread_limit)

    def summarize_recent(self, project_key: str, *, since_hours: float = 1.0,
                         max_messages: int = summaries.MAX_RECENT_MESSAGES) -> SummaryView:
        return summaries.summarize_recent(self.ctx, project_key, since_hours=since_hours, max_messages=max_messages)

    def fetch_summary(self, project_key: str, *, since_hours: float = 24.0,
                      limit: int = 5) -> list[SummaryView]:
        return summaries.fetch_summary(self.ctx, project_key, since_hours=since_hours, limit=limit)

    # -- retention ------------------------------------------------------------
    def purge_old_messages(self, project_key: str, *, max_age_days: int = retention.DEFAULT_MAX_AGE_DAYS,
                           dry_run: bool = False) -> PurgeReport:
        return retention.purge_old_messages(self.ctx, project_key, max_age_days=max_age_days, dry_run=dry_run)

    # -- coordination: file reservations and the commit guard ----------------
    def file_reservation_paths(self, project_key: str, agent_name: str, paths: list[str], *,
                               ttl_seconds: int = DEFAULT_TTL, exclusive: bool = True, reason: str = "",
                               seat: str | None = None) -> Reserved:
        return reservations.reserve(self.ctx, project_key, agent_name, paths, ttl_seconds=ttl_seconds,
                                    exclusive=exclusive, reason=reason, seat=seat)

    def release_file_reservations(self, project_key: str, agent_name: str, *, paths: list[str] | None = None,
                                  file_reservation_ids: list[str] | None = None,
                                  seat: str | None = None) -> Released:
        return reservations.release(self.ctx, project_key, agent_name, file_reservation_ids=file_reservation_ids,
                                    paths=paths, seat=seat)

    def renew_file_reservations(self, project_key: str, agent_name: str, *, extend_seconds: int = 1800,
                                paths: list[str] | None = None, file_reservation_ids: list[str] | None = None,
                                seat: str | None = None) -> Renewal:
        return reservations.renew(self.ctx, project_key, agent_name, extend_seconds=extend_seconds,
                                  file_reservation_ids=file_reservation_ids, paths=paths, seat=seat)

    def force_release_file_reservation(self, project_key: str, agent_name: str, file_reservation_id: str, *,
                                       note: str = "", notify_previous: bool = True,
                                       inactivity_seconds: int = DEFAULT_INACTIVITY,
                                       seat: str | None = None) -> ForceRelease:
        return reservations.force_release(self.ctx, project_key, agent_name, file_reservation_id, note=note,
                                          notify_previous=notify_previous, inactivity_seconds=inactivity_seconds,
                                          seat=seat)

    def list_file_reservations(self, project_key: str, agent_name: str | None = None, *,
                               active_only: bool = True) -> ReservationList:
        return reservations.list_reservations(self.ctx, project_key, agent=agent_name, active_only=active_only)

    def install_precommit_guard(self, project_key: str, code_repo_path: str) -> GuardInstalled:
        return guard.install(self.ctx, project_key, code_repo_path)

    def uninstall_precommit_guard(self, code_repo_path: str) -> GuardRemoved:
        return guard.uninstall(code_repo_path)

    def guard_project(self, code_repo_path: object) -> str | None:
        """The project a guarded repository's hooks serve, if it records one."""
        return guard.recorded_project(code_repo_path)

    def run_guard_hook(self, hook: str, repo: str, stdin: str = "") -> tuple[int, str]:
        """What the installed guard decides for one commit or push: (exit code, report)."""
        return guard.run_hook(self.ctx, hook, repo, stdin)

    # -- coordination: build slots ---------------------------------------------
    def acquire_build_slot(self, project_key: str, agent_name: str, slot: str, *,
                           ttl_seconds: int = DEFAULT_SLOT_TTL, exclusive: bool = True,
                           max_holders: int | None = None, reason: str = "",
                           seat: str | None = None) -> buildslots.SlotAcquired:
        return buildslots.acquire(self.ctx, project_key, agent_name, slot, ttl_seconds=ttl_seconds,
                                  exclusive=exclusive, max_holders=max_holders, reason=reason, seat=seat)

    def renew_build_slot(self, project_key: str, agent_name: str, slot: str, epoch: int, *,
                         extend_seconds: int = DEFAULT_SLOT_EXTEND, seat: str | None = None) -> buildslots.SlotRenewed:
        return buildslots.renew(self.ctx, project_key, agent_name, slot, epoch, extend_seconds=extend_seconds,
                                seat=seat)

    def release_build_slot(self, project_key: str, agent_name: str, slot: str, epoch: int, *,
                           seat: str | None = None) -> buildslots.SlotReleased:
        return buildslots.release(self.ctx, project_key, agent_name, slot, epoch, seat=seat)

    def force_release_build_slot(self, project_key: str, agent_name: str, slot: str, holder: str, *,
                                 note: str = "", notify_previous: bool = True,
                                 inactivity_seconds: int = DEFAULT_INACTIVITY,
                                 seat: str | None = None) -> buildslots.SlotForceReleased:
        return buildslots.force_release(self.ctx, project_key, agent_name, slot, holder, note=note,
                                        notify_previous=notify_previous, inactivity_seconds=inactivity_seconds,
                                        seat=seat)

    def list_build_slots(self, project_key: str, *, active_only: bool = False) -> buildslots.SlotList:
        return buildslots.list_slots(self.ctx, project_key, active_only=active_only)

    # -- coordination: seats, journals, sleep/wake, capability cards ----------
    def take_seat(self, project_key: str, agent_name: str, *, holder: str = "session",
                  lease_s: int = DEFAULT_LEASE_S, take_over: bool = False) -> SeatTaken:
        return seats.take_seat(self.ctx, project_key, agent_name, holder=holder, lease_s=lease_s,
                               take_over=take_over)

    def take_over(self, project_key: str, agent_name: str, *, holder: str = "session",
                  lease_s: int = DEFAULT_LEASE_S) -> SeatTaken:
        return self.take_seat(project_key, agent_name, holder=holder, lease_s=lease_s, take_over=True)

    def renew_seat(self, project_key: str, agent_name: str, seat: str, *,
                   lease_s: int = DEFAULT_LEASE_S) -> SeatRenewal:
        return seats.renew_seat(self.ctx, project_key, agent_name, seat, lease_s=lease_s)

    def release_seat(self, project_key: str, agent_name: str, seat: str) -> SeatRelease:
        return seats.release_seat(self.ctx, project_key, agent_name, seat)

    def seat_status(self, project_key: str, agent_name: str) -> SeatStatus:
        return seats.seat_status(self.ctx, project_key, agent_name)

    def journal(self, project_key: str, agent_name: str, entry: str, *,
                seat: str | None = None) -> JournalView:
        return journal.append(self.ctx, project_key, agent_name, entry, seat=seat)

    def read_journal(self, project_key: str, agent_name: str, *, limit: int = 20,
                     observe: bool = False) -> JournalPage:
        """The end of an agent's journal; ``observe`` reads it as an onlooker (not the agent's activity)."""
        return journal.read(self.ctx, project_key, agent_name, limit=limit, observe=observe)

    def sleep_agent(self, project_key: str, agent_name: str | None, *, target: str | None = None,
                    until: str = "reply", seat: str | None = None, idempotency_key: str | None = None,
                    reason: str | None = None) -> identities.SleepState:
        """Put ``target`` (default: ``agent_name`` itself) to sleep; ``agent_name`` None is the operator."""
        chosen = target or agent_name
        if chosen is None:
            raise invalid("name the agent to put to sleep (target)", field="target")
        return identities.set_asleep(self.ctx, project_key, chosen, True, actor=agent_name, until=until, seat=seat,
                                     idempotency_key=idempotency_key, reason=reason)

    def wake_agent(self, project_key: str, agent_name: str | None, target: str | None = None, *,
                   seat: str | None = None, idempotency_key: str | None = None,
                   reason: str | None = None) -> identities.SleepState:
        """Wake ``target`` (default: ``agent_name`` itself); ``agent_name`` None is the operator."""
        chosen = target or agent_name
        if chosen is None:
            raise invalid("name the agent to wake (target)", field="target")
        return identities.set_asleep(self.ctx, project_key, chosen, False, actor=agent_name, seat=seat,
                                     idempotency_key=idempotency_key, reason=reason)

    # -- the hierarchy: spawn, update, position ---------------------------------
    def spawn_agent(self, project_key: str, agent_name: str, scope: list[str],
                    **options: Any) -> identities.Spawned:
        """Create an agent below ``agent_name`` (see :func:`gitmail.mail.identities.spawn` for the options)."""
        return identities.spawn(self.ctx, project_key, agent_name, scope, **options)

    def update_agent(self, project_key: str, agent_name: str, **options: Any) -> identities.AgentUpdated:
        """Update an agent's card, scopes or expiry (see :func:`gitmail.mail.identities.update`)."""
        return identities.update(self.ctx, project_key, agent_name, **options)

    def set_card(self, project_key: str, agent_name: str, **options: Any) -> CardSet:
        """Publish the next version of the agent's own card (see :func:`gitmail.mail.identities.set_card`)."""
        return identities.set_card(self.ctx, project_key, agent_name, **options)

    def check_wake_channel(self, value: object) -> str:
        """``value`` as a wake channel: brief, sse or webhook (INVALID_ARGUMENT otherwise)."""
        return identities.check_wake_channel(value)

    def wake_channels(self, project_key: str) -> dict[str, str]:
        """Every active agent's wake channel other than ``brief``, by its name, as its card says at the tip."""
        snap = self.ctx.archive(project_key).snapshot()
        return {p.name: p.wake_channel for p in profiles_of(snap) if p.status == "active" and p.wake_channel != "brief"}

    def card_state(self, project_key: str, name: str) -> CardState:
        """An agent's card version and wake channel as its profile says (never a webhook's URL or secret)."""
        return agents.card_state(self.ctx, project_key, name)

    def wake_events(self, project_key: str, since: str | None, until: str) -> list[WakeEvent]:
        """The wake-ups the records between two commits make (see :mod:`.wakeups`)."""
        return wakeups.wake_events(self.ctx, project_key, since, until)

    def tip(self, project_key: str) -> str | None:
        """The commit the project's archive stands at (None: nothing written yet)."""
        return self.ctx.archive(project_key).tip()

    def org_context(self, project_key: str, agent_name: str) -> OrgContextView:
        """The project's defaults for new agents (:mod:`.orgcontext`), as any agent of the project reads them."""
        return orgcontext.read(self.ctx, project_key, agent_name)

    def set_org_context(self, project_key: str, agent_name: str, *, load_memory_and_skills: list[str] | None = None,
                        folder_hints: bool | None = None, seat: str | None = None,
                        reason: str | None = None) -> OrgContextView:
        """Set the folders new agents load and/or folder hints, as an agent holding manager@*."""
        return orgcontext.set_defaults(self.ctx, project_key, agent_name, load_memory_and_skills=load_memory_and_skills,
                                       folder_hints=folder_hints, seat=seat, reason=reason)

    def memory_overview(self, project_key: str) -> MemoryOverview:
        """The project's defaults and its archive's memory folders with their files, for the operator's view."""
        return orgcontext.overview(self.ctx, project_key)

    def read_memory(self, project_key: str, *, folder: str, file: str) -> MemoryDocView:
        """One file of an archive memory folder (not removed), for the operator."""
        return orgcontext.read_memory(self.ctx, project_key, folder=folder, file=file)

    def write_memory(self, project_key: str, agent_name: str, *, folder: str, file: str, text: str | None = None,
                     remove: bool = False, seat: str | None = None, reason: str | None = None) -> MemoryWritten:
        """Write (or, with ``remove``, remove) a memory file or skill of an archive memory folder, as an agent holding
        manager@*."""
        return orgcontext.write_memory(self.ctx, project_key, agent_name, folder=folder, file=file, text=text,
                                       remove=remove, seat=seat, reason=reason)

    def agent_position(self, project_key: str, agent_name: str) -> identities.Position:
        """An agent, the agents above it and its children."""
        return identities.position(self.ctx, project_key, agent_name)

    def acting_identity(self, project_key: str, agent_name: str, agent_id: str) -> str:
        """The registered name of the acting identity ``agent_id`` below ``agent_name``, made on first use."""
        return identities.acting_identity(self.ctx, project_key, agent_name, agent_id)

    def is_below(self, project_key: str, ancestor: str, agent: str) -> str:
        """The registered name of ``agent`` when ``ancestor`` is above it; NOT_ABOVE otherwise."""
        return identities.require_below(self.ctx, project_key, ancestor, agent)

    def publish_capabilities(self, project_key: str, agent_name: str, capabilities_list: list[str], *,
                             seat: str | None = None) -> capabilities.CapabilitiesSet:
        return capabilities.publish(self.ctx, project_key, agent_name, capabilities_list, seat=seat)

    def list_capabilities(self, project_key: str, capability: str | None = None) -> capabilities.CapabilityCards:
        return capabilities.cards(self.ctx, project_key, capability)

    def set_attachments_policy(self, project_key: str, agent_name: str, policy: str, *,
                               seat: str | None = None) -> attachments.AttachmentsPolicySet:
        return attachments.set_agent_policy(self.ctx, project_key, agent_name, policy, seat=seat)

    def get_attachment(self, project_key: str, path: str) -> AttachmentContent:
        return attachments.fetch(self.ctx.archive(project_key).snapshot(), path)

    # -- files -------------------------------------------------------------------
    def upload_file(self, project_key: str, agent_name: str, data: bytes, *, name: object,
                    media_type: object = None, seat: str | None = None) -> FileUploaded:
        return files.upload(self.ctx, project_key, agent_name, data, name=name, media_type=media_type, seat=seat)

    def upload_file_base64(self, project_key: str, agent_name: str, content_base64: object, *, name: object,
                           media_type: object = None, seat: str | None = None,
                           upload_url: str | None = None) -> FileUploaded:
        """An upload inside a call: FILE_TOO_LARGE past the inline limit names ``upload_url`` (the HTTP endpoint)."""
        data = files.decode_inline(content_base64, upload_url=upload_url)
        return self.upload_file(project_key, agent_name, data, name=name, media_type=media_type, seat=seat)

    def file_upload_limit(self) -> int:
        """The largest file the HTTP endpoint stores."""
        return files.max_upload_bytes()

    def list_files(self, project_key: str, *, limit: int = files.LIST_DEFAULT, cursor: str | None = None) -> FileList:
        return files.list_files(self.ctx, project_key, limit=limit, cursor=cursor)

    def describe_file(self, project_key: str, file_id: object, *, download_url: str | None = None) -> FileDescription:
        return files.describe_file(self.ctx, project_key, file_id, download_url=download_url)

    def download_file(self, project_key: str, file_id: object, *, download_url: str | None = None) -> FileDownload:
        return files.download(self.ctx, project_key, file_id, download_url=download_url)

    def read_file(self, project_key: str, file_id: object) -> tuple[str, str, bytes]:
        """(name, media type, bytes) of a file, the bytes checked against its hash: what the HTTP endpoint serves."""
        record, data = files.read_file(self.ctx, project_key, file_id)
        return record.name, record.media_type, data

    def all_mail(self, query: MailQuery, *, after: str | None = None, page: int = 1,
                 limit: int = 25) -> allmail.MailPage:
        """The mail of every project not archived: newest first with filters, or a search (see :mod:`.allmail`)."""
        found = {p["slug"]: p["human_key"] for p in self.list_projects()}
        return allmail.all_mail(self.ctx, found, query, after=after, page=page, limit=limit)

    # -- what needs the overseer (see :mod:`gitmail.mail.attention`) -----------
    def needs_attention(self, project_key: str, *, limit: int = attention.DEFAULT_LIMIT) -> attention.Attention:
        """Everything in a project that waits for someone: acknowledgements, urgent mail, contacts, leases."""
        return attention.attention(self.ctx, project_key, self.ack, limit=limit)

    def attention_list(self, project_key: str, which: str, *,
                       limit: int = attention.DEFAULT_LIMIT) -> attention.Bounded:
        """One list of :meth:`needs_attention` (``owed``, ``urgent``, ``inbox``, …), up to ``limit`` items."""
        return attention.one_list(self.ctx, project_key, self.ack, which, limit=limit)

    def owed_acknowledgements(self, project_key: str, *, limit: int = attention.DEFAULT_LIMIT) -> attention.Bounded:
        return attention.owed_acknowledgements(self.ctx, project_key, self.ack, limit=limit)

    def urgent_unread(self, project_key: str, *, limit: int = attention.DEFAULT_LIMIT) -> attention.Bounded:
        return attention.urgent_unread(self.ctx, project_key, limit=limit)

    def pending_contacts(self, project_key: str, *, limit: int = attention.DEFAULT_LIMIT) -> attention.Bounded:
        return attention.pending_contacts(self.ctx, project_key, limit=limit)

    def expiring_reservations(self, project_key: str, *, within_seconds: int = attention.EXPIRING_WITHIN_SECONDS,
                              limit: int = attention.DEFAULT_LIMIT) -> attention.Bounded:
        return attention.expiring_reservations(self.ctx, project_key, within_seconds=within_seconds, limit=limit)

    def holders_of(self, project_key: str, path: str) -> list[attention.Holding]:
        """The reservations in force covering a file, by the commit guard's glob rules."""
        return attention.holders_of(self.ctx, project_key, path)

    def message_receipts(self, project_key: str, message_ids: list[str], *,
                         viewer: str | None = None) -> dict[str, list[attention.Delivery]]:
        """Per message: its recipients (to, cc, and bcc for ``viewer``'s own), when each read and acknowledged it."""
        return attention.message_receipts(self.ctx, project_key, message_ids, viewer=viewer)

    def force_release_as_overseer(self, project_key: str, file_reservation_id: str, *,
                                  note: str = "") -> ForceRelease:
        """Release an abandoned reservation as the overseer (the force-release rules apply; the holder is told)."""
        return overseer.force_release(self.ctx, project_key, file_reservation_id, note=note)

    def acting_as_operator(self, door: str) -> AbstractContextManager[tuple[str, str]]:
        """Within the block, every commit names the person at this machine, acting through ``door``."""
        return acting_as_operator(door, fallback_name=OVERSEER, node=self.store.node)
