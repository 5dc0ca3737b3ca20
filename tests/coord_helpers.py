"""Helpers for the coordination tests: a project with registered agents, written as records."""

from __future__ import annotations

from gitmail import Agent, Change, Project, Store
from gitmail.model.records import LAYOUT
from gitmail.storage.store import slug_for


def make_project(store: Store, key: str, *agents: str, capabilities: dict[str, list[str]] | None = None) -> str:
    """Create project ``key`` with active ``agents``; returns the key."""
    archive = store.archive(key, create=True)

    def fn(snap):
        change = Change(f"set up {key}")
        if not snap.exists("project.yaml"):
            change.put_record(Project(id=store.clock.new_id(), slug=slug_for(key), human_key=key,
                                      created_at=store.clock.now_ts(),
                                      hlc=store.clock.tick(), layout=LAYOUT))
        for name in agents:
            change.put_record(Agent(id=store.clock.new_id(), name=name, program="test", model="test",
                                    inception_ts=store.clock.now_ts(),
                                    hlc=store.clock.tick(), capabilities=(capabilities or {}).get(name, [])))
        return change

    archive.transact(fn)
    return key
