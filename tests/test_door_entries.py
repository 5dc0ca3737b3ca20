"""What a tree may hold, at every door: plain files only, records without NUL, attachments within the limit.

A commit made elsewhere can hold more than files: a submodule link (a
gitlink, mode 160000), a symbolic link (120000), an executable file
(100755). None of them is a record, whatever its bytes say, and a gitlink
names a commit that is not even in the archive. Nor may a record carry a
NUL character, an attachment exceed the limit the MCP door enforces, or
``.gitattributes`` hold attributes of someone else's (``* merge=ours``
would have a human's ``git pull`` keep their side of every record).

Each test drives a real door: the real ``git`` pushing into an archive and
into a checked hub (whose ``pre-receive`` hooks run the record checker in
their own interpreter), a sync from a hostile remote through a real
``gitmail serve`` and its MCP client and through the real CLI, and
``gitmail fsck`` on an archive that took the damage through a door without
checks.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys

import pytest

from gitmail import Mail, Store
from gitmail.mail.facade import SendOptions
from gitmail.model.ids import new_id
from gitmail.model.limits import MAX_ATTACHMENT_BYTES
from gitmail.model.records import (
    GITATTRIBUTES,
    attachment_path,
    inbox_path,
    journal_path,
    message_path,
)
from gitmail.storage import nodes
from gitmail.storage.fsck import check_archive
from gitmail.sync.quarantine import quarantine_ref, read_quarantine
from gitmail.sync.remotes import add_remote
from gitmail.sync.repair import repair
from gitmail.sync.syncer import sync_project

from .conftest import git_run, refused
from .mcp_harness import ServerProcess, call, child_env, run
from .sync_helpers import PROJECT, Machine, tree_files
from .test_mcp_mail import pair
from .test_record_doors import _clone, _commit, _hand_message, _hub, _machines, _tip, _write

GITMAIL = [sys.executable, "-m", "gitmail"]


def _embed_repository(clone: str, path: str) -> None:
    """A repository of its own at ``path`` in ``clone``: ``git add`` records it as a gitlink to its commit."""
    nested = os.path.join(clone, path)
    assert git_run("init", "-q", nested).returncode == 0
    assert git_run("commit", "-q", "--allow-empty", "-m", "elsewhere", cwd=nested).returncode == 0


def _poison(clone: str, kept: str | None = None) -> dict[str, str]:
    """Stage, in ``clone``, one of each kind of entry or content no door may take; what to expect by path.

    Also stages one good message, so a fetch has a valid part to merge
    (returned under ``"good"``). ``kept`` names a message already in the
    archive, whose mode alone is changed to executable.
    """
    gitlink = message_path(new_id())
    link_id, link_text = _hand_message("a link whose target parses")
    exec_id, exec_text = _hand_message("an executable record")
    link, executable = message_path(link_id), message_path(exec_id)
    _embed_repository(clone, gitlink)
    os.makedirs(os.path.dirname(os.path.join(clone, link)), exist_ok=True)
    os.symlink(link_text.decode(), os.path.join(clone, link))  # the link's target is the text of a record
    _write(clone, executable, exec_text)
    os.chmod(os.path.join(clone, executable), 0o755)
    expected = {gitlink: "submodule link (mode 160000)", link: "symbolic link (mode 120000)",
                executable: "executable file (mode 100755)"}
    if kept is not None:
        os.chmod(os.path.join(clone, message_path(kept)), 0o755)
        expected[message_path(kept)] = "executable file (mode 100755)"
    entry = new_id()
    _write(clone, journal_path("BlueLake", entry),
           f"---\nid: {entry}\nagent: BlueLake\ncreated: 2026-12-01T10:00:00.000Z\n---\nbefore\0after\n".encode())
    expected[journal_path("BlueLake", entry)] = "body contains a NUL character"
    nul_id, nul_text = _hand_message("NUL_SUBJECT")
    _write(clone, message_path(nul_id), nul_text.replace(b"subject: NUL_SUBJECT", b'subject: "a\\0b"'))
    expected[message_path(nul_id)] = "subject contains a NUL character"
    big = b"\0" * (MAX_ATTACHMENT_BYTES + 1)
    digest = hashlib.sha256(big).hexdigest()
    _write(clone, attachment_path(digest, "bin"), big)
    expected[attachment_path(digest, "bin")] = f"over the limit of {MAX_ATTACHMENT_BYTES} bytes"
    _write(clone, ".gitattributes", GITATTRIBUTES + b"* merge=ours\n")
    expected[".gitattributes"] = "line 5 (* merge=ours) is not one gitmail writes"
    good, data = _hand_message("still welcome")
    _write(clone, message_path(good), data)
    _write(clone, inbox_path("GreenCastle", good), data)
    expected["good"] = good
    _commit(clone, "entries that are not records")
    return expected


def _refused_paths(stderr: str) -> set[str]:
    return {line.split("refused ", 1)[1].split(": ", 1)[0] for line in stderr.splitlines()
            if "gitmail: refused " in line}


# -- the push doors ----------------------------------------------------------------------------

@pytest.mark.slow  # git runs the installed hooks, which start gitmail
@pytest.mark.parametrize("door", ["archive", "hub"])
def test_a_push_of_entries_that_are_not_plain_records_is_refused_with_a_readable_reason(tmp_path, door):
    if door == "hub":
        hub = _hub(tmp_path, checked=True)
        (machine,) = _machines(tmp_path, hub, names=("node-a",))
        target = hub
    else:
        machine = Machine(str(tmp_path / "m"), "node-a")
        machine.create_project()
        target = machine.archive.git_dir
    kept = machine.send("BlueLake", ["GreenCastle"], "kept")
    if door == "hub":
        assert sync_project(machine.store, PROJECT).exit_code == 0
    clone = _clone(target, str(tmp_path / "human"))
    before = _tip(target)
    expected = _poison(clone, kept)
    expected.pop("good")

    pushed = git_run("push", "origin", "HEAD:main", cwd=clone)
    assert pushed.returncode != 0
    assert "Traceback" not in pushed.stderr, pushed.stderr
    assert _refused_paths(pushed.stderr) == set(expected), pushed.stderr
    for path, reason in expected.items():
        assert f"refused {path}: " in pushed.stderr and reason in pushed.stderr, (path, pushed.stderr)
    assert "what to do:" in pushed.stderr and "git update-index --chmod=-x" in pushed.stderr
    assert _tip(target) == before  # nothing was taken in

    # The .gitattributes gitmail writes goes through, with comments of one's own beside it.
    git_run("reset", "-q", "--hard", "origin/main", cwd=clone)
    git_run("clean", "-q", "-ffdx", cwd=clone)  # the embedded repository too
    _write(clone, ".gitattributes", b"# ours\n" + GITATTRIBUTES)
    _commit(clone, "name the merge driver")
    pushed = git_run("push", "origin", "HEAD:main", cwd=clone)
    assert pushed.returncode == 0, pushed.stderr


# -- the fetch door ----------------------------------------------------------------------------

@pytest.mark.slow  # a real gitmail serve, the CLI, and git
@pytest.mark.timeout(300)
def test_a_sync_keeps_such_entries_aside_and_every_remote_still_syncs(tmp_path):
    """Two remotes, the hostile one first: its damage is kept aside, its valid part and the other remote come in."""
    bad_hub, good_hub = _hub(tmp_path / "bad", checked=False), _hub(tmp_path / "good", checked=False)
    server = ServerProcess(str(tmp_path / "home"), extra_args=("--tools", "all"))
    try:
        async def setup():
            async with server.client() as client:
                blue, _ = await pair(client, PROJECT)
                return blue["registration_token"]

        token = run(setup())
        here = Store(server.home, background=False)
        add_remote(here, PROJECT, "bad", "file://" + bad_hub)
        add_remote(here, PROJECT, "good", "file://" + good_hub)

        async def sync():
            async with server.client() as client:
                return await call(client, "sync_project", project_key=PROJECT, agent_name="BlueLake",
                                  agent_token=token)

        assert run(sync())["exit_code"] == 0  # both hubs now hold the project
        teammate = Store(str(tmp_path / "teammate"), background=False)
        # GreenCastle works from the teammate's machine: the server's node, where it was registered, hands it over.
        nodes.handover(here.archive(PROJECT), agent="GreenCastle", to=teammate.node, hlc=here.clock.tick())
        assert run(sync())["exit_code"] == 0
        add_remote(teammate, PROJECT, "good", "file://" + good_hub)
        sync_project(teammate, PROJECT)
        Mail(teammate).send_message(PROJECT, "GreenCastle", ["BlueLake"], "through the good hub", "hello")
        assert sync_project(teammate, PROJECT).exit_code == 0
        clone = _clone(bad_hub, str(tmp_path / "poisoner"), here.home)  # signed by the server's node
        expected = _poison(clone)
        good = expected.pop("good")
        assert git_run("push", "-q", "origin", "main", cwd=clone).returncode == 0

        synced = run(sync())
        assert synced["status"] == "attention" and synced["exit_code"] == 1, synced
        bad, fine = synced["results"]
        assert bad["remote"] == "bad" and bad["error"] is None
        assert {item["path"] for item in bad["quarantined"]} == set(expected)
        for item in bad["quarantined"]:
            assert expected[item["path"]] in item["reason"] and item["advice"] and item["source"] == "bad/main"
        assert bad["quarantine_ref"] == quarantine_ref("bad") and bad["messages_in"] == 1
        assert fine["remote"] == "good" and fine["error"] is None and fine["messages_in"] == 1
        files = tree_files(here)
        assert message_path(good) in files and not (set(expected) - {".gitattributes"}) & set(files)
        assert files[".gitattributes"] == GITATTRIBUTES
        assert {entry["path"] for entry in read_quarantine(here.archive(PROJECT), "bad")} == set(expected)

        # The CLI reports the same, with the exit status of a sync that needs a look.
        cli = subprocess.run([*GITMAIL, "sync", PROJECT], capture_output=True, text=True,
                             env=child_env(server.home))
        assert cli.returncode == 1, cli.stderr
        assert "Traceback" not in cli.stderr
        gitlink = next(path for path, reason in expected.items() if "160000" in reason)
        assert f"refused from bad/main: {gitlink}: a submodule link (mode 160000)" in cli.stdout
    finally:
        server.stop()

    # The operator's way back: repair takes every such entry out of the hostile hub.
    fixed = repair(here, PROJECT, "bad")
    assert {item["file"] for item in fixed.repaired} == set(expected)
    assert fixed.after is not None and fixed.after.exit_code == 0, fixed.after.lines()
    listed = git_run("--git-dir", bad_hub, "ls-tree", "-r", "main").stdout.splitlines()
    modes = {line.split("\t")[1]: line.split()[0] for line in listed}
    assert not (set(expected) - {".gitattributes"}) & set(modes)
    assert set(modes.values()) == {"100644"}
    shown = git_run("--git-dir", bad_hub, "show", "main:.gitattributes").stdout
    assert shown.encode() == GITATTRIBUTES  # put back as the local main holds it


def test_a_remote_ref_that_names_no_commit_is_left_out_and_the_rest_syncs(tmp_path):
    """A machine ref on the hub naming a blob or a tree is reported; that remote's main and the next remote sync."""
    bad_hub, good_hub = _hub(tmp_path / "bad", checked=False), _hub(tmp_path / "good", checked=False)
    here, teammate = Machine(str(tmp_path / "m"), "node-a"), Machine(str(tmp_path / "m"), "node-b")
    here.create_project()
    add_remote(here.store, PROJECT, "bad", "file://" + bad_hub)
    add_remote(here.store, PROJECT, "good", "file://" + good_hub)
    assert sync_project(here.store, PROJECT).exit_code == 0
    add_remote(teammate.store, PROJECT, "good", "file://" + good_hub)
    sync_project(teammate.store, PROJECT)
    through_good = teammate.send("GreenCastle", ["BlueLake"], "through the good hub")
    assert sync_project(teammate.store, PROJECT).exit_code == 0
    clone = _clone(bad_hub, str(tmp_path / "intruder"))
    through_bad, data = _hand_message("through the bad hub")
    _write(clone, message_path(through_bad), data)
    _commit(clone)
    assert git_run("push", "-q", "origin", "main", cwd=clone).returncode == 0
    blob = git_run("rev-parse", "HEAD:" + message_path(through_bad), cwd=clone).stdout.strip()
    tree = git_run("rev-parse", "HEAD^{tree}", cwd=clone).stdout.strip()
    for ref, target in (("refs/gitmail/nodes/blob", blob), ("refs/gitmail/nodes/tree", tree)):
        assert git_run("--git-dir", bad_hub, "update-ref", ref, target).returncode == 0

    report = sync_project(here.store, PROJECT)
    bad, good = report.results
    assert bad.error is None and good.error is None, report.lines()
    assert [(item["path"], item["reason"], item["source"]) for item in bad.quarantined] == [
        ("refs/gitmail/nodes/blob", "names a blob, not a commit", "bad/nodes/blob"),
        ("refs/gitmail/nodes/tree", "names a tree, not a commit", "bad/nodes/tree")]
    assert all("git update-ref -d refs/gitmail/nodes/" in item["advice"] for item in bad.quarantined)
    assert bad.quarantine_ref is None and report.exit_code == 1
    assert "refused from bad/nodes/blob: refs/gitmail/nodes/blob: names a blob, not a commit" in report.lines()[1]
    assert not any("kept aside" in line for line in report.lines())
    files = tree_files(here.store)
    assert message_path(through_bad) in files and message_path(through_good) in files


