"""Record identifiers that need no coordination between machines.

An ID is 23 lowercase Crockford base32 characters: 10 for the creation time in
milliseconds (so IDs sort by time and a path can be derived from one) and 13 for
65 random bits (so two machines offline never mint the same ID). IDs minted by
one :class:`IdMinter` (each clock has its own) sort in minting order, even
within one millisecond.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
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

def _encode(value: int, width: int) -> str:
    chars = []
    for _ in range(width):
        chars.append(ALPHABET[value & 31])
        value >>= 5
    return "".join(reversed(chars))


_DIGITS = {ch: i for i, ch in enumerate(ALPHABET)}  # a table: every record's path decodes its ID's time


def _decode(text: str) -> int:
    value = 0
    for ch in text:
        digit = _DIGITS.get(ch)
        if digit is None:
            raise ValueError(f"{ch!r} is not a character of a record ID")
        value = (value << 5) | digit
    return value


class IdMinter:
    """Mints IDs in order: one started later in the same (or an earlier) millisecond sorts later."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last_ms = -1
        self._last_rand = 0

    def mint(self, ms: int) -> str:
        """A new ID for the time ``ms`` (milliseconds since the epoch)."""
        with self._lock:
            if ms <= self._last_ms:
                # Same (or earlier, after a clock step back) millisecond: keep the
                # minting order by counting up from the last random part.
                ms = self._last_ms
                rand = self._last_rand + 1
                if rand >= 1 << _RANDOM_BITS:
                    ms += 1
                    rand = _fresh_random()
            else:
                rand = _fresh_random()
            self._last_ms, self._last_rand = ms, rand
        return _encode(ms, _TIME_CHARS) + _encode(rand, _RANDOM_CHARS)


def _fresh_random() -> int:
    # Leave headroom so the within-millisecond counter never overflows.
    return int.from_bytes(os.urandom(9), "big") >> (72 - _RANDOM_BITS + 1)


_minter = IdMinter()


def new_id(now_ms: int | None = None) -> str:
    """Mint a new ID for the system's current time (or ``now_ms``); a store's clock mints its own."""
    return _minter.mint(int(time.time() * 1000) if now_ms is None else now_ms)


def derived_id(ms: int, seed: bytes) -> str:
    """An ID that every machine computes alike from the same facts: the time ``ms`` and bits of ``seed``'s hash.

    For a record that several machines may each decide to write on their
    own (a notice about something they all saw): they write one file.
    """
    rand = int.from_bytes(hashlib.sha256(seed).digest()[:9], "big") >> (72 - _RANDOM_BITS)
    return _encode(ms, _TIME_CHARS) + _encode(rand, _RANDOM_CHARS)


def is_id(text: object) -> TypeGuard[str]:
    """Whether ``text`` is a record ID (a str, so callers may use it as one)."""
    return isinstance(text, str) and bool(ID_PATTERN.match(text))


def id_ms(record_id: str) -> int:
    """The creation time encoded in an ID, in milliseconds since 1970 (UTC)."""
    return _decode(record_id[:_TIME_CHARS])


def id_time(record_id: str) -> _dt.datetime:
    """The creation time encoded in an ID (UTC)."""
    return _dt.datetime.fromtimestamp(id_ms(record_id) / 1000, tz=_dt.UTC)


def first_id_at(moment: _dt.datetime) -> str:
    """The smallest ID minted at ``moment`` or later: IDs compare with it as their times do."""
    return _encode(int(moment.timestamp() * 1000), _TIME_CHARS) + ALPHABET[0] * _RANDOM_CHARS
