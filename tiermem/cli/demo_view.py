"""What ``tiermem demo`` prints (rich), one method per step."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich.console import Console
from rich.panel import Panel
from rich.rule import Rule
from rich.syntax import Syntax
from rich.text import Text

from tiermem.cli.render import fact_table, hit_table

if TYPE_CHECKING:
    from tiermem.memory import Memory
    from tiermem.tiers.context import Session


class DemoView:
    def __init__(self, mem: Memory) -> None:
        self.mem = mem
        self.console = Console()

    def header(self) -> None:
        mem = self.mem
        llm = mem.settings.llm if mem.llm is not None else "none"
        self.console.print(Panel.fit(
            f"[bold]tiermem demo[/bold]\nroot: {mem.root}\nembedder: {mem.embedder.model_id}\nLLM: {llm}",
            border_style="cyan"))
        self.console.print(Rule("1. Context tier: live sessions"))

    def session_done(self, thread: str, session: Session) -> None:
        summary = " ".join(session.summary.split())[:160]
        self.console.print(f"[bold]{thread}[/bold]: {len(session.messages)} messages live, "
                           f"{session.token_count} tokens; trimmed so far: {summary or '(nothing)'}")

    def consolidate(self, days: int) -> None:
        mem = self.mem
        if mem.llm is None:
            self.console.print("[yellow]No LLM configured: fact extraction and Deep Dream skipped.[/yellow]")
            return
        self.console.print(Rule("Extraction and Deep Dream"))
        mem.queue.flush(timeout=600)
        result = mem.deep_dream(lookback_days=days)
        self.console.print(f"Deep Dream: {result.status} ({result.reason})")

    def tiers(self) -> None:
        mem = self.mem
        self.console.print(Rule("2. Daily tier: the journal"))
        for day in mem.daily.days():
            path = mem.daily.path_for(day)
            lines = path.read_text(encoding="utf-8").splitlines()
            self.console.print(f"{path.relative_to(mem.root)}: {len(lines)} lines")
        last = mem.daily.days()[-1] if mem.daily.days() else None
        if last is not None:
            text = mem.daily.read(last)
            self.console.print(Syntax("\n".join(text.splitlines()[:24]), "markdown", word_wrap=True))
        self.console.print(Rule("3. Core tier: facts and MEMORY.md"))
        fact_table(mem.facts.list())
        items = mem.core.items()
        self.console.print(f"MEMORY.md: {len(items)} bullets" if items else
                           "MEMORY.md: empty until a Deep Dream consolidates the journal")

    def searches(self, queries: Sequence[str]) -> None:
        self.console.print(Rule("4. Search across all tiers (hybrid keyword + vector)"))
        for query in queries:
            self.console.print(f"[bold]> {query}[/bold]")
            hit_table(self.mem.search(query, k=3))

    def injection(self, query: str) -> None:
        self.console.print(Rule("5. Injection text for the system prompt"))
        text = self.mem.format_for_injection(max_tokens=400, query=query)
        self.console.print(Panel(Text(text or "(empty)"), title=f"query-aware: {query}", border_style="green"))

    def footer(self, hint: str) -> None:
        mem = self.mem
        self.console.print(Rule())
        if mem.llm is None:
            self.console.print(f"To extract facts and dream: {hint}")
        self.console.print(f"Try: tiermem --root {mem.root} search \"Lisbon\"   |   tiermem --root {mem.root} "
                           "daily   |   tiermem --root {root} inject".replace("{root}", str(mem.root)))
