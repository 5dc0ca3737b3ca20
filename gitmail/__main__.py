"""``python -m gitmail`` runs the ``gitmail`` command."""

from .cli import main

main()
