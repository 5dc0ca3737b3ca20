"""The search query language, parsed into Whoosh queries.

Grammar (operators in capitals; AND is implied between neighbours)::

    query    := or_expr
    or_expr  := and_expr ("OR" and_expr)*
    and_expr := unary ("AND"? unary)*
    unary    := ("NOT" | "-") unary | "(" or_expr ")" | term
    term     := [field ":"] value
    value    := word | prefix* | "a phrase" | date | >date | >=date | <date | <=date
              | [date TO date] | date..date                  (dates: created: only)

Fields: ``from:``, ``to:`` (to and cc), ``subject:``, ``body:``, ``thread:``,
``topic:``, ``importance:``, ``created:``. Words without a field (and ``body:``)
search the message text: the subject and the body. Dates are ``YYYY``, ``YYYY-MM``, ``YYYY-MM-DD`` or a full
timestamp (UTC); a date names its whole period, so ``created:2026-12-01`` is
that day and ``created:<2026-12`` is everything before December.

The parser is our own so that every malformed query gets an error naming the
position and the problem (Whoosh's parser silently drops what it cannot read).
"""

from __future__ import annotations

import calendar
import datetime as dt
import re
from dataclasses import dataclass

from whoosh import query as wq

from gitmail.model.errors import invalid

from .schema import TEXT_ANALYZER

TEXT_FIELD = "text"  # subject and body together (see schema)
NAME_FIELDS = {"from": "from", "to": "to", "thread": "thread", "topic": "topic", "importance": "importance"}
FIELDS = ("from", "to", "subject", "body", "thread", "topic", "importance", "created")
MAX_QUERY = 1000
MIN_PREFIX = 2

_DATE_RE = re.compile(r"^(\d{4})(?:-(\d{2})(?:-(\d{2})(?:T(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,6}))?)?Z?)?)?)?$")


@dataclass
class _Token:
    kind: str  # word, phrase, lparen, rparen, and, or, not, range
    text: str
    pos: int  # 1-based column in the query
    field: str | None = None


def _fail(query: str, pos: int, problem: str) -> Exception:
    return invalid(f"query problem at column {pos}: {problem}", query=query, column=pos)


def _tokens(text: str) -> list[_Token]:
    out: list[_Token] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch.isspace():
            i += 1
            continue
        start = i
        if ch == "(":
            out.append(_Token("lparen", ch, i + 1))
            i += 1
            continue
        if ch == ")":
            out.append(_Token("rparen", ch, i + 1))
            i += 1
            continue
        if ch == "-" and i + 1 < n and not text[i + 1].isspace() and text[i + 1] != ")":
            out.append(_Token("not", ch, i + 1))
            i += 1
            continue
        field = None
        match = re.match(r"([A-Za-z_]+):", text[i:])
        if match:
            field = match.group(1).lower()
            if field not in FIELDS:
                raise _fail(text, i + 1, f"unknown field '{match.group(1)}:'; use one of "
                            f"{', '.join(f + ':' for f in FIELDS)} (put text containing ':' in double quotes)")
            i += len(match.group(0))
            if i >= n or text[i].isspace() or text[i] == ")":
                raise _fail(text, start + 1, f"'{field}:' needs a value right after the colon")
        if i < n and text[i] == '"':
            end = text.find('"', i + 1)
            if end < 0:
                raise _fail(text, i + 1, "this double quote is never closed; add a closing \"")
            out.append(_Token("phrase", text[i + 1 : end], start + 1, field))
            i = end + 1
            continue
        if i < n and text[i] == "[":
            end = text.find("]", i + 1)
            if end < 0:
                raise _fail(text, i + 1, "this '[' is never closed; write a range as [2026-01-01 TO 2026-02-01]")
            out.append(_Token("range", text[i + 1 : end], start + 1, field))
            i = end + 1
            continue
        j = i
        while j < n and not text[j].isspace() and text[j] not in '()"':
            j += 1
        word = text[i:j]
        if j < n and text[j] == '"':
            raise _fail(text, j + 1, "a double quote must start a phrase, not sit inside a word")
        i = j
        if field is None and word in ("AND", "OR", "NOT"):
            out.append(_Token(word.lower(), word, start + 1))
        else:
            out.append(_Token("word", word, start + 1, field))
    return out


