"""One test per real-world reply shape in tests/fixtures/extraction_replies/."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tiermem.errors import ExtractionError
from tiermem.extract.parse import parse_extraction
from tiermem.extract.prompt import prompt_sha256

FIXTURES = Path(__file__).parent / "fixtures" / "extraction_replies"
NAMES = sorted(p.stem for p in FIXTURES.glob("*.json"))


def _load(name: str) -> tuple[str, dict[str, Any]]:
    raw = (FIXTURES / f"{name}.txt").read_text(encoding="utf-8")
    meta = json.loads((FIXTURES / f"{name}.json").read_text(encoding="utf-8"))
    return raw, meta


def test_fixtures_answer_the_current_prompt() -> None:
    stored = (FIXTURES / "PROMPT_SHA256").read_text(encoding="utf-8").strip()
    assert stored == prompt_sha256(), (
        "tiermem/prompts/extract.md changed: check the reply fixtures still fit the new prompt, "
        "then write the new hash to tests/fixtures/extraction_replies/PROMPT_SHA256"
    )


def test_there_are_enough_shapes() -> None:
    parsed = [n for n in NAMES if "expected" in _load(n)[1]]
    assert len(parsed) >= 12 and len(NAMES) - len(parsed) >= 3


@pytest.mark.parametrize("name", [n for n in NAMES if "expected" in _load(n)[1]])
def test_reply_shape_parses(name: str) -> None:
    raw, meta = _load(name)
    expected = meta["expected"]
    result = parse_extraction(raw, set(meta["valid_short_ids"]))
    assert result.summaries == expected["summaries"]
    assert [list(f) for f in result.new_facts] == expected["new_facts"]
    assert list(result.facts_to_remove) == expected["facts_to_remove"]
    assert (result.truncated, result.repaired) == (expected["truncated"], expected["repaired"])
    reasons = [d.reason for d in result.dropped]
    assert len(reasons) == len(expected["dropped_reasons"]), reasons
    for wanted, got in zip(expected["dropped_reasons"], reasons, strict=True):
        assert wanted in got


@pytest.mark.parametrize("name", [n for n in NAMES if "error" in _load(n)[1]])
def test_unusable_reply_raises_with_raw(name: str) -> None:
    raw, meta = _load(name)
    with pytest.raises(ExtractionError, match=meta["error"]) as info:
        parse_extraction(raw, set(meta["valid_short_ids"]))
    assert info.value.raw == raw
