"""``tiermem ui`` at the HTTP level: every page over a store full of ``<script>``, every change
through its form (CSRF token, post/redirect/get), on SQLite and PostgreSQL (Starlette's
TestClient on the guarded app; the guards themselves: tests/test_ui_guard.py)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient
from ui_helpers import ESCAPED, FABRICATED, QUEUED_FACT, SCRIPT, seeded

from tiermem import Memory
from tiermem.facts.injection import fact_line
from tiermem.storage.outbox import OutboxRepository
from tiermem.testing import FakeClock, ScriptedChatModel
from tiermem.tokens import count_tokens
from tiermem.ui.app import build_app
from tiermem.ui.guard import ui_options
from tiermem.ui.pages.calls import NO_CALL_LOG
from tiermem.ui.pages.prompt import injection_sections

pytestmark = pytest.mark.usefixtures("backend")

CSRF = "csrf-token-for-the-tests-0123456789"
BASE = "http://127.0.0.1:8767"
PAGES = ("/core", "/journal", "/facts", "/prompt", "/queue", "/calls")


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


def post(client: TestClient, path: str, **fields: str) -> str:
    """Submit a form like the browser does; returns the page it redirects to (its text)."""
    data = {"csrf": CSRF, "user": "default", "agent": "default", **fields}
    answer = client.post(path, data=data, follow_redirects=False)
    assert answer.status_code == 303, answer.text
    page = client.get(answer.headers["location"])
    assert page.status_code == 200
    return page.text


def test_every_page_escapes_stored_text_and_forbids_scripts(client: TestClient) -> None:
    seen = 0
    for path in PAGES:
        answer = client.get(path)
        assert answer.status_code == 200, path
        assert "<script" not in answer.text.lower(), path
        assert "script-src" not in answer.headers["content-security-policy"]  # default-src 'none' covers it
        assert "default-src 'none'" in answer.headers["content-security-policy"]
        assert answer.headers["x-frame-options"] == "DENY"
        seen += answer.text.count(ESCAPED)
    core, journal, facts = (client.get(p).text for p in ("/core", "/journal", "/facts"))
    assert ESCAPED in core  # MEMORY.md now, the diff of version 2 and the dream diary
    assert core.count(ESCAPED) >= 3
    assert ESCAPED in journal and ESCAPED in facts
    assert seen >= 6
    # a hostile scope name or query parameter is escaped too
    assert "<b>x" not in client.get("/facts", params={"q": "<b>x</b>"}).text
    assert "&lt;b&gt;x" in client.get("/facts", params={"q": "<b>x</b>"}).text


def test_core_page_shows_each_version_with_its_diff_diary_and_dropped_bullets(
        client: TestClient, store: tuple[Memory, ScriptedChatModel, int]) -> None:
    mem = store[0]
    versions = mem.dream_versions()
    assert [v.cause for v in versions] == ["edit", "dream"]
    page = client.get("/core").text
    for version in versions:
        assert f'id="v{version.id}"' in page
        assert f"Roll back to version {version.id}" in page
    dream_section = page.split(f'id="v{versions[1].id}"', 1)[1]
    assert "Dream diary" in dream_section and "Diary says" in dream_section
    assert "Dropped as unsupported by the sources (1)" in dream_section and FABRICATED in dream_section
    # the dream's diff: the prior text against the dream's text
    assert '<span class="add">+- Claire found a flat in Schwabing with 3 rooms.</span>' in dream_section
    # the edit's diff (version 2 against MEMORY.md now) adds the hand-written line
    edit_section = page.split(f'id="v{versions[0].id}"', 1)[1].split("<section", 1)[0]
    assert f'<span class="add">+- Hand-written note {ESCAPED}</span>' in edit_section


def test_rollback_button_restores_the_version_through_the_library(
        client: TestClient, store: tuple[Memory, ScriptedChatModel, int]) -> None:
    mem = store[0]
    before = mem.core.read()
    dream_text = mem.dream_versions()[0].content
    assert SCRIPT in before and SCRIPT not in dream_text
    page = post(client, "/core/rollback", version=str(mem.dream_versions()[0].id))
    assert mem.core.read() == dream_text
    saved = mem.dream_versions()[0]
    assert saved.cause == "rollback" and saved.content == before  # the rollback kept the replaced text
    assert f"restored version {mem.dream_versions()[1].id}; the replaced text is version {saved.id}" in page
    assert "does not exist" in post(client, "/core/rollback", version="999")
    assert mem.core.read() == dream_text


def test_journal_lists_days_newest_first_with_their_records(client: TestClient) -> None:
    page = client.get("/journal").text
    assert page.index('id="d2026-03-14"') < page.index('id="d2026-03-13"')
    assert "user: I accepted an offer from Siemens" in page
    assert "Session Notes (09:30)" in page
    older = client.get("/journal", params={"days": "1"}).text
    assert 'id="d2026-03-13"' not in older and "older days" in older
    assert 'id="d2026-03-13"' in client.get("/journal", params={"days": "1", "before": "2026-03-14"}).text


def test_facts_search_shows_the_score_and_what_made_it(
        client: TestClient, store: tuple[Memory, ScriptedChatModel, int]) -> None:
    mem = store[0]
    hit = mem.search("dark mode editor", tier="fact")[0]
    assert set(hit.extra) >= {"keyword", "vector"}
    page = client.get("/facts", params={"q": "dark mode editor"}).text
    row = page.split(f'id="f-{hit.ref}"', 1)[1].split("</tr>", 1)[0]
    assert f"<strong>{hit.score:.3f}</strong>" in row
    assert f"keyword {hit.extra['keyword']:.3f}" in row and f"vector {hit.extra['vector']:.3f}" in row
    assert "Works on distributed databases" not in page  # below the floor
    listed = client.get("/facts", params={"category": "knowledge"}).text
    assert "Works on distributed databases" in listed and "dark mode" not in listed.split("<tbody>", 1)[1]


def test_recency_shows_when_a_half_life_is_set(root: Path, clock: FakeClock) -> None:
    with Memory(root.parent / "recent", embedder="hash", clock=clock, timezone="UTC",
                search_recency_half_life_days=30) as mem:
        mem.facts.add("Prefers dark mode in every editor", "preference", 0.9)
        with TestClient(build_app(mem, ui_options(8767), CSRF), base_url=BASE) as client:
            page = client.get("/facts", params={"q": "dark mode"}).text
    assert re.search(r"recency 1\.000", page)


def test_edit_delete_and_purge_go_through_the_library(
        client: TestClient, store: tuple[Memory, ScriptedChatModel, int]) -> None:
    mem = store[0]
    fact = next(f for f in mem.facts.list() if f.content.startswith("Works on"))
    key = "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4"
    page = post(client, "/facts/edit", id=fact.id, content=f"Works on Postgres internals, key {key}",
                category="goal", confidence="0.7")
    assert f"saved fact {fact.id}" in page
    edited = mem.facts.get(fact.id)
    assert (edited.category, edited.confidence) == ("goal", 0.7)
    assert key not in edited.content and "[REDACTED" in edited.content  # the library's redaction
    assert [e.action for e in mem.facts.history(fact_id=fact.id)] == ["added", "updated"]
    # bad input: a clear message, nothing changed
    assert "confidence" in post(client, "/facts/edit", id=fact.id, content="x", confidence="2.5")
    assert mem.facts.get(fact.id) == edited
    assert f"deleted fact {fact.id}" in post(client, "/facts/delete", id=fact.id)
    assert fact.id not in {f.id for f in mem.facts.list()}
    other = next(f for f in mem.facts.list() if f.content.startswith("Prefers dark"))
    assert "erase for good" in post(client, "/facts/purge", id=other.id)  # the box not ticked: refused
    assert other.id in {f.id for f in mem.facts.list()}
    assert f"purged fact {other.id}" in post(client, "/facts/purge", id=other.id, confirm="yes")
    assert other.id not in {f.id for f in mem.facts.list()}
    assert all("Prefers dark" not in (e.content or "") for e in mem.facts.history())


def test_a_change_without_the_csrf_token_is_refused_and_changes_nothing(
        client: TestClient, store: tuple[Memory, ScriptedChatModel, int]) -> None:
    mem = store[0]
    fact = mem.facts.list()[0]
    for data in ({}, {"csrf": "wrong"}, {"csrf": CSRF + "x"}):
        answer = client.post("/facts/delete", data={"id": fact.id, **data}, follow_redirects=False)
        assert answer.status_code == 403
        assert "CSRF" in answer.text
    assert mem.facts.get(fact.id) == fact
    assert client.get("/facts/delete").status_code == 405  # changes are POST only
    assert all(f'name=csrf value="{CSRF}"' in m for m in re.findall(r"<form method=post.*?</form>",
                                                                    client.get("/facts").text))


def test_prompt_page_shows_the_texts_exactly_with_token_counts(
        client: TestClient, store: tuple[Memory, ScriptedChatModel, int]) -> None:
    mem = store[0]
    page = client.get("/prompt", params={"q": "dark mode"}).text
    injection = mem.format_for_injection(query="dark mode")
    titles = [title for title, _ in injection_sections(injection)]
    assert {"Core Memory", "Facts"} <= set(titles)
    for title, text in injection_sections(injection):
        assert f"<td>{title}</td><td>{count_tokens(text)}</td>" in page
    assert f"<strong>{count_tokens(injection)}</strong>" in page
    import html

    assert f'<pre class="injection">{html.escape(injection)}</pre>' in page
    context = mem.system_context()
    assert f'<pre class="context">{html.escape(context.text)}</pre>' in page
    assert f"<td>memory</td><td>{count_tokens(context.sections['memory'])}</td>" in page
    facts = [fact_line(f) for f in mem.facts.list()]
    assert html.escape(facts[0]) in page


def test_queue_page_lists_dead_items_and_retry_processes_them(
        client: TestClient, store: tuple[Memory, ScriptedChatModel, int]) -> None:
    mem, llm, dead = store
    page = client.get("/queue").text
    assert "Dead (1)" in page and "provider down" in page and f"<td>{dead}</td>" in page
    page = post(client, "/queue/retry")
    assert "retried 1 dead item(s); the queue is empty" in page
    assert "Dead (0)" in page and OutboxRepository(mem.db).counts() == {}
    assert QUEUED_FACT in [f.content for f in mem.facts.list()]  # extracted by the scripted LLM
    assert llm.remaining == []


def test_one_dead_item_is_retried_on_its_own(
        client: TestClient, store: tuple[Memory, ScriptedChatModel, int], clock: FakeClock) -> None:
    mem, _llm, dead = store
    outbox = OutboxRepository(mem.db)
    other = outbox.put("t-dead-2", mem.scope, [{"role": "user", "content": "a second dead item"}], clock.now())
    with mem.db.transaction() as conn:
        conn.execute("UPDATE outbox SET status = 'dead', attempts = 3, last_error = 'down' WHERE id = ?", (other,))
    page = client.get("/queue").text
    assert "Dead (2)" in page and f"Retry item {dead}" in page and f"Retry item {other}" in page
    page = post(client, "/queue/retry", id=str(dead))
    assert "retried 1 dead item(s)" in page
    assert [i.id for i in outbox.items(status="dead")] == [other]  # the other one stays dead
    assert QUEUED_FACT in [f.content for f in mem.facts.list()]
    page = post(client, "/queue/retry", id="x1")
    assert "item id must be a whole number" in page and [i.id for i in outbox.items(status="dead")] == [other]


def test_the_scope_picker_opens_another_user(client: TestClient) -> None:
    page = client.get("/facts", params={"user": "bob"}).text
    assert "Bob likes sailing" in page and "dark mode" not in page.split("<tbody>", 1)[1]
    assert 'value="bob"' in page and '<option value="bob">' in page
    assert "user_id" in client.get("/facts", params={"user": "../etc"}).text  # a bad name: the library's error
    assert client.get("/facts", params={"user": "../etc"}).status_code == 400


def test_calls_page_shows_the_call_log_with_filters_and_totals(
        client: TestClient, store: tuple[Memory, ScriptedChatModel, int]) -> None:
    mem = store[0]
    post(client, "/queue/retry")  # one extraction call after the seeded dream call
    calls = mem.calls.list()
    assert sorted(c.purpose for c in calls) == ["dream", "extraction"]
    page = client.get("/calls").text
    assert NO_CALL_LOG not in page
    assert f"{mem.calls.totals().calls} calls" in page and "By purpose: dream 1, extraction 1." in page
    for call in calls:
        assert f"<tr><td>{call.id}</td>" in page
    dream_only = client.get("/calls", params={"purpose": "dream"}).text
    assert "<td>dream</td>" in dream_only and "<td>extraction</td>" not in dream_only
    wrong = client.get("/calls", params={"purpose": "<nonsense>"})
    assert wrong.status_code == 400 and "&lt;nonsense&gt;" in wrong.text