class _Parser:
    def __init__(self, text: str):
        self.text = text
        self.tokens = _tokens(text)
        self.i = 0

    def peek(self) -> _Token | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def take(self) -> _Token:
        token = self.tokens[self.i]
        self.i += 1
        return token

    def parse(self) -> wq.Query:
        if not self.tokens:
            raise invalid("the query is empty; give at least one word, phrase or field filter", query=self.text)
        result = self.or_expr()
        token = self.peek()
        if token is not None:
            raise _fail(self.text, token.pos, "')' has no matching '('" if token.kind == "rparen"
                        else f"unexpected '{token.text}'")
        return result

    def or_expr(self) -> wq.Query:
        parts = [self.and_expr()]
        while (token := self.peek()) is not None and token.kind == "or":
            self.take()
            parts.append(self.and_expr(after=token))
        return parts[0] if len(parts) == 1 else wq.Or(parts)

    def and_expr(self, after: _Token | None = None) -> wq.Query:
        parts = [self.unary(after)]
        while (token := self.peek()) is not None and token.kind not in ("or", "rparen"):
            if token.kind == "and":
                self.take()
                parts.append(self.unary(token))
            else:
                parts.append(self.unary(None))
        return parts[0] if len(parts) == 1 else wq.And(parts)

    def unary(self, after: _Token | None) -> wq.Query:
        token = self.peek()
        if token is None:
            if after is not None:
                raise _fail(self.text, after.pos, f"'{after.text}' needs something after it")
            raise _fail(self.text, len(self.text) + 1, "the query ends where a term was expected")
        if token.kind in ("and", "or"):
            raise _fail(self.text, token.pos, f"'{token.text}' needs a term before it")
        if token.kind == "rparen":
            if after is not None:
                raise _fail(self.text, after.pos, f"'{after.text}' needs something after it")
            raise _fail(self.text, token.pos, "')' has no matching '('")
        self.take()
        if token.kind == "not":
            return wq.Not(self.unary(token))
        if token.kind == "lparen":
            if (nxt := self.peek()) is not None and nxt.kind == "rparen":
                raise _fail(self.text, token.pos, "empty parentheses")
            inner = self.or_expr()
            closing = self.peek()
            if closing is None or closing.kind != "rparen":
                raise _fail(self.text, token.pos, "this '(' is never closed; add a ')'")
            self.take()
            return inner
        return self.term(token)

    # -- terms ----------------------------------------------------------------
    def term(self, token: _Token) -> wq.Query:
        field = token.field
        if field == "created":
            return self.created(token)
        if token.kind == "range":
            raise _fail(self.text, token.pos, "a [from TO to] range works only with created:")
        if field in NAME_FIELDS:
            return self.name(token, field)
        target = "subject" if field == "subject" else TEXT_FIELD
        if token.kind == "phrase":
            words = _analyze(token.text)
            if not words:
                raise _fail(self.text, token.pos, "this phrase has no searchable words")
            return wq.Term(target, words[0]) if len(words) == 1 else wq.Phrase(target, words)
        emphasis = token.text.startswith("*")  # ``**deploy**`` pasted from Markdown: the words inside
        if token.text.endswith("*") and not emphasis:
            return self.prefix(token, target)
        if ("*" in token.text and not emphasis) or "?" in token.text:
            raise _fail(self.text, token.pos, "'*' is allowed only at the end of a word (a prefix search)")
        words = _analyze(token.text)
        if not words:
            raise _fail(self.text, token.pos, f"'{token.text}' has no letters or digits to search for")
        return wq.Term(target, words[0]) if len(words) == 1 else wq.Phrase(target, words)

    def prefix(self, token: _Token, target: str) -> wq.Query:
        """``migr*``: words starting so; ``snake_ca*``, cut into words as the text is, those words in a row."""
        stem = token.text[:-1]
        words = _analyze(stem) if "*" not in stem else []
        if not words or len(words[-1]) < MIN_PREFIX or not stem[-1:].isalnum():
            raise _fail(self.text, token.pos, f"a prefix search needs at least {MIN_PREFIX} letters or digits "
                        "before a final '*' (and '*' nowhere else)")
        if len(words) == 1:
            return wq.Prefix(target, words[0])
        return wq.Sequence([*(wq.Term(target, w) for w in words[:-1]), wq.Prefix(target, words[-1])])

    def name(self, token: _Token, field: str) -> wq.Query:
        value = token.text.strip().lower()
        if not value:
            raise _fail(self.text, token.pos, f"'{field}:' needs a value")
        if token.kind == "word" and value.endswith("*") and field != "importance":
            stem = value[:-1]
            if len(stem) < 1 or "*" in stem:
                raise _fail(self.text, token.pos, f"'{field}:' prefix needs at least one character before '*'")
            return wq.Prefix(NAME_FIELDS[field], stem)
        return wq.Term(NAME_FIELDS[field], value)

    def created(self, token: _Token) -> wq.Query:
        text = token.text.strip()
        if token.kind == "range":
            pieces = re.split(r"\s+(?:TO|to)\s+", text)
            if len(pieces) != 2:
                raise _fail(self.text, token.pos, "write a date range as [2026-01-01 TO 2026-02-01]")
            start, end = (self._date(p.strip(), token.pos) if p.strip() not in ("", "*") else None for p in pieces)
            return _range(start[0] if start else None, end[1] if end else None)
        if token.kind == "phrase":
            raise _fail(self.text, token.pos, "created: takes a date, not a phrase")
        if ".." in text:
            lo, hi = text.split("..", 1)
            start = self._date(lo, token.pos) if lo else None
            end = self._date(hi, token.pos) if hi else None
            return _range(start[0] if start else None, end[1] if end else None)
        for op in (">=", "<=", ">", "<"):
            if text.startswith(op):
                first, last = self._date(text[len(op):], token.pos)
                if op == ">=":
                    return _range(first, None)
                if op == ">":
                    return _range(last + dt.timedelta(microseconds=1), None)
                if op == "<=":
                    return _range(None, last)
                return _range(None, first - dt.timedelta(microseconds=1))
        first, last = self._date(text, token.pos)
        return _range(first, last)

    def _date(self, text: str, pos: int) -> tuple[dt.datetime, dt.datetime]:
        """The first and last instant of the period a date names."""
        match = _DATE_RE.match(text)
        try:
            if not match:
                raise ValueError
            year, month, day, hour, minute, second, frac = match.groups()
            y = int(year)
            if month is None:
                return dt.datetime(y, 1, 1), dt.datetime(y, 12, 31, 23, 59, 59, 999999)
            m = int(month)
            if day is None:
                last_day = calendar.monthrange(y, m)[1]
                return dt.datetime(y, m, 1), dt.datetime(y, m, last_day, 23, 59, 59, 999999)
            d = int(day)
            if hour is None:
                return dt.datetime(y, m, d), dt.datetime(y, m, d, 23, 59, 59, 999999)
            micro = int((frac or "0").ljust(6, "0"))
            moment = dt.datetime(y, m, d, int(hour), int(minute), int(second or 0), micro)
            return moment, moment
        except ValueError:
            raise _fail(self.text, pos, f"'{text}' is not a date; use YYYY, YYYY-MM, YYYY-MM-DD or "
                        "YYYY-MM-DDTHH:MM:SSZ (UTC)") from None


def _analyze(text: str) -> list[str]:
    return [token.text for token in TEXT_ANALYZER(text)]


def _range(start: dt.datetime | None, end: dt.datetime | None) -> wq.Query:
    return wq.DateRange("created", start, end)


def parse_query(text: str) -> wq.Query:
    """Parse a search query; INVALID_ARGUMENT names the column of any problem."""
    if not isinstance(text, str):
        raise invalid("the query must be text")
    if len(text) > MAX_QUERY:
        raise invalid(f"the query is longer than {MAX_QUERY} characters; shorten it", query=text[:80])
    return _Parser(text).parse().normalize()
