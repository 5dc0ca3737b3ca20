"""One sync compares each pair of trees once and parses each file once: its steps share the diffs and the records.

The steps of a sync read the same changes: the fetch door's record checks
and the merge both read what a fetched tip adds over the merge base; the
reservation findings and the index's catch-up both read what entered
``main``. They hand a :class:`~gitmail.storage.layout.Comparisons` from step
to step. These tests watch every tree comparison a sync asks for (the
record-level one of :mod:`gitmail.storage.layout` and the index's own) and
check that no pair is compared twice, while what the sync does (the records
merged, the findings, the index) stays what it was. Likewise the messages
a sync brings in: the record checks parse each one, and the index's
catch-up takes their records (a :class:`~gitmail.storage.parsed.Parsed`)
instead of parsing the files again.
"""

from __future__ import annotations

import os
import traceback
from collections import Counter

import pygit2
import pytest

from gitmail import Archive, Store
from gitmail.index import parse
from gitmail.index import project as index_project
from gitmail.index.indexer import indexer_for
from gitmail.mail.facade import Mail
from gitmail.mail.sending import SendOptions
from gitmail.model import codec
from gitmail.model.ids import derived_id
from gitmail.model.records import IMPORTED_ID, Agent, Message, message_path
from gitmail.storage import layout
from gitmail.storage.layout import Comparisons, changed_records
from gitmail.storage.parsed import Parsed
from gitmail.sync import syncer
from gitmail.sync.merge import merge_commits
from gitmail.sync.remotes import add_remote, list_remotes
from gitmail.sync.syncer import fetch_remote, sync_project

from .sync_helpers import PROJECT, hub_pair, mail_machine

Pair = tuple[str, str | None, str | None]  # (who compared, old tree, new tree)


def _tree_id(repo: pygit2.Repository, commit: str | None) -> str | None:
    return str(repo[commit].peel(pygit2.Tree).id) if commit else None


def _judging_signers() -> bool:
    """Whether the signature judge asks: it compares each fetched commit with its parent, on its own."""
    return any(frame.filename.endswith(os.path.join("storage", "authorship.py")) for frame in traceback.extract_stack())


def _watch(monkeypatch: pytest.MonkeyPatch) -> list[Pair]:
    """Every tree pair the sync's steps compare from now on (the record-level diff's and the index's), each delegating.

    The signature judge's comparisons of single commits are left out: they
    are not the steps that share their diffs.
    """
    seen: list[Pair] = []
    files, index_diff = layout.tree_delta, index_project.diff

    def tree_delta(old, new, *, git_dir=None):
        if not _judging_signers():
            seen.append(("files", str(old.id) if old is not None else None, str(new.id) if new is not None else None))
        return files(old, new, git_dir=git_dir)

    def diff(repo, old, new, *, trees=None):
        seen.append(("index", _tree_id(repo, old), _tree_id(repo, new)))
        return index_diff(repo, old, new, trees=trees)

    monkeypatch.setattr(layout, "tree_delta", tree_delta)
    monkeypatch.setattr(index_project, "diff", diff)
    return seen


def _twice(seen: list[Pair]) -> list[tuple[str | None, str | None]]:
    """The tree pairs compared more than once, whichever step compared them."""
    counts = Counter((old, new) for _, old, new in seen)
    return [pair for pair, n in counts.items() if n > 1]


def _machines(tmp_path) -> tuple[Mail, Mail]:
    """Two machines on a checked hub sharing the project, each with an agent only it writes for."""
    _, first, second = hub_pair(str(tmp_path))
    first.register("Nova")
    second.register("Orbit")
    for machine in (first, second, first):
        sync_project(machine.store, PROJECT)
    return Mail(first.store), Mail(second.store)


def _restarted(mail: Mail) -> Mail:
    """The machine with its index caught up, as a new process opens it: no index follows its commits yet.

    So nothing but the sync's own catch-up takes in what the sync brings
    (an index already open follows every commit in the background).
    """
    indexer_for(mail.store).project(mail.store.resolve(PROJECT)).catch_up()
    indexer_for(mail.store).close()
    return Mail(Store(mail.store.home, background=False, durable=False))


def _merging(tmp_path) -> tuple[Mail, list[str]]:
    """Machine b, restarted, about to sync three messages machine a sent to the hub over one b wrote meanwhile
    (so its sync merges), and the three messages' IDs."""
    a, b = _machines(tmp_path)
    sent = [a.send_message(PROJECT, "Nova", ["Orbit"], f"arrival {n}", "body").deliveries[0].payload.id
            for n in range(3)]
    sync_project(a.store, PROJECT)
    b.send_message(PROJECT, "Orbit", ["Nova"], "written here meanwhile", "body")
    return _restarted(b), sent


