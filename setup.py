"""Package discovery, which ``pyproject.toml`` alone cannot express.

Every package under ``gitmail/`` is found automatically, and the top-level
``index/`` and ``hooks/`` folders install as ``gitmail.index`` and
``gitmail.hooks`` (with any subpackages they grow), so the import names stay
unambiguous. Everything else about the build lives in ``pyproject.toml``.
"""

from setuptools import find_packages, setup

MAPPED = {"gitmail.index": "index", "gitmail.hooks": "hooks"}

packages = find_packages(include=["gitmail", "gitmail.*"])
for name, folder in MAPPED.items():
    packages += [name] + [f"{name}.{sub}" for sub in find_packages(folder)]

setup(packages=packages, package_dir={"gitmail": "gitmail", **MAPPED})
