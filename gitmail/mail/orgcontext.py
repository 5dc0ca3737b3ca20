"""The project's defaults for its identities (``org_context``): the folders a new agent loads, and folder hints.

An agent holding ``manager@*`` sets them (the record checker holds every
other door to the same rule); any agent of the project reads them. The
folders are checked as a spawn checks its own (:mod:`gitmail.coord.loads`):
each one the setter may read. An agent whose spawn named no folders loads
these when it takes its seat, so a change reaches every such agent at its
next seat.

The project's own memory folders live here too: ``write_memory`` puts a
memory file or a skill in a folder of the archive (``memory/<name>/``,
loaded as ``archive:<name>``), under the same rule as the defaults
(``manager@*``), so what every identity of the project is told is set by
those who manage the whole of it, and syncs with the archive.
"""

from __future__ import annotations

import hashlib
from dataclasses import field

from gitmail.coord import acting, hierarchy, loads
from gitmail.coord.context import Context
from gitmail.coord.lookup import require_agent
from gitmail.model.errors import NOT_FOUND, SCOPE_DENIED, GitmailError, invalid
from gitmail.model.names import CHANNEL_NAME_RE
from gitmail.model.records import MEMORY_DOC_RE, Agent, MemoryDoc, OrgContext, memory_path
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
    archive_folders: list[str] = field(default_factory=list)
    set_by: str | None = field(default=None, metadata=OMIT_NONE)
    updated_at: str | None = field(default=None, metadata=OMIT_NONE)


@result
class MemoryWritten(Result):
    """A memory file or skill written to an archive folder: where (``archive:<name>`` and its file), its size and
    SHA-256, and whether this call changed it; ``removed``: this call removed it (size and SHA-256 are then the
    removed text's)."""

    folder: str
    file: str
    size: int
    sha256: str
    changed: bool
    written_by: str
    updated_at: str
    removed: bool = False


@result
class MemoryDocView(Result):
    """One file of an archive memory folder as the operator's view shows it: where, who wrote it, size, SHA-256,
    text."""

    file: str
    written_by: str
    updated_at: str
    size: int
    sha256: str
    text: str


@result
class MemoryFolderView(Result):
    """An archive memory folder (``archive:<name>``) and its files: memory files first, then skills by name."""

    folder: str
    files: list[MemoryDocView]


@result
class MemoryOverview(Result):
    """The project's defaults for new agents and the memory folders its archive keeps, for the operator."""

    defaults: OrgContextView
    folders: list[MemoryFolderView]


def _view(project_key: str, record: OrgContext | None, changed: bool, snap: Snapshot) -> OrgContextView:
    folders = [f"{loads.ARCHIVE}{name}" for name in loads.archive_folders(snap)]
    if record is None:
        return OrgContextView(project=project_key, load_memory_and_skills=[], folder_hints=True, changed=changed,
                              archive_folders=folders)
    return OrgContextView(project=project_key, load_memory_and_skills=list(record.loads),
                          folder_hints=record.folder_hints, changed=changed, archive_folders=folders,
                          set_by=record.set_by, updated_at=record.updated_at)


def read(ctx: Context, project_key: str, agent_name: str) -> OrgContextView:
    """The project's defaults, for any agent of the project."""
    snap = ctx.archive(project_key).snapshot()
    require_agent(snap, agent_name, active=True)
    return _view(project_key, loads.org_context(snap), False, snap)


def overview(ctx: Context, project_key: str) -> MemoryOverview:
    """The project's defaults and every memory folder of its archive with its files, as the operator reads them."""
    snap = ctx.archive(project_key).snapshot()
    folders = [MemoryFolderView(folder=f"{loads.ARCHIVE}{name}",
                                files=[_doc_view(doc) for doc in loads.archive_docs(snap, name)])
               for name in loads.archive_folders(snap)]
    return MemoryOverview(defaults=_view(project_key, loads.org_context(snap), False, snap), folders=folders)


def _doc_view(doc: MemoryDoc) -> MemoryDocView:
    data = doc.body.encode("utf-8")
    return MemoryDocView(file=doc.file, written_by=doc.written_by, updated_at=doc.updated_at, size=len(data),
                         sha256=hashlib.sha256(data).hexdigest(), text=doc.body)


def read_memory(ctx: Context, project_key: str, *, folder: str, file: str) -> MemoryDocView:
    """One file of an archive memory folder as the operator reads it; NOT_FOUND when the folder does not hold it
    (never written, or removed)."""
    name = _folder_name(folder, file)
    doc = ctx.archive(project_key).snapshot().load(memory_path(name, file), MemoryDoc)
    if doc is None or doc.removed:
        raise _missing(f"{loads.ARCHIVE}{name}", file, "to show")
    return _doc_view(doc)


