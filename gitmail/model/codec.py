"""Text encodings for records: plain YAML, and YAML front matter over Markdown.

The YAML dialect is deliberately small: timestamps stay strings (no implicit
conversion to datetime), keys keep the order the record declares, long strings
are never folded, and Unicode is written as is. Files gitmail writes therefore
parse back to the same values and serialize to the same bytes.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import yaml
from yaml.resolver import BaseResolver

# libyaml's C parser and emitter when present (several times faster), the
# pure-Python ones otherwise; both produce the same values and bytes.
if TYPE_CHECKING:  # the C classes have the same interface
    _BaseLoader = yaml.SafeLoader
    _BaseDumper = yaml.SafeDumper
else:
    _BaseLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    _BaseDumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class _Loader(_BaseLoader):
    pass


class _Dumper(_BaseDumper):
    pass


def _without_timestamps(cls: type[BaseResolver]) -> None:
    cls.yaml_implicit_resolvers = {
        first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
        for first, resolvers in cls.yaml_implicit_resolvers.copy().items()
    }


_without_timestamps(_Loader)
_without_timestamps(_Dumper)


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _represent_str)

FRONT_MATTER = "---\n"


class DecodeError(ValueError):
    """The bytes are not a well-formed document of the expected shape."""


def _yaml_problem(exc: yaml.YAMLError, text: str) -> str:
    """A parser's complaint, pointing at the line a person has to fix and quoting it.

    The parser notices a missing ``:`` only on the line after it; the line
    where the construct it was reading began (its context) is the one to fix.
    """
    mark = getattr(exc, "context_mark", None) or getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    if mark is None:
        return f"invalid YAML: {problem}"
    lines = text.splitlines()
    quoted = lines[mark.line].strip() if mark.line < len(lines) else ""
    quoted = quoted if len(quoted) <= 60 else quoted[:57] + "..."
    context = getattr(exc, "context", None)
    return (f"invalid YAML at line {mark.line + 1}" + (f" ({quoted!r})" if quoted else "") + f": {problem}"
            + (f" ({context})" if context else ""))


class _NotFlat(Exception):
    """The text uses YAML beyond :func:`flat_mapping`'s subset; the full parser reads it."""


_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*\Z")
_DECIMAL = re.compile(r"(?:0|[1-9][0-9]*)\Z")
_OTHER_BREAKS = re.compile("[\r\x85\u2028\u2029]")
_INDICATORS = frozenset("-?:,[]{}#&*!|>'\"%@`")
_RESOLVERS = _Loader.yaml_implicit_resolvers  # the dialect's, without timestamps
_BOOL, _NULL, _INT = "tag:yaml.org,2002:bool", "tag:yaml.org,2002:null", "tag:yaml.org,2002:int"


def _read_scalar(raw: str) -> Any:
    """The value of one plain or single-quoted scalar, as the YAML loader reads it (or _NotFlat)."""
    if raw[:1] == "'":
        inner = raw[1:-1]
        if len(raw) < 2 or raw[-1] != "'" or "'" in inner.replace("''", "") or not inner.isprintable():
            raise _NotFlat
        return inner.replace("''", "'")
    if (not raw or raw[0] in _INDICATORS or raw[0].isspace() or raw[-1].isspace() or raw[-1] == ":"
            or ": " in raw or " #" in raw or not raw.isprintable()):
        raise _NotFlat
    for tag, pattern in _RESOLVERS.get(raw[0], ()):
        if pattern.match(raw):
            if tag == _BOOL:
                return raw.lower() in ("yes", "true", "on")
            if tag == _NULL:
                return None
            if tag == _INT and _DECIMAL.match(raw):
                return int(raw)
            raise _NotFlat  # floats, other integer forms, merge keys: the full parser's business
    return raw


def flat_mapping(text: str) -> dict[str, Any] | None:
    """``text`` read as YAML, if it is a flat mapping of scalars and lists of scalars; None otherwise.

    Every record gitmail writes but an attachment list is such a mapping:
    ``key: value`` lines and ``key:`` followed by ``- item`` lines, values
    plain or single-quoted. Reading those line by line costs a fraction of
    building the YAML loader's node tree in Python, which was most of the
    time a rebuild spent outside the search index. Anything else (double
    quotes, flow or block styles, nesting, comments, repeated keys, a value
    the loader would read as a float) returns None, and the caller uses the
    full parser; ``tests/test_index_parse.py`` and ``tests/test_records.py``
    hold the two to the same answers.
    """
    if _OTHER_BREAKS.search(text):
        return None  # YAML breaks lines there too
    out: dict[str, Any] = {}
    listing: tuple[str, list[Any]] | None = None
    try:
        for line in text.split("\n"):
            if line.startswith("- ") and listing is not None:
                listing[1].append(_read_scalar(line[2:]))
                continue
            if listing is not None:
                out[listing[0]] = listing[1] or None
                listing = None
            if not line:
                continue
            key, sep, raw = line.partition(": ")
            if not sep:
                if not line.endswith(":"):
                    return None
                key = line[:-1]
            if key in out or not _KEY.match(key) or _read_scalar(key) != key:
                return None
            if sep:
                out[key] = _read_scalar(raw)
            else:
                listing = key, []
    except _NotFlat:
        return None
    if listing is not None:
        out[listing[0]] = listing[1] or None
    return out or None  # an empty document is no mapping: the loader says so


