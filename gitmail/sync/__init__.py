"""The sync layer: archives shared between machines through plain git.

Remotes (:mod:`gitmail.sync.remotes`), fetch-merge-push
(:mod:`gitmail.sync.syncer`) and its interval runner for servers, the
per-record merge rules and the git merge driver built on them, the checks a
hub runs on pushes, hook installation, and the watcher that notices outside
changes to the refs.
"""