def _missing(where: str, file: str, purpose: str) -> GitmailError:
    return GitmailError(NOT_FOUND, f"the memory folder {where} holds no file {file} {purpose}: list its files "
                        "(org_context names the folders; gitmail memory list shows their files)",
                        {"folder": where, "file": file})


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
        me = _manager(ctx, snap, agent_name, seat, "set the project's defaults")
        loads.check_readable(snap, me, folders or [])
        old = loads.org_context(snap)
        record = OrgContext(set_by=me.name, updated_at=at, hlc=hlc,
                            loads=folders if folders is not None else list(old.loads) if old else [],
                            folder_hints=folder_hints if folder_hints is not None else old.folder_hints if old
                            else True)
        if old is not None and (old.loads, old.folder_hints) == (record.loads, record.folder_hints):
            return Change("no change", result=_view(project_key, old, False, snap))
        change = Change(with_reason(f"{me.name} set the project's defaults for new agents", why), author=me.name,
                        result=_view(project_key, record, True, snap))
        return change.put_record(record)

    result: OrgContextView = archive.transact(fn).result
    ctx.touch(project_key, agent_name)
    return result


def _manager(ctx: Context, snap: Snapshot, agent_name: str, seat: str | None, what: str) -> Agent:
    """The acting agent, who must hold manager@* to ``what``."""
    me = acting.require_actor(snap, agent_name, seat, at=ctx.clock.now())
    if not hierarchy.allows(snap, me, "manager", hierarchy.WHOLE):
        raise GitmailError(SCOPE_DENIED, f"{me.name} may not {what}: that needs manager@* (a top-level agent, or one "
                           "given manager@*); ask such an agent to", {"agent": me.name, "needed": "manager@*"})
    return me


def _folder_name(folder: str, file: str) -> str:
    """The archive folder's name (``archive:<name>`` or ``<name>``), with ``file`` checked as a memory file or skill."""
    name = folder[len(loads.ARCHIVE):] if isinstance(folder, str) and folder.startswith(loads.ARCHIVE) else folder
    if not isinstance(name, str) or not CHANNEL_NAME_RE.match(name):
        raise invalid(f"folder {folder!r} is no archive folder name: lower case letters, digits, '-' and '_' (at "
                      "most 64), optionally written archive:<name>", field="folder")
    if not isinstance(file, str) or not MEMORY_DOC_RE.match(file):
        raise invalid(f"file {file!r} is not a memory file or skill: write AGENTS.md, CLAUDE.md or "
                      "skills/<name>/SKILL.md", field="file")
    return name


def _check_text(text: str | None, remove: bool) -> str:
    """The text to write: present and not blank for a write, absent for a removal."""
    if not isinstance(remove, bool):
        raise invalid("remove must be true or false", field="remove")
    if remove:
        if text:
            raise invalid("give either text (to write the file) or remove=true (to remove it), not both",
                          field="text")
        return ""
    if not isinstance(text, str) or not text.strip():
        raise invalid("text is the file's content and may not be empty; to remove the file pass remove=true",
                      field="text")
    return text


def write_memory(ctx: Context, project_key: str, agent_name: str, *, folder: str, file: str,
                 text: str | None = None, remove: bool = False, seat: str | None = None,
                 reason: str | None = None) -> MemoryWritten:
    """Write a memory file or skill (``file``) of the archive folder ``folder`` (``archive:<name>`` or ``<name>``),
    or remove it (``remove``).

    Needs manager@*. The same text again changes nothing (``changed: false``).
    A removal writes a version of its own (``removed: true``, no text) in
    the remover's name, which loaders pass over; removing a file the folder
    does not hold (never written, or removed already) is NOT_FOUND.
    """
    name, body = _folder_name(folder, file), _check_text(text, remove)
    why = check_reason(reason)
    hlc, at = ctx.tick(), ctx.clock.now_ts()
    record = MemoryDoc(folder=name, file=file, written_by=agent_name, updated_at=at, hlc=hlc, body=body,
                       removed=remove)
    record.validate()  # a text over the limit is refused before the archive is touched
    where = f"{loads.ARCHIVE}{name}"

    def fn(snap: Snapshot) -> Change:
        me = _manager(ctx, snap, agent_name, seat, "write the project's memory folders")
        old = snap.load(memory_path(name, file), MemoryDoc)
        if remove and (old is None or old.removed):
            raise _missing(where, file, "to remove")
        if old is not None and not remove and not old.removed and old.body == text:
            return Change("no change", result=_written(where, old, changed=False))
        verb = "removed" if remove else "wrote"
        change = Change(with_reason(f"{me.name} {verb} {file} of the memory folder {where}", why),
                        author=me.name, result=_written(where, old if remove and old else record, changed=True,
                                                        by=record))
        return change.put_record(record)

    result: MemoryWritten = ctx.archive(project_key).transact(fn).result
    ctx.touch(project_key, agent_name)
    return result


def _written(where: str, doc: MemoryDoc, *, changed: bool, by: MemoryDoc | None = None) -> MemoryWritten:
    """The answer for ``doc``'s text (for a removal: the text removed), written by ``by`` (default: ``doc``'s)."""
    data = doc.body.encode("utf-8")
    by = by or doc
    return MemoryWritten(folder=where, file=doc.file, size=len(data), sha256=hashlib.sha256(data).hexdigest(),
                         changed=changed, written_by=by.written_by, updated_at=by.updated_at, removed=by.removed)
