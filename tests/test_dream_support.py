"""The no-fabrication check (R40): measured on the labelled fixture, and its rules one by one.

Figures (bench/dream_support.py prints them): on all 124 bullets fabricated recall 0.875,
fabricated precision 0.933, supported retention 0.933; on the 43 held-out bullets 0.826 / 0.826 /
0.80. The floors below sit just under the measured values, so a regression fails.
"""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from tiermem.dream.prompt import DailySource
from tiermem.dream.support import SupportChecker, clauses

FIXTURE = Path(__file__).parent / "fixtures" / "dream_support.json"


def _cases() -> list[dict[str, Any]]:
    cases: list[dict[str, Any]] = json.loads(FIXTURE.read_text(encoding="utf-8"))["cases"]
    return cases


def _checker(case: dict[str, Any]) -> SupportChecker:
    dailies = [DailySource(date.fromisoformat(d["day"]), d["text"]) for d in case["dailies"]]
    return SupportChecker(case["memory"], dailies)


def _measure(split: str | None) -> dict[str, float]:
    flagged_fab = fab = kept_sup = sup = flagged = 0
    for case in _cases():
        if split is not None and case["split"] != split:
            continue
        checker = _checker(case)
        for bullet in case["bullets"]:
            is_flagged = not checker.judge(bullet["text"]).supported
            flagged += is_flagged
            if bullet["label"] == "fabricated":
                fab += 1
                flagged_fab += is_flagged
            else:
                sup += 1
                kept_sup += not is_flagged
    return {"n": fab + sup, "recall": flagged_fab / fab, "precision": flagged_fab / flagged,
            "retention": kept_sup / sup}


def test_fixture_is_big_enough_and_balanced() -> None:
    bullets = [b for case in _cases() for b in case["bullets"]]
    labels = {b["label"] for b in bullets}
    assert len(bullets) >= 30 and labels == {"supported", "fabricated"}
    assert {b["kind"] for b in bullets} >= {"verbatim", "paraphrase", "number", "name", "place", "merged"}


def test_precision_and_recall_on_the_whole_fixture() -> None:
    figures = _measure(None)
    print(f"\nall: {figures}")
    assert figures["n"] >= 120
    assert figures["recall"] >= 0.85 and figures["precision"] >= 0.9 and figures["retention"] >= 0.9


def test_precision_and_recall_on_the_held_out_cases() -> None:
    figures = _measure("heldout")
    print(f"\nheld out: {figures}")
    assert figures["recall"] >= 0.8 and figures["precision"] >= 0.8 and figures["retention"] >= 0.75


SOURCES = [DailySource(date(2026, 3, 12), (
    "# Daily Memory: 2026-03-12\n\n## Session Notes (09:15)\n"
    "- user: I accepted an offer from Siemens, starting on April 1st as a platform engineer.\n"
    "- user: my sister Lena is a nutritionist and suggested more lentils\n"
    "- user: I don't eat meat anymore\n"
    "- The billing service has 48,000 lines of code and runs on AWS eu-central-1.\n"))]
MEMORY = "## Family\n- Daughter Mia is 7 and goes to Lindenschule.\n"


@pytest.mark.parametrize(("text", "reason"), [
    ("Starts at Siemens on April 2.", "number 2 is not anywhere in the sources"),
    ("Daughter Mia is 12.", "number 12 is not with the rest of the statement"),
    ("Accepted an offer from Bosch as a platform engineer.", "name 'Bosch' is not anywhere in the sources"),
    ("Lena accepted an offer from Siemens as a platform engineer.",
     "name 'Lena' is not with the rest of the statement"),
    ("The billing service runs on AWS us-east-1.", "name 'us-east' is not anywhere in the sources"),
    ("Never accepted an offer from Siemens.", "the negation is not in the source"),
    ("Plays the violin in an orchestra.", "no source record covers it"),
])
def test_reasons_name_the_broken_rule(text: str, reason: str) -> None:
    verdict = SupportChecker(MEMORY, SOURCES).judge(text)
    assert not verdict.supported and reason in verdict.reason


@pytest.mark.parametrize("text", [
    "Accepted a platform engineer offer from Siemens, starting April 1.",  # paraphrase, ordinal = number
    "Daughter Mia is seven and goes to Lindenschule.",  # number word = digit
    "The billing service has 48000 lines of code.",  # thousands separator
    "Does not eat meat anymore.",  # negation present on both sides
    "Sister Lena is a nutritionist; Mia goes to Lindenschule.",  # clauses backed by different records
    "Accepted the Siemens offer in March 2026.",  # date taken from the daily file's date
])
def test_supported_statements(text: str) -> None:
    verdict = SupportChecker(MEMORY, SOURCES).judge(text)
    assert verdict.supported, verdict.reason
    assert verdict.source is not None and verdict.source.startswith(("MEMORY.md#L", "memory/2026-03-12.md#L"))


def test_a_verdict_cites_the_supporting_record() -> None:
    verdict = SupportChecker(MEMORY, SOURCES).judge("Mia goes to Lindenschule.")
    assert verdict.supported and verdict.source == "MEMORY.md#L2-L2" and verdict.score == 1.0


def test_clause_split_keeps_short_pieces_together() -> None:
    checker = SupportChecker(MEMORY, SOURCES)
    assert clauses("Likes salt and pepper", checker.index) == ["Likes salt and pepper"]
    assert clauses("Moved to Munich; starts at Siemens in April", checker.index) == [
        "Moved to Munich", "starts at Siemens in April"]


def test_an_embedder_can_only_add_support_within_the_hard_rules() -> None:
    from tiermem.testing import HashEmbedder

    checker = SupportChecker(MEMORY, SOURCES, embedder=HashEmbedder())
    assert checker.judge("Daughter Mia is 7 and goes to Lindenschule.").supported
    assert not checker.judge("Daughter Mia is 9 and goes to Lindenschule.").supported
