"""Thread and project summaries built from the messages themselves, without a model.

A summary lists the participants, the key points (headings, list items and
sentences that state a decision or a risk) and the action items (open task
boxes, TODO/ACTION lines, requests addressed to someone). Project-wide
summaries over a time window are stored as records under ``summaries/`` so
``fetch_summary`` can return them later, and a repeated request for nearly
the same window returns the stored one.

Every read here costs what its answer holds: a thread's messages and a time
window's come from the project's index, and stored summaries are looked for
only in the day folders their window can fall in.
"""

from __future__ import annotations

import datetime as dt
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import field
from typing import Any

from gitmail.coord.context import Context
from gitmail.coord.lookup import agent_names, project_record
from gitmail.index import indexer_for
from gitmail.model.clock import format_ts, parse_ts
from gitmail.model.errors import invalid, not_found
from gitmail.model.limits import READ_BUDGET_DEFAULT
from gitmail.model.records import SUMMARIES, Message, Summary
from gitmail.model.results import OMIT_NONE, Result, result
from gitmail.storage.engine import Change
from gitmail.storage.snapshot import Snapshot

from .budget import fill, kept_body
from .delivery import MessageView
from .mailbox import ThreadMessage, message_of, thread_messages

MAX_ITEMS = 10
MAX_LINE = 200
MAX_RECENT_MESSAGES = 500
CACHE_TOLERANCE = dt.timedelta(minutes=5)

_TASK = re.compile(r"^\s*(?:[-*+]\s*)?\[ \]\s+(.*)$")
_ACTION = re.compile(r"^\s*(?:[-*+]\s*)?(?:TODO|FIXME|ACTION|Action item|Next step)s?\b[:\s-]*(.*)$", re.IGNORECASE)
_ACTION_INLINE = re.compile(r"[\s;,(](?:TODO|FIXME|ACTION)\s*:\s*(.*)$")
_REQUEST = re.compile(r"\b(?:please|can you|could you|need(?:s)? to|must|should)\b", re.IGNORECASE)
_HEADING = re.compile(r"^\s*#{1,6}\s+(.*)$")
_BULLET = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+(.*)$")
_NOTABLE = re.compile(r"\b(?:decided|decision|agreed|conclusion|important|note|blocker|blocked|risk|breaking|"
                      r"done|finished|fixed|merged|released)\b", re.IGNORECASE)
_MENTION = re.compile(r"@([A-Za-z0-9][A-Za-z0-9._-]{0,127})")


@result
class Mention(Result):
    """An agent named in the messages, and how often."""

    name: str
    count: int


@result
class ThreadSummary(Result):
    """One thread's subject, size, participants, key points and action items."""

    subject: str
    message_count: int
    participants: list[str]
    key_points: list[str]
    action_items: list[str]


@result
class ThreadDigest(Result):
    """One thread's summary among several."""

    thread_id: str
    summary: ThreadSummary


@result
class Aggregate(Result):
    """What several threads share: the agents they mention most, their key points and action items."""

    top_mentions: list[Mention]
    key_points: list[str]
    action_items: list[str]


@result
class ThreadSummaries(Result):
    """One thread in detail (``thread_id``, ``summary``, ``examples``), or several (``threads``, ``aggregate``)."""

    thread_id: str | None = field(default=None, metadata=OMIT_NONE)
    summary: ThreadSummary | None = field(default=None, metadata=OMIT_NONE)
    examples: list[ThreadMessage] | None = field(default=None, metadata=OMIT_NONE)
    threads: list[ThreadDigest] | None = field(default=None, metadata=OMIT_NONE)
    aggregate: Aggregate | None = field(default=None, metadata=OMIT_NONE)


@result
class SummaryView(Result):
    """A project-wide summary of a time window, as stored for ``fetch_summary``; ``cached``: made earlier."""

    id: str
    start_ts: str
    end_ts: str
    created_ts: str
    message_count: int
    thread_count: int
    participants: list[str]
    key_points: list[str]
    action_items: list[str]
    threads: list[dict[str, Any]]
    cached: bool


def _clean(text: str) -> str:
    text = re.sub(r"[`*_]+", "", text).strip().rstrip(":")
    return text[:MAX_LINE]


def _lines(body: str) -> Iterable[str]:
    """Body lines outside fenced code blocks and quotes."""
    fenced = False
    for line in body.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if not fenced and line.strip() and not line.lstrip().startswith(">"):
            yield line


