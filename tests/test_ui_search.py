"""The viewer's Search page: every tier as ``tiermem search`` shows it, a hit the conversation lifted
above higher scores marked and explained once (issue 22, item 16); both backends."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from tiermem import Memory
from tiermem.search.thread import LIFTED_LEGEND, LIFTED_MARK
from tiermem.testing import HashEmbedder
from tiermem.ui.app import build_app
from tiermem.ui.guard import ui_options
from tiermem.ui.html import esc

pytestmark = pytest.mark.usefixtures("backend")

QUESTION = "Caroline: What do you do to destress after a long shift at the hospital?"
REPLY = "Melanie: Running along the river, it clears my head."
QUERY = "destress after a long shift at the hospital"


def _client(root: Path, **settings: float) -> Iterator[TestClient]:
    with Memory(root, embedder=HashEmbedder(), timezone="UTC", search_min_score=0.0, **settings) as mem:
        if not mem.daily.days():
            mem.daily.append("Conversation", [QUESTION, REPLY], at=datetime(2026, 3, 10, 9, 0, tzinfo=UTC))
            mem.daily.append("Conversation", ["Caroline: The hospital cafeteria served soup."],
                             at=datetime(2026, 3, 11, 9, 0, tzinfo=UTC))
            mem.facts.add("Goes running along the river to destress")
        with TestClient(build_app(mem, ui_options(8767), "csrf-token-for-the-tests-0123456789"),
                        base_url="http://127.0.0.1:8767") as client:
            yield client


@pytest.fixture
def client(root: Path) -> Iterator[TestClient]:
    yield from _client(root, search_reply_support=0.6)


def _rows(page: str) -> list[tuple[str, bool, str]]:
    """(tier, marked, text) of each hit, in rank order."""
    body = page.split("<tbody>", 1)[1].split("</tbody>", 1)[0]
    out = []
    for row in re.findall(r"<tr>(.*?)</tr>", body):
        cells = re.findall(r"<td>(.*?)</td>", row)
        out.append((cells[2], LIFTED_MARK in cells[1], cells[4]))
    return out


def test_search_page_marks_a_lifted_reply_and_explains_it_once(client: TestClient) -> None:
    page = client.get("/search", params={"q": QUERY, "tier": "daily"})
    assert page.status_code == 200, page.text
    assert _rows(page.text) == [("daily", False, esc(QUESTION)), ("daily", True, esc(REPLY)),
                                ("daily", False, esc("Caroline: The hospital cafeteria served soup."))]
    assert page.text.count(esc(LIFTED_LEGEND)) == 2  # the line under the list, and the mark's tooltip
    assert "3 hits for" in page.text and 'href="/search?user=default' in page.text  # in the navigation


def test_search_page_covers_every_tier_and_escapes_the_query(client: TestClient) -> None:
    page = client.get("/search", params={"q": QUERY}).text
    assert {tier for tier, _, _ in _rows(page)} == {"fact", "daily"}
    hostile = client.get("/search", params={"q": "<b>soup</b>"}).text
    assert "<b>soup" not in hostile and "&lt;b&gt;soup" in hostile
    assert "Search the facts" in client.get("/search").text  # no query: the box only
    wrong = client.get("/search", params={"q": QUERY, "tier": "<nonsense>"})
    assert wrong.status_code == 400 and "<nonsense>" not in wrong.text


def test_without_thread_support_nothing_is_marked(root: Path) -> None:
    for client in _client(root, search_reply_support=0.0, search_next_support=0.0):
        page = client.get("/search", params={"q": QUERY, "tier": "daily"}).text
        assert _rows(page) and not any(marked for _, marked, _ in _rows(page))
        assert esc(LIFTED_LEGEND) not in page
