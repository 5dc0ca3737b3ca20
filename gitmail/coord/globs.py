"""Path patterns for file reservations: validation, matching and overlap.

A pattern names files of a code repository relative to its root, with ``/``
between segments. Inside a segment ``*`` matches any run of characters, ``?``
one character and ``[abc]`` / ``[a-z]`` / ``[!abc]`` one character of a set;
a whole segment ``**`` matches any number of segments (zero included). A
pattern whose last segment is a plain name also covers everything below it,
so reserving ``src/api`` (or ``src/api/``) reserves ``src/api/users.py`` as
well; a wildcard in the last segment matches names only (``src/*.py`` is the
Python files directly in ``src``, ``src/**/*.py`` those at any depth).

Two patterns *overlap* when some path is covered by both. That is decided
exactly, not by testing one pattern against the other as text: ``src/**/*.py``
and ``src/api/*`` overlap (``src/api/x.py``) although neither matches the
other, while ``src/*.py`` and ``docs/*`` do not.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gitmail.model.errors import invalid

MAX_PATTERN = 1024
MAX_SEGMENT = 255  # the longest file name most file systems allow
MAX_STARS = 16  # keeps the exact overlap test cheap for any pair of patterns
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_MAX_CHAR = 0x10FFFF


@dataclass(frozen=True)
class CharSet:
    """One character position: ranges of code points, possibly negated."""

    ranges: tuple[tuple[int, int], ...]
    negated: bool = False

    def has(self, ch: int) -> bool:
        inside = any(lo <= ch <= hi for lo, hi in self.ranges)
        return inside != self.negated

    def some_in(self, lo: int, hi: int) -> bool:
        """Whether this set holds at least one code point of ``[lo, hi]``."""
        if not self.negated:
            return any(a <= hi and lo <= b for a, b in self.ranges)
        point = lo
        for a, b in sorted(self.ranges):
            if b < point:
                continue
            if a > point:
                return True
            point = b + 1
            if point > hi:
                return False
        return point <= hi


ANY = CharSet(((0, _MAX_CHAR),))
STAR = "*"  # a token matching any run of characters within a segment
GLOBSTAR = "**"  # a segment matching any number of segments


def _lit(ch: str) -> CharSet:
    return CharSet(((ord(ch), ord(ch)),))


def _intersects(a: CharSet, b: CharSet) -> bool:
    if not a.negated:
        return any(b.some_in(lo, hi) for lo, hi in a.ranges)
    if not b.negated:
        return any(a.some_in(lo, hi) for lo, hi in b.ranges)
    return True  # two negated sets of finitely many ranges always share a point


def _parse_set(segment: str, start: int) -> tuple[CharSet, int] | None:
    """Parse ``[...]`` at ``start``; None when unterminated (then ``[`` is literal)."""
    i = start + 1
    negated = i < len(segment) and segment[i] in "!^"
    if negated:
        i += 1
    ranges: list[tuple[int, int]] = []
    first = True
    while i < len(segment):
        ch = segment[i]
        if ch == "]" and not first:
            return CharSet(tuple(ranges), negated), i + 1
        first = False
        if i + 2 < len(segment) and segment[i + 1] == "-" and segment[i + 2] != "]":
            lo, hi = ord(ch), ord(segment[i + 2])
            if lo <= hi:
                ranges.append((lo, hi))
            i += 3
        else:
            ranges.append((ord(ch), ord(ch)))
            i += 1
    return None


@functools.lru_cache(maxsize=65536)
def _segment_tokens(segment: str, literal: bool) -> tuple:
    if literal:
        return tuple(_lit(ch) for ch in segment)
    tokens: list = []
    i = 0
    while i < len(segment):
        ch = segment[i]
        if ch == "*":
            if not tokens or tokens[-1] is not STAR:
                tokens.append(STAR)
            i += 1
        elif ch == "?":
            tokens.append(ANY)
            i += 1
        elif ch == "[" and (parsed := _parse_set(segment, i)) is not None:
            tokens.append(parsed[0])
            i = parsed[1]
        else:
            tokens.append(_lit(ch))
            i += 1
    return tuple(tokens)


def _segments_meet(a: tuple, b: tuple) -> bool:
    """Whether two segment globs match at least one common string."""
    if not any(t is STAR for t in a) and not any(t is STAR for t in b):
        return len(a) == len(b) and all(_intersects(x, y) for x, y in zip(a, b, strict=True))
    return _meet(a, b, STAR, _intersects)


def _meet(a: tuple, b: tuple, wild: object, same: Callable[[Any, Any], bool]) -> bool:
    """Whether two token sequences share a match, where ``wild`` matches any run of tokens.

    Dynamic programming over suffixes, filled from the end (no recursion, so
    long patterns cannot exhaust the stack): ``row[j]`` says whether
    ``a[i:]`` and ``b[j:]`` can match the same text.
    """
    la, lb = len(a), len(b)
    below = [False] * (lb + 1)  # the row for i + 1
    for i in range(la, -1, -1):
        row = [False] * (lb + 1)
        for j in range(lb, -1, -1):
            if i == la and j == lb:
                row[j] = True
            elif i < la and a[i] is wild:
                row[j] = below[j] or (j < lb and row[j + 1])
            elif j < lb and b[j] is wild:
                row[j] = row[j + 1] or (i < la and below[j])
            elif i == la or j == lb:
                row[j] = False
            else:
                row[j] = below[j + 1] and same(a[i], b[j])
        below = row
    return below[0]


@dataclass(frozen=True)
class Pattern:
    """A parsed pattern: per segment, either GLOBSTAR or a tuple of tokens."""

    text: str
    segments: tuple
    literal_prefix: tuple[str, ...]  # leading segments without wildcards, for quick rejection


def normalize(pattern: object, field: str = "paths") -> str:
    """The canonical text of a pattern, or INVALID_ARGUMENT saying what to fix."""
    if not isinstance(pattern, str) or not pattern.strip():
        raise invalid(f"{field}: each entry must be a non-empty path or glob relative to the repository root, "
                      f"such as 'src/api/*.py'; got {pattern!r}", field=field)
    text = pattern.strip().replace("\\", "/")
    if len(text) > MAX_PATTERN:
        raise invalid(f"{field}: pattern longer than {MAX_PATTERN} characters", field=field)
    if _CONTROL.search(text):
        raise invalid(f"{field}: pattern {pattern!r} contains control characters", field=field)
    if text.startswith("/") or re.match(r"^[A-Za-z]:/", text):
        raise invalid(f"{field}: {pattern!r} is absolute; give it relative to the repository root "
                      "(for example 'src/app.py' rather than '/home/me/repo/src/app.py')", field=field)
    parts = [p for p in text.split("/") if p not in ("", ".")]
    if any(p == ".." for p in parts):
        raise invalid(f"{field}: {pattern!r} climbs out of the repository with '..'; name paths inside it", field=field)
    if not parts:
        raise invalid(f"{field}: {pattern!r} names nothing; use '**' to mean the whole repository", field=field)
    if any(len(p) > MAX_SEGMENT for p in parts):
        raise invalid(f"{field}: a path segment of {pattern!r} is longer than {MAX_SEGMENT} characters", field=field)
    if len(re.findall(r"\*+", text)) > MAX_STARS:
        raise invalid(f"{field}: {pattern!r} has more than {MAX_STARS} '*' wildcards; use a simpler pattern",
                      field=field)
    if text.endswith("/") and parts[-1] != GLOBSTAR:
        parts.append(GLOBSTAR)
    # ``dir/**`` and ``dir/`` mean what the plain ``dir`` means: everything below it.
    while len(parts) > 1 and parts[-1] == GLOBSTAR and not _has_wildcard(parts[-2]):
        parts.pop()
    return "/".join(parts)


def _has_wildcard(segment: str) -> bool:
    return any(ch in segment for ch in "*?[")


def parse(pattern: str) -> Pattern:
    return _parse(normalize(pattern))


@functools.lru_cache(maxsize=65536)
def _parse(text: str) -> Pattern:
    prefix = []
    for raw in text.split("/"):
        if _has_wildcard(raw):
            break
        prefix.append(raw)
    return Pattern(text, _compile(text, literal=False), tuple(prefix))


@functools.lru_cache(maxsize=65536)
def _compile(text: str, literal: bool) -> tuple:
    segments: list = []
    for raw in text.split("/"):
        if raw == GLOBSTAR and not literal:
            if not segments or segments[-1] is not GLOBSTAR:
                segments.append(GLOBSTAR)
        else:
            segments.append(_segment_tokens(raw, literal))
    # A plain path covers everything below it (it may name a folder); a
    # wildcard in the last segment matches names only.
    last = text.rsplit("/", 1)[-1]
    if (literal or not any(ch in last for ch in "*?[")) and (not segments or segments[-1] is not GLOBSTAR):
        segments.append(GLOBSTAR)
    return tuple(segments)


def _sequences_meet(a: tuple, b: tuple) -> bool:
    return _meet(a, b, GLOBSTAR, _segments_meet)


def _prefixes_differ(a: tuple[str, ...], b: tuple[str, ...]) -> bool:
    return any(x != y for x, y in zip(a, b, strict=False))


def overlaps(a: str, b: str) -> bool:
    """Whether some path is covered by both patterns (both already normalized)."""
    if a == b:
        return True
    pa, pb = _parse(a), _parse(b)
    if _prefixes_differ(pa.literal_prefix, pb.literal_prefix):
        return False
    return _sequences_meet(pa.segments, pb.segments)


def covers(pattern: str, path: str) -> bool:
    """Whether a normalized ``pattern`` covers the file ``path`` (a plain path, no wildcards)."""
    parsed = _parse(pattern)
    parts = tuple(p for p in path.replace("\\", "/").split("/") if p not in ("", "."))
    if _prefixes_differ(parsed.literal_prefix, parts):
        return False
    literal = _compile("/".join(parts), literal=True)[:-1]  # a path covers only itself
    return _sequences_meet(parsed.segments, literal)
