"""Archive layouts: the fan-out under each day, writes where an archive's layout keeps records, and the migration.

Layout 2 files each dated record under two folders named by the last
characters of its name, so no folder a write rewrites grows with the day's
traffic; layout 1 archives (made before it) keep working as they are until
``gitmail migrate`` moves them in one commit that changes no record.
"""

from __future__ import annotations

import hashlib
import os
import random
import subprocess
import sys
from collections import Counter

import pygit2
import pytest

from gitmail import Change, Project
from gitmail.index import indexer_for
from gitmail.mail.facade import SendOptions
from gitmail.model.ids import IdMinter, new_id
from gitmail.model.records import (
    LAYOUT,
    JournalEntry,
    Message,
    Receipt,
    Reservation,
    classify,
    day_shard,
    escalation_path,
    fan_out,
    idempotency_path,
    inbox_path,
    message_path,
    outbox_path,
    path_layout,
    placed,
    profile_path,
    receipt_path,
    reservation_path,
)
from gitmail.storage.checkout import refresh
from gitmail.storage.fsck import check_archive
from gitmail.storage.recordcheck import Checker
from gitmail.storage.store import slug_for
from gitmail.sync.merge import merge_file

from .conftest import git, git_run, refused, sign_commits
from .mail_helpers import PROJECT, make_mail, open_agents, send
from .mcp_harness import child_env

BOUND = 2048  # the most entries any folder a write rewrites may hold, at up to a million records a day


def _files(store) -> dict[str, str]:
    """Every file at the tip of the project, with its blob id."""
    archive = store.archive(PROJECT)
    snap = archive.snapshot()
    return {path: snap.blob_id(path) for path in snap.walk()}


def largest_rewritten_tree(repo: pygit2.Repository, commit: str) -> tuple[int, str]:
    """The entries of the largest tree ``commit`` wrote that its parent did not have, and its folder."""
    new = repo[commit].peel(pygit2.Commit)

    def walk(old: pygit2.Tree | None, tree: pygit2.Tree, path: str) -> tuple[int, str]:
        largest = (len(tree), path or "/")
        before = {entry.name: entry for entry in old} if old is not None else {}
        for entry in tree:
            was = before.get(entry.name)
            if entry.type_str == "tree" and (was is None or was.id != entry.id):
                older = repo[was.id] if was is not None and was.type_str == "tree" else None
                largest = max(largest, walk(older, repo[entry.id], f"{path}{entry.name}/"))
        return largest

    return walk(new.parents[0].tree, new.tree, "")


# -- where records sit ------------------------------------------------------------------------------

def test_a_dated_record_sits_under_two_folders_named_by_the_end_of_its_name():
    mid = new_id()
    day = day_shard(mid)
    key = hashlib.sha256(b"k").hexdigest()
    expected = {  # layout 2 (the newest), layout 1
        message_path(mid): f"messages/{day}/{mid}.md",
        inbox_path("Bob", mid): f"agents/Bob/inbox/{day}/{mid}.md",
        receipt_path("Bob", mid): f"agents/Bob/receipts/{day}/{mid}.yaml",
        escalation_path(mid, "Bob"): f"escalations/{day}/{mid}/Bob.yaml",
        idempotency_path("Bob", "2026-12-01T00:00:00Z", key): f"agents/Bob/idempotency/2026/12/01/{key}.yaml",
    }
    assert message_path(mid) == f"messages/{day}/{mid[-2]}/{mid[-1]}/{mid}.md"
    assert escalation_path(mid, "Bob") == f"escalations/{day}/{mid[-2]}/{mid[-1]}/{mid}/Bob.yaml"
    assert idempotency_path("Bob", "2026-12-01T00:00:00Z", key) == (
        f"agents/Bob/idempotency/2026/12/01/{key[-4:-2]}/{key[-2:]}/{key}.yaml")
    for path, old in expected.items():
        assert placed(path, 1) == old and placed(old, 2) == path
        assert placed(path, 2) == path and placed(old, 1) == old
        assert (path_layout(path), path_layout(old)) == (2, 1)
        assert classify(old) == classify(path) is not None
    for shared in (profile_path("Bob"), "contacts/Bob/Carol.yaml", "project.yaml", "windows/abcdefgh.yaml"):
        assert path_layout(shared) is None and placed(shared, 1) == placed(shared, 2) == shared


