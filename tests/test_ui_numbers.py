"""Numbers the viewer reads from a form, a query or a header are ASCII digits, bounded (issue 22):
``"²".isdigit()`` is true and ``int("²")`` fails (a 500); ``int("١")`` is 1 (a change nobody
typed). Each is refused with the page's error and changes nothing, on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient
from ui_helpers import seeded

from tiermem import Memory
from tiermem.storage.outbox import OutboxRepository
from tiermem.testing import FakeClock, ScriptedChatModel
from tiermem.ui.app import build_app
from tiermem.ui.guard import ui_options

pytestmark = pytest.mark.usefixtures("backend")

CSRF = "csrf-token-for-the-number-tests-0123"
BASE = "http://127.0.0.1:8767"
ARABIC_INDIC = str.maketrans("0123456789", "٠١٢٣٤٥٦٧٨٩")
NOT_NUMBERS = ("²", " 1", "+1", "1_0", "0x1", "9" * 5000)


@pytest.fixture
def store(root: Path, clock: FakeClock) -> Iterator[tuple[Memory, ScriptedChatModel, int]]:
    mem, llm, dead = seeded(root, clock)
    try:
        yield mem, llm, dead
    finally:
        mem.close()


@pytest.fixture
def client(store: tuple[Memory, ScriptedChatModel, int]) -> Iterator[TestClient]:
    with TestClient(build_app(store[0], ui_options(8767), CSRF), base_url=BASE) as test_client:
        yield test_client


def refused(client: TestClient, path: str, **fields: str) -> str:
    """POST a form; the change must come back to its page with an error (303, then 200)."""
    data = {"csrf": CSRF, "user": "default", "agent": "default", **fields}
    answer = client.post(path, data=data, follow_redirects=False)
    assert answer.status_code == 303, (fields, answer.status_code, answer.text[:200])
    page = client.get(answer.headers["location"])
    assert page.status_code == 200 and "flash err" in page.text, fields
    return page.text


def test_queue_retry_takes_only_ascii_digits(client: TestClient, store: tuple[Memory, ScriptedChatModel, int]) -> None:
    mem, _llm, dead = store
    for given in (*NOT_NUMBERS, str(dead).translate(ARABIC_INDIC)):
        assert "item id must be a whole number" in refused(client, "/queue/retry", id=given), given
        assert [i.id for i in OutboxRepository(mem.db).items(status="dead")] == [dead], given


def test_rollback_takes_only_ascii_digits(client: TestClient, store: tuple[Memory, ScriptedChatModel, int]) -> None:
    mem = store[0]
    before = mem.core.read()
    oldest = min(v.id for v in mem.dream_versions())
    for given in (*NOT_NUMBERS, str(oldest).translate(ARABIC_INDIC)):
        assert "version must be a whole number" in refused(client, "/core/rollback", version=given), given
    assert mem.core.read() == before and len(mem.dream_versions()) == 2


def test_fact_confidence_takes_only_plain_decimals(
        client: TestClient, store: tuple[Memory, ScriptedChatModel, int]) -> None:
    mem = store[0]
    fact = next(f for f in mem.facts.list() if "dark mode" in f.content)
    for given in ("nan", "inf", "1e-1", "٠.٥", " 0.5", "-0", "0.5.1"):
        page = refused(client, "/facts/edit", id=fact.id, content=fact.content, category=fact.category,
                       confidence=given)
        assert "confidence must be a number in [0, 1]" in page, given
    assert mem.facts.get(fact.id) == fact


@pytest.mark.parametrize(("path", "name", "extra"), [
    ("/journal", "days", {}), ("/core", "versions", {}), ("/prompt", "max_tokens", {}), ("/calls", "limit", {}),
    ("/facts", "min", {"q": "dark mode"})])
def test_query_numbers_take_only_ascii_digits(client: TestClient, path: str, name: str, extra: dict[str, str]) -> None:
    for given in ("²", "٣", "1_0", " 3", "9" * 5000, "nan"):
        answer = client.get(path, params={**extra, name: given})
        assert answer.status_code == 400 and f"{name.replace('min', 'min score')} must be" in answer.text, (
            path, given, answer.status_code)


def test_a_content_length_that_is_not_ascii_digits_is_refused(client: TestClient) -> None:
    body = f"csrf={CSRF}&user=default&agent=default".encode()
    for given in (b"\xb2", b"\xb9\xb2", "١٢".encode(), b" 12", b"+12", b"", b"9" * 5000):  # latin-1 "²", "¹²"
        answer = client.post("/queue/flush", content=body, follow_redirects=False,
                             headers={"content-type": "application/x-www-form-urlencoded", "content-length": given})
        assert answer.status_code == 400 and "Content-Length" in answer.text, given
