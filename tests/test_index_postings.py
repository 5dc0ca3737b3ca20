"""The search index's posting format answers exactly what Whoosh's own format answers.

:mod:`gitmail.index.postings` stores posting lists in blocks of its own,
with a table of block ends to skip by. Everything above the postings
(queries, matchers, scoring) is Whoosh's, so each posting list must read
back as the same documents, weights and values, with the same block bounds,
whether it is walked, skipped through or listed; and short lists kept in
the term table must read back too. The same documents are written once
with each codec and every term of every field compared.
"""

from __future__ import annotations

import datetime as dt
import random
import tempfile
from array import array

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from whoosh import fields
from whoosh.codec.whoosh3 import W3Codec
from whoosh.filedb.filestore import FileStorage
from whoosh.util.numeric import byte_to_length, length_to_byte

from gitmail.index import postings
from gitmail.index.postings import Codec
from gitmail.index.schema import SCHEMA

WORDS = ["plan", "build", "quasar", "rollback", "café", "x", "deploy"]

# Every kind of field the index has: positions (text), frequencies (keywords), bare
# existence (IDs), numbers and dates, and the index's own schema with its own text format.
KINDS = fields.Schema(
    id=fields.ID(stored=True, unique=True),
    words=fields.TEXT(phrase=True),
    tags=fields.KEYWORD(scorable=True),
    count=fields.NUMERIC(),
)


def _write(schema, docs, codec, folder: str) -> object:
    # In a folder of its own: Whoosh's writer keeps its temporary files beside the index, under a random
    # name that test processes seeding the shared random generator alike would otherwise share.
    ix = FileStorage(folder).create_index(schema)
    writer = ix.writer(codec=codec)
    for doc in docs:
        writer.add_document(**doc)
    writer.commit()
    return ix


def _walk(matcher) -> list:
    out = []
    while matcher.is_active():
        out.append((matcher.id(), matcher.weight(), matcher.value(), matcher.block_max_weight(),
                    matcher.block_min_length(), matcher.block_max_length()))
        matcher.next()
    return out


def _skips(matcher, targets: list[int]) -> list:
    out = []
    for target in targets:
        if not matcher.is_active():
            break
        matcher.skip_to(target)
        out.append((matcher.id(), matcher.value()) if matcher.is_active() else None)
    return out


def _every_term(schema, docs, seed: int) -> list:
    """For each codec: every term's walk, skips to random targets and all its documents; every posting."""
    answers = []
    for codec in (W3Codec(), Codec()):
        with tempfile.TemporaryDirectory(prefix="gitmail-postings-") as folder:
            answers.append(_read_every_term(_write(schema, docs, codec, folder), len(docs), seed))
    return answers


def _read_every_term(ix, count: int, seed: int) -> list:
    rng = random.Random(seed)
    found = []
    with ix.reader() as reader:
        for fieldname, text in reader.all_terms():
            targets = sorted(rng.sample(range(count + 5), min(20, count + 5)))
            found.append((fieldname, text, _walk(reader.postings(fieldname, text)),
                          _skips(reader.postings(fieldname, text), targets),
                          list(reader.postings(fieldname, text).all_ids())))
        found.append(list(reader.iter_postings()))  # what a merge reads
    return found


def _docs(draws: list[tuple[list[str], list[str], int]]) -> list[dict]:
    return [{"id": f"m{k}", "words": " ".join(words), "tags": " ".join(tags), "count": count}
            for k, (words, tags, count) in enumerate(draws)]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.lists(st.sampled_from(WORDS), max_size=30), st.lists(st.sampled_from(WORDS), max_size=4),
                          st.integers(0, 5)), min_size=1, max_size=600),
       st.integers(0, 1000))
def test_every_posting_list_reads_back_as_whoosh_writes_it(draws, seed):
    """Lists from one posting (kept in the term table) to several blocks, in every kind of field."""
    whoosh_answers, ours = _every_term(KINDS, _docs(draws), seed)
    assert ours == whoosh_answers


@pytest.mark.parametrize("gap", [1, 300, 70_000])
@pytest.mark.parametrize("weights", [[1.0] * 128, [2.5] * 128, [float(k % 7 + 1) for k in range(128)],
                                     [k / 3 for k in range(128)], [float(300 + k) for k in range(128)]])
@pytest.mark.parametrize(("values", "fixedsize"), [
    ([b""] * 128, 0), ([bytes([k]) * 4 for k in range(128)], 4), ([b"v%d" % k for k in range(128)], -1),
    ([b"x" * (70_000 if k == 5 else 3) for k in range(128)], -1), ([b"" if k % 2 else b"p" for k in range(128)], -1),
])
def test_a_block_reads_back_as_written(gap, weights, values, fixedsize):
    """Document gaps of one, two and four bytes; weights all one, all equal, small whole numbers or not;
    values absent, of a fixed size, short, long (compressed), or missing for some postings."""
    ids = array("I", range(10, 10 + 128 * gap, gap))
    stored = [value for value in values if value]  # Whoosh keeps no value for an empty one
    data = postings.encode_block(ids, array("f", weights), stored, fixedsize, 3, 40, max(weights))
    block = postings.Block(b"pad" + data, 3)
    top = array("f", [max(weights)])[0]  # kept as a 32-bit float, as Whoosh keeps it
    assert (block.count, block.first, block.last, block.maxweight) == (128, ids[0], ids[-1], top)
    assert (block.minlength, block.maxlength) == (byte_to_length(length_to_byte(3)), byte_to_length(length_to_byte(40)))
    assert block.ids() == list(ids)
    assert list(block.weights()) == list(array("f", weights))
    assert list(block.values(fixedsize)) == ([None] * 128 if fixedsize == 0 else stored)


def test_the_index_schema_reads_back_as_whoosh_writes_it():
    """The index's own fields (its text format included), through the search index's documents."""
    rng = random.Random(8)
    docs = []
    for k in range(400):
        docs.append({"id": f"m{k:04d}", "subject": " ".join(rng.choices(WORDS, k=3)),
                     "text": " ".join(rng.choices(WORDS, k=rng.randint(0, 40))), "from": rng.choice(WORDS),
                     "to": " ".join(rng.sample(["a", "b", "c"], 2)), "created": dt.datetime(2026, 9, 1 + k % 28),
                     "visible": " ".join(rng.sample(["a", "b", "c"], 2)), "data": {"k": k}})
    whoosh_answers, ours = _every_term(SCHEMA, docs, 4)
    assert ours == whoosh_answers
