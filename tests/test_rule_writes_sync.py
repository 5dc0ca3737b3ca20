"""Writes a record rule lets any node make pass every door from another machine, and ``verify`` stays clean.

Ada is bound to machine A. On machine B the operator writes to her as the
overseer (records the overseer's, written wherever the operator works) and
then retires her (a status change any node may make by rule). B pushes
through a checked hub (its ``pre-receive`` judges who may write what) and A
takes it in through its fetch door: nothing refused, both converge, and
``gitmail verify`` finds nothing on either. A message in Ada's name written
on B is refused at the hub as ``not-allowed-writer``.
"""

from __future__ import annotations

import pytest

from gitmail.mail.facade import Mail
from gitmail.storage.verify import verify
from gitmail.sync.findings import SYNC_RULES
from gitmail.sync.hookinstall import install_hub
from gitmail.sync.remotes import add_remote
from gitmail.sync.syncer import sync_project

from .conftest import git_run
from .sync_helpers import PROJECT, Machine, tree_files

pytestmark = pytest.mark.timeout(120)


def _findings(machine: Machine) -> list:
    slug = machine.store.resolve(PROJECT)
    return verify(machine.archive, slug, machine.store.paths(slug).derived, rules=SYNC_RULES).findings


def test_the_overseer_and_a_retirement_written_on_another_node_pass_every_door(tmp_path):
    hub = str(tmp_path / "hub.git")
    assert git_run("init", "-q", "--bare", "--initial-branch=main", hub).returncode == 0
    install_hub(hub)
    a, b = Machine(str(tmp_path), "node-a"), Machine(str(tmp_path), "node-b")
    on_a, on_b = Mail(a.store), Mail(b.store)
    on_a.ensure_project(PROJECT)
    on_a.register_agent(PROJECT, "codex", "gpt", name="Ada")
    for machine in (a, b):
        add_remote(machine.store, PROJECT, "hub", "file://" + hub)
        assert sync_project(machine.store, PROJECT).exit_code == 0

    on_b.send_as_overseer(PROJECT, ["Ada"], "from the operator", "Please wrap up.")
    on_b.retire_agent(PROJECT, "Ada")
    (pushed,) = sync_project(b.store, PROJECT).results
    assert pushed.error is None and pushed.pushed and pushed.quarantined == [], pushed.error
    report = sync_project(a.store, PROJECT)
    assert report.exit_code == 0 and report.results[0].quarantined == [], report.lines()
    assert tree_files(a.store) == tree_files(b.store)
    assert on_a.whois(PROJECT, "Ada")["status"] != "active"
    assert _findings(a) == [] and _findings(b) == []

    b.send("Ada", ["Ada"], "in Ada's name from node-b")  # a node writing in another node's agent's name
    (refused,) = sync_project(b.store, PROJECT).results
    assert refused.error is not None and "[not-allowed-writer]" in refused.error["message"], refused.error
