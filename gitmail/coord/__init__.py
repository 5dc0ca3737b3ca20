"""The coordination layer: who may act, and on which files.

Agent and project lookup in a snapshot, seats with epoch fencing, journals,
file reservations with their glob algebra and derived active set, capability
cards, and the commit guard installed into code repositories.
"""
