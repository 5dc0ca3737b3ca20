"""Signed writes: each machine's key, its record in the archive, and commits plain git verifies."""

from __future__ import annotations

import os
import shutil
import stat

import pygit2
import pytest

from gitmail import Mail, Store
from gitmail.model import sshsig
from gitmail.model.errors import INVALID_ARGUMENT, GitmailError
from gitmail.model.records import ROTATION_NAMESPACE, Node, node_path, rotation_statement
from gitmail.storage import nodes
from gitmail.storage.nodekey import NodeKey
from gitmail.storage.objects import COMMIT, PackBuffer, split_signature

from .conftest import git, git_run
from .mail_helpers import two_agents_one_message

PROJECT = "/work/signing/project"


@pytest.fixture
def mail(store):
    return two_agents_one_message(store, PROJECT)


@pytest.fixture(params=["git-listing", "tree-walk"])
def listing(request, monkeypatch):
    """Judge ranges from git's listing of each commit's changes (every range) or by reading trees (none)."""
    from gitmail.storage import authorship

    monkeypatch.setattr(authorship, "BATCH_FROM", 1 if request.param == "git-listing" else 10**9)
    return request.param


def _signers(store, tmp_path) -> str:
    path = str(tmp_path / "allowed_signers")
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(nodes.allowed_signers(store.archive(PROJECT)))
    return path


def _verify(git_dir: str, signers: str, commit: str):
    return git_run("--git-dir", git_dir, "-c", "gpg.format=ssh", "-c", f"gpg.ssh.allowedSignersFile={signers}",
                   "verify-commit", commit)


def test_the_node_key_is_made_once_and_readable_by_its_owner_only(store, home):
    folder = os.path.join(home, "keys")
    assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(store.key.path).st_mode) == 0o600
    again = Store(home, background=False)
    assert again.node == store.node and again.key.public == store.key.public


def test_the_first_commit_publishes_the_node_record_and_every_commit_is_signed(mail, store):
    archive = store.archive(PROJECT)
    record = archive.snapshot().load(node_path(store.node), Node)
    assert record is not None and record.key == store.key.public_line and record.kind == "node"
    walker = archive.repo.walk(archive.tip(), pygit2.enums.SortMode.TOPOLOGICAL)
    commits = list(walker)
    assert len(commits) >= 4
    for commit in commits:
        signature, payload = split_signature(commit.read_raw())
        assert sshsig.signer_of(signature, payload) == store.key.public
    first = commits[-1]
    assert node_path(store.node) in [p for p in git("--git-dir", archive.git_dir, "show", "--name-only",
                                                    "--format=", str(first.id)).split()]


def test_plain_git_verifies_gitmail_commits_and_refuses_a_tampered_one(mail, store, tmp_path):
    archive = store.archive(PROJECT)
    signers = _signers(store, tmp_path)
    tip = archive.tip()
    done = _verify(archive.git_dir, signers, tip)
    assert done.returncode == 0, done.stderr
    assert "Good \"git\" signature for gitmail@" + store.node in done.stderr
    shown = git_run("--git-dir", archive.git_dir, "-c", "gpg.format=ssh", "-c",
                    f"gpg.ssh.allowedSignersFile={signers}", "log", "--show-signature", "-3")
    assert shown.returncode == 0 and shown.stdout.count("Good \"git\" signature") == 3, shown.stdout + shown.stderr
    raw = archive.repo.odb.read(pygit2.Oid(hex=tip))[1]
    tampered = raw.replace(b"\n\n", b"\n\nforged: ", 1)  # the message changed, the signature kept
    pack = PackBuffer()
    forged = pack.add(COMMIT, tampered).hex()
    pack.write(os.path.join(archive.git_dir, "objects", "pack"))
    refused = _verify(archive.git_dir, signers, forged)
    assert refused.returncode != 0 and "Good" not in refused.stderr


