"""File commands: list a project's files, describe one, and save one's bytes (``gitmail files list|show|get``).

Thin calls into :class:`gitmail.mail.facade.Mail`, as the files tools make
them; the shell user owns the store, so no agent token is asked for. A
file's contents are data: ``get`` writes them to a file and never prints
them.
"""

from __future__ import annotations

import hashlib
import os

import click

from gitmail.model.errors import ALREADY_EXISTS, GitmailError

from ._app import Context, cli, command
from .mail_cmds import table


@cli.group(name="files")
def files_group() -> None:
    """A project's files: list them (newest first), show one with the messages carrying it, save one's bytes."""


@command(group=files_group, name="list")
@click.argument("project")
@click.option("--limit", type=click.IntRange(1, 500), default=100, show_default=True, help="Files per page.")
@click.option("--cursor", default=None, help="The next_cursor a page printed: the files after it.")
def list_files(ctx: Context, project: str, limit: int, cursor: str | None) -> tuple[object, str]:
    """List the files of PROJECT, newest upload first, a page at a time."""
    listed = ctx.mail.list_files(project, limit=limit, cursor=cursor)
    text = table(listed.files, [("file_id", "SHA-256"), ("size", "BYTES"), ("name", "NAME"),
                                ("uploaded_by", "BY"), ("uploaded_at", "AT")], "no files in this project")
    if listed.next_cursor:
        text += f"\nmore: gitmail files list {project} --cursor {listed.next_cursor}"
    return listed, text


@command(group=files_group, name="show")
@click.argument("project")
@click.argument("file_id")
def show(ctx: Context, project: str, file_id: str) -> tuple[object, str]:
    """Describe file FILE_ID of PROJECT: name, size, SHA-256, media type, uploader and the messages carrying it."""
    described = ctx.mail.describe_file(project, file_id)
    file = described.file
    lines = [f"{file.name} ({file.media_type}), {file.size} bytes", f"sha256 {file.sha256}",
             f"uploaded by {file.uploaded_by} at {file.uploaded_at}"]
    lines += [f"in {ref.message_id} from {ref.sender}: {ref.subject}" for ref in described.referenced_by]
    if described.more_references:
        lines.append("... and more messages")
    return described, "\n".join(lines)


@command(group=files_group, name="get")
@click.argument("project")
@click.argument("file_id")
@click.option("-o", "--output", type=click.Path(dir_okay=False), default=None,
              help="Where to save it (default: its name in the current folder); an existing file is never replaced.")
def get(ctx: Context, project: str, file_id: str, output: str | None) -> tuple[object, str]:
    """Save the bytes of file FILE_ID of PROJECT, checked against its SHA-256, and print where, size and hash."""
    name, _, data = ctx.mail.read_file(project, file_id)
    path = output or os.path.basename(name) or file_id
    try:
        with open(path, "xb") as handle:
            handle.write(data)
    except FileExistsError:
        raise GitmailError(ALREADY_EXISTS, f"{path} exists and is kept: name another with --output",
                           {"path": path}) from None
    saved = {"path": os.path.abspath(path), "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    return saved, f"saved {saved['path']} ({saved['size']} bytes, sha256 {saved['sha256']})"
