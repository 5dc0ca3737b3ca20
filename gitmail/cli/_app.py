"""Shared plumbing of the CLI: the root group, ``--json`` and error rendering.

The command modules import only click and light parts of gitmail at the top;
git, search and the server load inside the commands that use them, so
``gitmail --help`` and ``gitmail CMD --help`` start fast (a test keeps it so).
"""

from __future__ import annotations

import functools
import json
import re
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from gitmail.model.controls import printable
from gitmail.model.errors import GitmailError, resource_exhausted

if TYPE_CHECKING:
    from gitmail.mail.facade import Mail
    from gitmail.storage.store import Store


class Context:
    """What every command gets: the store folder, and the store and facade opened on first use."""

    def __init__(self, home: str | None):
        self.home = home
        self._store: Store | None = None
        self._mail: Mail | None = None

    @property
    def store(self) -> Store:
        if self._store is None:
            from gitmail.storage.store import Store

            self._store = Store(self.home)
        return self._store

    @property
    def mail(self) -> Mail:
        if self._mail is None:
            from gitmail.mail.facade import Mail

            self._mail = Mail(self.store)
        return self._mail

    @property
    def mail_serving(self) -> Mail:
        """The facade as a server runs it: with this environment's settings (``GITMAIL_ACK_*``)."""
        from gitmail.mail.facade import Mail

        return Mail.serving(self.store)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--home", envvar="GITMAIL_HOME", type=click.Path(file_okay=False),
              help="Store folder holding the project archives (default: $GITMAIL_HOME or ~/.gitmail).")
@click.version_option(package_name="gitmail")
@click.pass_context
def cli(ctx: click.Context, home: str | None) -> None:
    """gitmail: mail and coordination for coding agents, stored in git."""
    ctx.obj = Context(home)


def command(group: click.Group = cli, **settings: Any) -> Callable[[Callable[..., Any]], click.Command]:
    """Register a command that takes ``--json`` and returns what to print.

    The wrapped function returns ``(data, text)``: ``data`` is printed as JSON
    with ``--json``, ``text`` otherwise, with control characters shown as
    ``\\xNN`` (a subject cannot drive the reader's terminal). A returned exit
    code may follow.
    """

    def decorate(fn: Callable[..., Any]) -> click.Command:
        @click.option("--json", "as_json", is_flag=True, help="Print one JSON document instead of text.")
        @click.pass_obj
        @functools.wraps(fn)
        def wrapper(obj: Context, as_json: bool, **kwargs: Any) -> None:
            try:
                try:
                    outcome = fn(obj, **kwargs)
                except Exception as failure:  # the OS running out of something is reported like any error
                    exhausted = resource_exhausted(failure)
                    if exhausted is None:
                        raise
                    raise exhausted from failure
            except GitmailError as exc:
                shown = dict(exc.to_dict(), message=for_the_shell(exc.message))
                if as_json:
                    click.echo(json.dumps({"error": shown}, indent=2))
                else:
                    click.echo(f"error [{exc.code}]: {printable(shown['message'], multiline=False)}", err=True)
                sys.exit(2)
            data, text, *rest = outcome
            # Text for a terminal never carries control characters from the archive (JSON escapes its own).
            click.echo(json.dumps(data, indent=2, default=str) if as_json else printable(text))
            if rest and rest[0]:
                sys.exit(rest[0])

        return group.command(**settings)(wrapper)

    return decorate


# The domain's advice names the MCP tools agents call; at the shell, the command that does the same.
SHELL_COMMANDS = {
    "ensure_project": "`gitmail init`",
    "register_agent": "`gitmail register`",
    "create_agent_identity": "`gitmail register`",
    "list_agents": "`gitmail agents PROJECT`",
    "send_message": "`gitmail send`",
    "reply_message": "`gitmail reply`",
    "fetch_inbox": "`gitmail inbox`",
    "catch_up": "`gitmail catch-up`",
    "read_messages": "`gitmail feed`",
    "mark_message_read": "`gitmail read --as`",
    "acknowledge_message": "`gitmail ack`",
    "search_messages": "`gitmail search`",
    "take_seat": "`gitmail seat take`",
    "renew_seat": "`gitmail seat renew`",
    "release_seat": "`gitmail seat release`",
    "write_memory": "`gitmail memory write`",
    "sleep_agent": "`gitmail sleep`",
    "wake_agent": "`gitmail wake`",
    "file_reservation_paths": "`gitmail reserve`",
    "release_file_reservations": "`gitmail release`",
    "renew_file_reservations": "`gitmail renew`",
    "list_file_reservations": "`gitmail reservations`",
    "force_release_file_reservation": "`gitmail force-release`",
    "publish_capabilities": "`gitmail capabilities --set`",
    "list_remotes": "`gitmail remote list`",
    "sync_project": "`gitmail sync`",
}
_TOOL_NAME = re.compile(r"`?\b(" + "|".join(sorted(SHELL_COMMANDS, key=len, reverse=True)) + r"|[a-z]+_[a-z_]+)\b`?")
_MCP_ONLY = frozenset({"request_contact", "respond_contact", "list_contacts", "set_contact_policy", "whois",
                       "retire_agent", "unretire_agent", "list_held", "list_window_identities", "rename_window",
                       "expire_window", "set_attachments_policy", "get_attachment", "fetch_topic",
                       "summarize_thread", "summarize_recent", "fetch_summary", "macro_start_session",
                       "macro_contact_handshake", "hard_delete_agent", "hard_delete_project", "archive_project",
                       "unarchive_project", "purge_old_messages"})


def for_the_shell(message: str) -> str:
    """Advice as a shell user can follow it: MCP tool names become the gitmail commands that do the same.

    A tool the CLI has no command for is named as an MCP tool, so the reader
    knows where it is.
    """

    def swap(match: re.Match[str]) -> str:
        name = match.group(1)
        if name in SHELL_COMMANDS:
            return SHELL_COMMANDS[name]
        if name in _MCP_ONLY:
            return f"the MCP tool {name}"
        return match.group(0)

    return _TOOL_NAME.sub(swap, message)


def run() -> None:
    cli(prog_name="gitmail")
