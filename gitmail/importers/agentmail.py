"""``gitmail import agent-mail``: an mcp_agent_mail server's store, brought into gitmail archives.

For each project of the source database (or the one asked for), in one
pass: the project, its agents (with their token hashes), every message with
its recipients' read and acknowledgement times and its attachments' bytes
(from the archive folder), contact links, reservations (released ones as
history, active ones still active), product links, window identities and
stored summaries. Records are mapped by :mod:`.agentmail_map` and written in
time order by :mod:`.timeline`; messages stream from the database, and the
rest (small) waits in a queue ordered by time until the messages pass it.

An import can be run again: it adds what is new and leaves what it wrote
before as it is (see :mod:`.timeline`), so a run that was killed is simply
run again. ``dry_run`` reads everything and counts what would be written,
writing nothing (and creating no project).

Everything is written at the newest archive layout (messages name their
attachments by layout-2 paths, and a message may go into several archives):
a project made by an earlier version that the import writes into is first
moved to it, as ``gitmail migrate`` would.
"""

from __future__ import annotations

import datetime as dt
import heapq
import os
import time
from collections.abc import Callable
from dataclasses import dataclass

from gitmail.index import indexer_for
from gitmail.model.errors import GitmailError, not_found
from gitmail.model.names import normalize_human_key
from gitmail.model.records import AGENTS, MESSAGES, Agent, profile_path
from gitmail.storage.engine import Archive
from gitmail.storage.layout import migrate
from gitmail.storage.operator import operator_identity
from gitmail.storage.store import Store, slug_for

from .agentmail_db import SourceAgent, SourceDatabase, SourceProject
from .agentmail_files import SourceArchive
from .agentmail_map import (
    ID_KEY,
    SOURCE,
    Party,
    Plan,
    agent_entries,
    attachments_of,
    contact_entry,
    message_entries,
    message_gid,
    ms,
    product_entry,
    project_entry,
    receipt_entries,
    reservation_entries,
    summary_entry,
    usable_name,
    window_entry,
)
from .report import ImportReport, ProjectReport
from .timeline import Entry, TimelineWriter

Progress = Callable[[str, int, int], None]
"""Called with (project slug, messages done, messages in all) as an import goes."""


@dataclass
class _Queue:
    """Entries waiting for their time, oldest first (ties in the order they came)."""

    heap: list[tuple[int, int, Entry]]
    count: int = 0

    def push(self, entry: Entry | None) -> None:
        if entry is not None:
            self.count += 1
            heapq.heappush(self.heap, (entry.when_ms, self.count, entry))

    def until(self, when_ms: int | None) -> list[Entry]:
        out = []
        while self.heap and (when_ms is None or self.heap[0][0] <= when_ms):
            out.append(heapq.heappop(self.heap)[2])
        return out


def import_agent_mail(store: Store, database: str, *, archive: str | None = None, project: str | None = None,
                      dry_run: bool = False, catch_up: bool = True, busy_seconds: float = 5.0,
                      progress: Progress | None = None) -> ImportReport:
    """Import ``database`` (and the archive folder ``archive``) into ``store``; see the module docs.

    ``project`` takes one project (by human key or by the source's slug).
    ``catch_up`` brings each project's index up to the new tip before
    returning, so the first read after an import does not wait for it.
    """
    started, cpu = time.monotonic(), time.process_time()
    report = ImportReport(source=SOURCE, database=os.path.abspath(database),
                          archive=os.path.abspath(archive) if archive else None, dry_run=dry_run)
    files = SourceArchive(archive) if archive else None
    with SourceDatabase(database, report, busy_seconds=busy_seconds) as db:
        projects = db.projects()
        chosen = _chosen(projects, project, database)
        agents = db.agents()
        plan = _plan(store, report, projects, chosen, agents, files)
        if not dry_run:
            for key in plan.keys.values():
                if store.exists(key):
                    migrate(store.archive(key))
        first = db.first_activity()
        for source in chosen:
            if source.id in plan.keys:
                _import_project(store, db, plan, source, [a for a in agents if a.project_id == source.id], first,
                                dry_run=dry_run, catch_up=catch_up, progress=progress)
    report.seconds, report.cpu_seconds = time.monotonic() - started, time.process_time() - cpu
    return report


