"""Three machines, each its own OS process, through a checked hub, in everything sync must survive.

Simultaneous syncs (every machine released at one start line), offline
divergence with an identity clash and overlapping reservations, a dead
remote beside the hub, and a hub poisoned behind its checks and then
repaired. At the end every machine holds the same tree as the hub, every
message is in every recipient's inbox and in search exactly once, each
conflict was reported once on every machine, and fsck is clean everywhere.
"""

from __future__ import annotations

import os
import pathlib
import socket
from collections import Counter
from typing import Any

import pytest

from gitmail.model.ids import new_id
from gitmail.model.records import inbox_path, message_path, profile_path
from gitmail.sync.hookinstall import install_hub

from .conftest import git_run, sign_commits
from .machines import MachineProcess, converge, hub_results, sync_all
from .sync_machine import PROJECT

pytestmark = pytest.mark.slow  # three machine processes, hub hooks, many syncs
AGENTS = ("BlueLake", "GreenCastle", "RedStone")


def _dead_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"git://127.0.0.1:{port}/gone.git"


@pytest.fixture
def machines(tmp_path):
    started = [MachineProcess(str(tmp_path), f"node-{name}") for name in "abc"]
    yield started
    for machine in started:
        machine.close()


def test_three_machines_through_everything(tmp_path, machines):
    hub = str(tmp_path / "hub.git")
    assert git_run("init", "-q", "--bare", "--initial-branch=main", hub).returncode == 0
    install_hub(hub)
    a, b, c = machines
    a.ask("mail", method="ensure_project", kwargs={"human_key": PROJECT})
    for name in AGENTS:
        a.mail("register_agent", program="test", model="m", name=name)
        a.mail("set_contact_policy", agent_name=name, policy="open")
    for name, node in (("GreenCastle", "node-b"), ("RedStone", "node-c")):  # each works from its own machine
        a.ask("handover", agent=name, node=node)
    a.ask("add_remote", name="aaa-dead", url=_dead_url())  # a remote that never answers, synced first
    for machine in machines:
        machine.ask("add_remote", name="hub", url="file://" + hub)
    sync_all([a])
    sync_all([b, c])  # everyone has the project and its agents
    sent: dict[str, tuple[str, list[str]]] = {}  # message id -> (unique word, recipients)
    counter = iter(range(10_000))

    def send(machine: MachineProcess, sender: str, to: list[str]) -> None:
        word = f"zq{next(counter)}x"
        result = machine.mail("send_message", sender_name=sender, to=to, subject=f"note {word}", body_md="hello")
        sent[result["deliveries"][0]["payload"]["id"]] = (word, to)

    reported: dict[str, Counter] = {m.node: Counter() for m in machines}

    def note(reports: list[dict[str, Any]]) -> None:
        for machine, report in zip(machines, reports, strict=True):
            for result in report["results"]:
                for conflict in result["conflicts"]:
                    reported[machine.node][("conflict", conflict["record"])] += 1
                for overlap in result["overlaps"]:
                    reported[machine.node][("overlap", overlap["notice"])] += 1

    # 1. Simultaneous syncs through the real hub hook: no errors on the hub, whoever wins each race.
    for _ in range(4):
        for machine, sender, to in ((a, "BlueLake", ["GreenCastle"]), (b, "GreenCastle", ["RedStone"]),
                                    (c, "RedStone", ["BlueLake", "GreenCastle"])):
            send(machine, sender, to)
        reports = sync_all(machines)
        note(reports)
        assert [r["error"] for r in hub_results(reports)] == [None, None, None], reports
        dead = [r for r in reports[0]["results"] if r["remote"] == "aaa-dead"]
        assert dead[0]["error"]["code"] == "SYNC_FAILED" and reports[0]["exit_code"] == 2

    # 2. Apart: one name registered on two machines, overlapping reservations, more mail.
    kept = a.mail("register_agent", program="claude-code", model="opus", name="Nova")
    b.mail("register_agent", program="codex", model="gpt", name="Nova")
    a.mail("file_reservation_paths", agent_name="BlueLake", paths=["src/api/*.py"], ttl_seconds=3600)
    c.mail("file_reservation_paths", agent_name="RedStone", paths=["src/api/handlers.py"], ttl_seconds=3600)
    send(a, "BlueLake", ["RedStone"])
    send(b, "GreenCastle", ["BlueLake"])
    send(c, "RedStone", ["GreenCastle"])
    converge(machines, hub, note)

    # 3. The hub is poisoned behind its checks (plain git on the hub runs no hooks), then repaired.
    poison(tmp_path, hub)
    send(b, "GreenCastle", ["RedStone"])
    reports = sync_all(machines)
    note(reports)
    for report in reports:
        (result,) = [r for r in report["results"] if r["remote"] == "hub"]
        # Three changes break the record rules; past node-a, its valid part also leaves out the message the
        # poisoner wrote as BlueLake (with its inbox copy), which only node-a may sign.
        assert result["error"] is None, result
        assert len(result["quarantined"]) == (3 if report is reports[0] else 5), result
    repaired = b.ask("repair")
    assert {item["action"] for item in repaired["repaired"]} == {"took out", "restored", "put back"}
    send(c, "RedStone", ["BlueLake"])
    converge(machines, hub, note)

    # 4. Everyone holds the same, clean, everything once.
    tips = [machine.ask("tip") for machine in machines]
    assert len({tip["tree"] for tip in tips}) == 1
    assert git_run("rev-parse", "main^{tree}", cwd=hub).stdout.strip() == tips[0]["tree"]
    for machine in machines:
        assert machine.ask("fsck") == [], machine.node
        assert machine.ask("verify") == [], machine.node  # handovers, conflicts, notices, the repair: all allowed
        for message_id, (word, _to) in sent.items():
            assert machine.ask("search", query=word) == [message_id], (machine.node, word)
        for name in AGENTS:
            inbox = [m["id"] for m in machine.mail("fetch_inbox", agent_name=name, limit=200)]
            assert Counter(inbox) == Counter({mid: 1 for mid, (_, to) in sent.items() if name in to}
                                             | {mid: 1 for mid in inbox if mid not in sent}), (machine.node, name)
    # The identity clash and the overlap were each reported exactly once on every machine.
    clash = f"conflicts/{profile_path('Nova')}"
    for node, counts in reported.items():
        clashes = [key for key in counts if key[0] == "conflict" and key[1].startswith(clash)]
        overlaps = [key for key in counts if key[0] == "overlap"]
        assert len(clashes) == 1 and counts[clashes[0]] == 1, (node, counts)
        assert len(overlaps) == 1 and counts[overlaps[0]] == 1, (node, counts)
    assert a.mail("verify_agent_token", agent_name="Nova", token=kept["registration_token"])


