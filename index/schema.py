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
import re
from collections.abc import Iterator
from typing import Any

from whoosh.analysis import IDTokenizer, LowercaseFilter, StandardAnalyzer
from whoosh.fields import DATETIME, ID, KEYWORD, STORED, TEXT, Schema
from whoosh.formats import Positions

from gitmail.model.clock import parse_ts

# A word is letters and digits, dotted parts kept together (``v1.2``, ``deploy.sh``). Underscores and
# asterisks are Markdown's emphasis (``**deploy**``, ``_word_``) as often as part of a name, so they
# separate words: ``snake_case`` is the phrase "snake case", found by the same query analyzed alike.
WORD = re.compile(r"[^\W_]+(?:\.[^\W_]+)*")
WORDS_FORMAT = "2"  # of the text analysis: an index whose words were cut otherwise is rebuilt (search.py)
TEXT_ANALYZER = StandardAnalyzer(WORD, stoplist=None, minsize=1)  # every word counts, "the" and "a" too
_NAME = IDTokenizer() | LowercaseFilter()
_VALUES_KEPT = 50_000  # encoded position lists remembered (most words occur once, at one of a few hundred places)


class WordPositions(Positions):
    """Whoosh's ``Positions`` format, with the text analyzed in one pass.

    Whoosh runs every word through a chain of generators (tokenizer, lower
    case filter) that builds a token object per word, then pickles each
    word's position list: about half of the time a bulk build spends per
    document. For :data:`TEXT_ANALYZER` this finds the words with its own
    pattern and lower-cases each, exactly as that chain does, and reuses the
    encoding of position lists it has seen (most words occur once, at one
    of a few hundred places). The postings are the same as Whoosh's, in the
    same order (``tests/test_index_bulk.py`` compares them); other analyzers
    and pre-split values take Whoosh's path. An analyzer equal to
    :data:`TEXT_ANALYZER` (as read back from an index's stored schema) counts
    as it.
    """

    _encoded: dict[tuple[int, ...], bytes] = {}

    def word_values(self, value: Any, analyzer: Any, **kwargs: Any) -> Iterator[tuple[str, int, float, bytes]]:
        # An index opened from disk holds its own copy of the analyzer (unpickled with the schema): equal, not
        # the same object. Worker processes and every catch-up write through such an index.
        if (analyzer is not TEXT_ANALYZER and analyzer != TEXT_ANALYZER) or not isinstance(value, str):
            yield from super().word_values(value, analyzer, **kwargs)
            return
        places: dict[str, list[int]] = {}
        for pos, match in enumerate(WORD.finditer(value)):
            word = match.group().lower()
            seen = places.get(word)
            if seen is None:
                places[word] = [pos]
            else:
                seen.append(pos)
        boost, encoded = self.field_boost, self._encoded
        for word, poslist in places.items():
            key = tuple(poslist)
            data = encoded.get(key)
            if data is None:
                data = self.encode(poslist)
                if len(encoded) < _VALUES_KEPT:
                    encoded[key] = data
            yield word, len(poslist), float(len(poslist)) * boost, data


def _text_field() -> TEXT:
    field = TEXT(analyzer=TEXT_ANALYZER, phrase=True)
    field.format = WordPositions(field_boost=field.format.field_boost)
    return field


SCHEMA = Schema(
    id=ID(stored=True, unique=True),
    subject=_text_field(),
    text=_text_field(),
    to=KEYWORD(lowercase=True),
    thread=ID(analyzer=_NAME),
    topic=ID(analyzer=_NAME),
    importance=ID(analyzer=_NAME),
    created=DATETIME(sortable=True),
    visible=KEYWORD(lowercase=True),
    data=STORED(),
    **{"from": ID(analyzer=_NAME)},
)

# Fields whose values recur from message to message (agents, threads): a bulk
# build analyzes each distinct value once.
REPEATING = frozenset({"from", "to", "thread", "topic", "importance", "visible"})


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
