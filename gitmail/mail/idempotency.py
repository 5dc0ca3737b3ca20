"""Idempotency keys for sends and replies, kept in the repository.

A sender may attach a key to a write. The first use files a small record
under the sender's folder, named by the key's hash and sharded by the day it
was used; a retry looks in today's and yesterday's folders, so a key is
honoured for at least 24 hours, across restarts and across machines that
share the archive. The same key with different content is a conflict.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
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
        raise GitmailError(
            IDEMPOTENCY_CONFLICT,
            f"this idempotency_key was already used by {agent} for a different {found.operation} request "
            f"(message {found.message_id}); use a new key for a new request, or resend exactly the same content",
            {"message_id": found.message_id, "operation": found.operation},
        )
    return found
