"""R68 on every write path: a secret never reaches SQLite (database, -wal) or the files of the root.

Each write path gets secrets of its own (an API key, a private key's body, ``token: ...``, an AWS
secret access key), so a leak names the path it came by; after each phase the whole root is
searched for every one of them, byte for byte.
"""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path
from typing import Any

import anyio
from click.testing import CliRunner
from mcp import Client

from tiermem import Memory
from tiermem.cli.main import cli
from tiermem.mcp.server import build_server
from tiermem.testing import FakeClock, HashEmbedder, ScriptedChatModel

ENV = {"TIERMEM_EMBEDDER": "hash", "TIERMEM_TIMEZONE": "UTC"}
KEY = "sk-proj-" + "Q1w2E3r4T5y6U7i8O9p0A1s2D3f4G5h6"
PEM = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----"


class Secrets:
    """Distinct secrets per write path (``where``), and the needles that must never be stored."""

    def __init__(self) -> None:
        self.needles: dict[str, list[str]] = {}

    def _raw(self, where: str, size: int) -> str:
        data = hashlib.sha512(where.encode()).digest() * 4
        return base64.b64encode(data).decode("ascii")[:size]

    def _add(self, where: str, *needles: str) -> None:
        self.needles.setdefault(where, []).extend(needles)

    def key(self, where: str) -> str:
        body = "".join(c for c in self._raw(where + ":key", 80) if c.isalnum())[:28] + "7x"
        self._add(where, body)
        return f"sk-proj-{body}"

    def pem(self, where: str) -> list[str]:
        """A private key as lines (as a Daily ``lines`` list or a checklist would carry it)."""
        body = [self._raw(f"{where}:pem{i}", 64) for i in range(3)]
        self._add(where, *(line[:24] for line in body))
        return ["-----BEGIN PRIVATE KEY-----", *body, "Zm9v8w==", "-----END PRIVATE KEY-----"]

    def token(self, where: str) -> str:
        value = "t0k" + hashlib.sha256(where.encode()).hexdigest()[:14]
        self._add(where, value)
        return f"token: {value}"

    def aws(self, where: str) -> str:
        value = "".join(c for c in self._raw(where + ":aws", 80) if c.isalnum())[:38] + "/Q"
        self._add(where, value)
        return f"AWS_SECRET_ACCESS_KEY={value}"


def leaks(root: Path, secrets: Secrets) -> list[str]:
    """Every needle found in any file under ``root`` (database, its -wal and -shm, Markdown, locks)."""
    found: list[str] = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        data = path.read_bytes()
        for where, needles in secrets.needles.items():
            found += [f"{where}: {needle!r} in {path.relative_to(root)}" for needle in needles
                      if needle.encode() in data]
    return found


def extraction_reply(secrets: Secrets, where: str) -> str:
    return json.dumps({"newFacts": [{"content": f"The deploy key is {secrets.key(where + ' fact')}",
                                     "category": "knowledge", "confidence": 0.9}],
                       "summaries": {"workContext": f"Rotating creds; {secrets.token(where + ' summary')}"}})


def openai_thread(secrets: Secrets, where: str) -> list[dict[str, Any]]:
    arguments = json.dumps({"api_key": secrets.key(where + " tool arguments"), "user": "bob"})
    return [
        {"role": "user", "content": f"log in, my {secrets.aws(where + ' user')}"},
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "login", "arguments": arguments}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": f"ok, {secrets.token(where + ' tool result')}"},
        {"role": "assistant", "content": "\n".join(secrets.pem(where + " assistant"))},
    ]


def anthropic_thread(secrets: Secrets, where: str) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": [{"type": "text", "text": f"use {secrets.key(where + ' text block')}"}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "tu_1", "name": "vault",
                                           "input": {"secret": secrets.aws(where + " tool input")}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "tu_1",
                                      "content": secrets.token(where + " tool_result")}]},
    ]


