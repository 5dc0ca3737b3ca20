"""The package keeps its shape: layers import one way, no cycles, a curated public API.

The rules themselves are written down in :mod:`tests.layering`; these tests
hold the source tree to them and prove that the checker catches each kind of
breach when one is planted in a copy of the tree.
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
