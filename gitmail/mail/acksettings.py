"""The settings of overdue-acknowledgement scanning and escalation, read from the environment.

``gitmail serve`` reads them once at start; a value it cannot use stops it
with INVALID_ARGUMENT naming the variable. Every name starts with
``GITMAIL_ACK_``:

- ``GITMAIL_ACK_TTL_ENABLED`` (``0``): scan for overdue acknowledgements while serving;
- ``GITMAIL_ACK_TTL_SECONDS`` (``1800``): how long a recipient has to acknowledge
  (also the default age of the ack-overdue view);
- ``GITMAIL_ACK_TTL_SCAN_INTERVAL_SECONDS`` (``60``): time between scans;
- ``GITMAIL_ACK_ESCALATION_ENABLED`` (``0``): record an escalation for each overdue acknowledgement;
- ``GITMAIL_ACK_ESCALATION_MODE`` (``log``): ``log`` only records and logs it; ``claim``
  also files a reservation for the operations agent and sends it a notice;
- ``GITMAIL_ACK_ESCALATION_CLAIM_TTL_SECONDS`` (``3600``): how long that reservation lasts;
- ``GITMAIL_ACK_ESCALATION_CLAIM_EXCLUSIVE`` (``0``): whether it is exclusive;
- ``GITMAIL_ACK_ESCALATION_CLAIM_HOLDER_NAME``: the operations agent (needed for ``claim``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from gitmail.model.errors import invalid
from gitmail.model.limits import MAX_TTL, MIN_TTL
from gitmail.model.names import AGENT_NAME_RE
from gitmail.model.results import Result, result

ESCALATION_MODES = ("log", "claim")
PREFIX = "GITMAIL_ACK_"
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("", "0", "false", "no", "off")


@result
class AckSettings(Result):
    """How overdue acknowledgements are found and escalated (see the module's list of variables).

    The settings are their own answer, too: ``health_check`` shows them as they are.
    """

    enabled: bool = False
    ttl_seconds: int = 1800
    scan_interval_seconds: int = 60
    escalation_enabled: bool = False
    escalation_mode: str = "log"
    claim_ttl_seconds: int = 3600
    claim_exclusive: bool = False
    claim_holder: str | None = None

    def __post_init__(self) -> None:
        if not 60 <= self.ttl_seconds <= MAX_TTL:
            raise invalid(f"{PREFIX}TTL_SECONDS must be from 60 to {MAX_TTL}; got {self.ttl_seconds}",
                          field=f"{PREFIX}TTL_SECONDS")
        if not 1 <= self.scan_interval_seconds <= 86400:
            raise invalid(f"{PREFIX}TTL_SCAN_INTERVAL_SECONDS must be from 1 to 86400; "
                          f"got {self.scan_interval_seconds}", field=f"{PREFIX}TTL_SCAN_INTERVAL_SECONDS")
        if self.escalation_mode not in ESCALATION_MODES:
            raise invalid(f"{PREFIX}ESCALATION_MODE must be log or claim; got {self.escalation_mode!r}",
                          field=f"{PREFIX}ESCALATION_MODE")
        if not MIN_TTL <= self.claim_ttl_seconds <= MAX_TTL:
            raise invalid(f"{PREFIX}ESCALATION_CLAIM_TTL_SECONDS must be from {MIN_TTL} to {MAX_TTL}; "
                          f"got {self.claim_ttl_seconds}", field=f"{PREFIX}ESCALATION_CLAIM_TTL_SECONDS")
        if self.claim_holder is not None and not AGENT_NAME_RE.match(self.claim_holder):
            raise invalid(f"{PREFIX}ESCALATION_CLAIM_HOLDER_NAME must be an agent name; got {self.claim_holder!r}",
                          field=f"{PREFIX}ESCALATION_CLAIM_HOLDER_NAME")
        if self.escalation_enabled and self.escalation_mode == "claim" and not self.claim_holder:
            raise invalid(f"{PREFIX}ESCALATION_MODE=claim needs {PREFIX}ESCALATION_CLAIM_HOLDER_NAME: the agent "
                          "that takes the claims (register it in each project)",
                          field=f"{PREFIX}ESCALATION_CLAIM_HOLDER_NAME")
        super().__post_init__()

    @property
    def claims(self) -> bool:
        """Whether an escalation files a claim and a notice (not only a record)."""
        return self.escalation_enabled and self.escalation_mode == "claim"

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> AckSettings:
        """The settings the ``GITMAIL_ACK_*`` variables of ``env`` (default: this process's) give."""
        env = os.environ if env is None else env
        return cls(enabled=_flag(env, "TTL_ENABLED"), ttl_seconds=_int(env, "TTL_SECONDS", 1800),
                   scan_interval_seconds=_int(env, "TTL_SCAN_INTERVAL_SECONDS", 60),
                   escalation_enabled=_flag(env, "ESCALATION_ENABLED"),
                   escalation_mode=env.get(PREFIX + "ESCALATION_MODE", "log").strip().lower() or "log",
                   claim_ttl_seconds=_int(env, "ESCALATION_CLAIM_TTL_SECONDS", 3600),
                   claim_exclusive=_flag(env, "ESCALATION_CLAIM_EXCLUSIVE"),
                   claim_holder=env.get(PREFIX + "ESCALATION_CLAIM_HOLDER_NAME", "").strip() or None)


def _flag(env: Mapping[str, str], name: str) -> bool:
    value = env.get(PREFIX + name, "").strip().lower()
    if value not in _TRUE + _FALSE:
        raise invalid(f"{PREFIX}{name} must be 1 or 0 (true or false); got {value!r}", field=PREFIX + name)
    return value in _TRUE


def _int(env: Mapping[str, str], name: str, default: int) -> int:
    value = env.get(PREFIX + name, "").strip()
    if not value:
        return default
    try:
        return int(value)
    except ValueError:
        raise invalid(f"{PREFIX}{name} must be a whole number of seconds; got {value!r}",
                      field=PREFIX + name) from None
