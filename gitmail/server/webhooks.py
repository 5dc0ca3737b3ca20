"""Webhook wake-ups: where they may go, how they are signed, and their delivery off the request path.

**Targets.** A webhook URL (``http`` or ``https``) must name a loopback
host (``localhost``, ``127.0.0.0/8``, ``::1``) or a host the operator lists
in :data:`HOSTS_ENV` (``GITMAIL_WAKE_HOSTS``, names or addresses separated by
commas, compared exactly and without regard to case). Anything else is
``WAKE_TARGET_REFUSED``: a server must not become a way for its agents to
make requests into the operator's network. Redirects are never followed.

**Signing** follows Standard Webhooks: the secret is ``whsec_`` and 32
random bytes in base64; each POST carries ``webhook-id`` (the wake-up's ID),
``webhook-timestamp`` (Unix seconds) and ``webhook-signature``, which is
``v1,`` and the base64 HMAC-SHA256, under the secret's bytes, of
``{id}.{timestamp}.{body}``.

**Delivery** happens in worker threads, never in the request that caused
it, from a bounded queue (:data:`~gitmail.model.limits.WAKE_QUEUE`; a
wake-up past it is dropped and logged). Its ID is claimed in the local state
before the first attempt, so it is delivered at most once: never again after
a restart, nor by a second server on the same store. A 2xx answer
delivers it. Anything else (another status, a refused connection, a
timeout of :data:`~gitmail.model.limits.WAKE_TIMEOUT_S`) is retried after
a pause that doubles from ``GITMAIL_WAKE_RETRY_S`` (default 1 s), up to
:data:`~gitmail.model.limits.WAKE_ATTEMPTS` attempts in all; then it is
dropped and logged. The pauses go through an injected sleeper and the
timestamps through an injected clock, so tests follow the schedule without
waiting for it.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import http.client
import ipaddress
import logging
import os
import queue
import secrets
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from gitmail.model.errors import WAKE_TARGET_REFUSED, GitmailError, invalid
from gitmail.model.limits import WAKE_ATTEMPTS, WAKE_QUEUE, WAKE_RETRY_S, WAKE_TIMEOUT_S

from .wakestate import Hook, WakeState

HOSTS_ENV = "GITMAIL_WAKE_HOSTS"
RETRY_ENV = "GITMAIL_WAKE_RETRY_S"
MAX_URL = 2048
WORKERS = 2

_log = logging.getLogger("gitmail.server")

Post = Callable[[str, bytes, dict[str, str], float], int]


def allowed_hosts(env: Mapping[str, str] | None = None) -> frozenset[str]:
    """The hosts the operator allows beside loopback (:data:`HOSTS_ENV`), lower-cased."""
    raw = (os.environ if env is None else env).get(HOSTS_ENV, "")
    return frozenset(part.strip().lower().strip("[]") for part in raw.split(",") if part.strip())


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_target(url: object, allowed: frozenset[str]) -> str:
    """``url`` if a webhook may be POSTed there; INVALID_ARGUMENT or WAKE_TARGET_REFUSED saying why not."""
    if not isinstance(url, str) or not url or len(url) > MAX_URL:
        raise invalid(f"webhook_url must be an http(s) URL of at most {MAX_URL} characters", field="webhook_url")
    try:
        parts = urlsplit(url)
        host, _ = (parts.hostname or "").lower(), parts.port
    except ValueError:
        raise invalid(f"webhook_url {url!r} is not a URL such as http://127.0.0.1:8080/wake",
                      field="webhook_url") from None
    if parts.scheme not in ("http", "https") or not host:
        raise invalid(f"webhook_url {url!r} must start with http:// or https:// and name a host",
                      field="webhook_url")
    if not _loopback(host) and host not in allowed:
        raise GitmailError(WAKE_TARGET_REFUSED, f"this server POSTs wake-ups only to loopback hosts and to the hosts "
                           f"its operator allows in {HOSTS_ENV}, and {host!r} is neither: give a loopback URL, or "
                           f"ask the operator to add {host!r} to {HOSTS_ENV}",
                           {"field": "webhook_url", "host": host, "setting": HOSTS_ENV})
    return url


def new_secret() -> str:
    """A fresh signing secret in the Standard Webhooks form (``whsec_`` and base64 of 32 random bytes)."""
    return "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode("ascii")


def signature(secret: str, event_id: str, timestamp: int, body: bytes) -> str:
    """The ``webhook-signature`` header of one POST (Standard Webhooks, version 1)."""
    key = base64.b64decode(secret.removeprefix("whsec_"))
    mac = hmac.new(key, f"{event_id}.{timestamp}.".encode() + body, hashlib.sha256).digest()
    return "v1," + base64.b64encode(mac).decode("ascii")


def http_post(url: str, body: bytes, headers: dict[str, str], timeout: float) -> int:
    """POST ``body`` to ``url`` and answer the status (no redirects followed); OSError when it cannot."""
    parts = urlsplit(url)
    kind = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    connection = kind(parts.hostname or "", parts.port, timeout=timeout)
    try:
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        connection.request("POST", target, body=body, headers=headers)
        response = connection.getresponse()
        response.read(65536)
        return response.status
    finally:
        connection.close()


@dataclass(frozen=True)
class Delivery:
    """One wake-up on its way to one hook."""

    event_id: str
    body: bytes
    hook: Hook


@dataclass
class Deliverer:
    """The delivery workers of one server (see the module docs)."""

    state: WakeState
    retry_s: float = WAKE_RETRY_S
    attempts: int = WAKE_ATTEMPTS
    timeout: float = WAKE_TIMEOUT_S
    clock: Callable[[], float] = time.time
    sleep: Callable[[float], None] = time.sleep
    post: Post = http_post
    _queue: queue.Queue[Delivery | None] = field(default_factory=lambda: queue.Queue(WAKE_QUEUE))
    _threads: list[threading.Thread] = field(default_factory=list)

    @staticmethod
    def retry_from_env(env: Mapping[str, str] | None = None) -> float:
        """The first pause between attempts, ``GITMAIL_WAKE_RETRY_S`` (INVALID_ARGUMENT if unusable)."""
        raw = (os.environ if env is None else env).get(RETRY_ENV, "").strip()
        try:
            value = float(raw) if raw else WAKE_RETRY_S
        except ValueError:
            value = -1.0
        if not 0 <= value <= 3600:
            raise invalid(f"{RETRY_ENV} must be a number of seconds from 0 to 3600; got {raw!r}", field=RETRY_ENV)
        return value

    def start(self) -> Deliverer:
        for n in range(WORKERS):
            thread = threading.Thread(target=self._work, name=f"gitmail-webhook-{n}", daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def stop(self) -> None:
        for _ in self._threads:
            self._queue.put(None)
        for thread in self._threads:
            thread.join(timeout=self.timeout + 1)
        self._threads.clear()

    def submit(self, delivery: Delivery) -> bool:
        """Queue one delivery; False when it was taken already (here or by another server on the store) or the
        queue is full."""
        if self._queue.full():
            _log.warning("wake-up %s dropped: %d deliveries already wait", delivery.event_id, WAKE_QUEUE)
            return False
        if not self.state.claim(delivery.event_id):
            return False
        try:
            self._queue.put_nowait(delivery)
        except queue.Full:
            _log.warning("wake-up %s dropped: %d deliveries already wait", delivery.event_id, WAKE_QUEUE)
            return False
        return True

    def _work(self) -> None:
        while (delivery := self._queue.get()) is not None:
            try:
                self.deliver(delivery)
            except Exception:  # noqa: BLE001 - one delivery's failure must not end the worker
                _log.exception("delivering wake-up %s failed", delivery.event_id)

    def deliver(self, delivery: Delivery) -> bool:
        """Attempt ``delivery`` until a 2xx answer or the last attempt; whether it was delivered."""
        for attempt in range(self.attempts):
            if attempt:
                self.sleep(self.retry_s * 2 ** (attempt - 1))
            stamp = int(self.clock())
            headers = {"content-type": "application/json", "webhook-id": delivery.event_id,
                       "webhook-timestamp": str(stamp), "user-agent": "gitmail-wake",
                       "webhook-signature": signature(delivery.hook.secret, delivery.event_id, stamp, delivery.body)}
            try:
                status = self.post(delivery.hook.url, delivery.body, headers, self.timeout)
            except OSError as exc:
                status, why = 0, str(exc)
            else:
                why = f"HTTP {status}"
            if 200 <= status < 300:
                return True
            _log.info("wake-up %s to %s: attempt %d of %d failed (%s)", delivery.event_id, delivery.hook.agent,
                      attempt + 1, self.attempts, why)
        _log.warning("wake-up %s to %s dropped after %d attempts", delivery.event_id, delivery.hook.agent,
                     self.attempts)
        return False
