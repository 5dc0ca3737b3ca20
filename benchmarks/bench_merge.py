"""Benchmark of search-index segment merges: Whoosh's merge against the merge that joins posting lists.

Run: ``python benchmarks/bench_merge.py`` (8 segments of 1,000 messages) or
``python benchmarks/bench_merge.py --segments 2,8,16 --docs 500 --repeat 5``.
For each segment count it writes an index of that many segments (synthetic
messages: subjects and bodies drawn from a skewed vocabulary, six agents,
threads and topics; ``--deleted`` documents deleted in every segment), then merges
every segment into one, ``--repeat`` times each way on fresh copies, in
alternating order:

- ``whoosh``: the policy calls Whoosh's ``add_reader`` on each segment, so
  every posting goes through Whoosh's external sort (what the search helper
  did before);
- ``joined``: :func:`gitmail.index.merge.merged_segment`.

Both run with the search index's patches of Whoosh's readers loaded, as in
the search helper.

It measures the CPU time of the commit that merges (this process only:
neither way starts another), checks that both wrote the same term and posting
files, and prints a table of medians and one JSON line with every figure.
"""

from __future__ import annotations

import argparse
import datetime as dt
import glob
import hashlib
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from whoosh import index as windex
from whoosh.reading import SegmentReader

from gitmail.index import bulk
from gitmail.index import search as search_index  # as the search helper runs: with its patches of Whoosh's readers
from gitmail.index.postings import Codec
from gitmail.index.schema import SCHEMA, document

AGENTS = ["Blue", "Green", "Red", "Gray", "Teal", "Plum"]
START = dt.datetime(2026, 9, 1, tzinfo=dt.UTC)
VOCABULARY = [f"word{i}" for i in range(5000)]
WEIGHTS = [1 / (rank + 1) for rank in range(len(VOCABULARY))]  # Zipf: a few words are in every message


def _documents(rng: random.Random, first: int, count: int) -> list[dict]:
    docs = []
    for i in range(first, first + count):
        summary = {"id": f"m{i:07d}", "subject": " ".join(rng.choices(VOCABULARY[:500], k=rng.randint(2, 7))),
                   "from": rng.choice(AGENTS), "to": rng.sample(AGENTS, rng.randint(1, 2)), "cc": [],
                   "thread_id": f"t{i // 5}", "importance": rng.choice(["normal", "normal", "high"]),
                   "ack_required": False, "topic": "ops" if i % 10 == 0 else None,
                   "created_ts": (START + dt.timedelta(seconds=7 * i)).strftime("%Y-%m-%dT%H:%M:%S.000Z")}
        body = " ".join(rng.choices(VOCABULARY, WEIGHTS, k=rng.randint(20, 150)))
        docs.append(document(summary, f"{i:040x}", body, []))
    return docs


def build(folder: str, segments: int, per_segment: int, seed: int, *, deleted: int) -> int:
    """An index of ``segments`` segments of ``per_segment`` documents, ``deleted`` deleted in each; its postings."""
    rng = random.Random(seed)
    os.makedirs(folder)
    ix = windex.create_in(folder, SCHEMA)
    for k in range(segments):
        docs = _documents(rng, k * per_segment, per_segment)
        built = bulk.write_segments(ix, docs)
        writer = ix.writer(compound=False, limitmb=search_index.WRITER_MB, codec=Codec())
        for mid in rng.sample([doc["id"] for doc in docs], deleted):
            writer.delete_by_term("id", mid)
        writer.commit(mergetype=lambda _writer, existing, built=built: existing + built)
    with ix.reader() as reader:
        return sum(reader.doc_frequency(name, text) for name, text in reader.all_terms())


def _whoosh(writer, segments: list) -> list:
    for segment in segments:
        reader = SegmentReader(writer.storage, writer.schema, segment)
        writer.add_reader(reader)
        reader.close()
    return []


def _joined(writer, segments: list) -> list:
    return [search_index.merge.merged_segment(writer, segments)]


def merge(folder: str, join) -> tuple[float, dict[str, str]]:
    """Merge every segment of the index in ``folder`` into one: the commit's CPU seconds, and the files' digests."""
    writer = windex.open_dir(folder).writer(compound=False, limitmb=search_index.WRITER_MB, codec=Codec())
    started = time.process_time()
    writer.commit(mergetype=join)
    cpu = time.process_time() - started
    digests = {}
    for path in glob.glob(os.path.join(folder, "*.trm")) + glob.glob(os.path.join(folder, "*.pst")):
        with open(path, "rb") as handle:
            digests[path.rsplit(".", 1)[1]] = hashlib.sha256(handle.read()).hexdigest()
    return cpu, digests


def run(segments: int, per_segment: int, repeat: int, root: str, *, deleted: int) -> dict:
    original = os.path.join(root, f"original-{segments}")
    postings = build(original, segments, per_segment, seed=segments, deleted=deleted)
    times: dict[str, list[float]] = {"whoosh": [], "joined": []}
    ways = [("whoosh", _whoosh), ("joined", _joined)]
    for attempt in range(repeat):
        found = {}
        for name, join in ways if attempt % 2 == 0 else ways[::-1]:
            folder = os.path.join(root, f"{name}-{segments}-{attempt}")
            shutil.copytree(original, folder)
            cpu, found[name] = merge(folder, join)
            times[name].append(cpu)
            shutil.rmtree(folder)
        if found["whoosh"] != found["joined"]:
            raise SystemExit("the two merges wrote different term or posting files")
    whoosh, joined = (statistics.median(times[name]) for name in ("whoosh", "joined"))
    return {"segments": segments, "docs": segments * per_segment, "deleted": segments * deleted, "postings": postings,
            "whoosh_cpu_s": round(whoosh, 4), "joined_cpu_s": round(joined, 4),
            "whoosh_postings_per_cpu_s": round(postings / whoosh),
            "joined_postings_per_cpu_s": round(postings / joined), "speedup": round(whoosh / joined, 2),
            "runs": {name: [round(t, 4) for t in ts] for name, ts in times.items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--segments", default="8", help="comma-separated segment counts (default 8)")
    parser.add_argument("--docs", type=int, default=1000, help="documents per segment (default 1000)")
    parser.add_argument("--deleted", type=int, default=0, help="documents deleted in each segment (default 0)")
    parser.add_argument("--repeat", type=int, default=5, help="merges each way per segment count (default 5)")
    args = parser.parse_args()
    results = []
    with tempfile.TemporaryDirectory(prefix="bench-merge-") as root:
        for count in (int(part) for part in args.segments.split(",")):
            results.append(run(count, args.docs, args.repeat, root, deleted=args.deleted))
    load = os.getloadavg()
    print(f"{'segments':>8} {'docs':>7} {'postings':>9} {'whoosh CPU s':>13} {'joined CPU s':>13} {'speedup':>8}")
    for row in results:
        print(f"{row['segments']:>8} {row['docs']:>7} {row['postings']:>9} {row['whoosh_cpu_s']:>13.3f} "
              f"{row['joined_cpu_s']:>13.3f} {row['speedup']:>7.2f}x")
    print(f"medians of {args.repeat}; load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print(json.dumps({"bench": "merge", "load": [round(x, 2) for x in load], "results": results}))


if __name__ == "__main__":
    main()
