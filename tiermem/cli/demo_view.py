"""What ``tiermem demo`` prints (rich), one method per step of the loop."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.panel import Panel
from rich.rule import Rule
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text

from tiermem.cli.render import fact_table, hit_score, lifted_legend
from tiermem.plural import counted

if TYPE_CHECKING:
    from tiermem.cli.demo import Question
    from tiermem.dream.runner import DreamResult
    from tiermem.memory import Memory
    from tiermem.types import AuditEntry, SearchHit

SCRIPTED_NOTICE = "scripted model replies; set TIERMEM_LLM for a real model"
TOP_K = 3
JOURNAL_EXCERPT_LINES = 30
_SHOWN_ACTIONS = {"added": "+", "deleted": "-", "evicted": "-", "skipped": "=", "dropped": "x"}


def _fold(text: str) -> str:
    return " ".join(text.casefold().split())


@dataclass(frozen=True)
class StoreCounts:
    """What a store holds, to tell what one run added."""

    days: int
    records: int
    facts: int
    core_bullets: int

    @classmethod
    def of(cls, mem: Memory) -> StoreCounts:
        days = mem.daily.days()
        records = sum(1 for day in days for line in mem.daily.read(day).splitlines() if line.startswith("- "))
        return cls(len(days), records, mem.facts.count(), len(mem.core.items()))

    @property
    def empty(self) -> bool:
        return not (self.days or self.facts or self.core_bullets)


def answer_rank(hits: Sequence[SearchHit], answer: str) -> int | None:
    """The 1-based rank of the first hit whose text holds ``answer`` (casefold), or None."""
    return next((rank for rank, hit in enumerate(hits, 1) if _fold(answer) in _fold(hit.text)), None)


class DemoView:
    def __init__(self, mem: Memory, scripted: bool) -> None:
        self.mem = mem
        self.scripted = scripted
        self.console = Console()
        self.before = StoreCounts.of(mem)
        self.start_mark = self.audit_mark()

    def header(self) -> None:
        mem = self.mem
        llm = SCRIPTED_NOTICE if self.scripted else mem.settings.llm
        self.console.print(Panel.fit(
            f"[bold]tiermem demo[/bold]\nroot: {mem.root}\nembedder: {mem.embedder.model_id}\nLLM: {llm}",
            border_style="cyan"))
        b = self.before
        if not b.empty:
            self.console.print(f"Found an existing store here: {counted(b.days, 'daily file')} "
                               f"({counted(b.records, 'record')}), {counted(b.facts, 'fact')}, MEMORY.md with "
                               f"{counted(b.core_bullets, 'bullet')}. "
                               "Replaying the same chat adds nothing twice.")
        self.console.print(Rule("1. Sessions (Context tier) -> Daily journal -> extraction"))

    # --- 1. sessions -----------------------------------------------------------------------
    def audit_mark(self) -> int:
        history = self.mem.facts.history(limit=1)
        return history[-1].id if history else 0

    def session_done(self, thread: str, rows: Sequence[dict[str, Any]], live: int, tokens: int,
                     audit_mark: int, drained: bool) -> None:
        span = f"day {rows[0]['day'] + 1}, {rows[0]['time']}-{rows[-1]['time']}"
        self.console.print(f"[bold]{thread}[/bold] ({span}): {counted(len(rows), 'message')}; {len(rows) - live} "
                           f"trimmed into the journal as the session grew, {live} ({counted(tokens, 'token')}) "
                           "flushed when it ended")
        entries = [e for e in self.mem.facts.history() if e.id > audit_mark]
        for entry in entries:
            self._audit_line(entry)
        summaries = sorted({e.reason.split()[0] for e in entries if e.action == "summary"})
        if summaries:
            self.console.print(f"    summaries updated: {', '.join(summaries)}")
        if not drained:
            self.console.print("    [yellow]extraction did not finish: the conversation stays queued "
                               "(`tiermem queue` shows why)[/yellow]")

    def _audit_line(self, entry: AuditEntry) -> None:
        mark = _SHOWN_ACTIONS.get(entry.action)
        if mark is None:
            return
        text = Text(f"    {mark} {entry.action}: ")
        text.append(entry.content or "")
        if entry.action != "added":
            text.append(f"  ({entry.reason})", style="dim")
        self.console.print(text)

    def added_by_this_run(self) -> None:
        after = StoreCounts.of(self.mem)
        added = sum(1 for e in self.mem.facts.history() if e.id > self.start_mark and e.action == "added")
        self.console.print(f"This run added {counted(after.records - self.before.records, 'journal record')} and "
                           f"{counted(added, 'fact')} (the store now holds {counted(after.records, 'record')} and "
                           f"{counted(after.facts, 'fact')}).")

    # --- 2. and 3. the journal and the facts -------------------------------------------------
    def journal(self) -> None:
        mem = self.mem
        self.console.print(Rule("2. Daily tier: the journal"))
        days = mem.daily.days()
        for day in days:
            path = mem.daily.path_for(day)
            count = len(path.read_text(encoding="utf-8").splitlines())
            self.console.print(f"{path.relative_to(mem.root)}: {counted(count, 'line')}")
        if days:
            lines = mem.daily.read(days[-1]).splitlines()
            shown = "\n".join(lines[:JOURNAL_EXCERPT_LINES])
            if len(lines) > JOURNAL_EXCERPT_LINES:
                shown += f"\n... ({len(lines) - JOURNAL_EXCERPT_LINES} more lines)"
            self.console.print(Syntax(shown, "markdown", word_wrap=True))

    def facts(self) -> None:
        self.console.print(Rule("3. Core tier: facts (remembered and extracted)"))
        fact_table(self.mem.facts.list())
        removed = [e for e in self.mem.facts.history() if e.action == "deleted"]
        for entry in removed:
            self.console.print(Text(f"removed: {entry.content} ({entry.reason}); tombstoned, "
                                    "so later extraction does not add it back"))

    # --- 4. the dream --------------------------------------------------------------------------
    def dream(self, result: DreamResult) -> None:
        self.console.print(Rule("4. Deep Dream: the journal consolidated into MEMORY.md"))
        self.console.print(Text(f"Deep Dream: {result.status}" + (f" - {result.reason}" if result.reason else "")))
        if result.status != "skipped":
            self.console.print(f"{counted(result.bullets, 'bullet')} kept; support check: " + (
                f"{len(result.dropped)} dropped as not supported by the journal:" if result.dropped
                else "every bullet is supported by the journal"))
        for bullet in result.dropped:
            self.console.print(Text(f"    dropped: {bullet.text}  ({bullet.reason})"))
        if result.diary_path:
            self.console.print(f"diary: {result.diary_path}")
        text = self.mem.core.read() if self.mem.core.path.exists() else ""
        self.console.print(Syntax(text.rstrip() or "(MEMORY.md is empty)", "markdown", word_wrap=True))

    # --- 5. the next session -----------------------------------------------------------------
    def next_session(self, mem: Memory, questions: Sequence[Question]) -> None:
        self.mem = mem
        self.console.print(Rule("5. The next session: a new Memory on the same root (as after a restart)"))
        for question in questions:
            self._ask(question)
        query = questions[0].text
        self.console.print(Panel(Text(mem.format_for_injection(query=query) or "(empty)"),
                                 title=f"mem.format_for_injection(query={query!r})", border_style="green"))
        self.console.print(Panel(Text(mem.system_context().text or "(empty)"), title="mem.system_context().text",
                                 border_style="green"))

    def _ask(self, question: Question) -> None:
        hits = self.mem.search(question.text, k=TOP_K)
        self.console.print(Text(f"> {question.text}", style="bold"))
        table = Table()
        for column in ("rank", "score", "tier", "source", "text"):
            table.add_column(column, overflow="fold")
        for rank, hit in enumerate(hits, 1):
            table.add_row(str(rank), hit_score(hit), hit.tier, hit.ref, hit.text)
        self.console.print(table if hits else Text("no hits", style="dim"))
        lifted_legend(hits, self.console)
        found = answer_rank(hits, question.answer)
        if found is None:
            self.console.print(Text(f"answer ({question.answer!r}) not in the top {TOP_K}", style="red"))
        else:
            self.console.print(Text(f"answer ({question.answer!r}) at rank {found} ({hits[found - 1].tier})",
                                    style="green"))

    def footer(self, hint: str, last_day: date) -> None:
        root = self.mem.root
        self.console.print(Rule())
        if self.scripted:
            self.console.print(f"The model replies were scripted (tiermem/data/demo_replies.json). "
                               f"For a real model set {hint}")
        self.console.print(f"Try: tiermem --root {root} search \"Lisbon\"   |   tiermem --root {root} daily "
                           f"{last_day.isoformat()}   |   tiermem --root {root} inject")
