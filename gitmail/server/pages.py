"""Reads sized for a context window: the catch-up window and cursor pages.

Both tools return text only (one JSON document), so nothing is sent twice.

A *compact page* is a cursor page that names the reader once and each author
once, under a short alias, with short keys: the same messages and rules for
fewer bytes, for agents that read a lot.

*Catch-up* shows the newest few messages of an inbox with bounded previews:
each preview holds at most :data:`PREVIEW_BYTES` UTF-8 bytes of the body, all
previews together at most :data:`PREVIEWS_TOTAL`, and the newest messages get
that budget first. A cut preview names the exact ``read_messages`` arguments
that return the whole message.

A *cursor page* holds complete messages after a sequence number, in ascending
order, and its whole serialized tool result (the ``CallToolResult`` as sent,
JSON escaping included, the JSON-RPC envelope excluded) fits in
``max_output_bytes``. A body is never cut and the cursor never skips a
message: when even the first message does not fit, the page is empty, the
cursor stays put, and ``recovery`` says how to read that message.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from json.encoder import encode_basestring as _quote  # a str as JSON text, as dumps writes it (C when built)
from typing import Any

from mcp_types import CallToolResult, TextContent

from gitmail.mail.facade import Arrivals, ChannelPostView, FeedMessage

PREVIEW_BYTES = 2000
PREVIEWS_TOTAL = 8000
BUDGET_DEFAULT = 16_000
BUDGET_MIN = 1024
BUDGET_MAX = 128_000

HEAD_FIELDS = ("id", "from", "created_ts", "subject", "importance", "ack_required", "thread_id", "topic")


@dataclass(frozen=True, slots=True)
class Entry:
    """One inbox message (or channel post) with its sequence number, its head's fields and its body."""

    seq: int
    message: Mapping[str, Any]  # at least the HEAD_FIELDS that it has (``from``, the author, always)
    body: str


def feed_entries(messages: list[FeedMessage]) -> list[Entry]:
    """A feed read's messages as page entries, each under its sequence number."""
    return [Entry(message.seq, message, message.body_md) for message in messages]


def arrival_entries(page: Arrivals) -> list[Entry]:
    """A feed page as the index's rows (:func:`gitmail.mail.feed.read_arrivals`) as page entries."""
    return [Entry(row["seq"], row, body) for row, body in zip(page.rows, page.bodies, strict=True)]


def post_entries(posts: list[ChannelPostView]) -> list[Entry]:
    """A channel read's posts as page entries, each under its number in the channel."""
    return [Entry(post.seq, post, post.body_md) for post in posts]


_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))  # one for every call: it keeps no state


def dumps(doc: Any) -> str:
    return _ENCODER.encode(doc)


def wire_size(text: str) -> int:
    """Bytes of the serialized tool result that carries ``text`` as its only content."""
    result = CallToolResult(content=[TextContent(type="text", text=text)], is_error=False)
    return len(result.model_dump_json(by_alias=True, exclude_none=True).encode("utf-8"))


def cut_utf8(text: str, max_bytes: int) -> tuple[str, bool]:
    """The longest prefix of ``text`` within ``max_bytes`` UTF-8 bytes, and whether it was cut."""
    data = text.encode("utf-8")
    if len(data) <= max_bytes:
        return text, False
    return data[:max_bytes].decode("utf-8", errors="ignore"), True


def _head(entry: Entry) -> dict[str, Any]:
    head: dict[str, Any] = {"seq": entry.seq}
    head.update({k: entry.message.get(k) for k in HEAD_FIELDS if entry.message.get(k) is not None})
    return head


def _full_read(project: str, agent: str, entry: Entry, channel: str | None = None) -> dict[str, Any]:
    """How to fetch one whole message: a one-message cursor page, or the message resource if too big.

    A channel's post is read whole by ``read_channel`` (a full read, without
    a byte budget), from the cursor just before it.
    """
    if channel is not None:
        return channel_read(project, agent, channel, entry.seq)
    return _one_message_read("read_messages", project, agent, entry, single_page_size(project, agent, entry))


def channel_read(project: str, agent: str, channel: str, seq: int) -> dict[str, Any]:
    """The ``read_channel`` call that returns post ``seq`` of ``channel`` alone."""
    return {"tool": "read_channel", "arguments": {"project_key": project, "agent_name": agent, "channel": channel,
                                                  "after": seq - 1, "limit": 1}}


