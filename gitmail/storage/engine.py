"""The write path: transactions committed into git by compare-and-swap.

A transaction is a function that reads a :class:`Snapshot` of the tip and
returns a :class:`Change` (files to put or delete, a line for the commit
message, the acting agent) or raises a :class:`GitmailError`. The engine turns
changes into git objects, writes them as one durable pack, and advances
``refs/heads/main`` only if it still points at the commit the functions read.
If another writer got there first, the functions run again on the new tip, so
their validation always sees the state they commit onto.

Writers in one process form a group commit: while one commit is in flight,
new transactions queue, and the next leader commits all of them at once (one
pack, one ref update, one set of fsyncs); consecutive changes by the same
agent share a commit, different agents get one commit each in the chain, so
``git log --author`` stays truthful. Writers in different processes on one
host queue on an ``flock`` held only while a commit is built and swapped;
compare-and-swap remains the guard against everyone else (git itself, other
hosts' pushes).
"""

from __future__ import annotations

import fcntl
import logging
import os
import random
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pygit2

from gitmail.model.clock import WallTime
from gitmail.model.errors import RETRY_EXHAUSTED, GitmailError, resource_exhausted
from gitmail.model.records import Record

from . import leftovers
from .handles import open_repository, tree_has
from .maintenance import Maintainer
from .objects import COMMIT, CommitSigner, PackBuffer, Signature, encode_commit, fsync_dir
from .operator import by_operator
from .snapshot import Snapshot, blob_data
from .treeedit import TreeEditor, check_path

_log = logging.getLogger("gitmail.storage.engine")

MAIN = "refs/heads/main"
SYSTEM_AUTHOR = "gitmail"
MAX_ATTEMPTS = 64
_STALE_LOCK_SECONDS = 1.0  # git holds main.lock for milliseconds; older means its owner died
_LOCK_WAIT_SECONDS = 10.0
CHANGES_KEPT = 4096  # recent commits whose changed files are remembered (see Archive.changes_of)
PACK_CHECK_SECONDS = 1.0  # how often handles look for packs removed behind this process's back
_DONE, _LOST, _LOCKED = "done", "lost", "locked"
_jitter = random.Random()  # backoff jitter of our own: the shared generator is the application's to seed


@dataclass
class Change:
    """What a transaction wants committed, and what its caller gets back.

    Paths name records as the newest layout does (the record path functions);
    the engine writes each one where the archive's layout keeps it.
    """

    message: str
    author: str | None = None
    author_email: str | None = None  # default: ``<author>@gitmail``; a person writing gives their own
    edits: dict[str, bytes | None] = field(default_factory=dict)
    # Files set to a version the repository holds already, by its raw id: a merge takes the other side's files
    # so, neither reading them nor packing them again. A path is in ``edits`` or here, not both.
    links: dict[str, bytes] = field(default_factory=dict)
    result: Any = None
    merge_parent: str | None = None  # a second parent: the commit this change merges in
    when: int | None = None  # the author's time (seconds since the epoch); default: now. An import gives the original

    def put(self, path: str, content: bytes | Record) -> Change:
        self.edits[check_path(path)] = content.to_bytes() if isinstance(content, Record) else content
        return self

    def put_record(self, record: Record) -> Change:
        return self.put(record.path(), record)

    def delete(self, path: str) -> Change:
        self.edits[check_path(path)] = None
        return self


Transaction = Callable[[Snapshot], Change]


@dataclass
class Committed:
    """The outcome of one transaction: its result and the commit holding it."""

    result: Any
    commit: str | None  # None when the change had no edits
    attempts: int = 1


class _Pending:
    __slots__ = ("fn", "done", "outcome", "error", "change")

    def __init__(self, fn: Transaction):
        self.fn = fn
        self.done = False
        self.outcome: Committed | None = None
        self.error: BaseException | None = None
        self.change: Change | None = None


CommitListener = Callable[[str | None, str], None]


