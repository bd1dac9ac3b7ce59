"""The LLM call log (issue 17): every model call tiermem makes, one row per attempt.

Read it through :attr:`tiermem.Memory.calls` (a :class:`CallLog`: ``list(...)``, ``totals(...)``),
``tiermem calls`` and ``tiermem stats``; see ``docs/calls.md``. This package's ``__init__`` stays
light (the config loader imports :mod:`tiermem.calls.prices`); the log itself loads on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tiermem.calls.prices import Price, Prices
from tiermem.calls.records import CALL_OUTCOMES, CALL_PURPOSES, CallRecord, CallTotals
from tiermem.calls.trace import call_purpose, note_attempt, note_parse_failure, note_usage

if TYPE_CHECKING:
    from tiermem.calls.log import CallLog
    from tiermem.calls.wrap import unwrap_model

__all__ = ["CALL_OUTCOMES", "CALL_PURPOSES", "CallLog", "CallRecord", "CallTotals", "Price", "Prices",
           "call_purpose", "note_attempt", "note_parse_failure", "note_usage", "unwrap_model"]


def __getattr__(name: str) -> Any:
    """``CallLog`` and ``unwrap_model`` are imported when first asked for (they need the storage layer)."""
    if name == "CallLog":
        from tiermem.calls.log import CallLog

        return CallLog
    if name == "unwrap_model":
        from tiermem.calls.wrap import unwrap_model

        return unwrap_model
    raise AttributeError(f"module 'tiermem.calls' has no attribute {name!r}")