def _one_message_read(tool: str, project: str, agent: str, entry: Entry, needed: int) -> dict[str, Any]:
    """The call of ``tool`` that returns ``entry`` alone (a page of ``needed`` bytes), or its resource if too big."""
    if needed <= BUDGET_MAX:
        return {"tool": tool, "arguments": {
            "project_key": project, "agent_name": agent, "after": entry.seq - 1, "limit": 1,
            "max_output_bytes": max(BUDGET_MIN, needed)}}
    return {"resource": f"resource://message/{entry.message['id']}?project={project}"}


def catch_up_doc(project: str, agent: str, entries: list[Entry], high_watermark: int, older: bool,
                 next_after: int, *, channel: str | None = None) -> dict[str, Any]:
    """The catch-up window for ``entries`` (ascending, already the newest few) and the cursor to save.

    With ``channel``, the entries are that channel's posts: the window names
    it, and the cursor continues in ``read_channel`` (or ``read_compact``
    with the same channel).
    """
    remaining = PREVIEWS_TOTAL
    shown: list[dict[str, Any]] = []
    for entry in reversed(entries):  # newest first gets the budget first
        body = entry.body
        preview, cut = cut_utf8(body, min(PREVIEW_BYTES, remaining))
        remaining -= len(preview.encode("utf-8"))
        item = _head(entry)
        item["preview"] = preview
        if cut:
            item["preview_truncated"] = True
            item["body_bytes"] = len(body.encode("utf-8"))
            item["full_read"] = _full_read(project, agent, entry, channel)
        shown.append(item)
    shown.reverse()
    cursor = next_after
    doc: dict[str, Any] = {"project": project, "agent": agent}
    if channel is not None:
        doc["channel"] = channel
    doc.update({"messages": shown, "next_after": cursor, "high_watermark": high_watermark, "older_messages": older})
    if channel is not None:
        doc["next"] = (f"save next_after={cursor} for #{channel}; call read_channel (or read_compact) with "
                       f"channel={channel!r} and after={cursor} to continue from here"
                       + ("; read_channel from after=0 reaches older posts" if older else ""))
    else:
        doc["next"] = (f"save next_after={cursor}; call read_messages with after={cursor} to continue from here"
                       + ("; search_messages reaches older mail" if older else ""))
    return doc


def _page(project: str, agent: str, after: int, messages: list[dict[str, Any]], next_after: int,
          has_more: bool, high_watermark: int) -> dict[str, Any]:
    return {"project": project, "agent": agent, "after": after, "messages": messages, "has_more": has_more,
            "next_after": next_after, "high_watermark": high_watermark}


def _full(entry: Entry) -> dict[str, Any]:
    item = _head(entry)
    item["body_md"] = entry.body
    return item


def _full_text(entry: Entry) -> str:
    """:func:`_full`'s object as JSON text, byte for byte what :func:`dumps` makes of it, written out directly."""
    message = entry.message
    text = '{"seq":' + _value(entry.seq)
    for key in HEAD_FIELDS:  # plain keys: nothing in them to escape
        value = message.get(key)
        if value is not None:
            text += f',"{key}":{_value(value)}'
    return f'{text},"body_md":{_quote(entry.body)}}}'


def single_page_size(project: str, agent: str, entry: Entry) -> int:
    """Wire size of a one-message page holding ``entry``."""
    doc = _page(project, agent, entry.seq - 1, [_full(entry)], entry.seq, True, entry.seq)
    return wire_size(dumps(doc)) + 24  # room for larger cursor numbers


def cursor_page(project: str, agent: str, after: int, entries: list[Entry], more_beyond: bool,
                high_watermark: int, max_output_bytes: int) -> str:
    """The text of a cursor page: as many of ``entries`` as fit in ``max_output_bytes``.

    ``entries`` are the candidates after ``after`` in ascending order, read
    after ``high_watermark`` was; ``more_beyond`` says whether further messages
    exist past the last candidate. When nothing is left, the cursor moves on to
    the high watermark, so the next read skips other agents' records.
    """
    texts = [_full_text(entry) for entry in entries]

    def page(count: int, next_after: int, has_more: bool) -> dict[str, Any]:
        return _page(project, agent, after, [], next_after, has_more, high_watermark)

    return _fit(page, texts, [0] * len(texts), after, entries, more_beyond, high_watermark, max_output_bytes,
                lambda entry: _full_read(project, agent, entry))


