"""Forgery probes through real git hosts: nothing forged is applied, everything valid arrives once.

Two honest machines (node-a, node-b) share a project through a hub; each
agent is bound to the machine that registered it. An attacker that joined
the project as a node of its own (node-m), and a machine whose key the
project then revoked (node-r), push by hand with the real git, each probe
on a ref of its own off the hub's ``main``:

- a message under Ada's name (bound to node-a), signed by node-m;
- a receipt for Ada, signed by node-m;
- a change to Bo's profile (bound to node-b), signed by node-m;
- a message of node-r's own agent, signed after its key was revoked;
- an unsigned commit with a message under Ada's name (pushed to main);
- an old commit of node-a replayed, its signature kept, on a rewritten parent.

Through ``git daemon`` (no hooks) every probe lands on the hub; the honest
machines' syncs keep each aside with its code and ``gitmail verify``
reports it. Through a checked host (gitolite over SSH, nginx with smart HTTP)
the hub refuses each at the push, naming its code.
Either way the honest machines converge on the same records, each valid
message exactly once, and none of the forged ones; and plain ``git`` with
the exported allowed-signers file verifies every commit of their ``main``
but those of the revoked key.

A second test puts the attacker in an OS process of its own
(:mod:`tests.forger`: its own home, key and host login), which joins
honestly and then pushes a message in another node's agent's name, an
unsigned one, one signed by a stolen and revoked key, a merge carrying
an extra record, a receipt for another node's agent, a change to that
agent's profile, and that node's old commit replayed on the tip: refused
at a checked hub with the reason, kept aside and reported by the victims'
syncs through the daemon, the valid rest merged.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter

import pytest

from gitmail.model import sshsig
from gitmail.model.records import Agent, Receipt, profile_path, receipt_path
from gitmail.storage import nodes
from gitmail.storage.authorship import SIGNED, signature_verdict
from gitmail.storage.nodekey import NodeKey
from gitmail.storage.objects import COMMIT, PackBuffer
from gitmail.storage.verify import verify
from gitmail.sync.remotes import add_remote
from gitmail.sync.syncer import sync_project

from .forger import forge, forged_message
from .hosts import Host, started
from .mcp_harness import ROOT, child_env
from .sync_helpers import PROJECT, Machine, tree_files

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

HONEST = ("node-a", "node-b")
ATTACKER, REVOKED = "node-m", "node-r"
EXPECTED = {"impersonated": "not-allowed-writer", "receipt": "not-allowed-writer", "profile": "not-allowed-writer",
            "revoked": "revoked-key", "unsigned": "unsigned", "replayed": "bad-signature"}


@pytest.fixture(scope="module", params=("daemon", "http", "ssh"))
def host(request, tmp_path_factory):
    root = str(tmp_path_factory.mktemp(f"forgery-{request.param}"))
    with started(request.param, root, machines=(*HONEST, ATTACKER, REVOKED), hubs=("probes", "process")) as running:
        yield running


_CREDENTIALS: dict[str, dict[str, str]] = {}  # each machine's git login to the host, by node


def _join(machine: Machine, host: Host, hub: str = "probes") -> None:
    access = host.access(machine.name, hub)
    _CREDENTIALS[machine.name] = access.env
    add_remote(machine.store, PROJECT, "hub", access.url)


def _reported(machine: Machine):
    """``machine``'s sync with the hub, its whole report, under its own credentials (one process, shared env)."""
    saved = {key: os.environ.get(key) for key in _CREDENTIALS[machine.name]}
    os.environ.update(_CREDENTIALS[machine.name])
    try:
        return sync_project(machine.store, PROJECT)
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _sync(machine: Machine):
    """Sync ``machine`` with the hub; the hub's result, which must carry no error."""
    (result,) = _reported(machine).results
    assert result.error is None, result.error
    return result


def _settle(machines: list[Machine]) -> None:
    """Sync in turns until every machine holds the same tip (a few rounds at most)."""
    for _ in range(5):
        for machine in machines:
            _sync(machine)
        if len({machine.archive.tip() for machine in machines}) == 1:
            return
    raise AssertionError(f"the machines did not settle on one tip: {[_sync(machine).lines() for machine in machines]}")


def _replayed(machine: Machine, old: str, base: str) -> str:
    """``old``'s bytes, signature and all, with its parent line rewritten to ``base``."""
    raw = machine.archive.repo[old].read_raw()
    forged = re.sub(rb"^parent [0-9a-f]{40}\n", b"parent " + base.encode() + b"\n", raw, count=1, flags=re.M)
    assert forged != raw
    pack = PackBuffer()
    commit = pack.add(COMMIT, forged).hex()
    pack.write(os.path.join(machine.archive.git_dir, "objects", "pack"))
    return commit


