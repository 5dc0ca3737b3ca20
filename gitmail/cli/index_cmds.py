"""Commands about derived state: rebuilding the search index and cache."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import click

from ._app import Context, command

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID


@command(name="reindex")
@click.argument("project", required=False)
@click.option("--quiet", is_flag=True, help="No progress bar.")
def reindex(ctx: Context, project: str | None, quiet: bool) -> tuple[object, str]:
    """Rebuild the search index and cache of PROJECT (a human key or slug), or of every project.

    Derived state is rebuilt from the archive alone; searches keep answering
    from the old index until the new one is swapped in. Local sequence numbers
    of messages already seen are kept.
    """
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from gitmail.index import indexer_for

    store = ctx.store
    slugs = [store.resolve(project)] if project else store.slugs()
    if project:
        store.archive(project)  # NOT_FOUND for an unknown project, before any work
    indexer = indexer_for(store)
    counts: dict[str, int] = {}
    started = time.monotonic()
    console = Console(stderr=True)
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, disable=quiet, transient=False) as bar:
        for slug in slugs:
            records = bar.add_task(f"{slug}: records", total=None)
            messages = bar.add_task(f"{slug}: search", total=None)
            counts[slug] = indexer.project(slug).reindex(progress=_advance(bar, messages),
                                                         records_progress=_advance(bar, records))
            bar.update(records, total=bar.tasks[records].total or 0, completed=bar.tasks[records].total or 0)
    seconds = round(time.monotonic() - started, 2)
    total = sum(counts.values())
    lines = [f"{slug}: {count} message(s) indexed" for slug, count in counts.items()]
    lines.append(f"{total} message(s) in {len(counts)} project(s) indexed in {seconds} s")
    return {"projects": counts, "messages": total, "seconds": seconds}, "\n".join(lines)


def _advance(bar: Progress, task: TaskID) -> Callable[[int, int], None]:
    """A progress callback that moves one task of the bar."""
    return lambda done, total: bar.update(task, completed=done, total=total)
