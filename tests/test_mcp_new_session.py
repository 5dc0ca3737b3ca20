"""new_session against a real `gitmail serve`: a session forgets what it proved, and nothing else changes."""

from __future__ import annotations

import uuid

import pytest

from .mcp_harness import call, fail, run
from .test_mcp_hierarchy import Archive

SHARES_SERVER = True  # each test makes a project of its own

pytestmark = pytest.mark.slow  # a real gitmail serve process


def test_a_new_session_must_prove_its_agent_again_and_other_sessions_and_the_seat_are_untouched(server):
    project = f"/work/mcp-new-session/{uuid.uuid4().hex[:10]}"
    archive = Archive(server.home, project)

    async def scenario():
        async with server.client() as one, server.client() as two:
            await call(one, "ensure_project", human_key=project)
            ann = await call(one, "register_agent", project_key=project, program="p", model="m", name="Ann")
            await call(two, "register_agent", project_key=project, program="p", model="m", name="Bob")
            seat = await call(one, "take_seat", project_key=project, agent_name="Ann")
            before = archive.tip()
            started = await call(one, "new_session", project_key=project, agent_name="Ann")
            unchanged = archive.tip()
            refused = await fail(one, "fetch_inbox", project_key=project, agent_name="Ann")
            again = await call(one, "send_message", project_key=project, sender_name="Ann", to=["Ann"],
                               subject="after", body_md="proved again", sender_token=ann["registration_token"],
                               seat=seat["seat"]["token"])
            bound = await call(one, "fetch_inbox", project_key=project, agent_name="Ann")  # proved again above
            other = await call(two, "fetch_inbox", project_key=project, agent_name="Bob")
            return before, unchanged, started, refused, again, bound, other

    before, unchanged, started, refused, again, bound, other = run(scenario())
    assert started["forgotten"] == [{"project": project, "agent": "Ann"}] and "seat" in started["note"]
    assert unchanged == before  # nothing is written
    assert refused["code"] == "UNAUTHORIZED"
    assert again["deliveries"] and [m["subject"] for m in bound] == ["after"]
    assert other == []  # the other session still acts as Bob without a token