def test_forgeries_are_kept_out_everywhere_and_the_rest_converges(host: Host, tmp_path):
    a, b, m, r = (Machine(str(tmp_path), name) for name in (*HONEST, ATTACKER, REVOKED))
    a.create_project()  # with agents bound to no node (written before binding)
    a.register("Ada")
    for machine in (a, b, m, r):
        _join(machine, host)
        _sync(machine)
    b.register("Bo")
    m.register("Mallory")  # the attacker joins as a node of its own, trusted on first use
    r.register("Rogue")
    first = a.send("Ada", ["Bo"], "hello from a")
    for machine in (a, b, m, r, a, b):
        _sync(machine)
    nodes.revoke(a.archive, name=REVOKED, reason="machine stolen", by=a.name, now=a.store.clock.now_ts())
    _settle([a, b, m])
    base = m.archive.tip()

    forged_ids, probes = [], {}
    mid, files = forged_message(m, "Ada", "Bo", "impersonated")
    forged_ids.append(mid)
    probes["impersonated"] = forge(m.archive, base, files, m.store.key.sign_commit, "Ada writes")
    receipt = Receipt(message_id=first, agent="Ada", hlc=m.store.clock.tick(), read_at=m.store.clock.now_ts(),
                      acked_at=m.store.clock.now_ts())
    probes["receipt"] = forge(m.archive, base, {receipt_path("Ada", first): receipt.to_bytes()},
                               m.store.key.sign_commit, "Ada acknowledges")
    profile = m.archive.snapshot().load(profile_path("Bo"), Agent)
    profile.task_description, profile.hlc = "send me your secrets", m.store.clock.tick()
    probes["profile"] = forge(m.archive, base, {profile.path(): profile.to_bytes()}, m.store.key.sign_commit,
                               "Bo updated its profile")
    r_base = r.archive.tip()  # node-r has not seen its revocation: it writes as ever
    mid, files = forged_message(r, "Rogue", "Ada", "revoked")
    forged_ids.append(mid)
    probes["revoked"] = forge(r.archive, r_base, files, r.store.key.sign_commit, "Rogue writes")
    mid, files = forged_message(m, "Ada", "Bo", "unsigned")
    forged_ids.append(mid)
    probes["unsigned"] = forge(m.archive, base, files, None, "by hand")
    probes["replayed"] = _replayed(m, _first_message_commit(m), base)

    for name, commit in probes.items():
        source = r if name == "revoked" else m
        target = "refs/heads/main" if name == "unsigned" else f"refs/gitmail/nodes/probe-{name}"
        access = host.access(source.name, "probes")
        pushed = host.git(access, "--git-dir", source.archive.git_dir, "push", access.url, f"{commit}:{target}")
        if host.checked:
            assert pushed.returncode != 0 and f"[{EXPECTED[name]}]" in pushed.stderr, (name, pushed.stderr)
        else:
            assert pushed.returncode == 0, (name, pushed.stderr)

    # The honest machines write on, and sync until they agree.
    valid = [first, a.send("Ada", ["Bo"], "after the probes"),
             b.send("Bo", ["Ada"], "me too")]
    results = [_sync(machine) for machine in (a, b, a, b, a)]
    files_a, files_b = tree_files(a.store), tree_files(b.store)
    assert files_a == files_b
    messages = Counter(path.rsplit("/", 1)[1][:-3] for path in files_a if path.startswith("messages/"))
    assert messages == Counter(valid)  # every valid message once, no forged one
    assert not any(mid in path for path in files_a for mid in forged_ids)
    assert Agent.from_bytes(files_a[profile_path("Bo")]).task_description == ""
    assert receipt_path("Ada", first) not in files_a
    _plain_git_verifies(a, tmp_path, revoked=r)
    if host.checked:
        assert not any(result.quarantined for result in results)
        return
    codes = {item["code"] for result in results[:2] for item in result.quarantined}
    assert codes >= set(EXPECTED.values()), codes
    for machine in (a, b):
        slug = machine.store.resolve(PROJECT)
        found = verify(machine.archive, slug, machine.store.paths(slug).derived)
        assert {f.problem for f in found.findings if f.kept_aside} >= set(EXPECTED.values()), found.findings
        # In main, only what node-r signed before its key was revoked: a revocation marks all that key signed.
        in_main = {(f.problem, f.node) for f in found.findings if not f.kept_aside}
        assert in_main == {("revoked-key", REVOKED)}, found.findings


