"""Sync through the git hosts teams run: gitolite over SSH, smart HTTP behind nginx, and a plain git daemon.

Three machines, each its own process with its own store and its own
credentials, sync through one hub on each host (:mod:`tests.hosts`), all
released at once round after round; every message arrives exactly once
everywhere and fsck is clean. A hub on a checked host refuses a push that
damages the archive, whoever's credentials it comes with, and the host
turns away someone it does not know; a daemon hub takes the damage in, and
the machine that fetches it keeps it aside instead of applying it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter

import pytest

from gitmail import Store
from gitmail.model.records import message_path
from gitmail.sync.remotes import add_remote
from gitmail.sync.syncer import sync_project

from .conftest import git_run
from .hosts import KINDS, Host, started
from .machines import MachineProcess, converge, hub_results, sync_all
from .mcp_harness import ROOT, child_env
from .sync_helpers import PROJECT as SHARED
from .sync_helpers import Machine, tree_files
from .sync_machine import PROJECT

# Git hosts (sshd with gitolite, nginx with fcgiwrap, git daemon) and machine processes; every push to a
# checked hub starts gitmail's check in a process of its own, so a busy machine needs the longer timeout.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

NODES = ("node-a", "node-b", "node-c")
ATTACKER = "node-m"  # a machine the host knows, pushing by hand what gitmail would never write
NEWCOMER = "node-d"  # joins a converged hub with the gitmail command
AGENTS = ("BlueLake", "GreenCastle", "RedStone")


@pytest.fixture(scope="module", params=KINDS)
def host(request, tmp_path_factory):
    """One running host of each kind for the module, with a hub per test."""
    root = str(tmp_path_factory.mktemp(f"host-{request.param}"))
    with started(request.param, root, machines=(*NODES, NEWCOMER, ATTACKER), hubs=("converge", "damage")) as running:
        yield running


@pytest.fixture
def machines(host: Host, tmp_path):
    started_ = [MachineProcess(str(tmp_path), node, env=host.access(node, "converge").env) for node in NODES]
    yield started_
    for machine in started_:
        machine.close()


def test_three_machines_converge_through_the_host(host: Host, machines: list[MachineProcess], tmp_path):
    a, b, c = machines
    a.ask("mail", method="ensure_project", kwargs={"human_key": PROJECT})
    for name in AGENTS:
        a.mail("register_agent", program="test", model="m", name=name)
        a.mail("set_contact_policy", agent_name=name, policy="open")
    for name, node in (("GreenCastle", "node-b"), ("RedStone", "node-c")):  # each works from its own machine
        a.ask("handover", agent=name, node=node)
    for machine in machines:
        machine.ask("add_remote", name="hub", url=host.access(machine.node, "converge").url)
    clean(sync_all([a]))
    clean(sync_all([b, c]))
    sent: dict[str, list[str]] = {}
    for _ in range(2):  # every machine writes, then all sync at once through the host
        for machine, sender, to in ((a, "BlueLake", ["GreenCastle"]), (b, "GreenCastle", ["RedStone"]),
                                    (c, "RedStone", ["BlueLake", "GreenCastle"])):
            result = machine.mail("send_message", sender_name=sender, to=to, subject="note", body_md="hello")
            sent[result["deliveries"][0]["payload"]["id"]] = to
        clean(sync_all(machines))
    hub = host.path("converge")
    converge(machines, hub, clean)

    hub_messages = Counter(path.rsplit("/", 1)[1].removesuffix(".md") for path in
                           git_run("ls-tree", "-r", "--name-only", "main", cwd=hub).stdout.split()
                           if path.startswith("messages/"))
    assert hub_messages == Counter(set(sent))  # every message on the hub, once
    for machine in machines:
        assert machine.ask("fsck") == [], machine.node
        assert machine.ask("verify") == [], machine.node  # every commit signed by a node allowed to write it
        for name in AGENTS:
            inbox = [m["id"] for m in machine.mail("fetch_inbox", agent_name=name, limit=200)]
            assert Counter(inbox) == Counter(mid for mid, to in sent.items() if name in to), (machine.node, name)

    # A fourth machine joins as the README says, with the gitmail command: name the remote, sync (no clone).
    joining = host.access(NEWCOMER, "converge")
    home = str(tmp_path / NEWCOMER)
    for args in (("remote", "add", PROJECT, "hub", joining.url), ("sync", PROJECT, "--json")):
        proc = subprocess.run([sys.executable, "-m", "gitmail", "--home", home, *args], cwd=ROOT, text=True,
                              capture_output=True, env=child_env(home, **joining.env), timeout=240)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    ((result,),) = [report["results"] for report in json.loads(proc.stdout)]
    assert result["records_in"] > 0 and result["exit_code"] == 0, result
    archive = Store(home, background=False).archive(PROJECT)
    assert str(archive.repo[archive.tip()].peel(2).id) == git_run("rev-parse", "main^{tree}", cwd=hub).stdout.strip()


def clean(reports: list[dict]) -> None:
    """Every machine's sync through the host went through with nothing refused, conflicting or overlapping."""
    for result in hub_results(reports):
        assert result["exit_code"] == 0, result


