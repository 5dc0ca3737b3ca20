"""Writing agents and messages straight through the engine, for index tests.

The layout is the one the records define: the canonical message (no bcc), an
inbox copy for every recipient and the sender's outbox copy (with bcc).
"""

from __future__ import annotations

import datetime as dt
import os
import random

from gitmail import Agent, Change, Message, new_id
from gitmail.mail.delivery import put_message
from gitmail.model.clock import HLC, format_ts
from gitmail.model.ids import ALPHABET
from gitmail.model.records import inbox_path, outbox_path

from .conftest import git


def id_at(moment: dt.datetime) -> str:
    """An ID minted at ``moment``, as another machine would have (new_id keeps this process's order)."""
    ms, rand = int(moment.timestamp() * 1000), random.getrandbits(64)
    digits = [ALPHABET[(ms >> (5 * i)) & 31] for i in reversed(range(10))]
    digits += [ALPHABET[(rand >> (5 * i)) & 31] for i in reversed(range(13))]
    return "".join(digits)


def message(sender: str, to: list[str], subject: str, body: str = "", *, cc: tuple[str, ...] = (),
            bcc: tuple[str, ...] = (), importance: str = "normal", topic: str | None = None,
            thread_id: str | None = None, when: dt.datetime | None = None) -> Message:
    moment = when or dt.datetime.now(dt.UTC)
    mid = id_at(moment) if when else new_id()
    return Message(id=mid, thread_id=thread_id or mid, sender=sender, subject=subject, created_ts=format_ts(moment),
                   to=list(to), cc=list(cc), bcc=list(bcc), importance=importance, topic=topic, body=body)


def send(archive, msg: Message) -> str:
    """Commit one message; returns the commit."""
    def fn(snap):
        change = Change(f"{msg.sender} sent {msg.id}", author=msg.sender)
        put_message(change, msg)
        return change
    return archive.transact(fn).commit


def send_many(archive, msgs: list[Message]) -> str:
    """Commit several messages in one commit."""
    def fn(snap):
        change = Change(f"{len(msgs)} messages")
        for msg in msgs:
            put_message(change, msg)
        return change
    return archive.transact(fn).commit


def register(archive, *names: str) -> str:
    stamp = format_ts(dt.datetime.fromtimestamp(archive.wall(), dt.UTC))

    def fn(snap):
        change = Change(f"register {', '.join(names)}")
        for name in names:
            change.put_record(Agent(id=new_id(), name=name, program="test", model="test", inception_ts=stamp,
                                    hlc=HLC(1, 0, "test"), token_hash="secret-hash"))
        return change
    return archive.transact(fn).commit


def hand_written(work: str, msg, recipients: list[str]) -> list[str]:
    """Write a message the way a human would: canonical file plus inbox and outbox copies."""
    data = msg.public_copy().to_bytes()
    paths = [msg.path()] + [inbox_path(name, msg.id) for name in recipients]
    for path in paths:
        os.makedirs(os.path.join(work, os.path.dirname(path)), exist_ok=True)
        with open(os.path.join(work, path), "wb") as handle:
            handle.write(data)
    out = outbox_path(msg.sender, msg.id)
    os.makedirs(os.path.join(work, os.path.dirname(out)), exist_ok=True)
    with open(os.path.join(work, out), "wb") as handle:
        handle.write(msg.to_bytes())
    return paths + [out]


def land_outside(work: str, text: str) -> None:
    """Commit in the clone ``work`` and move its archive's main there with plain git, bypassing every check.

    As an operator with a shell on the archive could (``git fetch`` and
    ``git update-ref`` run no receive hooks): the index must cope with
    whatever ``main`` holds, valid or not, so these tests bring in changes
    the archive's own push check would refuse.
    """
    git("add", "-A", cwd=work)
    git("commit", "-q", "-m", text, cwd=work)
    archive = git("config", "--get", "remote.origin.url", cwd=work).strip()
    head = git("rev-parse", "HEAD", cwd=work).strip()
    git("--git-dir", archive, "fetch", "-q", os.path.abspath(work), head)
    git("--git-dir", archive, "update-ref", "refs/heads/main", head)
