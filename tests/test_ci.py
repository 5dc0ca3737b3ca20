"""CI runs what the README tells a newcomer to run, and installs what it needs."""

from __future__ import annotations

import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def read(*parts: str) -> str:
    with open(os.path.join(ROOT, *parts), encoding="utf-8") as handle:
        return handle.read()


def setup_commands() -> list[str]:
    """The shell commands of the README's set-up section, one per line."""
    section = read("README.md").split("## Set-up", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```sh\n(.*?)```", section, re.S)
    return [line.strip() for block in blocks for line in block.splitlines() if line.strip()]


def ci_lines() -> list[str]:
    """The commands of ``.ci/run`` (comments left out)."""
    return [line.strip() for line in read(".ci", "run").splitlines() if not line.lstrip().startswith("#")]


def test_ci_runs_exactly_the_readmes_test_command():
    tests = [line for line in setup_commands() if "pytest" in line]
    assert len(tests) == 1, tests
    install, run = (part.strip() for part in tests[0].split("&&"))
    assert run in ci_lines(), f"the README runs `{run}`; .ci/run must run the same"
    # The install is the same one, quiet: `pip install -e '.[dev]'` as `python -m pip install -q -e '.[dev]'`.
    target = install.removeprefix("pip install").strip()
    assert f"python -m pip install -q {target}" in ci_lines()


def test_ci_smoke_tests_the_wheel_before_the_suite_and_checks_lint_and_types():
    lines = ci_lines()
    order = [next(i for i, line in enumerate(lines) if needle in line)
             for needle in ("pip wheel", "smoke.py", "ruff check .", "python .ci/mypy.py", "pytest")]
    assert order == sorted(order)
    assert any("pip check" in line for line in lines)
