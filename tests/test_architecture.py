"""The package keeps its shape: layers import one way, no cycles, a curated public API, short functions.

The import rules are written down in :mod:`tests.layering`; these tests
hold the source tree to them and prove that the checker catches each kind of
breach when one is planted in a copy of the tree. No function (method and
nested function alike) runs over MAX_FUNCTION_LINES, its docstring included:
a longer one does several jobs that want names of their own.
"""

from __future__ import annotations

import ast
import os
import shutil
import tomllib

import pytest

import gitmail

from .layering import LAYERS, layer_of, modules, violations

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAX_FUNCTION_LINES = 80


def test_every_import_follows_the_layers():
    found = violations(ROOT)
    assert not found, f"{found[0]}" + (f" (and {len(found) - 1} more)" if len(found) > 1 else "")


def test_every_module_sits_in_a_layer():
    for module in modules(ROOT):
        assert layer_of(module) in (*LAYERS, "top"), module


def _copy_tree(tmp_path) -> str:
    """The package's Python sources under ``tmp_path``, to plant a breach in."""
    for folder in ("gitmail", "index", "hooks"):
        shutil.copytree(os.path.join(ROOT, folder), tmp_path / folder,
                        ignore=shutil.ignore_patterns("__pycache__", "*.sh", "archive", "code", "hub"))
    return str(tmp_path)


PLANTED = [
    # (file to write, its source, what the first violation must name)
    ("gitmail/model/planted.py", "from gitmail.mail.facade import Mail\n",
     "gitmail/model/planted.py:1: gitmail.model.planted imports gitmail.mail.facade: layer model"),
    ("index/planted.py", "import os\n\nfrom gitmail.coord.lookup import find_agent\n",
     "index/planted.py:3: gitmail.index.planted imports gitmail.coord.lookup: layer index may import only "
     "model, storage, index"),
    ("gitmail/server/planted.py", "def f():\n    from gitmail import Mail\n",
     "gitmail/server/planted.py:2: gitmail.server.planted imports gitmail: layer server"),
    ("gitmail/cli/planted.py", "def f():\n    from gitmail.coord import seats\n",
     "gitmail/cli/planted.py:2: gitmail.cli.planted imports gitmail.coord.seats: the cli reaches the domain through "
     "gitmail.mail.facade"),
    ("gitmail/storage/planted.py", "from gitmail.storage.engine import Change\n",
     "gitmail/storage/planted.py:1: gitmail.storage.planted imports gitmail.storage.engine: an import inside "
     "one subpackage is relative"),
    ("gitmail/mail/planted.py", "from ..coord import lookup\n",
     "gitmail/mail/planted.py:1: gitmail.mail.planted imports gitmail.coord.lookup: an import across "
     "subpackages is absolute"),
]


@pytest.mark.parametrize("path,source,expected", PLANTED, ids=[p[0] for p in PLANTED])
def test_a_planted_violation_is_named(tmp_path, path, source, expected):
    root = _copy_tree(tmp_path)
    assert violations(root) == []  # the copy is as clean as the original
    with open(os.path.join(root, path), "w", encoding="utf-8") as handle:
        handle.write(source)
    found = violations(root)
    assert found and str(found[0]).startswith(expected), [str(v) for v in found]
    with pytest.raises(AssertionError, match="planted"):
        assert not found, f"{found[0]}"


def test_a_planted_cycle_is_named(tmp_path):
    root = _copy_tree(tmp_path)
    (tmp_path / "gitmail" / "coord" / "ping.py").write_text("def f():\n    from .pong import g\n")
    (tmp_path / "gitmail" / "coord" / "pong.py").write_text("from .ping import f\n\n\ndef g():\n    f()\n")
    found = violations(root)
    assert [v.rule for v in found] == ["cycle"]
    assert str(found[0]) == ("gitmail/coord/pong.py:1: gitmail.coord.pong imports gitmail.coord.ping: import cycle "
                             "gitmail.coord.ping -> gitmail.coord.pong -> gitmail.coord.ping")


