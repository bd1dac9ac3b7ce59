"""System context (R57): typed sources with epochs; only moved epochs re-render; byte-stable text."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Callable
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pytest

from tiermem import InvalidInput, Memory, NotFound
from tiermem.storage.epochs import memory_epoch
from tiermem.syscontext import ContextSource, SystemContext, daily_source
from tiermem.testing import FakeClock, HashEmbedder
from tiermem.tokens import count_tokens
from tiermem.types import Scope

pytestmark = pytest.mark.usefixtures("backend")


class Counted:
    """A custom source whose text and epoch the test moves; counts renders."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.version = 0
        self.renders = 0

    def render(self) -> str:
        self.renders += 1
        return self.text

    def epoch(self) -> object:
        return self.version

    def set(self, text: str) -> None:
        self.text = text
        self.version += 1


def _context(**sources: Counted) -> SystemContext:
    ctx = SystemContext()
    for name, source in sources.items():
        ctx.add_source(name, source.render, source.epoch)
    return ctx


# --- the builder --------------------------------------------------------------------------------
def test_only_sources_whose_epoch_moved_re_render() -> None:
    a, b = Counted("alpha"), Counted("beta")
    ctx = _context(a=a, b=b)
    first = ctx.build()
    assert first.text == "alpha\n\nbeta"
    assert first.changed == ["a", "b"] and first.rerendered == ["a", "b"]
    second = ctx.build()
    assert second.text == first.text and second.text.encode() == first.text.encode()
    assert second.changed == [] and second.rerendered == [] and second.unchanged
    assert (a.renders, b.renders) == (1, 1)
    b.set("beta 2")
    third = ctx.build()
    assert third.text == "alpha\n\nbeta 2"
    assert third.changed == ["b"] and third.rerendered == ["b"]
    assert (a.renders, b.renders) == (1, 2)


def test_unchanged_text_is_the_same_string() -> None:
    a = Counted("alpha")
    ctx = _context(a=a)
    first = ctx.build()
    a.version += 1  # the epoch moves but the text comes out the same
    again = ctx.build()
    assert again.rerendered == ["a"] and again.changed == [] and again.text is first.text
    assert ctx.build().text is first.text


def test_sections_keep_the_order_of_addition_and_empty_ones_are_left_out() -> None:
    a, b, c = Counted("  alpha\n"), Counted(""), Counted("gamma")
    ctx = _context(c=c, a=a, b=b)
    result = ctx.build()
    assert result.text == "gamma\n\nalpha"
    assert result.sections == {"c": "gamma", "a": "alpha", "b": ""}
    b.set("beta")
    result = ctx.build()
    assert result.text == "gamma\n\nalpha\n\nbeta" and result.changed == ["b"]


def test_remove_and_invalidate() -> None:
    a, b = Counted("alpha"), Counted("beta")
    ctx = _context(a=a, b=b)
    ctx.build()
    ctx.remove_source("a")
    result = ctx.build()
    assert result.text == "beta" and result.changed == ["a"] and result.rerendered == []
    ctx.invalidate("b")
    result = ctx.build()
    assert result.rerendered == ["b"] and result.changed == [] and b.renders == 2
    ctx.invalidate()
    assert ctx.build().rerendered == ["b"]
    with pytest.raises(NotFound):
        ctx.remove_source("a")
    with pytest.raises(NotFound):
        ctx.invalidate("nope")
    assert ctx.names == ["b"]


def test_bad_sources_are_invalid_input() -> None:
    ctx = SystemContext()
    ctx.add_source("a", lambda: "x", lambda: 1)
    with pytest.raises(InvalidInput):
        ctx.add_source("a", lambda: "y", lambda: 1)  # duplicate name
    for name in ("", "a b", "../x", "x" * 65, 5):
        with pytest.raises(InvalidInput):
            ctx.add_source(name, lambda: "y", lambda: 1)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput):
        ctx.add_source("k", lambda: "y", lambda: 1, kind="weird")
    with pytest.raises(InvalidInput):
        ctx.add_source("n", "text", lambda: 1)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput):
        ctx.add("not a source")  # type: ignore[arg-type]
    assert ctx.names == ["a"]


def test_a_failing_source_leaves_the_previous_state() -> None:
    a = Counted("alpha")
    state: dict[str, Any] = {"value": "beta", "version": 0}

    def render_b() -> Any:
        return state["value"]

    ctx = SystemContext()
    ctx.add_source("a", a.render, a.epoch)
    ctx.add_source("b", render_b, lambda: state["version"])
    first = ctx.build()
    a.set("alpha 2")
    state.update(value=b"bytes", version=1)
    with pytest.raises(InvalidInput):
        ctx.build()
    state.update(value="beta", version=2)
    result = ctx.build()  # compared with the last good build, not the failed one
    assert result.changed == ["a"] and result.text == "alpha 2\n\nbeta" and first.text == "alpha\n\nbeta"