def _chosen(projects: list[SourceProject], wanted: str | None, database: str) -> list[SourceProject]:
    if wanted is None:
        return projects
    for source in projects:
        if wanted in (source.slug, source.human_key):
            return [source]
        try:
            if normalize_human_key(source.human_key) == normalize_human_key(wanted):
                return [source]
        except GitmailError:
            continue
    known = ", ".join(source.human_key for source in projects) or "none"
    raise not_found(f"no project {wanted!r} in {database}; its projects are: {known}", project=wanted)


def _plan(store: Store, report: ImportReport, projects: list[SourceProject], chosen: list[SourceProject],
          agents: list[SourceAgent], files: SourceArchive | None) -> Plan:
    """Which projects can be imported, and how every agent of the source is named in gitmail."""
    keys, slugs = {}, {}
    for source in projects:
        try:
            keys[source.id] = normalize_human_key(source.human_key)
        except GitmailError:
            if source in chosen:
                report.problem("project_key_invalid", f"project {source.id}: {source.human_key!r}")
            continue
        slugs[source.id] = slug_for(keys[source.id])
    parties: dict[int, Party] = {}
    excluded: set[int] = set()
    taken: dict[tuple[int, str], str] = {}
    for agent in agents:
        if agent.project_id not in keys:
            excluded.add(agent.id)
            continue
        if not usable_name(agent.name):
            excluded.add(agent.id)
            if any(agent.project_id == source.id for source in chosen):
                report.problem("agent_name_not_allowed", f"agent {agent.id}: {agent.name!r}")
            continue
        name = taken.setdefault((agent.project_id, agent.name.lower()), agent.name)
        if name != agent.name:
            report.problem("agent_name_taken", f"agent {agent.id}: {agent.name} (as {name}, an agent of its project)")
        parties[agent.id] = Party(agent.id, agent.project_id, name)
    delivered = {source.id for source in chosen if source.id in keys}
    delivered |= {pid for pid, key in keys.items() if store.exists(key)}
    return Plan(report=report, operator=operator_identity("gitmail", store.node), keys=keys, slugs=slugs,
                parties=parties, excluded=excluded, delivered=delivered, files=files)


def _import_project(store: Store, db: SourceDatabase, plan: Plan, source: SourceProject, agents: list[SourceAgent],
                    first: dict[int, dt.datetime], *, dry_run: bool, catch_up: bool,
                    progress: Progress | None) -> None:
    key, slug = plan.keys[source.id], plan.slugs[source.id]
    result = ProjectReport(human_key=key, slug=slug)
    plan.report.projects.append(result)
    archive = store.archive(key, create=True) if not dry_run else store.archive(key) if store.exists(key) else None
    if archive is not None:
        _adopt_names(plan, archive, agents)
    local = [agent.id for agent in agents if agent.id in plan.parties]
    total = db.message_count(source.id, local)
    done = 0

    def advance(messages: int) -> None:
        nonlocal done
        done += messages
        if progress is not None:
            progress(slug, done, total)

    writer = TimelineWriter(archive, source=SOURCE, counts=result.counts, dry_run=dry_run, progress=advance)
    queue = _Queue([])
    for entry in _setup(db, plan, source, agents, first):
        queue.push(entry)
    _messages(db, plan, source, local, archive, queue, writer, result)
    for entry in queue.until(None):
        writer.add(entry)
    writer.finish()
    result.commits = len(writer.commits)
    if catch_up and archive is not None and not dry_run:
        indexer_for(store).project(slug).catch_up()


