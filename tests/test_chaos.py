"""The chaos test (issue 14): a writer SIGKILLed at random moments and at each fault point.

Seeded: 7 kills at the fault-injection points of a write (:mod:`tiermem.faults`) and 20 at random
moments of a writer doing ``queue.add``/``queue.flush`` (with a scripted LLM in half the runs),
``facts.add``, ``daily.append`` and sessions. After every restart: the queue drains (dead items
only with a reason), every acknowledged write is there exactly once, no record is there twice, and
``tiermem doctor`` passes. bench/chaos.py runs the same harness with 1,000 kills.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from chaos_helpers import FAULT_POINTS, run_chaos

pytestmark = pytest.mark.usefixtures("backend")

KILLS = 20
SEED = 14


def test_sigkills_lose_nothing_acknowledged_and_double_nothing(tmp_path: Path) -> None:
    result = run_chaos(tmp_path / "store", tmp_path, kills=KILLS, seed=SEED)
    assert result.problems == []
    assert result.kills == KILLS and result.fault_kills == len(FAULT_POINTS)
    assert result.restarts_checked == KILLS + len(FAULT_POINTS)
    assert {"queue", "fact", "daily", "session"} <= set(result.acked)  # every kind of write was checked
