"""Bringing another system's store into gitmail archives.

An importer reads a store written by another program (its database and the
files beside it), maps what it holds to gitmail's records, and writes them
through the engine, so every rule a record obeys here holds for imported
ones too: the same paths, the same strict parsing, the same commits by
compare-and-swap. It knows the mail domain (how a message is delivered, how
a token is kept, how another project's agent is named) and nothing of sync
or of the faces; the CLI runs it (``gitmail import``).
"""
