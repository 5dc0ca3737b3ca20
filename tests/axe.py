"""axe-core, the accessibility checker the browser tests run inside each page of the web view.

The ``axe-core`` npm package is installed with the ordinary ``npm`` into
``build/axe-core`` (ignored by git, reused while its ``axe.min.js`` is
there), under a file lock so parallel test workers fetch it once.
``python -m tests.axe`` fetches it ahead of a test run (CI does, so a failure
to fetch it shows on its own line). :func:`violations` runs it in a
Playwright page: the script is evaluated by the browser's debugging protocol,
which the view's Content-Security-Policy does not govern, so the page under
test is the page as served.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
from collections.abc import Callable, Mapping
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SPEC = "axe-core@4.10"
PREFIX = os.path.join(ROOT, "build", "axe-core")
SCRIPT = os.path.join(PREFIX, "node_modules", "axe-core", "axe.min.js")
SERIOUS = ("serious", "critical")
PHONE = {"width": 390, "height": 844}
LAPTOP = {"width": 1280, "height": 800}
WIDTHS = {"argnames": "viewport", "argvalues": [LAPTOP, PHONE], "ids": ["laptop", "phone"]}
"""The two widths every page is checked at: ``@pytest.mark.parametrize(**axe.WIDTHS)``."""


def ensure() -> str:
    """Install axe-core if needed; the path of ``axe.min.js``. RuntimeError, saying why, if it cannot be."""
    os.makedirs(PREFIX, exist_ok=True)
    with open(PREFIX + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not os.path.exists(SCRIPT):
            npm = shutil.which("npm")
            if npm is None:
                raise RuntimeError("the accessibility checks need npm to fetch axe-core once (apt-get install npm)")
            done = subprocess.run([npm, "install", "--no-audit", "--no-fund", "--silent", "--prefix", PREFIX, SPEC],
                                  capture_output=True, text=True)
            if done.returncode != 0 or not os.path.exists(SCRIPT):
                raise RuntimeError(f"could not install {SPEC} into {PREFIX} (npm exited with {done.returncode}): "
                                   f"{done.stderr.strip()[-2000:]}")
    return SCRIPT


_source: str | None = None


def violations(page: Any) -> list[dict[str, Any]]:
    """The serious and critical axe violations of what ``page`` shows now: rule, impact, and where."""
    global _source
    if _source is None:
        with open(ensure(), encoding="utf-8") as handle:
            _source = handle.read()
    if not page.evaluate("() => typeof window.axe === 'object'"):
        page.evaluate(_source)
    found = page.evaluate("async () => JSON.stringify((await axe.run(document)).violations)")
    return [{"rule": v["id"], "impact": v["impact"], "help": v["help"],
             "where": [" ".join(n["target"]) if isinstance(n["target"], list) else str(n["target"])
                       for n in v["nodes"]][:5]}
            for v in json.loads(found) if v["impact"] in SERIOUS]


def audit(browser: Any, viewport: Mapping[str, int], pages: Mapping[str, Callable[[Any], object]],
          more: Callable[[Any], list[dict[str, Any]]] = lambda tab: []) -> dict[str, list[dict[str, Any]]]:
    """The problems of each page at ``viewport``: its serious axe violations, then what ``more`` finds in it.

    Each page is opened in one tab of a fresh browser context by its
    callable in ``pages`` (name: how to reach it); pages with no problem are
    left out, so a clean site answers ``{}``.
    """
    context = browser.new_context(viewport=dict(viewport))
    tab = context.new_page()
    found = {}
    try:
        for name, reach in pages.items():
            reach(tab)
            problems = violations(tab) + more(tab)
            if problems:
                found[name] = problems
    finally:
        context.close()
    return found


if __name__ == "__main__":
    print(f"axe-core ready: {ensure()}")
