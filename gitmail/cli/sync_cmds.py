"""Commands for sharing archives between machines: remotes, sync, hooks, the watcher."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

import click

from ._app import Context, cli, command


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
@click.argument("project")
def remote_list(ctx: Context, project: str) -> tuple[object, str]:
    """List PROJECT's remotes."""
    from gitmail.sync.remotes import list_remotes

    remotes = list_remotes(ctx.store, project)
    return remotes, "\n".join(f"{name}\t{url}" for name, url in remotes.items()) or "(no remotes)"


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
def sync(ctx: Context, project: str | None, remote_name: str | None) -> tuple[object, str, int]:
    """Fetch, merge by the record rules, and push: PROJECT, or every project that has remotes.

    Reports records in and out and any conflicts (kept under conflicts/ in
    the archive). Exits 1 when a conflict was found.
    """
    from gitmail.sync.remotes import projects_with_remotes
    from gitmail.sync.syncer import sync_project

    store = ctx.store
    slugs = [store.resolve(project)] if project else projects_with_remotes(store)
    results = [result for slug in slugs for result in sync_project(store, slug, remote_name)]
    lines = [result.summary() for result in results] or ["no project has a remote; add one with `gitmail remote add`"]
    for result in results:
        lines += [f"  conflict: {c['path']} (other version in {c['record']})" for c in result.conflicts]
    conflicts = sum(len(result.conflicts) for result in results)
    return [result.to_dict() for result in results], "\n".join(lines), 1 if conflicts else 0


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


@cli.command(name="hub-check", hidden=True)
def hub_check() -> None:
    """pre-receive hook of a hub: reads `<old> <new> <ref>` lines, refuses damaging pushes."""
    from gitmail.storage import leftovers
    from gitmail.sync import pushcheck

    # The push being received sits in its own quarantine; older ones were killed pushes.
    for leftover in leftovers.clear(".", keep=os.environ.get("GIT_QUARANTINE_PATH")):
        click.echo(f"gitmail: removed {leftover}", err=True)
    problems = pushcheck.check_push(".", sys.stdin.read().splitlines())
    for problem in problems[:50]:
        click.echo(f"gitmail: rejected {problem}", err=True)
    if len(problems) > 50:
        click.echo(f"gitmail: ... and {len(problems) - 50} more", err=True)
    if problems:
        click.echo(f"gitmail: push refused ({len(problems)} problem(s)); the hub is unchanged", err=True)
        sys.exit(1)


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

