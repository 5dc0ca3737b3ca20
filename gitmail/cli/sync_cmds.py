"""Commands for sharing archives between machines: remotes, sync, hooks, the watcher."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import click

from ._app import Context, cli, command

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID


@cli.group(name="remote")
def remote() -> None:
    """Name the git remotes a project syncs with."""


@command(group=remote, name="add")
@click.argument("project")
@click.argument("name")
@click.argument("url")
def remote_add(ctx: Context, project: str, name: str, url: str) -> tuple[object, str]:
    """Add remote NAME (any URL git understands) to PROJECT; creates an empty archive if there is none."""
    from gitmail.sync.remotes import add_remote

    data = add_remote(ctx.store, project, name, url)
    return data, f"{data['project']}: remote {name} -> {url}; run `gitmail sync {project}`"


@command(group=remote, name="list")
@click.argument("project", required=False)
def remote_list(ctx: Context, project: str | None) -> tuple[object, str]:
    """List PROJECT's remotes (or those of every project) and how each is syncing.

    For each remote: its URL, the state of its syncs (ok, attention, failing,
    syncing, never), the last attempt and success, the last error, how many
    commits the local main is ahead of and behind the remote's main as last
    fetched, and how many refused changes are kept aside.
    """
    from gitmail.sync.status import remote_states, store_states

    states = remote_states(ctx.store, project) if project else store_states(ctx.store)
    lines = [_state_line(state.to_dict(), with_project=project is None) for state in states]
    return [state.to_dict() for state in states], "\n".join(lines) or "(no remotes)"


def _state_line(state: dict, *, with_project: bool) -> str:
    """One remote as a line of tab-separated columns."""
    cells = [state["project"]] if with_project else []
    cells += [state["remote"], state["url"], state["state"]]
    if state["last_success"]:
        cells.append(f"last success {state['last_success']}")
    if state["ahead"] is not None:
        cells.append(f"ahead {state['ahead']} behind {state['behind']}")
    if state["quarantined"]:
        cells.append(f"{state['quarantined']} refused change(s) kept aside")
    if state["last_error"]:
        cells.append(f"last error [{state['last_error']['code']}] {state['last_error']['message']}")
    return "\t".join(cells)


@command(group=remote, name="remove")
@click.argument("project")
@click.argument("name")
def remote_remove(ctx: Context, project: str, name: str) -> tuple[object, str]:
    """Forget remote NAME of PROJECT (nothing is deleted anywhere)."""
    from gitmail.sync.remotes import remove_remote

    remove_remote(ctx.store, project, name)
    return {"removed": name}, f"removed remote {name}"


@command(name="sync")
@click.argument("project", required=False)
@click.option("--remote", "remote_name", help="Sync with this remote only (default: every remote of the project).")
@click.option("--quiet", is_flag=True, help="No progress display.")
def sync(ctx: Context, project: str | None, remote_name: str | None, quiet: bool) -> tuple[object, str, int]:
    """Fetch, check, merge by the record rules, and push: PROJECT, or every project that has remotes.

    Each remote is synced on its own, and reported on its own: records in and
    out, conflicts (kept under conflicts/ in the archive), incoming changes
    refused by the record checks (kept aside, never applied), overlapping
    reservations. Returns once the index has taken in what came.

    Exit status: 0 every remote synced cleanly; 1 synced, with something to
    look at; 2 at least one remote failed (the others still synced).
    """
    from rich.console import Console
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from gitmail.sync.remotes import projects_with_remotes
    from gitmail.sync.syncer import sync_project

    store = ctx.store
    slugs = [store.resolve(project)] if project else projects_with_remotes(store)
    console = Console(stderr=True)
    reports = []
    with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=console,
                  transient=True, disable=quiet or not console.is_terminal) as display:
        for slug in slugs:
            task = display.add_task(f"{slug}: starting", total=None)

            def show(remote: str, step: str, slug: str = slug, task=task) -> None:
                where = f"{slug} <-> {remote}" if remote else slug
                display.update(task, description=f"{where}: {_STEPS.get(step, step)}")

            reports.append(sync_project(store, slug, remote_name, progress=show))
            display.remove_task(task)
    lines = [line for report in reports for line in report.lines()]
    if not reports:
        lines = ["no project has a remote; add one with `gitmail remote add`"]
    code = max((report.exit_code for report in reports), default=0)
    return [report.to_dict() for report in reports], "\n".join(lines), code


_STEPS = {"fetch": "fetching", "check": "checking what came", "merge": "merging", "push": "pushing",
          "index": "indexing what came"}


@command(name="clone")
@click.argument("url")
@click.option("--since", default="7d", show_default=True,
              help="The window to fetch: a number of days (7d), a first day (2026-11-01) or all.")
@click.option("--remote", "remote_name", default="hub", show_default=True, help="The name the hub gets here.")
@click.option("--quiet", is_flag=True, help="No progress display.")
def clone_cmd(ctx: Context, url: str, since: str, remote_name: str, quiet: bool) -> tuple[object, str, int]:
    """Join the project a hub holds from a recent window: history and records from the first day on.

    The hub is pinned: its URL and the commits where the fetched history
    starts are kept on this machine, and only that hub's history below them
    is trusted; every commit after them is judged as a sync judges it.
    Inbox and send work once the records are indexed; search follows, with
    its progress shown. `gitmail deepen PROJECT --since 30d|DAY|all` fetches
    older history and records later. Exit status as for sync.
    """
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from gitmail.sync.join import clone

    console = Console(stderr=True)
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, disable=quiet or not console.is_terminal) as bar:
        step = bar.add_task(f"joining from {url}", total=None)
        records = bar.add_task("index: records", total=None, visible=False)
        search = bar.add_task("index: search", total=None, visible=False)
        def show(remote: str, name: str) -> None:
            bar.update(step, description=f"{remote}: {_STEPS.get(name, name)}")

        joined = clone(ctx.store, url, since=since, remote=remote_name, progress=show,
                       records_progress=_counter(bar, records), search_progress=_counter(bar, search))
    lines = [f"joined {joined.project} from {url} as remote {remote_name}: {joined.commits} commit(s) since "
             f"{joined.since}, {joined.messages_indexed} message(s) indexed in {joined.seconds} s"]
    if joined.boundary:
        lines.append(f"  pinned hub {url}: history below {', '.join(c[:12] for c in joined.boundary)} is trusted "
                     "as that hub's")
    if joined.partial:
        lines.append(f"  {joined.files_fetched} file(s) of the window fetched, older ones left on the hub; "
                     f"`gitmail deepen {joined.project} --since all` fetches them")
    if not joined.partial and joined.boundary:
        lines.append("  the hub does not serve filtered fetches (uploadpack.allowFilter): every record of the "
                     "boundary was fetched")
    report = joined.sync
    lines += [f"  refused from {item['source']}: {item['path']}: {item['reason']}"
              for result in report.results for item in result.quarantined]
    return joined, "\n".join(lines), report.exit_code


@command(name="deepen")
@click.argument("project")
@click.option("--since", default="all", show_default=True,
              help="The new first day: a number of days (30d), a day (2026-10-01) or all (the whole history).")
@click.option("--quiet", is_flag=True, help="No progress display.")
def deepen_cmd(ctx: Context, project: str, since: str, quiet: bool) -> tuple[object, str, int]:
    """Fetch older history and records into an archive that joined from a window (gitmail clone --since).

    The history brought in is judged by the who-may-write rule and its
    findings reported, as `gitmail verify` reports them; the index takes in
    the records that came. Exit 0 clean, 1 findings.
    """
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from gitmail.sync.join import deepen

    console = Console(stderr=True)
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, disable=quiet or not console.is_terminal) as bar:
        records = bar.add_task("index: records", total=None)
        search = bar.add_task("index: search", total=None)
        out = deepen(ctx.store, project, since=since, progress=_counter(bar, search),
                     records_progress=_counter(bar, records))
    lines = [f"{out.project}: history from {out.since} on, {out.commits_in} commit(s) and {out.files_fetched} "
             f"file(s) fetched, {out.messages_indexed} message(s) indexed in {out.seconds} s"]
    lines += [f"  {f.commit[:12]} {f.problem}: {f.path or f.summary}" for f in out.findings]
    return out, "\n".join(lines), 1 if out.findings else 0


def _counter(bar: Progress, task: TaskID) -> Callable[[int, int], None]:
    """A progress callback that shows one task of the bar and moves it."""
    return lambda done, total: bar.update(task, completed=done, total=total, visible=True)


@command(name="repair")
@click.argument("project")
@click.option("--remote", "remote_name", help="The remote whose main to repair (default: the one with refused "
              "changes kept aside, or the only one).")
def repair(ctx: Context, project: str, remote_name: str | None) -> tuple[object, str, int]:
    """Take out what breaks the record rules on a remote's main (and at the local tip), then push the fix.

    For a hub that took a bad push without checks: each change the syncs
    refused and kept aside (see `gitmail remote list`) is undone on top of
    the remote's main with a repair record that a checked hub accepts, and
    nothing valid is dropped. Exit status as for sync.
    """
    from gitmail.sync.repair import repair as run_repair

    report = run_repair(ctx.store, project, remote_name)
    data = report.to_dict()
    return data, "\n".join(report.lines()), data["exit_code"]


@cli.command(name="merge-driver", hidden=True)
@click.argument("base_file")
@click.argument("ours_file")
@click.argument("theirs_file")
@click.argument("path")
def merge_driver(base_file: str, ours_file: str, theirs_file: str, path: str) -> None:
    """git merge driver (%O %A %B %P): merge one archive file by the record rules."""
    from gitmail.sync import mergedriver

    code, message = mergedriver.run(base_file, ours_file, theirs_file, path)
    if message:
        click.echo(message, err=True)
    sys.exit(code)


@cli.command(name="check-push", hidden=True)
@click.option("--door", type=click.Choice(["hub", "archive"]), default="hub",
              help="What receives the push: a shared hub, or an archive (pushes from its human checkout).")
def check_push(door: str) -> None:
    """pre-receive hook: reads `<old> <new> <ref>` lines and refuses a push that would damage the archive."""
    from gitmail.storage import leftovers
    from gitmail.sync import pushcheck

    # The push being received sits in its own quarantine; older ones were killed pushes.
    for leftover in leftovers.clear(".", keep=os.environ.get("GIT_QUARANTINE_PATH")):
        click.echo(f"gitmail: removed {leftover}", err=True)
    problems = pushcheck.check_push(".", sys.stdin.read().splitlines(), door)
    if problems:
        for line in pushcheck.refusal_lines(problems):
            click.echo(line, err=True)
        sys.exit(1)


@cli.command(name="hub-check", hidden=True)
@click.pass_context
def hub_check(ctx: click.Context) -> None:
    """The hub check under the name hooks installed by earlier versions call."""
    ctx.invoke(check_push, door="hub")


@cli.group(name="hooks")
def hooks() -> None:
    """Install gitmail's git hooks and merge driver."""