def _run_functions(repo: pygit2.Repository, base: str | None,
                   batch: list[_Pending]) -> tuple[dict[str, bytes | None], list[tuple[_Pending, Change]]]:
    """Run each transaction of ``batch`` on ``base``, each seeing the edits queued before it: (them all, the changes).

    A function that fails has its error kept for its caller alone.
    """
    overlay: dict[str, bytes | None] = {}
    accepted: list[tuple[_Pending, Change]] = []
    for item in batch:
        item.error, item.change = None, None
        try:
            snapshot = Snapshot(repo, base, overlay.copy() if overlay else None)
            change = item.fn(snapshot)
            if not isinstance(change, Change):
                raise TypeError(f"a transaction must return a Change, not {type(change).__name__}")
            change.edits = snapshot.place(change.edits)  # where this archive's layout keeps each record
            change.links = snapshot.place(change.links)
        except BaseException as exc:  # noqa: BLE001 - reported to that caller only
            item.error = exc
            continue
        item.change = change
        overlay.update(change.edits)
        if change.links and item is not batch[-1]:  # a transaction after it in this batch reads them
            overlay.update({path: blob_data(repo, pygit2.Oid(raw=blob)) for path, blob in change.links.items()})
        accepted.append((item, change))
    return overlay, accepted


class _Slot:
    """One thread's repository handle and the generation it was opened in."""

    def __init__(self) -> None:
        self.repo: pygit2.Repository | None = None
        self.generation = -1


