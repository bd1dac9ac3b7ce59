"""One journal shared by many roots (PostgreSQL): the Daily files are rows in the database, and
each process mirrors them under its own root (issue 15)."""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner

from tiermem import Memory, faults
from tiermem.cli.main import cli
from tiermem.testing import FakeClock
from tiermem.tiers.conversation import numbered
from tiermem.tiers.turns import ChatMessage

START = datetime(2026, 3, 14, 14, 30, tzinfo=UTC)
DAY_FILE = "memory/2026-03-14.md"


@pytest.fixture
def postgres(backend: str) -> str:
    if backend != "postgres":
        pytest.skip("roots share one journal only through a database server")
    return backend


def open_memory(root: Path, **settings: object) -> Memory:
    return Memory(root, llm="none", embedder="hash", clock=FakeClock(START), timezone="UTC", **settings)


def mirror(root: Path) -> str:
    return (root / DAY_FILE).read_text(encoding="utf-8")


def test_two_roots_see_each_others_records_and_mirror_them(postgres: str, tmp_path: Path) -> None:
    with open_memory(tmp_path / "a") as a, open_memory(tmp_path / "b") as b:
        a.daily.append("Note", "written on host A")
        b.daily.append("Note", "written on host B")
        text = a.daily.read()
        assert text == b.daily.read()  # the database is the truth, whichever root reads
        assert "- written on host A" in text and "- written on host B" in text
        assert mirror(tmp_path / "b") == text  # B's write rewrote B's mirror from the database
        assert "written on host B" not in mirror(tmp_path / "a")  # A has not looked since
        assert a.refresh_mirror() == [DAY_FILE]
        assert mirror(tmp_path / "a") == text and a.refresh_mirror() == []
        hit = a.search("written on host B", tier="daily")[0]  # the index is shared too
        path, _, lines = hit.ref.partition("#L")
        start, end = (int(n.lstrip("L")) for n in lines.split("-"))
        assert path == DAY_FILE and mirror(tmp_path / "a").splitlines()[start - 1:end] == ["- written on host B"]


def test_a_new_process_refreshes_its_mirror_when_it_opens(postgres: str, tmp_path: Path) -> None:
    with open_memory(tmp_path / "a") as a:
        a.daily.append("Note", "first")
        a.core.write("- Works at Acme\n")
    with open_memory(tmp_path / "b") as b:
        b.daily.read()  # the tiers open: the mirror is brought up to date
        assert mirror(tmp_path / "b") == mirror(tmp_path / "a")
        assert (tmp_path / "b" / "MEMORY.md").read_text(encoding="utf-8") == "- Works at Acme\n"


def test_tiermem_mirror_rewrites_what_differs(postgres: str, tmp_path: Path) -> None:
    with open_memory(tmp_path / "a") as a:
        a.daily.append("Note", "from A")
    (tmp_path / "b").mkdir()
    result = CliRunner().invoke(cli, ["--root", str(tmp_path / "b"), "mirror", "--json"],
                                env={"TIERMEM_EMBEDDER": "hash"})
    assert result.exit_code == 0, result.output
    assert mirror(tmp_path / "b") == mirror(tmp_path / "a")
    (tmp_path / "b" / DAY_FILE).write_text(mirror(tmp_path / "a").replace("from A", "from Z"), encoding="utf-8")
    result = CliRunner().invoke(cli, ["--root", str(tmp_path / "b"), "mirror"], env={"TIERMEM_EMBEDDER": "hash"})
    assert result.exit_code == 0 and "mirrored 1 file of user default" in result.output, result.output
    assert "from A" in mirror(tmp_path / "b")  # a same-length edit is found by the full comparison


def test_a_hand_edit_of_a_mirrored_day_is_not_read_back(postgres: str, tmp_path: Path) -> None:
    with open_memory(tmp_path) as mem:
        path = mem.daily.append("Note", "the real record")
        path.write_text(path.read_text(encoding="utf-8") + "- typed by hand\n", encoding="utf-8")
        assert "typed by hand" not in mem.daily.read() and mem.refresh_index() == []
        mem.daily.append("Note", "the next record")
        assert "typed by hand" not in path.read_text(encoding="utf-8")  # the mirror is rewritten
        assert path.read_text(encoding="utf-8") == mem.daily.read()


def test_without_mirror_files_nothing_is_written_under_the_root(postgres: str, tmp_path: Path) -> None:
    with open_memory(tmp_path, mirror_files=False) as mem:
        mem.daily.append("Note", "only in the database")
        assert "only in the database" in mem.daily.read()
        assert mem.daily.days() == [START.date()]
        assert mem.search("only in the database", tier="daily")
    assert not (tmp_path / "memory" / "2026-03-14.md").exists()


def test_append_and_record_are_one_transaction(postgres: str, tmp_path: Path) -> None:
    """A failure after the append and before the digests are recorded leaves neither (the
    transaction rolls back), so the retry writes each message exactly once."""
    messages = numbered([ChatMessage("user", "I moved to Lisbon"), ChatMessage("assistant", "Noted")])
    with open_memory(tmp_path) as mem:
        journal = mem._tiers.conversations
        faults.arm("journal.appended", "raise")
        try:
            with pytest.raises(faults.FaultInjected):
                journal.write("t1", "Conversation", messages)
        finally:
            faults.disarm()
        assert mem.daily.read() == "" and mem.daily.days() == []
        assert not (tmp_path / DAY_FILE).exists()
        assert mem.db.rows("SELECT count(*) FROM journal_intents")[0][0] == 0
        assert journal.write("t1", "Conversation", messages).written == 2
        assert journal.write("t1", "Conversation", messages).skipped == 2
        assert mem.daily.read().count("I moved to Lisbon") == 1