def _messages(db: SourceDatabase, plan: Plan, source: SourceProject, local: list[int], archive: Archive | None,
              queue: _Queue, writer: TimelineWriter, result: ProjectReport) -> None:
    """Every message of the project's archive, oldest first, each with its receipts queued for their time.

    A message already in the archive (an import run again, or resumed) is
    not built again: messages never change once written, so only its
    receipts, which may have, go on to be merged.
    """
    known = {mid for mid, _ in archive.snapshot().day_files(MESSAGES)} if archive is not None else set()
    folder, on_disk = _archive_folder(plan, source, plan.slugs[source.id])
    for message in db.messages(source.id, local):
        if on_disk is not None and message.project_id == source.id and message.id not in on_disk:
            plan.report.problem("archive_file_missing", f"message {message.id}: {message.subject[:60]!r}")
        message_id = message_gid(plan, message)
        if message_id in known:
            result.counts["messages"].present += 1
            now, later = [], receipt_entries(plan, source.id, message, message_id)
        else:
            body, attachments, stored = attachments_of(plan, message, folder, source.slug)
            entries = message_entries(plan, source.id, message, stored, body, attachments)
            now, later = entries[:1], entries[1:]
            if not entries:
                result.counts["messages"].skipped += 1
        for entry in queue.until(ms(message.created)) + now:
            writer.add(entry)
        for entry in later:
            queue.push(entry)


def _setup(db: SourceDatabase, plan: Plan, source: SourceProject, agents: list[SourceAgent],
           first: dict[int, dt.datetime]) -> list[Entry | None]:
    """Every entry of the project but its messages and receipts (few, and read at once)."""
    key = plan.keys[source.id]
    known = [moment for agent in agents for moment in (agent.inception, first.get(agent.id)) if moment is not None]
    created = min([moment for moment in (source.created, *known) if moment is not None] or [dt.datetime.now(dt.UTC)])
    out: list[Entry | None] = [project_entry(plan, source, created)]
    for agent in agents:
        party = plan.parties.get(agent.id)
        if party is not None:
            out += agent_entries(plan, agent, party, key, first.get(agent.id) or agent.inception or created)
    for item in db.reservations(source.id):
        out += reservation_entries(plan, item, key)
    out += [contact_entry(plan, link, source.id) for link in db.links()
            if (target := plan.parties.get(link.b_agent_id)) is not None and target.project_id == source.id]
    products = {product.id: product for product in db.products()}
    for link in db.product_links(source.id):
        product = products.get(link.product_id)
        if product is None:
            plan.report.problem("dangling_reference", f"product_project_link: product {link.product_id}")
            continue
        out.append(product_entry(plan, product, link, link.created or product.created or created))
    out += [window_entry(plan, window, key, created) for window in db.windows(source.id)]
    out += [summary_entry(plan, summary, key) for summary in db.summaries(source.id)]
    return out


def _archive_folder(plan: Plan, source: SourceProject, slug: str) -> tuple[str | None, set[int] | None]:
    """The project's folder in the source archive and the messages with a file there (None without one)."""
    if plan.files is None:
        return None, None
    folder = plan.files.project_folder(source.slug or slug)
    if folder is None:
        plan.report.problem("archive_not_found", f"project {source.human_key} (projects/{source.slug})")
        return None, None
    return folder, plan.files.message_ids(folder)


def _adopt_names(plan: Plan, archive: Archive, agents: list[SourceAgent]) -> None:
    """Agents whose name the gitmail project already spells otherwise (case) or gives another agent."""
    snap = archive.snapshot()
    spelled = {name.lower(): name for name in snap.listdir(AGENTS) if snap.exists(profile_path(name))}
    for agent in agents:
        party = plan.parties.get(agent.id)
        existing = spelled.get(party.name.lower()) if party is not None else None
        if party is None or existing is None:
            continue
        profile = snap.load(profile_path(existing), Agent)
        if existing != party.name or profile is None or profile.extra.get(ID_KEY) != agent.id:
            plan.report.problem("agent_name_taken", f"agent {agent.id}: {agent.name} (gitmail's {existing} kept)")
            plan.parties[agent.id] = Party(party.id, party.project_id, existing)
