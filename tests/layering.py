"""The import rules of the package, read from the source with :mod:`ast`.

gitmail is built in layers, and a layer imports only the layers to its left::

    hooks, model <- storage <- index <- coord <- mail <- sync <- importers <- web <- server <- cli

``hooks`` (scripts shipped as data) and ``model`` import nothing of ours but
``model`` itself. ``index`` (installed as ``gitmail.index``) sits right after
``storage``, so it imports only ``model`` and ``storage``: derived state never
knows the domain. The top package ``gitmail`` (the curated public API) and
``gitmail.__main__`` sit above everything, and nothing of ours imports them.

The faces (``server``, ``cli``, ``web``) reach ``coord`` and ``mail`` only
through the facade :mod:`gitmail.mail.facade` (UPPER_CASE constants aside).
Besides the direction: an import between two subpackages is absolute
(``from gitmail.model.records import Message``), one inside a subpackage is
relative (``from .seats import take_seat``), and no two modules import each
other, directly or round a longer loop. Every import counts, including those
inside functions and ``TYPE_CHECKING`` blocks: a function-local import hides a
cycle from Python, not from the design.

:func:`violations` lists what breaks the rules, in file and line order, each
naming the importing file, the line and the imported module.
"""

from __future__ import annotations

import ast
import os
from dataclasses import dataclass

# The installed package name of each top-level source folder.
ROOTS = {"gitmail": "gitmail", "gitmail.index": "index", "gitmail.hooks": "hooks"}

LAYERS = ("hooks", "model", "storage", "index", "coord", "mail", "sync", "importers", "web", "server", "cli")
TOP = "top"  # the package root (gitmail/__init__.py, the public API) and gitmail/__main__.py

# What each layer may import: itself and every layer to its left. Spelled out
# where the rule matters most: records know nothing else, and derived state
# knows records and storage, never the domain.
ALLOWED: dict[str, frozenset[str]] = {layer: frozenset(LAYERS[: i + 1]) for i, layer in enumerate(LAYERS)}
ALLOWED["hooks"] = frozenset({"hooks"})
ALLOWED["model"] = frozenset({"model"})
ALLOWED["index"] = frozenset({"model", "storage", "index"})

# The faces reach the domain (coordination and mail) through one door, the
# facade, so the CLI, the MCP server and the web view run the same operations
# with the same checks; they may still read constants (bounds, hook names).
FACES = frozenset({"web", "server", "cli"})
DOMAIN = frozenset({"coord", "mail"})
FACADE = "gitmail.mail.facade"
ALLOWED[TOP] = frozenset(LAYERS) | {TOP}


@dataclass(frozen=True)
class Import:
    """One import of one of our modules: where it is written and what it names."""

    module: str  # the importing module
    path: str  # its file, relative to the project root
    line: int
    target: str  # the imported module (the longest prefix of the name that is one of ours)
    relative: bool  # written as ``from .x import y``
    name: str | None = None  # the name taken from the module (``from x import name``), if any


@dataclass(frozen=True)
class Violation:
    rule: str
    where: Import
    detail: str

    def __str__(self) -> str:
        w = self.where
        return f"{w.path}:{w.line}: {w.module} imports {w.target}: {self.detail}"


def modules(root: str) -> dict[str, str]:
    """Module name -> file (relative to ``root``) for every Python file of the package."""
    found: dict[str, str] = {}
    for package, folder in ROOTS.items():
        base = os.path.join(root, folder)
        for dirpath, dirnames, files in os.walk(base):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
            for name in sorted(files):
                if not name.endswith(".py"):
                    continue
                rel = os.path.relpath(os.path.join(dirpath, name), base)[:-3].replace(os.sep, ".")
                module = package if rel == "__init__" else f"{package}.{rel.removesuffix('.__init__')}"
                found[module] = os.path.relpath(os.path.join(dirpath, name), root)
    return found


