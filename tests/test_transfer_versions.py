"""Files of tiermem 0.1.0 (commit 633ac05) still work: its exports (format version 1) import, and
a store it wrote opens and reads. Both fixtures were made by that release with
``tests/fixtures/make_v0_1_0.py``."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest
from transfer_helpers import open_memory, separate_stores  # noqa: F401  (an autouse fixture)

from tiermem.testing import FakeClock

FIXTURES = Path(__file__).parent / "fixtures"
pytestmark = pytest.mark.usefixtures("backend")


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(datetime(2026, 3, 14, 10, 0, tzinfo=UTC))


def test_a_version_1_export_imports(tmp_path: Path, clock: FakeClock) -> None:
    data = json.loads((FIXTURES / "export_v1.json").read_text(encoding="utf-8"))
    assert data["version"] == 1 and "files" not in data
    with open_memory(tmp_path / "restored", clock) as mem:
        counts = mem.import_(data)
        assert counts == {"facts": 2, "summaries": 2, "tombstones": 1, "audit": 6, "plans": 1, "core_versions": 1,
                          "dream_state": 1}
        assert [f.content for f in mem.facts.list()] == ["Prefers dark mode"]
        assert mem.facts.summaries()["topOfMind"] == "Moving to Lisbon"
        active = mem.plans.active()
        assert active is not None and active.title == "Move to Lisbon"
        assert [v.content for v in mem.dream_versions()] == ["## Work\n- Works as a backend engineer at Acme Corp.\n"]
        assert mem.facts.add("works at initech", "context", origin="extraction") is None  # the tombstone
        assert [f.content for f in mem.for_scope("bob").facts.list()] == ["Bob plays chess"]
        assert mem.search("dark mode")[0].text == "Prefers dark mode"
        assert mem.export()["version"] == 2
        assert mem.import_(data)["facts"] == 2  # again: nothing changes, nothing conflicts


@pytest.mark.sqlite_only  # a tiermem.db written by 0.1.0 (test_migrate.py copies it into PostgreSQL)
def test_a_store_written_by_0_1_0_opens_and_reads(tmp_path: Path, clock: FakeClock) -> None:
    root = tmp_path / "store"
    shutil.copytree(FIXTURES / "store_v0_1_0", root)  # opening migrates: never touch the fixture itself
    with open_memory(root, clock) as mem:
        assert [f.content for f in mem.facts.list()] == ["Prefers dark mode"]
        assert "moving to Lisbon in August" in mem.daily.read("2026-03-14")
        assert mem.core.items() == ["Works as a backend engineer at Acme Corp.", "Is moving to Lisbon in August."]
        assert [v.cause for v in mem.dream_versions()] == ["dream"]
        hits = mem.search("Lisbon August")
        assert hits and {h.tier for h in hits} >= {"daily", "core"}
        assert mem.stats()["queue_pending"] == 1 and mem.stats()["queue_dead"] == 1
        active = mem.plans.active()
        assert active is not None and active.progress == (0, 2)
        assert [f.content for f in mem.for_scope("bob").facts.list()] == ["Bob plays chess"]
        assert "Sicilian" in mem.for_scope("bob").daily.read("2026-03-14")
        assert mem.deep_dream(lookback_days=2).status == "skipped"  # its dream state still applies
        data = json.loads(json.dumps(mem.export()))
    with open_memory(tmp_path / "copy", clock) as copy:
        copy.import_(data)
        assert copy.daily.read("2026-03-13") == (root / "memory" / "2026-03-13.md").read_text(encoding="utf-8")
        assert copy.export() == data
