"""`gitmail memory`: the project's memory folders from the shell, as real processes on a private store."""

from __future__ import annotations

import hashlib
import json

import pytest

from .test_cli_mail import PROJECT, gitmail, ok

pytestmark = pytest.mark.slow  # a process per command


def _refused(home: str, *args: str) -> dict:
    proc = gitmail(home, *args, "--json")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    return json.loads(proc.stdout)["error"]


def test_a_manager_writes_shows_lists_and_removes_a_memory_file_and_bad_calls_change_nothing(tmp_path):
    home = str(tmp_path / "home")
    ok(home, "init", PROJECT)
    ok(home, "register", PROJECT, "--name", "BlueLake")
    wrote = ok(home, "memory", "write", PROJECT, "ops", "AGENTS.md", "--as", "BlueLake", "--reason", "on-call",
               stdin="# Ops\nPage the lead.\n")
    ok(home, "memory", "write", PROJECT, "archive:ops", "skills/rollback/SKILL.md", "--as", "BlueLake",
       "--text", "# Roll back\n")
    shown = ok(home, "memory", "show", PROJECT, "ops", "AGENTS.md")
    listed = ok(home, "memory", "list", PROJECT)
    text = gitmail(home, "memory", "list", PROJECT).stdout
    removed = ok(home, "memory", "rm", PROJECT, "ops", "AGENTS.md", "--as", "BlueLake")
    after = ok(home, "memory", "list", PROJECT)
    gone = _refused(home, "memory", "show", PROJECT, "ops", "AGENTS.md")
    again = _refused(home, "memory", "rm", PROJECT, "ops", "AGENTS.md", "--as", "BlueLake")
    nobody = _refused(home, "memory", "rm", PROJECT, "ops", "skills/rollback/SKILL.md", "--as", "Nobody")

    digest = hashlib.sha256(b"# Ops\nPage the lead.\n").hexdigest()
    assert (wrote["changed"], wrote["sha256"], wrote["written_by"]) == (True, digest, "BlueLake")
    assert (shown["text"], shown["sha256"]) == ("# Ops\nPage the lead.\n", digest)
    assert [(f["folder"], [d["file"] for d in f["files"]]) for f in listed["folders"]] == [
        ("archive:ops", ["AGENTS.md", "skills/rollback/SKILL.md"])]
    assert "archive:ops  AGENTS.md" in text and "new agents load: none" in text
    assert (removed["removed"], removed["sha256"]) == (True, digest)
    assert [d["file"] for d in after["folders"][0]["files"]] == ["skills/rollback/SKILL.md"]
    assert gone["code"] == again["code"] == "NOT_FOUND" and "holds no file AGENTS.md" in again["message"]
    assert nobody["code"] == "NOT_FOUND"  # no agent of that name: nothing was removed
    assert [d["file"] for d in ok(home, "memory", "list", PROJECT)["folders"][0]["files"]] == [
        "skills/rollback/SKILL.md"]
