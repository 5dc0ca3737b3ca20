"""A writer run as its own OS process by the concurrency tests.

Usage: python -m tests.writer_process ARCHIVE_PATH NAME COUNT [START_LINE CONTENDERS]
Writes COUNT messages from agent NAME, printing each message id on its own
line as soon as the write has returned (so the parent knows what was
acknowledged), then prints "retries N". With START_LINE, it first waits
there for CONTENDERS writers (see tests/start_line.py) and prints
"ready N" before its first write.
"""

from __future__ import annotations

import sys

from gitmail import Archive, Change, HybridClock, Message
from gitmail.model.records import inbox_path, outbox_path

from .start_line import arrive


def main() -> None:
    path, name, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    archive = Archive(path)
    clock = HybridClock(name)
    if len(sys.argv) > 4:
        archive.snapshot()  # opened before the start
        sys.stdout.write(f"ready {arrive(sys.argv[4], name, int(sys.argv[5]))}\n")
    for i in range(count):
        message = Message(id=clock.new_id(), thread_id=f"{name}-thread", sender=name, subject=f"{name} #{i}",
                          created_ts=clock.now_ts(), to=["Hub"], body=f"message {i} from {name}\n")

        def send(snap, message=message):
            return (Change(f"{name} sent {message.id}", author=name)
                    .put_record(message)
                    .put(inbox_path("Hub", message.id), message)
                    .put(outbox_path(name, message.id), message))

        archive.transact(send)
        sys.stdout.write(message.id + "\n")
        sys.stdout.flush()
    sys.stdout.write(f"retries {archive.retries}\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
