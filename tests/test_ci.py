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


def test_ci_installs_every_git_host_and_lets_no_host_test_skip():
    """The sync tests through real hosts skip where a program is missing; on CI they must run."""
    from .hosts import BINARIES, PACKAGES, REQUIRED

    lines = ci_lines()
    text = "\n".join(lines)
    tests = next(i for i, line in enumerate(lines) if "pytest" in line)
    installs = [line for line in lines[:tests] if "apt-get install" in line or line.startswith(PACKAGES[0])]
    assert set(PACKAGES) <= set(" ".join(installs).split()), installs
    programs = {name for names in BINARIES.values() for name in names}
    checked = next(line for line in lines if "for program in" in line)
    assert programs <= set(checked.replace(";", " ").split()), checked
    assert f"export {REQUIRED}=required" in text[:text.index("pytest -q -n auto")]


def test_a_host_test_skips_only_for_a_missing_program_and_fails_for_one_where_hosts_are_required(monkeypatch):
    import pytest

    from . import hosts

    monkeypatch.delenv(hosts.REQUIRED, raising=False)
    for kind in hosts.KINDS:
        hosts.require(kind)  # installed here: nothing is skipped
    monkeypatch.setitem(hosts.BINARIES, "ssh", ("sshd", "no-such-program-for-gitmail"))
    with pytest.raises(pytest.skip.Exception, match="needs no-such-program-for-gitmail.*apt-get install"):
        hosts.require("ssh")
    monkeypatch.setenv(hosts.REQUIRED, "required")
    with pytest.raises(pytest.fail.Exception, match="needs no-such-program-for-gitmail"):
        hosts.require("ssh")


def third_party_imports() -> dict[str, str]:
    """Top-level names the package imports from outside itself and the standard library, with one importer each."""
    import ast
    import sys

    found: dict[str, str] = {}
    for top in ("gitmail", "index", "hooks"):
        for folder, dirs, files in os.walk(os.path.join(ROOT, top)):
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            for name in files:
                if not name.endswith(".py"):
                    continue
                path = os.path.join(folder, name)
                tree = ast.parse(read(os.path.relpath(path, ROOT)))
                for node in ast.walk(tree):
                    if isinstance(node, ast.Import):
                        names = [alias.name for alias in node.names]
                    elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                        names = [node.module]
                    else:
                        continue
                    for module in names:
                        first = module.split(".")[0]
                        if first != "gitmail" and first not in sys.stdlib_module_names:
                            found.setdefault(first, os.path.relpath(path, ROOT))
    return found


def test_every_library_the_package_imports_is_a_declared_dependency():
    """A wheel installs only what pyproject.toml declares: an import that works in the development
    environment because something else brought the library in fails for users (it did, for the web view)."""
    import importlib.metadata
    import tomllib

    def name(spec: str) -> str:
        return re.split(r"[<>=~!\[; (]", spec, maxsplit=1)[0].lower().replace("_", "-")

    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as handle:
        declared = {name(spec) for spec in tomllib.load(handle)["project"]["dependencies"]}
    # A declared distribution may ship its modules through one it requires (fastmcp's are in fastmcp-slim).
    declared |= {name(req) for dist in declared for req in importlib.metadata.requires(dist) or []
                 if "extra ==" not in req}
    providers = importlib.metadata.packages_distributions()
    undeclared = {}
    for module, importer in third_party_imports().items():
        dists = {dist.lower().replace("_", "-") for dist in providers.get(module, [module])}
        if not dists & declared:
            undeclared[module] = (sorted(dists), importer)
    assert not undeclared, f"imported but not in [project] dependencies: {undeclared}"
