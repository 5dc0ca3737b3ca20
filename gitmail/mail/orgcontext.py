"""The project's defaults for its identities (``org_context``): the folders a new agent loads, and folder hints.

An agent holding ``manager@*`` sets them (the record checker holds every
other door to the same rule); any agent of the project reads them. The
folders are checked as a spawn checks its own (:mod:`gitmail.coord.loads`):
each one the setter may read. An agent whose spawn named no folders loads
these when it takes its seat, so a change reaches every such agent at its
next seat.
"""

from __future__ import annotations

from dataclasses import field

from gitmail.coord import acting, hierarchy, loads
from gitmail.coord.context import Context
from gitmail.coord.lookup import require_agent
from gitmail.model.errors import SCOPE_DENIED, GitmailError, invalid
from gitmail.model.records import OrgContext
from gitmail.model.results import OMIT_NONE, Result, result
from gitmail.storage.engine import Change
from gitmail.storage.snapshot import Snapshot

from .agents import check_reason, with_reason


@result
class OrgContextView(Result):
    """The project's defaults: the folders a new agent loads, whether answers name folders' memory and skills.

    ``set_by`` and ``updated_at`` are absent while nobody has set them;
    ``changed`` says whether this call changed them.
    """

    project: str
    load_memory_and_skills: list[str]
    folder_hints: bool
    changed: bool
    set_by: str | None = field(default=None, metadata=OMIT_NONE)
    updated_at: str | None = field(default=None, metadata=OMIT_NONE)


def _view(project_key: str, record: OrgContext | None, changed: bool) -> OrgContextView:
    if record is None:
        return OrgContextView(project=project_key, load_memory_and_skills=[], folder_hints=True, changed=changed)
    return OrgContextView(project=project_key, load_memory_and_skills=list(record.loads),
                          folder_hints=record.folder_hints, changed=changed, set_by=record.set_by,
                          updated_at=record.updated_at)


def read(ctx: Context, project_key: str, agent_name: str) -> OrgContextView:
    """The project's defaults, for any agent of the project."""
    snap = ctx.archive(project_key).snapshot()
    require_agent(snap, agent_name, active=True)
    return _view(project_key, loads.org_context(snap), False)


def set_defaults(ctx: Context, project_key: str, agent_name: str, *, load_memory_and_skills: list[str] | None = None,
                 folder_hints: bool | None = None, seat: str | None = None,
                 reason: str | None = None) -> OrgContextView:
    """Set the folders new agents load and/or folder hints, as ``agent_name``, who must hold manager@*."""
    folders = loads.check_folders(load_memory_and_skills) if load_memory_and_skills is not None else None
    if folder_hints is not None and not isinstance(folder_hints, bool):
        raise invalid("folder_hints must be true or false", field="folder_hints")
    if folders is None and folder_hints is None:
        raise invalid("name what to set: load_memory_and_skills (the folders a new agent loads when its spawn names "
                      "none; [] for none) and/or folder_hints", field="load_memory_and_skills")
    why = check_reason(reason)
    archive = ctx.archive(project_key)
    hlc, at = ctx.tick(), ctx.clock.now_ts()

    def fn(snap: Snapshot) -> Change:
        me = acting.require_actor(snap, agent_name, seat, at=ctx.clock.now())
        if not hierarchy.allows(snap, me, "manager", hierarchy.WHOLE):
            raise GitmailError(SCOPE_DENIED, f"{me.name} may not set the project's defaults: that needs manager@* "
                               "(a top-level agent, or one given manager@*); ask such an agent to set them",
                               {"agent": me.name, "needed": "manager@*"})
        loads.check_readable(snap, me, folders or [])
        old = loads.org_context(snap)
        record = OrgContext(set_by=me.name, updated_at=at, hlc=hlc,
                            loads=folders if folders is not None else list(old.loads) if old else [],
                            folder_hints=folder_hints if folder_hints is not None else old.folder_hints if old
                            else True)
        if old is not None and (old.loads, old.folder_hints) == (record.loads, record.folder_hints):
            return Change("no change", result=_view(project_key, old, False))
        change = Change(with_reason(f"{me.name} set the project's defaults for new agents", why), author=me.name,
                        result=_view(project_key, record, True))
        return change.put_record(record)

    result: OrgContextView = archive.transact(fn).result
    ctx.touch(project_key, agent_name)
    return result
