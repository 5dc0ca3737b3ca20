"""The build slot commands and the overdue-acknowledgement scan of the `gitmail` CLI, run in-process."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from gitmail.cli import cli
from gitmail.mail.facade import Mail, SendOptions

from .coord_helpers import make_project

KEY = "/work/slots-cli"


@pytest.fixture
def gm(store, home):
    make_project(store, KEY, "Blue", "Green")
    runner = CliRunner()

    def invoke(*args: str, code: int = 0, data: bool = True, env: dict[str, str] | None = None):
        result = runner.invoke(cli, ["--home", home, *args, *(["--json"] if data else [])], env=env)
        assert result.exit_code == code, result.output
        return json.loads(result.output) if data else result.output

    return invoke


def test_acquire_busy_renew_release(gm):
    got = gm("slot", "acquire", KEY, "Blue", "build-dir", "--ttl", "600", "--reason", "nightly")
    assert got["granted"] and got["epoch"] == 1
    busy = gm("slot", "acquire", KEY, "Green", "build-dir", code=1)
    assert busy["granted"] is False
    assert "held exclusively" in gm("slot", "acquire", KEY, "Green", "build-dir", code=1, data=False)
    listed = gm("slots", KEY, data=False)
    assert "build-dir" in listed and "Blue (epoch 1)" in listed
    assert gm("slot", "renew", KEY, "Blue", "build-dir", "1", "--extend", "120")["epoch"] == 1
    assert gm("slot", "release", KEY, "Blue", "build-dir", "1")["released"] is True
    stale = gm("slot", "release", KEY, "Blue", "build-dir", "1", code=2)
    assert stale["error"]["code"] == "STALE_EPOCH"
    assert gm("slots", KEY, "--in-use")["build_slots"] == []


def test_acks_scans_with_the_environment_settings(gm, store):
    """What is overdue depends on time passing, which the CLI's own clock does not (tests/test_overdue_acks.py):
    here, the settings reach the scan, and a bad one is refused naming its variable."""
    mail = Mail(store)
    for name in ("Blue", "Green"):
        mail.set_contact_policy(KEY, name, "open")
    mail.send_message(KEY, "Blue", ["Green"], "Sign off", "Please ack.", options=SendOptions(ack_required=True))
    env = {"GITMAIL_ACK_TTL_SECONDS": "600", "GITMAIL_ACK_ESCALATION_ENABLED": "1"}
    out = gm("acks", KEY, env=env)
    assert (out["ttl_seconds"], out["escalation"], out["overdue"]) == (600, "log", [])
    assert gm("acks", KEY, env=env, data=False) == "no acknowledgement overdue (TTL 600s)\n"
    bad = gm("acks", KEY, env={"GITMAIL_ACK_ESCALATION_MODE": "page"}, code=2)
    assert "GITMAIL_ACK_ESCALATION_MODE" in bad["error"]["message"]