def through_mcp(mem: Memory, secrets: Secrets) -> None:
    async def main() -> None:
        async with Client(build_server(mem)) as client:
            for name, arguments in (
                ("remember", {"content": f"MCP remember {secrets.key('mcp remember')}"}),
                ("daily_note", {"text": f"MCP note {secrets.aws('mcp daily_note')}", "kind": "Note"}),
                ("daily_note", {"lines": secrets.pem("mcp daily_note lines")}),
                ("plan_start", {"title": f"MCP plan {secrets.token('mcp plan title')}",
                                "checklist": [f"use {secrets.key('mcp plan step')}"]}),
            ):
                result = await client.call_tool(name, arguments)
                assert not result.is_error, result.content

    anyio.run(main)


def library_paths(mem: Memory, secrets: Secrets) -> None:
    """Facts, summaries, Daily, sessions, the queue, plans and MEMORY.md through the library."""
    fact = mem.facts.add(f"Staging uses {secrets.key('facts.add')}", source=f"thread-{secrets.key('facts source')}")
    assert fact is not None and "[REDACTED" in fact.content and "[REDACTED" in str(fact.source)
    mem.facts.update(fact.id, content=f"Prod uses {secrets.aws('facts.update')}")
    mem.facts.set_summaries({"topOfMind": f"{'x' * 480} {secrets.key('set_summaries')}",
                             "workContext": secrets.token("set_summaries 2")})
    mem.facts.delete(mem.facts.add(f"old {secrets.token('facts.delete')}").id)  # type: ignore[union-attr]
    mem.daily.append(secrets.token("daily kind")[:40], [f"deploy with {secrets.key('daily.append')}",
                                                        *secrets.pem("daily.append lines")])
    mem.daily.append("Note", "\n".join(secrets.pem("daily.append text")))
    session = mem.session(f"sess-{secrets.key('session id')}")
    session.add_messages(openai_thread(secrets, "session"))
    session.end()
    mem.queue.add(f"thread-{secrets.key('queue thread id')}", openai_thread(secrets, "queue openai"))
    mem.queue.add("anthropic-thread", anthropic_thread(secrets, "queue anthropic"))
    assert leaks(mem.root, secrets) == []  # queued (the outbox) and not processed yet
    mem.queue.flush()
    plan = mem.plans.start(f"Rotate {secrets.key('plan title')}",
                           [f"revoke {secrets.aws('plan step')}", *secrets.pem("plan checklist")],
                           session_id=f"s-{secrets.key('plan session')}")
    mem.plans.check(plan.id, 0)
    mem.plans.attach_session(plan.id, f"s2-{secrets.key('plan attach')}")
    mem.plans.resume(session_id=f"s3-{secrets.token('plan resume')}")
    mem.core.write("## Ops\n- Vault root " + secrets.key("core.write") + "\n- " + secrets.aws("core.write 2") + "\n")


def other_store_export(tmp_path: Path, clock: FakeClock, secrets: Secrets) -> dict[str, Any]:
    """An export made by a store without redaction: secrets in every section an import restores."""
    with Memory(tmp_path / "src", embedder=HashEmbedder(), clock=clock, timezone="UTC", redact_secrets=False,
                user_id="carol") as src:
        src.facts.add(f"Carol's key {secrets.key('import fact')}", source=f"t-{secrets.key('import source')}")
        src.facts.set_summaries({"workContext": secrets.token("import summary")})
        src.plans.start(f"Import {secrets.aws('import plan')}", ["step one"],
                        session_id=f"s-{secrets.key('import plan session')}")
        src.queue.add(f"t-{secrets.key('import flushed thread')}", openai_thread(secrets, "import flushed"))
        src.queue.flush()
        src.queue.add(f"t-{secrets.key('import pending thread')}", anthropic_thread(secrets, "import pending"))
        src.core.write(f"- Carol's vault {secrets.key('import MEMORY.md')}\n")
        src.daily.append("Note", f"imported {secrets.token('import daily')}")
        data = src.export()
        src.queue.close(timeout=0)
    assert secrets.needles["import pending tool input"][0] in json.dumps(data)  # the document holds the secrets
    return data