def test_a_commit_signed_by_a_key_outside_the_file_is_not_verified(mail, store, tmp_path):
    archive = store.archive(PROJECT)
    other = tmp_path / "other"
    with open(other, "w", encoding="utf-8") as handle:
        stranger = sshsig.public_line(sshsig.raw_public(NodeKey(str(tmp_path / "elsewhere"), "x").private))
        handle.write(f'gitmail@x namespaces="git" {stranger}\n')
    done = _verify(archive.git_dir, str(other), archive.tip())
    assert done.returncode != 0


def test_export_leaves_out_a_revoked_key_and_plain_git_then_refuses(mail, store, tmp_path):
    archive = store.archive(PROJECT)
    tip = archive.tip()
    nodes.revoke(archive, name=store.node, reason="machine lost", by=store.node, now=store.clock.now_ts())
    views = nodes.list_nodes(archive, store.home, store.node)
    assert [(v.node, v.revoked, v.this_machine) for v in views] == [(store.node, True, True)]
    assert nodes.allowed_signers(archive) == ""
    assert _verify(archive.git_dir, _signers(store, tmp_path), tip).returncode != 0


def test_rotation_is_signed_by_the_old_key_and_both_keys_verify(mail, store, tmp_path):
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    archive = store.archive(PROJECT)
    before = archive.tip()
    old, new = store.key.private, Ed25519PrivateKey.generate()
    record = nodes.rotate_in(archive, store.node, old, new, store.clock.now_ts())
    store.key.install(new)
    assert record.previous_key == sshsig.public_line(sshsig.raw_public(old))
    signature, payload = split_signature(archive.repo[archive.tip()].read_raw())
    assert sshsig.signer_of(signature, payload) == sshsig.raw_public(old)  # the move is signed by the old key
    Mail(store).send_message(PROJECT, "BlueLake", ["GreenCastle"], "after", "rotated")
    signers = _signers(store, tmp_path)
    assert _verify(archive.git_dir, signers, before).returncode == 0
    assert _verify(archive.git_dir, signers, archive.tip()).returncode == 0
    signature, payload = split_signature(archive.repo[archive.tip()].read_raw())
    assert sshsig.signer_of(signature, payload) == sshsig.raw_public(new)


def test_the_record_checker_refuses_a_key_swapped_without_the_old_keys_signature(mail, store):
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from gitmail.storage.recordcheck import edit_refusal, record_problem

    archive = store.archive(PROJECT)
    current = archive.snapshot().load(node_path(store.node), Node)
    assert current is not None
    thief = Ed25519PrivateKey.generate()
    swapped = Node(node=current.node, key=sshsig.public_line(sshsig.raw_public(thief)), kind="node",
                   created_at=current.created_at)
    refusal = edit_refusal("fetch", "node", node_path(store.node), current, swapped)
    assert refusal is not None and "rotation" in refusal[0]
    # naming the old key is not enough: the statement must carry the old key's signature
    claimed = nodes.rotation(store.node, thief, thief, current.created_at, store.clock.now_ts())
    claimed = Node(**{**claimed.to_fields(), "previous_key": current.key})
    assert edit_refusal("fetch", "node", node_path(store.node), current, claimed) is None
    assert "rotation_sig" in (record_problem(claimed) or "")
    honest = nodes.rotation(store.node, store.key.private, thief, current.created_at, store.clock.now_ts())
    assert record_problem(honest) is None
    assert sshsig.signer_of(honest.rotation_sig or "", rotation_statement(store.node, honest.key,
                                                                           honest.rotated_at or ""),
                            namespace=ROTATION_NAMESPACE) == store.key.public


