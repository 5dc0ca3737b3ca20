"""Benchmark of derived state: search, inbox pages, send → searchable, rebuild.

Run: ``python benchmarks/bench_index.py`` (10k messages) or
``python benchmarks/bench_index.py --sizes 10000,100000``. For each size it
writes a synthetic archive with ``git fast-import`` (one commit per 5,000
messages, 20 agents, messages spread over 100 days), then measures:

- full rebuild (metadata + search index) time and messages/s; index size; RSS
- search p50/p95 (limit 20) for a common term, a rare term, a phrase, a
  prefix, a field-filtered query, a prefix + recipient filter, and a
  boolean query (OR, AND, NOT and grouping together)
- inbox page p50: served from the cache (same commit) and computed (new commit)
- send → indexed: a message committed through the engine with the background
  indexer attached, until the Whoosh index holds it; and the latency of a
  search made right after send returns (which must find the message)
- query latency after N single-message commits (each its own catch-up and
  Whoosh commit) compared with the freshly built index
- reads through the mail domain, each computed afresh (not from the cache of
  answers at one commit): a 20-message thread (the thread resource and
  ``summarize_thread``), a topic page of 50 (``fetch_topic``), one message by
  ID (the message resource), ``summarize_recent`` over a window holding 20
  messages, and the candidates of a dry-run purge (20 messages); the same
  answer sizes at every archive size, so each should cost the same at 100k
  as at 1k (the table gives the ratio to the smallest size of the run)

Prints a table, then one JSON line with every figure.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from gitmail import Change, Message, Store
from gitmail.index import indexer_for, parse_query, reads
from gitmail.mail.facade import Mail
from gitmail.model.clock import format_ts
from gitmail.model.ids import IdMinter, new_id
from gitmail.model.records import inbox_path, message_path, outbox_path

AGENTS = [f"Agent{i:02d}" for i in range(20)]
PROJECT = "/bench/index"
THREADS, THREAD_LENGTH = 20, 20  # the newest THREADS * THREAD_LENGTH messages form threads of this length
TOPIC_EVERY = 10  # every tenth message has the topic "ops"
SPAN_MS = 100 * 86400 * 1000
START = dt.datetime(2026, 8, 1, tzinfo=dt.UTC)
QUERIES = {
    "common term": "plan",
    "rare term": "quasar",
    "phrase": '"build plan"',
    "prefix": "migrat*",
    "field filter": "from:Agent03 plan",
    "prefix + to: filter": "to:Agent07 migrat*",
    "boolean": "(plan OR migrat*) AND NOT from:Agent03",
}


def words(rng: random.Random) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    return ["".join(rng.choice(letters) for _ in range(rng.randint(3, 9))) for _ in range(8000)]


def plant_query_words(rng: random.Random, body_words: list[str], rare: bool) -> list[str]:
    """``body_words`` with the words QUERIES look for: ``plan`` in about 30% of messages, the phrase
    ``build plan`` in 2%, a ``migrat*`` word in 5%, and ``quasar`` in the ``rare`` ones."""
    if rng.random() < 0.3:
        body_words.insert(rng.randrange(len(body_words)), "plan")
    if rng.random() < 0.02:
        body_words[rng.randrange(len(body_words)):0] = ["build", "plan"]
    if rng.random() < 0.05:
        body_words.insert(rng.randrange(len(body_words)), rng.choice(["migrate", "migration", "migrating"]))
    if rare:
        body_words.append("quasar")
    return body_words


def synthetic(n: int, seed: int = 7) -> list[tuple[str, bytes, str, list[str], bool]]:
    """(id, canonical bytes, sender, recipients, has_bcc) for n messages."""
    rng = random.Random(seed)
    vocab = words(rng)
    weights = [1 / (k + 1) for k in range(len(vocab))]
    rare = set(rng.sample(range(n), min(5, n)))
    threaded = n - THREADS * THREAD_LENGTH
    out = []
    thread = ""
    minter = IdMinter()  # its own: the process's minter never goes back to an earlier size's times
    for i in range(n):
        mid = minter.mint(message_ms(i, n))
        if i >= threaded and (i - threaded) % THREAD_LENGTH == 0:
            thread = mid
        sender = rng.choice(AGENTS)
        to = rng.sample([a for a in AGENTS if a != sender], rng.randint(1, 3))
        body_words = plant_query_words(rng, rng.choices(vocab, weights, k=rng.randint(30, 90)), i in rare)
        subject = " ".join(rng.choices(vocab, weights, k=rng.randint(3, 7)))
        created = format_ts(dt.datetime.fromtimestamp(message_ms(i, n) / 1000, dt.UTC))
        importance = rng.choices(["normal", "high", "urgent", "low"], [80, 10, 5, 5])[0]
        text = (f"---\nid: {mid}\nthread_id: {thread if i >= threaded else mid}\nfrom: {sender}\n"
                f"subject: {subject}\ncreated: '{created}'\n"
                f"to:\n" + "".join(f"- {name}\n" for name in to) + f"importance: {importance}\n"
                + ("topic: ops\n" if i % TOPIC_EVERY == 0 else "")
                + "ack_required: false\n---\n\n" + " ".join(body_words) + "\n")
        out.append((mid, text.encode(), sender, to, False))
    Message.from_bytes(out[0][1], message_path(out[0][0]))  # the engine accepts them
    return out


def message_ms(i: int, n: int) -> int:
    """When the i-th of n synthetic messages was written (n spread evenly over 100 days)."""
    return int(START.timestamp() * 1000) + i * SPAN_MS // n


def fast_import(git_dir: str, parent: str, msgs: list, per_commit: int = 5000) -> None:
    """Write the messages as commits on main with git fast-import."""
    proc = subprocess.Popen(["git", "--git-dir", git_dir, "fast-import", "--quiet", "--done"],
                            stdin=subprocess.PIPE)
    out = proc.stdin
    assert out is not None
    now = int(time.time())
    mark = 0
    for start in range(0, len(msgs), per_commit):
        chunk = msgs[start:start + per_commit]
        files = []
        for mid, data, sender, to, _ in chunk:
            mark += 1
            out.write(b"blob\nmark :%d\ndata %d\n" % (mark, len(data)) + data + b"\n")
            files.append((mark, [message_path(mid), outbox_path(sender, mid)]
                          + [inbox_path(name, mid) for name in to]))
        text = f"bench: {len(chunk)} messages".encode()
        out.write(b"commit refs/heads/main\ncommitter bench <bench@example.org> %d +0000\ndata %d\n" % (now, len(text))
                  + text + b"\n")
        if start == 0:
            out.write(f"from {parent}\n".encode())
        for blob_mark, paths in files:
            for path in paths:
                out.write(f"M 100644 :{blob_mark} {path}\n".encode())
        out.write(b"\n")
    out.write(b"done\n")
    out.close()
    if proc.wait() != 0:
        raise SystemExit("git fast-import failed")


def percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]


def time_queries(index, repeats: int) -> dict[str, tuple[float, float, float]]:
    """Per query: wall p50, wall p95, and CPU p50 of the searching thread (robust on a busy machine)."""
    out = {}
    for name, text in QUERIES.items():
        query = parse_query(text)
        index.search_index.search(query, 20, None)  # warm
        samples, cpu = [], []
        for _ in range(repeats):
            t, c = time.perf_counter(), time.thread_time()
            index.search_index.search(query, 20, None)
            samples.append((time.perf_counter() - t) * 1000)
            cpu.append((time.thread_time() - c) * 1000)
        out[name] = (*percentiles(samples), statistics.median(cpu))
    return out


def narrowing(index, repeats: int) -> dict[str, dict[str, float]]:
    """For each query that intersects: search CPU p50 with the narrowed scan and with Whoosh's leapfrog, same run."""
    from gitmail.index import candidates
    from gitmail.index import search as search_module

    out = {}
    for name, text in QUERIES.items():
        query = parse_query(text)
        if not candidates.intersects(query):
            continue
        figures = {}
        for mode, narrow in (("narrowed", True), ("leapfrog", False), ("narrowed again", True)):
            search_module.PREFILTER = narrow
            index.search_index.search(query, 20, None)  # warm
            cpu = []
            for _ in range(repeats):
                c = time.thread_time()
                index.search_index.search(query, 20, None)
                cpu.append((time.thread_time() - c) * 1000)
            figures[mode] = round(statistics.median(cpu), 2)
        search_module.PREFILTER = True
        figures["ratio"] = round(figures["leapfrog"] / max(min(figures["narrowed"], figures["narrowed again"]),
                                                           1e-6), 2)
        out[name] = figures
    return out


