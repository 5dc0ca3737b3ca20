"""The ``gitmail`` command: a thin layer over the library.

Each command module registers its commands on :data:`cli`; every command takes
``--json`` and prints either a human rendering or one JSON document. Expected
failures (:class:`GitmailError`) print their code and advice and exit with 2.
"""

from __future__ import annotations

from . import (
    _app,
    coord_cmds,  # noqa: F401
    file_cmds,  # noqa: F401
    import_cmds,  # noqa: F401
    index_cmds,  # noqa: F401
    mail_cmds,  # noqa: F401
    memory_cmds,  # noqa: F401
    node_cmds,  # noqa: F401
    serve_cmds,  # noqa: F401
    slot_cmds,  # noqa: F401
    store_cmds,  # noqa: F401  (registers commands)
    sync_cmds,  # noqa: F401
)
from ._app import cli


def main() -> None:
    _app.run()


__all__ = ["cli", "main"]