def test_a_merging_sync_compares_each_pair_once_and_the_index_reads_what_entered(tmp_path, monkeypatch):
    b, sent = _merging(tmp_path)
    archive = b.store.archive(PROJECT)
    before = archive.tip()

    seen = _watch(monkeypatch)
    report = sync_project(b.store, PROJECT)

    (result,) = report.results
    assert result.error is None and result.merges == 1 and result.messages_in == 3
    after = archive.tip()
    assert _twice(seen) == []
    assert [who for who, _, _ in seen].count("index") == 0  # the catch-up took the findings' comparison
    repo = archive.repo
    entering = (_tree_id(repo, before), _tree_id(repo, after))
    assert [pair for pair in seen if pair[1:] == entering] == []  # what entered is what the merge wrote: no diff
    learned = Comparisons(None)
    learned.learn_commit(repo, after, archive.changes_of(after))
    trees = [repo[commit].peel(pygit2.Tree) for commit in (before, after)]
    assert learned.known(*trees) == layout.tree_delta(*trees, git_dir=archive.git_dir) != {}
    entered = changed_records(archive.repo[before].peel(pygit2.Tree), archive.repo[after].peel(pygit2.Tree))
    assert {message_path(message_id) for message_id in sent} <= set(entered)
    index = indexer_for(b.store).project(b.store.resolve(PROJECT))
    assert report.index["caught_up"] and index.meta.watermark() == after
    assert index.meta.message_count() == 4
    inbox = b.fetch_inbox(PROJECT, "Orbit", limit=10)
    assert {message["id"] for message in inbox} >= set(sent)


def test_findings_and_merge_are_the_same_when_their_comparisons_are_shared(tmp_path, monkeypatch):
    a, b = _machines(tmp_path)
    assert a.file_reservation_paths(PROJECT, "Nova", ["src/api/*.py"], ttl_seconds=3600)["granted"]
    a.send_message(PROJECT, "Nova", ["Orbit"], "arrival", "body")
    sync_project(a.store, PROJECT)
    assert b.file_reservation_paths(PROJECT, "Orbit", ["src/api/handlers.py"], ttl_seconds=3600)["granted"]
    b = _restarted(b)

    seen = _watch(monkeypatch)
    report = sync_project(b.store, PROJECT)

    (result,) = report.results
    assert result.merges == 1 and result.conflicts == []
    (overlap,) = result.overlaps
    assert {held["agent"] for held in overlap["reservations"]} == {"Nova", "Orbit"}
    assert _twice(seen) == []
    again = sync_project(a.store, PROJECT)  # the other machine finds the same overlap, and merges nothing more
    assert [item["notice"] for item in again.results[0].overlaps] == [overlap["notice"]]
    sync_project(b.store, PROJECT)
    assert a.store.archive(PROJECT).tip() == b.store.archive(PROJECT).tip()


def test_a_fresh_machine_compares_what_it_joins_once(tmp_path, monkeypatch):
    a, _ = _machines(tmp_path)
    for n in range(3):
        a.send_message(PROJECT, "Nova", ["Orbit"], f"history {n}", "body")
    sync_project(a.store, PROJECT)
    fresh = mail_machine(tmp_path, "node-c")
    add_remote(fresh.store, PROJECT, "hub", list_remotes(a.store, PROJECT)["hub"])

    seen = _watch(monkeypatch)
    report = sync_project(fresh.store, PROJECT)

    assert report.results[0].fast_forwards == 1 and report.results[0].messages_in == 3
    assert _twice(seen) == []
    assert fresh.store.archive(PROJECT).tip() == a.store.archive(PROJECT).tip()


def _one_send(tmp_path) -> tuple[Archive, list[pygit2.Tree]]:
    """Machine a's archive and its trees before and after one message."""
    a, _ = _machines(tmp_path)
    archive = a.store.archive(PROJECT)
    old = archive.tip()
    a.send_message(PROJECT, "Nova", ["Orbit"], "one", "body")
    return archive, [archive.repo[commit].peel(pygit2.Tree) for commit in (old, archive.tip())]


