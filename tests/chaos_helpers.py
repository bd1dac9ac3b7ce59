"""The chaos harness (issue 14): a writer process SIGKILLed at random moments, checked after each restart.

The writer (:func:`writer`, a fork of a server that has tiermem loaded) opens a store and, until
it is killed, does what an agent does: ``queue.add`` of three-message steps of a few long-lived threads,
``queue.flush`` (journal + extraction by a scripted LLM in half the runs), ``facts.add``,
``daily.append`` and sessions that end (and are then queued under the same conversation id).
After each call returns it appends an acknowledgement line to ``ACKS`` (a file: the page cache
keeps it through the kill). Every text it writes is unique, so any record seen twice is a double.

:func:`verify` is what happens after each restart: open the store, flush the queue, and check
that nothing is left in the queue but dead items with a reason, that every acknowledged write is
there exactly once and no record is there twice, and that ``tiermem doctor`` finds the store
healthy. The check restarts a copy of the store (:func:`verify_copy`), so the next writer meets
what the kill left (items in flight, unsettled journal intents) as a restarted agent would; the
last check restarts the store itself (on PostgreSQL every check does: the store is the database).
:func:`run_chaos` alternates kills and checks; the suite (tests/test_chaos.py) runs it with a few
dozen kills, bench/chaos.py with a thousand.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import random
import re
import shutil
import signal
import time
import traceback
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from multiprocessing.context import BaseContext
from pathlib import Path
from typing import Any

THREADS = ("q0", "q1", "q2")  # queue threads that live across restarts (so items are in flight when killed)
FAULT_POINTS = ("journal.intent", "journal.appended", "journal.recorded", "queue.claimed", "queue.journaled",
                "queue.extracted", "queue.processed")
_TOKEN = re.compile(r"\bkw\d+z\d+\b")


def message(thread: str, index: int) -> dict[str, str]:
    """Message ``index`` of ``thread``: always the same text at the same position."""
    role = "user" if index % 2 == 0 else "assistant"
    token = f"kw{sum(map(ord, thread))}z{index}" if index % 6 == 0 else "plain"
    return {"role": role, "content": f"{thread} says message {index} ({token})"}


def record_of(msg: dict[str, str]) -> str:
    return f"{msg['role']}: {msg['content']}"


class ChaosModel:
    """A deterministic LLM: extraction names a fact for each ``kw..z..`` token it is shown; a
    session summary is one line naming what it summarised (so each summary text is unique)."""

    def complete(self, messages: list[dict[str, Any]], *, json_schema: dict[str, Any] | None = None) -> str:
        text = "\n".join(str(m.get("content", "")) for m in messages)
        if json_schema is None:
            return f"- summary {hashlib.sha256(text.encode()).hexdigest()[:16]}"
        tokens = sorted(set(_TOKEN.findall(text)))
        empty = {"summary": "", "shouldUpdate": False}
        return json.dumps({
            "user": {"workContext": empty, "personalContext": empty, "topOfMind": empty},
            "history": {"recentMonths": empty, "earlierContext": empty, "longTermBackground": empty},
            "newFacts": [{"content": f"Mentioned {t}", "category": "knowledge", "confidence": 0.9} for t in tokens],
            "factsToRemove": [],
        })


def store_settings(llm: bool) -> dict[str, Any]:
    from tiermem.testing import HashEmbedder

    return {"llm": ChaosModel() if llm else None, "embedder": HashEmbedder(), "timezone": "UTC",
            "debounce_seconds": 3600, "update_delay_seconds": 0, "extract_min_turns": 1, "max_facts": 1_000_000,
            "shutdown_flush_seconds": 0, "queue_replay": False}


# --- the writer ----------------------------------------------------------------------------------

def read_acks(path: Path) -> list[dict[str, Any]]:
    """Acknowledged writes (a line cut by the kill is not one)."""
    if not path.exists():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").split("\n"):
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


def thread_lengths(acks: list[dict[str, Any]]) -> dict[str, int]:
    lengths: dict[str, int] = {}
    for ack in acks:
        if ack["op"] == "queue":
            lengths[ack["thread"]] = max(lengths.get(ack["thread"], 0), ack["n"])
    return lengths


def preload() -> None:
    """Import what a writer uses and load the tokenizer once, in the fork server (so a writer
    starts in milliseconds and the kills land in its work, not in its imports)."""
    import importlib

    for name in ("numpy", "tiermem.memory", "tiermem.testing", "tiermem.tiers.assembly", "tiermem.tiers.indexer",
                 "tiermem.search.engine", "tiermem.search.indexer", "tiermem.queue.worker", "tiermem.queue.process",
                 "tiermem.queue.pending", "tiermem.plans.store", "tiermem.extract.apply"):
        importlib.import_module(name)
    from tiermem.tokens import count_tokens

    count_tokens("warm up")


def writer(root: Path, run: int, seed: int, acks_path: Path, fault: str | None, ready: Connection,
           database_url: str | None = None) -> None:
    """The writer process: works until killed (or 20 s pass); reports "ready" or its failure on ``ready``.
    ``database_url``: the test's PostgreSQL store (the fork server's environment is older than the test's)."""
    try:
        if fault is not None:
            os.environ["TIERMEM_FAULTS"] = fault
        if database_url:
            os.environ["TIERMEM_DATABASE_URL"] = database_url
        _write(root, run, seed, acks_path, fault is not None or run % 2 == 0, ready)
    except BaseException:
        ready.send(traceback.format_exc()[-3000:])
        raise


