"""The CLI answers ``--help`` without loading git, search or the MCP server.

``gitmail --help`` and ``gitmail CMD --help`` must stay fast, so they may not
import pygit2, Whoosh or FastMCP (the figures are in ``benchmarks/bench_cli.py``).
Each check runs in a fresh interpreter and reads its ``sys.modules``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow  # fresh interpreters for every command probed

HEAVY = ("pygit2", "whoosh", "fastmcp")

# Runs every command's --help in one interpreter, in order, and reports after
# each which heavy packages are loaded, so a failure names the first culprit.
PROBE = """
import contextlib, io, json, sys
import click
from gitmail.cli import cli


def paths(group, prefix):
    for name, command in sorted(group.commands.items()):
        yield prefix + [name]
        if isinstance(command, click.Group):
            yield from paths(command, prefix + [name])

heavy = tuple(sys.argv[1].split(","))
report = []
for path in [[]] + list(paths(cli, [])):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            cli.main([*path, "--help"], prog_name="gitmail", standalone_mode=False)
        except SystemExit:
            pass
    loaded = sorted({m.split(".")[0] for m in sys.modules} & set(heavy))
    report.append({"path": path, "loaded": loaded, "usage": "Usage:" in out.getvalue()})
print(json.dumps(report))
"""


def run_probe(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, timeout=120)


def test_help_of_every_command_loads_no_heavy_package():
    proc = run_probe(PROBE, ",".join(HEAVY))
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert len(report) > 30  # the root and every command and group were walked
    assert all(entry["usage"] for entry in report), [e["path"] for e in report if not e["usage"]]
    culprits = [(" ".join(e["path"]) or "(root)", e["loaded"]) for e in report if e["loaded"]]
    assert not culprits, f"--help imported {culprits[0][1]} first at `gitmail {culprits[0][0]} --help`"


def test_the_gitmail_script_answers_help_without_heavy_packages():
    # The console script itself, with Python reporting every import it makes.
    script = os.path.join(os.path.dirname(sys.executable), "gitmail")
    env = dict(os.environ, PYTHONPROFILEIMPORTTIME="1")
    proc = subprocess.run([script, "--help"], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "Usage: gitmail" in proc.stdout
    imported = {line.rsplit("|", 1)[-1].strip().split(".")[0] for line in proc.stderr.splitlines()
                if line.startswith("import time:")}
    assert "gitmail" in imported and "click" in imported  # the report is real
    assert not imported & set(HEAVY)


def test_import_gitmail_is_cheap_and_exports_resolve_on_use():
    code = ("import sys, gitmail\n"
            f"heavy = {HEAVY!r}\n"
            "before = sorted({m.split('.')[0] for m in sys.modules} & set(heavy))\n"
            "values = {name: getattr(gitmail, name) for name in gitmail.__all__}\n"
            "print(before, all(v is not None for v in values.values()), 'pygit2' in sys.modules)\n")
    proc = run_probe(code)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["[]", "True", "True"]


def imports_of(argv: list[str], home: str) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """Run a command with Python reporting every import; the top-level packages it loaded."""
    env = dict(os.environ, GITMAIL_HOME=home, PYTHONPROFILEIMPORTTIME="1")
    env.pop("GITMAIL_TOKEN", None)
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)
    loaded = {line.rsplit("|", 1)[-1].strip().split(".")[0] for line in proc.stderr.splitlines()
              if line.startswith("import time:")}
    return proc, loaded


def test_reading_an_inbox_loads_neither_search_nor_images_nor_the_server(store, home):
    from gitmail import Mail

    mail = Mail(store)
    mail.ensure_project("/work/startup")
    for name in ("Blue", "Green"):
        mail.register_agent("/work/startup", "test", "none", name=name)
        mail.set_contact_policy("/work/startup", name, "open")
    sent = mail.send_message("/work/startup", "Blue", ["Green"], "hello", "a word for the index")
    script = os.path.join(os.path.dirname(sys.executable), "gitmail")

    proc, loaded = imports_of([script, "inbox", "/work/startup", "Green"], home)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert sent["deliveries"][0]["payload"]["id"] in proc.stdout
    assert "pygit2" in loaded  # the report is real: the read opened the archive
    assert not loaded & {"whoosh", "PIL", "fastmcp"}

    proc, loaded = imports_of([script, "search", "/work/startup", "word"], home)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "whoosh" in loaded and not loaded & {"PIL", "fastmcp"}
