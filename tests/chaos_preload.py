"""Imported by the chaos test's fork server only: load tiermem once, before the writers fork."""

from chaos_helpers import preload

preload()
