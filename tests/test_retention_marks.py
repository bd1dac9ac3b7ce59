"""Retention never deletes a note no Deep Dream read (R12, issue 14 item 3): a dream records the
prefix it read of each day (length + SHA-256) and a day file goes only while that prefix is the
whole file. Old day marks are migrated (only when provably safe) and old exports still import."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tiermem import InvalidInput, Memory
from tiermem.testing import FakeClock, HashEmbedder, ScriptedChatModel

pytestmark = pytest.mark.usefixtures("backend")

FIXTURES = Path(__file__).parent / "fixtures"
NOON = datetime(2026, 3, 14, 12, 0, tzinfo=UTC)
DAY = NOON.date()
REPLY = "[MEMORY]\n- Accepted an offer from Siemens.\n[DREAM]\nAdded the offer.\n"
LATE_NOTE = "user: The 14:00 note no dream has read."


def open_memory(root: Path, clock: FakeClock, replies: list[str] | None = None, **settings: Any) -> Memory:
    return Memory(root, llm=ScriptedChatModel(replies or []), embedder=HashEmbedder(), clock=clock, timezone="UTC",
                  **settings)


def marks(mem: Memory) -> dict[str, tuple[int, str]]:
    rows = mem.db.conn.execute('SELECT day, "offset", sha256 FROM consolidated_prefix WHERE user_id = ?',
                               (mem.scope.user_id,))
    return {str(r[0]): (int(r[1]), str(r[2])) for r in rows}


def dream_at_noon_then_append(mem: Memory, clock: FakeClock) -> bytes:
    """Records yesterday and this morning, a dream at noon, a record at 14:00; the bytes the dream read."""
    mem.daily.append("Conversation", ["user: I accepted an offer from Siemens."], at=NOON - timedelta(days=1))
    mem.daily.append("Conversation", ["user: The offer starts in April."], at=NOON - timedelta(hours=3))
    read = mem.daily.path_for(DAY).read_bytes()
    result = mem.deep_dream(lookback_days=2)
    assert result.written, result.reason
    clock.advance(2 * 3600)
    mem.daily.append("Conversation", [LATE_NOTE])
    return read


def test_a_record_appended_after_the_dream_survives_retention(tmp_path: Path) -> None:
    clock = FakeClock(NOON)
    with open_memory(tmp_path / "m", clock, [REPLY]) as mem:
        read = dream_at_noon_then_append(mem, clock)
        assert marks(mem)[DAY.isoformat()] == (len(read), hashlib.sha256(read).hexdigest())  # what it read
        assert mem.daily.consolidated_days() == [DAY - timedelta(days=1)]  # today's mark is a prefix now
        clock.advance(91 * 86400)
        mem.daily.append("Note", "a new day's file: retention runs")
        assert mem.daily.days() == [DAY, DAY + timedelta(days=91)]  # the old code removed DAY with the 14:00 note
        assert LATE_NOTE in mem.daily.read(DAY)
        assert DAY.isoformat() in marks(mem) and (DAY - timedelta(days=1)).isoformat() not in marks(mem)


def test_a_later_dream_that_reads_the_whole_day_lets_it_go(tmp_path: Path) -> None:
    clock = FakeClock(NOON)
    with open_memory(tmp_path / "m", clock, [REPLY, REPLY]) as mem:
        dream_at_noon_then_append(mem, clock)
        clock.advance(12 * 3600)  # the nightly dream reads yesterday whole, the 14:00 note included
        assert mem.deep_dream(lookback_days=2, force=True).written
        whole = mem.daily.path_for(DAY).read_bytes()
        assert marks(mem)[DAY.isoformat()] == (len(whole), hashlib.sha256(whole).hexdigest())
        clock.advance(91 * 86400)
        assert mem.daily.apply_retention() == [DAY - timedelta(days=1), DAY]
        assert marks(mem) == {}


# SQLite only: it hand-edits a Daily file and expects it read back (on PostgreSQL the file is a mirror)
@pytest.mark.sqlite_only
def test_a_hand_edit_voids_the_mark_even_at_the_same_length(tmp_path: Path) -> None:
    clock = FakeClock(NOON)
    with open_memory(tmp_path / "m", clock, [REPLY]) as mem:
        mem.daily.append("Conversation", ["user: I accepted an offer from Siemens."], at=NOON - timedelta(days=1))
        assert mem.deep_dream(lookback_days=2).written
        path = mem.daily.path_for(DAY - timedelta(days=1))
        text = path.read_text(encoding="utf-8")
        path.write_text(text.replace("Siemens", "Siemenz"), encoding="utf-8")  # same size, other bytes
        assert mem.daily.consolidated_days() == []
        clock.advance(120 * 86400)
        assert mem.daily.apply_retention() == []
        assert "Siemenz" in mem.daily.read(DAY - timedelta(days=1))


def test_a_record_appended_while_the_model_thinks_is_outside_the_mark(tmp_path: Path) -> None:
    clock = FakeClock(NOON)

    class AppendingModel(ScriptedChatModel):
        def complete(self, messages: list[dict[str, Any]], *, json_schema: dict[str, Any] | None = None) -> str:
            mem.daily.append("Conversation", [LATE_NOTE])
            return super().complete(messages, json_schema=json_schema)

    with Memory(tmp_path / "m", llm=AppendingModel([REPLY]), embedder=HashEmbedder(), clock=clock,
                timezone="UTC") as mem:
        mem.daily.append("Conversation", ["user: I accepted an offer from Siemens."])
        read = mem.daily.path_for(DAY).read_bytes()
        assert mem.deep_dream(lookback_days=1).written
        now = mem.daily.path_for(DAY).read_bytes()
        assert now.startswith(read) and LATE_NOTE.encode() in now[len(read):]
        assert marks(mem) == {DAY.isoformat(): (len(read), hashlib.sha256(read).hexdigest())}
        clock.advance(91 * 86400)
        assert mem.daily.apply_retention() == [] and LATE_NOTE in mem.daily.read(DAY)


def test_a_day_without_a_mark_or_without_its_file(tmp_path: Path) -> None:
    clock = FakeClock(NOON)
    with open_memory(tmp_path / "m", clock, daily_retention_days=1) as mem:
        mem.daily.mark_consolidated([DAY])  # no file that day: nothing to mark
        assert marks(mem) == {}
        mem.daily.append("Note", "never dreamed", at=NOON - timedelta(days=5))
        mem.daily.append("Note", "dreamed", at=NOON - timedelta(days=4))
        mem.daily.mark_consolidated([DAY - timedelta(days=4)])
        assert mem.daily.apply_retention() == [DAY - timedelta(days=4)]
        assert mem.daily.days() == [DAY - timedelta(days=5)]


# --- upgrading a store whose marks were whole days ----------------------------------------------
def _set_mtime(path: Path, moment: datetime) -> None:
    os.utime(path, (moment.timestamp(), moment.timestamp()))


# SQLite only: it upgrades a SQLite store of version 0.1.0 (its tiermem.db and files)
@pytest.mark.sqlite_only
def test_old_day_marks_are_migrated_only_when_the_file_predates_the_dream(tmp_path: Path) -> None:
    """The 0.1.0 fixture marked 2026-03-13 and -14 at 09:30 on the 14th. A mark becomes a prefix
    mark of the file as it is only when the file last changed at least an hour before the dream."""
    root = tmp_path / "store"
    shutil.copytree(FIXTURES / "store_v0_1_0", root)
    dream = datetime(2026, 3, 14, 9, 30, tzinfo=UTC)
    bob = root / "users" / "bob" / "memory" / "2026-03-14.md"
    with sqlite3.connect(root / "tiermem.db") as conn:
        assert int(conn.execute("PRAGMA user_version").fetchone()[0]) == 8
        conn.executemany("INSERT INTO consolidated_days (user_id, day, at) VALUES (?, ?, ?)",
                         [("bob", "2026-03-14", "2026-03-15T03:00:00.000000Z"),
                          ("default", "2026-03-12", "2026-03-14T09:30:00.000000Z"),  # its file is gone
                          ("default", "not-a-day", "2026-03-14T09:30:00.000000Z")])
    conn.close()
    _set_mtime(root / "memory" / "2026-03-13.md", dream - timedelta(hours=13))  # long before: safe
    _set_mtime(root / "memory" / "2026-03-14.md", dream - timedelta(minutes=20))  # maybe during the dream
    _set_mtime(bob, datetime(2026, 3, 15, 8, 0, tzinfo=UTC))  # changed after the dream
    clock = FakeClock(datetime(2026, 9, 1, tzinfo=UTC))
    with open_memory(root, clock, queue_replay=False) as mem:
        tables = {r[0] for r in mem.db.conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert "consolidated_days" not in tables
        whole = (root / "memory" / "2026-03-13.md").read_bytes()
        assert marks(mem) == {"2026-03-13": (len(whole), hashlib.sha256(whole).hexdigest())}
        assert marks(mem.for_scope("bob")) == {}
        assert mem.daily.apply_retention() == [date(2026, 3, 13)]
        assert mem.daily.days() == [date(2026, 3, 14)] and mem.for_scope("bob").daily.apply_retention() == []


# --- export and import ----------------------------------------------------------------------------
def test_marks_travel_with_the_export_and_keep_their_meaning(tmp_path: Path) -> None:
    clock = FakeClock(NOON)
    with open_memory(tmp_path / "a", clock, [REPLY]) as mem:
        dream_at_noon_then_append(mem, clock)
        data = json.loads(json.dumps(mem.export()))
        assert sorted(r["day"] for r in data["consolidated_prefix"]) == ["2026-03-13", "2026-03-14"]
        assert "consolidated_days" not in data
    clock.advance(91 * 86400)
    with open_memory(tmp_path / "b", clock) as restored:
        assert restored.import_(data)["consolidated_prefix"] == 2
        assert restored.daily.apply_retention() == [date(2026, 3, 13)]  # 2026-03-14 holds the 14:00 note
        assert LATE_NOTE in restored.daily.read(DAY)


def test_an_export_with_day_marks_still_imports_and_drops_them(tmp_path: Path) -> None:
    """``export_v2_day_marks.json`` was written by main before prefix marks: it marked 2026-03-14
    at noon although a 14:00 record came later. Its day marks cannot say what the dream read."""
    data = json.loads((FIXTURES / "export_v2_day_marks.json").read_text(encoding="utf-8"))
    assert "consolidated_prefix" not in data and len(data["consolidated_days"]) == 2
    clock = FakeClock(NOON + timedelta(days=120))
    with open_memory(tmp_path / "m", clock) as mem:
        counts = mem.import_(data)
        assert counts["consolidated_days"] == 2 and "consolidated_prefix" not in counts
        assert marks(mem) == {}
        assert mem.daily.apply_retention() == []
        assert LATE_NOTE in mem.daily.read(DAY)
        assert mem.core.items() == ["Accepted an offer from Siemens."]
        assert "consolidated_days" not in mem.export()


@pytest.mark.parametrize(("section", "field", "value", "message"), [
    ("consolidated_days", "day", "2026-02-30", "not a date that exists"),
    ("consolidated_prefix", "sha256", "abc", "not a SHA-256"),
    ("consolidated_prefix", "offset", -1, "expected a number >= 0"),
])
def test_bad_marks_are_refused_before_anything_is_written(tmp_path: Path, section: str, field: str, value: Any,
                                                          message: str) -> None:
    data = json.loads((FIXTURES / "export_v2_day_marks.json").read_text(encoding="utf-8"))
    if section == "consolidated_prefix":
        data["consolidated_prefix"] = [{"user_id": "default", "day": "2026-03-13", "offset": 10, "sha256": "0" * 64,
                                        "at": "2026-03-14T12:00:00.000000Z"}]
    data[section][0][field] = value
    with open_memory(tmp_path / "m", FakeClock(NOON)) as mem:
        with pytest.raises(InvalidInput, match=f"export section '{section}', row 0, field '{field}': .*{message}"):
            mem.import_(data)
        assert mem.daily.days() == [] and mem.core.read() == ""
