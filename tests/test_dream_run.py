"""Deep Dream through ``Memory`` (R36-R43): the seed scenarios, skips, refusals and what is written."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from dream_helpers import (
    GOOD_REPLY,
    NOW,
    PRIOR_MEMORY,
    TODAY_LINES,
    YESTERDAY,
    YESTERDAY_LINES,
    open_memory,
    seed,
)

from tiermem import InvalidInput, Memory, ProviderError
from tiermem.storage.chunks import ChunkRepository
from tiermem.testing import FakeClock

pytestmark = pytest.mark.usefixtures("backend")


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(NOW)


def test_seed_scenario_reads_both_sources_and_rewrites_memory(root: Path, clock: FakeClock) -> None:
    mem, llm = open_memory(root, clock, [GOOD_REPLY])
    with mem:
        seed(mem)
        result = mem.deep_dream(lookback_days=2)
        assert result.status == "written", result.reason
        assert result.days == ["2026-03-13", "2026-03-14"]
        # the LLM got the current MEMORY.md and the daily text of both days, and today's date
        assert len(llm.requests) == 1 and llm.remaining == []
        sent = llm.requests[0].text
        assert "- Lives in Lyon with partner Claire." in sent and "- Has a cat named Pixel." in sent
        assert YESTERDAY_LINES[0] in sent and TODAY_LINES[0] in sent and TODAY_LINES[1] in sent
        assert "=== 2026-03-13 (Friday) ===" in sent and "Today is 2026-03-14 (Saturday)" in sent
        assert "[MEMORY]" in sent and "[DREAM]" in sent
        # MEMORY.md overwritten with the [MEMORY] bullets
        items = mem.core.items()
        assert "Accepted an offer from Siemens as a platform engineer, starting April 1." in items
        assert "Claire found a flat in Schwabing with 3 rooms." in items
        assert len(items) == 6 and result.bullets == 6 and result.prior_bullets == 4
        assert mem.core.path.read_text(encoding="utf-8").startswith("## Work\n- Works as a backend engineer")
        # the diary
        diary = root / "memory" / "dreams" / "2026-03-14.md"
        assert result.diary_path == "memory/dreams/2026-03-14.md"
        text = diary.read_text(encoding="utf-8")
        assert text.startswith("# Dream Diary: 2026-03-14\n\n## Dream (09:30)\n")
        assert "Added the Siemens offer and the move to Munich" in text
        # the days consumed are marked consolidated (R12)
        assert [d.isoformat() for d in mem.daily.consolidated_days()] == ["2026-03-13", "2026-03-14"]


def test_lookback_window_is_the_n_most_recent_days(root: Path, clock: FakeClock) -> None:
    mem, llm = open_memory(root, clock, [GOOD_REPLY])
    with mem:
        seed(mem)
        mem.daily.append("Session Notes", ["user: three days ago I bought a bike"], at=NOW - timedelta(days=3))
        result = mem.deep_dream(lookback_days=1)
        assert result.days == ["2026-03-14"]
        sent = llm.requests[0].text
        assert TODAY_LINES[0] in sent
        assert YESTERDAY_LINES[0] not in sent and "bought a bike" not in sent


def test_unchanged_daily_content_is_skipped_without_an_llm_call(root: Path, clock: FakeClock) -> None:
    mem, llm = open_memory(root, clock, [GOOD_REPLY])
    with mem:
        seed(mem)
        assert mem.deep_dream(lookback_days=2).status == "written"
        after = mem.core.path.read_bytes()
        result = mem.deep_dream(lookback_days=2)
        assert result.status == "skipped" and "unchanged" in result.reason
        assert len(llm.requests) == 1 and mem.core.path.read_bytes() == after
    # the hash persists: a new process skips too (its scripted model has no replies at all)
    again, llm2 = open_memory(root, clock, [])
    with again:
        assert again.deep_dream(lookback_days=2).status == "skipped"
        assert llm2.requests == []


def test_new_daily_content_dreams_again(root: Path, clock: FakeClock) -> None:
    second = GOOD_REPLY.replace("- Has a cat named Pixel.", "- Has a cat named Pixel.\n- Pixel hates car rides.")
    mem, llm = open_memory(root, clock, [GOOD_REPLY, second])
    with mem:
        seed(mem)
        mem.deep_dream(lookback_days=2)
        clock.advance(3600)
        mem.daily.append("Session Notes", ["user: Pixel hates car rides."])
        result = mem.deep_dream(lookback_days=2)
        assert result.status == "written" and len(llm.requests) == 2
        assert "Pixel hates car rides." in mem.core.items()
        assert "Pixel hates car rides." in llm.requests[1].text
        diary = (root / result.diary_path).read_text(encoding="utf-8")  # type: ignore[operator]
        assert diary.count("# Dream Diary: 2026-03-14") == 1 and diary.count("## Dream (") == 2


def test_force_dreams_again_over_unchanged_days(root: Path, clock: FakeClock) -> None:
    mem, llm = open_memory(root, clock, [GOOD_REPLY, GOOD_REPLY])
    with mem:
        seed(mem)
        mem.deep_dream(lookback_days=2)
        assert mem.deep_dream(lookback_days=2, force=True).status == "written"
        assert len(llm.requests) == 2


def test_no_daily_content_skips_and_preserves_memory(root: Path, clock: FakeClock) -> None:
    mem, llm = open_memory(root, clock, [])
    with mem:
        mem.core.write(PRIOR_MEMORY)
        mem.daily.append("Session Notes", ["user: an old note"], at=NOW - timedelta(days=5))
        before = mem.core.path.read_bytes()
        result = mem.deep_dream(lookback_days=2)
        assert result.status == "skipped" and "no daily records" in result.reason
        assert mem.core.path.read_bytes() == before
        assert llm.requests == [] and mem.dream_versions() == []
        assert not (root / "memory" / "dreams").exists()


def test_no_llm_configured_skips_with_a_clear_reason(root: Path, clock: FakeClock) -> None:
    with Memory(root, clock=clock, timezone="UTC", embedder="hash") as mem:
        seed(mem)
        before = mem.core.path.read_bytes()
        result = mem.deep_dream(lookback_days=2)
        assert result.status == "skipped" and "no LLM configured" in result.reason
        assert mem.core.path.read_bytes() == before


def test_fabricated_bullets_are_dropped_and_listed_in_the_diary(root: Path, clock: FakeClock) -> None:
    reply = GOOD_REPLY.replace("- Has a cat named Pixel.", "- Has a cat named Pixel.\n- Has a dog named Bruno.\n"
                               "- Starts at Siemens on May 1.\n- Claire accepted an offer from Siemens.")
    mem, _ = open_memory(root, clock, [reply])
    with mem:
        seed(mem)
        result = mem.deep_dream(lookback_days=2)
        assert result.status == "written"
        dropped = {d.text: d.reason for d in result.dropped}
        assert set(dropped) == {"Has a dog named Bruno.", "Starts at Siemens on May 1.",
                                "Claire accepted an offer from Siemens."}
        assert "Bruno" in dropped["Has a dog named Bruno."] or "overlap" in dropped["Has a dog named Bruno."]
        text = mem.core.path.read_text(encoding="utf-8")
        assert "Bruno" not in text and "May 1" not in text and "Claire accepted" not in text
        diary = (root / "memory/dreams/2026-03-14.md").read_text(encoding="utf-8")
        section = diary.split("### Dropped: not supported by the sources", 1)[1]
        assert "- Has a dog named Bruno." in section and "- Starts at Siemens on May 1." in section


def test_losing_more_than_a_quarter_is_refused_unless_forced(root: Path, clock: FakeClock) -> None:
    shrunk = "[MEMORY]\n- Works as a backend engineer at Acme Corp.\n- Has a cat named Pixel.\n[DREAM]\nTidied up.\n"
    mem, llm = open_memory(root, clock, [shrunk, shrunk])
    with mem:
        seed(mem)
        before = mem.core.path.read_bytes()
        result = mem.deep_dream(lookback_days=2)
        assert result.status == "refused" and "loses 2 of 4" in result.reason
        assert sorted(result.lost) == ["Lives in Lyon with partner Claire.", "Main language at work is Go."]
        assert mem.core.path.read_bytes() == before and mem.dream_versions() == []
        assert mem.daily.consolidated_days() == []
        forced = mem.deep_dream(lookback_days=2, force=True)  # also shows a refusal stored no hash
        assert forced.status == "written" and forced.forced and len(llm.requests) == 2
        assert mem.core.items() == ["Works as a backend engineer at Acme Corp.", "Has a cat named Pixel."]
        diary = (root / "memory/dreams/2026-03-14.md").read_text(encoding="utf-8")
        assert "### Prior bullets not kept (forced)\n" in diary and "- Main language at work is Go." in diary


def test_losing_exactly_a_quarter_is_accepted(root: Path, clock: FakeClock) -> None:
    reply = ("[MEMORY]\n- Works as a backend engineer at Acme Corp.\n- Main language at work is Go.\n"
             "- Lives in Lyon with partner Claire.\n[DREAM]\nDropped the cat.\n")
    mem, _ = open_memory(root, clock, [reply])
    with mem:
        seed(mem)
        result = mem.deep_dream(lookback_days=2)
        assert result.status == "written" and result.lost == ["Has a cat named Pixel."] and not result.forced


@pytest.mark.parametrize(("reply", "reason"), [
    ("Sure! I updated your memory as requested.", "no [MEMORY] section"),
    ("", "empty reply"),
    ("[MEMORY]\nNothing worth keeping.\n[DREAM]\nNothing.", "no '- ' bullets"),
    ("[MEMORY]\n- Has a dog named Bruno.\n[DREAM]\nInvented.", "no bullets left"),
])
def test_unusable_or_empty_rewrites_are_refused(root: Path, clock: FakeClock, reply: str, reason: str) -> None:
    mem, llm = open_memory(root, clock, [reply, reply])
    with mem:
        seed(mem)
        before = mem.core.path.read_bytes()
        for force in (False, True):  # force never accepts an empty or unusable rewrite
            result = mem.deep_dream(lookback_days=2, force=force)
            assert result.status == "refused" and reason in result.reason
        assert mem.core.path.read_bytes() == before and mem.dream_versions() == []
        assert llm.remaining == []


def test_provider_failure_raises_and_writes_nothing(root: Path, clock: FakeClock) -> None:
    mem, _ = open_memory(root, clock, [ProviderError("timeout"), RuntimeError("socket closed"), GOOD_REPLY])
    with mem:
        seed(mem)
        before = mem.core.path.read_bytes()
        with pytest.raises(ProviderError, match="timeout"):
            mem.deep_dream(lookback_days=2)
        with pytest.raises(ProviderError, match="socket closed"):
            mem.deep_dream(lookback_days=2)
        assert mem.core.path.read_bytes() == before
        assert mem.deep_dream(lookback_days=2).status == "written"  # the failure stored no hash


def test_dry_run_returns_the_diff_and_writes_nothing(root: Path, clock: FakeClock) -> None:
    mem, llm = open_memory(root, clock, [GOOD_REPLY, GOOD_REPLY])
    with mem:
        seed(mem)
        before = mem.core.path.read_bytes()
        result = mem.deep_dream(lookback_days=2, dry_run=True)
        assert result.status == "skipped" and result.dry_run and "dry run" in result.reason
        assert "+- Accepted an offer from Siemens as a platform engineer, starting April 1." in result.diff
        assert "--- MEMORY.md (before)" in result.diff
        assert mem.core.path.read_bytes() == before
        assert mem.dream_versions() == [] and mem.daily.consolidated_days() == []
        assert not (root / "memory" / "dreams").exists()
        assert mem.deep_dream(lookback_days=2).status == "written" and len(llm.requests) == 2


def test_every_replaced_memory_is_a_version_and_rollback_restores_it(root: Path, clock: FakeClock) -> None:
    mem, _ = open_memory(root, clock, [GOOD_REPLY])
    with mem:
        seed(mem)
        result = mem.deep_dream(lookback_days=2)
        dreamed = mem.core.path.read_text(encoding="utf-8")
        versions = mem.dream_versions()
        assert [(v.id, v.cause, v.content) for v in versions] == [(result.version_id, "dream", PRIOR_MEMORY)]
        undo = mem.rollback()
        assert undo.restored.id == result.version_id
        assert mem.core.path.read_text(encoding="utf-8") == PRIOR_MEMORY
        assert "-- Accepted an offer from Siemens" in undo.diff
        # the rollback kept what it replaced, so it can be undone by version id
        assert undo.saved_version_id is not None
        assert [v.cause for v in mem.dream_versions()] == ["rollback", "dream"]
        mem.rollback(undo.saved_version_id)
        assert mem.core.path.read_text(encoding="utf-8") == dreamed


def test_rollback_errors(root: Path, clock: FakeClock) -> None:
    mem, _ = open_memory(root, clock, [])
    with mem:
        with pytest.raises(KeyError, match="no MEMORY.md versions"):
            mem.rollback()
        with pytest.raises(KeyError, match="version 7 does not exist"):
            mem.rollback(7)
        with pytest.raises(InvalidInput):
            mem.rollback(0)


def test_versions_belong_to_their_user(root: Path, clock: FakeClock) -> None:
    mem, _ = open_memory(root, clock, [GOOD_REPLY])
    with mem:
        seed(mem)
        mem.deep_dream(lookback_days=2)
        assert len(mem.dream_versions()) == 1
    other, _ = open_memory(root, clock, [], user_id="alice")
    with other:
        assert other.dream_versions() == []
        with pytest.raises(KeyError):
            other.rollback()


def test_index_reflects_the_new_memory_right_after(root: Path, clock: FakeClock) -> None:
    reply = GOOD_REPLY.replace("- Main language at work is Go.\n", "")
    mem, _ = open_memory(root, clock, [reply])
    with mem:
        seed(mem)
        assert mem.deep_dream(lookback_days=2).status == "written"
        core = [c.text for c in ChunkRepository(mem.db).chunks("default", "MEMORY.md")]
        assert "Claire found a flat in Schwabing with 3 rooms." in core
        assert "Main language at work is Go." not in core
        hits = mem.search("Schwabing flat rooms", tier="core")
        assert hits and hits[0].text == "Claire found a flat in Schwabing with 3 rooms."
        assert hits[0].ref.startswith("MEMORY.md#L")


def test_a_dream_on_a_missing_memory_file_starts_it(root: Path, clock: FakeClock) -> None:
    reply = "[MEMORY]\n- Accepted an offer from Siemens as a platform engineer.\n[DREAM]\nFirst dream.\n"
    mem, _ = open_memory(root, clock, [reply])
    with mem:
        seed(mem, memory=None)
        result = mem.deep_dream(lookback_days=2)
        assert result.status == "written" and result.prior_bullets == 0
        assert mem.core.items() == ["Accepted an offer from Siemens as a platform engineer."]
        assert mem.dream_versions()[0].existed is False


def test_other_users_dream_in_their_own_files(root: Path, clock: FakeClock) -> None:
    mem, _ = open_memory(root, clock, [GOOD_REPLY], user_id="alice")
    with mem:
        seed(mem)
        result = mem.deep_dream(lookback_days=2)
        assert result.status == "written"
        assert (root / "users" / "alice" / "memory" / "dreams" / "2026-03-14.md").is_file()
        assert not (root / "MEMORY.md").exists()


@pytest.mark.parametrize("kwargs", [{"lookback_days": 0}, {"lookback_days": "2"}, {"lookback_days": True},
                                    {"force": "yes"}, {"dry_run": 1}])
def test_bad_arguments_raise_invalid_input(root: Path, clock: FakeClock, kwargs: dict[str, object]) -> None:
    mem, llm = open_memory(root, clock, [])
    with mem:
        seed(mem)
        with pytest.raises(InvalidInput):
            mem.deep_dream(**kwargs)  # type: ignore[arg-type]
        assert llm.requests == []


def test_yesterday_only_window_after_midnight(root: Path, clock: FakeClock) -> None:
    mem, llm = open_memory(root, clock, [GOOD_REPLY])
    with mem:
        mem.core.write(PRIOR_MEMORY)
        mem.daily.append("Session Notes", YESTERDAY_LINES, at=YESTERDAY)  # the 13th: outside the window
        mem.daily.append("Session Notes", TODAY_LINES, at=NOW)
        clock.advance(24 * 3600)  # the next day at 09:30: "yesterday and today" = the 14th and 15th
        result = mem.deep_dream(lookback_days=2)
        assert result.status == "written", result.reason
        assert result.days == ["2026-03-14"]
        assert "Today is 2026-03-15 (Sunday)" in llm.requests[0].text
        assert YESTERDAY_LINES[0] not in llm.requests[0].text


def test_a_dream_on_one_root_is_seen_on_another_and_a_hand_edit_there_comes_back(
        tmp_path: Path, clock: FakeClock, backend: str) -> None:
    if backend == "sqlite":
        pytest.skip("two roots share one store only on PostgreSQL")
    root_a, root_b = tmp_path / "host-a", tmp_path / "host-b"
    mem_a, _ = open_memory(root_a, clock, [GOOD_REPLY])
    with mem_a:
        seed(mem_a)
        mem_b, _ = open_memory(root_b, clock, [])
        with mem_b:
            mem_b.refresh_mirror()  # `tiermem mirror` (or B's first use of its tiers)
            assert (root_b / "MEMORY.md").read_text(encoding="utf-8") == PRIOR_MEMORY
            result = mem_a.deep_dream(lookback_days=2)
            assert result.status == "written"
            dreamed = mem_a.core.read()
            assert mem_b.core.read() == dreamed  # B reads the database: A's dream at once
            assert (root_b / "MEMORY.md").read_text(encoding="utf-8") == dreamed  # and its stale mirror is rewritten
            assert [v.cause for v in mem_b.dream_versions()] == ["dream"]  # a stale mirror is no hand edit
            # a person edits B's mirror: B imports it when it reads Core; A reads the new text
            (root_b / "MEMORY.md").write_text(dreamed + "- Pixel hates car rides.\n", encoding="utf-8")
            assert "Pixel hates car rides." in mem_b.core.items()
            assert mem_a.core.items()[-1] == "Pixel hates car rides."
            assert [(v.cause, v.content) for v in mem_a.dream_versions()][0] == ("hand edit", dreamed)
        # an edit of B's mirror while no process of B runs is imported when B opens again
        (root_b / "MEMORY.md").write_text("- Lives in Munich.\n", encoding="utf-8")
        mem_b, _ = open_memory(root_b, clock, [])
        with mem_b:
            assert mem_b.daily.read("2026-03-14") == mem_a.daily.read("2026-03-14")  # B's tiers open: its mirror
            assert (root_b / "memory" / "dreams" / "2026-03-14.md").is_file()  # is refreshed (A's diary too)
            assert mem_a.core.items() == ["Lives in Munich."]
            assert [v.cause for v in mem_a.dream_versions()] == ["hand edit", "hand edit", "dream"]
            mem_a.rollback()  # on A: B's mirror follows when B reads
            assert mem_b.core.read() == (root_b / "MEMORY.md").read_text(encoding="utf-8")
            assert "Pixel hates car rides." in mem_b.core.items()
