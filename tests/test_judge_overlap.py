"""Judging a range while a pool checks its signatures: the verdicts are those of judging after the checks.

``judge_range`` judges by the key each signature names while the pool
verifies them; these tests hold it to the one rule: a commit whose
signature does not check is refused (and what builds on it left out) even
though the judging by its claimed key finished first and accepted it.
"""

from __future__ import annotations

import os

import pygit2
import pytest

from gitmail.model import sshsig
from gitmail.storage import authorship
from gitmail.storage.authorship import BAD, SIGNED, UNSIGNED, Trust, claimed_verdict, judge_range, signature_verdict
from gitmail.storage.handles import tree_entry
from gitmail.storage.nodes import Keyring, trusted_keyring
from gitmail.storage.objects import COMMIT, PackBuffer

from .mail_helpers import two_agents_one_message

PROJECT = "/work/overlap/project"


@pytest.fixture
def mail(store):
    return two_agents_one_message(store, PROJECT)


def _tamper_tip(archive) -> str:
    """Put on ``main`` a copy of its tip whose message changed after signing: the signature names a known key."""
    tip = archive.tip()
    raw = archive.repo.odb.read(pygit2.Oid(hex=tip))[1]
    pack = PackBuffer()
    forged = pack.add(COMMIT, raw.replace(b"\n\n", b"\n\nforged: ", 1)).hex()
    pack.write(os.path.join(archive.git_dir, "objects", "pack"))
    archive.repo.references["refs/heads/main"].set_target(pygit2.Oid(hex=forged))
    archive.renew_handles()
    return forged


def test_a_claimed_verdict_names_the_key_and_only_the_check_finds_changed_bytes(mail, store):
    archive = store.archive(PROJECT)
    good = archive.repo[archive.tip()].read_raw()
    assert claimed_verdict(good) == signature_verdict(good) == (SIGNED, store.key.public)
    forged = archive.repo[_tamper_tip(archive)].read_raw()
    assert claimed_verdict(forged) == (SIGNED, store.key.public)  # the key it names, not yet checked
    assert signature_verdict(forged) == (BAD, bytes(32))
    unsigned = forged.replace(b"\ngpgsig ", b"\nxgpgsig ", 1)
    assert claimed_verdict(unsigned)[0] == signature_verdict(unsigned)[0] == UNSIGNED
    with pytest.raises(sshsig.SignatureError):
        sshsig.claimed_signer("-----BEGIN SSH SIGNATURE-----\nnot base64!\n-----END SSH SIGNATURE-----\n")


def test_a_bad_signature_is_refused_though_the_judging_by_its_claimed_key_finished_first(mail, store, monkeypatch):
    archive = store.archive(PROJECT)
    forged = _tamper_tip(archive)
    mail.send_message(PROJECT, "GreenCastle", ["BlueLake"], "Re", "built on the forged commit")
    tip = archive.tip()
    child = str(archive.repo[tip].parent_ids[0]) == forged and tip
    assert child, "the new message builds on the forged commit"
    judgings: list[authorship.Judged] = []
    at_result: list[int] = []
    judge_found, result = authorship._judge_found, authorship._SignatureChecks.result

    def judging(*args, **kwargs):
        judgings.append(judge_found(*args, **kwargs))
        return judgings[-1]

    def checks_result(self):
        at_result.append(len(judgings))  # how many judgings were done when the pool's verdicts were taken
        return result(self)

    monkeypatch.setattr(authorship, "_judge_found", judging)
    monkeypatch.setattr(authorship._SignatureChecks, "result", checks_result)
    pooled = judge_range(archive.repo, tip, [], Trust(trusted_keyring(archive)), workers=2, parallel_from=1)
    assert at_result == [1], "the judging by claimed keys finished before the checked verdicts were taken"
    assert forged not in judgings[0].tainted  # that first judging accepted the forgery by the key it names
    assert len(judgings) == 2  # ... so the range was judged again from the checked verdicts
    assert [(r.commit, r.code) for r in pooled.refusals] == [(forged, "bad-signature")]
    assert pooled.tainted == {forged, tip} and tip not in pooled.refused
    assert pooled.checked[pygit2.Oid(hex=forged).raw] == (BAD, bytes(32))
    monkeypatch.undo()
    alone = judge_range(archive.repo, tip, [], Trust(trusted_keyring(archive)), workers=1)
    assert (alone.order, alone.refusals, alone.tainted, alone.checked) == (
        pooled.order, pooled.refusals, pooled.tainted, pooled.checked)


