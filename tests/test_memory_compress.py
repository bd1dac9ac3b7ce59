"""``mem.compress`` through the facade, on a recorded coding-agent transcript."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tiermem import Memory
from tiermem.compress import check_tool_pairs

FIXTURES = Path(__file__).parent / "fixtures" / "transcripts"

pytestmark = pytest.mark.usefixtures("backend")  # every test on SQLite and on PostgreSQL


def test_facade_compresses_without_orphans_or_mutation(mem: Memory) -> None:
    messages = json.loads((FIXTURES / "invoicer.json").read_text())["messages"]
    before = json.dumps(messages)
    result = mem.compress(messages, protect_turns=4)
    assert result.tokens_saved > 1000 and result.tokens_after < result.tokens_before
    assert check_tool_pairs(result.messages) == []
    assert json.dumps(messages) == before
    assert result.messages[-8:] == messages[-8:]
