"""Core memory reaches every prompt (issue 13, R21): after a Deep Dream and after a hand edit of
``MEMORY.md``, in ``format_for_injection``, ``system_context()``, ``tiermem inject`` and the MCP
resource ``memory://injection``."""

from __future__ import annotations

import json
import re
from pathlib import Path

import anyio
import pytest
from click.testing import CliRunner
from dream_helpers import GOOD_REPLY, NOW, PRIOR_MEMORY, open_memory, seed
from mcp import Client

from tiermem import Memory
from tiermem.cli.main import cli
from tiermem.mcp.server import build_server
from tiermem.testing import FakeClock

pytestmark = pytest.mark.usefixtures("backend")

FLOOR = 0.3  # an explicit injection floor through the setting the injection text reads (search_inject_min_score)
ENV = {"TIERMEM_EMBEDDER": "hash", "TIERMEM_TIMEZONE": "UTC", "TIERMEM_SEARCH_INJECT_MIN_SCORE": str(FLOOR)}
PRIOR_CORE = (
    "Core Memory:\n"
    "- Works as a backend engineer at Acme Corp.\n"
    "- Main language at work is Go.\n"
    "- Lives in Lyon with partner Claire.\n"
    "- Has a cat named Pixel."
)
DREAMT_CORE = (
    "Core Memory:\n"
    "- Works as a backend engineer at Acme Corp.\n"
    "- Main language at work is Go.\n"
    "- Accepted an offer from Siemens as a platform engineer, starting April 1.\n"
    "- Lives in Lyon with partner Claire; moving to Munich at the end of March.\n"
    "- Claire found a flat in Schwabing with 3 rooms.\n"
    "- Has a cat named Pixel."
)
HAND_EDIT = "## Work\n- Starts at Siemens on April 1.\n- Rides a bike to work.\n"
HAND_CORE = "Core Memory:\n- Starts at Siemens on April 1.\n- Rides a bike to work."
SIEMENS_NOTE = re.compile(r"^- 2026-03-13 \(memory/2026-03-13\.md#L\d+(?:-L\d+)?\): .*offer from Siemens", re.M)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(NOW)


def dreamt(root: Path, clock: FakeClock) -> Memory:
    """A store whose MEMORY.md a Deep Dream (scripted reply) has just rewritten."""
    mem, llm = open_memory(root, clock, [GOOD_REPLY], search_inject_min_score=FLOOR)
    seed(mem)
    assert mem.deep_dream(lookback_days=2).status == "written"
    assert llm.remaining == []
    return mem


def test_system_context_shows_core_before_and_after_a_dream(root: Path, clock: FakeClock) -> None:
    mem, _ = open_memory(root, clock, [GOOD_REPLY])
    with mem:
        mem.facts.add("Prefers dark mode", "preference", 0.95)
        seed(mem)
        before = mem.system_context()
        assert before.sections["memory"] == PRIOR_CORE + "\n\nFacts:\n- [preference | 0.95] Prefers dark mode"
        assert mem.system_context().changed == []
        assert mem.deep_dream(lookback_days=2).status == "written"
        after = mem.system_context()
        assert "memory" in after.changed and "memory" in after.rerendered
        assert after.sections["memory"] == DREAMT_CORE + "\n\nFacts:\n- [preference | 0.95] Prefers dark mode"
        assert "Relevant notes:" not in after.text  # system_context has no query
        assert mem.system_context().text is after.text  # byte-stable while nothing changes


def test_query_puts_the_relevant_core_bullet_first_and_cites_the_journal(root: Path, clock: FakeClock) -> None:
    with dreamt(root, clock) as mem:
        text = mem.format_for_injection(query="When does the Siemens job start?")
        core = text.split("\n\n")[0].splitlines()
        assert core[1] == "- Accepted an offer from Siemens as a platform engineer, starting April 1."
        assert sorted(core) == sorted(DREAMT_CORE.splitlines())
        assert text.split("\n\n")[1].startswith("Relevant notes:\n") and SIEMENS_NOTE.search(text)


def test_tiermem_inject_shows_core_after_a_dream_and_after_a_hand_edit(root: Path, clock: FakeClock) -> None:
    dreamt(root, clock).close()

    def inject(*args: str) -> str:
        result = CliRunner().invoke(cli, ["--root", str(root), "inject", *args], env=ENV)
        assert result.exit_code == 0, result.output
        return result.output

    assert inject() == DREAMT_CORE + "\n"
    queried = inject("--query", "When does the Siemens job start?")
    assert queried.startswith("Core Memory:\n- Accepted an offer from Siemens") and SIEMENS_NOTE.search(queried)
    (root / "MEMORY.md").write_text(HAND_EDIT, encoding="utf-8")
    assert inject() == HAND_CORE + "\n"
    assert json.loads(inject("--json")) == {"text": HAND_CORE}
    assert inject("--query", "bike").startswith("Core Memory:\n- Rides a bike to work.\n- Starts at Siemens")


def test_mcp_injection_resource_shows_core_after_a_dream_and_after_a_hand_edit(root: Path, clock: FakeClock) -> None:
    with dreamt(root, clock) as mem:
        texts: list[str] = []

        async def main() -> None:
            with anyio.fail_after(30):
                async with Client(build_server(mem)) as client:
                    for edit in (None, HAND_EDIT):
                        if edit is not None:
                            mem.core.path.write_text(edit, encoding="utf-8")
                        result = await client.read_resource("memory://injection")
                        texts.append(str(result.contents[0].text))  # type: ignore[union-attr]

        anyio.run(main)
        assert texts == [DREAMT_CORE, HAND_CORE]


def test_rollback_is_seen_by_the_next_prompt(root: Path, clock: FakeClock) -> None:
    with dreamt(root, clock) as mem:
        assert mem.system_context().text.startswith(DREAMT_CORE)
        mem.rollback()
        result = mem.system_context()
        assert "memory" in result.changed and result.text.startswith(PRIOR_CORE)
        assert PRIOR_MEMORY.startswith("## Work")