@command(group=hooks, name="install")
@click.argument("project", required=False)
@click.option("--repo", type=click.Path(exists=True, file_okay=False),
              help="A clone of an archive: register the merge driver there, so `git pull` merges by the rules.")
@click.option("--hub", type=click.Path(exists=True, file_okay=False),
              help="A bare hub repository: install the pre-receive check that refuses damaging pushes.")
def hooks_install(ctx: Context, project: str | None, repo: str | None, hub: str | None) -> tuple[object, str]:
    """Install archive hooks and the merge driver for PROJECT (default: every project), or for --repo / --hub."""
    from gitmail.sync import hookinstall

    if repo:
        return hookinstall.install_clone(repo), f"merge driver registered in {repo}"
    if hub:
        checks = hookinstall.install_hub(hub)
        return checks, f"hub checks installed in {hub}: {', '.join(checks['hooks']['installed']) or 'none'}"
    store = ctx.store
    slugs = [store.resolve(project)] if project else store.slugs()
    report = {}
    for slug in slugs:
        report[slug] = hookinstall.install_archive(store.archive(slug), store.paths(slug).checkout)
    lines = [f"{slug}: hooks {', '.join(r['hooks']['installed'])}; merge driver registered"
             for slug, r in report.items()]
    return report, "\n".join(lines) or "no projects in the store"


@cli.command(name="watch")
@click.option("--quiet", is_flag=True, help="Do not print a line per change.")
@click.pass_obj
def watch(ctx: Context, quiet: bool) -> None:
    """Watch every archive's refs and bring its index up to date after outside changes.

    Runs until interrupted. A push into an archive, a human's commit or pull,
    or another process's write shows up here within moments.
    """
    from gitmail.index import indexer_for
    from gitmail.sync.watch import Watcher

    store = ctx.store
    indexer = indexer_for(store)

    def on_change(slug: str) -> None:
        started = time.monotonic()
        tip = indexer.project(slug).catch_up()
        store.poke_checkout(slug)  # the human checkout follows too
        if not quiet:
            click.echo(f"{slug}: caught up to {(tip or '')[:12]} in {time.monotonic() - started:.3f}s", nl=True)
            sys.stdout.flush()

    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    with Watcher(store, on_change):
        click.echo(f"watching {len(store.slugs())} project(s) in {store.home}")
        sys.stdout.flush()
        try:
            done.wait()
        except KeyboardInterrupt:
            pass
    indexer.close()