def test_damage_is_refused_at_a_checked_hub_and_kept_aside_past_a_plain_one(host: Host, tmp_path, monkeypatch):
    writer = Machine(str(tmp_path), NODES[0])
    writer.create_project()
    first = writer.send("BlueLake", ["GreenCastle"], "before the attack")
    access = host.access(writer.name, "damage")
    for key, value in access.env.items():
        monkeypatch.setenv(key, value)
    add_remote(writer.store, SHARED, "hub", access.url)
    assert sync_project(writer.store, SHARED).results[0].error is None
    before = host.tip("damage")
    assert before == writer.archive.tip()

    # The attacker clones the hub with its own credentials and edits a message that was already sent.
    attacker = host.access(ATTACKER, "damage")
    clone = str(tmp_path / "attacker")
    assert host.git(attacker, "clone", "-q", attacker.url, clone).returncode == 0
    edited = os.path.join(clone, message_path(first))
    with open(edited, "rb") as handle:
        text = handle.read()
    with open(edited, "wb") as handle:
        handle.write(text.replace(b"before the attack from", b"rewritten by the attacker"))
    assert git_run("commit", "-q", "-am", "an edit", cwd=clone).returncode == 0
    pushed = host.git(attacker, "push", "origin", "main", cwd=clone)
    if host.checked:
        assert pushed.returncode != 0 and "gitmail: refused" in pushed.stderr, pushed.stderr
        assert host.tip("damage") == before
        # Someone the host does not know gets nowhere, even with a harmless commit.
        assert git_run("reset", "-q", "--hard", "HEAD~1", cwd=clone).returncode == 0
        assert git_run("commit", "-q", "--allow-empty", "-m", "nothing", cwd=clone).returncode == 0
        outsider = host.outsider("damage")
        stranger = host.git(outsider, "push", outsider.url, "main", cwd=clone)
        assert stranger.returncode != 0 and host.tip("damage") == before, stranger.stderr
        # Nor does the attacker rewind main (nor delete it), though every commit on the way is valid.
        rewind = host.git(attacker, "push", "--force", "origin", "HEAD~2:main", cwd=clone)
        assert rewind.returncode != 0 and host.tip("damage") == before, rewind.stderr
        gone = host.git(attacker, "push", "origin", ":main", cwd=clone)
        assert gone.returncode != 0 and host.tip("damage") == before, gone.stderr
    else:
        assert pushed.returncode == 0 and host.tip("damage") != before, pushed.stderr  # nothing checks on a daemon

    # The writer's next sync applies nothing of it: the edit is kept aside on a plain hub.
    files = tree_files(writer.store)
    (result,) = sync_project(writer.store, SHARED).results
    assert result.error is None, result.error
    assert len(result.quarantined) == (0 if host.checked else 1), result.quarantined
    assert tree_files(writer.store) == files