def test_every_write_path_keeps_secrets_out_of_the_root(tmp_path: Path, clock: FakeClock) -> None:
    secrets = Secrets()
    root = tmp_path / "mem"
    with Memory(root, embedder=HashEmbedder(), clock=clock, timezone="UTC", debounce_seconds=0) as mem:
        library_paths(mem, secrets)
        through_mcp(mem, secrets)
        mem.import_(other_store_export(tmp_path, clock, secrets))
        assert leaks(root, secrets) == []  # the database and its -wal while open

    transcript = tmp_path / "chat.jsonl"  # outside the root
    transcript.write_text("\n".join(json.dumps({"thread_id": f"i-{secrets.key('ingest thread')}", **m})
                                    for m in [{"role": "user", "content": secrets.aws("ingest")},
                                              {"role": "assistant", "content": "noted"}]) + "\n", encoding="utf-8")
    for args in (["note", f"CLI note {secrets.key('cli note')}", "--kind", secrets.token("cli kind")[:30]],
                 ["remember", f"CLI fact {secrets.aws('cli remember')}", "--source", f"t-{secrets.key('cli source')}"],
                 ["ingest", str(transcript)]):
        result = CliRunner().invoke(cli, ["--root", str(root), *args], env=ENV)
        assert result.exit_code == 0, result.output

    thread = openai_thread(secrets, "extraction queue")
    (root / "MEMORY.md").write_text("## Ops\n- Vault root [REDACTED:openai_key]\n- Hand-edited: "
                                    f"{secrets.key('hand edit of MEMORY.md')}\n", encoding="utf-8")
    dream_reply = ("[MEMORY]\n## Ops\n- Vault root [REDACTED:openai_key]\n- Hand-edited: [REDACTED:openai_key]\n"
                   f"- Log in to the deploy host; the deploy password=swordfish-{secrets.token('dream bullet')[7:]}\n"
                   f"\n[DREAM]\nNoted {secrets.key('dream diary')} and {secrets.aws('dream diary 2')}.\n")
    llm = ScriptedChatModel([extraction_reply(secrets, "queue extraction"), extraction_reply(secrets, "extract()"),
                             f"- The user shared {secrets.key('session summary')}", dream_reply])
    with Memory(root, llm=llm, embedder=HashEmbedder(), clock=clock, timezone="UTC") as mem:
        mem.refresh_index()  # the hand edit: indexed redacted
        mem.queue.add(f"x-{secrets.key('extraction thread id')}", thread)
        mem.queue.flush()
        mem.extract(anthropic_thread(secrets, "extract()"), thread_id=f"e-{secrets.key('extract thread id')}")
        session = mem.session("summarised")
        session.add("user", f"hello {secrets.token('summarised session')}")
        session.end()
        assert mem.wait_idle(10)
        result = mem.deep_dream(lookback_days=1)
        assert result.status == "written", result.reason
        assert [v.content for v in mem.dream_versions()] and "Hand-edited: [REDACTED" in mem.dream_versions()[0].content
        assert leaks(root, secrets) == []
        exported = json.dumps(mem.export())
        assert [w for w, needles in secrets.needles.items() if any(n in exported for n in needles)] == []
    assert llm.remaining == []
    assert leaks(root, secrets) == []  # and after the close (WAL checkpointed)
    assert "[REDACTED:" in (root / "MEMORY.md").read_text(encoding="utf-8")


def test_a_hand_edit_is_redacted_in_what_tiermem_derives(root: Path, clock: FakeClock) -> None:
    secrets = Secrets()
    with Memory(root, embedder=HashEmbedder(), clock=clock, timezone="UTC") as mem:
        mem.core.write("- Works at Acme\n")
        mem.daily.append("Note", "first note")
        secret_line = f"- Vault token {secrets.key('hand edit')}\n"
        (root / "MEMORY.md").write_text("- Works at Acme\n" + secret_line, encoding="utf-8")
        with (root / "memory" / "2026-03-14.md").open("a", encoding="utf-8") as handle:
            handle.write("\n".join(["- key:", *secrets.pem("daily hand edit")]) + "\n")
        needles = [n for group in secrets.needles.values() for n in group]
        hits = mem.search("vault token key", k=20, min_score=0)
        assert hits and not any(n in hit.text for hit in hits for n in needles)
        assert not any(n in mem.format_for_injection() for n in needles)  # MEMORY.md as the prompt sees it
        assert not any(n in json.dumps(mem.export()) for n in needles)
        mem.core.write(mem.core.read())  # a rewrite from what tiermem reads: the file is redacted now
    db = (root / "tiermem.db").read_bytes()
    assert not any(n.encode() in db for n in needles)
    assert secrets.needles["hand edit"][0] not in (root / "MEMORY.md").read_text(encoding="utf-8")


