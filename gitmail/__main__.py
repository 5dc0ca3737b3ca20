"""``python -m gitmail`` runs the ``gitmail`` command."""

from gitmail.cli import main

main()
