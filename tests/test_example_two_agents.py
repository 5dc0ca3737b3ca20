"""The two-agent example runs end to end and shows the archive through plain git."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from .mcp_harness import ROOT

pytestmark = pytest.mark.slow  # runs the example end to end in its own processes


def test_two_agents_example_runs(tmp_path):
    env = dict(os.environ, PYTHONPATH=ROOT, TMPDIR=str(tmp_path))
    env.pop("GITMAIL_TOKEN", None)
    env.pop("GITMAIL_HOME", None)
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "two_agents.py")], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    out = proc.stdout
    assert "GreenCastle accepted contact from BlueLake" in out
    assert "GreenCastle's inbox: ['Plan for the users table']" in out
    assert "BlueLake catches up: ['Re: Plan for the users table']" in out
    assert "search 'migration': ['Re: Plan for the users table']" in out
    # git log shows every step, authored by the agent that took it.
    assert "BlueLake: BlueLake sent" in out and "GreenCastle: GreenCastle acknowledged" in out
    assert "subject: Plan for the users table" in out  # git show of the message file
