"""Rich tables for the CLI (one place for presentation)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from tiermem.clock import utc_iso
from tiermem.plans.plan import Plan
from tiermem.search.thread import LIFTED_LEGEND, LIFTED_MARK
from tiermem.types import AuditEntry, Fact, SearchHit

console = Console(soft_wrap=False)


def fact_table(facts: Sequence[Fact]) -> None:
    if not facts:
        console.print("[dim]no facts[/dim]")
        return
    table = Table(show_lines=False)
    for column in ("id", "category", "conf.", "content", "updated"):
        table.add_column(column, overflow="fold")
    for f in facts:
        table.add_row(f.id, f.category, f"{f.confidence:.2f}", f.content, utc_iso(f.updated_at)[:19] + "Z")
    console.print(table)


def history_table(entries: Sequence[AuditEntry]) -> None:
    if not entries:
        console.print("[dim]no history[/dim]")
        return
    table = Table()
    for column in ("at", "action", "fact", "content", "reason"):
        table.add_column(column, overflow="fold")
    for e in entries:
        table.add_row(utc_iso(e.at)[:19] + "Z", e.action, e.fact_id or "", (e.content or "")[:80], e.reason)
    console.print(table)


def hit_score(hit: SearchHit) -> str:
    """A hit's score as shown, with the mark of a hit the conversation lifted (:func:`lifted_legend`)."""
    return f"{hit.score:.3f}" + (f" {LIFTED_MARK}" if hit.lifted_by_thread else "")


def lifted_legend(hits: Sequence[SearchHit], out: Console = console) -> None:
    """The line that explains the mark, under a list of hits that has one."""
    if any(hit.lifted_by_thread for hit in hits):
        out.print(Text(LIFTED_LEGEND, style="dim"))


def hit_table(hits: Sequence[SearchHit]) -> None:
    if not hits:
        console.print("[dim]no hits[/dim]")
        return
    table = Table()
    for column in ("score", "tier", "source", "text"):
        table.add_column(column, overflow="fold")
    for h in hits:
        tier = h.tier + (" (pending)" if h.provisional else "")
        table.add_row(hit_score(h), tier, h.ref, h.text)
    console.print(table)
    lifted_legend(hits)


def plan_table(plans: Sequence[Plan]) -> None:
    if not plans:
        console.print("[dim]no plans[/dim]")
        return
    table = Table()
    for column in ("id", "status", "done", "title", "updated"):
        table.add_column(column, overflow="fold")
    for plan in plans:
        done, total = plan.progress
        table.add_row(plan.id, plan.status, f"{done}/{total}", plan.title, utc_iso(plan.updated_at)[:19] + "Z")
    console.print(table, markup=False)


def stats_table(data: Mapping[str, Any]) -> None:
    """``Memory.stats()`` as two columns; a nested count (facts by category) as indented rows."""
    table = Table(show_header=False)
    table.add_column("what", style="bold")
    table.add_column("value", overflow="fold")
    for key, value in data.items():
        if isinstance(value, Mapping):
            for name, count in value.items():
                table.add_row(f"  {name}", str(count))
            continue
        table.add_row(key.replace("_", " "), "-" if value is None else str(value))
    console.print(table, markup=False)
