"""Projects: create on first use, archive and restore, delete for good.

A project is one git repository in the store. ``project.yaml`` at its root
holds the descriptor (id, slug, human key, creation time, archive mark, and
the layout its records are filed by: new projects get the newest).
Archiving only hides a project from the active list; deleting removes the
repository from this machine, which is why it needs a confirmation phrase.
"""

from __future__ import annotations

import os

from gitmail.coord.context import Context
from gitmail.coord.lookup import profiles, project_record
from gitmail.model.errors import CONFIRMATION_REQUIRED, GitmailError, not_found
from gitmail.model.names import normalize_human_key
from gitmail.model.records import LAYOUT, PROJECT_PATH, Project
from gitmail.model.results import Result, result
from gitmail.storage.engine import Change
from gitmail.storage.layout import migrate
from gitmail.storage.snapshot import Snapshot
from gitmail.storage.store import is_slug, slug_for

CONFIRMATION_PHRASE = "I UNDERSTAND"


@result
class ProjectView(Result):
    """A project's descriptor."""

    id: str
    slug: str
    human_key: str
    created_at: str
    archived_at: str | None


@result
class AgentBrief(Result):
    """An agent as a project's page lists it."""

    name: str
    program: str
    model: str
    status: str
    task_description: str


@result
class ProjectDetails(ProjectView):
    """A project's descriptor and its agents."""

    agents: list[AgentBrief]


@result
class ProjectDeleted(Result):
    """A project removed from this machine."""

    deleted: bool
    project: ProjectView
    note: str


def project_view(project: Project) -> ProjectView:
    return ProjectView(id=project.id, slug=project.slug, human_key=project.human_key, created_at=project.created_at,
                       archived_at=project.archived_at)


def check_confirmation(confirmation: object, what: str) -> None:
    if confirmation != CONFIRMATION_PHRASE:
        raise GitmailError(
            CONFIRMATION_REQUIRED,
            f"{what} cannot be undone; pass confirmation exactly as {CONFIRMATION_PHRASE!r} to proceed",
            {"expected": CONFIRMATION_PHRASE},
        )


def ensure_project(ctx: Context, human_key: str) -> ProjectView:
    """Create the project if it is new; either way return its descriptor."""
    key = normalize_human_key(human_key)
    slug = slug_for(key)
    archive = ctx.store.archive(key, create=True)
    project_id, created_at, hlc = ctx.clock.new_id(), ctx.clock.now_ts(), ctx.tick()

    def fn(snap: Snapshot) -> Change:
        existing = snap.load(PROJECT_PATH, Project)
        if existing is not None:
            return Change("", result=existing)
        project = Project(id=project_id, slug=slug, human_key=key, created_at=created_at, hlc=hlc, layout=LAYOUT)
        return Change(f"Create project {key}", result=project).put_record(project)

    return project_view(archive.transact(fn).result)


def _set_archived(ctx: Context, project_key: str, archived: bool) -> ProjectView:
    archive = ctx.archive(project_key)
    stamp, hlc = ctx.clock.now_ts(), ctx.tick()

    def fn(snap: Snapshot) -> Change:
        project = project_record(snap)
        if (project.archived_at is not None) == archived:
            return Change("", result=project)
        project.archived_at = stamp if archived else None
        project.hlc = hlc
        verb = "Archive" if archived else "Restore"
        return Change(f"{verb} project {project.human_key}", result=project).put_record(project)

    return project_view(archive.transact(fn).result)


def archive_project(ctx: Context, project_key: str) -> ProjectView:
    """Hide a project from the active list; nothing is deleted."""
    return _set_archived(ctx, project_key, True)


def unarchive_project(ctx: Context, project_key: str) -> ProjectView:
    """Bring an archived project back to the active list."""
    return _set_archived(ctx, project_key, False)


def hard_delete_project(ctx: Context, project_key: str, *, confirmation: str) -> ProjectDeleted:
    """Remove the project's repository, checkout and derived state from this machine."""
    check_confirmation(confirmation, "deleting a project")
    archive = ctx.archive(project_key)
    project = project_record(archive.snapshot())
    slug = ctx.slug(project_key)
    ctx.store.remove(slug)
    ctx.activity.forget(slug)
    return ProjectDeleted(deleted=True, project=project_view(project),
                          note="the project's repository was removed from this machine; copies already pushed to "
                               "git remotes or cloned elsewhere are not touched")


@result
class ProjectMigration(Result):
    """What moving a project to the newest layout did (``commit`` None: it was there already)."""

    project: str
    layout_before: int
    layout: int
    commit: str | None
    moved: int
    migrated: bool


def migrate_project(ctx: Context, project_key: str) -> ProjectMigration:
    """Move the project's archive to the newest layout in one commit (nothing to do when it is there already).

    Derived state and the checkout follow the commit as they follow any
    other: a record that moved with its content unchanged is the same record.
    """
    done = migrate(ctx.archive(project_key))
    return ProjectMigration(project=ctx.slug(project_key), layout_before=done.layout_before, layout=done.layout,
                            commit=done.commit, moved=done.moved, migrated=done.commit is not None)


def list_projects(ctx: Context, *, include_archived: bool = False) -> list[ProjectView]:
    """Every project in the store (archived ones only when asked for)."""
    out = []
    for slug in ctx.store.slugs():
        snap = ctx.store.archive(slug).snapshot()
        project = snap.load(PROJECT_PATH, Project)
        if project is None or (project.archived_at and not include_archived):
            continue
        out.append(project_view(project))
    return out


def _known(ctx: Context, slug_or_key: str) -> bool:
    if is_slug(slug_or_key) and os.path.isdir(ctx.store.paths(slug_or_key).archive):
        return True
    try:
        return ctx.store.exists(normalize_human_key(slug_or_key))
    except GitmailError:
        return False


def human_key(ctx: Context, project: str) -> str:
    """The human key of a project named by key or slug (one read of ``project.yaml``)."""
    return project_record(ctx.archive(project).snapshot()).human_key


def get_project(ctx: Context, slug: str) -> ProjectDetails:
    """A project's descriptor plus its agents (by slug or human key)."""
    if not _known(ctx, slug):
        raise not_found(f"no project {slug!r}; list the projects to find its slug", project=slug)
    snap = ctx.store.archive(slug).snapshot()
    agents = [AgentBrief(name=a.name, program=a.program, model=a.model, status=a.status,
                         task_description=a.task_description) for a in profiles(snap)]
    project = project_record(snap)
    return ProjectDetails(id=project.id, slug=project.slug, human_key=project.human_key,
                          created_at=project.created_at, archived_at=project.archived_at, agents=agents)
