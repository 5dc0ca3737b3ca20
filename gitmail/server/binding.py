"""Where the server listens, and the rule that guards it.

Kept free of heavy imports so the CLI can check its options quickly.
"""

from __future__ import annotations

from gitmail.model.errors import UNAUTHORIZED, GitmailError

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
DEFAULT_PATH = "/mcp"
TOKEN_ENV = "GITMAIL_TOKEN"


def is_loopback(host: str) -> bool:
    """Whether ``host`` names only this machine (``127.0.0.0/8``, ``::1``, ``localhost``)."""
    if host.strip().lower() == "localhost":
        return True
    try:
        import ipaddress  # here, not at the top: the CLI imports this module for its --help

        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind(host: str, token: str | None) -> None:
    """Refuse to listen beyond loopback without a bearer token."""
    if not token and not is_loopback(host):
        raise GitmailError(
            UNAUTHORIZED,
            f"refusing to listen on {host} without a bearer token: set {TOKEN_ENV} to a long random "
            "secret (for example `export GITMAIL_TOKEN=$(openssl rand -hex 32)`) and give it to "
            "your MCP clients, or listen on 127.0.0.1",
            {"host": host},
        )
