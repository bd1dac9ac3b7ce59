"""Placeholder (issue 17)."""
