"""Conversation-thread support in the order of hits (tiermem/search/thread.py), both backends."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tiermem import Memory
from tiermem.search.thread import Neighbours, mark_lifted, supported
from tiermem.storage.search import DocRow
from tiermem.testing import FakeClock, HashEmbedder
from tiermem.types import SearchHit

pytestmark = pytest.mark.usefixtures("backend")

MORNING = [
    "Caroline: What do you do to destress after a long shift at the hospital?",
    "Melanie: Running along the river, it clears my head.",
    "Melanie: My kids started school this week.",
]
EVENING = [
    "Melanie: Pottery class tonight, I am making a bowl.",
    "Caroline: I painted a sunset yesterday.",
]
QUERY = "destress after a long shift at the hospital"
#: Another day: records sharing one word with the query, so they score above the reply (which shares none).
OTHER_DAY = [f"Caroline: The hospital cafeteria served soup number {n}." for n in range(8)]


def _memory(root: Path, clock: FakeClock, **settings: Any) -> Memory:
    first = not (root / "memory").exists()
    mem = Memory(root, embedder=HashEmbedder(), clock=clock, timezone="UTC", **settings)
    if first:  # the first opening writes the journal
        mem.daily.append("Conversation", MORNING, at=datetime(2026, 3, 10, 9, 0, tzinfo=UTC))
        mem.daily.append("Conversation", EVENING, at=datetime(2026, 3, 10, 19, 0, tzinfo=UTC))
        mem.daily.append("Conversation", OTHER_DAY, at=datetime(2026, 3, 11, 9, 0, tzinfo=UTC))
    return mem


def _texts(hits: list[Any]) -> list[str]:
    return [hit.text for hit in hits]


def test_a_reply_to_a_matching_question_rises(root: Path, clock: FakeClock) -> None:
    # The reply holds no word of the query: on its own it ranks below the records about the
    # hospital cafeteria; as the answer to the question it comes right after it.
    with _memory(root, clock, search_reply_support=0.5) as mem:
        assert _texts(mem.search(QUERY, k=4, min_score=0))[:2] == MORNING[:2]
    with _memory(root, clock, search_reply_support=0, search_next_support=0) as mem:
        texts = _texts(mem.search(QUERY, k=4, min_score=0))
    assert texts[0] == MORNING[0] and texts[1] in OTHER_DAY and MORNING[1] not in texts[:3]


def test_support_moves_hits_but_never_their_scores(root: Path, clock: FakeClock) -> None:
    with _memory(root, clock, search_reply_support=0.5, search_next_support=0.2) as mem:
        on = {hit.text: hit.score for hit in mem.search(QUERY, k=20, min_score=0)}
    with _memory(root, clock, search_reply_support=0, search_next_support=0) as mem:
        off = {hit.text: hit.score for hit in mem.search(QUERY, k=20, min_score=0)}
    assert on.keys() == off.keys() and len(on) == len(MORNING) + len(EVENING) + len(OTHER_DAY)
    assert all(on[text] == pytest.approx(off[text]) for text in on)


def test_the_floor_still_judges_a_hit_by_its_own_score(root: Path, clock: FakeClock) -> None:
    with _memory(root, clock, search_candidates=1, search_reply_support=0.5) as mem:
        floor = 0.9 * mem.search(QUERY, k=1, min_score=0)[0].score  # the question passes, its reply cannot
        hits = mem.search(QUERY, k=2, min_score=floor)
    assert _texts(hits) == [MORNING[0]]


def test_a_new_session_is_no_neighbour(root: Path, clock: FakeClock) -> None:
    # The morning's last record and the evening's first share the file, with a heading between.
    with _memory(root, clock, search_candidates=1, search_reply_support=0.5, search_next_support=0.5) as mem:
        hits = mem.search("kids started school this week", k=3, min_score=0)
    texts = _texts(hits)
    assert texts[0] == MORNING[2]
    assert MORNING[1] in texts  # the record before it joins (it has the next record's support)
    assert EVENING[0] not in texts


def _row(doc_id: int, text: str) -> DocRow:
    return DocRow(doc_id, "chunk", str(doc_id), "daily", None, "2026-03-10", text, "memory/2026-03-10.md",
                  doc_id, doc_id)


def test_supported_adds_a_question_before_and_another_speakers_reply_after() -> None:
    rows = {1: _row(1, "A: Where did you go?"), 2: _row(2, "B: To Lisbon."), 3: _row(3, "A: Nice."),
            4: _row(4, "B: Lovely."), 5: _row(5, "B: And sunny.")}
    evidence = {1: 0.8, 2: 0.2, 3: 0.4, 4: 0.1, 5: 0.3}
    around = {1: Neighbours(None, 2), 2: Neighbours(1, 3), 3: Neighbours(2, 4), 4: Neighbours(3, 5),
              5: Neighbours(4, None)}
    order = supported(evidence, evidence, rows, around, reply_weight=0.5, next_weight=0.25)
    assert order[1] == pytest.approx(1 - 0.2 * (1 - 0.25 * 0.2))  # B's reply after it, as a noisy-OR
    assert order[2] == pytest.approx(1 - 0.8 * (1 - (0.5 * 0.8 + 0.25 * 0.4)))  # answers a question; A replies
    assert order[4] == pytest.approx(0.1)  # "Nice." asks nothing; the record after is B's own
    assert order[5] == pytest.approx(0.3)
    assert evidence == {1: 0.8, 2: 0.2, 3: 0.4, 4: 0.1, 5: 0.3}  # the scores themselves stay


# --- a hit the conversation lifted says so (issue 22, item 16) -------------------------------------
def test_a_lift_is_marked_only_when_the_shown_scores_differ() -> None:
    def hit(score: float, thread: float = 0.0) -> SearchHit:
        return SearchHit("x", score, "daily", f"memory/2026-01-01.md#L{int(score * 1e6)}", extra={"thread": thread})

    unseen = mark_lifted([hit(0.99980, thread=6e-5), hit(0.99982), hit(0.99977)])  # all show 1.000
    assert [h.lifted_by_thread for h in unseen] == [False, False, False]
    seen = mark_lifted([hit(0.81, thread=0.2), hit(0.86), hit(0.5)])
    assert [h.lifted_by_thread for h in seen] == [True, False, False]


def test_a_hit_lifted_above_higher_scores_is_marked(root: Path, clock: FakeClock) -> None:
    with _memory(root, clock, search_reply_support=0.5) as mem:
        hits = mem.search(QUERY, k=4, min_score=0)
    assert _texts(hits)[:2] == MORNING[:2] and hits[1].score < max(hit.score for hit in hits[2:])
    assert [hit.lifted_by_thread for hit in hits] == [False, True, False, False]
    assert hits[1].to_dict()["lifted_by_thread"] is True and hits[0].to_dict()["lifted_by_thread"] is False
    with _memory(root, clock, search_reply_support=0, search_next_support=0) as mem:
        plain = mem.search(QUERY, k=4, min_score=0)
    assert [hit.score for hit in plain] == sorted((hit.score for hit in plain), reverse=True)
    assert not any(hit.lifted_by_thread for hit in plain)


def test_search_cli_marks_lifted_hits_with_one_legend_line(root: Path, clock: FakeClock) -> None:
    from click.testing import CliRunner

    from tiermem.cli.main import cli
    from tiermem.search.thread import LIFTED_LEGEND, LIFTED_MARK

    _memory(root, clock).close()
    env = {"TIERMEM_EMBEDDER": "hash", "TIERMEM_SEARCH_REPLY_SUPPORT": "0.5", "COLUMNS": "250"}
    out = CliRunner().invoke(cli, ["--root", str(root), "search", QUERY, "-k", "4", "--min-score", "0"], env=env)
    assert out.exit_code == 0, out.output
    rows = [line for line in out.output.splitlines() if "Caroline:" in line or "Melanie:" in line]
    assert [LIFTED_MARK in line for line in rows] == [False, True, False, False], out.output
    assert out.output.count(LIFTED_LEGEND) == 1
    as_json = CliRunner().invoke(cli, ["--root", str(root), "search", QUERY, "-k", "4", "--min-score", "0",
                                       "--json"], env=env)
    assert [hit["lifted_by_thread"] for hit in json.loads(as_json.output)] == [False, True, False, False]
    unlifted = CliRunner().invoke(cli, ["--root", str(root), "search", QUERY, "-k", "4", "--min-score", "0"],
                                  env={**env, "TIERMEM_SEARCH_REPLY_SUPPORT": "0"})
    assert LIFTED_MARK not in unlifted.output and LIFTED_LEGEND not in unlifted.output
