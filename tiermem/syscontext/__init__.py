"""System context (R57): typed sources with epochs, re-rendered only when their epoch moves."""

from tiermem.syscontext.builder import SOURCE_KINDS, ContextSource, SystemContext, SystemContextResult
from tiermem.syscontext.sources import daily_source, memory_source, plan_source

__all__ = [
    "SOURCE_KINDS",
    "ContextSource",
    "SystemContext",
    "SystemContextResult",
    "daily_source",
    "memory_source",
    "plan_source",
]
