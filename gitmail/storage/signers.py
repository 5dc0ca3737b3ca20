"""git's allowed-signers file for a project's keys: the export, and the copy a signing checkout keeps current.

``gitmail nodes export`` writes it for plain git (``gpg.format=ssh``,
``gpg.ssh.allowedSignersFile``); a checkout configured by ``gitmail
checkout --sign-with`` keeps one in its ``.git``, rewritten by every
refresh of the checkout (:mod:`.checkout`), so a key registered or revoked
since is reflected there without configuring it again.
"""

from __future__ import annotations

import os

import pygit2

from gitmail.model import sshsig
from gitmail.model.records import NODES, REVOCATIONS, Node, Revocation

from .snapshot import Snapshot, records_in

PRINCIPAL_DOMAIN = "gitmail"  # a node's commits name ``gitmail@<node>`` as their committer
SIGNERS_FILE = "gitmail-allowed-signers"  # in a checkout's .git: the export its git checks signatures with


def signers_at(snap: Snapshot) -> str:
    """The allowed-signers file for the keys ``snap`` names and does not revoke (current and rotated-from ones)."""
    revoked = {_raw(item.key) for item in records_in(snap, REVOCATIONS, Revocation)}
    lines = []
    for node in records_in(snap, NODES, Node):
        principal = node.node if node.kind == "human" else f"{PRINCIPAL_DOMAIN}@{node.node}"
        for line in (node.previous_key, node.key):
            if line and _raw(line) not in revoked:
                lines.append(f'{principal} namespaces="git" {" ".join(line.split()[:2])}')
    return "".join(line + "\n" for line in lines)


def _raw(line: str) -> bytes | None:
    """A public key line's raw key (None: a line git could not use either; the record checker reports it)."""
    try:
        return sshsig.parse_public_line(line)
    except sshsig.SignatureError:
        return None


def write_signers(path: str, text: str) -> bool:
    """Put ``text`` in the allowed-signers file at ``path`` unless it holds it already (atomically); whether it did."""
    try:
        with open(path, encoding="utf-8") as handle:
            if handle.read() == text:
                return False
    except (FileNotFoundError, UnicodeDecodeError):
        pass
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.replace(tmp, path)
    return True


def refresh_signers(repo: pygit2.Repository, checkout_dir: str) -> bool:
    """Rewrite a signing checkout's allowed-signers file from ``repo``'s ``main``; whether it changed.

    Only a checkout ``gitmail checkout --sign-with`` configured (its git
    names the file in its ``.git``) has one: a key registered or revoked
    since is then reflected the next time gitmail refreshes the checkout,
    so plain ``git verify-commit`` there judges by the project's keys now.
    """
    signers = os.path.join(checkout_dir, ".git", SIGNERS_FILE)
    try:
        named = str(pygit2.Repository(checkout_dir).config["gpg.ssh.allowedSignersFile"])
        tip = str(repo.references["refs/heads/main"].target)
    except (KeyError, pygit2.GitError):
        return False
    if os.path.abspath(named) != os.path.abspath(signers):
        return False  # a file of the person's own choosing: not ours to rewrite
    return write_signers(signers, signers_at(Snapshot(repo, tip)))
