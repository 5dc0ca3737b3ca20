"""The fields of the search index and how a message becomes a document.

Only canonical message files (``messages/…``) are indexed. ``text`` holds the
subject (twice, so it weighs double) and the body: plain words search it with
one posting list each, which is what keeps common words fast; ``subject``
alone serves ``subject:``. ``to`` holds the
public recipients (to and cc); ``visible`` holds every agent allowed to find
the message: its sender and every agent holding an inbox or outbox copy (so a
bcc recipient finds what was sent to it, and nobody else learns of the bcc).
Result fields are stored in one packed ``data`` value; bodies are not stored,
snippets are cut from the message blob in git.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from whoosh.analysis import IDTokenizer, LowercaseFilter, StandardAnalyzer
from whoosh.fields import DATETIME, ID, KEYWORD, STORED, TEXT, Schema

from gitmail.model.clock import parse_ts

TEXT_ANALYZER = StandardAnalyzer(stoplist=None, minsize=1)  # every word counts, "the" and "a" too
_NAME = IDTokenizer() | LowercaseFilter()

SCHEMA = Schema(
    id=ID(stored=True, unique=True),
    subject=TEXT(analyzer=TEXT_ANALYZER, phrase=True),
    text=TEXT(analyzer=TEXT_ANALYZER, phrase=True),
    to=KEYWORD(lowercase=True),
    thread=ID(analyzer=_NAME),
    topic=ID(analyzer=_NAME),
    importance=ID(analyzer=_NAME),
    created=DATETIME(sortable=True),
    visible=KEYWORD(lowercase=True),
    data=STORED(),
    **{"from": ID(analyzer=_NAME)},
)


def document(summary: dict[str, Any], blob: str, body: str, agents: list[str]) -> dict[str, Any]:
    """The Whoosh document for a message summary (as :mod:`.meta` gives it)."""
    created = parse_ts(summary["created_ts"]).astimezone(dt.UTC).replace(tzinfo=None)
    visible = sorted({summary["from"], *agents})
    doc = {
        "id": summary["id"],
        "subject": summary["subject"],
        # Subject twice, then the body: one posting list per word answers plain
        # words, and a word in the subject weighs double.
        "text": f"{summary['subject']}\n{summary['subject']}\n{body}",
        "from": summary["from"],
        "to": " ".join(summary["to"] + summary["cc"]),
        "thread": summary["thread_id"],
        "importance": summary["importance"],
        "created": created,
        "visible": " ".join(visible),
        "data": {key: summary[key] for key in ("subject", "importance", "ack_required", "created_ts",
                                              "thread_id", "from", "topic")} | {"blob": blob},
    }
    if summary["topic"]:
        doc["topic"] = summary["topic"]
    return doc
