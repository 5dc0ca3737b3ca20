"""``gitmail import``: bringing another system's store into the store's archives."""

from __future__ import annotations

import io
from typing import TYPE_CHECKING

import click

from ._app import Context, cli, command

if TYPE_CHECKING:
    from gitmail.importers.report import ImportReport


@cli.group(name="import")
def import_group() -> None:
    """Bring another mail system's store into gitmail (history, receipts, tokens and all)."""


@command(group=import_group, name="agent-mail")
@click.argument("database", type=click.Path(dir_okay=False))
@click.option("--archive", "archive_dir", type=click.Path(file_okay=False),
              help="The server's archive folder (its STORAGE_ROOT, holding projects/<slug>/): attachment bytes, "
                   "and which messages still have their file.")
@click.option("--project", help="Import only this project (its human key, or its slug on the server).")
@click.option("--dry-run", is_flag=True, help="Read everything and print what would be imported; write nothing.")
@click.option("--quiet", is_flag=True, help="No progress bar.")
def agent_mail(ctx: Context, database: str, archive_dir: str | None, project: str | None, dry_run: bool,
               quiet: bool) -> tuple[object, str, int]:
    """Import an mcp_agent_mail server's DATABASE (its SQLite file) into this store.

    Every project (or --project), with its agents and their registration
    tokens (kept as hashes: agents go on with the tokens they have), every
    message with its recipients' read and acknowledgement times and its
    attachments, contact links, reservations, products, window identities and
    summaries, committed in time order by their authors. Running it again
    imports only what is new; a run that was stopped is completed by running
    it again. Exits 1 when the summary lists problems (rows left out or
    incomplete; tables and columns it has no place for are only noted), 0 otherwise.
    """
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from gitmail.importers.agentmail import import_agent_mail

    console = Console(stderr=True)
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, disable=quiet, transient=False) as bar:
        tasks: dict[str, object] = {}

        def advance(slug: str, done: int, total: int) -> None:
            if slug not in tasks:
                tasks[slug] = bar.add_task(f"{slug}: messages", total=total)
            bar.update(tasks[slug], completed=done, total=total)  # type: ignore[arg-type]

        report = import_agent_mail(ctx.store, database, archive=archive_dir, project=project, dry_run=dry_run,
                                   progress=advance)
    return report.to_dict(), render(report), 1 if report.lost_rows() else 0


def render(report: ImportReport) -> str:
    """The summary: a table of counts per project and kind, then each problem with its examples."""
    from rich.console import Console
    from rich.table import Table

    from gitmail.importers.report import KINDS

    table = Table(title=("What would be imported" if report.dry_run else "Imported") + f" from {report.database}")
    table.add_column("project")
    for kind in KINDS:
        table.add_column(kind, justify="right")
    for project in report.projects:
        table.add_row(project.human_key, *(_cell(project.counts[kind].imported, project.counts[kind].present)
                                           for kind in KINDS))
    out = io.StringIO()
    Console(file=out, width=200, color_system=None).print(table)
    lines = [out.getvalue().rstrip(), "(new, and already in the archive in brackets)"]
    for problem in report.problems.values():
        lines.append(f"{problem.key}: {problem.count} — {problem.to_dict()['meaning']}")
        lines += [f"    {example}" for example in problem.examples]
    commits = sum(project.commits for project in report.projects)
    lines.append(f"{commits} commit(s) in {report.seconds:.1f} s ({report.cpu_seconds:.1f} s of CPU)")
    return "\n".join(lines)


def _cell(imported: int, present: int) -> str:
    return f"{imported} ({present})" if present else str(imported)
