"""The storage layer: one git repository per project, written without a work tree.

Objects and trees written straight into the object database, snapshots of
``main``, the compare-and-swap engine with group commit, the store of projects,
pack maintenance, the human checkout, history queries and ``fsck``. It knows
records only through :mod:`gitmail.model`; it knows nothing of mail.
"""
