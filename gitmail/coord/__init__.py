"""The coordination layer: who may act, and on which files.

The context every domain operation takes (:mod:`gitmail.coord.context`),
agent and project lookup in a snapshot, the check every write as an agent
passes (:mod:`gitmail.coord.acting`), seats with epoch fencing, journals, file
reservations with their glob algebra (the reservations in force come from the
project's index), capability cards, and the commit guard installed into code
repositories.
"""
