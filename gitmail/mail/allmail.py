"""Mail across every project, for the overseer: one list newest first, or one search, with the same filters.

Without words to search, each project's index lists its messages newest
first and the lists are merged; a page ends with a cursor naming the last
message shown (its time, ID and project), so the next page starts right
after it however much mail arrives meanwhile. With words, every project is
searched with the query language, the filters joined to the query as the
language's own ``from:``, ``to:``, ``importance:`` and ``created:`` terms,
and the hits of all projects are merged best first, page by page (at most
:data:`MAX_HITS` a project, the search's own bound). The acknowledgement
state, which changes with every receipt and so is not in the search index,
is checked against each hit's receipts in the metadata store.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

from gitmail.coord.context import Context
from gitmail.index import indexer_for, search_messages
from gitmail.index.oversight import ACK_STATES, Filter
from gitmail.model.errors import invalid
from gitmail.model.names import AGENT_NAME_RE
from gitmail.model.records import IMPORTANCE

IMPORTANCES = IMPORTANCE  # the levels a record may hold, offered as filters
MAX_HITS = 1000
MAX_PAGE = 100  # messages one page may hold


@dataclasses.dataclass(frozen=True)
class MailQuery:
    """What to look for: words in the query language (optional), and filters; an empty field does not filter."""

    text: str = ""
    sender: str = ""
    recipient: str = ""  # a to or cc recipient
    importance: str = ""
    ack: str = ""  # "asked" (asks for acknowledgements), "owed" (some still owed), "done" (every one given)
    since: str = ""  # YYYY-MM-DD, UTC, included
    until: str = ""  # YYYY-MM-DD, UTC, included

    def language(self) -> str:
        """The search this asks for in the query language: the words, then each filter as its term."""
        terms = [f"({self.text})"] if self.text else []
        terms += [f"from:{self.sender}"] if self.sender else []
        terms += [f"to:{self.recipient}"] if self.recipient else []
        terms += [f"importance:{self.importance}"] if self.importance else []
        if self.since or self.until:
            terms.append(f"created:{self.since}..{self.until}")
        return " ".join(terms)


@dataclasses.dataclass(frozen=True)
class MailItem:
    """One message of one project, as a list of mail across projects shows it."""

    project_slug: str
    project_key: str
    id: str
    thread_id: str
    subject: str
    sender: str
    to: list[str]
    cc: list[str]
    created_ts: str
    importance: str
    ack_required: bool
    ack_state: str  # "owed" or "done" for a message asking for acknowledgements, "" otherwise
    snippet: str = ""  # around the first matched word, when searching
    score: float = 0.0


@dataclasses.dataclass(frozen=True)
class MailPage:
    """One page: its messages, whether more follow, and how to ask for them."""

    items: list[MailItem]
    more: bool
    cursor: str | None  # a listing's next page starts after this (None when searching, or at the end)
    searched: str  # the query run, in the query language ("" for a listing)
    bounded: bool  # a search ranked only the newest matches of some project


def _date(value: str, field: str) -> str:
    value = value.strip()
    try:
        if value and (len(value) != 10 or not dt.date.fromisoformat(value)):
            raise ValueError
    except ValueError:
        raise invalid(f"{field} must be a date as YYYY-MM-DD (UTC), not {value[:40]!r}", field=field) from None
    return value


def _name(value: str, field: str) -> str:
    value = value.strip()
    if value and not AGENT_NAME_RE.match(value):
        raise invalid(f"{field} must be one agent's name, like BlueLake, not {value[:40]!r}", field=field)
    return value


def checked(query: MailQuery) -> MailQuery:
    """``query`` with its fields trimmed; INVALID_ARGUMENT naming the field that cannot be read."""
    if query.importance.strip() not in ("", *IMPORTANCES):
        raise invalid(f"importance must be one of {', '.join(IMPORTANCES)}", field="importance")
    if query.ack.strip() not in ("", *ACK_STATES):
        raise invalid(f"ack must be one of {', '.join(ACK_STATES)}", field="ack")
    out = MailQuery(text=query.text.strip(), sender=_name(query.sender, "sender"),
                    recipient=_name(query.recipient, "recipient"), importance=query.importance.strip(),
                    ack=query.ack.strip(), since=_date(query.since, "since"), until=_date(query.until, "until"))
    if out.since and out.until and out.since > out.until:
        raise invalid("since must not be after until", field="since")
    if out.text:
        from gitmail.index import parse_query  # loads Whoosh: only a search needs it

        parse_query(out.text)  # a problem is reported at its column in the words as typed
    return out


def _cursor(value: str | None) -> tuple[str, str, str] | None:
    """``(created_ts, id, slug)`` from a cursor a page gave out."""
    if not value:
        return None
    parts = value.split("~")
    if len(parts) != 3 or not all(parts) or len(value) > 300:
        raise invalid("after must be the cursor a page of mail gave (created_ts~id~project)", field="after")
    return parts[0], parts[1], parts[2]


def _item(slug: str, key: str, entry: dict[str, Any], state: str, *, snippet: str = "",
          score: float = 0.0) -> MailItem:
    return MailItem(project_slug=slug, project_key=key, id=entry["id"], thread_id=entry["thread_id"],
                    subject=entry["subject"], sender=entry["from"], to=list(entry.get("to", [])),
                    cc=list(entry.get("cc", [])), created_ts=entry["created_ts"], importance=entry["importance"],
                    ack_required=bool(entry["ack_required"]), ack_state=state, snippet=snippet, score=score)


def _spelled(ctx: Context, slug: str, name: str) -> str | None:
    """``name`` as the project spells it, or None if no agent of the project goes by it."""
    if not name:
        return ""
    wanted = name.lower()
    return next((a.name for a in indexer_for(ctx.store).project(slug).agents() if a.name.lower() == wanted), None)


def listing(ctx: Context, projects: dict[str, str], query: MailQuery, *, after: str | None = None,
            limit: int = 25) -> MailPage:
    """The messages of ``projects`` (slug: human key) passing ``query``'s filters, newest first, after ``after``."""
    start = _cursor(after)
    found: list[tuple[tuple[str, str, str], MailItem]] = []
    for slug, key in projects.items():
        sender, recipient = _spelled(ctx, slug, query.sender), _spelled(ctx, slug, query.recipient)
        if sender is None or recipient is None:
            continue  # nobody of that name here, so nothing it sent or received
        where = Filter(sender=sender, recipient=recipient, importance=query.importance, ack=query.ack,
                       since=f"{query.since}T00:00:00" if query.since else "",
                       until=f"{query.until}T23:59:59.999999Z" if query.until else "",
                       before=(start[0], start[1]) if start else None, inclusive=bool(start and slug < start[2]))
        index = indexer_for(ctx.store).project(slug)
        rows = index.listing(where, limit=limit + 1)
        states = index.ack_states([r["id"] for r in rows if r["ack_required"]])
        found += [((r["created_ts"], r["id"], slug), _item(slug, key, r, states.get(r["id"], ""))) for r in rows]
    found.sort(key=lambda pair: pair[0], reverse=True)
    page = [item for _, item in found[:limit]]
    more = len(found) > limit
    cursor = "~".join(found[limit - 1][0]) if more else None
    return MailPage(items=page, more=more, cursor=cursor, searched="", bounded=False)