def test_epochs_that_cannot_compare_count_as_moved() -> None:
    class Odd:
        def __eq__(self, other: object) -> bool:
            raise TypeError("no comparison")

        __hash__ = None  # type: ignore[assignment]

    renders: list[int] = []
    ctx = SystemContext([ContextSource("odd", "custom", lambda: str(len(renders.append(1) or renders)), Odd)])
    ctx.build()
    ctx.build()
    assert len(renders) == 2


def test_builds_from_many_threads_agree() -> None:
    a = Counted("alpha")
    ctx = _context(a=a)
    texts: list[str] = []
    barrier = threading.Barrier(8)

    def work() -> None:
        barrier.wait()
        for _ in range(50):
            texts.append(ctx.build().text)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert set(texts) == {"alpha"} and len(texts) == 400 and a.renders == 1


# --- the daily source ---------------------------------------------------------------------------
def test_daily_source_window_truncation_and_hash_epoch() -> None:
    days = {date(2026, 3, 14): "# Daily Memory: 2026-03-14\n\n## Notes (09:00)\n- today " + "word " * 400,
            date(2026, 3, 13): "# Daily Memory: 2026-03-13\n\n## Notes (09:00)\n- yesterday",
            date(2026, 3, 12): "# Daily Memory: 2026-03-12\n\n## Notes (09:00)\n- too old"}
    reads: list[date] = []

    def read(day: date) -> str:
        reads.append(day)
        return days.get(day, "")

    today = {"value": date(2026, 3, 14)}
    source = daily_source(read, lambda: today["value"], days=2, max_tokens=100)
    text = source.render()
    assert text.startswith("Recent Daily Notes:\n\n# Daily Memory: 2026-03-14") and text.endswith("\n...")
    assert count_tokens(text) <= 100 and "too old" not in text
    epoch = source.epoch()
    assert source.epoch() == epoch
    days[date(2026, 3, 13)] += "\n- more"
    assert source.epoch() != epoch
    today["value"] = date(2026, 3, 13)
    assert "too old" in source.render()
    with pytest.raises(InvalidInput):
        daily_source(read, lambda: today["value"], days=0)


# --- wired to a Memory --------------------------------------------------------------------------
def test_memory_system_context_reports_what_changed(mem: Memory, clock: FakeClock) -> None:
    first = mem.system_context()
    assert first.changed == ["memory", "plan", "daily"] and first.text == ""
    assert mem.system_context().changed == []
    mem.facts.add("Prefers dark mode", "preference")
    result = mem.system_context()
    assert result.changed == ["memory"] and result.rerendered == ["memory"]
    assert result.text == "Facts:\n- [preference | 1.00] Prefers dark mode"
    plan = mem.plans.start("Ship v1", ["write tests", "release"])
    result = mem.system_context()
    assert result.changed == ["plan"] and result.rerendered == ["plan"]
    assert result.text.endswith("Current Plan:\n" + plan.continuation_prompt())
    mem.plans.check(plan.id, 0)
    result = mem.system_context()
    assert result.changed == ["plan"] and "Next: release (item 1)" in result.text
    stable = mem.system_context()
    assert stable.changed == [] and stable.rerendered == [] and stable.text is result.text
    assert stable.text.startswith("Facts:\n") and "Current Plan:" in stable.text


def test_summaries_move_the_memory_epoch(mem: Memory) -> None:
    mem.system_context()
    mem.facts.set_summaries({"workContext": "Builds a compiler"})
    result = mem.system_context()
    assert result.changed == ["memory"] and "- Work: Builds a compiler" in result.text


def test_memory_epoch_moves_on_every_write_of_the_scope_only(root: Path, clock: FakeClock) -> None:
    with Memory(root, embedder=HashEmbedder(), clock=clock) as mem, \
            Memory(root, embedder=HashEmbedder(), clock=clock, user_id="bob") as bob:
        seen = [memory_epoch(mem.db, mem.scope)]
        fact = mem.facts.add("one")
        assert fact is not None
        seen.append(memory_epoch(mem.db, mem.scope))
        mem.facts.update(fact.id, confidence=0.7)
        seen.append(memory_epoch(mem.db, mem.scope))
        mem.facts.delete(fact.id)
        seen.append(memory_epoch(mem.db, mem.scope))
        assert seen == sorted(set(seen)) and len(seen) == 4
        bob.facts.add("bob's fact")
        assert memory_epoch(mem.db, mem.scope) == seen[-1]
        assert memory_epoch(mem.db, Scope("bob", "default")) >= 1