def test_add_registers_a_persons_key_once_and_pin_remembers_a_key(mail, store):
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    archive = store.archive(PROJECT)
    person = sshsig.public_line(sshsig.raw_public(Ed25519PrivateKey.generate()))
    nodes.add(archive, name="alice", key=person + " alice@laptop", human=True, by=store.node,
              now=store.clock.now_ts())
    with pytest.raises(Exception) as info:
        nodes.add(archive, name="alice", key=person, human=True, by=store.node, now=store.clock.now_ts())
    assert getattr(info.value, "code", None) == INVALID_ARGUMENT
    assert f'alice namespaces="git" {person}\n' in nodes.allowed_signers(archive)
    pinned = nodes.pin(archive, store.home, "alice")
    assert pinned.pinned == "same"
    assert stat.S_IMODE(os.stat(os.path.join(store.home, "keys")).st_mode) == 0o700


def test_sshsig_round_trip_and_refusals():
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = Ed25519PrivateKey.generate()
    armored = sshsig.sign(key, b"data")
    assert armored.startswith(sshsig.BEGIN) and sshsig.signer_of(armored, b"data") == sshsig.raw_public(key)
    with pytest.raises(sshsig.SignatureError):
        sshsig.signer_of(armored, b"other data")
    with pytest.raises(sshsig.SignatureError):
        sshsig.signer_of(armored, b"data", namespace="file")
    with pytest.raises(sshsig.SignatureError):
        sshsig.signer_of("not armored", b"data")
    assert sshsig.parse_public_line(sshsig.public_line(sshsig.raw_public(key)) + " comment") == \
        sshsig.raw_public(key)


def _hand_commit(archive, tmp_path, name="note"):
    """An unsigned commit on main made with plain git inside the archive (as history written before signing)."""
    tree = git("--git-dir", archive.git_dir, "rev-parse", "main^{tree}").strip()
    commit = git("--git-dir", archive.git_dir, "commit-tree", tree, "-p", "main", "-m", f"{name} by hand").strip()
    git("--git-dir", archive.git_dir, "update-ref", "refs/heads/main", commit)
    return commit


def test_verify_is_clean_for_gitmail_history_and_remembers_its_verdicts(mail, store):
    from gitmail.storage.verify import verify

    slug = store.resolve(PROJECT)
    archive = store.archive(slug)
    first = verify(archive, slug, store.paths(slug).derived)
    assert first.clean and first.commits == first.checked >= 4
    again = verify(archive, slug, store.paths(slug).derived)
    assert again.clean and again.commits == first.commits and again.checked == 0
    mail.send_message(PROJECT, "GreenCastle", ["BlueLake"], "Re", "back")
    third = verify(archive, slug, store.paths(slug).derived)
    assert third.checked == 1 and third.clean


def test_verify_reports_unsigned_unknown_and_revoked_and_adopt_leaves_signed_history_judged(mail, store, tmp_path,
                                                                                           listing):
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from gitmail.storage.verify import adopt, verify

    slug = store.resolve(PROJECT)
    archive = store.archive(slug)
    derived = store.paths(slug).derived
    unsigned = _hand_commit(archive, tmp_path)
    found = verify(archive, slug, derived)
    assert [(f.commit, f.problem) for f in found.findings] == [(unsigned, "unsigned")]
    pooled = verify(archive, slug, str(tmp_path / "pooled"), workers=2, parallel_from=1)  # the same, in processes
    assert pooled.checked == pooled.commits and pooled.findings == found.findings
    adopt(archive, node=store.node, now=store.clock.now_ts())  # made on signed history: no adoption covers it
    assert [(f.commit, f.problem) for f in verify(archive, slug, derived).findings] == [(unsigned, "unsigned")]
    stranger = Ed25519PrivateKey.generate()  # a key the archive never named signs a commit
    archive.signer = lambda payload: sshsig.sign(stranger, payload)
    mail.send_message(PROJECT, "BlueLake", ["GreenCastle"], "forged?", "by a stranger's key")
    archive.signer = store.key.sign_commit
    found = verify(archive, slug, derived)
    assert [f.problem for f in found.findings] == ["unsigned", "unknown-key"] and found.findings[1].node is None
    nodes.revoke(archive, name=store.node, reason="stolen", by=store.node, now=store.clock.now_ts())
    found = verify(archive, slug, derived)
    assert {f.problem for f in found.findings} == {"unsigned", "unknown-key", "revoked-key"}
    # What the key signed before its revocation, every door lets in; verify reports it as that, for review.
    assert all(f.before_revocation for f in found.findings if f.problem == "revoked-key")