def test_a_record_parses_at_either_layout_and_is_refused_in_another_fan_out_folder(store):
    message = Message(id=new_id(), thread_id="t", sender="Blue", subject="s", created_ts="2026-12-01T00:00:00.000Z",
                      to=["Green"])
    data = message.to_bytes()
    for path in (message.path(), placed(message.path(), 1), inbox_path("Green", message.id),
                 placed(inbox_path("Green", message.id), 1)):
        assert Message.from_bytes(data, path).id == message.id
    receipt = Receipt(message_id=message.id, agent="Green", hlc=store.clock.tick())
    other = "0" if message.id[-1] != "0" else "1"
    wrong = receipt.path().replace(f"/{message.id[-1]}/{message.id}", f"/{other}/{message.id}")
    assert receipt.misplaced(wrong) == f"field 'message_id': does not match the file's location (expected " \
                                       f"{receipt.path()})"
    assert receipt.misplaced(placed(receipt.path(), 1)) is None


@pytest.mark.slow  # a million IDs and a million hashes
def test_the_bound_holds_to_a_million_records_a_day():
    """The real fan-out over a million names of one day: no folder under the day holds more than 2,048 entries.

    IDs minted by the real minter, half at random moments of one day and half
    in bursts of a thousand within one millisecond (where an ID counts up
    from its random part), and a million key hashes (idempotency records).
    With 1,024 leaf folders a day the mean is 977 and the largest leaf about
    1,100: 2,048 is some 30 standard deviations away.
    """
    day = 1_796_083_200_000  # 2026-12-01T00:00:00Z in milliseconds
    rng = random.Random(20261201)
    moments = sorted([rng.randrange(86_400_000) for _ in range(500_000)]
                     + [burst for burst in rng.sample(range(86_400_000), 500) for _ in range(1000)])
    minter = IdMinter()
    names = {
        "ids of one day": [minter.mint(day + moment) for moment in moments],
        "key hashes": [hashlib.sha256(i.to_bytes(4, "big")).hexdigest() for i in range(1_000_000)],
    }
    for kind, found in names.items():
        assert len(set(found)) == 1_000_000 and len({name[:10] for name in found}) > 1, kind
        leaves = Counter(fan_out(name) for name in found)
        firsts = Counter(folder.split("/")[0] for folder in leaves)
        assert len(firsts) <= BOUND, kind  # the day folder
        assert max(firsts.values()) <= BOUND, kind  # each first-level folder
        assert max(leaves.values()) <= BOUND, (kind, leaves.most_common(1))  # each leaf
    assert len(leaves := Counter(fan_out(name) for name in names["ids of one day"])) == 1024
    assert max(leaves.values()) < 1_200


def _fill_one_day(store, count: int) -> None:
    """``count`` messages from Blue to Green, each read and acknowledged, and as many released reservations, today.

    Each record is one made through its class with a placeholder ID, the
    placeholder replaced by the record's own: YAML would take most of the time.
    """
    archive, clock = store.archive(PROJECT), store.clock
    placeholder, now = "0" * 23, clock.now_ts()
    message = Message(id=placeholder, thread_id=placeholder, sender="Blue", subject="bulk", created_ts=now,
                      to=["Green"], body="x").to_bytes()
    receipt = Receipt(message_id=placeholder, agent="Green", hlc=clock.tick(), read_at=now, acked_at=now).to_bytes()
    reservation = Reservation(id=placeholder, agent="Blue", path_pattern=f"bulk/{placeholder}", created_ts=now,
                              expires_ts=now, hlc=clock.tick(), released_ts=now).to_bytes()

    def put(change: Change, path: str, template: bytes, record_id: str) -> None:
        change.put(path, template.replace(placeholder.encode(), record_id.encode()))

    for start in range(0, count, 2000):
        size = min(2000, count - start)

        def fn(snap, size=size):
            change = Change(f"{size} messages")
            for _ in range(size):
                mid, rid = clock.new_id(), clock.new_id()
                for path in (message_path(mid), inbox_path("Green", mid), outbox_path("Blue", mid)):
                    put(change, path, message, mid)
                put(change, receipt_path("Green", mid), receipt, mid)
                put(change, reservation_path(rid), reservation, rid)
            return change

        archive.transact(fn)


