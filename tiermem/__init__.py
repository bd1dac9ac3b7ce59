"""tiermem: memory for LLM agents that survives the session.

Context (the live session) -> Daily (a Markdown journal) -> Core (``MEMORY.md`` and typed facts),
with hybrid keyword + vector search and a token-budgeted injection text.
"""

from tiermem.errors import (
    ConfigError,
    DreamError,
    ExtractionError,
    FactNotFound,
    ImportConflict,
    InvalidInput,
    NotFound,
    ProviderError,
    StorageError,
    StoreDamaged,
    TiermemError,
    UnsafePath,
)
from tiermem.memory import Memory
from tiermem.types import CATEGORIES, AuditEntry, Fact, Scope, SearchHit

__version__ = "0.1.0"

__all__ = [
    "CATEGORIES",
    "AuditEntry",
    "ConfigError",
    "DreamError",
    "ExtractionError",
    "Fact",
    "FactNotFound",
    "ImportConflict",
    "InvalidInput",
    "Memory",
    "NotFound",
    "ProviderError",
    "Scope",
    "SearchHit",
    "StorageError",
    "StoreDamaged",
    "TiermemError",
    "UnsafePath",
]
