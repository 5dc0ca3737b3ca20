"""One machine of the multi-process sync test, run as its own OS process.

Usage: python -m tests.sync_machine HOME NODE

Reads one JSON request per line on stdin and answers each with one JSON line
on stdout: ``{"ok": value}`` or ``{"error": {code, message}}``. Requests:

- ``{"op": "mail", "method": NAME, "kwargs": {...}}`` calls the mail facade;
- ``{"op": "add_remote", "name": N, "url": U}``;
- ``{"op": "sync"}`` answers ``{"ready": true}`` first, then waits for a line
  ``go`` before it syncs, so the parent can start several machines' syncs at
  the same moment and know that each reached the start line; the answer is
  the sync report;
- ``{"op": "repair"}``, ``{"op": "fsck"}``, ``{"op": "search", "query": Q}``,
  ``{"op": "tip"}``, ``{"op": "verify"}`` (``gitmail verify``'s findings:
  commit, problem, node, path, kept aside); end of input ends the process.

A test drives these processes with :mod:`tests.machines`.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from gitmail import Store
from gitmail.index import indexer_for
from gitmail.mail.facade import Mail
from gitmail.model.errors import GitmailError
from gitmail.storage import nodes
from gitmail.storage.fsck import check_archive
from gitmail.storage.verify import verify
from gitmail.sync.findings import SYNC_RULES
from gitmail.sync.remotes import add_remote
from gitmail.sync.repair import repair
from gitmail.sync.syncer import sync_project

PROJECT = "/data/projects/multi"


def _answer(value: Any) -> None:
    sys.stdout.write(json.dumps(value, default=str) + "\n")
    sys.stdout.flush()


def answer_request(mail: Mail, request: dict[str, Any]) -> Any:
    store = mail.store
    op = request["op"]
    if op == "mail":
        return getattr(mail, request["method"])(**request.get("kwargs", {}))
    if op == "add_remote":
        return add_remote(store, PROJECT, request["name"], request["url"])
    if op == "sync":
        _answer({"ready": True})
        if sys.stdin.readline().strip() != "go":
            raise SystemExit("expected go")
        return sync_project(store, PROJECT).to_dict()
    if op == "handover":
        return nodes.handover(store.archive(PROJECT), agent=request["agent"], to=request["node"],
                              hlc=store.clock.tick()).to_fields()
    if op == "repair":
        return repair(store, PROJECT).to_dict()
    if op == "fsck":
        return [str(problem) for problem in check_archive(store.archive(PROJECT))]
    if op == "search":
        return [hit["id"] for hit in indexer_for(store).project(PROJECT).search(request["query"], limit=100)]
    if op == "verify":
        slug = store.resolve(PROJECT)
        found = verify(store.archive(slug), slug, store.paths(slug).derived, rules=SYNC_RULES)
        return [[item.commit, item.problem, item.node, item.path, item.kept_aside] for item in found.findings]
    if op == "tip":
        archive = store.archive(PROJECT)
        tip = archive.tip()
        return {"commit": tip, "tree": str(archive.repo[tip].peel(2).id) if tip else None}
    raise ValueError(f"unknown op {op!r}")


def main() -> None:
    home, node = sys.argv[1], sys.argv[2]
    os.makedirs(home, exist_ok=True)
    with open(os.path.join(home, "node"), "w", encoding="utf-8") as handle:
        handle.write(node + "\n")
    mail = Mail(Store(home, background=False, durable=False))
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            _answer({"ok": answer_request(mail, json.loads(line))})
        except GitmailError as exc:
            _answer({"error": exc.to_dict()})
    indexer_for(mail.store).close()


if __name__ == "__main__":
    main()