@pytest.mark.slow  # 100,000 files written into one day
def test_no_write_into_a_day_of_20000_messages_rewrites_a_tree_of_more_than_2048_entries(store):
    mail = make_mail(store)
    open_agents(mail, "Blue", "Green")
    _fill_one_day(store, 20_000)
    archive = store.archive(PROJECT)
    assert sum(1 for _ in archive.snapshot().day_files("messages")) == 20_000  # one day, all of them
    writes = {
        "send": lambda: send(mail, "Blue", ["Green"], "one more", idempotency_key="one-more"),
        "acknowledge": lambda: mail.acknowledge_message(PROJECT, "Green", send(mail, "Blue", ["Green"])["id"]),
        # a reservation written straight through the engine: the domain's check of the reservations in force
        # would first have the index read the 100,000 files, which decides nothing about the trees written
        "reserve": lambda: archive.transact(lambda snap: Change("reserve").put_record(Reservation(
            id=store.clock.new_id(), agent="Blue", path_pattern="src/one.py", created_ts=store.clock.now_ts(),
            expires_ts="2099-01-01T00:00:00.000Z", hlc=store.clock.tick()))),
        "journal": lambda: mail.journal(PROJECT, "Green", "a note"),
    }
    largest = {}
    for name, write in writes.items():
        before = archive.tip()
        write()
        assert archive.tip() != before, name
        largest[name] = largest_rewritten_tree(archive.repo, archive.tip())
    assert all(entries <= BOUND for entries, _ in largest.values()), largest


# -- writing and reading at each layout ----------------------------------------------------------------

def _busy(mail, wall) -> dict[str, str]:
    """One of each dated record the mail domain writes, over two days: message ids by what they are."""
    open_agents(mail, "Blue", "Green")
    mail.register_agent(PROJECT, "t", "m", name="Shy")  # contacts_only by default: a message to it is held
    first = send(mail, "Blue", ["Green"], "first", "alpha words", idempotency_key="first")
    mail.acknowledge_message(PROJECT, "Green", first["id"])
    mail.file_reservation_paths(PROJECT, "Blue", ["src/*.py"])
    mail.journal(PROJECT, "Green", "looked at alpha")
    mail.send_message(PROJECT, "Blue", ["Shy"], "held", "waits", options=SendOptions(hold_if_blocked=True))
    reply = mail.reply_message(PROJECT, first["id"], "Green", "beta words")["deliveries"][0]["payload"]
    wall.advance(days=2)
    late = send(mail, "Green", ["Blue"], "later", "gamma words")
    return {"first": first["id"], "reply": reply["id"], "late": late["id"]}


def test_a_layout_1_archive_is_written_and_read_where_layout_1_keeps_records(store, wall):
    mail = make_mail(store, layout=1)
    ids = _busy(mail, wall)
    files = _files(store)
    dated = [path for path in files if path_layout(path) is not None]
    assert dated and all(path_layout(path) == 1 for path in dated)
    assert {"reservation", "journal", "idempotency", "held", "receipt", "inbox", "outbox", "message"} <= {
        classify(path)[0] for path in dated}
    assert placed(message_path(ids["first"]), 1) in files
    assert [m["id"] for m in mail.fetch_inbox(PROJECT, "Blue")] == [ids["late"], ids["reply"]]
    assert mail.get_message(PROJECT, ids["first"])["body_md"] == "alpha words"
    assert "looked at alpha" in str(mail.read_journal(PROJECT, "Green")["entries"])
    assert check_archive(store.archive(PROJECT)) == []


def test_migrate_moves_every_record_in_one_commit_with_its_content_unchanged(store, wall):
    mail = make_mail(store, layout=1)
    _busy(mail, wall)
    archive = store.archive(PROJECT)
    before, old_files = archive.tip(), _files(store)

    out = mail.migrate_project(PROJECT)

    assert (out["migrated"], out["layout_before"], out["layout"]) == (True, 1, 2)
    assert archive.repo[out["commit"]].parents[0].id == pygit2.Oid(hex=before) and archive.tip() == out["commit"]
    new_files = _files(store)
    moved = {placed(path, 2): blob for path, blob in old_files.items() if path != "project.yaml"}
    assert {path: blob for path, blob in new_files.items() if path != "project.yaml"} == moved
    assert out["moved"] == sum(1 for path in old_files if path_layout(path) == 1)
    assert all(path_layout(path) in (None, 2) or path.startswith("attachments/") for path in new_files)
    project = archive.snapshot().read("project.yaml").decode()
    assert project.endswith("layout: 2\n")
    old_project = archive.repo[old_files["project.yaml"]].data.decode()
    assert project == old_project + "layout: 2\n"  # nothing else in it changed
    # git itself sees renames of identical files, and the project record's one new line
    status = git("--git-dir", archive.git_dir, "diff", "--name-status", "-M100%", before, out["commit"]).splitlines()
    assert sorted(line.split("\t")[0] for line in status) == ["M"] + ["R100"] * out["moved"]
    assert check_archive(archive) == []  # git fsck included

    again = mail.migrate_project(PROJECT)
    assert (again["migrated"], again["commit"], archive.tip()) == (False, None, out["commit"])

    later = send(mail, "Blue", ["Green"], "after the move")
    assert {path for path in _files(store) if later["id"] in path} == {
        message_path(later["id"]), inbox_path("Green", later["id"]), outbox_path("Blue", later["id"])}