def _write(root: Path, run: int, seed: int, acks_path: Path, llm: bool, ready: Connection) -> None:
    from tiermem import Memory

    logging.getLogger("tiermem").setLevel(logging.ERROR)
    rng = random.Random(seed)
    lengths = thread_lengths(read_acks(acks_path))
    acks = open(acks_path, "a", encoding="utf-8")  # noqa: SIM115 - lives until the kill

    def ack(**what: Any) -> None:
        acks.write(json.dumps(what) + "\n")
        acks.flush()

    mem = Memory(root, **store_settings(llm=llm))
    ready.send("ready")
    deadline = time.monotonic() + 20
    step = 0
    while time.monotonic() < deadline:
        step += 1
        roll = rng.random()
        if roll < 0.35:
            thread = rng.choice(THREADS)
            n = lengths.get(thread, 0) + 3
            mem.queue.add(thread, [message(thread, i) for i in range(n)])
            lengths[thread] = n
            ack(op="queue", thread=thread, n=n)
        elif roll < 0.55:
            mem.queue.flush(timeout=10)
        elif roll < 0.7:
            text = f"Chaos fact r{run} s{step}"
            mem.facts.add(text)
            ack(op="fact", text=text)
        elif roll < 0.85:
            text = f"chaos note r{run} s{step}"
            mem.daily.append("Chaos", text)
            ack(op="daily", text=text)
        else:
            sid = f"s{run}x{step}"
            session = mem.session(sid)
            for i in range(3):
                msg = message(sid, i)
                session.add(msg["role"], msg["content"])
            session.end()
            ack(op="session", thread=sid, n=3)
            mem.queue.add(sid, [message(sid, i) for i in range(3)])  # the same conversation, queued too
            ack(op="queue", thread=sid, n=3)


# --- the checks after a restart ------------------------------------------------------------------

@dataclass
class Check:
    """What one restart found."""

    acked: Counter[str] = field(default_factory=Counter)  # acknowledged writes checked, by kind
    dead: dict[int, str] = field(default_factory=dict)  # items the queue gave up on: id -> reason (then retried)
    problems: list[str] = field(default_factory=list)


def journal_records(root: Path) -> Counter[str]:
    from queue_helpers import refresh_mirror

    from tiermem.tiers.markdown import parse_records

    refresh_mirror(root)  # on PostgreSQL the files are a mirror of the database
    files = sorted(root.glob("memory/*.md")) + sorted(root.glob("users/*/memory/*.md"))
    return Counter(r.text for path in files for r in parse_records(path.read_text(encoding="utf-8")))


def verify_copy(root: Path, scratch: Path, acks: list[dict[str, Any]]) -> Check:
    """:func:`verify` on a copy of ``root``: the store itself stays as the kill left it (claims in
    flight, intents unsettled), so the next writer starts from there, as a restarted agent would."""
    shutil.rmtree(scratch, ignore_errors=True)
    shutil.copytree(root, scratch)
    return verify(scratch, acks)


def verify(root: Path, acks: list[dict[str, Any]]) -> Check:
    """Restart, flush, and check (see the module docstring)."""
    from tiermem import Memory

    check = Check()
    with Memory(root, **store_settings(llm=True)) as mem:
        mem.queue.flush(timeout=60)
        counts = mem.queue.outbox.counts()
        dead = mem.queue.outbox.items("dead")
        check.dead = {i.id: i.last_error or "" for i in dead}
        check.problems += [f"dead item {i.id} without a reason" for i in dead if not i.last_error]
        if counts.get("pending") or counts.get("processing"):
            check.problems.append(f"queue not drained after a flush: {counts}")
        if dead:
            mem.queue.retry_dead()
            mem.queue.flush(timeout=60)
        facts = Counter(f.content for f in mem.facts.list())
    records = journal_records(root)
    check.problems += [f"record written {n} times: {text[:80]!r}" for text, n in records.items() if n > 1]
    for ack in acks:
        check.acked[ack["op"]] += 1
        if ack["op"] in ("queue", "session"):
            wanted = [record_of(message(ack["thread"], i)) for i in range(ack["n"])]
        elif ack["op"] == "daily":
            wanted = [ack["text"]]
        else:
            wanted = []
            if facts[ack["text"]] != 1:
                check.problems.append(f"acknowledged fact {ack['text']!r} is there {facts[ack['text']]} times")
        check.problems += [f"acknowledged {ack['op']} record {w[:60]!r} is there {records[w]} times"
                           for w in wanted if records[w] != 1]
    check.problems += doctor_problems(root)
    return check


