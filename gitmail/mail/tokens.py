"""Agent registration tokens: minted once, stored only as a hash.

An agent proves who it is with the token it received when it registered.
The archive (which is shared with every teammate and every remote) holds only
a SHA-256 hash of it, so reading the repository never reveals a usable token.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

_PREFIX = "gmt_"
_KEY_PREFIX = "gmk_"
_HASH_PREFIX = "sha256:"


def mint_token() -> str:
    """A fresh random token (256 bits) to hand to an agent exactly once."""
    return _PREFIX + secrets.token_urlsafe(32)


def mint_key() -> str:
    """A fresh headless agent's key (256 bits): proves its agent as a token does, until it ends."""
    return _KEY_PREFIX + secrets.token_urlsafe(32)


def hash_token(token: str) -> str:
    """The form of a token that may be stored in the archive."""
    return _HASH_PREFIX + hashlib.sha256(token.encode("utf-8")).hexdigest()


def token_matches(token: object, stored_hash: str | None) -> bool:
    """Whether ``token`` hashes to ``stored_hash``, compared in constant time."""
    if not isinstance(token, str) or not token or not stored_hash:
        return False
    return hmac.compare_digest(hash_token(token).encode("ascii"), stored_hash.encode("ascii", "replace"))