def test_derived_state_follows_a_migration_without_renumbering_or_delivering_again(store, wall):
    mail = make_mail(store, layout=1)
    ids = _busy(mail, wall)
    index = indexer_for(store).project(PROJECT)
    feed = mail.read_messages(PROJECT, "Green", after=0, limit=50)
    rows = {"Green": index.messages_after("Green", 0, 100), "Blue": index.messages_after("Blue", 0, 100)}
    high = index.high_watermark()
    index.flush()  # the search index has taken every message in before the answer to compare with is read
    found = [hit["id"] for hit in mail.search_messages(PROJECT, "words")]
    paths = mail.record_paths(PROJECT, "message", ids["first"])
    history = [commit["commit"] for commit in mail.history(PROJECT, paths)]
    index.flush()
    queued = _queued_ever(index)

    mail.migrate_project(PROJECT)

    assert {name: index.messages_after(name, 0, 100) for name in rows} == rows  # same records, same numbers
    index.flush()
    assert index.high_watermark() == high and _queued_ever(index) == queued  # nothing numbered or queued anew
    assert mail.read_messages(PROJECT, "Green", after=feed["next_after"], limit=50)["messages"] == []
    assert [hit["id"] for hit in mail.search_messages(PROJECT, "words")] == found
    assert [commit["commit"] for commit in mail.history(PROJECT, paths)] == history  # the move is no change
    mail.acknowledge_message(PROJECT, "Blue", ids["reply"])
    assert len(mail.history(PROJECT, mail.record_paths(PROJECT, "message", ids["reply"]))) == 2
    index.reindex()  # a full resync from the tree keeps every number too
    assert {name: index.messages_after(name, 0, 100) for name in rows}["Green"] == rows["Green"]


def _queued_ever(index) -> int:
    """How many times a message was ever queued for the search index (the queue's last stamp)."""
    rows = index.meta.read("SELECT seq FROM sqlite_sequence WHERE name = 'pending'")
    return int(rows[0][0]) if rows else 0