def compact_page(project: str, agent: str, after: int, entries: list[Entry], more_beyond: bool,
                 high_watermark: int, max_output_bytes: int, *, channel: str | None = None) -> str:
    """A cursor page in compact form, under the same rules as :func:`cursor_page`.

    With ``channel``, the entries are that channel's posts (by its sequence),
    the page names the channel once, and a post too big for the budget is
    read whole with ``read_channel``. The reader and project are named once; each author once, in ``authors``,
    under a short alias (``a1``, ``a2``… in order of appearance) that the
    messages use; keys are short, and flags at their usual value are left out
    (``imp`` only when not normal, ``ack`` only when asked). Bodies are whole.
    """
    aliases: dict[str, str] = {}  # author: alias, in order of appearance
    bys = [aliases.setdefault(str(entry.message.get("from")), f"a{len(aliases) + 1}") for entry in entries]
    texts = [_compact_text(entry, alias) for entry, alias in zip(entries, bys, strict=True)]
    authors = {alias: name for name, alias in aliases.items()}

    extra, named = [], set()
    for alias in bys:  # the first message of an author also adds it to ``authors``
        extra.append(0 if alias in named else _escaped({alias: authors[alias]}) - 1)
        named.add(alias)

    def page(count: int, next_after: int, has_more: bool) -> dict[str, Any]:
        shown = {alias: authors[alias] for alias in bys[:count]}
        doc = _compact_doc(project, agent, after, shown, next_after, has_more, high_watermark)
        return doc if channel is None else {"channel": channel, **doc}

    def recovery(entry: Entry) -> dict[str, Any]:
        if channel is not None:
            return channel_read(project, agent, channel, entry.seq)
        return _compact_read(project, agent, entry)

    return _fit(page, texts, extra, after, entries, more_beyond, high_watermark, max_output_bytes, recovery)


def _value(value: Any) -> str:
    """``value`` as :func:`dumps` writes it, without the encoder's set-up for the plain kinds a message head holds."""
    kind = type(value)
    if kind is str:
        return _quote(value)
    if kind is int:
        return int.__repr__(value)
    if kind is bool:
        return "true" if value else "false"
    if value is None:
        return "null"
    return dumps(value)


def _compact_text(entry: Entry, alias: str) -> str:
    """One message of a compact page as JSON text, byte for byte what :func:`dumps` makes of its object.

    The keys, in order: ``seq``, ``id``, ``by`` (the author's alias), ``ts``,
    then ``subject`` and ``thread`` when the entry has them (a channel's
    post has neither), ``imp`` only when not normal, ``ack`` only when asked,
    ``topic`` when set, and the whole ``body``. Written out directly because
    a page serializes up to 200 of them on every read.
    """
    message = entry.message
    text = (f'{{"seq":{_value(entry.seq)},"id":{_value(message.get("id"))},"by":{_quote(alias)},'
            f'"ts":{_value(message.get("created_ts"))}')
    if "subject" in message:
        text += f',"subject":{_value(message["subject"])}'
    if "thread_id" in message:
        text += f',"thread":{_value(message["thread_id"])}'
    importance = message.get("importance")
    if importance not in (None, "normal"):
        text += f',"imp":{_value(importance)}'
    if message.get("ack_required"):
        text += ',"ack":true'
    if message.get("topic"):
        text += f',"topic":{_value(message["topic"])}'
    return f'{text},"body":{_quote(entry.body)}}}'


def _compact_doc(project: str, agent: str, after: int, authors: dict[str, str], next_after: int, has_more: bool,
                 high_watermark: int) -> dict[str, Any]:
    """A compact page naming ``authors`` (alias: name, the ones its messages use); its messages are filled in."""
    return {"project": project, "reader": agent, "after": after, "authors": authors, "messages": _SLOT,
            "has_more": has_more, "next_after": next_after, "high_watermark": high_watermark}


