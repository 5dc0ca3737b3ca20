"""``gitmail verify``, sync's fetch door and a checked hub give each commit of one history the same verdict.

One history holds everything an adoption may or may not cover: commits
written before the project signed anything, adopted; a machine's commits
from before its key was lost, adopted up to the last one the operator
vouches for (``gitmail adopt --commit C``), and one more it signed after
that but before its revocation; and an unsigned commit made on signed
history, with a signed commit on top. (An adoption naming that unsigned
commit would change nothing for it, and would vouch for the lost key's
commits below it: adopting the tip after a revocation trusts all that key
signed before it.) The same history is then
judged by ``verify`` on the machine that holds it, by a machine joining
through a hub without hooks (its fetch door), and by a checked hub taking a
push. All three refuse the unsigned commit alone (what builds on it stays
out at the doors), accept the adopted history, and the one thing ``verify``
reports that the doors must let in, a revoked key's commit from before its
revocation that no adoption covers, is marked as such.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pytest

from gitmail.model import sshsig
from gitmail.storage import nodes
from gitmail.storage.authorship import BUILDS_ON_REFUSED, SIGNED, UNSIGNED, signature_verdict
from gitmail.storage.verify import adopt, verify
from gitmail.sync.remotes import add_remote
from gitmail.sync.syncer import sync_project

from .conftest import git_run
from .sync_helpers import PROJECT, Machine, bare_hub, write_unsigned

pytestmark = pytest.mark.timeout(120)


def _history(machine: Machine, tip: str = "main") -> list[str]:
    listed = git_run("--git-dir", machine.archive.git_dir, "rev-list", tip)
    assert listed.returncode == 0, listed.stderr
    return listed.stdout.split()


@dataclass(frozen=True)
class Built:
    """The machine holding the history, and which commits of it are which."""

    machine: Machine
    pre_signing: list[str]  # unsigned, adopted
    early_r: set[str]  # node-r's, adopted up to the commit the operator vouches for
    late_r: set[str]  # node-r's after that commit, before its revocation
    unsigned: str  # unsigned, on signed history


def _build(tmp_path) -> Built:
    """Machine a's history described above."""
    plain = bare_hub(str(tmp_path / "plain.git"), checked=False)
    a, r = Machine(str(tmp_path), "node-a"), Machine(str(tmp_path), "node-r")
    write_unsigned(a, lambda: (a.create_project(), a.send("BlueLake", ["GreenCastle"], "before signing")))
    pre_signing = _history(a)
    a = Machine(str(tmp_path), "node-a")  # gitmail upgraded: every commit from now on is signed
    a.send("BlueLake", ["RedStone"], "first signed")
    adopt(a.archive, node=a.name, now=a.store.clock.now_ts())
    for machine in (a, r):
        add_remote(machine.store, PROJECT, "hub", plain)
        assert sync_project(machine.store, PROJECT).exit_code == 0
    r.register("Rogue")
    r.send("Rogue", ["BlueLake"], "before the theft")
    for machine in (r, a):
        assert sync_project(machine.store, PROJECT).exit_code == 0
    vouched = a.archive.tip()  # the operator trusts node-r's commits up to here
    r.send("Rogue", ["BlueLake"], "after the theft, before the revocation")
    for machine in (r, a):
        assert sync_project(machine.store, PROJECT).exit_code == 0
    adopt(a.archive, node=a.name, now=a.store.clock.now_ts(), commit=vouched)
    nodes.revoke(a.archive, name=r.name, reason="stolen", by=a.name, now=a.store.clock.now_ts())
    write_unsigned(a, lambda: a.send("BlueLake", ["GreenCastle"], "unsigned after signing"))
    unsigned = a.archive.tip()
    a = Machine(str(tmp_path), "node-a")
    a.send("BlueLake", ["GreenCastle"], "signed again")  # builds on the unsigned commit
    raw_r = sshsig.parse_public_line(r.store.key.public_line)
    by_r = {c for c in _history(a) if signature_verdict(a.archive.repo[c].read_raw()) == (SIGNED, raw_r)}
    adopted = set(_history(a, vouched))
    return Built(a, pre_signing, early_r=by_r & adopted, late_r=by_r - adopted, unsigned=unsigned)


def _commit_of(item: dict) -> str:
    """The commit (its first twelve digits) a fetch door's quarantine entry is about."""
    found = re.search(r"commit ([0-9a-f]{12})", f"{item['path']} {item['reason']}")
    assert found, item
    return found.group(1)


def test_verify_the_fetch_door_and_a_checked_hub_give_each_commit_one_verdict(tmp_path):
    built = _build(tmp_path)
    a, unsigned, late_r = built.machine, built.unsigned, built.late_r
    history = _history(a)
    assert late_r and built.early_r and built.pre_signing
    assert all(signature_verdict(a.archive.repo[c].read_raw())[0] == UNSIGNED for c in built.pre_signing)
    taken = set(history) - {unsigned, history[0]}  # all but the unsigned commit and the commit built on it

    # verify on the machine that holds it.
    slug = a.store.resolve(PROJECT)
    found = verify(a.archive, slug, a.store.paths(slug).derived).findings
    assert not any(item.kept_aside for item in found)
    assert {item.commit: item.problem for item in found if not item.before_revocation} == {unsigned: "unsigned"}
    assert {item.commit for item in found if item.before_revocation} == late_r
    assert {item.problem for item in found if item.before_revocation} == {"revoked-key"}

    # The fetch door of a machine joining through a hub without hooks.
    joining_hub = bare_hub(str(tmp_path / "joining.git"), checked=False)
    assert git_run("--git-dir", a.archive.git_dir, "push", "-q", joining_hub, "main").returncode == 0
    c = Machine(str(tmp_path), "node-c")
    add_remote(c.store, PROJECT, "hub", joining_hub)
    report = sync_project(c.store, PROJECT)
    assert report.exit_code == 1, report.lines()
    kept = report.results[0].quarantined
    assert {_commit_of(item) for item in kept if item["code"] != BUILDS_ON_REFUSED} == {unsigned[:12]}
    assert {item["code"] for item in kept} == {"unsigned", BUILDS_ON_REFUSED}
    assert set(_history(c)) & set(history) == taken  # late_r and both adopted stretches included

    # A checked hub taking the same history by push.
    checked = bare_hub(str(tmp_path / "checked.git"), checked=True)
    pushed = git_run("--git-dir", a.archive.git_dir, "push", checked, "main")
    assert pushed.returncode != 0
    refused = dict(re.findall(r"refused commit ([0-9a-f]{40}): \[([a-z-]+)\]", pushed.stderr))
    assert refused == {unsigned: "unsigned"}, pushed.stderr
    before = git_run("--git-dir", a.archive.git_dir, "push", checked, f"{unsigned}^:refs/heads/main")
    assert before.returncode == 0, before.stderr
    assert set(_history(a, f"{unsigned}^")) == taken
