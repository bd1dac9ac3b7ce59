"""Retrieval: hybrid keyword (SQLite FTS5) + vector (numpy) search over facts, ``MEMORY.md`` and
daily records. :class:`~tiermem.search.engine.SearchEngine` is the entry point."""