def test_a_module_outside_every_layer_is_refused(tmp_path):
    root = _copy_tree(tmp_path)
    os.makedirs(tmp_path / "gitmail" / "misc")
    (tmp_path / "gitmail" / "misc" / "__init__.py").write_text("")
    with pytest.raises(ValueError, match="gitmail.misc is in no layer"):
        violations(root)


def test_the_public_api_is_exactly_what_all_lists():
    """Every name the package root serves is in ``__all__``, and every name listed there is served."""
    served = set(gitmail._EXPORTS) | {"__version__"}
    assert set(gitmail.__all__) == served
    assert gitmail.__all__ == sorted(gitmail.__all__)
    for name in gitmail.__all__:
        value = getattr(gitmail, name)
        if name != "__version__":
            assert value.__module__ == gitmail._EXPORTS[name], name
    # What type checkers see (the TYPE_CHECKING imports) is the same list.
    with open(gitmail.__file__, encoding="utf-8") as handle:
        tree = ast.parse(handle.read())
    typed = {alias.name for node in ast.walk(tree) if isinstance(node, ast.If)
             for inner in node.body if isinstance(inner, ast.ImportFrom) for alias in inner.names}
    assert typed == set(gitmail._EXPORTS)


def test_the_version_is_the_one_pyproject_declares():
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as handle:
        declared = tomllib.load(handle)["project"]["version"]
    assert gitmail.__version__ == declared


def long_functions(root: str) -> list[str]:
    """Each function of the package's sources under ``root`` longer than MAX_FUNCTION_LINES, in file and line order.

    A function's length runs from its ``def`` line to its last line
    (decorators aside); each is named ``file:line: qualified.name is N lines``.
    """
    found: list[tuple[str, int, str]] = []
    for path in modules(root).values():
        with open(os.path.join(root, path), encoding="utf-8") as handle:
            tree = ast.parse(handle.read(), path)
        for name, node in _functions(tree, ""):
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            if length > MAX_FUNCTION_LINES:
                found.append((path, node.lineno, f"{path}:{node.lineno}: {name} is {length} lines"))
    return [text for _, _, text in sorted(found)]


def _functions(node: ast.AST, prefix: str) -> list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """Every function within ``node``, methods and nested functions too, with its dotted name."""
    out: list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]] = []
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            name = f"{prefix}{child.name}"
            if not isinstance(child, ast.ClassDef):
                out.append((name, child))
            out += _functions(child, name + ".")
        else:
            out += _functions(child, prefix)
    return out


def test_no_function_is_over_the_limit():
    found = long_functions(ROOT)
    assert not found, (f"over {MAX_FUNCTION_LINES} lines, split each into helpers that do one job each: "
                       + "; ".join(found))


def _planted(header: str, length: int, indent: str = "") -> list[str]:
    """The lines of a function whose ``def`` line is ``header`` and which runs exactly ``length`` lines."""
    return [indent + header] + [f"{indent}    x{i} = {i}" for i in range(length - 1)]


def test_a_planted_long_function_is_named(tmp_path):
    root = _copy_tree(tmp_path)
    assert long_functions(root) == []  # the copy is as clean as the original
    limit = MAX_FUNCTION_LINES
    # Exactly at the limit passes; one line more is named, be it a method, async, or nested in another function.
    lines = (_planted("def fits():", limit)
             + ["", "class Host:"] + _planted("async def method(self):", limit + 1, "    ")
             + ["", "def outer():"] + _planted("def inner():", limit + 1, "    ") + ["    return inner", ""])
    (tmp_path / "gitmail" / "model" / "planted.py").write_text("\n".join(lines))
    method, outer = lines.index("    async def method(self):") + 1, lines.index("def outer():") + 1
    assert long_functions(root) == [
        f"gitmail/model/planted.py:{method}: Host.method is {limit + 1} lines",
        f"gitmail/model/planted.py:{outer}: outer is {limit + 3} lines",
        f"gitmail/model/planted.py:{outer + 1}: outer.inner is {limit + 1} lines",
    ]
