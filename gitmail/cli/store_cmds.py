"""Commands about the store itself: checking archives, moving them to the newest layout."""

from __future__ import annotations

import click

from ._app import Context, command


@command(name="fsck")
@click.argument("project", required=False)
def fsck(ctx: Context, project: str | None) -> tuple[object, str, int]:
    """Check archives: every record parses, copies match, references resolve, git fsck is clean.

    Checks PROJECT (a human key or slug), or every project in the store.
    Prints `path: reason` per problem and exits 1 if there is any.
    """
    from gitmail.storage.fsck import check_archive

    store = ctx.store
    slugs = [store.resolve(project)] if project else store.slugs()
    report = {}
    lines = []
    for slug in slugs:
        problems = check_archive(store.archive(slug))
        report[slug] = [{"path": p.path, "reason": p.reason} for p in problems]
        lines += [f"{slug}/{p}" if not project else str(p) for p in problems]
    total = sum(len(v) for v in report.values())
    summary = f"{len(slugs)} project(s) checked, {total} problem(s)"
    return {"projects": report, "problems": total}, "\n".join(lines + [summary]), 1 if total else 0


@command(name="migrate")
@click.argument("project")
def migrate(ctx: Context, project: str) -> tuple[object, str]:
    """Move PROJECT's archive to the newest layout, in one commit.

    Each day's records move under two folders named by the last characters
    of their IDs (their contents unchanged, so a sync carries only trees).
    Running it again says there is nothing to do. A sync with a machine
    already moved does the same by itself.
    """
    out = ctx.mail.migrate_project(project)
    if out.commit is None:
        return out, f"{out.project}: at layout {out.layout} already; nothing to do"
    return out, (f"{out.project}: moved from layout {out.layout_before} to {out.layout} in "
                 f"{out.commit[:12]}: {out.moved} files moved, none changed")


@command(name="checkout")
@click.argument("project", required=False)
@click.option("--since", "since", metavar="WINDOW",
              help="Hold only recent records from now on: 7d (the newest 7 days, sliding) or 2026-11-01 (from that "
                   "day on).")
@click.option("--all", "everything", is_flag=True, help="Hold every record from now on (a plain checkout).")
@click.option("--sign-with", "key_file", metavar="KEYFILE",
              help="Your SSH key (its private file, the public one beside it as KEYFILE.pub), registered with "
                   "`gitmail nodes add PROJECT NAME --key ... --human`: plain `git commit` in the checkout signs "
                   "with it from now on.")
@click.option("--archive", "archive_dir", type=click.Path(file_okay=False), hidden=True,
              help="The archive's folder (what the archive's post-receive hook passes).")
def checkout(ctx: Context, project: str | None, since: str | None, everything: bool, key_file: str | None,
             archive_dir: str | None) -> tuple[object, str]:
    """Bring the human checkout of PROJECT (default: every project) up to main now, and say where it is.

    Every gitmail command and the server do this by themselves after they
    write, and a push into the archive does it from the archive's hook; this
    is for a move of main they did not see, and to choose which records the
    checkout holds. A checkout holds every record while the archive has at
    most 50,000 files, else a window of the newest days that fit; --since
    and --all choose for good. States: created, updated, current, held (your
    own commits or edits are in the way) or busy (a git command of yours
    holds the checkout's index). --sign-with sets the checkout's git to sign
    your hand commits with your registered key (and to check signatures with
    the project's allowed-signers file), so the archive and every hub accept
    them.
    """
    import os

    from gitmail.model.errors import invalid
    from gitmail.storage.checkout import refresh, window_of
    from gitmail.storage.window import Window

    if since is not None and everything:
        raise invalid("--since and --all choose the window two ways; give one of them")
    if key_file is not None and (project is None or archive_dir is not None):
        raise invalid("--sign-with configures one project's checkout: name the PROJECT")
    window = Window() if everything else Window.parse(since) if since is not None else None
    if archive_dir is not None:
        archive_dir = os.path.abspath(archive_dir)
        pairs = {os.path.basename(os.path.dirname(archive_dir)):
                 (archive_dir, os.path.join(os.path.dirname(archive_dir), "checkout"))}
    else:
        store = ctx.store
        slugs = [store.resolve(project)] if project else store.slugs()
        pairs = {slug: (store.archive(slug).git_dir, store.paths(slug).checkout) for slug in slugs}
    report = {}
    for slug, (source, target) in pairs.items():
        state = refresh(source, target, window=window)
        held = window_of(target).text() if os.path.isdir(target) else "all"
        report[slug] = {"checkout": target, "state": state, "window": held}
    if key_file is not None:
        from gitmail.storage.nodes import sign_checkout

        (slug,) = report
        person = sign_checkout(ctx.store.archive(slug), report[slug]["checkout"], key_file, project=slug)
        report[slug]["signs_as"] = person.node
    return report, "\n".join(f"{slug}: {item['state']}  {item['checkout']}  (holds: {item['window']})"
                             + (f"; git commit there signs as {item['signs_as']}" if "signs_as" in item else "")
                             for slug, item in report.items())