def layer_of(module: str) -> str:
    """The layer a module belongs to (``top`` for the package root and ``__main__``)."""
    parts = module.split(".")
    if len(parts) == 1 or parts[1] == "__main__":
        return TOP
    if parts[1] not in LAYERS:
        raise ValueError(f"{module} is in no layer: put it in one of {', '.join(LAYERS)}")
    return parts[1]


def _subpackage(module: str) -> str:
    parts = module.split(".")
    return ".".join(parts[:2])


def imports(root: str, known: dict[str, str] | None = None) -> list[Import]:
    """Every import of one of our modules, by file and then by line."""
    known = known if known is not None else modules(root)
    out: list[Import] = []
    for module, path in sorted(known.items(), key=lambda item: item[1]):
        with open(os.path.join(root, path), encoding="utf-8") as handle:
            tree = ast.parse(handle.read(), path)
        package = module if path.endswith("__init__.py") else module.rpartition(".")[0]
        found: list[Import] = []
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [(alias.name, None) for alias in node.names]
                relative = False
            elif isinstance(node, ast.ImportFrom):
                relative = node.level > 0
                if relative:
                    base = package
                    for _ in range(node.level - 1):
                        base = base.rpartition(".")[0]
                    head = f"{base}.{node.module}" if node.module else base
                else:
                    head = node.module or ""
                names = [(head, alias.name) for alias in node.names]
            else:
                continue
            for head, name in names:
                target = _resolve(head, name, known)
                if target is not None and target != module:
                    taken = name if name is not None and target != f"{head}.{name}" else None
                    found.append(Import(module, path, node.lineno, target, relative, taken))
        out += sorted(set(found), key=lambda item: (item.line, item.target))
    return out


def _resolve(head: str, name: str | None, known: dict[str, str]) -> str | None:
    """The module an import names: ``head.name`` if that is a module, else the longest known prefix of ``head``."""
    if name is not None and f"{head}.{name}" in known:
        return f"{head}.{name}"
    while head:
        if head in known:
            return head
        head = head.rpartition(".")[0]
    return None


def violations(root: str) -> list[Violation]:
    """Everything that breaks the import rules under ``root``, first the direction, then cycles."""
    known = modules(root)
    for module in known:
        layer_of(module)  # every module sits in a layer
    found: list[Violation] = []
    edges = imports(root, known)
    for item in edges:
        source, target = layer_of(item.module), layer_of(item.target)
        if target not in ALLOWED[source]:
            allowed = ", ".join(layer for layer in (*LAYERS, TOP) if layer in ALLOWED[source])
            found.append(Violation("direction", item, f"layer {source} may import only {allowed}, not {target}"))
        if source in FACES and target in DOMAIN and item.target != FACADE and not _constant(item.name):
            found.append(Violation("facade", item, f"the {source} reaches the domain through {FACADE} "
                                   "(it may read UPPER_CASE constants elsewhere)"))
        same = _subpackage(item.module) == _subpackage(item.target) and layer_of(item.module) != TOP
        if same and not item.relative:
            found.append(Violation("style", item, "an import inside one subpackage is relative (from .x import y)"))
        if not same and item.relative:
            found.append(Violation("style", item, "an import across subpackages is absolute (from gitmail.x import y)"))
    found += _cycles(edges)
    return found


def _constant(name: str | None) -> bool:
    return name is not None and name.isupper()


def _cycles(edges: list[Import]) -> list[Violation]:
    """One violation per import cycle, naming an import that closes it."""
    graph: dict[str, list[Import]] = {}
    for item in edges:
        graph.setdefault(item.module, []).append(item)
    out: list[Violation] = []
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[Import] = []

    def visit(module: str) -> None:
        state[module] = 1
        for item in graph.get(module, []):
            if state.get(item.target) == 1:
                start = next((i for i, step in enumerate(path) if step.module == item.target), len(path))
                loop = [step.module for step in path[start:]] + [module, item.target]
                out.append(Violation("cycle", item, "import cycle " + " -> ".join(loop)))
            elif item.target not in state:
                path.append(item)
                visit(item.target)
                path.pop()
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module)
    return out
