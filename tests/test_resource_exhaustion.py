"""The OS running out of a resource reaches the caller as RESOURCE_EXHAUSTED, and the server recovers.

The server is a real ``gitmail serve``; its open-file limit is lowered while
it runs (``prlimit``, what ``ulimit -n`` sets at start), so that no new file
descriptor can be opened while the client's connection stays up. Nothing in
gitmail is replaced or simulated.
"""

from __future__ import annotations

import errno
import resource

from gitmail import Mail, Store
from gitmail.model.errors import INTERNAL, RESOURCE_EXHAUSTED, GitmailError, coded, resource_exhausted

from .mcp_harness import ServerProcess, call, fail, run
from .test_mcp_mail import server_tip

PROJECT = "/work/projects/exhausted"


def test_a_server_out_of_file_handles_says_so_and_recovers_once_they_are_back(tmp_path):
    home = str(tmp_path / "home")
    mail = Mail(Store(home, background=False))
    slug = mail.ensure_project(PROJECT)["slug"]
    tokens = {name: mail.register_agent(PROJECT, "test", "m", name=name)["registration_token"]
              for name in ("Sender", "Reader")}
    mail.set_contact_policy(PROJECT, "Reader", "open")
    server = ServerProcess(home)
    pid = server.proc.pid

    def send(client, subject):
        return dict(project_key=PROJECT, sender_name="Sender", to=["Reader"], subject=subject, body_md="hello",
                    sender_token=tokens["Sender"])

    async def scenario():
        async with server.client() as client:
            await call(client, "send_message", **send(client, "before"))  # every file the path needs is known
            soft, hard = resource.prlimit(pid, resource.RLIMIT_NOFILE)
            before = server_tip(server, slug)
            resource.prlimit(pid, resource.RLIMIT_NOFILE, (3, hard))  # 0-2 are taken: no descriptor is free
            try:
                refused = await fail(client, "send_message", **send(client, "while exhausted"))
            finally:
                resource.prlimit(pid, resource.RLIMIT_NOFILE, (soft, hard))
            assert server_tip(server, slug) == before, "a failed call leaves the repository unchanged"
            await call(client, "send_message", **send(client, "after"))
            inbox = await call(client, "fetch_inbox", project_key=PROJECT, agent_name="Reader",
                               agent_token=tokens["Reader"])
            return refused, inbox

    try:
        refused, inbox = run(scenario())
    finally:
        server.stop()
    assert refused["code"] == RESOURCE_EXHAUSTED
    assert "file handles" in refused["message"] and "retry" in refused["message"]
    assert refused["data"]["errno"] == "EMFILE"
    listed = inbox if isinstance(inbox, list) else inbox["result"]
    assert [m["subject"] for m in listed] == ["after", "before"]


def test_each_exhausted_resource_has_its_code_and_anything_else_is_internal():
    for number, word in ((errno.EMFILE, "file handles"), (errno.ENOSPC, "disk space"), (errno.ENOMEM, "memory")):
        failure = resource_exhausted(OSError(number, "boom"))
        assert failure is not None and failure.code == RESOURCE_EXHAUSTED and word in failure.message
    assert resource_exhausted(MemoryError()).code == RESOURCE_EXHAUSTED
    wrapped = RuntimeError("while writing")
    wrapped.__cause__ = OSError(errno.ENOSPC, "No space left on device")
    assert coded(wrapped).code == RESOURCE_EXHAUSTED
    text_only = Exception("could not open '/x/refs/heads/main': Too many open files")  # as libgit2 reports it
    assert coded(text_only).data == {"errno": "EMFILE"}
    assert coded(ValueError("odd")).code == INTERNAL
    kept = GitmailError("NOT_FOUND", "no such agent")
    assert coded(kept) is kept
