"""``gitmail verify``: every commit of a project's history, judged by its signature; ``gitmail adopt``.

A commit is *clean* when it carries an SSH signature (``gpgsig``) that checks
against the commit's own bytes, made by a key the archive names (a node's
current key or the one it rotated from) and that is not revoked. Anything
else is a finding: ``unsigned``, ``bad-signature`` (the bytes were changed
after signing, or the signature does not read), ``unknown-key`` or
``revoked-key``; and a commit whose signer may not write a record it
writes is ``not-allowed-writer`` (:mod:`.authorship`, the rule every door
applies). What a sync kept out of ``main`` (its quarantine refs) is judged
too and reported as kept aside. A refused commit that ``gitmail repair``
mended (a repair merge took none of its records, so nothing of it is in
effect at the tip) is listed as repaired, not as a finding. Nothing is
refused here: this reports.

Checking a signature costs some 60-140 microseconds, so each commit is
checked once: its verdict (the key that signed it, or why none did) is kept
outside the archive in ``derived/<slug>/signatures.bin``, keyed by commit id
(a commit id names its bytes, so the verdict never changes). Which keys are
known and which revoked is decided afresh on every run from the tip's
``nodes/`` and ``revocations/``, so a revocation applies to commits checked
before it. New commits are checked in a pool of processes when there are
many of them.

History written before commits were signed is taken as it is by ``gitmail
adopt``: a record (``adoptions/<commit>.yaml``) in a signed commit. It
vouches for exactly what it vouches for at every door
(:func:`gitmail.storage.authorship.adoption_excuses`): in the adopted
commit's history, the unsigned commits with no signed commit below them,
and what a revoked key signed before its revocation; every other commit of
that history is judged as any other. So ``verify`` and the doors give each
commit one verdict, with one difference a door cannot avoid: what a
revoked key signed before its revocation (and no adoption covers) is let in
by every door, every machine that took the revocation in holding it, while
``verify`` reports it (``before_revocation``) for the operator to review
and then adopt (``gitmail adopt --commit C``, C the last commit made before
the key was lost) or repair.

An archive that joined shallow (:mod:`.boundary`) holds no history below
its boundary commits: those fetched from the hub it pinned are reported as
trusted by that pin (``trusted_by_pin``, with the hub's URL), and neither
they nor what lies below them are judged; every commit after them is. A
boundary that came from anywhere else is a finding (``unpinned-boundary``).
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable
from dataclasses import field

import pygit2

from gitmail.model.errors import INVALID_ARGUMENT, GitmailError
from gitmail.model.records import ADOPTIONS, Adoption, adoption_path
from gitmail.model.results import Result, result

from .authorship import NO_RULES, NOT_ALLOWED, PARALLEL_FROM, Refusal, Rules, Trust, Verdict, judge_range, mended
from .boundary import pinned_boundaries, read_pin, shallow_commits
from .engine import Archive, Change
from .handles import reference
from .nodes import trusted_keyring
from .snapshot import Snapshot, records_in

CACHE_FILE = "signatures.bin"
QUARANTINE_REFS = "refs/gitmail/quarantine"  # where a sync keeps what it refused (gitmail.sync.quarantine)
_ENTRY = struct.Struct(">20sB32s")  # commit id, verdict, signer's raw key (zeros unless signed)


@result
class Finding(Result):
    """One commit ``verify`` reports: which, why, and by whom it says it was made."""

    commit: str
    problem: str  # unsigned | bad-signature | unknown-key | revoked-key | not-allowed-writer
    node: str | None
    summary: str
    path: str | None = None  # the record a not-allowed-writer finding names
    kept_aside: bool = False  # found among what a sync kept out of main (refs/gitmail/quarantine/), not in main
    # Signed by a revoked key before its revocation: every door lets it in (every machine that took the revocation
    # holds it); reported for the operator to review, then adopt (`gitmail adopt --commit C`) or repair.
    before_revocation: bool = False


@result
class Verification(Result):
    """What ``verify`` found in one project's history."""

    project: str
    commits: int  # commits judged (the whole history but a pinned boundary's)
    checked: int  # of those, signatures checked in this run (the rest were remembered)
    adopted: list[str]  # the commits adoption records name (what they vouch for is accepted, as at a door)
    findings: list[Finding]
    clean: bool
    repaired: list[str] = field(default_factory=list)  # refused commits a repair merge took nothing of (mended)
    trusted_by_pin: list[str] = field(default_factory=list)  # boundary commits of a shallow join, trusted as the hub's
    pinned_hub: str | None = None  # the URL of the hub they were fetched from


class VerdictCache:
    """Signature verdicts by commit id, appended to one file; a torn last entry is ignored."""

    def __init__(self, folder: str):
        self.path = os.path.join(folder, CACHE_FILE)
        self.known: dict[bytes, Verdict] = {}
        try:
            with open(self.path, "rb") as handle:
                data = handle.read()
        except FileNotFoundError:
            data = b""
        for at in range(0, len(data) - _ENTRY.size + 1, _ENTRY.size):
            oid, verdict, key = _ENTRY.unpack_from(data, at)
            self.known[oid] = (verdict, key)

    def add(self, found: Iterable[tuple[bytes, Verdict]]) -> None:
        chunk = b"".join(_ENTRY.pack(oid, verdict, key) for oid, (verdict, key) in found)
        if not chunk:
            return
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        with open(self.path, "ab") as handle:
            if handle.tell() % _ENTRY.size:  # a write cut short before: start at an entry's boundary
                handle.truncate(handle.tell() - handle.tell() % _ENTRY.size)
            handle.write(chunk)
        for at in range(0, len(chunk), _ENTRY.size):
            oid, verdict, key = _ENTRY.unpack_from(chunk, at)
            self.known[oid] = (verdict, key)