class Archive:
    """One project's git repository, used as a database."""

    def __init__(self, path: str, *, node: str = "local", durable: bool = True, maintain: bool = True,
                 wall: WallTime = time.time, pack_check_interval: float = PACK_CHECK_SECONDS,
                 signer: CommitSigner | None = None, publish: tuple[str, bytes] | None = None):
        """Open the repository at ``path``; ``maintain`` consolidates packs in the background.

        ``wall`` gives the commits' time (the store passes its clock's source).
        Every ``pack_check_interval`` seconds at most, a thread asking for its
        handle also looks whether packs were removed (see :attr:`repo`).
        ``signer`` signs every commit this archive writes (the store passes
        its node key's); without one the commits are unsigned. ``publish``
        is a file (the node's own record, path and bytes) that the first
        commit this archive writes adds when ``main`` does not hold it yet,
        so a node's key reaches an archive in a commit that key signs.
        """
        self.path = os.path.abspath(path)
        self.signer = signer
        self.publish = publish
        self._published = publish is None
        self.node = node
        self.wall = wall
        self.durable = durable
        self._local = threading.local()
        self._queue_lock = threading.Lock()
        self._queue: list[_Pending] = []
        self._leader_active = False
        self._wakeups = threading.Condition(self._queue_lock)
        self._listeners: list[CommitListener] = []
        self._changes: OrderedDict[str, list[tuple[str, bytes | None, bytes | None]]] = OrderedDict()
        self._changes_lock = threading.Lock()
        self.retries = 0  # lost compare-and-swap races, for reports and benchmarks
        repo = open_repository(self.path)
        self.git_dir = repo.path.rstrip("/")
        self._lock_path = os.path.join(self.git_dir, "gitmail-write.lock")
        self._pack_dir = os.path.join(self.git_dir, "objects", "pack")
        os.makedirs(self._pack_dir, exist_ok=True)
        self._generation = 0  # bumped when packs were removed: handles opened before are renewed
        self._generation_lock = threading.Lock()
        self._slots: weakref.WeakSet[_Slot] = weakref.WeakSet()  # every thread's handle slot, to drop them at once
        self._packs_seen: frozenset[str] = frozenset()
        self._packs_checked = -float("inf")
        self._shallow_seen = self._shallow_stamp()
        self._pack_check_interval = pack_check_interval
        if durable and "core.fsync" not in repo.config:
            # Objects that git itself brings in (a fetch before a fast-forward,
            # a push from a human) must be as durable as our own packs.
            repo.config["core.fsync"] = "objects,derived-metadata,reference"
            repo.config["core.fsyncMethod"] = "fsync"
        if maintain:  # a writer killed earlier may have left temporary packs or ref locks
            for leftover in leftovers.clear(self.git_dir):
                _log.warning("removed from %s: %s", self.git_dir, leftover)
        self.maintainer = Maintainer(self.git_dir, on_consolidated=self.renew_handles) if maintain else None
        if self.maintainer is not None:
            self.add_listener(self.maintainer.on_commit)

    # -- repository access ----------------------------------------------------
    @classmethod
    def init(cls, path: str, **kwargs: Any) -> Archive:
        """Create a bare repository whose ``main`` is the database."""
        if not os.path.exists(os.path.join(path, "HEAD")):
            pygit2.init_repository(path, bare=True, initial_head="main")
        return cls(path, **kwargs)

    @property
    def repo(self) -> pygit2.Repository:
        """A repository handle private to the calling thread.

        A handle keeps every pack it has ever looked into open and mapped,
        and libgit2 never forgets a pack that was removed from disk; once a
        consolidation has replaced packs, each thread gets a fresh handle at
        its next call, and the old packs' files and memory are released as
        soon as the last handle on them is gone.
        """
        generation = self._current_generation()
        slot = getattr(self._local, "slot", None)
        if slot is None:
            slot = self._local.slot = _Slot()
            with self._generation_lock:
                self._slots.add(slot)
        repo = slot.repo
        if repo is None or slot.generation != generation:
            slot.repo = None  # drop the old handle before opening the new one
            repo = slot.repo = open_repository(self.path)
            slot.generation = generation
        return repo

    def renew_handles(self) -> None:
        """Drop every thread's handle now; each opens a fresh one at its next call (packs were replaced).

        Dropped at once rather than at each thread's next call: a server's
        pool has threads that may stay idle for hours, and each would keep
        the removed packs open and mapped until then.
        """
        with self._generation_lock:
            self._bump()

    def _bump(self) -> None:
        """A new handle generation, every thread's handle dropped (the caller holds the generation lock)."""
        self._generation += 1
        for slot in list(self._slots):
            slot.repo = None  # a call in flight keeps its own reference until it returns

    def _current_generation(self) -> int:
        """The handle generation, bumped (at most once an interval) if packs vanished meanwhile.

        This catches consolidations by other processes (another server, the
        CLI, ``git gc`` by hand), which this process is never told about, and
        a moved shallow boundary. The
        packs remembered are every one seen since the last renewal, including
        those this process wrote in between.
        """
        now = time.monotonic()
        if now - self._packs_checked < self._pack_check_interval:
            return self._generation
        with self._generation_lock:
            if now - self._packs_checked >= self._pack_check_interval:
                self._packs_checked = now
                try:
                    packs = frozenset(name for name in os.listdir(self._pack_dir) if name.endswith(".idx"))
                except FileNotFoundError:
                    packs = frozenset()
                shallow = self._shallow_stamp()
                if self._packs_seen - packs or shallow != self._shallow_seen:
                    self._bump()
                    self._packs_seen, self._shallow_seen = packs, shallow
                else:
                    self._packs_seen |= packs
            return self._generation

    def follow_shallow(self) -> None:
        """Renew every handle now if the boundary commits changed (this process fetched into a shallow archive)."""
        with self._generation_lock:
            shallow = self._shallow_stamp()
            if shallow != self._shallow_seen:
                self._shallow_seen = shallow
                self._bump()

    def _shallow_stamp(self) -> tuple[int, int] | None:
        """When git's list of boundary commits last changed: a handle reads it once, when it is opened.

        A fetch into an archive that joined shallow moves its boundary
        (:mod:`gitmail.storage.boundary`); a handle opened before would walk
        past the new boundary into commits this machine does not hold.
        """
        try:
            stat = os.stat(os.path.join(self.git_dir, "shallow"))
        except FileNotFoundError:
            return None
        return stat.st_mtime_ns, stat.st_size

    def tip(self) -> str | None:
        try:
            return str(self.repo.references[MAIN].target)
        except KeyError:
            return None

    def snapshot(self, commit: str | None = None) -> Snapshot:
        """A consistent view at ``commit`` (default: the current tip)."""
        return Snapshot(self.repo, commit if commit is not None else self.tip())

    def changes_of(self, commit: str) -> list[tuple[str, bytes | None, bytes | None]] | None:
        """What a recent commit of this process changed, ``(path, blob before, blob after)`` in path order.

        None for a commit this process did not make (or made long ago): then
        compare its trees. A busy day folder of tens of thousands of files
        takes some 50 ms to compare; this answer is free. For a merge it is
        what the merge changed over its first parent (what entered ``main``);
        a reader that follows both parents compares them itself.
        """
        with self._changes_lock:
            return self._changes.get(commit)

    def queue_depth(self) -> int:
        """Writes of this process waiting for the commit in flight to finish."""
        with self._queue_lock:
            return len(self._queue)

    def add_listener(self, listener: CommitListener) -> None:
        """Call ``listener(old_tip, new_tip)`` after each commit this process makes."""
        self._listeners.append(listener)

    # -- the write path -------------------------------------------------------
    def transact(self, fn: Transaction) -> Committed:
        """Run ``fn`` against the tip and commit its change; see the module docs."""
        return self.transact_many([fn])[0]

    def transact_many(self, fns: list[Transaction]) -> list[Committed]:
        """Run several transactions in order as one group: one pack, one compare-and-swap of main.

        Each function sees the edits of those before it, and consecutive
        changes by one author share a commit, as in any group commit (a bulk
        writer such as an import uses it to write a run of commits by
        different authors at the cost of one). Every function's outcome is
        returned in order; if one raised, its error is raised here after the
        others were committed.
        """
        pendings = [_Pending(by_operator(fn)) for fn in fns]
        if not pendings:
            return []
        last = pendings[-1]
        with self._queue_lock:
            self._queue.extend(pendings)
            while not last.done and self._leader_active:
                self._wakeups.wait()
            if last.done:
                return [self._outcome(pending) for pending in pendings]
            # Lead: everything queued so far (our own item included) goes into
            # the next commit. Items queued meanwhile wait for the next leader.
            self._leader_active = True
            batch, self._queue = self._queue, []
        try:
            self._commit_batch(batch)
        except BaseException as exc:  # noqa: BLE001 - every waiter must hear about it
            for item in batch:
                if not item.done:
                    item.error, item.done = exc, True
        finally:
            with self._queue_lock:
                self._leader_active = False
                self._wakeups.notify_all()
        return [self._outcome(pending) for pending in pendings]

    @staticmethod
    def _outcome(pending: _Pending) -> Committed:
        if pending.error is not None:
            raise pending.error
        assert pending.outcome is not None
        return pending.outcome

    def _commit_batch(self, batch: list[_Pending]) -> None:
        attempt = 0
        lock_wait_until = 0.0
        while attempt < MAX_ATTEMPTS:
            attempt += 1
            with _FileLock(self._lock_path):
                outcome = self._try_commit(batch, attempt)
            if outcome == _DONE:
                return
            if outcome == _LOCKED:
                # Someone holds main.lock: not a lost race, so it costs no
                # attempt; wait for it, or for it to turn stale and be cleared.
                now = time.monotonic()
                lock_wait_until = lock_wait_until or now + _LOCK_WAIT_SECONDS
                if now < lock_wait_until:
                    attempt -= 1
                time.sleep(0.005)
                continue
            self.retries += 1
            time.sleep(_jitter.uniform(0, 0.002 * min(attempt, 10)))
        error = GitmailError(
            RETRY_EXHAUSTED,
            f"gave up after {MAX_ATTEMPTS} attempts because other writers kept moving main first; "
            "nothing was written, so the call can simply be retried",
            {"attempts": MAX_ATTEMPTS},
        )
        for item in batch:
            if not item.done:
                item.error, item.done = error, True

    def _try_commit(self, batch: list[_Pending], attempt: int) -> str:
        """One attempt: _DONE when every item is settled, else _LOST or _LOCKED."""
        repo = self.repo
        ref = _lookup(repo)
        base = str(ref.target) if ref is not None else None
        overlay, accepted = _run_functions(repo, base, batch)
        writers = [(item, change) for item, change in accepted if change.edits or change.links or change.merge_parent]
        if not writers:
            self._settle(batch, attempt)
            return _DONE
        pack = PackBuffer()
        editor = TreeEditor(repo, repo[base].peel(pygit2.Commit).tree_id.raw if base else None, pack)
        parent = bytes.fromhex(base) if base else None
        now = int(self.wall())
        made: dict[str, list[tuple[str, bytes | None, bytes | None]]] = {}
        publication = self._publication(repo, base)
        for group in _by_author(writers):
            if publication and not any(p in overlay for p in publication):
                for path, own in publication.items():
                    editor.set(path, own)
                publication = {}
            for _, change in group:
                for path, data in change.edits.items():
                    editor.set(path, data)
                for path, blob in change.links.items():
                    editor.link(path, blob)
            tree = editor.flush()
            author = group[0][1].author or SYSTEM_AUTHOR
            message = _commit_message(author, [change for _, change in group])
            when = group[-1][1].when
            signature = Signature(author, group[0][1].author_email or f"{author}@gitmail",
                                  now if when is None else when)
            committer = Signature("gitmail", f"gitmail@{self.node}", now)
            parents = [parent] if parent else []
            merged = group[-1][1].merge_parent
            if merged:
                parents.append(bytes.fromhex(merged))
            parent = pack.add(COMMIT, encode_commit(tree, parents, signature, committer, message,
                                                 sign=self.signer))
            made[parent.hex()] = editor.take_changes()  # a merge's: over its first parent
            for item, change in group:
                item.outcome = Committed(change.result, parent.hex(), attempt)
        assert parent is not None  # writers is not empty, so at least one commit was added
        written = pack.write(self._pack_dir, durable=self.durable)
        with self._generation_lock:
            self._packs_seen |= {written + ".idx"}
        new_tip = pygit2.Oid(raw=parent)
        swapped = self._swap(repo, ref, new_tip)
        if swapped != _DONE:
            return swapped
        editor.remember()
        self._published = self._published or not publication
        with self._changes_lock:
            self._changes.update(made)
            while len(self._changes) > CHANGES_KEPT:
                self._changes.popitem(last=False)
        if self.durable:
            self._sync_ref()
        for listener in self._listeners:
            try:
                listener(base, str(new_tip))
            except Exception:  # noqa: BLE001 - the commit stands; derived state catches up later
                _log.exception("commit listener failed after %s", new_tip)
        self._settle(batch, attempt)
        return _DONE

    def publication(self, base: str | None) -> dict[str, bytes]:
        """This machine's node record, for a commit on ``base`` written outside :meth:`transact` (a migration)."""
        return self._publication(self.repo, base)

    def _publication(self, repo: pygit2.Repository, base: str | None) -> dict[str, bytes]:
        """The file to publish with the next commit: none once ``main`` holds it (whatever its version)."""
        if self._published or self.publish is None:
            return {}
        path, data = self.publish
        if base is not None:
            if not tree_has(repo[base].peel(pygit2.Tree), path):
                return {path: data}
            self._published = True
            return {}
        return {path: data}

    def advance(self, expected: str | None, new: str) -> bool:
        """Move main from ``expected`` to the existing commit ``new`` by compare-and-swap.

        This is how a sync fast-forwards to a fetched commit that already
        contains the local tip. False (nothing changed) if main is no longer
        at ``expected`` or git holds its lock right now; listeners hear about
        the move like about a commit.
        """
        with _FileLock(self._lock_path):
            repo = self.repo
            ref = _lookup(repo)
            if (str(ref.target) if ref is not None else None) != expected:
                return False
            try:
                if ref is None:
                    repo.references.create(MAIN, pygit2.Oid(hex=new), force=False)
                else:
                    ref.set_target(pygit2.Oid(hex=new), "gitmail: fast-forward")
            except (pygit2.AlreadyExistsError, pygit2.GitError, OSError) as exc:  # moved or locked meanwhile...
                if resource_exhausted(exc) is not None:
                    raise  # ...unless the process ran out of file handles or disk
                return False
            if self.durable:
                self._sync_ref()
        for listener in self._listeners:
            try:
                listener(expected, new)
            except Exception:  # noqa: BLE001 - the move stands; derived state catches up later
                _log.exception("commit listener failed after %s", new)
        return True

    @staticmethod
    def _settle(batch: list[_Pending], attempt: int) -> None:
        for item in batch:
            if item.error is None and item.outcome is None:
                item.outcome = Committed(item.change.result if item.change else None, None, attempt)
            item.done = True

    def _swap(self, repo: pygit2.Repository, ref: pygit2.Reference | None, new_tip: pygit2.Oid) -> str:
        """Compare-and-swap main: _DONE, _LOST (moved meanwhile) or _LOCKED."""
        try:
            if ref is None:
                repo.references.create(MAIN, new_tip, force=False)
            else:
                ref.set_target(new_tip, "gitmail: commit")
            return _DONE
        except pygit2.AlreadyExistsError:
            return _LOST
        except (pygit2.GitError, OSError) as exc:
            if resource_exhausted(exc) is not None:
                raise  # no file handle for the ref's lock is not someone else holding it
            text = str(exc)
            if "lock" in text:
                self._clear_stale_lock()
                return _LOCKED
            if "does not match" in text or "modified" in text or "exists" in text:
                return _LOST
            raise

    def _clear_stale_lock(self) -> None:
        """Remove a ``main.lock`` left by a writer that died mid-update.

        git and libgit2 hold that lock for well under a millisecond, so one
        older than a second, seen while we hold the write lock,
        belongs to a process that is gone.
        """
        lock = os.path.join(self.git_dir, "refs", "heads", "main.lock")
        try:
            if time.time() - os.stat(lock).st_mtime > _STALE_LOCK_SECONDS:
                os.unlink(lock)
        except FileNotFoundError:
            pass

    def _sync_ref(self) -> None:
        heads = os.path.join(self.git_dir, "refs", "heads")
        try:
            fd = os.open(os.path.join(heads, "main"), os.O_RDONLY)
        except FileNotFoundError:
            return
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        fsync_dir(heads)