def test_the_checkout_follows_a_migration_and_a_human_reads_a_day_with_ls_grep_and_one_glob(store, wall):
    mail = make_mail(store, layout=1)
    ids = _busy(mail, wall)
    paths = store.paths(store.resolve(PROJECT))
    refresh(paths.archive, paths.checkout)
    mail.migrate_project(PROJECT)
    assert refresh(paths.archive, paths.checkout) == "updated"
    assert git("status", "--porcelain", "--untracked-files=all", cwd=paths.checkout) == ""
    assert git("rev-parse", "HEAD", cwd=paths.checkout).strip() == store.archive(PROJECT).tip()
    day = "/".join(message_path(ids["first"]).split("/")[1:4])

    def shell(command: str) -> list[str]:
        proc = subprocess.run(["sh", "-c", command], cwd=paths.checkout, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout.split()

    assert shell(f"ls messages/*/*/*/*/*/{ids['first']}.md") == [message_path(ids["first"])]  # one glob finds it
    listed = shell(f"ls messages/{day}/*/*/")  # a day, read with ls
    assert f"{ids['first']}.md" in listed and f"{ids['reply']}.md" in listed
    assert shell(f"grep -rl 'alpha words' messages/{day}/") == [message_path(ids["first"])]  # and with grep -r


def test_retention_purges_at_either_layout(store, wall):
    mail = make_mail(store, layout=1)
    open_agents(mail, "Blue", "Green")
    old = send(mail, "Blue", ["Green"], "old one")
    wall.advance(days=10)
    older = send(mail, "Blue", ["Green"], "older one")
    wall.advance(days=10)
    assert mail.purge_old_messages(PROJECT, max_age_days=15)["purged"] == 1
    mail.migrate_project(PROJECT)
    assert mail.purge_old_messages(PROJECT, max_age_days=5)["purged"] == 1
    files = _files(store)
    stones = sorted(path for path in files if path.startswith("tombstones/"))
    assert stones == sorted([placed(f"tombstones/{message_path(old['id'])[9:-3]}.yaml", 2),
                             f"tombstones/{message_path(older['id'])[9:-3]}.yaml"])
    assert not any(old["id"] in path or older["id"] in path for path in files if not path.startswith("tombstones/"))
    assert check_archive(store.archive(PROJECT), run_git=False) == []


def test_an_archive_at_a_layout_this_version_does_not_know_is_refused_not_misread(store):
    mail = make_mail(store, layout=LAYOUT + 1)
    error = refused(store, PROJECT, "LAYOUT_UNSUPPORTED", mail.register_agent, PROJECT, "t", "m", name="Blue")
    assert f"at layout {LAYOUT + 1}" in error.message and "upgrade gitmail" in error.message
    refused(store, PROJECT, "LAYOUT_UNSUPPORTED", mail.migrate_project, PROJECT)


def test_fsck_reports_a_record_left_at_an_older_layouts_path(store):
    mail = make_mail(store)
    open_agents(mail, "Blue", "Green")
    stray = JournalEntry(id=store.clock.new_id(), agent="Green", created_ts=store.clock.now_ts(), body="by hand\n")
    old = placed(stray.path(), 1)
    store.archive(PROJECT).transact(lambda snap: Change("a stray").put(old, stray.to_bytes()))
    problems = [str(problem) for problem in check_archive(store.archive(PROJECT), run_git=False)]
    assert problems == [f"{old}: sits where layout 1 kept records, but this archive is at layout 2, which keeps it "
                        f"at {stray.path()}; move it there (mkdir -p {stray.path().rsplit('/', 1)[0]} && git mv "
                        f"{old} {stray.path()}) and commit"]


def test_the_checker_sees_a_move_as_no_change_and_a_move_that_edits_as_an_edit(store, wall):
    mail = make_mail(store, layout=1)
    ids = _busy(mail, wall)
    archive = store.archive(PROJECT)
    before = archive.tip()
    moved = mail.migrate_project(PROJECT)["commit"]
    for door in ("hub", "fetch"):  # what a push of it to a hub, or a fetch of it, meets
        assert Checker(archive.repo, door).check_commit(moved, before) == []
    by_hand = Checker(archive.repo, "archive").check_commit(moved, before)  # a push from a person's clone
    assert [(r.path, r.reason) for r in by_hand] == [("project.yaml", "changes layout of this project, which only "
                                                                      "gitmail changes")]
    assert "gitmail migrate" in by_hand[0].advice
    path = message_path(ids["first"])
    edited = archive.snapshot().read(path).replace(b"alpha words", b"other words")
    archive.transact(lambda snap: Change("edit a message").put(path, edited))
    refusals = Checker(archive.repo, "hub").check_commit(archive.tip(), before)
    assert [(r.path, r.reason) for r in refusals] == [(path, "a message record is immutable and this changes it")]


def test_the_merge_rules_know_a_record_at_either_layouts_path(store):
    mid = new_id()
    early = Receipt(message_id=mid, agent="Green", hlc=store.clock.tick(), read_at="2026-12-01T10:00:00.000Z")
    late = Receipt(message_id=mid, agent="Green", hlc=store.clock.tick(), read_at="2026-12-01T11:00:00.000Z",
                   acked_at="2026-12-01T11:00:00.000Z")
    for path in (receipt_path("Green", mid), placed(receipt_path("Green", mid), 1)):
        merged = merge_file(path, None, late.to_bytes(), early.to_bytes())
        assert merged.conflict is None  # a receipt, merged by its rule, not two files kept side by side
        assert Receipt.from_bytes(merged.content).read_at == "2026-12-01T10:00:00.000Z"


# -- the doors ----------------------------------------------------------------------------------------

def _push(clone: str, path: str, data: bytes | None, message: str = "by hand") -> subprocess.CompletedProcess:
    full = os.path.join(clone, path)
    if data is None:
        os.unlink(full)
    else:
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "wb") as handle:
            handle.write(data)
    assert git_run("add", "-A", cwd=clone).returncode == 0
    assert git_run("commit", "-q", "-m", message, cwd=clone).returncode == 0
    return git_run("push", "origin", "HEAD:main", cwd=clone)


