"""The viewer's long lists come a page at a time (issue 22): the Facts page (2,500 facts were a
4.6 MB page once ``max_facts`` allowed them) and a day of the Journal with thousands of records.
Each page holds a bounded number of rows, and following the links shows every row once; on
SQLite and PostgreSQL. The render time at 100k facts: bench/ui_pages.py, bench/README.md."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from tiermem import Memory
from tiermem.errors import InvalidInput
from tiermem.facts.store import NewFact
from tiermem.testing import FakeClock, HashEmbedder
from tiermem.types import Fact
from tiermem.ui.app import build_app
from tiermem.ui.guard import ui_options
from tiermem.ui.pages.facts import PAGE_SIZE
from tiermem.ui.pages.journal import PAGE_RECORDS

pytestmark = pytest.mark.usefixtures("backend")

BASE = "http://127.0.0.1:8767"
FACTS = 2 * PAGE_SIZE + 50
BIG_DAY = 2 * PAGE_RECORDS + 200
_FACT_ID = re.compile(r'id="f-(fact_[0-9a-f]{8})"')
_RECORD = re.compile(r"<div class=record>(.*?)</div>")
_LINK = re.compile(r'<a href="([^"]+)">([^<]+)</a>')


@pytest.fixture
def mem(root: Path, clock: FakeClock) -> Iterator[Memory]:
    with Memory(root, embedder=HashEmbedder(), clock=clock, timezone="UTC", max_facts=10 * FACTS,
                queue_replay=False) as memory:
        yield memory


@pytest.fixture
def client(mem: Memory) -> Iterator[TestClient]:
    with TestClient(build_app(mem, ui_options(8767)), base_url=BASE) as test_client:
        yield test_client


def link(page: str, label: str) -> str | None:
    """The address of the link called ``label`` (unescaped), if the page has one."""
    found = [href.replace("&amp;", "&") for href, text in _LINK.findall(page) if text == label]
    return found[0] if found else None


def in_page_order(added: list[Fact]) -> list[str]:
    """Ids of ``added`` (facts of one ``add_many``, one timestamp) as the pages list them: highest
    confidence first, the newest first among equal ones."""
    return [f.id for f in sorted(reversed(added), key=lambda f: -f.confidence)]


def test_facts_come_a_page_at_a_time(client: TestClient, mem: Memory) -> None:
    added = mem.facts.add_many([NewFact(f"Fact number {i} about the garden", confidence=0.5 + (i % 50) / 100)
                                for i in range(FACTS)])
    seen: list[str] = []
    page, address = client.get("/facts"), "/facts"
    while True:
        assert page.status_code == 200, address
        ids = _FACT_ID.findall(page.text)
        assert 0 < len(ids) <= PAGE_SIZE, (address, len(ids))
        assert f"{FACTS} facts in default/default" in page.text
        seen += ids
        following = link(page.text, "next")
        if following is None:
            break
        page, address = client.get(following), following
    assert len(seen) == FACTS and set(seen) == {f.id for f in mem.facts.list()}  # each once
    assert seen == in_page_order([f for f in added if f is not None])
    last = client.get("/facts", params={"page": "999"}).text  # past the end: the last page
    assert _FACT_ID.findall(last) == seen[-(FACTS % PAGE_SIZE):] and "page 3 of 3" in last
    assert client.get("/facts", params={"page": "0"}).status_code == 400


def test_a_change_returns_to_the_page_it_was_made_on(client: TestClient, mem: Memory) -> None:
    mem.facts.add_many([NewFact(f"Fact number {i} about the garden") for i in range(FACTS)])
    on_page_2 = _FACT_ID.findall(client.get("/facts", params={"page": "2"}).text)[0]
    csrf = re.findall(r'name=csrf value="([^"]+)"', client.get("/facts").text)[0]
    answer = client.post("/facts/delete", data={"csrf": csrf, "user": "default", "agent": "default",
                                                "id": on_page_2, "page": "2"}, follow_redirects=False)
    assert answer.status_code == 303 and "page=2" in answer.headers["location"]
    assert "page 2 of 3" in client.get(answer.headers["location"]).text


def test_fact_store_pages_walk_the_scope_once(mem: Memory, clock: FakeClock) -> None:
    first = mem.facts.add_many([NewFact(f"Fact {i}", category="knowledge" if i % 3 else "preference",
                                        confidence=0.9 if i % 2 else 0.7) for i in range(30)])
    clock.advance(60)
    later = mem.facts.add_many([NewFact(f"Later fact {i}", confidence=0.9) for i in range(5)])
    pages = [f.id for start in range(0, 35, 7) for f in mem.facts.page(limit=7, offset=start)]
    newer, older = [f for f in later if f], [f for f in first if f]
    assert pages == in_page_order(newer) + in_page_order([f for f in older if f.confidence == 0.9]) + \
        in_page_order([f for f in older if f.confidence == 0.7])
    preference = [f.id for f in mem.facts.page("preference", limit=100)]
    assert [f.id for f in mem.facts.page("preference", limit=4, offset=8)] == preference[8:12]
    assert mem.facts.count("preference") == len(preference) == 10 and mem.facts.count() == 35
    assert mem.facts.page(limit=7, offset=35) == []
    for bad in ({"limit": 0}, {"limit": -1}, {"offset": -1}, {"limit": True}, {"offset": "3"}, {"limit": 10_001}):
        with pytest.raises(InvalidInput):
            mem.facts.page(**bad)  # type: ignore[arg-type]


def test_a_huge_day_comes_a_page_at_a_time(client: TestClient, mem: Memory) -> None:
    noon = datetime(2026, 3, 14, 12, 0, tzinfo=UTC)
    mem.daily.append("Session Notes", [f"user: line {i} of a long day" for i in range(BIG_DAY)], at=noon)
    mem.daily.append("Session Notes", ["user: the day before"], at=datetime(2026, 3, 13, 9, 0, tzinfo=UTC))
    page = client.get("/journal").text
    records = _RECORD.findall(page)
    assert len(records) == PAGE_RECORDS and records[0] == "user: line 0 of a long day"
    assert f"records 1-{PAGE_RECORDS} of {BIG_DAY}" in page and "the day before" not in page
    seen = records
    address = link(page, "later records of this day")
    while address is not None:
        day = client.get(address)
        assert day.status_code == 200, address
        records = _RECORD.findall(day.text)
        assert 0 < len(records) <= PAGE_RECORDS
        seen += records
        address = link(day.text, "later records of this day")
    assert seen == [f"user: line {i} of a long day" for i in range(BIG_DAY)]
    older = client.get(link(page, "older days") or "/journal?missing").text
    assert _RECORD.findall(older) == ["user: the day before"]
    for day, start in (("9999-12-31", "0"), ("2026-03-14", str(BIG_DAY)), ("2026-03-14", "²"), ("14.3.2026", "0")):
        answer = client.get("/journal", params={"day": day, "start": start})
        assert answer.status_code in (200, 400) and "Traceback" not in answer.text, (day, start)


def test_a_page_of_days_holds_a_bounded_number_of_records(client: TestClient, mem: Memory) -> None:
    per_day = PAGE_RECORDS * 3 // 5
    for day in (10, 11, 12):
        mem.daily.append("Notes", [f"note {i} of March {day}" for i in range(per_day)],
                         at=datetime(2026, 3, day, 9, 0, tzinfo=UTC))
    page = client.get("/journal", params={"days": "30"}).text
    records = _RECORD.findall(page)
    assert len(records) == PAGE_RECORDS  # all of the 12th, the first part of the 11th
    assert records[per_day - 1] == f"note {per_day - 1} of March 12" and records[-1].endswith("of March 11")
    assert 'id="d2026-03-10"' not in page and link(page, "later records of this day") is not None
    older = client.get(link(page, "older days") or "/journal?missing").text
    assert 'id="d2026-03-11"' not in older and len(_RECORD.findall(older)) == per_day