def test_comparisons_compare_a_pair_once_and_know_only_what_was_compared(tmp_path):
    archive, trees = _one_send(tmp_path)
    compared = Comparisons(archive.git_dir)
    assert compared.known(*trees) is None
    first = compared.files(*trees)
    assert compared.files(*trees) is first and compared.known(*trees) is first and compared.computed == 1
    assert changed_records(*trees, compared=compared) == changed_records(*trees)
    assert compared.computed == 1
    compared.files(trees[1], trees[0])  # the other way round is another pair
    assert compared.computed == 2


def test_a_merge_takes_the_files_only_the_other_side_changed_as_they_are(tmp_path):
    a, b = _machines(tmp_path)
    sent = [a.send_message(PROJECT, "Nova", ["Orbit"], f"taken {n}", "body").deliveries[0].payload.id
            for n in range(2)]
    sync_project(a.store, PROJECT)
    b.send_message(PROJECT, "Orbit", ["Nova"], "ours", "body")
    archive = b.store.archive(PROJECT)
    theirs, _ = fetch_remote(archive, "hub")
    assert theirs is not None
    repo = archive.repo
    ours = archive.tip()
    assert ours is not None
    merged = merge_commits(repo, ours, theirs)
    their_tree = repo[theirs].peel(pygit2.Tree)
    assert {message_path(message_id) for message_id in sent} <= set(merged.taken)
    assert all(their_tree[path].id == blob for path, blob in merged.taken.items())  # their versions, by id
    assert not set(merged.taken) & set(merged.edits) and merged.conflicts == []
    assert merged.incoming["message"] == 2