@pytest.mark.slow  # git runs the archive's pre-receive hook, which starts gitmail
def test_a_push_is_refused_a_record_at_another_layouts_path_and_a_layout_going_back(store, tmp_path):
    mail = make_mail(store)
    open_agents(mail, "Blue", "Green")
    archive = store.archive(PROJECT)
    clone = str(tmp_path / "clone")
    assert git_run("clone", "-q", archive.git_dir, clone).returncode == 0
    sign_commits(clone, store.home)
    entry = JournalEntry(id=new_id(), agent="Green", created_ts="2026-12-01T10:00:00.000Z", body="by hand\n")
    old = placed(entry.path(), 1)

    refused = _push(clone, old, entry.to_bytes())
    assert refused.returncode != 0 and archive.tip() == git("rev-parse", "origin/main", cwd=clone).strip()
    assert f"refused {old}: sits where layout 1 kept records" in refused.stderr
    folder = entry.path().rsplit("/", 1)[0]
    advice = f"mkdir -p {folder} && git mv {old} {entry.path()}"
    assert advice in refused.stderr  # where it belongs, and how to put it there
    assert subprocess.run(["sh", "-c", advice], cwd=clone).returncode == 0
    assert git_run("commit", "-q", "--amend", "-m", "moved", cwd=clone).returncode == 0
    assert git_run("push", "-q", "origin", "HEAD:main", cwd=clone).returncode == 0
    assert archive.snapshot().exists(entry.path())

    with open(os.path.join(clone, "project.yaml"), encoding="utf-8") as handle:
        text = handle.read()
    back = _push(clone, "project.yaml", text.replace("layout: 2\n", "").encode(), "back to layout 1")
    assert back.returncode != 0 and "moves the archive back from layout 2 to layout 1" in back.stderr


@pytest.mark.slow  # git runs the archive's pre-receive hook, which starts gitmail
def test_a_layout_1_archive_refuses_a_new_layout_path_and_names_the_migration(store, tmp_path):
    mail = make_mail(store, layout=1)
    open_agents(mail, "Blue", "Green")
    clone = str(tmp_path / "clone")
    assert git_run("clone", "-q", store.archive(PROJECT).git_dir, clone).returncode == 0
    sign_commits(clone, store.home)
    entry = JournalEntry(id=new_id(), agent="Green", created_ts="2026-12-01T10:00:00.000Z", body="by hand\n")
    refused = _push(clone, entry.path(), entry.to_bytes())
    assert refused.returncode != 0 and "this archive is still at layout 1" in refused.stderr
    assert "gitmail migrate" in refused.stderr


@pytest.mark.slow  # a process per command
def test_gitmail_migrate_from_the_shell(tmp_path):
    home = str(tmp_path / "home")
    from gitmail import Store

    store = Store(home, background=False)
    mail = make_mail(store, layout=1)
    open_agents(mail, "Blue", "Green")
    sent = send(mail, "Blue", ["Green"])
    slug = store.resolve(PROJECT)

    def gitmail(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "gitmail", *args], env=child_env(home), capture_output=True,
                              text=True, timeout=120)

    first = gitmail("migrate", PROJECT)
    assert first.returncode == 0, first.stderr
    assert first.stdout.startswith(f"{slug}: moved from layout 1 to 2 in ")
    assert "files moved, none changed" in first.stdout
    second = gitmail("migrate", PROJECT)
    assert second.returncode == 0 and second.stdout.strip() == f"{slug}: at layout 2 already; nothing to do"
    checkout = store.paths(slug).checkout
    assert os.path.exists(os.path.join(checkout, message_path(sent["id"])))  # the command left the checkout current
    assert gitmail("migrate", "/no/such/project").returncode == 2


def test_an_import_into_a_project_an_earlier_version_made_moves_it_to_the_newest_layout_first(store):
    from gitmail.importers.agentmail import import_agent_mail

    from .agent_mail_fixture import ARCHIVE, DATABASE, FRONT

    project = Project(id=store.clock.new_id(), slug=slug_for(FRONT), human_key=FRONT, created_at=store.clock.now_ts(),
                      hlc=store.clock.tick())  # no layout: as an earlier version made it
    store.archive(FRONT, create=True).transact(lambda snap: Change("Create project").put_record(project))
    import_agent_mail(store, DATABASE, archive=ARCHIVE, catch_up=False)
    archive = store.archive(FRONT)
    snap = archive.snapshot()
    assert snap.layout == LAYOUT
    paths = list(snap.walk())
    assert any(path.startswith("attachments/") for path in paths)  # named by layout-2 paths in the messages
    assert all(path_layout(path) in (None, LAYOUT) for path in paths)
    assert check_archive(archive) == []
