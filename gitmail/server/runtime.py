"""What every tool module shares: the store, the mail domain, the session bindings and the access model."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from fastmcp import Context

from gitmail.mail.facade import Mail
from gitmail.storage.store import Store

from .access import Access
from .identity import Identities
from .longpoll import LongPolls
from .wake import Wakes


@dataclass
class Listen:
    """Where the server listens, for ``health_check`` and ``config/environment``."""

    transport: str = "http"
    host: str | None = None
    port: int | None = None
    path: str = "/mcp"
    bearer: bool = False


@dataclass
class Runtime:
    store: Store
    mail: Mail
    identities: Identities
    listen: Listen = field(default_factory=Listen)
    long_polls: LongPolls = field(default_factory=LongPolls.from_env)
    started: float = field(default_factory=time.time)
    wakes: Wakes | None = None  # the server's wake channels (made at first use when the server was given none)
    access: Access = field(init=False)
    # new_session's hook into resource subscriptions: pauses the session's, returns their URIs (see push.Push.pause)
    pause_subscriptions: Callable[[Context | None], list[str]] = field(default=lambda ctx: [])

    def __post_init__(self) -> None:
        self.access = Access(self.store, self.mail, self.identities)

    def wake_channels(self) -> Wakes:
        """The server's wake channels (a server built without running them still keeps set_card's local half)."""
        if self.wakes is None:
            self.wakes = Wakes.serving(self.store, self.mail)
        return self.wakes

    def act_as(self, ctx: Context | None, project_key: str, agent_name: str, token: str | None,
               *, argument: str = "agent_token") -> None:
        """Raise UNAUTHORIZED unless the caller proved it is ``agent_name``."""
        self.identities.require(ctx, project_key, agent_name, token, argument=argument)