def _lookup(repo: pygit2.Repository) -> pygit2.Reference | None:
    try:
        return repo.lookup_reference(MAIN)
    except KeyError:
        return None


def _by_author(items: list[tuple[_Pending, Change]]) -> list[list[tuple[_Pending, Change]]]:
    """Consecutive changes by one author share a commit; a merge, or a change dated otherwise, is one of its own."""
    groups: list[list[tuple[_Pending, Change]]] = []
    for item, change in items:
        last = groups[-1][-1][1] if groups else None
        if (last is not None and (last.author, last.author_email, last.when)
                == (change.author, change.author_email, change.when)
                and not last.merge_parent and not change.merge_parent):
            groups[-1].append((item, change))
        else:
            groups.append([(item, change)])
    return groups


def _commit_message(author: str, changes: list[Change]) -> str:
    if len(changes) == 1:
        return changes[0].message
    lines = "\n".join(f"- {change.message}" for change in changes)
    return f"{author}: {len(changes)} changes\n\n{lines}\n"


class _FileLock:
    """An exclusive ``flock`` the OS releases if the holder dies."""

    def __init__(self, path: str):
        self.path = path
        self.fd = -1

    def __enter__(self) -> _FileLock:
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc: object) -> None:
        fcntl.flock(self.fd, fcntl.LOCK_UN)
        os.close(self.fd)
