"""Record identifiers that need no coordination between machines.

An ID is 23 lowercase Crockford base32 characters: 10 for the creation time in
milliseconds (so IDs sort by time and a path can be derived from one) and 13 for
65 random bits (so two machines offline never mint the same ID). Within one
process, IDs minted in the same millisecond still sort in minting order.
"""

from __future__ import annotations

import datetime as _dt
import os
import re
import threading
import time
from typing import TypeGuard

ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"
_TIME_CHARS = 10
_RANDOM_CHARS = 13
_RANDOM_BITS = _RANDOM_CHARS * 5
ID_LENGTH = _TIME_CHARS + _RANDOM_CHARS
ID_PATTERN = re.compile(rf"^[{ALPHABET}]{{{ID_LENGTH}}}$")

_lock = threading.Lock()
_last_ms = -1
_last_rand = 0


def _encode(value: int, width: int) -> str:
    chars = []
    for _ in range(width):
        chars.append(ALPHABET[value & 31])
        value >>= 5
    return "".join(reversed(chars))


def _decode(text: str) -> int:
    value = 0
    for ch in text:
        value = (value << 5) | ALPHABET.index(ch)
    return value


def new_id(now_ms: int | None = None) -> str:
    """Mint a new ID for the current time (or ``now_ms``)."""
    global _last_ms, _last_rand
    ms = int(time.time() * 1000) if now_ms is None else now_ms
    with _lock:
        if ms <= _last_ms:
            # Same (or earlier, after a clock step back) millisecond: keep the
            # process-local order by counting up from the last random part.
            ms = _last_ms
            rand = _last_rand + 1
            if rand >= 1 << _RANDOM_BITS:
                ms += 1
                rand = int.from_bytes(os.urandom(9), "big") >> (72 - _RANDOM_BITS + 1)
        else:
            # Leave headroom so the within-millisecond counter never overflows.
            rand = int.from_bytes(os.urandom(9), "big") >> (72 - _RANDOM_BITS + 1)
        _last_ms, _last_rand = ms, rand
    return _encode(ms, _TIME_CHARS) + _encode(rand, _RANDOM_CHARS)


def is_id(text: object) -> TypeGuard[str]:
    """Whether ``text`` is a record ID (a str, so callers may use it as one)."""
    return isinstance(text, str) and bool(ID_PATTERN.match(text))


def id_time(record_id: str) -> _dt.datetime:
    """The creation time encoded in an ID (UTC)."""
    ms = _decode(record_id[:_TIME_CHARS])
    return _dt.datetime.fromtimestamp(ms / 1000, tz=_dt.UTC)