def test_writers_on_two_roots_at_once_lose_and_repeat_nothing(postgres: str, tmp_path: Path) -> None:
    with open_memory(tmp_path / "a") as a, open_memory(tmp_path / "b") as b:
        def work(mem: Memory, name: str) -> None:
            for i in range(40):
                mem.daily.append("Note", [f"{name} record {i} a", f"{name} record {i} b"])

        threads = [threading.Thread(target=work, args=(m, n)) for m, n in ((a, "A"), (b, "B"), (a, "C"))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        lines = a.daily.read().splitlines()
        records = [line for line in lines if line.startswith("- ")]
        assert len(records) == len(set(records)) == 240  # none lost, none repeated
        for name in "ABC":
            for i in range(40):
                assert lines[lines.index(f"- {name} record {i} a") + 1] == f"- {name} record {i} b"  # never split
        assert sum(line.startswith("## Note") for line in lines) == 120
        assert lines.count("# Daily Memory: 2026-03-14") == 1
        a.refresh_mirror()
        b.refresh_mirror()
        assert mirror(tmp_path / "a") == mirror(tmp_path / "b") == a.daily.read()


def test_a_day_of_many_appends_is_read_as_a_few_blocks_and_stays_whole(postgres: str, tmp_path: Path) -> None:
    """Each append reads the day (its digest and line count): a day kept as one block per append
    was read as thousands of rows by the appends of a busy day. An append that read more than
    COMPACT_BLOCKS blocks writes the day back as one; the bytes, the mirror and a second root's
    view stay the appends' in order."""
    from tiermem.storage.postgres.files import COMPACT_BLOCKS

    records = [f"record {i} of a long day" for i in range(COMPACT_BLOCKS * 2 + 5)]
    with open_memory(tmp_path / "a") as a:
        for record in records:
            a.daily.append("note", [record])
        blocks = a.db.rows("SELECT COUNT(*) FROM memory_blocks WHERE rel = ?", (DAY_FILE,))[0][0]
        assert 1 <= blocks <= COMPACT_BLOCKS
        text = mirror(tmp_path / "a")
        assert [line for line in text.splitlines() if "record" in line] == [f"- {r}" for r in records]
    with open_memory(tmp_path / "b") as b:
        assert b.daily.read() == text and mirror(tmp_path / "b") == text


def test_an_append_adds_its_lines_to_an_up_to_date_mirror_and_rewrites_a_stale_one(postgres: str,
                                                                                   tmp_path: Path) -> None:
    """The mirror of a day is appended to in place when it holds the day as it was before the append
    (a day is not rewritten whole by each record); any other mirror - torn, edited (even keeping its
    length), behind another host's writes - is rewritten from the database."""
    with open_memory(tmp_path / "a") as a, open_memory(tmp_path / "b") as b:
        path = a.daily.append("Note", "first")
        inode = path.stat().st_ino
        a.daily.append("Note", "second")
        assert path.stat().st_ino == inode and mirror(tmp_path / "a") == a.daily.read()
        b.daily.append("Note", "from host B")  # A's mirror is now behind: its length is not the day's
        a.daily.append("Note", "third")
        assert mirror(tmp_path / "a") == a.daily.read() and "from host B" in mirror(tmp_path / "a")
        path.write_bytes(path.read_bytes()[:-3])  # torn
        a.daily.append("Note", "fourth")
        assert mirror(tmp_path / "a") == a.daily.read()
        path.write_text(mirror(tmp_path / "a").replace("first", "FIRST"), encoding="utf-8")  # same length
        a.daily.append("Note", "fourth and a half")
        assert mirror(tmp_path / "a") == a.daily.read()
        with a.daily.exclusive() as journal:  # two appends in one block: the mirror once, whole
            journal.append("Note", ["fifth"])
            journal.append("Note", ["sixth"])
        assert mirror(tmp_path / "a") == a.daily.read() and a.daily.read().endswith("- sixth\n")


def test_a_compacting_append_with_a_stale_view_of_the_day_never_drops_another_append(postgres: str,
                                                                                    tmp_path: Path) -> None:
    """Two file objects of one user in one transaction: the first read the day, the second appends,
    then the first appends past COMPACT_BLOCKS with its now stale view. Writing the day back from that
    view would silently drop the second's append; the write back only happens when the stored day is
    the one it read, so the stale append fails as a stale one did before (rolled back) - never a
    day missing a record."""
    import psycopg

    from tiermem.errors import StorageError
    from tiermem.paths import UserPaths
    from tiermem.storage.postgres.files import COMPACT_BLOCKS, PgFiles

    with open_memory(tmp_path / "a") as mem:
        for i in range(COMPACT_BLOCKS):
            mem.daily.append("note", [f"record {i}"])
        first, second = (PgFiles(mem.db, UserPaths.for_user(tmp_path / root, "default")) for root in ("x", "y"))
        before = first.read(DAY_FILE)
        assert before is not None
        try:
            with first.writing():
                assert first.read(DAY_FILE) == before
                second.append(DAY_FILE, b"- from the second object\n")
                first.append(DAY_FILE, b"- from the first object\n")
        except (StorageError, psycopg.errors.IntegrityError):  # the stale block's offset is taken
            assert mem.db.rows(_DAY_BYTES, (DAY_FILE,))[0][0] == before  # rolled back whole
        else:
            assert b"- from the second object\n" in mem.db.rows(_DAY_BYTES, (DAY_FILE,))[0][0]


_DAY_BYTES = "SELECT string_agg(data, '' ORDER BY \"offset\") FROM memory_blocks WHERE rel = ?"