# -- fsck ----------------------------------------------------------------------------------------

def test_fsck_reports_entries_that_are_not_plain_records(tmp_path):
    machine = Machine(str(tmp_path / "m"), "node-a")
    machine.create_project()
    kept = machine.send("BlueLake", ["GreenCastle"], "kept")
    archive = machine.archive
    clone = _clone(archive.git_dir, str(tmp_path / "human"))
    expected = _poison(clone, kept)
    expected.pop("good")
    # A fetch into the bare archive runs no hook: the damage reaches main unchecked.
    assert git_run("--git-dir", archive.git_dir, "fetch", "-q", clone, "+main:main").returncode == 0
    found = {problem.path: problem.reason for problem in check_archive(archive, run_git=False)}
    for path, reason in expected.items():
        assert reason in found.get(path, ""), (path, found)


# -- the MCP door's own limit --------------------------------------------------------------------

def test_the_sender_side_limit_can_be_lowered_but_never_raised_past_the_doors(ctx, store, tmp_path, monkeypatch):
    """A server set to take larger attachments would store what every other door then refuses to carry."""
    root = tmp_path / "files"
    root.mkdir()
    with open(root / "big.bin", "wb") as handle:
        handle.truncate(MAX_ATTACHMENT_BYTES + 1)
    monkeypatch.setenv("GITMAIL_ATTACHMENT_ROOTS", str(root))
    monkeypatch.setenv("GITMAIL_ATTACHMENT_MAX_BYTES", str(2 * MAX_ATTACHMENT_BYTES))
    mail = Mail(store)
    mail.ensure_project(PROJECT)
    for name in ("BlueLake", "GreenCastle"):
        mail.register_agent(PROJECT, "p", "m", name=name)
    mail.set_contact_policy(PROJECT, "GreenCastle", "open")
    error = refused(store, PROJECT, "ATTACHMENT_TOO_LARGE", mail.send_message, PROJECT, "BlueLake", ["GreenCastle"],
                    "too big", "see attached", SendOptions(attachment_paths=[str(root / "big.bin")]))
    assert error.data["limit"] == MAX_ATTACHMENT_BYTES and "smaller file or a link" in error.message
    monkeypatch.setenv("GITMAIL_ATTACHMENT_MAX_BYTES", "1000")
    error = refused(store, PROJECT, "ATTACHMENT_TOO_LARGE", mail.send_message, PROJECT, "BlueLake", ["GreenCastle"],
                    "too big", "see attached", SendOptions(attachment_paths=[str(root / "big.bin")]))
    assert error.data["limit"] == 1000