@pytest.mark.slow  # a process per command
def test_nodes_verify_and_adopt_from_the_shell(tmp_path):
    import json
    import subprocess
    import sys

    from .mcp_harness import child_env

    home = str(tmp_path / "home")

    def run(*args):
        return subprocess.run([sys.executable, "-m", "gitmail", *args], env=child_env(home), capture_output=True,
                              text=True, timeout=120)

    assert run("init", PROJECT).returncode == 0
    listed = run("nodes", "list", PROJECT, "--json")
    assert listed.returncode == 0, listed.stderr
    (node,) = json.loads(listed.stdout)
    assert node["this_machine"] and node["kind"] == "node"
    signers = str(tmp_path / "signers")
    assert run("nodes", "export", PROJECT, "-o", signers).returncode == 0
    store = Store(home, background=False)
    archive = store.archive(PROJECT)
    assert _verify(archive.git_dir, signers, archive.tip()).returncode == 0
    assert run("verify", PROJECT).returncode == 0
    _hand_commit(archive, tmp_path)
    found = run("verify", PROJECT, "--json")
    assert found.returncode == 1 and json.loads(found.stdout)["findings"][0]["problem"] == "unsigned"
    assert run("adopt", PROJECT).returncode == 0  # an unsigned commit on signed history: no adoption covers it
    still = run("verify", PROJECT, "--json")
    assert still.returncode == 1 and [f["problem"] for f in json.loads(still.stdout)["findings"]] == ["unsigned"]
    missing = run("verify", "/no/such/project")
    assert missing.returncode == 2
    rotated = run("nodes", "rotate", "--json")
    assert rotated.returncode == 0, rotated.stderr
    assert json.loads(rotated.stdout)["projects"] == [store.resolve(PROJECT)]
    again = run("verify", PROJECT, "--json")  # the rotation, signed by the old key, adds no finding
    assert [f["problem"] for f in json.loads(again.stdout)["findings"]] == ["unsigned"]


def test_a_push_that_swaps_or_deletes_a_nodes_key_is_refused(mail, store, tmp_path):
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    archive = store.archive(PROJECT)
    clone = str(tmp_path / "clone")
    git("clone", "-q", archive.git_dir, clone)
    path = os.path.join(clone, node_path(store.node))
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    thief = sshsig.public_line(sshsig.raw_public(Ed25519PrivateKey.generate()))
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text.replace(store.key.public_line, thief))
    assert git_run("commit", "-q", "-am", "my key now", cwd=clone).returncode == 0
    pushed = git_run("push", "-q", "origin", "main", cwd=clone)
    assert pushed.returncode != 0 and "without a rotation" in pushed.stderr
    git("reset", "-q", "--hard", "origin/main", cwd=clone)
    git("rm", "-q", node_path(store.node), cwd=clone)
    assert git_run("commit", "-q", "-m", "no more node", cwd=clone).returncode == 0
    pushed = git_run("push", "-q", "origin", "main", cwd=clone)
    assert pushed.returncode != 0 and "deleted" in pushed.stderr


