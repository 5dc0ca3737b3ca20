"""Shared plumbing of the CLI: the root group, ``--json`` and error rendering.

The command modules import only click and light parts of gitmail at the top;
git, search and the server load inside the commands that use them, so
``gitmail --help`` and ``gitmail CMD --help`` start fast (a test keeps it so).
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from gitmail.model.errors import GitmailError

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
    with ``--json``, ``text`` otherwise. A returned exit code may follow.
    """

    def decorate(fn: Callable[..., Any]) -> click.Command:
        @click.option("--json", "as_json", is_flag=True, help="Print one JSON document instead of text.")
        @click.pass_obj
        @functools.wraps(fn)
        def wrapper(obj: Context, as_json: bool, **kwargs: Any) -> None:
            try:
                outcome = fn(obj, **kwargs)
            except GitmailError as exc:
                if as_json:
                    click.echo(json.dumps({"error": exc.to_dict()}, indent=2))
                else:
                    click.echo(f"error [{exc.code}]: {exc.message}", err=True)
                sys.exit(2)
            data, text, *rest = outcome
            click.echo(json.dumps(data, indent=2, default=str) if as_json else text)
            if rest and rest[0]:
                sys.exit(rest[0])

        return group.command(**settings)(wrapper)

    return decorate


def run() -> None:
    cli(prog_name="gitmail")
