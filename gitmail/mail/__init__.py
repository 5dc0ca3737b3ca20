"""The mail layer: the domain operations agents perform, behind one facade.

:class:`gitmail.mail.facade.Mail` is the entry point the MCP server and the CLI
share; the modules beside it each own one concern (sending, delivery of copies,
mailbox reads, the feed of arrivals, receipts, contacts, agents and their
tokens, projects, idempotency, retention, summaries, attachments). Each
operation takes the :class:`gitmail.coord.context.Context` first.
"""
