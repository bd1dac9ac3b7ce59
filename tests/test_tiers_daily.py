"""The Daily tier: lazy files, append-only blocks, clock and time zone, locking, retention (R6-R12)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest

from tiermem import InvalidInput, Memory
from tiermem.storage.chunks import ChunkRepository
from tiermem.testing import FakeClock
from tiermem.tiers.markdown import parse_records

pytestmark = pytest.mark.usefixtures("backend")

START = datetime(2026, 3, 14, 14, 30, tzinfo=UTC)


def open_memory(root: Path, clock: FakeClock, **settings: object) -> Memory:
    settings.setdefault("timezone", "UTC")
    return Memory(root, llm="none", embedder="hash", clock=clock, **settings)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(START)


@pytest.fixture
def mem(tmp_path: Path, clock: FakeClock) -> Memory:
    memory = open_memory(tmp_path, clock)
    yield memory
    memory.close()


def test_file_is_created_lazily_with_its_header(mem: Memory, tmp_path: Path) -> None:
    path = tmp_path / "memory" / "2026-03-14.md"
    assert mem.daily.path_for(date(2026, 3, 14)) == path
    assert not path.exists()
    assert mem.daily.read() == ""
    assert not (tmp_path / "memory").exists()  # reading creates nothing

    written = mem.daily.append("Note", ["User likes green tea"])

    assert written == path
    assert path.read_text(encoding="utf-8") == (
        "# Daily Memory: 2026-03-14\n\n## Note (14:30)\n- User likes green tea\n"
    )


def test_appends_go_to_the_end_as_timestamped_blocks(mem: Memory, clock: FakeClock) -> None:
    mem.daily.append("Trimmed Context", ["user: hello", "assistant: hi there"])
    first = mem.daily.read(date(2026, 3, 14))
    clock.advance(45 * 60)
    mem.daily.append("Session Notes", "user: bye")

    text = mem.daily.read("2026-03-14")
    assert text.startswith(first)  # append-only: what was there is untouched
    assert text == (
        "# Daily Memory: 2026-03-14\n\n"
        "## Trimmed Context (14:30)\n- user: hello\n- assistant: hi there\n\n"
        "## Session Notes (15:15)\n- user: bye\n"
    )
    assert text.count("# Daily Memory") == 1


def test_next_day_gets_its_own_file(mem: Memory, clock: FakeClock, tmp_path: Path) -> None:
    mem.daily.append("Note", "day one")
    clock.advance(24 * 3600)
    mem.daily.append("Note", "day two")
    assert mem.daily.days() == [date(2026, 3, 14), date(2026, 3, 15)]
    assert "day two" in (tmp_path / "memory" / "2026-03-15.md").read_text(encoding="utf-8")
    assert "day two" not in mem.daily.read(date(2026, 3, 14))


def test_date_and_time_follow_the_configured_time_zone(tmp_path: Path) -> None:
    clock = FakeClock(datetime(2026, 3, 14, 23, 30, tzinfo=UTC))
    with open_memory(tmp_path, clock, timezone="Asia/Tokyo") as mem:
        path = mem.daily.append("Note", "late in UTC, morning in Tokyo")
        assert path.name == "2026-03-15.md"
        assert "## Note (08:30)" in path.read_text(encoding="utf-8")
        assert mem.daily.today() == date(2026, 3, 15)


def test_explicit_time_writes_into_that_days_file(mem: Memory) -> None:
    path = mem.daily.append("Conversation", "an old turn", at=datetime(2023, 5, 8, 13, 56, tzinfo=UTC))
    assert path.name == "2023-05-08.md"
    assert "## Conversation (13:56)\n- an old turn\n" in path.read_text(encoding="utf-8")


def test_multiline_records_are_written_losslessly(mem: Memory) -> None:
    record = "first line\nsecond  line\n\n   third "
    mem.daily.append("Note", [record, "- already a bullet"])
    assert mem.daily.read().splitlines()[-5:] == [
        "- first line", "  second  line", "  ", "     third ", "- already a bullet"]
    assert [r.text for r in parse_records(mem.daily.read())] == [record, "already a bullet"]


@pytest.mark.parametrize(
    ("kind", "lines"),
    [
        ("", ["x"]),
        ("Two\nLines", ["x"]),
        ("K" * 65, ["x"]),
        (7, ["x"]),
        ("Note", []),
        ("Note", ["ok", "   "]),
        ("Note", ["bad \x00 byte"]),
        ("Note", [b"bytes"]),
        ("Note", None),
        ("Note", ["-  "]),
    ],
)
def test_bad_kind_or_lines_raise_and_write_nothing(mem: Memory, tmp_path: Path, kind: object, lines: object) -> None:
    with pytest.raises(InvalidInput):
        mem.daily.append(kind, lines)  # type: ignore[arg-type]
    assert not (tmp_path / "memory" / "2026-03-14.md").exists()


def test_naive_time_and_bad_dates_are_rejected(mem: Memory) -> None:
    with pytest.raises(InvalidInput):
        mem.daily.append("Note", "x", at=datetime(2026, 1, 1, 12, 0))
    with pytest.raises(InvalidInput):
        mem.daily.path_for("2026-13-45")
    with pytest.raises(InvalidInput):
        mem.daily.read("../../etc/passwd")


# SQLite only: it hand-edits a Daily file and expects it read back (on PostgreSQL the file is a mirror)
@pytest.mark.sqlite_only
def test_a_missing_trailing_newline_from_a_hand_edit_does_not_glue_lines(mem: Memory) -> None:
    path = mem.daily.append("Note", "first")
    path.write_text(path.read_text(encoding="utf-8") + "- typed by hand", encoding="utf-8")
    mem.daily.append("Note", "second")
    lines = mem.daily.read().splitlines()
    assert "- typed by hand" in lines
    assert lines[-1] == "- second"


def test_threads_appending_at_once_lose_nothing(mem: Memory) -> None:
    def work(worker: int) -> None:
        for i in range(50):
            mem.daily.append("Note", [f"thread {worker} record {i} a", f"thread {worker} record {i} b"])

    threads = [threading.Thread(target=work, args=(w,)) for w in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    lines = mem.daily.read().splitlines()
    for w in range(6):
        for i in range(50):
            a = lines.index(f"- thread {w} record {i} a")
            assert lines[a + 1] == f"- thread {w} record {i} b"  # a block is never split
    assert sum(1 for line in lines if line.startswith("## Note")) == 300
    chunks = ChunkRepository(mem.db).chunks("default", "memory/2026-03-14.md")
    assert len(chunks) == 600  # the index followed every append, in file order
    assert all(lines[c.line_start - 1] == "- " + c.text for c in chunks)


_CHILD = textwrap.dedent(
    """
    import sys
    from datetime import datetime, timezone
    from tiermem import Memory
    from tiermem.testing import FakeClock

    root, worker, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    clock = FakeClock(datetime(2026, 3, 14, 14, 30, tzinfo=timezone.utc))
    with Memory(root, llm="none", embedder="hash", clock=clock, timezone="UTC") as mem:
        for i in range(count):
            mem.daily.append("Note", f"process {worker} line {i:03d} " + "x" * (i % 37 + 1))
    """
)


def test_four_processes_appending_500_lines_each_keep_all_2000_intact(tmp_path: Path, backend: str) -> None:
    # PostgreSQL: 4 x 100 here (a round trip per statement makes 4 x 500 take ~2 minutes on CI's 2 cores);
    # bench/multiwriter.py runs 8 x 500 journal appends on both backends
    count = 500 if backend == "sqlite" else 100
    Memory(tmp_path, llm="none", embedder="hash").close()  # create the database once
    children = [
        subprocess.Popen([sys.executable, "-c", _CHILD, str(tmp_path), str(w), str(count)], stderr=subprocess.PIPE)
        for w in range(4)
    ]
    for child in children:
        _, err = child.communicate(timeout=120)
        assert child.returncode == 0, err.decode()

    text = (tmp_path / "memory" / "2026-03-14.md").read_text(encoding="utf-8")
    lines = text.splitlines()
    records = [line for line in lines if line.startswith("- ")]
    expected = {f"- process {w} line {i:03d} " + "x" * (i % 37 + 1) for w in range(4) for i in range(count)}
    assert len(records) == 4 * count
    assert set(records) == expected  # every line whole, none lost, none glued to another
    assert lines[0] == "# Daily Memory: 2026-03-14"
    assert text.count("# Daily Memory") == 1
    for w in range(4):  # each process's lines stay in its own order
        own = [r for r in records if r.startswith(f"- process {w} ")]
        assert own == sorted(own)

    with open_memory(tmp_path, FakeClock(START)) as mem:
        assert mem.refresh_index() == []  # the index kept up under the lock
        chunks = ChunkRepository(mem.db).chunks("default", "memory/2026-03-14.md")
        assert len(chunks) == 4 * count
        for chunk in chunks:
            assert lines[chunk.line_start - 1] == "- " + chunk.text


def test_retention_keeps_days_no_dream_consolidated(mem: Memory, clock: FakeClock) -> None:
    for day in (date(2025, 11, 1), date(2025, 11, 2), date(2025, 11, 3), date(2026, 3, 1)):
        mem.daily.append("Note", f"record of {day}", at=datetime.combine(day, datetime.min.time(), UTC))
    mem.daily.mark_consolidated([date(2025, 11, 1), "2025-11-03", date(2026, 3, 1)])

    removed = mem.daily.apply_retention()  # retention 90 days: cutoff 2025-12-14

    assert removed == [date(2025, 11, 1), date(2025, 11, 3)]
    assert mem.daily.days() == [date(2025, 11, 2), date(2026, 3, 1)]  # old but unconsolidated stays
    assert "record of 2025-11-02" in mem.daily.read(date(2025, 11, 2))
    chunk_paths = {c.path for c in ChunkRepository(mem.db).chunks("default")}
    assert "memory/2025-11-01.md" not in chunk_paths
    assert "memory/2025-11-02.md" in chunk_paths


def test_retention_runs_when_a_new_day_starts(tmp_path: Path, clock: FakeClock) -> None:
    with open_memory(tmp_path, clock, daily_retention_days=2) as mem:
        mem.daily.append("Note", "old day")
        mem.daily.mark_consolidated([mem.daily.today()])
        clock.advance(3 * 24 * 3600)
        mem.daily.append("Note", "three days later")  # a new day's file: retention runs
        assert mem.daily.days() == [date(2026, 3, 17)]
        clock.advance(timedelta(hours=1).total_seconds())
        assert mem.daily.apply_retention() == []