def doctor_problems(root: Path) -> list[str]:
    """``tiermem doctor``'s problems, where tiermem has a doctor."""
    try:
        from tiermem.doctor import check as doctor_check
    except ImportError:
        return []
    report = doctor_check(root)
    return [] if report.ok else [f"doctor: {p}" for p in report.problems]


# --- the loop ---------------------------------------------------------------------------------------

def store_outside_root() -> bool:
    """True when the store is a database server's (PostgreSQL): a copy of the root is no copy of
    it, so each restart is checked on the store itself (the next writer then meets a settled
    store; the restart still meets what the kill left)."""
    return bool(os.environ.get("TIERMEM_DATABASE_URL"))


@dataclass
class ChaosResult:
    kills: int = 0  # SIGKILLs at a random moment
    fault_kills: int = 0  # SIGKILLs at an injected fault point
    restarts_checked: int = 0
    acked: Counter[str] = field(default_factory=Counter)  # acknowledged writes checked (summed over restarts)
    dead: dict[int, str] = field(default_factory=dict)  # distinct items found dead at some restart: id -> reason
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0


_context: BaseContext | None = None


def _processes() -> BaseContext:
    """A fork server with tiermem loaded: each writer is a fresh, single-threaded fork of it."""
    global _context
    if _context is None:
        import multiprocessing

        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(["chaos_helpers", "chaos_preload"])
        _context = context
    return _context


def one_life(root: Path, run: int, rng: random.Random, acks: Path, fault: str | None, max_delay: float) -> str:
    """Run a writer until its kill; returns "" or what went wrong."""
    context = _processes()
    ours, theirs = context.Pipe(duplex=False)
    url = os.environ.get("TIERMEM_DATABASE_URL")
    proc = context.Process(target=writer, args=(root, run, rng.randrange(2**31), acks, fault, theirs, url),
                           daemon=True)
    proc.start()  # type: ignore[attr-defined]
    theirs.close()
    try:
        first = ours.recv() if ours.poll(60) else "no word within 60 s"
    except EOFError:
        first = "the writer died before it was ready"
    if first != "ready":
        proc.kill()  # type: ignore[attr-defined]
        return f"run {run}: the writer did not start: {first}"
    if fault is None:
        time.sleep(rng.uniform(0.0, max_delay))
        proc.kill()  # type: ignore[attr-defined]
    proc.join(30)  # type: ignore[attr-defined]
    if proc.exitcode is None:  # type: ignore[attr-defined]
        proc.kill()  # type: ignore[attr-defined]
        proc.join()  # type: ignore[attr-defined]
        return f"run {run}: the fault {fault} never fired"
    if proc.exitcode != -signal.SIGKILL:  # type: ignore[attr-defined]
        why = ours.recv() if ours.poll(1) else ""
        return f"run {run}: the writer exited with {proc.exitcode}: {why}"  # type: ignore[attr-defined]
    return ""


def run_chaos(root: Path, work: Path, kills: int, seed: int, fault_rounds: int = 1, max_delay: float = 0.6,
              progress: Callable[[int, ChaosResult], None] | None = None) -> ChaosResult:
    """``fault_rounds`` kills at each fault point, then ``kills`` kills at random moments; a check
    after every restart."""
    rng = random.Random(seed)
    acks = work / "acks.jsonl"
    result = ChaosResult()
    started = time.monotonic()
    plan: list[str | None] = [f"{p}:kill@{rng.randint(1, 3)}" for _ in range(fault_rounds) for p in FAULT_POINTS]
    plan += [None] * kills
    for run, fault in enumerate(plan):
        trouble = one_life(root, run, rng, acks, fault, max_delay)
        if trouble:
            result.problems.append(trouble)
        result.fault_kills += fault is not None and not trouble
        result.kills += fault is None and not trouble
        last = run == len(plan) - 1 or len(result.problems) > 20
        try:
            in_place = last or store_outside_root()
            check = verify(root, read_acks(acks)) if in_place else verify_copy(root, work / "restarted",
                                                                                read_acks(acks))
        except Exception as exc:  # a restart that fails is what the chaos is looking for (a wedged queue)
            trace = traceback.format_exc(limit=-4)
            check, last = Check(problems=[f"the restart failed: {type(exc).__name__}: {exc}\n{trace}"]), True
        result.restarts_checked += 1
        result.acked += check.acked
        result.dead.update(check.dead)
        result.problems += [f"after run {run} ({fault or 'random kill'}): {p}" for p in check.problems]
        if progress is not None:
            progress(run, result)
        if last:
            break
    result.seconds = time.monotonic() - started
    return result

