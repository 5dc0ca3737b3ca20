"""Type-check gitmail as it installs: ``python .ci/mypy.py [mypy options]``.

``setup.py`` installs the top-level ``index/`` and ``hooks/`` folders as
``gitmail.index`` and ``gitmail.hooks``. mypy reads a source tree, not
setuptools' package mapping, so run on the checkout it cannot resolve those
two names. This script stages the installed layout as symlinks under
``build/typecheck/`` (``gitmail/<each entry>``, ``gitmail/index``,
``gitmail/hooks``), runs mypy there with the settings in ``pyproject.toml``,
and prints mypy's report with every path turned back into the real file's, so
editors and readers land on the files in the checkout. The exit status is mypy's.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STAGE = os.path.join("build", "typecheck")
MAPPED = {"index": "index", "hooks": "hooks"}  # gitmail.<name> -> top-level folder, as in setup.py


def stage() -> str:
    """Build ``build/typecheck/gitmail`` as the package will be installed; return its path."""
    package = os.path.join(ROOT, STAGE, "gitmail")
    shutil.rmtree(os.path.join(ROOT, STAGE), ignore_errors=True)
    os.makedirs(package)
    links = {entry: os.path.join(ROOT, "gitmail", entry) for entry in os.listdir(os.path.join(ROOT, "gitmail"))
             if entry != "__pycache__"}
    for name, folder in MAPPED.items():
        if name in links:
            sys.exit(f"gitmail/{name} exists in the checkout and would shadow the top-level {folder}/")
        links[name] = os.path.join(ROOT, folder)
    for name, target in links.items():
        os.symlink(os.path.relpath(target, package), os.path.join(package, name))
    return os.path.relpath(package, ROOT)


def real_path(path: str) -> str:
    """The checkout's path of a file mypy named inside the staged tree."""
    prefix = STAGE + os.sep + "gitmail" + os.sep
    if not path.startswith(prefix):
        return path
    rest = path[len(prefix):]
    head, _, tail = rest.partition(os.sep)
    return os.path.join(MAPPED[head], tail) if head in MAPPED else os.path.join("gitmail", rest)


def main() -> int:
    os.chdir(ROOT)
    package = stage()
    proc = subprocess.run([sys.executable, "-m", "mypy", *sys.argv[1:], package], capture_output=True, text=True)
    for line in proc.stdout.splitlines():
        path, sep, rest = line.partition(":")
        print(real_path(path) + sep + rest if sep else line)
    sys.stderr.write(proc.stderr)
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
