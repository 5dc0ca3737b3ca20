"""Message bodies as safe HTML: Markdown rendered, then sanitized.

Bodies are written by agents and are untrusted. Markdown is rendered with
raw HTML turned off (an agent's ``<script>`` shows as text), and the result
passes through an allow-list sanitizer (ammonia, through ``nh3``): only
formatting tags survive, links keep ``http``, ``https`` and ``mailto``, and
``data:`` URIs are kept only as the source of an image of a raster type.
Image references to the archive's attachments are pointed at the view's
attachment route, which serves the stored bytes with their hash checked.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Iterable

import nh3
from markdown_it import MarkdownIt
from markupsafe import Markup

from gitmail.model.records import ATTACHMENT_RE

_md = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable(["table", "strikethrough"])
_TAGS = {"a", "abbr", "b", "blockquote", "br", "code", "del", "em", "h1", "h2", "h3", "h4", "h5", "h6", "hr", "i",
         "img", "li", "ol", "p", "pre", "s", "strong", "sub", "sup", "table", "tbody", "td", "th", "thead", "tr", "ul"}
_ATTRIBUTES = {"a": {"href", "title"}, "img": {"src", "alt", "title"}, "td": {"align"}, "th": {"align"},
               "ol": {"start"}, "code": {"class"}}
_DATA_IMAGE = re.compile(r"^data:image/(png|jpeg|gif|webp);base64,[A-Za-z0-9+/=\s]+$")


def _filter(attachment_base: str) -> Callable[[str, str, str], str | None]:
    def keep(tag: str, attribute: str, value: str) -> str | None:
        if attribute not in ("href", "src"):
            return value
        if value.startswith("data:"):
            return value if tag == "img" and attribute == "src" and _DATA_IMAGE.match(value) else None
        if tag == "img" and ATTACHMENT_RE.match(value.lstrip("/")):
            return f"{attachment_base}/{value.lstrip('/')}"
        return value
    return keep


def markdown(text: str, *, attachment_base: str) -> Markup:
    """``text`` (Markdown) as sanitized HTML; images under ``attachments/`` point below ``attachment_base``."""
    rendered = _md.render(text or "")
    clean = nh3.clean(rendered, tags=_TAGS, attributes=_ATTRIBUTES, url_schemes={"http", "https", "mailto", "data"},
                      link_rel="noopener noreferrer nofollow", attribute_filter=_filter(attachment_base))
    # What may scroll sideways gets the keyboard's focus, so it can be scrolled without a mouse.
    framed = clean.replace("<table>", '<div class="wide" tabindex="0" role="region" aria-label="Table"><table>') \
        .replace("</table>", "</table></div>").replace("<pre>", '<pre tabindex="0">')
    return Markup(_TASK.sub(_task, framed))  # noqa: S704 - sanitized above; the frames and boxes are our own markup


_TASK = re.compile(r"<li>(\s*<p>)?\[( |x|X)\] ")


def _task(found: re.Match[str]) -> str:
    """A task list item (``- [ ]``, ``- [x]``) with a box that says whether it is done."""
    done = found.group(2) != " "
    box = ('<span class="box done" role="img" aria-label="done">☑</span> ' if done
           else '<span class="box" role="img" aria-label="not done">☐</span> ')
    return f'<li class="task">{found.group(1) or ""}{box}'



_WORD = re.compile(r"[^\W_]{2,}\*?")  # words as the search index cuts them (a trailing * is a prefix)
_OPERATORS = {"AND", "OR", "NOT"}
_TEXT_FIELDS = ("subject", "body")  # the fields whose values are words of the text (from:, to:… name things)


def query_terms(query: str) -> list[str]:
    """The words of a search query worth marking in results (operators and filters on names or dates left out)."""
    terms = []
    for part in re.split(r"\s+", query):
        field, colon, value = part.partition(":")
        if colon and field.strip("(-").lower() not in _TEXT_FIELDS:
            continue
        for word in _WORD.findall(value if colon else part):
            if word not in _OPERATORS:
                terms.append(word)
    return terms


def highlight(text: str, terms: Iterable[str]) -> Markup:
    """``text`` escaped, with each whole word of ``terms`` (a trailing ``*`` is a prefix) in ``<mark>``."""
    patterns = [re.escape(t[:-1]) + r"[^\W_]*" if t.endswith("*") else re.escape(t) for t in terms if t.strip("*")]
    escaped = html.escape(text or "")
    if not patterns:
        return Markup(escaped)  # noqa: S704 - escaped
    found = re.compile(r"(?<![^\W_])(?:" + "|".join(patterns) + r")(?![^\W_])", re.IGNORECASE)
    return Markup(found.sub(lambda m: f"<mark>{m.group(0)}</mark>", escaped))  # noqa: S704 - escaped text


def snippet(text: str, terms: Iterable[str]) -> Markup:
    """A search hit's snippet escaped, with no ``**`` left and the words of ``terms`` in ``<mark>``.

    The snippet is plain text cut from the body: the search marks its hits
    with ``**``, and the body's own Markdown may hold ``**`` too, so every
    marker goes and the words searched for are marked again, whole words only.
    """
    return highlight((text or "").replace("**", ""), terms)