def extract(messages: list[Message]) -> dict[str, list[str]]:
    """Key points and action items of some messages, in order, without repeats."""
    points: list[str] = []
    actions: list[str] = []
    for message in messages:
        found = _extracted(message.id, message.body)
        points.extend(found[0])
        actions.extend(found[1])
    return {"key_points": _first_unique(points), "action_items": _first_unique(actions)}


_EXTRACTED_MAX = 4096
_extracted_cache: dict[tuple[str, str], tuple[list[str], list[str]]] = {}


def _extracted(message_id: str, body: str) -> tuple[list[str], list[str]]:
    """The key points and action items of one message body, remembered (a message never changes).

    Summaries of a thread are asked for again and again while it grows;
    each asks only about the messages it has not seen.
    """
    key = (message_id, body)
    found = _extracted_cache.get(key)
    if found is None:
        if len(_extracted_cache) >= _EXTRACTED_MAX:
            _extracted_cache.clear()
        found = _extracted_cache[key] = _extract_body(body)
    return found


def _extract_body(body: str) -> tuple[list[str], list[str]]:
    points: list[str] = []
    actions: list[str] = []
    for line in _lines(body):
        task = _TASK.match(line) or _ACTION.match(line) or _ACTION_INLINE.search(line)
        if task and task.group(1).strip():
            actions.append(_clean(task.group(1)))
            continue
        if re.match(r"^\s*(?:[-*+]\s*)?\[[xX]\]\s+", line):
            points.append(_clean(re.sub(r"^\s*(?:[-*+]\s*)?\[[xX]\]\s+", "done: ", line)))
            continue
        heading, bullet = _HEADING.match(line), _BULLET.match(line)
        if heading:
            points.append(_clean(heading.group(1)))
        elif _REQUEST.search(line) and (_MENTION.search(line) or line.rstrip().endswith(("?", "."))):
            actions.append(_clean(bullet.group(1) if bullet else line))
        elif bullet:
            points.append(_clean(bullet.group(1)))
        elif _NOTABLE.search(line):
            points.append(_clean(line))
    return points, actions


def _first_unique(items: list[str]) -> list[str]:
    return [item for item in dict.fromkeys(items) if item][:MAX_ITEMS]


def participants(messages: list[Message]) -> list[str]:
    names: set[str] = set()
    for message in messages:
        names.update([message.sender, *message.to, *message.cc])
    return sorted(names)


def mentions(messages: list[Message], known: list[str]) -> list[Mention]:
    """Agents named in bodies (``@Name`` or a registered name as a word), most mentioned first."""
    counts: Counter[str] = Counter()
    lowered = {name.lower(): name for name in known}
    for message in messages:
        for name in _MENTION.findall(message.body):
            counts[lowered.get(name.lower(), name)] += 1
        for word in set(re.findall(r"[A-Za-z0-9][A-Za-z0-9._-]+", message.body)) - set(_MENTION.findall(message.body)):
            if word.lower() in lowered:
                counts[lowered[word.lower()]] += 1
    return [Mention(name=name, count=count) for name, count in counts.most_common(MAX_ITEMS)]


def thread_summary(messages: list[Message]) -> ThreadSummary:
    return ThreadSummary(subject=messages[0].subject if messages else "", message_count=len(messages),
                         participants=participants(messages), **extract(messages))


def summarize_thread(ctx: Context, project_key: str, thread_id: str, *, include_examples: bool = False,
                     per_thread_limit: int = 50) -> ThreadSummaries:
    """One thread in detail, or a digest of several when ``thread_id`` lists them with commas."""
    if not isinstance(thread_id, str):
        raise invalid("thread_id must name a thread, or several separated by commas", field="thread_id")
    if not isinstance(per_thread_limit, int) or isinstance(per_thread_limit, bool) or not 1 <= per_thread_limit <= 500:
        raise invalid("per_thread_limit must be a whole number from 1 to 500", field="per_thread_limit")
    ids = [part.strip() for part in thread_id.split(",") if part.strip()]
    if not ids:
        raise invalid("thread_id must name a thread, or several separated by commas", field="thread_id")
    snap = ctx.archive(project_key).snapshot()
    project_record(snap)
    if len(ids) == 1:
        messages = thread_messages(ctx, project_key, ids[0])
        if not messages:
            raise not_found(f"no messages in thread {ids[0]!r}; thread IDs come from the thread_id of a message",
                            thread_id=ids[0])
        heads = [ThreadMessage.from_wire(MessageView.of(m), body_md=m.body) for m in messages[:3]]
        examples = fill(heads, kept_body, READ_BUDGET_DEFAULT) if include_examples else None
        return ThreadSummaries(thread_id=ids[0], summary=thread_summary(messages[-per_thread_limit:]),
                               examples=examples)
    threads: list[ThreadDigest] = []
    everything: list[Message] = []
    for one in dict.fromkeys(ids):
        messages = thread_messages(ctx, project_key, one)[-per_thread_limit:]
        everything.extend(messages)
        threads.append(ThreadDigest(thread_id=one, summary=thread_summary(messages)))
    return ThreadSummaries(threads=threads, aggregate=Aggregate(top_mentions=mentions(everything, agent_names(snap)),
                                                                **extract(everything)))