def poison(tmp_path, hub: str) -> None:
    """A bad commit put on the hub's main by hand (git fetch and update-ref run no receive hook)."""
    clone = str(tmp_path / "poisoner")
    assert git_run("clone", "-q", hub, clone).returncode == 0
    sign_commits(clone, os.path.join(str(tmp_path), "node-a"))  # a node signs it: the record rules refuse it
    messages = sorted(path for path in git_run("ls-files", cwd=clone).stdout.split() if path.startswith("messages/"))
    victim = messages[0]
    with_sender = {path: pathlib.Path(clone, path).read_bytes() for path in messages[1:]}
    # An edit of a message BlueLake sent: the signer (node-a) may write in its name, the record rules refuse it.
    edited = next(path for path, data in with_sender.items() if b"\nfrom: BlueLake\n" in data)
    os.unlink(os.path.join(clone, victim))
    with open(os.path.join(clone, edited), "rb") as handle:
        data = handle.read()
    with open(os.path.join(clone, edited), "wb") as handle:
        handle.write(data.replace(b"hello", b"tampered"))
    with open(os.path.join(clone, "notes.txt"), "w", encoding="utf-8") as handle:
        handle.write("not a record\n")
    good = new_id()
    text = (f"---\nid: {good}\nthread_id: {good}\nfrom: BlueLake\nsubject: by hand\n"
            f"created: 2026-12-01T10:00:00.000Z\nto:\n- GreenCastle\n---\nfine\n").encode()
    for path in (message_path(good), inbox_path("GreenCastle", good)):
        os.makedirs(os.path.join(clone, os.path.dirname(path)), exist_ok=True)
        with open(os.path.join(clone, path), "wb") as handle:
            handle.write(text)
    assert git_run("add", "-A", cwd=clone).returncode == 0
    assert git_run("commit", "-q", "-m", "damage", cwd=clone).returncode == 0
    head = git_run("rev-parse", "HEAD", cwd=clone).stdout.strip()
    old = git_run("rev-parse", "main", cwd=hub).stdout.strip()
    assert git_run("--git-dir", hub, "fetch", "-q", clone, head).returncode == 0
    assert git_run("--git-dir", hub, "update-ref", "refs/heads/main", head, old).returncode == 0
