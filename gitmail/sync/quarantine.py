"""The fetch door: incoming commits checked before they touch ``main``, rejected changes kept aside.

A fetched tip (a remote's ``main`` or another machine's ref) is judged by the
record checker for what it adds over its merge base with the local ``main``.
When every change passes, the tip itself is merged. When some are refused:

- the **valid part** is merged instead: a commit on the merge base whose
  tree is the tip's with each refused change undone, and with each record
  this machine's node may not sign undone too (an agent's records come
  only in its own node's commits; see :mod:`gitmail.storage.authorship`). It is built the same
  way from the same inputs on every sync (fixed author, time and message),
  so syncing again while the remote is unchanged finds it merged already;
- the refused changes are **kept aside** under
  ``refs/gitmail/quarantine/<remote>``, a ref no sync ever pushes: a commit
  whose parents are the offending tips (so ``git log`` and ``git show``
  reach them) and whose tree holds ``report.yaml`` (each file, the reason,
  the advice, where it came from) and, under ``incoming/``, each refused
  version of a file. ``gitmail repair`` works from it; it is dropped once a
  sync finds nothing to refuse from that remote.

Nothing valid is lost either way: the local ``main`` only ever gains the
valid part, and the refused versions stay reachable from the quarantine ref.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import pygit2

from gitmail.model import codec
from gitmail.model.errors import GitmailError
from gitmail.model.records import placed
from gitmail.storage.authorship import NO_RULES, Rules, writes_refused
from gitmail.storage.engine import Archive
from gitmail.storage.handles import reference
from gitmail.storage.layout import Comparisons
from gitmail.storage.objects import COMMIT, PackBuffer, Signature, encode_commit
from gitmail.storage.recordcheck import Checker, Rejection, misplaced
from gitmail.storage.snapshot import blob_data, blob_in, tree_layout
from gitmail.storage.treeedit import TreeEditor
from gitmail.storage.verify import QUARANTINE_REFS as VERIFIED_QUARANTINE

QUARANTINE_REFS = VERIFIED_QUARANTINE  # gitmail verify reports what is kept there
REPORT = "report.yaml"
INCOMING = "incoming"
_AUTHOR = "gitmail"


def quarantine_ref(remote: str) -> str:
    """The local ref holding what was refused from ``remote`` (never pushed)."""
    return f"{QUARANTINE_REFS}/{remote}"


@dataclass
class Checked:
    """One fetched tip after the check: what to merge, and what was refused."""

    label: str  # where it came from, as ``<remote>/main`` or ``<remote>/nodes/<node>``
    tip: str
    base: str | None  # its merge base with the local main when checked
    merge: str | None  # the commit to merge: the tip itself, its valid part, or None (nothing valid)
    rejected: list[Rejection] = field(default_factory=list)


def check_tip(archive: Archive, checker: Checker, tip: str, label: str, *, rules: Rules = NO_RULES,
              compared: Comparisons | None = None) -> Checked:
    """Judge ``tip`` against the local main; build its valid part if some changes are refused.

    ``compared`` holds the trees this sync compares (its merge reads the same pair).
    """
    repo = archive.repo
    ours = archive.tip()
    base = checker.base_of(tip, ours)
    rejected = checker.check_trees(_tree(repo, base), _tree(repo, tip), new_commit=tip, main=_tree(repo, ours),
                                   before=base[:12] if base else "<the commit before>", compared=compared)
    if not rejected:
        return Checked(label, tip, base, tip)
    # The valid part is signed here: what this node may not write in its own name stays aside too.
    refused = {item.path for item in rejected}
    rejected += [Rejection(item.path or "", f"[{item.code}] {item.reason} (the valid part of {label} is signed by this "
                           "machine, which may not sign it)", item.advice, item.blob, item.code)
                 for item in writes_refused(repo, _tree(repo, base), repo[tip].peel(pygit2.Tree), archive.node,
                                            commit=tip, rules=rules)
                 if item.path not in refused]
    return Checked(label, tip, base, _valid_part(archive, base, tip, rejected, label), rejected)


def _tree(repo: pygit2.Repository, commit: str | None) -> pygit2.Tree | None:
    return repo[commit].peel(pygit2.Tree) if commit else None


def _when(repo: pygit2.Repository, commit: str) -> int:
    return int(repo[commit].peel(pygit2.Commit).commit_time)


def _valid_part(archive: Archive, base: str | None, tip: str, rejected: list[Rejection], label: str) -> str | None:
    """A commit on ``base`` holding ``tip``'s tree with every refused change undone (None: nothing valid)."""
    repo = archive.repo
    base_tree, tip_tree = _tree(repo, base), repo[tip].peel(pygit2.Tree)
    was, layout = tree_layout(base_tree), tree_layout(tip_tree)
    pack = PackBuffer()
    editor = TreeEditor(repo, tip_tree.id.raw, pack)
    try:
        for item in rejected:
            # Put back what the base held for that record, wherever the base's layout kept it; a file
            # the tip's own layout has no place for simply goes.
            wrong = misplaced(item.path, layout) is not None
            base_blob = None if wrong else blob_in(base_tree, placed(item.path, was))
            editor.set(item.path, base_blob.data if base_blob is not None else None)
    except GitmailError:
        return None  # a path the editor cannot even name: take nothing from this tip
    tree = editor.flush()
    if base_tree is not None and tree == base_tree.id.raw:
        return None
    when = _when(repo, tip)
    signature = Signature(_AUTHOR, f"{_AUTHOR}@{archive.node}", when)
    message = (f"The valid part of {label} at {tip[:12]}\n\n"
               f"{len(rejected)} change(s) that break the record rules were left out and kept aside "
               f"(see {QUARANTINE_REFS}/).\n")
    commit = pack.add(COMMIT, encode_commit(tree, [bytes.fromhex(base)] if base else [], signature, signature,
                                            message, sign=archive.signer))
    pack.write(os.path.join(archive.git_dir, "objects", "pack"), durable=archive.durable)
    return commit.hex()