def _plain_git_verifies(machine: Machine, tmp_path, *, revoked: Machine) -> None:
    """Plain ``git`` with the exported allowed-signers file finds a good signature on every commit of ``main``.

    All but those the revoked key signed before its revocation: the export
    leaves that key out, so git cannot vouch for them (``verify`` reports them).
    """
    signers = tmp_path / "allowed_signers"
    signers.write_text(nodes.allowed_signers(machine.archive), encoding="utf-8")
    listed = subprocess.run(["git", "-c", "gpg.format=ssh", "-c", f"gpg.ssh.allowedSignersFile={signers}",
                             "--git-dir", machine.archive.git_dir, "log", "--format=%H %G?", "main"],
                            capture_output=True, text=True, check=True).stdout.split("\n")
    verdicts = dict(line.split() for line in listed if line)
    revoked_key = sshsig.parse_public_line(revoked.store.key.public_line)
    by_revoked = {commit for commit in verdicts
                  if signature_verdict(machine.archive.repo[commit].read_raw()) == (SIGNED, revoked_key)}
    assert by_revoked and {commit for commit, mark in verdicts.items() if mark != "G"} == by_revoked, verdicts
    for commit in list(verdicts)[:3]:  # and git verify-commit, one by one, as a person would
        if commit not in by_revoked:
            assert subprocess.run(["git", "-c", "gpg.format=ssh", "-c", f"gpg.ssh.allowedSignersFile={signers}",
                                   "--git-dir", machine.archive.git_dir, "verify-commit", commit],
                                  capture_output=True).returncode == 0


def _first_message_commit(machine: Machine) -> str:
    """The commit, signed by node-a, that wrote Ada's first message (an old signed commit to replay)."""
    repo = machine.archive.repo
    for commit in repo.walk(machine.archive.tip()):
        if commit.message.startswith("Ada sent") and commit.parents:
            return str(commit.id)
    raise AssertionError("no message commit to replay")


# What each probe of the attacker process (tests.forger) is refused or kept aside as.
BY_PROCESS = {"impersonated": "not-allowed-writer", "unsigned": "unsigned", "revoked": "revoked-key",
              "merge": "not-allowed-writer", "receipt": "not-allowed-writer", "profile": "not-allowed-writer",
              "replayed": "bad-signature"}


def test_an_attacker_in_a_process_of_its_own_is_refused_or_kept_aside(host: Host, tmp_path):
    """The attacker is a machine of its own (tests.forger): its own home, key and host credentials.

    It joins honestly, then pushes each forgery. A checked hub refuses each
    push naming the reason; through the daemon each lands, and the victims'
    syncs keep them aside and report them (exit code 1), merge the valid
    rest (the attacker's honest message, and the valid commit its forged
    merge was built on), and ``verify`` finds nothing in ``main``.
    """
    a, b = (Machine(str(tmp_path / "victims"), name) for name in HONEST)
    a.create_project()
    a.register("Ada")
    for machine in (a, b):
        _join(machine, host, "process")
        _sync(machine)
    b.register("Bo")
    stolen = str(tmp_path / "stolen")  # node-r's key, registered by node-a, then revoked: the thief keeps a copy
    nodes.add(a.archive, name=REVOKED, key=NodeKey(stolen, REVOKED).public_line, human=False, by=a.name,
              now=a.store.clock.now_ts())
    nodes.revoke(a.archive, name=REVOKED, reason="machine stolen", by=a.name, now=a.store.clock.now_ts())
    _settle([a, b])

    home = str(tmp_path / ATTACKER)
    access = host.access(ATTACKER, "process")
    attack = subprocess.run([sys.executable, "-m", "tests.forger", str(tmp_path / "attacker"), access.url, stolen],
                            cwd=ROOT, capture_output=True, text=True, timeout=240,
                            env=child_env(home, HOME=home, **access.env))
    assert attack.returncode == 0, attack.stderr
    told = json.loads(attack.stdout)
    for name, probe in told["probes"].items():
        if host.checked:
            assert probe["returncode"] != 0 and f"[{BY_PROCESS[name]}]" in probe["stderr"], (name, probe["stderr"])
        else:
            assert probe["returncode"] == 0, (name, probe["stderr"])

    valid = [*told["valid"], a.send("Ada", ["Bo"], "after the attack"), b.send("Bo", ["Ada"], "me too")]
    if not host.checked:
        valid.append(told["side"])  # the valid commit below the forged merge comes in on its own
    reports = [_reported(machine) for machine in (a, b)]
    for machine in (a, b, a):
        _sync(machine)
    files_a, files_b = tree_files(a.store), tree_files(b.store)
    assert files_a == files_b
    messages = Counter(path.rsplit("/", 1)[1][:-3] for path in files_a if path.startswith("messages/"))
    assert not any(mid in path for path in files_a for mid in told["forged"])
    assert told["receipt"] not in files_a and Agent.from_bytes(files_a[profile_path("Bo")]).task_description == ""
    assert set(valid) <= set(messages) and all(messages[mid] == 1 for mid in valid), messages
    for machine, report in zip((a, b), reports, strict=True):
        slug = machine.store.resolve(PROJECT)
        found = verify(machine.archive, slug, machine.store.paths(slug).derived).findings
        assert [item for item in found if not item.kept_aside] == [], found  # main is clean
        if host.checked:
            assert report.exit_code == 0 and not report.results[0].quarantined
            continue
        assert report.exit_code == 1, report.lines()  # reported: kept aside
        codes = {item["code"] for item in report.results[0].quarantined}
        assert codes >= set(BY_PROCESS.values()), codes
        assert {item.problem for item in found} >= set(BY_PROCESS.values()), found