def test_redaction_can_be_turned_off(root: Path, clock: FakeClock) -> None:
    with Memory(root, embedder=HashEmbedder(), clock=clock, redact_secrets=False) as mem:
        fact = mem.facts.add(f"The staging key is {KEY}", source=f"t-{KEY}")
        assert fact is not None and KEY in fact.content and fact.source == f"t-{KEY}"
        mem.plans.start(f"Rotate {KEY}", ["step"])
        mem.core.write(f"- {KEY}\n")
        mem.queue.add(f"t-{KEY}", [{"role": "user", "content": PEM}])
        assert KEY in mem.core.read() and KEY in mem.plans.active().title  # type: ignore[union-attr]
        assert mem.queue.pending()[0].thread_id == f"t-{KEY}"
    assert KEY.encode() in (root / "tiermem.db").read_bytes() + (root / "MEMORY.md").read_bytes()


def test_a_secret_conversation_id_still_names_one_conversation(root: Path, clock: FakeClock) -> None:
    """The session and the queue store the id redacted (with a hash), and still share its digests:
    each message is journaled once; a second id that differs only in its secret stays apart."""
    thread = f"chat-{KEY}"
    other = f"chat-{KEY[:-4]}ZZZZ"
    messages = [{"role": "user", "content": "I moved to Lisbon"}, {"role": "assistant", "content": "Nice!"}]
    with Memory(root, embedder=HashEmbedder(), clock=clock, timezone="UTC", debounce_seconds=0) as mem:
        session = mem.session(thread)
        session.add_messages(messages)
        session.end()
        mem.queue.add(thread, messages)
        mem.queue.flush()
        assert mem.daily.read().count("I moved to Lisbon") == 1
        mem.queue.add(other, messages)
        mem.queue.flush()
        assert mem.daily.read().count("I moved to Lisbon") == 2  # another conversation
    assert KEY[8:].encode() not in (root / "tiermem.db").read_bytes()


def test_a_tool_input_secret_named_by_its_key_is_redacted_in_the_queue_and_journaled_once(
        root: Path, clock: FakeClock) -> None:
    """R68: a tool input ``{"api_key": ...}`` (a value only its key gives away) and a token in JSON
    inside a tool input never reach the outbox or the journal; the session and the queue, which
    redact the thread at different moments, still agree on its digests: one record per message."""
    plain = "hunter2-quokka-771"  # matches no secret pattern: only the key "api_key" says what it is
    nested = "abcdefg12345-zebra"
    call = {"type": "tool_use", "id": "toolu_1", "name": "login",
            "input": {"api_key": plain, "options": json.dumps({"token": nested})}}
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "Log in to the billing service"},
        {"role": "assistant", "content": [{"type": "text", "text": "Logging in."}, call]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"}]},
    ]
    with Memory(root, embedder=HashEmbedder(), clock=clock, timezone="UTC", debounce_seconds=3600) as mem:
        mem.queue.add("chat-login", messages)
        queued = json.dumps(mem.queue.pending()[0].messages)
        assert plain not in queued and nested not in queued and "Logging in." in queued
        session = mem.session("chat-login")
        session.add_messages(messages)
        session.end()
        mem.queue.flush()
        journal = mem.daily.read()
    assert journal.count("Logging in.") == 1 and journal.count("login") >= 1
    assert plain not in journal and nested not in journal
    stored = b"".join(p.read_bytes() for p in root.rglob("*") if p.is_file())
    assert plain.encode() not in stored and nested.encode() not in stored
