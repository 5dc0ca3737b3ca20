"""docs/architecture.md stays true to the tree: its module map names exactly the modules on disk."""

from __future__ import annotations

import os
import re

from .layering import LAYERS, ROOTS

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOC = os.path.join(ROOT, "docs", "architecture.md")


def _section(text: str, title: str) -> str:
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start: end if end >= 0 else len(text)]


def _on_disk() -> tuple[set[str], set[str]]:
    """(every Python file, every package folder) of the installed package, relative to the root."""
    files, packages = set(), set()
    for folder in ROOTS.values():
        for dirpath, dirnames, names in os.walk(os.path.join(ROOT, folder)):
            dirnames[:] = [d for d in dirnames if d != "__pycache__"]
            rel = os.path.relpath(dirpath, ROOT).replace(os.sep, "/")
            if "__init__.py" in names:
                packages.add(rel + "/")
            files |= {f"{rel}/{name}" for name in names if name.endswith(".py")}
    return files, packages


def test_the_module_map_names_exactly_the_modules_on_disk():
    with open(DOC, encoding="utf-8") as handle:
        section = _section(handle.read(), "Module map")
    listed = re.findall(r"^- `([^`]+\.py)` — ", section, flags=re.M)
    headings = set(re.findall(r"^### `([^`]+/)`", section, flags=re.M))
    files, packages = _on_disk()
    assert len(listed) == len(set(listed)), "a module is listed twice"
    assert headings == packages, f"packages without a heading: {packages - headings}; gone: {headings - packages}"
    # A subpackage's __init__.py is represented by its heading; any other file must be listed.
    unlisted = {path for path in files - set(listed)
                if not (path.endswith("/__init__.py") and path[: -len("__init__.py")] in headings)}
    assert not unlisted, f"modules on disk missing from docs/architecture.md: {sorted(unlisted)}"
    gone = set(listed) - files
    assert not gone, f"docs/architecture.md names modules that no longer exist: {sorted(gone)}"


def test_the_layer_table_names_every_layer_in_order():
    with open(DOC, encoding="utf-8") as handle:
        section = _section(handle.read(), "Layers")
    order = re.search(r"```\n(.+)\n```", section)
    assert order is not None
    assert re.split(r"\s*[←,]\s*", order.group(1).strip()) == list(LAYERS)
    rows = re.findall(r"^\| ([a-z]+) \| `", section, flags=re.M)
    assert rows == [layer for layer in LAYERS if layer != "hooks"]