def du(path: str) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                total += os.path.getsize(os.path.join(root, name))
            except OSError:
                pass
    return total


def rss_mb() -> float:
    with open("/proc/self/status", encoding="utf-8") as handle:
        for line in handle:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def send_one(archive, i: int, word: str) -> Message:
    sender, to = AGENTS[i % 20], [AGENTS[(i + 1) % 20]]
    msg = Message(id=new_id(), thread_id="bench", sender=sender, subject=f"live {i}", created_ts=format_ts(
        dt.datetime.now(dt.UTC)), to=to, body=f"fresh {word} text")

    def fn(snap):
        change = Change(f"{sender} sent {msg.id}", author=sender)
        change.put_record(msg)
        change.put(inbox_path(to[0], msg.id), msg)
        change.put(outbox_path(sender, msg.id), msg)
        return change

    archive.transact(fn)
    return msg


class Wall:
    """A wall clock the benchmark sets, so reads over the synthetic past see it as recent."""

    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


READS = ("thread resource", "summarize_thread", "fetch_topic", "message by ID", "summarize_recent",
         "purge candidates")


def time_reads(home: str, msgs: list, repeats: int) -> dict[str, tuple[float, float]]:
    """Per read through the mail domain: wall p50 and CPU p50, each answer computed afresh.

    The answers have the same size at every archive size (see the module's
    docstring); the project index's cache of answers is emptied before each
    call, as a new commit would, so the figure is the read itself.
    """
    wall = Wall()
    store = Store(home, background=False, durable=False, wall=wall)
    mail = Mail(store)
    index = indexer_for(store).project(PROJECT)
    n = len(msgs)
    threaded = n - THREADS * THREAD_LENGTH
    threads = [msgs[threaded + k * THREAD_LENGTH][0] for k in range(THREADS)]
    rng = random.Random(3)
    picked = [msgs[rng.randrange(n)][0] for _ in range(repeats)]
    window_ms = 20 * SPAN_MS // n  # holds 20 messages at every size
    day_ms = 86_400_000

    def recent(k: int) -> None:
        wall.now = message_ms(n - 1 - (k % 50) * 25, n) / 1000 + 0.0005  # a different window each time: no reuse
        mail.summarize_recent(PROJECT, since_hours=window_ms / 3_600_000)

    def purge(k: int) -> None:
        wall.now = (message_ms(20, n) + day_ms) / 1000  # the oldest 20 messages are a day too old
        found = mail.purge_old_messages(PROJECT, max_age_days=1, dry_run=True)
        assert found["purged"] == 20, found["purged"]

    calls = {
        "thread resource": lambda k: mail.get_thread(PROJECT, threads[k % THREADS]),
        "summarize_thread": lambda k: mail.summarize_thread(PROJECT, threads[k % THREADS]),
        "fetch_topic": lambda k: mail.fetch_topic(PROJECT, "ops", limit=50),
        "message by ID": lambda k: mail.get_message(PROJECT, picked[k % len(picked)]),
        "summarize_recent": recent,
        "purge candidates": purge,
    }
    assert mail.get_thread(PROJECT, threads[0])["count"] == THREAD_LENGTH
    out = {}
    for name in READS:
        call = calls[name]
        call(0)  # warm
        samples, cpu = [], []
        for k in range(repeats):
            index._memo_tip = None  # noqa: SLF001 - forget cached answers, as the next commit would
            t, c = time.perf_counter(), time.thread_time()
            call(k)
            samples.append((time.perf_counter() - t) * 1000)
            cpu.append((time.thread_time() - c) * 1000)
        out[name] = (statistics.median(samples), statistics.median(cpu))
    index.close()
    return out


