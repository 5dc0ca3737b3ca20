"""Commands about the store itself: checking archives."""

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