def test_machines_that_sync_keep_each_others_signatures_and_verify_clean(tmp_path, listing):
    from gitmail.storage.verify import verify
    from gitmail.sync.remotes import add_remote
    from gitmail.sync.syncer import sync_project

    from .sync_helpers import PROJECT as SHARED
    from .sync_helpers import Machine

    hub = str(tmp_path / "hub.git")
    git("init", "-q", "--bare", "--initial-branch=main", hub)
    machines = [Machine(str(tmp_path / "m"), f"node{i}") for i in range(3)]
    machines[0].create_project()
    for machine in machines:
        add_remote(machine.store, SHARED, "hub", "file://" + hub)
        sync_project(machine.store, SHARED)
    for round_no in range(2):  # each writes while apart, then all sync: merges on top of others' commits
        for machine in machines:
            machine.send("BlueLake", ["GreenCastle"], f"round {round_no} from {machine.name}")
        for machine in machines + machines:
            sync_project(machine.store, SHARED)
    tips = {machine.archive.tip() for machine in machines}
    assert len(tips) == 1
    signers = str(tmp_path / "signers")
    with open(signers, "w", encoding="utf-8") as handle:
        handle.write(nodes.allowed_signers(machines[0].archive))
    keys = {machine.store.key.public: machine.name for machine in machines}
    seen = set()
    archive = machines[1].archive
    for commit in archive.repo.walk(archive.tip()):
        signature, payload = split_signature(commit.read_raw())
        assert signature is not None, f"{commit.id} is unsigned"
        seen.add(keys[sshsig.signer_of(signature, payload)])
        assert _verify(archive.git_dir, signers, str(commit.id)).returncode == 0
    assert seen == {"node0", "node1", "node2"}  # no machine re-signed another's commits
    for machine in machines:
        slug = machine.store.resolve(SHARED)
        found = verify(machine.archive, slug, machine.store.paths(slug).derived)
        assert found.clean, found.findings


@pytest.mark.skipif(not shutil.which("ssh-keygen"), reason="git signs with ssh-keygen")
def test_verify_reads_a_commit_git_itself_signed(tmp_path):
    key = NodeKey(str(tmp_path / "home"), "person")
    repo = str(tmp_path / "repo")
    git("init", "-q", "--initial-branch=main", repo)
    signed = git_run("-c", "gpg.format=ssh", "-c", f"user.signingkey={key.path}", "commit", "-q", "-S",
                     "--allow-empty", "-m", "signed by git", cwd=repo)
    assert signed.returncode == 0, signed.stderr
    raw = pygit2.Repository(repo)[git("rev-parse", "HEAD", cwd=repo).strip()].read_raw()
    signature, payload = split_signature(raw)
    assert signature is not None and sshsig.signer_of(signature, payload) == key.public


