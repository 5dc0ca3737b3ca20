"""The overseer's web view: server-rendered pages at ``/ui`` beside MCP, live through server-sent events.

:func:`gitmail.web.app.build_web` returns the Starlette application that
``gitmail serve`` mounts at ``/ui``. Pages read through the mail facade (the
index answers them), message bodies are rendered from Markdown and
sanitized (:mod:`.render`), access follows ``docs/security.md``
(:mod:`.access`), and pages refresh their lists when the watcher reports a
new commit (:mod:`.events`).
"""
