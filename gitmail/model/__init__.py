"""The model layer: what a record is, independent of where it is stored.

Errors and their stable codes, timestamps and the hybrid logical clock, record
ids, agent names, the YAML/Markdown codec and the record classes with their
archive paths. Nothing here touches git; every other layer builds on it.
"""
