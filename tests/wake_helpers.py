"""A real webhook receiver on loopback, and a reader of a server's wake stream, for the wake-up tests."""

from __future__ import annotations

import http.client
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

WATCHDOG = 60.0  # seconds: only keeps a broken build from hanging; never a budget


@dataclass
class Received:
    """One POST the receiver took: its headers and body, and the status it answered."""

    headers: dict[str, str]
    body: bytes
    status: int


@dataclass
class Receiver:
    """An HTTP server on 127.0.0.1 that answers 500 to its first ``failures`` POSTs and 204 to the rest."""

    failures: int = 0
    posts: list[Received] = field(default_factory=list)
    _changed: threading.Condition = field(default_factory=threading.Condition)

    def __post_init__(self) -> None:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the name http.server calls
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                with receiver._changed:
                    status = 500 if len(receiver.posts) < receiver.failures else 204
                    receiver.posts.append(Received({k.lower(): v for k, v in self.headers.items()}, body, status))
                    receiver._changed.notify_all()
                self.send_response(status)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/hook"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def wait_for(self, count: int) -> list[Received]:
        """The first ``count`` POSTs, once that many arrived (a watchdog fails a broken build)."""
        with self._changed:
            if not self._changed.wait_for(lambda: len(self.posts) >= count, WATCHDOG):
                raise AssertionError(f"the receiver got {len(self.posts)} POSTs, not {count}")
            return list(self.posts[:count])

    def delivered(self) -> list[Received]:
        """The POSTs answered with success."""
        with self._changed:
            return [post for post in self.posts if post.status < 300]

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


class WakeStream:
    """An open ``GET /wake/<slug>/<agent>``: read its opening line, then its events one by one."""

    def __init__(self, port: int, slug: str, agent: str, token: str, *, last_event_id: str | None = None):
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=WATCHDOG)
        headers = {"x-agent-token": token, **({"last-event-id": last_event_id} if last_event_id else {})}
        self.connection.request("GET", f"/wake/{slug}/{agent}", headers=headers)
        self.response = self.connection.getresponse()

    def opening(self) -> str:
        """The comment line the server sends once the stream listens."""
        return self.response.readline().decode().strip()

    def next_event(self) -> tuple[str, dict[str, Any]]:
        """The next event's ``id`` and its JSON (keep-alive comments skipped)."""
        fields: dict[str, str] = {}
        while True:
            line = self.response.readline().decode()
            if not line:
                raise AssertionError("the wake stream ended")
            line = line.rstrip("\n")
            if not line:
                if "data" in fields:
                    return fields["id"], json.loads(fields["data"])
                continue
            if line.startswith(":"):
                continue
            name, _, value = line.partition(": ")
            fields[name] = value

    def close(self) -> None:
        self.connection.close()