def test_verify_reports_a_node_writing_in_another_nodes_agents_name_until_a_handover(mail, store, tmp_path, listing):
    """BlueLake is bound to this node: another node's key may not sign its mail, until this node hands it over."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from gitmail.model.records import Agent, profile_path
    from gitmail.storage.verify import verify

    slug = store.resolve(PROJECT)
    archive = store.archive(slug)
    derived = store.paths(slug).derived
    assert archive.snapshot().load(profile_path("BlueLake"), Agent).node == store.node
    other = Ed25519PrivateKey.generate()
    nodes.add(archive, name="laptop", key=sshsig.public_line(sshsig.raw_public(other)), human=False, by=store.node,
              now=store.clock.now_ts())

    def send_as_laptop(subject: str) -> None:
        archive.signer = lambda payload: sshsig.sign(other, payload)
        try:
            mail.send_message(PROJECT, "BlueLake", ["GreenCastle"], subject, "from the laptop")
        finally:
            archive.signer = store.key.sign_commit

    send_as_laptop("not yet")
    found = verify(archive, slug, derived)
    assert {(f.problem, f.node) for f in found.findings} == {("not-allowed-writer", "laptop")}
    assert {f.path.split("/")[0] for f in found.findings} == {"messages", "agents"}  # the message and its copies
    assert all("bound to " + store.node in f.summary for f in found.findings)
    with pytest.raises(GitmailError, match="not a node name") as bad:
        nodes.handover(archive, agent="BlueLake", to="no such/node", hlc=store.clock.tick())
    assert bad.value.code == INVALID_ARGUMENT
    moved = nodes.handover(archive, agent="bluelake", to="laptop", hlc=store.clock.tick())  # any spelling
    assert moved.node == "laptop"
    send_as_laptop("now it may")
    again = verify(archive, slug, derived)
    assert len(again.findings) == len(found.findings)  # the first stays reported, the second is clean
    tip = archive.tip()
    with pytest.raises(GitmailError, match="bound to node laptop") as elsewhere:
        nodes.handover(archive, agent="BlueLake", to=store.node, hlc=store.clock.tick())  # only laptop may
    assert elsewhere.value.code == INVALID_ARGUMENT and archive.tip() == tip


def test_any_node_may_retire_an_agent_and_delete_its_key_but_none_may_give_it_one(mail, store, listing):
    """Retiring deletes a headless key (any node may retire); another node setting a key is a forgery."""
    import dataclasses

    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from gitmail import Change
    from gitmail.model.records import Agent, profile_path
    from gitmail.storage.verify import verify

    slug = store.resolve(PROJECT)
    archive = store.archive(slug)
    mail.spawn_agent(PROJECT, "BlueLake", ["viewer@*"], name="Bot", bootstrap_key=True)
    mail.spawn_agent(PROJECT, "BlueLake", ["viewer@*"], name="Plain")
    other = Ed25519PrivateKey.generate()
    nodes.add(archive, name="laptop", key=sshsig.public_line(sshsig.raw_public(other)), human=False, by=store.node,
              now=store.clock.now_ts())
    archive.signer = lambda payload: sshsig.sign(other, payload)
    try:
        mail.retire_agent(PROJECT, "Bot")  # the operator on the laptop: its key goes with it

        def give_a_key(snap):
            plain = snap.load(profile_path("Plain"), Agent)
            return Change("a key for Plain").put_record(dataclasses.replace(
                plain, key_hash="sha256:" + "0" * 64, key_expires_at="2099-01-01T00:00:00.000Z",
                hlc=store.clock.tick()))

        archive.transact(give_a_key)
    finally:
        archive.signer = store.key.sign_commit
    assert archive.snapshot().load(profile_path("Bot"), Agent).key_hash is None
    found = verify(archive, slug, store.paths(slug).derived)
    assert {(f.problem, f.node, f.path) for f in found.findings} == {
        ("not-allowed-writer", "laptop", profile_path("Plain"))}


def test_gits_listing_of_each_commit_matches_the_tree_walk(mail, store, tmp_path):
    """What a long range is judged by (one ``git log --raw``) is what reading the trees finds, commit by commit."""
    from gitmail import Change
    from gitmail.storage.authorship import _Profiles, _walk, listed_changes

    slug = store.resolve(PROJECT)
    archive = store.archive(slug)
    mail.file_reservation_paths(PROJECT, "BlueLake", ["src/*.py"], ttl_seconds=3600)
    mail.register_agent(PROJECT, "codex", "gpt", name="Gone")
    mail.set_contact_policy(PROJECT, "BlueLake", "open")
    mail.send_message(PROJECT, "Gone", ["BlueLake"], "bye", "leaving")
    mail.hard_delete_agent(PROJECT, "Gone", confirmation="I UNDERSTAND")  # a folder deleted whole
    archive.transact(lambda snap: Change("a file where a folder was").put("agents/Gone", b"x"))
    _hand_commit(archive, tmp_path)  # a commit that changes nothing
    repo = archive.repo
    listed = listed_changes(repo, archive.tip(), [])
    profiles = _Profiles(repo)
    commits = list(repo.walk(archive.tip()))
    assert set(listed) == {commit.id.raw for commit in commits}
    for commit in commits:
        before = commit.parents[0].tree if commit.parents else None
        walked = _walk(repo, before, commit.tree, "", {}) if before is not None else profiles.changes(None, commit.tree)
        assert {path: blob for path, blob in walked.items() if blob is not None} == {
            path: blob for path, blob in listed[commit.id.raw].items() if blob is not None}, commit.message


def test_a_lost_nodes_agents_are_handed_over_by_any_node_once_its_keys_are_revoked(mail, store, listing):
    """Until the laptop's key is revoked only the laptop may move its agents; afterwards this node may."""
    import dataclasses

    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from gitmail import Change
    from gitmail.model.records import Agent, profile_path
    from gitmail.storage.verify import verify

    slug = store.resolve(PROJECT)
    archive = store.archive(slug)
    derived = store.paths(slug).derived
    laptop = Ed25519PrivateKey.generate()
    nodes.add(archive, name="laptop", key=sshsig.public_line(sshsig.raw_public(laptop)), human=False, by=store.node,
              now=store.clock.now_ts())
    nodes.handover(archive, agent="GreenCastle", to="laptop", hlc=store.clock.tick())  # signed here, its node
    assert verify(archive, slug, derived).clean
    tip = archive.tip()
    with pytest.raises(GitmailError, match="revoke its key first") as refused:
        nodes.handover(archive, agent="GreenCastle", to=store.node, hlc=store.clock.tick())
    assert refused.value.code == INVALID_ARGUMENT and archive.tip() == tip

    def take(snap):  # what a handover would write, made here while the laptop is still trusted: a forgery
        profile = snap.load(profile_path("GreenCastle"), Agent)
        return Change("taken").put_record(dataclasses.replace(profile, node=store.node, hlc=store.clock.tick()))

    archive.transact(take)
    found = verify(archive, slug, derived)
    assert {(f.problem, f.path) for f in found.findings} == {("not-allowed-writer", profile_path("GreenCastle"))}
    nodes.revoke(archive, name="laptop", reason="the laptop was lost", by=store.node, now=store.clock.now_ts())
    archive.transact(take)  # the same write once the laptop is revoked: any node may move its agents
    moved = nodes.handover(archive, agent="GreenCastle", to="laptop", hlc=store.clock.tick())  # and so may the API
    assert moved.node == "laptop"
    again = verify(archive, slug, derived)
    assert again.findings == found.findings  # only the forgery made before the revocation


