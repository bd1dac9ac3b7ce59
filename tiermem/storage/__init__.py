"""Persistence: the SQLite database and one repository module per stored concept."""
