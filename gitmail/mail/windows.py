"""Window identities: which agent name a terminal or editor window goes by.

A window (named by a UUID its client keeps, for example per terminal pane)
maps to one agent name in a project, as a record at ``windows/<uuid>.yaml``
(synced like every record; the later clock wins a merge). Registering with a
window's UUID and no name reuses the name, so an agent relaunched in the same
window keeps its identity; acting as that agent still needs its proof. A
window lapses :data:`WINDOW_TTL_SECONDS` after its last use, or when expired
by hand; a lapsed window is no longer listed and its next registration picks
a name afresh.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

from gitmail.coord.context import Context
from gitmail.model.clock import format_ts
from gitmail.model.errors import invalid, not_found
from gitmail.model.names import check_agent_name
from gitmail.model.records import WINDOW_UUID_RE, WINDOWS, Window, window_path
from gitmail.model.results import Result, result
from gitmail.storage.engine import Change
from gitmail.storage.snapshot import Snapshot

WINDOW_TTL_SECONDS = 30 * 24 * 3600


def check_window_uuid(value: object) -> str:
    if not isinstance(value, str) or not WINDOW_UUID_RE.match(value.strip()):
        raise invalid("window_uuid must be 8-64 letters, digits and '-' (a UUID such as "
                      "'3f2b6c1e-8a4d-4b7e-9c1a-2d5e6f7a8b9c')", field="window_uuid")
    return value.strip()


def _live(window: Window | None, at: str) -> bool:
    return window is not None and window.expired_at is None and window.expires_ts > at


@result
class WindowView(Result):
    """A window identity: the agent name a terminal or editor window goes by, and until when."""

    id: str
    window_uuid: str
    display_name: str
    created_ts: str
    last_active_ts: str
    expires_ts: str
    expired_at: str | None


@result
class WindowList(Result):
    """The project's live windows, most recently used first."""

    identities: list[WindowView]


@result
class WindowExpired(Result):
    """A window identity ended before its time."""

    window_uuid: str
    expired: bool
    expired_at: str | None


def window_view(window: Window) -> WindowView:
    return WindowView(id=window.id, window_uuid=window.window_uuid, display_name=window.display_name,
                      created_ts=window.created_ts, last_active_ts=window.last_active_ts,
                      expires_ts=window.expires_ts, expired_at=window.expired_at)


def window_agent(ctx: Context, project_key: str, window_uuid: str) -> str | None:
    """The agent name a live window goes by, if any."""
    found = ctx.archive(project_key).snapshot().load(window_path(check_window_uuid(window_uuid)), Window)
    return found.display_name if found is not None and _live(found, ctx.clock.now_ts()) else None


def _later(ctx: Context) -> str:
    return format_ts(ctx.clock.now() + dt.timedelta(seconds=WINDOW_TTL_SECONDS))


def use_window(ctx: Context, project_key: str, window_uuid: str, agent_name: str) -> WindowView:
    """Record that ``window_uuid`` goes by ``agent_name`` now (creating the window, or renewing it)."""
    uuid = check_window_uuid(window_uuid)
    check_agent_name(agent_name, "agent_name")
    archive = ctx.archive(project_key)
    new_id, hlc = ctx.clock.new_id(), ctx.tick()

    def fn(snap: Snapshot) -> Change:
        at = ctx.clock.now_ts()
        found = snap.load(window_path(uuid), Window)
        if _live(found, at):
            assert found is not None
            window = dataclasses.replace(found, display_name=agent_name, last_active_ts=at, expires_ts=_later(ctx),
                                         hlc=hlc)
        else:
            window = Window(id=new_id, window_uuid=uuid, display_name=agent_name, created_ts=at, last_active_ts=at,
                            expires_ts=_later(ctx), hlc=hlc)
        return Change(f"Window {uuid} goes by {agent_name}", author=agent_name,
                      result=window_view(window)).put_record(window)

    used: WindowView = archive.transact(fn).result
    return used


def list_windows(ctx: Context, project_key: str) -> WindowList:
    """The project's live windows, most recently used first."""
    snap = ctx.archive(project_key).snapshot()
    at = ctx.clock.now_ts()
    found = []
    for name in snap.listdir(WINDOWS):
        window = snap.load(f"{WINDOWS}/{name}", Window)
        if _live(window, at):
            assert window is not None
            found.append(window_view(window))
    found.sort(key=lambda w: w.last_active_ts, reverse=True)
    return WindowList(identities=found)


def _change_window(ctx: Context, project_key: str, window_uuid: str, update: str, **fields: Any) -> Window:
    uuid = check_window_uuid(window_uuid)
    archive = ctx.archive(project_key)
    hlc = ctx.tick()

    def fn(snap: Snapshot) -> Change:
        found = snap.load(window_path(uuid), Window)
        if not _live(found, ctx.clock.now_ts()):
            raise not_found(f"no live window {uuid} in this project (list_window_identities shows them)",
                            window_uuid=uuid)
        assert found is not None
        window = dataclasses.replace(found, hlc=hlc, **fields)
        return Change(update.format(uuid=uuid, **fields), result=window).put_record(window)

    return archive.transact(fn).result


def rename_window(ctx: Context, project_key: str, window_uuid: str, new_display_name: str) -> WindowView:
    """Have the window go by another agent name from its next registration on."""
    check_agent_name(new_display_name, "new_display_name")
    return window_view(_change_window(ctx, project_key, window_uuid, "Window {uuid} renamed {display_name}",
                                      display_name=new_display_name))


def expire_window(ctx: Context, project_key: str, window_uuid: str) -> WindowExpired:
    """End a window identity now; its next registration picks a name afresh."""
    at = ctx.clock.now_ts()
    window = _change_window(ctx, project_key, window_uuid, "Window {uuid} expired", expired_at=at)
    return WindowExpired(window_uuid=window.window_uuid, expired=True, expired_at=window.expired_at)