def search(ctx: Context, projects: dict[str, str], query: MailQuery, *, page: int = 1, per: int = 25) -> MailPage:
    """Page ``page`` of the hits of ``query`` in ``projects``, best first."""
    wanted = MAX_HITS if query.ack else min(page * per + 1, MAX_HITS)
    language = query.language()
    ranked: list[tuple[float, str, int, MailItem]] = []
    bounded = False
    for slug, key in projects.items():
        found = search_messages(ctx.store, slug, language, wanted)
        parties = indexer_for(ctx.store).project(slug).receipts([h["id"] for h in found])  # to, cc, receipts
        for rank, hit in enumerate(found):
            known = parties.get(hit["id"], {"to": [], "cc": [], "delivered": {}})
            owed = any(acked is None for _, acked in known["delivered"].values())
            state = ("owed" if owed else "done") if hit["ack_required"] else ""
            if query.ack and not (hit["ack_required"] and query.ack in ("asked", state)):
                continue
            bounded = bounded or bool(hit.get("bounded"))
            ranked.append((-float(hit["score"]), slug, rank,
                           _item(slug, key, {**hit, "to": known["to"], "cc": known["cc"]}, state,
                                 snippet=hit.get("snippet", ""), score=float(hit["score"]))))
    # Best first; equal scores by project, then in the project's own order, so that a page's hits are the
    # first of a longer search's and no hit moves from one page to another.
    ranked.sort(key=lambda entry: entry[:3])
    shown = [entry[3] for entry in ranked[(page - 1) * per:page * per]]
    return MailPage(items=shown, more=len(ranked) > page * per, cursor=None, searched=language, bounded=bounded)


def all_mail(ctx: Context, projects: dict[str, str], query: MailQuery, *, after: str | None = None, page: int = 1,
             limit: int = 25) -> MailPage:
    """A list newest first (no words: see :func:`listing`) or a search (see :func:`search`) of ``projects``."""
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= MAX_PAGE:
        raise invalid(f"limit must be a whole number from 1 to {MAX_PAGE}", field="limit")
    query = checked(query)
    if query.text:
        return search(ctx, projects, query, page=page, per=limit)
    return listing(ctx, projects, query, after=after, limit=limit)
