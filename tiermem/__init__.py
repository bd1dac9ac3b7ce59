"""tiermem: memory for LLM agents that survives the session.

Context (the live session) -> Daily (a Markdown journal) -> Core (``MEMORY.md`` and typed facts),
with hybrid keyword + vector search and a token-budgeted injection text.
"""

import importlib
from typing import TYPE_CHECKING, Any

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

if TYPE_CHECKING:
    from tiermem.memory import Memory
    from tiermem.types import CATEGORIES, AuditEntry, Fact, Scope, SearchHit

__version__ = "0.1.0"

# Imported on first use, so ``import tiermem.<module>`` stays light for processes that need one
# module fast (the coding agents' hooks: tiermem.agents.server_client, P8).
_LAZY = {"Memory": "tiermem.memory", "CATEGORIES": "tiermem.types", "AuditEntry": "tiermem.types",
         "Fact": "tiermem.types", "Scope": "tiermem.types", "SearchHit": "tiermem.types"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'tiermem' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value

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