def load_yaml(data: bytes) -> dict[str, Any]:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DecodeError(f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    return load_text(text)


def load_text(text: str) -> dict[str, Any]:
    """A YAML mapping: read line by line when it is flat (what gitmail writes), else by the YAML parser."""
    flat = flat_mapping(text)
    if flat is not None:
        return flat
    try:
        value = yaml.load(text, Loader=_Loader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        raise DecodeError(_yaml_problem(exc, text)) from None
    if not isinstance(value, dict):
        raise DecodeError("expected a YAML mapping of field: value")
    return value


# A string the YAML emitter writes as it is (a plain scalar), whatever the dialect's resolvers say of it:
# a letter or digit first, then ASCII without quotes, comment or flow markers, a colon or a space only inside
# and before another such character, at most 1,000 characters (far below the line width).
_PLAIN = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9_.@/+=-]|[: ](?=[A-Za-z0-9_.@/+=-])){0,999}")
# One it writes in single quotes: printable ASCII on one line that it cannot write plain, because it reads
# as another type (see _implicit) or has what marks the end of a plain scalar (an indicator first, ': ' or
# ' #' inside, a colon last, a space first or last).
_QUOTABLE = re.compile(r"[ -~]{0,1000}")
_NOT_PLAIN = re.compile(r"^[-?:](?: |$)|^[#,\[\]{}&*!|>'\"%@`]|^---|^\.\.\.|: | #|:$|^ | $")
_IMPLICIT = _Dumper.yaml_implicit_resolvers


def _implicit(text: str) -> bool:
    """Whether ``text`` written plain would read back as something else (a number, a flag, null...)."""
    for _, pattern in _IMPLICIT.get(text[:1], ()):
        if pattern.match(text):
            return True
    return False


def _plain(text: str) -> bool:
    """Whether ``text`` is written as a plain scalar that reads back as this same string."""
    return _PLAIN.fullmatch(text) is not None and (text[0] not in _IMPLICIT or not _implicit(text))


def _scalar(text: str) -> str | None:
    """How the emitter writes ``text`` as a value: plain, or in single quotes; None when it is not sure which."""
    if _plain(text):
        return text
    if _QUOTABLE.fullmatch(text) and (_implicit(text) or _NOT_PLAIN.search(text)):
        return "'" + text.replace("'", "''") + "'"
    return None


_PLAIN_KEYS: dict[str, bool] = {}  # field names seen, and whether each is plain (records have few)


def _plain_key(key: object) -> bool:
    if not isinstance(key, str):
        return False
    known = _PLAIN_KEYS.get(key)
    if known is None:
        known = _plain(key)
        if len(_PLAIN_KEYS) < 4096:
            _PLAIN_KEYS[key] = known
    return known


def _dump_plain(value: dict[str, Any]) -> bytes | None:
    """The bytes :func:`dump_yaml` gives a mapping of one-line ASCII strings, flags, whole numbers and lists of
    such strings, written without the emitter (most records are such mappings); None for anything else."""
    lines = []
    for key, item in value.items():
        if not _plain_key(key):
            return None
        if isinstance(item, bool):
            lines.append(f"{key}: {'true' if item else 'false'}")
        elif isinstance(item, int):
            lines.append(f"{key}: {item}")
        elif isinstance(item, str):
            written = _scalar(item)
            if written is None:
                return None
            lines.append(f"{key}: {written}")
        elif isinstance(item, list) and item and all(isinstance(x, str) for x in item):
            items = [_scalar(x) for x in item]
            if None in items:
                return None
            lines.append(f"{key}:")
            lines += [f"- {x}" for x in items]
        else:
            return None
    return ("\n".join(lines) + "\n").encode("ascii") if lines else None


def dump_yaml(value: dict[str, Any]) -> bytes:
    plain = _dump_plain(value)
    if plain is not None:
        return plain
    text = yaml.dump(
        value,
        Dumper=_Dumper,
        sort_keys=False,
        allow_unicode=True,
        default_flow_style=False,
        width=10_000,
    )
    return text.encode("utf-8")


def split_front_matter(data: bytes) -> tuple[dict[str, Any], str]:
    """Split a Markdown document into its YAML front matter and its body."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DecodeError(f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    if not text.startswith(FRONT_MATTER):
        raise DecodeError("missing YAML front matter (the file must start with a '---' line)")
    end = text.find("\n---\n", len(FRONT_MATTER) - 1)
    if end < 0:
        raise DecodeError("unterminated YAML front matter (no closing '---' line)")
    header = text[len(FRONT_MATTER) : end + 1]
    body = text[end + len("\n---\n") :]
    if body.startswith("\n"):
        body = body[1:]
    return load_text(header), body


def join_front_matter(header: dict[str, Any], body: str) -> bytes:
    return FRONT_MATTER.encode() + dump_yaml(header) + b"---\n\n" + body.encode("utf-8")
