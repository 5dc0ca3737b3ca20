"""The two-machine example runs end to end: two stores converge through a checked hub, read with plain git."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from .mcp_harness import ROOT

pytestmark = pytest.mark.slow  # runs the example end to end in its own processes


def test_two_machines_example_runs(tmp_path):
    env = dict(os.environ, PYTHONPATH=ROOT, TMPDIR=str(tmp_path))
    env.pop("GITMAIL_HOME", None)
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "two_machines.py")], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    out = proc.stdout
    assert "hub checks installed in" in out and ": pre-receive" in out
    assert "6 records in (1 messages)" in out  # the desktop took the laptop's project in (and its node key)
    assert "Schema for the users table" in out.split("GreenCastle's inbox on the desktop:")[1]
    inbox = out.split("BlueLake's inbox on the laptop:")[1].split("the laptop's remotes:")[0]
    assert "Written on the desktop" in inbox and "Re: Schema for the users table" in inbox
    assert "\tok\tlast success" in out and "ahead 0 behind 0" in out
    assert "laptop, desktop and hub hold the same tree: True" in out
    # Plain git shows the merge of what both machines wrote apart, each commit by the agent that wrote it.
    assert "Merge hub/main" in out and "BlueLake: BlueLake sent" in out and "GreenCastle: GreenCastle sent" in out
    assert "subject: Schema for the users table" in out  # git show of the message file
    grep = out.split("$ git grep -l offline main -- messages")[1]
    assert grep.count("main:messages/") == 2  # git grep finds both messages written apart