def _compact_read(project: str, agent: str, entry: Entry) -> dict[str, Any]:
    """How to read one message too big for the asked budget: a one-message compact page, or its resource."""
    doc = _compact_doc(project, agent, entry.seq - 1, {"a1": str(entry.message.get("from"))}, entry.seq, True,
                       entry.seq)
    text = _filled(dumps(doc), [_compact_text(entry, "a1")])
    return _one_message_read("read_compact", project, agent, entry, wire_size(text) + 24)  # + cursor digits


def _escaped(value: Any) -> int:
    """The bytes ``value``'s JSON takes inside a tool result's text (a JSON string: quotes and controls escaped)."""
    return _quoted_size(dumps(value))


def _quoted_size(text: str) -> int:
    """The bytes the JSON text ``text`` takes quoted as a JSON string, without its two quotes.

    JSON text has no raw control characters (its strings hold them escaped),
    so quoting it adds one backslash before each ``"`` and each ``\\`` and
    changes nothing else: counting those is the quoting without doing it.
    """
    size = len(text) if text.isascii() else len(text.encode("utf-8"))  # isascii is a flag the str keeps
    return size + text.count('"') + text.count("\\")


_SLOT = "\x00messages"  # stands for the page's messages while the rest of it is serialized
_SLOT_TEXT = dumps(_SLOT)


def _filled(text: str, messages: list[str]) -> str:
    """``text`` (a page serialized with :data:`_SLOT` for its messages) holding the serialized ``messages``."""
    return text.replace(f'"messages":{_SLOT_TEXT}', '"messages":[' + ",".join(messages) + "]", 1)


def _fit(page: Callable[[int, int, bool], dict[str, Any]], texts: list[str], extra: list[int],
         after: int, entries: list[Entry], more_beyond: bool, high_watermark: int, max_output_bytes: int,
         recovery: Callable[[Entry], dict[str, Any]]) -> str:
    """The text of ``page`` holding as many of ``entries`` as fit in ``max_output_bytes``.

    ``page(count, next_after, has_more)`` is the document of the first
    ``count`` entries without its ``messages``, which are the first ``count``
    of ``texts`` (each entry's JSON text, made once): a page is its frame
    with those texts joined in. So the size of a page of any count is
    computed, not rendered: its frame's (small) plus the texts' quoted sizes
    summed in advance, and the page is rendered once, at the count chosen.
    When all of them fit, that is the whole. Otherwise the bytes each item
    adds (its quoted text, a separator, and ``extra``) estimate the count in
    one pass; it is then checked exactly and moved by a message at a time
    until it is the most that fit. A body is never cut and the cursor never
    skips a message: when even the first does not fit, the page is empty,
    the cursor stays put, and ``recovery`` says how to read it.
    """
    def frame(count: int) -> str:  # the page of ``count`` entries, serialized with :data:`_SLOT` for its messages
        has_more = count < len(entries) or more_beyond
        next_after = entries[count - 1].seq if count else after
        if not has_more:
            next_after = max(next_after, high_watermark)
        doc = page(count, next_after, has_more)
        doc["messages"] = _SLOT
        if count == 0 and entries:
            doc["recovery"] = {
                "reason": f"message seq {entries[0].seq} alone needs more than max_output_bytes={max_output_bytes}",
                **recovery(entries[0]),
            }
        return dumps(doc)

    def size(count: int) -> int:  # wire_size of the page of ``count`` entries, without building it
        # the slot's text gives way to "[", the texts joined by commas, and "]" (none of which is escaped)
        return envelope + _quoted_size(frame(count)) - slot + 2 + sums[count] + max(count - 1, 0)

    envelope, slot = wire_size(""), _quoted_size(_SLOT_TEXT)
    sums = [0]
    for text in texts:
        sums.append(sums[-1] + _quoted_size(text))
    count = len(entries)
    if entries and size(count) > max_output_bytes:
        total, count = size(0), 0
        for step in (sums[i + 1] - sums[i] + 1 + more for i, more in enumerate(extra)):  # an item's text, a comma
            if total + step > max_output_bytes:
                break
            total += step
            count += 1
        while count and size(count) > max_output_bytes:  # the estimate was short: fewer
            count -= 1
        while count < len(entries) and size(count + 1) <= max_output_bytes:  # it was long: more, while they fit
            count += 1
    return _filled(frame(count), texts[:count])