def test_when_every_signature_checks_the_early_judging_stands_with_what_it_learned(mail, store, monkeypatch):
    archive = store.archive(PROJECT)
    tip = archive.tip()
    calls: list[int] = []
    judge_found = authorship._judge_found
    monkeypatch.setattr(authorship, "_judge_found", lambda *a, **k: calls.append(1) or judge_found(*a, **k))
    trust = Trust(Keyring({}, {}))  # no key known: the node's record, signed by its own key, is trusted on first use
    pooled = judge_range(archive.repo, tip, [], trust, workers=2, parallel_from=1)
    assert calls == [1] and pooled.refusals == [] and trust.learned == {store.key.public: store.node}
    monkeypatch.undo()
    alone_trust = Trust(Keyring({}, {}))
    alone = judge_range(archive.repo, tip, [], alone_trust, workers=1)
    assert (alone.order, alone.refusals, alone.checked) == (pooled.order, pooled.refusals, pooled.checked)
    assert alone_trust.learned == trust.learned


def _tree(repo: pygit2.Repository, base: pygit2.Tree, *, put: dict[str, bytes] | None = None,
          drop: tuple[str, ...] = ()) -> pygit2.Tree:
    """``base`` with files put and dropped (names kept exactly as given, in whatever case)."""
    oid = base.id
    for path, data in [*(put or {}).items(), *((path, None) for path in drop)]:
        oid = _edit(repo, repo[oid], path.split("/"), None if data is None else repo.create_blob(data))
    return repo[oid]


def _edit(repo: pygit2.Repository, tree: pygit2.Tree | None, parts: list[str], blob: pygit2.Oid | None) -> pygit2.Oid:
    builder = repo.TreeBuilder(tree) if tree is not None else repo.TreeBuilder()
    if len(parts) == 1:
        if blob is None:
            builder.remove(parts[0])
        else:
            builder.insert(parts[0], blob, pygit2.enums.FileMode.BLOB)
    else:
        sub = tree_entry(tree, parts[0]) if tree is not None else None
        builder.insert(parts[0], _edit(repo, sub, parts[1:], blob), pygit2.enums.FileMode.TREE)
    return builder.write()


def test_bindings_carried_along_a_chain_are_those_each_tree_names(mail, store):
    """A commit that changes no profile and no folder of agents/ keeps its parent's bindings; any other looks again."""
    archive = store.archive(PROJECT)
    repo = archive.repo
    start = repo[archive.tip()].peel(pygit2.Tree)
    profile = "agents/GreenCastle/profile.yaml"
    green = start[profile].read_raw()
    chain = [start]
    chain.append(_tree(repo, chain[-1], put={"agents/BlueLake/inbox/zz.md": b"mail\n"}))  # carried
    chain.append(_tree(repo, chain[-1], put={"agents/bluelake/inbox/zz.md": b"mail\n"}))  # a folder in another case
    chain.append(_tree(repo, chain[-1], drop=(profile,)))  # a profile goes
    chain.append(_tree(repo, chain[-1], put={profile: green.replace(store.node.encode(), b"elsewhere")}))
    chain.append(_tree(repo, chain[-1], put={"agents/GreenCastle/inbox/zz.md": b"mail\n"}))  # carried
    walked = authorship._Profiles(repo)
    names = ("bluelake", "BlueLake", "greencastle", "GreenCastle", "Nobody")  # each remembered by its lower case
    seen = []
    for before, after in zip([None, *chain[:-1]], chain, strict=True):
        if before is not None:
            walked.changes(before, after)
        fresh = authorship._Profiles(repo)
        seen.append([walked.bound(name, None, after) for name in names])
        assert seen[-1] == [fresh.bound(name, None, after) for name in names]
    generations = [walked._generations[tree.id] for tree in chain]
    assert generations[1] == generations[0] and generations[5] == generations[4]  # carried where nothing changed
    assert len(set(generations[1:5])) == 4  # looked up again after each change to agents/ that could matter
    assert seen[0][:4] == [("BlueLake", store.node)] * 2 + [("GreenCastle", store.node)] * 2
    assert seen[1][0] == ("BlueLake", store.node) and seen[2][0] is None  # agents/bluelake/ now answers
    assert seen[3][2] is None and seen[4][2] == ("GreenCastle", "elsewhere")


@pytest.mark.parametrize("batch_from", [1, 10**9], ids=["git-listing", "tree-walk"])
def test_judging_a_chain_of_messages_looks_each_sender_up_once(mail, store, monkeypatch, batch_from):
    """Messages change no profile: the judging carries the bindings along the chain instead of reading each tree's."""
    monkeypatch.setattr(authorship, "BATCH_FROM", batch_from)
    archive = store.archive(PROJECT)
    start = archive.tip()
    for n in range(12):
        mail.send_message(PROJECT, ("BlueLake", "GreenCastle")[n % 2], [("GreenCastle", "BlueLake")[n % 2]],
                          f"s {n}", "body")
    looked: list[str] = []
    lookup = authorship._Profiles._lookup
    monkeypatch.setattr(authorship._Profiles, "_lookup",
                        lambda self, tree, agent, names: looked.append(agent) or lookup(self, tree, agent, names))
    judged = judge_range(archive.repo, archive.tip(), [start], Trust(trusted_keyring(archive)), workers=1)
    assert len(judged.order) == 12 and judged.refusals == []
    assert sorted(looked) == ["BlueLake", "GreenCastle"], looked
