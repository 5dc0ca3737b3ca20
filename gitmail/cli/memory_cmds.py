"""Memory commands: the project's memory folders kept in its archive (``gitmail memory list|show|write|rm``).

Thin calls into :class:`gitmail.mail.facade.Mail`, as ``write_memory``
makes them. The shell user owns the store, so no token is asked for; a
write or a removal still names the agent holding ``manager@*`` it is made
as (``--as``), as a hand commit names one in ``written_by``, and the same
rules hold: an agent driven from a seat passes ``--seat``.
"""

from __future__ import annotations

import click

from ._app import Context, cli, command
from .mail_cmds import body_text, table

_AS = click.option("--as", "agent", required=True, help="The agent holding manager@* the change is made as.")
_SEAT = click.option("--seat", default=None, help="The seat token, if a session holds that agent's seat.")
_REASON = click.option("--reason", default=None, help="Why, for the commit message.")


@cli.group(name="memory")
def memory_group() -> None:
    """The project's memory folders in its archive (loaded as archive:NAME): list, show, write or remove a file."""


@command(group=memory_group, name="list")
@click.argument("project")
def list_memory(ctx: Context, project: str) -> tuple[object, str]:
    """List the memory folders of PROJECT's archive with their files, and the folders new agents load."""
    shown = ctx.mail.memory_overview(project)
    rows = [{"folder": folder.folder, "file": doc.file, "size": doc.size, "written_by": doc.written_by,
             "updated_at": doc.updated_at} for folder in shown.folders for doc in folder.files]
    text = table(rows, [("folder", "FOLDER"), ("file", "FILE"), ("size", "BYTES"), ("written_by", "BY"),
                        ("updated_at", "AT")], "no memory folder in this project's archive")
    loaded = ", ".join(shown.defaults.load_memory_and_skills) or "none"
    return shown, f"{text}\nnew agents load: {loaded}"


@command(group=memory_group, name="show")
@click.argument("project")
@click.argument("name")
@click.argument("file")
def show(ctx: Context, project: str, name: str, file: str) -> tuple[object, str]:
    """Print FILE (AGENTS.md, CLAUDE.md or skills/S/SKILL.md) of the memory folder NAME of PROJECT."""
    doc = ctx.mail.read_memory(project, folder=name, file=file)
    return doc, f"{doc.file}: {doc.size} bytes, sha256 {doc.sha256}, by {doc.written_by} at {doc.updated_at}\n\n" \
        + doc.text


@command(group=memory_group, name="write")
@click.argument("project")
@click.argument("name")
@click.argument("file")
@_AS
@click.option("--text", default=None, help="The file's whole text (or use --text-file / standard input).")
@click.option("--text-file", default=None, help="Read the text from this file ('-' for standard input).")
@_REASON
@_SEAT
def write(ctx: Context, project: str, name: str, file: str, agent: str, text: str | None, text_file: str | None,
          reason: str | None, seat: str | None) -> tuple[object, str]:
    """Write FILE of the memory folder NAME of PROJECT (made by its first file) as the manager --as."""
    done = ctx.mail.write_memory(project, agent, folder=name, file=file, text=body_text(text, text_file, what="text"),
                                 seat=seat, reason=reason)
    said = "wrote" if done.changed else "unchanged:"
    return done, f"{said} {done.folder} {done.file} ({done.size} bytes, sha256 {done.sha256})"


@command(group=memory_group, name="rm")
@click.argument("project")
@click.argument("name")
@click.argument("file")
@_AS
@_REASON
@_SEAT
def remove(ctx: Context, project: str, name: str, file: str, agent: str, reason: str | None,
           seat: str | None) -> tuple[object, str]:
    """Remove FILE of the memory folder NAME of PROJECT as the manager --as; its text stays in the history."""
    done = ctx.mail.write_memory(project, agent, folder=name, file=file, remove=True, seat=seat, reason=reason)
    return done, f"removed {done.folder} {done.file} (it held {done.size} bytes, sha256 {done.sha256})"
