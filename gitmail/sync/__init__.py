"""The sync layer: archives shared between machines through plain git.

Remotes, fetch-merge-push (:mod:`gitmail.sync.syncer`), the per-record merge
rules and the git merge driver built on them, the checks a hub runs on pushes,
hook installation, and the watcher that notices outside changes to the refs.
"""
