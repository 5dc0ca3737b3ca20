"""The store: ``$GITMAIL_HOME`` holding one archive per project.

Layout::

    $GITMAIL_HOME/
      node                      this machine's node name (for clocks and commits)
      keys/                     this node's signing key, owner-only (see nodekey.py)
      projects/<slug>/archive.git   the database: a bare repository
      projects/<slug>/checkout/     a read-mostly clone for grep and editors
      derived/<slug>/               index and caches; safe to delete at any time

A project is named by its ``human_key``. Its slug is readable (derived from the
key's last path components) and unique (it ends in a hash of the whole key), and
every machine computes the same slug for the same key.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import secrets
import shutil
import socket
import threading
import time
from dataclasses import dataclass

from gitmail.model.clock import HybridClock, WallTime
from gitmail.model.errors import NOT_FOUND, GitmailError
from gitmail.model.names import normalize_human_key
from gitmail.model.records import Node, node_path

from .checkout import CheckoutRefresher, protect_archive
from .engine import Archive
from .hookfiles import ensure_archive_hooks, install_archive_hooks
from .nodekey import NodeKey

_SLUG_SAFE = re.compile(r"[^a-z0-9]+")
_SLUG_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,80}-[0-9a-f]{12}$")


def default_home() -> str:
    return os.path.abspath(os.path.expanduser(os.environ.get("GITMAIL_HOME") or "~/.gitmail"))


@functools.lru_cache(maxsize=4096)
def slug_for(human_key: str) -> str:
    """The project slug for a key: readable words plus 48 bits of its hash (remembered: every call resolves one)."""
    key = normalize_human_key(human_key)
    digest = hashlib.sha256(key.encode("utf-8")).hexdigest()[:12]
    words = _SLUG_SAFE.sub("-", key.lower()).strip("-")[-40:].strip("-")
    return f"{words}-{digest}" if words else f"root-{digest}"


def is_slug(text: str) -> bool:
    return bool(_SLUG_RE.match(text))


@dataclass(frozen=True)
class ProjectPaths:
    slug: str
    archive: str
    checkout: str
    derived: str


class Store:
    """Opens project archives under one home folder; one Archive per project."""

    def __init__(self, home: str | None = None, *, durable: bool = True, background: bool = True,
                 wall: WallTime | None = None):
        """``background`` keeps checkouts fresh and packs consolidated after commits.

        ``clock`` is the time of everything the store writes; ``wall`` is its
        source of wall time (default the system's; tests pass one they move).
        """
        self.home = os.path.abspath(home or default_home())
        self.durable = durable
        self.background = background
        self._refreshers: dict[str, CheckoutRefresher] = {}
        os.makedirs(os.path.join(self.home, "projects"), exist_ok=True)
        self.node = self._node_name()
        self.clock = HybridClock(self.node, wall=wall or time.time)
        self.key = NodeKey(self.home, self.node)
        self._archives: dict[str, Archive] = {}
        self._lock = threading.Lock()

    def _node_name(self) -> str:
        path = os.path.join(self.home, "node")
        try:
            with open(path, encoding="utf-8") as handle:
                name = handle.read().strip()
            if name:
                return name
        except FileNotFoundError:
            pass
        host = re.sub(r"[^A-Za-z0-9_.-]+", "-", socket.gethostname())[:32].strip("-.") or "host"
        name = f"{host}-{secrets.token_hex(3)}"
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as handle:
            handle.write(name + "\n")
        try:
            os.link(tmp, path)  # first writer wins if two processes race
        except FileExistsError:
            pass
        finally:
            os.unlink(tmp)
        with open(path, encoding="utf-8") as handle:
            return handle.read().strip()

    def paths(self, slug: str) -> ProjectPaths:
        base = os.path.join(self.home, "projects", slug)
        return ProjectPaths(slug, os.path.join(base, "archive.git"), os.path.join(base, "checkout"),
                            os.path.join(self.home, "derived", slug))

    def resolve(self, project: str) -> str:
        """The slug for a human key or an existing slug."""
        if isinstance(project, str) and is_slug(project):
            return project  # a slug can never be a human key: keys are absolute paths
        return slug_for(project)

    def exists(self, project: str) -> bool:
        return os.path.isdir(self.paths(self.resolve(project)).archive)

    def archive(self, project: str, *, create: bool = False) -> Archive:
        """The archive of a project (by human key or slug)."""
        slug = self.resolve(project)
        with self._lock:
            archive = self._archives.get(slug)
            if archive is not None:
                return archive
            paths = self.paths(slug)
            if not os.path.isdir(paths.archive):
                if not create:
                    raise GitmailError(NOT_FOUND,
                                       f"no project {project!r} in {self.home}; create it with ensure_project first",
                                       {"project": project})
                os.makedirs(os.path.dirname(paths.archive), exist_ok=True)
                archive = Archive.init(paths.archive, node=self.node, durable=self.durable, maintain=self.background,
                                       wall=self.clock.wall, signer=self.key.sign_commit, publish=self._own_record())
                protect_archive(archive.git_dir)
                install_archive_hooks(archive.git_dir)
            else:
                archive = Archive(paths.archive, node=self.node, durable=self.durable, maintain=self.background,
                                  wall=self.clock.wall, signer=self.key.sign_commit, publish=self._own_record())
                ensure_archive_hooks(archive.git_dir)
            if self.background:
                refresher = CheckoutRefresher(paths.archive, paths.checkout)
                archive.add_listener(refresher.on_commit)
                self._refreshers[slug] = refresher
            self._archives[slug] = archive
            return archive

    def _own_record(self) -> tuple[str, bytes]:
        """This node's record, published by the first commit it makes in an archive that lacks it."""
        record = Node(node=self.node, key=self.key.public_line, kind="node", created_at=self.clock.now_ts())
        return node_path(self.node), record.to_bytes()

    def poke_checkout(self, project: str) -> None:
        """Bring the project's checkout to ``main`` soon, after a move this process did not make."""
        self.archive(project)
        refresher = self._refreshers.get(self.resolve(project))
        if refresher is not None:
            refresher.poke()

    def flush(self, timeout: float = 30.0) -> None:
        """Wait until background work (checkout refresh, packing) has caught up."""
        for refresher in self._refreshers.values():
            refresher.worker.wait_idle(timeout)
        for archive in self._archives.values():
            if archive.maintainer is not None:
                archive.maintainer.worker.wait_idle(timeout)

    def remove(self, slug: str) -> None:
        """Delete a project's repository, checkout and derived state from this machine.

        Background work on the project is stopped first, and the folders are
        renamed away before they are deleted, so the project is gone at once
        for every later call even while the deletion is still running.
        """
        paths = self.paths(slug)
        doomed = []
        # Under the lock, so no other thread can reopen (and cache) the project
        # between dropping its handle and moving its folders away.
        with self._lock:
            archive = self._archives.pop(slug, None)
            refresher = self._refreshers.pop(slug, None)
            if refresher is not None:
                refresher.worker.stop()
            if archive is not None and archive.maintainer is not None:
                archive.maintainer.worker.stop()
            for folder in (os.path.dirname(paths.archive), paths.derived):
                target = f"{folder}.deleting-{secrets.token_hex(4)}"
                try:
                    os.rename(folder, target)
                except FileNotFoundError:
                    continue
                doomed.append(target)
        for target in doomed:
            shutil.rmtree(target, ignore_errors=True)

    def slugs(self) -> list[str]:
        root = os.path.join(self.home, "projects")
        return sorted(name for name in os.listdir(root) if os.path.isdir(os.path.join(root, name, "archive.git")))