def test_a_door_refuses_a_new_node_whose_name_its_machine_pinned_to_another_key(mail, store, tmp_path, monkeypatch):
    """First use trusts a node whose record its own key signs, unless the receiving machine pinned that name."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from gitmail.storage.nodekey import NodeKey
    from gitmail.sync.pushcheck import signed_by_writers

    archive = store.archive(PROJECT)
    before = archive.tip()
    impostor = Ed25519PrivateKey.generate()
    archive.signer = lambda payload: sshsig.sign(impostor, payload)
    try:
        nodes.add(archive, name="laptop", key=sshsig.public_line(sshsig.raw_public(impostor)), human=False,
                  by="laptop", now=store.clock.now_ts())
    finally:
        archive.signer = store.key.sign_commit
    hub_home = str(tmp_path / "hub-home")
    monkeypatch.setenv("GITMAIL_HOME", hub_home)
    assert signed_by_writers(archive.repo, before, before, archive.tip()) == []  # nothing pinned: first use
    real = NodeKey(str(tmp_path / "laptop-home"), "laptop")
    nodes.pin_key(hub_home, "laptop", real.public_line)  # `gitmail nodes pin PROJECT laptop --key ...` there
    with pytest.raises(GitmailError) as bad:
        nodes.pin_key(hub_home, "laptop", "ssh-ed25519 nonsense")
    assert bad.value.code == INVALID_ARGUMENT and nodes.read_pins(hub_home) == {"laptop": real.public_line}
    refused = signed_by_writers(archive.repo, before, before, archive.tip())
    assert [problem.code for problem in refused] == ["unknown-key"]
