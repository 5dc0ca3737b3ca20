"""An adopted history travels: every door honours ``gitmail adopt`` for the history written before signing.

Machine A holds history its gitmail wrote before commits were signed, then
signs, and adopts that history (``gitmail adopt``). Through a hub that runs
no hooks, machine B takes all of it in (nothing kept aside, both converge,
``verify`` clean on both); a checked hub takes the same history by push. An
unsigned commit made after signing began is still refused everywhere, even
when a signed adoption names it: an adoption vouches only for history with
no signed commit below it.

A machine joining after a key was revoked judges by the revocation it
fetches: what the key signed after it is kept aside, what it signed before
(and every machine holds) comes in, and the newcomer converges with the rest.
"""

from __future__ import annotations

import pytest

from gitmail.storage import nodes
from gitmail.storage.verify import adopt, verify
from gitmail.sync.remotes import add_remote
from gitmail.sync.syncer import sync_project

from .sync_helpers import PROJECT, Machine, bare_hub, message_counts, tree_files, write_unsigned

pytestmark = pytest.mark.timeout(120)


def _clean(machine: Machine) -> bool:
    slug = machine.store.resolve(PROJECT)
    return verify(machine.archive, slug, machine.store.paths(slug).derived).clean


def test_an_adopted_history_crosses_a_hub_without_hooks_and_a_checked_one(tmp_path):
    a, b = Machine(str(tmp_path), "node-a"), Machine(str(tmp_path), "node-b")
    old = []
    write_unsigned(a, lambda: (a.create_project(), old.append(a.send("BlueLake", ["GreenCastle"], "before signing"))))
    a = Machine(str(tmp_path), "node-a")  # gitmail upgraded on node-a: its next commit publishes its key
    signed = a.send("BlueLake", ["RedStone"], "first signed")  # publishes node-a's record, signed
    assert not _clean(a)
    adopt(a.archive, node=a.name, now=a.store.clock.now_ts())
    assert _clean(a)

    plain = bare_hub(str(tmp_path / "plain.git"), checked=False)
    checked = bare_hub(str(tmp_path / "checked.git"), checked=True)
    add_remote(a.store, PROJECT, "plain", plain)
    add_remote(a.store, PROJECT, "checked", checked)
    for remote in ("plain", "checked"):  # the checked hub's pre-receive honours the adoption too
        (result,) = sync_project(a.store, PROJECT, remote).results
        assert result.error is None and result.pushed, result.error

    add_remote(b.store, PROJECT, "hub", plain)
    report = sync_project(b.store, PROJECT)
    assert report.exit_code == 0 and report.results[0].quarantined == [], report.lines()
    reply = b.send("GreenCastle", ["BlueLake"], "from b")
    sync_project(b.store, PROJECT)
    assert sync_project(a.store, PROJECT, "plain").exit_code == 0
    assert tree_files(a.store) == tree_files(b.store)
    assert set(message_counts(tree_files(b.store))) == {*old, signed, reply}
    assert _clean(a) and _clean(b)

    # An unsigned commit on signed history: refused at every door, and an adoption naming it changes nothing.
    late: list[str] = []
    write_unsigned(a, lambda: late.append(a.send("BlueLake", ["GreenCastle"], "unsigned after signing")))
    a = Machine(str(tmp_path), "node-a")
    (refused,) = sync_project(a.store, PROJECT, "checked").results
    assert refused.error is not None and "[unsigned]" in refused.error["message"], refused.error
    adopt(a.archive, node=a.name, now=a.store.clock.now_ts())  # signed by node-a, naming the unsigned commit
    sync_project(a.store, PROJECT, "plain")
    report = sync_project(b.store, PROJECT)
    codes = {item["code"] for item in report.results[0].quarantined}
    assert report.exit_code == 1 and "unsigned" in codes, report.lines()
    assert late[0] not in message_counts(tree_files(b.store))
    slug = b.store.resolve(PROJECT)
    found = verify(b.archive, slug, b.store.paths(slug).derived).findings  # main is clean; the rest kept aside
    assert found and all(item.kept_aside for item in found) and "unsigned" in {item.problem for item in found}


def test_a_machine_joining_after_a_revocation_keeps_out_what_the_key_signed_after_it(tmp_path):
    plain = bare_hub(str(tmp_path / "plain.git"), checked=False)
    a, r = Machine(str(tmp_path), "node-a"), Machine(str(tmp_path), "node-r")
    a.create_project()
    for machine in (a, r):
        add_remote(machine.store, PROJECT, "hub", plain)
        sync_project(machine.store, PROJECT)
    r.register("Rogue")
    before = r.send("Rogue", ["BlueLake"], "before the revocation")
    sync_project(r.store, PROJECT)
    sync_project(a.store, PROJECT)
    nodes.revoke(a.archive, name=r.name, reason="stolen", by=a.name, now=a.store.clock.now_ts())
    sync_project(a.store, PROJECT)
    after = r.send("Rogue", ["BlueLake"], "after the revocation")  # r has not seen it, and merges it onto the hub
    sync_project(r.store, PROJECT)
    assert {item["code"] for item in sync_project(a.store, PROJECT).results[0].quarantined} == {"revoked-key"}

    c = Machine(str(tmp_path), "node-c")  # joins now: the revocation arrives in the same fetch as the key's commits
    add_remote(c.store, PROJECT, "hub", plain)
    report = sync_project(c.store, PROJECT)
    assert {item["code"] for item in report.results[0].quarantined} == {"revoked-key"}, report.lines()
    messages = message_counts(tree_files(c.store))
    assert before in messages and after not in messages
    assert tree_files(c.store) == tree_files(a.store)