# -- the quarantine ref -------------------------------------------------------------------

def keep_aside(archive: Archive, remote: str, refused: list[Checked]) -> str | None:
    """Record the refused changes from ``remote`` under its quarantine ref (dropped when there are none).

    Returns the ref's name while it holds something. The commit is built
    from its inputs alone, so an unchanged refusal leaves the ref where it is.
    """
    repo = archive.repo
    name = quarantine_ref(remote)
    refused = [item for item in refused if item.rejected]
    if not refused:
        if name in repo.references:
            repo.references.delete(name)
        return None
    pack = PackBuffer()
    editor = TreeEditor(repo, None, pack)
    entries: list[dict[str, Any]] = []
    for item in refused:
        for rejection in item.rejected:
            entries.append({"path": rejection.path, "reason": rejection.reason, "advice": rejection.advice,
                            "source": item.label, "commit": item.tip, "base": item.base, "blob": rejection.blob})
            if rejection.blob is not None:
                try:
                    editor.set(f"{INCOMING}/{rejection.path}", blob_data(repo, rejection.blob))
                except (GitmailError, KeyError, TypeError):  # a path no tree can hold, or a gitlink's commit
                    pass  # the report still names it; the version stays reachable through the parent
    editor.set(REPORT, codec.dump_yaml({"remote": remote, "refused": entries}))
    tree = editor.flush()
    when = max(_when(repo, item.tip) for item in refused)
    signature = Signature(_AUTHOR, f"{_AUTHOR}@{archive.node}", when)
    message = f"Kept aside {len(entries)} change(s) from {remote} that break the record rules\n"
    parents = sorted({bytes.fromhex(item.tip) for item in refused})
    commit = pack.add(COMMIT, encode_commit(tree, parents, signature, signature, message, sign=archive.signer))
    current = reference(repo, name)
    if current is not None and str(current.target) == commit.hex():
        return name
    pack.write(os.path.join(archive.git_dir, "objects", "pack"), durable=archive.durable)
    repo.references.create(name, pygit2.Oid(raw=commit), force=True)
    return name


def read_quarantine(archive: Archive, remote: str) -> list[dict[str, Any]]:
    """The refused changes kept aside from ``remote`` (empty when there are none)."""
    repo = archive.repo
    ref = repo.references.get(quarantine_ref(remote))
    if ref is None:
        return []
    tree = ref.peel(pygit2.Tree)
    try:
        report = codec.load_yaml(blob_data(repo, tree[REPORT].id))
    except (KeyError, TypeError, codec.DecodeError):
        return []
    refused = report.get("refused")
    return [entry for entry in refused if isinstance(entry, dict)] if isinstance(refused, list) else []
