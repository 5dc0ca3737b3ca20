"""Reservation patterns: normalization, matching files, and exact overlap between globs."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gitmail.coord.globs import covers, normalize, overlaps
from gitmail.model.errors import GitmailError


@pytest.mark.parametrize("a, b, expected", [
    ("src/**/*.py", "src/api/*", True),  # neither matches the other as text
    ("src/*.py", "docs/*", False),
    ("src/api", "src/api/x.py", True),
    ("src/api/", "src/api/v1/x.py", True),
    ("a/*.py", "a/*.txt", False),
    ("a/[a-c]*", "a/b.py", True),
    ("a/[!a-c]x", "a/bx", False),
    ("a/[!a-c]x", "a/?x", True),
    ("**", "anything/at/all", True),
    ("src/a?.py", "src/ab.py", True),
    ("src/a?.py", "src/abc.py", False),
    ("src/*/x", "src/x", True),  # src/x may be a folder holding x
    ("src/*/*.py", "src/*.py", False),
    ("src/*.txt", "src/**/*.py", False),
    ("*.py", "src/a.py", False),  # a wildcard in the last segment matches names, not folders
    ("**/*.py", "src/a.py", True),
    ("src/*", "src/**", True),
])
def test_overlap_is_exact_and_symmetric(a, b, expected):
    a, b = normalize(a), normalize(b)
    assert overlaps(a, b) is expected
    assert overlaps(b, a) is expected


@pytest.mark.parametrize("pattern, path, expected", [
    ("src/api", "src/api/v1/users.py", True),
    ("src/api", "src/apis/x", False),
    ("src/*.py", "src/a.py", True),
    ("src/*.py", "src/sub/a.py", False),
    ("**/*.md", "a/b/c.md", True),
    ("**/*.md", "c.md", True),
    ("docs/**", "docs", True),
])
def test_covers_files(pattern, path, expected):
    assert covers(normalize(pattern), path) is expected


@pytest.mark.parametrize("raw, canonical", [
    ("src/core/", "src/core"), ("src/core/**", "src/core"), ("./a//b/", "a/b"), ("a\\b", "a/b"), ("src/*/", "src/*/**"),
])
def test_normalize(raw, canonical):
    assert normalize(raw) == canonical


@pytest.mark.parametrize("bad", ["", "  ", "/abs/path", "C:/x", "../up", "a/../../b", ".", "a\x00b", 42, None,
                                 "a/" + "x" * 256, "*a" * 17])
def test_bad_patterns(bad):
    with pytest.raises(GitmailError) as info:
        normalize(bad)
    assert info.value.code == "INVALID_ARGUMENT" and info.value.message


_SEGMENTS = ["a", "b", "ab", "*", "a*", "?", "**", "[ab]", "[!a]"]
_UNIVERSE = ["/".join(p) for n in range(1, 4) for p in itertools.product(["a", "b", "ab", "ba", "c"], repeat=n)]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(_SEGMENTS), min_size=1, max_size=3),
       st.lists(st.sampled_from(_SEGMENTS), min_size=1, max_size=3))
def test_overlap_agrees_with_a_brute_force_witness(x, y):
    a, b = normalize("/".join(x)), normalize("/".join(y))
    assert overlaps(a, b) == overlaps(b, a)
    witness = any(covers(a, path) and covers(b, path) for path in _UNIVERSE)
    if witness:
        assert overlaps(a, b)
    if overlaps(a, b) and len(x) + len(y) <= 3 and "**" not in x + y:
        assert witness