def _check_hours(value: object, field: str) -> float:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 < value <= 24 * 3650:
        raise invalid(f"{field} must be a positive number of hours", field=field)
    return float(value)


def summary_view(summary: Summary, cached: bool) -> SummaryView:
    return SummaryView(id=summary.id, start_ts=summary.start_ts, end_ts=summary.end_ts,
                       created_ts=summary.created_ts, message_count=summary.message_count,
                       thread_count=summary.thread_count, participants=summary.participants,
                       key_points=summary.key_points, action_items=summary.action_items, threads=summary.threads,
                       cached=cached)


def _stored(snap: Snapshot, since: dt.datetime) -> Iterable[Summary]:
    """Stored summaries, newest first, made on ``since``'s day or later (each is named by its making time)."""
    for _, path in snap.day_files(SUMMARIES, format_ts(since)):
        found = snap.load(path, Summary)
        if found is not None:
            yield found


def summarize_recent(ctx: Context, project_key: str, *, since_hours: float = 1.0,
                     max_messages: int = MAX_RECENT_MESSAGES) -> SummaryView:
    """A project-wide summary of the last ``since_hours``, stored for ``fetch_summary``."""
    hours = _check_hours(since_hours, "since_hours")
    if not isinstance(max_messages, int) or isinstance(max_messages, bool) or max_messages < 1:
        raise invalid("max_messages must be a positive whole number", field="max_messages")
    max_messages = min(max_messages, MAX_RECENT_MESSAGES)
    archive = ctx.archive(project_key)
    end = ctx.clock.now()
    start = end - dt.timedelta(hours=hours)
    start_ts, end_ts = format_ts(start), format_ts(end)
    snap = archive.snapshot()
    project_record(snap)
    # A summary is made (and named) at its window's end, so one within tolerance is at most a day old.
    for stored in _stored(snap, end - CACHE_TOLERANCE - dt.timedelta(days=1)):
        if (abs(parse_ts(stored.start_ts) - start) <= CACHE_TOLERANCE
                and abs(parse_ts(stored.end_ts) - end) <= CACHE_TOLERANCE):
            return summary_view(stored, True)
    newest = indexer_for(ctx.store).project(project_key).window(start_ts, end_ts, limit=max_messages)
    messages = [message_of(view) for view in reversed(newest)]
    by_thread: dict[str, list[Message]] = {}
    for message in messages:
        by_thread.setdefault(message.thread_id, []).append(message)
    found = extract(messages)
    summary = Summary(id=ctx.clock.new_id(), start_ts=start_ts, end_ts=end_ts, created_ts=ctx.clock.now_ts(),
                      message_count=len(messages), thread_count=len(by_thread), participants=participants(messages),
                      key_points=found["key_points"], action_items=found["action_items"],
                      threads=[{"thread_id": tid, "subject": group[0].subject, "message_count": len(group)}
                               for tid, group in by_thread.items()])
    if not messages:
        return summary_view(summary, False)  # nothing worth storing
    archive.transact(lambda tip: Change(f"Summarize {len(messages)} message(s) from {start_ts} to {end_ts}")
                     .put_record(summary))
    return summary_view(summary, False)


def fetch_summary(ctx: Context, project_key: str, *, since_hours: float = 24.0,
                  limit: int = 5) -> list[SummaryView]:
    """Stored summaries whose window ended within the last ``since_hours``, newest first."""
    hours = _check_hours(since_hours, "since_hours")
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= 100:
        raise invalid("limit must be a whole number from 1 to 100", field="limit")
    floor_time = ctx.clock.now() - dt.timedelta(hours=hours)
    floor = format_ts(floor_time)
    snap = ctx.archive(project_key).snapshot()
    project_record(snap)
    out = []
    for stored in _stored(snap, floor_time - dt.timedelta(days=1)):
        if stored.end_ts >= floor:
            out.append(summary_view(stored, True))
            if len(out) >= limit:
                break
    return out
