"""Counts in words: ``counted(1, "fact")`` is "1 fact", ``counted(2, "fact")`` is "2 facts".

Every count a person reads (the CLI, the doctor and purge reports, the demo) goes through
:func:`counted`, so none says "1 facts".
"""

from __future__ import annotations


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``n`` and ``noun``, singular for exactly one; ``plural`` where adding "s" is wrong
    (``counted(n, "history entry", "history entries")``)."""
    return f"{n} {for_count(n, noun, plural if plural is not None else noun + 's')}"


def for_count(n: int, one: str, many: str) -> str:
    """``one`` for exactly one, else ``many``: the verb that goes with a count (``is`` / ``are``)."""
    return one if n == 1 else many
