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
  (a message under Ada's name) that neither parent holds.

It prints one JSON line: for each probe the commit, git's exit code and its
error output; the ids of the forged messages and of Mallory's valid ones.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable

import pygit2

from gitmail.model.records import Message, inbox_path, outbox_path
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
    sys.stdout.write(json.dumps({"probes": probes, "forged": [*forged, extra_id], "valid": valid,
                                 "side": side_id}) + "\n")


if __name__ == "__main__":
    main()