def bench(size: int, singles: int, repeats: int, keep: bool) -> dict:
    home = tempfile.mkdtemp(prefix=f"bench-index-{size}-")
    result: dict = {"messages": size}
    try:
        store = Store(home, background=False, durable=False)
        archive = store.archive(PROJECT, create=True)
        base = archive.transact(lambda snap: Change("bench: start").put("README.md", b"bench\n")).commit
        t = time.perf_counter()
        msgs = synthetic(size)
        fast_import(archive.git_dir, base, msgs)
        result["fixture_s"] = round(time.perf_counter() - t, 1)

        index = indexer_for(store).project(PROJECT)
        t, c = time.perf_counter(), time.process_time()
        index.reindex()
        rebuild = time.perf_counter() - t
        result["rebuild_s"] = round(rebuild, 1)
        result["rebuild_cpu_s"] = round(time.process_time() - c, 1)
        result["rebuild_docs_per_s"] = round(size / rebuild)
        result["index_mb"] = round(du(index.root) / 2**20, 1)
        result["search_mb"] = round(du(index.search_index.root) / 2**20, 1)
        result["segments_fresh"] = index.search_index.segment_count()

        mail = Mail(store)
        mail.ensure_project(PROJECT)  # the project record the mail domain's reads check
        result["reads_ms"] = {name: [round(p50, 3), round(cpu, 3)]
                              for name, (p50, cpu) in time_reads(home, msgs, repeats).items()}

        fresh = time_queries(index, repeats)
        result["search_ms"] = {name: [round(p50, 2), round(p95, 2), round(cpu, 2)]
                               for name, (p50, p95, cpu) in fresh.items()}

        agent = AGENTS[5]
        index.inbox(agent)
        samples = []
        for _ in range(repeats * 5):
            t = time.perf_counter()
            index.inbox(agent, limit=20)
            samples.append((time.perf_counter() - t) * 1000)
        result["inbox_cached_ms"] = [round(x, 3) for x in percentiles(samples)]
        samples = []  # computed straight from the metadata store, as on the first read after a commit
        for flags in [{}, {"urgent_only": True}, {"unread_only": True}] * repeats:
            t = time.perf_counter()
            reads.inbox(index.meta, agent, limit=20, **flags)
            samples.append((time.perf_counter() - t) * 1000)
        result["inbox_computed_ms"] = [round(x, 3) for x in percentiles(samples)]

        # Send → indexed, with the background indexer attached (as in the server): until the
        # Whoosh index itself holds the message (nothing left in its queue).
        lags, sends = [], []
        for i in range(40):
            t0 = time.perf_counter()
            send_one(archive, i, f"zq{i}x{size}")
            t1 = time.perf_counter()
            while index.meta.has_pending() or index.meta.watermark() != archive.tip():
                time.sleep(0.0005)
            lags.append((time.perf_counter() - t1) * 1000)
            sends.append((t1 - t0) * 1000)
        index.flush()
        result["send_ms"] = [round(x, 1) for x in percentiles(sends)]
        result["send_to_indexed_ms"] = [round(x, 1) for x in percentiles(lags)]
        # A search right after send returns: it must already find the message.
        firsts = []
        for i in range(20):
            word = f"zr{i}x{size}"
            send_one(archive, 100 + i, word)
            t = time.perf_counter()
            found = index.search(word, limit=1)
            firsts.append((time.perf_counter() - t) * 1000)
            if not found:
                raise SystemExit(f"a search right after send missed message {i}")
        index.flush()
        result["search_right_after_send_ms"] = [round(x, 1) for x in percentiles(firsts)]

        # N single additions, each its own commit and its own catch-up.
        t = time.perf_counter()
        for i in range(singles):
            send_one(archive, 1000 + i, f"single{i}")
            index.catch_up()
        result["singles"] = singles
        result["singles_s"] = round(time.perf_counter() - t, 1)
        result["segments_before_merge"] = index.search_index.segment_count()
        t = time.perf_counter()
        index.flush()  # the background merge after the burst
        result["merge_wait_s"] = round(time.perf_counter() - t, 1)
        result["segments_after_singles"] = index.search_index.segment_count()
        after = time_queries(index, repeats)
        result["search_after_singles_ms"] = {name: [round(p50, 2), round(p95, 2), round(cpu, 2)]
                                             for name, (p50, p95, cpu) in after.items()}
        result["after_singles_ratio"] = {name: round(after[name][0] / max(fresh[name][0], 1e-6), 2) for name in fresh}
        result["after_singles_cpu_ratio"] = {name: round(after[name][2] / max(fresh[name][2], 1e-6), 2)
                                             for name in fresh}
        result["rss_mb"] = round(rss_mb())
        index.close()
    finally:
        if not keep:
            shutil.rmtree(home, ignore_errors=True)
        else:
            result["home"] = home
    return result


