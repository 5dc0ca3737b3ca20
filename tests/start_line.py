"""A start line for processes that race: each says it is there, then waits for the others.

A contender calls :func:`arrive` right before its racing step; it returns
once every contender has arrived, with how many it saw, which the contender
reports to the test. A test that sees every contender report all of them
knows that none started before the others were ready.
"""

from __future__ import annotations

import os
import time


def arrive(folder: str, name: str, contenders: int, timeout: float = 120.0) -> int:
    """Mark ``name`` ready in ``folder`` and wait until ``contenders`` are; returns how many were."""
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, f"{name}.ready"), "w"):
        pass
    deadline = time.monotonic() + timeout
    while (ready := sum(entry.endswith(".ready") for entry in os.listdir(folder))) < contenders:
        if time.monotonic() > deadline:
            raise SystemExit(f"only {ready} of {contenders} contenders reached the start line")
        time.sleep(0.0005)
    return ready
