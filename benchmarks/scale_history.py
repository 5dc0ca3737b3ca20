"""A realistic archive of any size, written with ``git fast-import``, for the scale benchmarks.

``build(home, messages)`` creates a store with one project and fills it with
a history of ``messages`` messages spread over DAYS days (ending at the build
time, or at ``end``), sent among AGENTS agents: threads of replies, topics,
cc and the odd bcc, read and acknowledgement receipts, and file
reservations, taken and mostly released. Each commit holds the records of
COMMIT_EVERY messages in time order (or a day's worth, if more: a commit
rewrites the folders of the days it touches, so fewer, larger commits keep
a million-message build to minutes), authored by the agent who wrote most
of them.

Every path comes from :mod:`gitmail.model.records` (``message_path``,
``inbox_path``, ``receipt_path``, ...) and is filed where the archive's own
layout keeps it (``placed``, at the layout ``project.yaml`` says: new
archives are at the newest, layout 2, whose day folders fan out by the end
of each ID), so the history follows the archive's layout when that changes. The record bytes are made from templates for
speed (a million messages in a few minutes), and a sample of them is parsed
back with the record classes, which must accept each at its path and
re-serialize it to the same bytes: a template that drifted from the record
format stops the build instead of benchmarking files gitmail would not
write.

Message bodies draw words from a Zipf-distributed vocabulary and carry the
words the search benchmarks ask for (``plan`` in about 30% of messages,
the phrase ``build plan`` in 2%, ``migrat*`` words in 5%, ``quasar`` in
five), so query costs are comparable across benchmarks.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import random
import subprocess
import time
from collections.abc import Iterator
from typing import IO, Any

from bench_index import plant_query_words

from gitmail import Store
from gitmail.index import indexer_for
from gitmail.mail.facade import Mail
from gitmail.model.clock import format_ts
from gitmail.model.ids import IdMinter
from gitmail.model.records import (
    LAYOUT,
    Message,
    Receipt,
    Reservation,
    inbox_path,
    message_path,
    outbox_path,
    placed,
    receipt_path,
    reservation_path,
)

PROJECT = "/bench/scale"
AGENTS = [f"Agent{i:02d}" for i in range(50)]
DAYS = 90
COMMIT_EVERY = 2000  # messages per commit, or a day's messages if more (each commit rewrites its days' folders)
NEW_THREAD = 0.35  # share of messages that start a thread; the rest reply to a recent one
LIVE_THREADS = 400  # threads a reply may pick from (the most recent ones)
READ_SHARE = 0.7  # share of received copies with a read receipt
RESERVE_EVERY = 200  # one reservation per this many messages
CHECK_EVERY = 5000  # every this many records of each kind are parsed back with the record classes
MANIFEST = "scale-history.json"
VOCABULARY = 8000
POOL_WORDS = 1 << 20  # words drawn from the vocabulary once; texts are runs of them
TOPICS = ["ops", "deploy", "review", "infra", "release"]


@dataclasses.dataclass
class History:
    """What was built: where, how much, and how long it took."""

    home: str
    project: str
    messages: int
    receipts: int
    reservations: int
    commits: int
    first_ts: str
    last_ts: str
    seconds: float
    layout: int  # the archive's layout (a history kept at an older one is not reused)

    def save(self) -> None:
        with open(os.path.join(self.home, MANIFEST), "w", encoding="utf-8") as handle:
            json.dump(dataclasses.asdict(self), handle)

    @classmethod
    def load(cls, home: str) -> History | None:
        """The history kept in ``home`` by an earlier build, or None if there is none."""
        try:
            with open(os.path.join(home, MANIFEST), encoding="utf-8") as handle:
                return cls(**(json.load(handle) | {"home": home}))
        except (OSError, ValueError, TypeError):
            return None


def _ts(ms: int) -> str:
    return format_ts(dt.datetime.fromtimestamp(ms / 1000, dt.UTC))


def _hlc(ms: int, node: str) -> str:
    return f"{_ts(ms)}/0000/{node}"


def _names(items: list[str]) -> str:
    return "".join(f"- {name}\n" for name in items)


class _Words:
    """Message subjects and bodies drawn from one Zipf vocabulary, with the benchmark's query words planted.

    Words are drawn once into a pool of POOL_WORDS; a text is a run of the
    pool from a random place (drawing each word costs a bisection, most of
    the builder's time at a million messages).
    """

    def __init__(self, rng: random.Random) -> None:
        letters = "abcdefghijklmnopqrstuvwxyz"
        self.rng = rng
        self.vocab = ["".join(rng.choice(letters) for _ in range(rng.randint(3, 9))) for _ in range(VOCABULARY)]
        weights = [1 / (k + 1) for k in range(VOCABULARY)]
        total, acc, cum = sum(weights), 0.0, []
        for weight in weights:
            acc += weight / total
            cum.append(acc)
        self.pool = rng.choices(self.vocab, cum_weights=cum, k=POOL_WORDS)

    def pick(self, count: int) -> list[str]:
        start = self.rng.randrange(POOL_WORDS - count)
        return self.pool[start:start + count]

    def body(self, rare: bool) -> str:
        return " ".join(plant_query_words(self.rng, self.pick(self.rng.randint(30, 90)), rare)) + "\n"


@dataclasses.dataclass
class _Message:
    id: str
    thread_id: str
    sender: str
    to: list[str]
    cc: list[str]
    bcc: list[str]
    created_ms: int
    subject: str
    importance: str
    ack_required: bool
    topic: str | None
    reply_to: str | None
    body: str

    def text(self, *, with_bcc: bool) -> bytes:
        """The file as gitmail writes it (the canonical file and inbox copies have no bcc)."""
        subject = f"'{self.subject}'" if ": " in self.subject else self.subject  # YAML quotes "Re: ..."
        head = [f"---\nid: {self.id}\nthread_id: {self.thread_id}\nfrom: {self.sender}\n"
                f"subject: {subject}\ncreated: {_ts(self.created_ms)}\nto:\n{_names(self.to)}"]
        if self.cc:
            head.append(f"cc:\n{_names(self.cc)}")
        if with_bcc and self.bcc:
            head.append(f"bcc:\n{_names(self.bcc)}")
        head.append(f"importance: {self.importance}\nack_required: {'true' if self.ack_required else 'false'}\n")
        if self.topic:
            head.append(f"topic: {self.topic}\n")
        if self.reply_to:
            head.append(f"reply_to: {self.reply_to}\n")
        head.append(f"---\n\n{self.body}")
        return "".join(head).encode()


def _receipt(mid: str, agent: str, read_ms: int, acked_ms: int | None) -> bytes:
    text = f"message_id: {mid}\nagent: {agent}\nhlc: {_hlc(read_ms, agent)}\nread_at: {_ts(read_ms)}\n"
    if acked_ms is not None:
        text += f"acked_at: {_ts(acked_ms)}\n"
    return text.encode()


def _reservation(rid: str, agent: str, created_ms: int, rng: random.Random) -> bytes:
    released = rng.random() < 0.9
    text = (f"id: {rid}\nagent: {agent}\npath_pattern: src/module{rng.randrange(300)}/**\n"
            f"created_ts: {_ts(created_ms)}\nexpires_ts: {_ts(created_ms + 3_600_000)}\n"
            f"hlc: {_hlc(created_ms, agent)}\nexclusive: {'true' if rng.random() < 0.8 else 'false'}\n"
            f"reason: editing module {rng.randrange(300)}\n")
    if released:
        text += f"released_ts: {_ts(created_ms + rng.randrange(60_000, 3_000_000))}\n"
    return text.encode()


def _check(kind: type[Any], data: bytes, path: str, layout: int) -> None:
    """The record class must accept ``data`` at ``path`` (in an archive at ``layout``) and write it back as it was."""
    record = kind.from_bytes(data, path)
    if record.to_bytes() != data or placed(record.path(), layout) != path:
        raise SystemExit(f"the history builder's {kind.__name__} template no longer matches the record format "
                         f"({path}); update benchmarks/scale_history.py")


class _Generator:
    """Messages in time order, with their receipts and the reservations taken meanwhile."""

    def __init__(self, messages: int, start_ms: int, span_ms: int, seed: int) -> None:
        self.rng = random.Random(seed)
        self.words = _Words(self.rng)
        self.count, self.start_ms, self.span_ms = messages, start_ms, span_ms
        self.minter = IdMinter()
        self.threads: list[tuple[str, str, list[str], str]] = []  # (thread id, last message, parties, subject)
        self.rare = set(self.rng.sample(range(messages), min(5, messages)))

    def message(self, i: int) -> _Message:
        rng = self.rng
        ms = self.start_ms + i * self.span_ms // self.count
        mid = self.minter.mint(ms)
        if self.threads and rng.random() > NEW_THREAD:
            k = len(self.threads) - 1 - min(int(rng.expovariate(1 / 40)), len(self.threads) - 1)
            thread, parent, parties, subject = self.threads[k]
            sender = rng.choice(parties)
            to = [name for name in parties if name != sender][:3] or [rng.choice(AGENTS)]
            subject = subject if subject.startswith("Re: ") else "Re: " + subject
            self.threads[k] = (thread, mid, parties, subject)
            reply_to: str | None = parent
        else:
            sender = rng.choice(AGENTS)
            to = rng.sample([a for a in AGENTS if a != sender], rng.randint(1, 3))
            subject = " ".join(self.words.pick(rng.randint(3, 7)))
            thread, reply_to = mid, None
            self.threads.append((mid, mid, [sender, *to], subject))
            if len(self.threads) > LIVE_THREADS:
                self.threads.pop(0)
        others = [a for a in AGENTS if a != sender and a not in to]
        cc = rng.sample(others, 1) if rng.random() < 0.15 else []
        bcc = [rng.choice([a for a in others if a not in cc])] if rng.random() < 0.02 else []
        importance = rng.choices(["normal", "high", "urgent", "low"], [80, 10, 5, 5])[0]
        topic = rng.choice(TOPICS) if rng.random() < 0.1 else None
        return _Message(mid, thread, sender, to, cc, bcc, ms, subject, importance, rng.random() < 0.1, topic,
                        reply_to, self.words.body(i in self.rare))

    def receipts(self, msg: _Message) -> Iterator[tuple[str, str, int, int | None]]:
        """(message id, agent, read ms, acked ms) for the recipients who read it."""
        rng = self.rng
        for name in msg.to + msg.cc + msg.bcc:
            if rng.random() < READ_SHARE:
                read = msg.created_ms + rng.randrange(1000, 3_600_000)
                acked = read + rng.randrange(1000, 600_000) if msg.ack_required and rng.random() < 0.8 else None
                yield msg.id, name, read, acked


class _Importer:
    """One ``git fast-import`` writing commits onto ``main``."""

    def __init__(self, git_dir: str, parent: str) -> None:
        self.proc = subprocess.Popen(["git", "--git-dir", git_dir, "fast-import", "--quiet", "--done",
                                      "--depth=10", "--active-branches=1"], stdin=subprocess.PIPE)
        assert self.proc.stdin is not None
        self.out: IO[bytes] = self.proc.stdin
        self.parent: str | None = parent
        self.mark = 0
        self.commits = 0

    def blob(self, data: bytes) -> int:
        self.mark += 1
        self.out.write(b"blob\nmark :%d\ndata %d\n%b\n" % (self.mark, len(data), data))
        return self.mark

    def commit(self, author: str, when_ms: int, summary: str, files: list[tuple[str, int]]) -> None:
        text = summary.encode()
        seconds = when_ms // 1000
        email = f"{author.lower()}@agents.invalid"
        header = (f"commit refs/heads/main\nauthor {author} <{email}> {seconds} +0000\n"
                  f"committer {author} <{email}> {seconds} +0000\n").encode()
        self.out.write(header + b"data %d\n%b\n" % (len(text), text))
        if self.parent is not None:
            self.out.write(f"from {self.parent}\n".encode())
            self.parent = None
        self.out.write("".join(f"M 100644 :{mark} {path}\n" for path, mark in files).encode() + b"\n")
        self.commits += 1

    def close(self) -> None:
        self.out.write(b"done\n")
        self.out.close()
        if self.proc.wait() != 0:
            raise SystemExit("git fast-import failed")


def _write(importer: _Importer, gen: _Generator, layout: int) -> tuple[int, int]:
    """Every message, receipt and reservation, COMMIT_EVERY messages a commit; (receipts, reservations).

    Paths are where an archive at ``layout`` keeps each record.
    """
    def at(path: str) -> str:
        return placed(path, layout)

    files: list[tuple[str, int]] = []
    authors: dict[str, int] = {}
    receipts = reservations = 0
    per_commit = max(COMMIT_EVERY, gen.count // DAYS)
    for i in range(gen.count):
        msg = gen.message(i)
        data = msg.text(with_bcc=False)
        mark = importer.blob(data)
        files.append((at(message_path(msg.id)), mark))
        files += [(at(inbox_path(name, msg.id)), mark) for name in msg.to + msg.cc + msg.bcc]
        outbox = importer.blob(msg.text(with_bcc=True)) if msg.bcc else mark
        files.append((at(outbox_path(msg.sender, msg.id)), outbox))
        if i % CHECK_EVERY == 0:
            _check(Message, data, at(message_path(msg.id)), layout)
        for mid, agent, read, acked in gen.receipts(msg):
            text = _receipt(mid, agent, read, acked)
            files.append((at(receipt_path(agent, mid)), importer.blob(text)))
            if receipts % CHECK_EVERY == 0:
                _check(Receipt, text, at(receipt_path(agent, mid)), layout)
            receipts += 1
        if i % RESERVE_EVERY == RESERVE_EVERY - 1:
            rid = gen.minter.mint(msg.created_ms)
            text = _reservation(rid, msg.sender, msg.created_ms, gen.rng)
            files.append((at(reservation_path(rid)), importer.blob(text)))
            if reservations % 50 == 0:
                _check(Reservation, text, at(reservation_path(rid)), layout)
            reservations += 1
        authors[msg.sender] = authors.get(msg.sender, 0) + 1
        if i % per_commit == per_commit - 1 or i == gen.count - 1:
            author = max(authors, key=lambda name: authors[name])
            importer.commit(author, msg.created_ms, f"{author} and others: {sum(authors.values())} messages", files)
            files, authors = [], {}
    return receipts, reservations


def build(home: str, messages: int, *, end: dt.datetime | None = None, seed: int = 7) -> History:
    """A store in ``home`` (which must not hold one yet) with a history of ``messages`` messages."""
    started = time.perf_counter()
    store = Store(home, background=False, durable=False)
    try:
        mail = Mail(store)
        mail.ensure_project(PROJECT)
        for name in AGENTS:
            mail.register_agent(PROJECT, "bench", "synthetic", name=name, task_description="scale benchmark")
        archive = store.archive(PROJECT)
        tip = archive.tip()
        assert tip is not None
        end_ms = int((end or dt.datetime.now(dt.UTC)).timestamp() * 1000) - 60_000
        span_ms = DAYS * 86_400_000
        gen = _Generator(messages, end_ms - span_ms, span_ms, seed)
        importer = _Importer(archive.git_dir, tip)
        layout = archive.snapshot().layout
        receipts, reservations = _write(importer, gen, layout)
        importer.close()
        history = History(home=home, project=PROJECT, messages=messages, receipts=receipts,
                          reservations=reservations, commits=importer.commits, first_ts=_ts(end_ms - span_ms),
                          last_ts=_ts(end_ms), seconds=round(time.perf_counter() - started, 1), layout=layout)
    finally:
        indexer_for(store).close()
    history.save()
    return history


def kept_or_built(home: str, messages: int, *, reuse: bool) -> History:
    """The history kept in ``home`` (with ``reuse``, if it has ``messages`` messages), else a new one there."""
    if reuse:
        kept = History.load(home)
        if kept is not None and kept.messages == messages and kept.layout == LAYOUT:
            return kept
    if os.path.exists(home) and os.listdir(home):
        raise SystemExit(f"{home} is not empty and holds no history of {messages} messages at layout {LAYOUT} "
                         f"to reuse; delete it to build one there")
    return build(home, messages)