def table(results: list[dict]) -> str:
    lines = []
    for r in results:
        n = r["messages"]
        lines.append(f"== {n:,} messages ==")
        lines.append(f"rebuild: {r['rebuild_s']} s, {r['rebuild_cpu_s']} s CPU ({r['rebuild_docs_per_s']} msg/s); "
                     f"index {r['index_mb']} MB "
                     f"(search {r['search_mb']} MB); RSS {r['rss_mb']} MB; fixture {r['fixture_s']} s")
        lines.append(f"{'query':<22}{'p50 ms':>9}{'p95 ms':>9}{'CPU p50':>9}{'after: p50':>12}{'CPU p50':>9}"
                     f"{'ratio':>7}{'CPU ratio':>10}")
        for name in QUERIES:
            p50, p95, cpu = r["search_ms"][name]
            after = r["search_after_singles_ms"][name]
            lines.append(f"{name:<22}{p50:>9}{p95:>9}{cpu:>9}{after[0]:>12}{after[2]:>9}"
                         f"{r['after_singles_ratio'][name]:>7}{r['after_singles_cpu_ratio'][name]:>10}")
        lines.append(f"inbox page p50/p95: cached {r['inbox_cached_ms'][0]}/{r['inbox_cached_ms'][1]} ms, "
                     f"computed {r['inbox_computed_ms'][0]}/{r['inbox_computed_ms'][1]} ms")
        lines.append(f"send p50/p95 {r['send_ms'][0]}/{r['send_ms'][1]} ms; in the Whoosh index after send returned "
                     f"p50/p95 {r['send_to_indexed_ms'][0]}/{r['send_to_indexed_ms'][1]} ms; a search right after "
                     f"send finds it every time, taking p50/p95 {r['search_right_after_send_ms'][0]}/"
                     f"{r['search_right_after_send_ms'][1]} ms")
        lines.append(f"{r['singles']} single additions in {r['singles_s']} s; segments {r['segments_fresh']} fresh, "
                     f"{r['segments_before_merge']} after the burst, {r['segments_after_singles']} after the "
                     f"background merge ({r['merge_wait_s']} s)")
    first = results[0]
    lines.append(f"== reads through the mail domain, each computed afresh: p50 ms (CPU p50 ms) [ratio to "
                 f"{first['messages']:,}] ==")
    lines.append(f"{'read':<18}" + "".join(f"{r['messages']:>28,}" for r in results))
    for name in READS:
        cells = []
        for r in results:
            p50, cpu = r["reads_ms"][name]
            ratio = p50 / max(first["reads_ms"][name][0], 1e-6)
            cells.append(f"{p50:.2f} ({cpu:.2f}) [{ratio:.2f}x]")
        lines.append(f"{name:<18}" + "".join(f"{cell:>28}" for cell in cells))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000", help="comma-separated message counts (default 10000)")
    parser.add_argument("--singles", type=int, default=1000, help="single-message commits for the drift test")
    parser.add_argument("--repeats", type=int, default=30, help="timed runs per query")
    parser.add_argument("--keep", action="store_true", help="keep the temporary store")
    args = parser.parse_args()
    results = [bench(int(size), args.singles, args.repeats, args.keep) for size in args.sizes.split(",")]
    for r in results:
        r["reads_ratio"] = {name: round(r["reads_ms"][name][0] / max(results[0]["reads_ms"][name][0], 1e-6), 2)
                            for name in READS}
    print(table(results))
    print(json.dumps({"bench": "index", "results": results}))


if __name__ == "__main__":
    main()
