"""R68 on every write path: a secret never reaches SQLite or the Markdown files."""

from __future__ import annotations

from pathlib import Path

from tiermem import Memory
from tiermem.testing import FakeClock, HashEmbedder

KEY = "sk-proj-" + "Q1w2E3r4T5y6U7i8O9p0A1s2D3f4G5h6"
PEM = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----"


def stored_bytes(root: Path) -> bytes:
    return b"".join(p.read_bytes() for p in root.rglob("*") if p.is_file())


def test_facts_daily_and_sessions_are_redacted(root: Path, clock: FakeClock) -> None:
    with Memory(root, embedder=HashEmbedder(), clock=clock, timezone="UTC", session_max_tokens=60) as mem:
        fact = mem.facts.add(f"The staging key is {KEY}", "knowledge")
        assert fact is not None and KEY not in fact.content and "[REDACTED" in fact.content
        mem.facts.update(fact.id, content=f"The prod key is {KEY}")
        mem.daily.append("Note", [f"deploy with {KEY}"])
        session = mem.session("s1")
        session.add("user", f"here is my private key {PEM}")
        for i in range(6):
            session.add("assistant", f"long reply number {i} " * 5)
        session.end()
        assert "[REDACTED" in mem.daily.read("2026-03-14")
    data = stored_bytes(root)
    assert KEY.encode() not in data and b"MIIEvQIBADANBgkqhkiG9w0BAQEFAASC" not in data


def test_redaction_can_be_turned_off(root: Path, clock: FakeClock) -> None:
    with Memory(root, embedder=HashEmbedder(), clock=clock, redact_secrets=False) as mem:
        fact = mem.facts.add(f"The staging key is {KEY}")
        assert fact is not None and KEY in fact.content
