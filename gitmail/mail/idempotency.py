"""Idempotency keys for sends, replies, identity writes and channel creations, kept in the repository.

A sender (or an agent writing an identity: registering, spawning, updating,
putting to sleep, waking; or making a channel) may attach a key to a write. The first use files a small record
under the sender's folder, named by the key's hash and sharded by the day it
was used; a retry looks in today's and yesterday's folders, so a key is
honoured for at least 24 hours, across restarts and across machines that
share the archive. The same key with different content is a conflict.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from dataclasses import dataclass
from typing import Any

from gitmail.model.errors import IDEMPOTENCY_CONFLICT, GitmailError, invalid
from gitmail.model.records import IdempotencyKey, idempotency_path
from gitmail.storage.snapshot import Snapshot

MAX_KEY = 256
HONOURED_DAYS = 2  # today's and yesterday's folders: at least 24 hours


def key_hash(key: object) -> str:
    if not isinstance(key, str) or not 1 <= len(key) <= MAX_KEY:
        raise invalid(f"idempotency_key must be text of 1 to {MAX_KEY} characters, unique per logical request",
                      field="idempotency_key")
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def request_hash(request: dict[str, Any]) -> str:
    """A fingerprint of a request's content, to tell a retry from a different request."""
    return hashlib.sha256(json.dumps(request, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()


def find(snap: Snapshot, agent: str, hashed: str, at: dt.datetime) -> IdempotencyKey | None:
    """The record of a key used by ``agent`` within the honoured window that ends at ``at``."""
    for back in range(HONOURED_DAYS):
        day = at - dt.timedelta(days=back)
        path = idempotency_path(agent, day.strftime("%Y-%m-%dT00:00:00Z"), hashed)
        found = snap.load(path, IdempotencyKey)
        if found is not None:
            return found
    return None


def check(snap: Snapshot, agent: str, hashed: str, operation: str, fingerprint: str,
          at: dt.datetime) -> IdempotencyKey | None:
    """The earlier use of this key for the same request, None if unused; conflict otherwise."""
    found = find(snap, agent, hashed, at)
    if found is None:
        return None
    if found.operation != operation or found.request_hash != fingerprint:
        what = (f"message {found.message_id}" if found.message_id else
                f"channel {found.channel}" if found.channel else f"agent {found.target}")
        raise GitmailError(
            IDEMPOTENCY_CONFLICT,
            f"this idempotency_key was already used by {agent} for a different {found.operation} request "
            f"({what}); use a new key for a new request, or resend exactly the same content",
            {"message_id": found.message_id, "target": found.target, "operation": found.operation,
             **({"channel": found.channel} if found.channel else {})},
        )
    return found


@dataclass(frozen=True)
class Keyed:
    """An identity write's key, hashed, with the fingerprint of its arguments."""

    operation: str
    key_hash: str
    request_hash: str

    def earlier(self, snap: Snapshot, agent: str, at: dt.datetime) -> IdempotencyKey | None:
        """The first use of this key by ``agent`` for the same request; IDEMPOTENCY_CONFLICT for another."""
        return check(snap, agent, self.key_hash, self.operation, self.request_hash, at)

    def record(self, agent: str, target: str, created_at: str, changed: bool) -> IdempotencyKey:
        return IdempotencyKey(key_hash=self.key_hash, agent=agent, operation=self.operation,
                              request_hash=self.request_hash, created_at=created_at, target=target, changed=changed)


def keyed(operation: str, key: object, request: dict[str, Any]) -> Keyed | None:
    """The key of an identity write (None when the call gave none)."""
    if key is None:
        return None
    return Keyed(operation, key_hash(key), request_hash({"operation": operation, **request}))