def adopted(snap: Snapshot) -> list[str]:
    """The commits the archive's adoption records name (their history is trusted as it is)."""
    return [record.commit for record in records_in(snap, ADOPTIONS, Adoption)]


def verify(archive: Archive, project: str, cache_folder: str, *, workers: int = 2,
           parallel_from: int = PARALLEL_FROM, rules: Rules = NO_RULES) -> Verification:
    """Judge every commit of ``main``, honouring adoptions as the doors do (see the module docs).

    Each commit's signature, and whether its signer may write each record it
    writes (:mod:`gitmail.storage.authorship`; ``rules`` give what a merge
    computes and which records are derived, so those are judged by them). With
    ``parallel_from`` new commits or more, their signatures are checked by
    ``workers`` processes.
    """
    tip = archive.tip()
    if tip is None:
        return Verification(project=project, commits=0, checked=0, adopted=[], findings=[], clean=True)
    repo = archive.repo
    snap = archive.snapshot(tip)
    trusted = [hexsha for hexsha in adopted(snap) if hexsha in repo]
    pinned = pinned_boundaries(archive.git_dir)
    cache = VerdictCache(cache_folder)
    ring, shallow = trusted_keyring(archive), shallow_commits(archive.git_dir)
    judged = judge_range(repo, tip, [], Trust(ring, shallow=shallow, pinned=pinned), verdicts=cache.known,
                         rules=rules, workers=workers, parallel_from=parallel_from)
    cache.add(judged.checked.items())
    repaired = mended(repo, judged, tip)
    findings = [_finding(repo, item, before_revocation=item.commit in judged.before_revocation)
                for item in judged.refusals if item.commit not in repaired]
    seen = {(item.commit, item.path) for item in findings}
    for kept in _kept_aside(repo):
        for item in judge_range(repo, kept, [tip], Trust(ring, shallow=shallow, pinned=pinned),
                                rules=rules).refusals:
            if (item.commit, item.path) not in seen:
                seen.add((item.commit, item.path))
                findings.append(_finding(repo, item, kept_aside=True))
    pin = read_pin(archive.git_dir)
    return Verification(project=project, commits=len(judged.order), checked=len(judged.checked), adopted=trusted,
                        findings=findings, clean=not findings, repaired=[c for c in judged.order if c in repaired],
                        trusted_by_pin=sorted(pinned),
                        pinned_hub=pin.url if pin is not None and pinned else None)


def _finding(repo: pygit2.Repository, item: Refusal, *, kept_aside: bool = False,
             before_revocation: bool = False) -> Finding:
    summary = item.reason if item.code == NOT_ALLOWED else repo[item.commit].peel(pygit2.Commit).message
    return Finding(commit=item.commit, problem=item.code, node=item.node, path=item.path,
                   summary=summary.split("\n", 1)[0][:200], kept_aside=kept_aside,
                   before_revocation=before_revocation)


def _kept_aside(repo: pygit2.Repository) -> list[str]:
    """The refused tips a sync kept out of ``main`` (the parents of each quarantine ref's commit)."""
    out: list[str] = []
    for name in repo.references:
        if name.startswith(QUARANTINE_REFS + "/"):
            ref = reference(repo, name)
            out += [] if ref is None else [str(parent) for parent in ref.peel(pygit2.Commit).parent_ids]
    return out


def adopt(archive: Archive, *, node: str, now: str, commit: str | None = None) -> Adoption:
    """Record that the history up to ``commit`` (default: the tip) is trusted as it is, in a signed commit.

    What the record vouches for, ``verify`` and every door alike, is
    :func:`gitmail.storage.authorship.adoption_excuses`'s: the unsigned
    commits from before the project signed anything, and what a revoked key
    signed before its revocation.
    """
    target = commit or archive.tip()
    if target is None:
        raise GitmailError(INVALID_ARGUMENT, "the project has no history to adopt yet", {})
    try:
        resolved = str(archive.repo.revparse_single(target).peel(pygit2.Commit).id)
    except (KeyError, ValueError, pygit2.GitError):
        raise GitmailError(INVALID_ARGUMENT, f"{target!r} names no commit of this project; give a commit id of its "
                           "history (git log main)", {"commit": target}) from None
    tip = archive.tip()
    if tip is None or (resolved != tip and not archive.repo.descendant_of(tip, resolved)):
        raise GitmailError(INVALID_ARGUMENT, f"{resolved[:12]} is not in the history of main; adopt a commit of "
                           "main's history", {"commit": resolved})
    record = Adoption(commit=resolved, node=node, adopted_at=now)

    def fn(snap: Snapshot) -> Change:
        if snap.exists(adoption_path(resolved)):
            return Change("")
        return Change(f"Adopt the history up to {resolved[:12]} as trusted (gitmail adopt)",
                      author="gitmail").put_record(record)

    archive.transact(fn)
    return record
