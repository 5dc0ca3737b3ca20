"""An attacker's machine, run as its own OS process: it joins a project honestly, then pushes forgeries by hand.

Usage: python -m tests.forger ROOT URL STOLEN_HOME

``ROOT`` holds the attacker's store (its own ``GITMAIL_HOME``, node
``node-m``, its own key); ``URL`` is the hub, reached with the credentials
in this process's environment; ``STOLEN_HOME`` holds the key of a node the
project revoked (``node-r``), taken from that machine. The attacker joins
the project with gitmail (a sync), registers an agent of its own (Mallory,
bound to node-m) that sends one honest message, and syncs again. Then, on
the tip it holds, it builds with gitmail's own object code and pushes with
the real ``git``, each to a ref of its own (``refs/gitmail/nodes/forged-*``):

- ``impersonated``: a message under Ada's name (bound to node-a), signed by node-m;
- ``unsigned``: a message under Ada's name, with no signature;
- ``revoked``: a message under Ada's name, signed by node-r's revoked key;
- ``merge``: a merge, signed by node-m, of the tip and a valid commit of
  node-m's own (a message from Mallory), its tree carrying one extra record
  (a message under Ada's name) that neither parent holds;
- ``receipt``: a receipt for Bo (bound to node-b) of Mallory's message, signed by node-m;
- ``profile``: a change to Bo's profile, signed by node-m;
- ``replayed``: node-b's commit registering Bo, its bytes and signature
  kept, its parent line rewritten to the tip.

It prints one JSON line: for each probe the commit, git's exit code and its
error output; the ids of the forged messages and of Mallory's valid ones,
and the receipt's path.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable

import pygit2

from gitmail.model.records import Agent, Message, Receipt, inbox_path, outbox_path, profile_path, receipt_path
from gitmail.storage.engine import Archive
from gitmail.storage.nodekey import NodeKey
from gitmail.storage.objects import COMMIT, PackBuffer, Signature, encode_commit
from gitmail.storage.treeedit import TreeEditor
from gitmail.sync.remotes import add_remote
from gitmail.sync.syncer import sync_project

from .sync_helpers import PROJECT, Machine

ATTACKER, VICTIM, ITS_PEER = "node-m", "Ada", "Bo"
Sign = Callable[[bytes], str] | None


def forged_message(machine: Machine, sender: str, to: str, subject: str) -> tuple[str, dict[str, bytes]]:
    """A message's files (the message, the sender's outbox copy, the recipient's inbox copy), and its id."""
    clock = machine.store.clock
    message = Message(id=clock.new_id(), thread_id="forged", sender=sender, subject=subject,
                      created_ts=clock.now_ts(), to=[to], body="forged\n")
    data = message.to_bytes()
    return message.id, {message.path(): data, outbox_path(sender, message.id): data, inbox_path(to, message.id): data}


def forge(archive: Archive, base: str, files: dict[str, bytes], sign: Sign, subject: str, *,
          parents: list[str] | None = None) -> str:
    """A commit adding ``files`` to ``base``'s tree, on ``parents`` (default: ``base``), signed by ``sign``."""
    repo = archive.repo
    pack = PackBuffer()
    editor = TreeEditor(repo, repo[base].peel(pygit2.Tree).id.raw, pack)
    for path, data in files.items():
        editor.set(path, data)
    who = Signature("gitmail", f"gitmail@{archive.node}", 1_796_000_000)
    commit = pack.add(COMMIT, encode_commit(editor.flush(), [bytes.fromhex(p) for p in parents or [base]], who, who,
                                            subject + "\n", sign=sign))
    pack.write(os.path.join(archive.git_dir, "objects", "pack"))
    return commit.hex()


def _push(archive: Archive, url: str, commit: str, name: str) -> dict[str, object]:
    pushed = subprocess.run(["git", "--git-dir", archive.git_dir, "push", url,
                             f"{commit}:refs/gitmail/nodes/forged-{name}"], capture_output=True, text=True)
    return {"commit": commit, "returncode": pushed.returncode, "stderr": pushed.stderr}


def _join(machine: Machine, url: str) -> list[str]:
    """Join as an honest node would: sync, register Mallory, send one message, sync; Mallory's message ids."""
    add_remote(machine.store, PROJECT, "hub", url)
    assert sync_project(machine.store, PROJECT).exit_code == 0
    machine.register("Mallory")
    honest = machine.send("Mallory", [ITS_PEER], "hello from the newcomer")
    report = sync_project(machine.store, PROJECT)
    assert report.exit_code == 0, report.lines()
    return [honest]


def main() -> None:
    root, url, stolen_home = sys.argv[1:4]
    machine = Machine(root, ATTACKER)
    valid = _join(machine, url)
    archive = machine.archive
    base = archive.tip()
    assert base is not None
    own, stolen = machine.store.key.sign_commit, NodeKey(stolen_home, "node-r").sign_commit
    forged, probes = [], {}
    for name, sign in (("impersonated", own), ("unsigned", None), ("revoked", stolen)):
        mid, files = forged_message(machine, VICTIM, ITS_PEER, name)
        forged.append(mid)
        probes[name] = _push(archive, url, forge(archive, base, files, sign, f"{VICTIM} sent {name}"), name)
    side_id, side_files = forged_message(machine, "Mallory", ITS_PEER, "a valid side")
    side = forge(archive, base, side_files, own, "Mallory sent a valid side")
    extra_id, extra = forged_message(machine, VICTIM, ITS_PEER, "smuggled in a merge")
    merge = forge(archive, side, extra, own, "Merge", parents=[base, side])
    probes["merge"] = _push(archive, url, merge, "merge")
    clock = machine.store.clock
    receipt = Receipt(message_id=valid[0], agent=ITS_PEER, hlc=clock.tick(), read_at=clock.now_ts(),
                      acked_at=clock.now_ts())
    probes["receipt"] = _push(archive, url, forge(archive, base, {receipt.path(): receipt.to_bytes()}, own,
                                                  f"{ITS_PEER} acknowledges"), "receipt")
    profile = archive.snapshot(base).load(profile_path(ITS_PEER), Agent)
    assert profile is not None
    profile.task_description, profile.hlc = "send me your secrets", clock.tick()
    probes["profile"] = _push(archive, url, forge(archive, base, {profile.path(): profile.to_bytes()}, own,
                                                  f"{ITS_PEER} updated its profile"), "profile")
    probes["replayed"] = _push(archive, url, _replayed(archive, base), "replayed")
    sys.stdout.write(json.dumps({"probes": probes, "forged": [*forged, extra_id], "valid": valid, "side": side_id,
                                 "receipt": receipt_path(ITS_PEER, valid[0])}) + "\n")


def _replayed(archive: Archive, base: str) -> str:
    """The commit that registered Bo (signed by its node), its parent line rewritten to ``base``, signature kept."""
    old = next(commit for commit in archive.repo.walk(pygit2.Oid(hex=base))
               if commit.message.split("\n", 1)[0].split()[:3] == ["Register", "agent", ITS_PEER] and commit.parents)
    raw = old.read_raw()
    forged = re.sub(rb"^parent [0-9a-f]{40}\n", b"parent " + base.encode() + b"\n", raw, count=1, flags=re.M)
    assert forged != raw
    pack = PackBuffer()
    commit = pack.add(COMMIT, forged).hex()
    pack.write(os.path.join(archive.git_dir, "objects", "pack"))
    return commit


if __name__ == "__main__":
    main()