def _watch_parses(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """How often each message's front matter is parsed from now on (by id), by any step, each parse delegating."""
    seen: Counter[str] = Counter()
    load = codec.load_text

    def load_text(text: str) -> dict:
        fields = load(text)
        if "thread_id" in fields:
            seen[str(fields.get("id"))] += 1
        return fields

    monkeypatch.setattr(codec, "load_text", load_text)
    return seen


def _index_rows(mail: Mail) -> list[tuple]:
    """The index's row of every message, without the number this machine gave it."""
    meta = indexer_for(mail.store).project(mail.store.resolve(PROJECT)).meta
    return [row[:1] + row[2:] for row in meta.read("SELECT * FROM messages ORDER BY id")]


def test_a_sync_parses_each_message_it_brings_once_and_the_index_is_as_a_reindex_makes_it(tmp_path, monkeypatch):
    a, b = _machines(tmp_path)
    sent = [a.send_message(PROJECT, "Nova", ["Orbit"], f"arrival {n}", f"body {n}",
                           SendOptions(cc=["Orbit"] if n else None, bcc=["Orbit"] if n == 2 else None,
                                       importance="high" if n == 1 else None)).deliveries[0].payload.id
            for n in range(3)]
    sync_project(a.store, PROJECT)
    b.send_message(PROJECT, "Orbit", ["Nova"], "written here meanwhile", "body")
    b = _restarted(b)

    parses = _watch_parses(monkeypatch)
    report = sync_project(b.store, PROJECT)

    (result,) = report.results
    assert result.error is None and result.merges == 1 and result.messages_in == 3
    assert report.index["caught_up"]
    assert {message_id: parses[message_id] for message_id in sent} == {message_id: 1 for message_id in sent}
    synced = _index_rows(b)
    assert {row[0] for row in synced} >= set(sent)
    monkeypatch.undo()
    indexer_for(b.store).project(b.store.resolve(PROJECT)).reindex()  # every file parsed by the index itself
    assert _index_rows(b) == synced
    assert {hit["id"] for hit in b.search_messages(PROJECT, "arrival")} == set(sent)


@pytest.mark.parametrize("extra", [
    {},
    {"cc": ["Orbit", "Mira@other-project-0123456789ab"], "bcc": ["Kite"], "importance": "urgent", "ack_required": True,
     "topic": "release", "attachments": [{"name": "a.txt", "sha256": "ab" * 32, "bytes": 3}]},
    {"importance": "", "human": True},
])
def test_the_index_reads_a_parsed_message_as_it_reads_its_file(extra):
    message = Message(id=derived_id(1_767_323_045_123, b"message"), thread_id="t-1", sender="Nova", subject="hello",
                      created_ts="2026-01-02T03:04:05.123456Z", to=["Orbit"], body="line one\n\nline two\n",
                      **extra)
    if not extra:
        message.extra = {IMPORTED_ID: 1234}
    data = message.to_bytes()
    record = Message.from_bytes(data)
    assert parse.fields_of(record) == parse.message_fields(data, message.id)


def test_parsed_parses_a_blob_once_per_record_type():
    parsed = Parsed()
    calls = []

    def parser(record_type, data):
        calls.append(data)
        return record_type.from_bytes(data)

    message = Message(id=derived_id(1_767_323_045_123, b"message"), thread_id="t-1", sender="Nova", subject="hello",
                      created_ts="2026-01-02T03:04:05Z", to=["Orbit"], body="text\n")
    data = message.to_bytes()
    blob = b"\x01" * 20
    assert parsed.known(Message, blob) is None
    first = parsed.outcome(Message, blob, lambda: data, parser)
    assert parsed.outcome(Message, blob, lambda: data, parser) is first
    assert parsed.known(Message, blob) is first
    assert calls == [data] and parsed.parses == Counter({blob: 1}) and parsed.reused == 2 and len(parsed) == 1


def _watch_sync_values(monkeypatch: pytest.MonkeyPatch) -> tuple[list[Comparisons], list[Parsed]]:
    """The Comparisons and Parsed each sync from now on makes, as it makes them (real ones, only listed)."""
    comparisons: list[Comparisons] = []
    parsed: list[Parsed] = []

    class ListedComparisons(Comparisons):
        def __init__(self, git_dir: str | None) -> None:
            super().__init__(git_dir)
            comparisons.append(self)

    class ListedParsed(Parsed):
        def __init__(self) -> None:
            super().__init__()
            parsed.append(self)

    monkeypatch.setattr(syncer, "Comparisons", ListedComparisons)
    monkeypatch.setattr(syncer, "Parsed", ListedParsed)
    return comparisons, parsed


def test_a_sync_keeps_only_what_its_later_steps_read_and_nothing_once_the_index_took_it(tmp_path, monkeypatch):
    b, sent = _merging(tmp_path)
    archive = b.store.archive(PROJECT)
    before = archive.tip()
    comparisons, parsed_values = _watch_sync_values(monkeypatch)
    held: dict[str, tuple[int, int, set[type]]] = {}

    def progress(remote: str, step: str) -> None:
        (compared,), (parsed,) = comparisons, parsed_values  # the sync's own, made before its first step
        held[step] = (compared.held(), len(parsed), {type(parsed.known(Message, blob)) for blob in parsed.parses})

    report = sync_project(b.store, PROJECT, progress=progress)

    assert report.results[0].merges == 1 and report.index["caught_up"]
    repo = archive.repo
    entered = changed_records(repo[before].peel(pygit2.Tree), repo[archive.tip()].peel(pygit2.Tree))
    assert len(entered) >= 3 * 3  # each message, its inbox and its outbox copy
    # From the push on, only what entered main is kept (the findings and the index read it), and only messages.
    assert held["push"][0] == held["index"][0] == len(entered)
    assert held["push"][2] == {Message} and held["push"][1] == len(sent)
    (compared,), (parsed,) = comparisons, parsed_values
    assert compared.held() == 0 and len(parsed) == 0  # the index read both last, and took them


def test_comparisons_keep_a_pair_only_while_a_later_step_reads_it(tmp_path):
    archive, trees = _one_send(tmp_path)
    compared = Comparisons(archive.git_dir)
    once = compared.files(*trees, keep=False)
    assert compared.known(*trees) is None and compared.held() == 0 and compared.computed == 1
    kept = compared.files(*trees)
    assert kept == once and compared.held() == len(kept) and compared.computed == 2
    compared.files(trees[1], trees[0])
    compared.retain(*trees)
    assert compared.known(trees[1], trees[0]) is None and compared.known(*trees) is kept
    assert compared.take(*trees) is kept and compared.take(*trees) is None and compared.held() == 0


def test_parsed_keeps_what_is_retained_until_taken():
    parsed = Parsed()
    message = Message(id=derived_id(1_767_323_045_123, b"message"), thread_id="t-1", sender="Nova",
                      subject="hello", created_ts="2026-01-02T03:04:05Z", to=["Orbit"], body="text\n")
    parsed.outcome(Message, b"\x01" * 20, message.to_bytes, lambda record_type, data: record_type.from_bytes(data))
    parsed.outcome(Agent, b"\x02" * 20, lambda: b"not: [an agent", lambda record_type, data: "does not parse")
    parsed.retain(Message)
    assert parsed.known(Agent, b"\x02" * 20) is None and len(parsed) == 1
    assert parsed.take(Message, b"\x01" * 20) == message and parsed.take(Message, b"\x01" * 20) is None
    assert len(parsed) == 0