def test_other_scopes_do_not_re_render(root: Path, clock: FakeClock) -> None:
    with Memory(root, embedder=HashEmbedder(), clock=clock) as mem, \
            Memory(root, embedder=HashEmbedder(), clock=clock, agent_name="other") as other:
        mem.system_context()
        other.facts.add("not mine")
        other.plans.start("not mine", ["x"])
        assert mem.system_context().rerendered == []


_ADDER = """
import sys
from tiermem import Memory
from tiermem.testing import HashEmbedder
with Memory(sys.argv[1], embedder=HashEmbedder()) as m:
    m.facts.add("Written by another process")
"""


def test_writes_from_another_process_move_the_epoch(mem: Memory, root: Path) -> None:
    before = mem.system_context()
    subprocess.run([sys.executable, "-c", _ADDER, str(root)], check=True, timeout=60)
    result = mem.system_context()
    assert result.changed == ["memory"] and "Written by another process" in result.text
    assert before.text == ""


def test_core_file_edit_moves_the_memory_epoch(mem: Memory, root: Path) -> None:
    mem.system_context()
    (root / "MEMORY.md").write_text("- Edited by hand\n", encoding="utf-8")
    result = mem.system_context()
    assert "memory" in result.rerendered and result.text == "Core Memory:\n- Edited by hand"


def test_a_hand_edit_moves_the_epoch_even_with_the_same_size_and_mtime(mem: Memory) -> None:
    mem.core.write("- Lives in Lyon\n")
    first = mem.system_context()
    assert first.text == "Core Memory:\n- Lives in Lyon"
    stat = mem.core.path.stat()
    mem.core.path.write_text("- Lives in Bonn\n", encoding="utf-8")  # same size
    os.utime(mem.core.path, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # and the same mtime
    result = mem.system_context()
    assert result.changed == ["memory"] and result.text == "Core Memory:\n- Lives in Bonn"


# the file is the store only on SQLite: on PostgreSQL a missing mirror is written again from the database
@pytest.mark.sqlite_only
def test_deleting_memory_md_empties_the_core_section(mem: Memory) -> None:
    mem.core.write("- Lives in Lyon\n")
    assert mem.system_context().text == "Core Memory:\n- Lives in Lyon"
    mem.core.path.unlink()
    assert mem.system_context().text == ""


def test_daily_notes_source_follows_the_files_and_the_date(mem: Memory, root: Path, clock: FakeClock) -> None:
    mem.system_context()
    mem.daily.append("Session Notes", ["user: wants the parser ported"])
    result = mem.system_context()
    assert result.changed == ["daily"]
    assert "Recent Daily Notes:\n\n# Daily Memory: 2026-03-14" in result.text
    assert "wants the parser ported" in result.text
    assert mem.system_context().changed == []
    clock.advance(86400)  # tomorrow: yesterday is still in the window
    result = mem.system_context()
    assert result.rerendered == ["daily"] and result.changed == []
    clock.advance(86400)  # two days on: it left the window
    result = mem.system_context()
    assert result.changed == ["daily"] and "parser" not in result.text


def test_custom_sources_on_the_memory_builder(mem: Memory) -> None:
    tool = Counted("Tools: grep, sed")
    mem.system_context_builder().add_source("tools", tool.render, tool.epoch)
    first = mem.system_context()
    assert first.text == "Tools: grep, sed" and "tools" in first.changed
    tool.set("Tools: grep")
    result = mem.system_context()
    assert result.changed == ["tools"] and result.rerendered == ["tools"] and tool.renders == 2
    assert mem.system_context_builder() is mem.system_context_builder()


def test_same_memory_gives_the_same_bytes_in_a_fresh_instance(root: Path, clock: FakeClock) -> None:
    def build(setup: Callable[[Memory], None] | None = None) -> str:
        with Memory(root, embedder=HashEmbedder(), clock=clock, timezone="UTC") as m:
            if setup:
                setup(m)
            return m.system_context().text

    def setup(m: Memory) -> None:
        m.facts.add("Prefers tabs", "preference")
        m.plans.start("Refactor", ["split module", "add tests"])

    first = build(setup)
    assert first and build() == first


def test_plan_section_disappears_when_no_plan_is_active(mem: Memory) -> None:
    plan = mem.plans.start("p", ["x"])
    assert "Current Plan:" in mem.system_context().text
    mem.plans.complete(plan.id)
    result = mem.system_context()
    assert result.changed == ["plan"] and "Current Plan:" not in result.text


def test_fake_clock_date_uses_configured_timezone(root: Path) -> None:
    clock = FakeClock(datetime(2026, 3, 14, 23, 30, tzinfo=UTC))
    with Memory(root, embedder=HashEmbedder(), clock=clock, timezone="Asia/Tokyo") as mem:
        mem.daily.append("Notes", ["late entry"])
        assert "# Daily Memory: 2026-03-15" in mem.system_context().text
