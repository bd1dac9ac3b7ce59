"""Property tests of every public entry point that takes user input (issue 14).

Random text (control characters, lone surrogates, FTS operators, huge, empty), random filters and
dates, random JSON: each call either works or raises a :class:`~tiermem.errors.TiermemError` —
never anything else — and a write that fails writes nothing. Afterwards the store opens, answers
and passes ``doctor``. The CLI commands that take user input exit 0, or 1 with one line (2 with
click's usage message for an option click itself refuses), never with a traceback.

Examples are bounded and derandomized so CI stays fast and repeatable; ``TIERMEM_FUZZ_SCALE=20``
runs twenty times as many, ``TIERMEM_FUZZ_RANDOM=1`` new ones on each run (``-s`` prints the
number of examples per target and the exit codes of the CLI commands).
"""

from __future__ import annotations

import copy
import importlib.util
import json
import os
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tiermem import Memory, TiermemError
from tiermem.cli.main import cli
from tiermem.testing import FakeClock, HashEmbedder
from tiermem.types import CATEGORIES, TIERS

SCALE = int(os.environ.get("TIERMEM_FUZZ_SCALE", "1"))
RANDOM = os.environ.get("TIERMEM_FUZZ_RANDOM", "") == "1"  # new examples on each run instead of the fixed ones
START = datetime(2026, 3, 14, 9, 30, tzinfo=UTC)
ENV = {"TIERMEM_EMBEDDER": "hash", "TIERMEM_TIMEZONE": "UTC"}

pytestmark = pytest.mark.usefixtures("backend")  # every test on SQLite and on PostgreSQL
EXAMPLES: Counter[str] = Counter()


def fuzz(examples: int) -> Callable[[Callable[..., None]], Callable[..., None]]:
    return settings(max_examples=examples * SCALE, deadline=None, derandomize=not RANDOM, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.large_base_example])


# --- strategies: mostly what a caller means, often what an attacker sends ----------------------
def mostly(valid: st.SearchStrategy[Any], hostile: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(valid, valid, valid, hostile)


Spec = dict[str, tuple[st.SearchStrategy[Any], st.SearchStrategy[Any]]]


def draw_args(data: st.DataObject, spec: Spec) -> dict[str, Any]:
    """Arguments for one call: all plausible (about half the calls), one of them hostile, or all
    hostile — so every call gets past its validation often and each refusal has a known cause."""
    bad = data.draw(st.sampled_from([*[None] * len(spec), "*", *spec]), label="hostile")
    return {name: data.draw(hostile if bad in (name, "*") else valid, label=name)
            for name, (valid, hostile) in spec.items()}


SPECIAL = ["", " ", "\n", "\t", "\r\n", "\x00", "\x0b", "\x0c", "\x1b[31m", "\x1c", "\x7f", "\x85", "\u2028",
           "\u2029", "\ufeff", "\ud800", "\udcff", "a\udcffb", "AND", "OR", "NOT", "NEAR(a b)", '"', '""', "*",
           "a*", "^a", "a:b", "(", ")", "{a b}", "-a", "+", "'", "\\", "%", "_", "../x", "~", "$HOME", "-- ",
           "fact_00000000", "plan_00000000", "tea", "Prefers green tea", "🙂", "é", "İ", "ß", "\u0301"]
long_texts = st.sampled_from([4_001, 5_000, 200_001, 300_000]).flatmap(
    lambda n: st.sampled_from(["x" * n, ("word " * n)[:n]]))  # over each documented limit
any_char = st.characters(blacklist_categories=())  # every code point: controls and surrogates too
hostile_texts = st.one_of(
    st.text(any_char, max_size=30),
    st.sampled_from(SPECIAL),
    st.lists(st.one_of(st.sampled_from(SPECIAL), st.text(any_char, max_size=6), st.text(max_size=10)),
             max_size=5).map(" ".join),
)
plain = st.text(st.characters(categories=["L", "N", "P", "S", "Zs"]), min_size=1, max_size=60).filter(str.strip)
texts = mostly(plain, hostile_texts)
texts_or_huge = st.one_of(texts, texts, texts, long_texts)
scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.integers(2**63, 2**80), hostile_texts)


def nested(depth: int) -> Any:
    value: Any = "x"
    for _ in range(depth):
        value = [value]
    return value


shallow_json = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.text(any_char, max_size=8), inner, max_size=3)), max_leaves=12)
json_values = st.one_of(shallow_json, st.integers(60, 3000).map(nested))
zones = st.sampled_from([None, UTC, timezone(timedelta(hours=14)), timezone(timedelta(hours=-14)),
                         timezone(timedelta(hours=5, minutes=30))])
datetimes = st.datetimes(timezones=zones)
moments = st.one_of(
    st.none(), st.dates(), datetimes, st.dates().map(lambda d: d.isoformat()), datetimes.map(lambda d: d.isoformat()),
    st.sampled_from(["9999-12-31", "0001-01-01", "9999-12-31T23:59:59.999999+00:00", "0001-01-01T00:00:00+14:00",
                     "9999-12-31T23:59:59-14:00", "2026-02-30", "2026-03-14T25:00", "yesterday", "2026-03-14Z"]),
    hostile_texts, st.integers(), st.floats(),
)
categories = mostly(st.sampled_from(CATEGORIES), st.one_of(hostile_texts, st.none(), st.integers()))
confidences = mostly(st.floats(0, 1), st.one_of(st.floats(), st.integers(-2, 2), hostile_texts, st.none(),
                                                st.booleans()))
roles = mostly(st.sampled_from(["user", "assistant"]), st.one_of(st.sampled_from(["system", "tool", "developer"]),
                                                                 hostile_texts))
blocks = st.fixed_dictionaries(
    {"type": mostly(st.sampled_from(["text", "tool_use", "tool_result"]), st.one_of(st.just("image"), hostile_texts))},
    optional={"text": texts_or_huge, "id": texts, "name": texts, "input": json_values, "tool_use_id": texts,
              "content": st.one_of(texts, json_values)})
calls = st.fixed_dictionaries({"id": texts, "type": st.just("function"),
                               "function": st.fixed_dictionaries({"name": texts, "arguments": st.one_of(texts,
                                                                                                       json_values)})})
contents = mostly(texts_or_huge, st.one_of(st.lists(blocks, max_size=3), json_values))
messages = st.one_of(
    st.fixed_dictionaries({"role": roles, "content": texts}),
    st.fixed_dictionaries({"role": roles}, optional={
        "content": contents, "name": texts, "tool_call_id": texts,
        "tool_calls": st.one_of(st.lists(calls, max_size=2), json_values)}))
conversations = mostly(st.lists(messages, min_size=1, max_size=4), json_values)
shallow_messages = st.fixed_dictionaries(
    {"role": roles}, optional={"content": st.one_of(texts, shallow_json), "thread_id": st.one_of(texts, shallow_json),
                               "timestamp": st.one_of(moments.map(str), shallow_json), "user_id": texts})


# --- the store and its checks ----------------------------------------------------------------
def attempt(call: Callable[[], Any]) -> TiermemError | None:
    """Run ``call``: it works (``None``) or raises a TiermemError (returned); anything else fails."""
    try:
        call()
    except TiermemError as exc:
        assert str(exc).strip(), f"{type(exc).__name__} without a message"
        return exc
    return None


def fingerprint(mem: Memory) -> Any:
    """The store's files and rows, but the search index (reads may refresh it) and locks."""
    conn = mem.db.conn
    tables = [t for t in mem.db.parts.tables(mem.db) if not t.startswith("search_")
              and t not in ("chunks", "indexed_files", "embeddings", "meta", "change_epochs")]
    files = {p.relative_to(mem.root).as_posix(): p.read_bytes() for p in sorted(mem.root.rglob("*"))
             if p.is_file() and not p.name.startswith((".", "tiermem.db"))}
    return files, [(t, sorted(map(tuple, conn.execute(f"SELECT * FROM {t}")), key=repr)) for t in tables]


def attempt_write(mem: Memory, call: Callable[[], Any]) -> None:
    """A write that fails changes nothing."""
    before = fingerprint(mem)
    if attempt(call) is not None:
        assert fingerprint(mem) == before


def healthy(root: Path, clock: FakeClock) -> None:
    """The store opens, answers every read and (when the doctor is there) passes ``doctor``."""
    with Memory(root, embedder=HashEmbedder(), clock=clock, timezone="UTC", queue_replay=False) as mem:
        mem.facts.list()
        mem.search("tea", min_score=0)
        mem.format_for_injection(query="what does the user drink?")
        mem.system_context()
        for day in mem.daily.days():
            mem.daily.read(day)
        mem.plans.list()
        json.dumps(mem.export())
        mem.stats()
    if importlib.util.find_spec("tiermem.doctor") is not None:
        from tiermem.doctor import check

        report = check(root)
        assert report.ok, report.problems


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(START)


@pytest.fixture
def store(tmp_path: Path, clock: FakeClock) -> Iterator[Memory]:
    root = tmp_path / "mem"
    with Memory(root, embedder=HashEmbedder(), clock=clock, timezone="UTC", queue_replay=False) as mem:
        mem.facts.add("Prefers green tea", "preference", 0.9)
        mem.daily.append("Note", ["tea with Maya"])
        mem.plans.start("Move to Lisbon", ["find a flat"])
        yield mem
    healthy(root, clock)


# --- the library -----------------------------------------------------------------------------
ids = st.text(st.characters(categories=["L", "N"]), min_size=1, max_size=12)
valid_days = st.dates(datetime(2000, 1, 1).date(), datetime(2100, 1, 1).date())
FACT: Spec = {
    "content": (plain, st.one_of(hostile_texts, long_texts, st.integers(), st.none())),
    "category": (st.sampled_from(CATEGORIES), st.one_of(hostile_texts, st.none(), st.integers())),
    "confidence": (st.floats(0, 1), st.one_of(st.floats(), st.integers(-2, 2), hostile_texts, st.none(),
                                              st.booleans())),
    "source": (st.one_of(st.none(), ids), st.one_of(hostile_texts, long_texts, st.integers())),
}
SEARCH: Spec = {
    "query": (st.one_of(st.sampled_from(["tea", "green tea", "Maya", "Lisbon flat"]), plain),
              st.one_of(hostile_texts, long_texts, st.none(), st.integers())),
    "k": (st.integers(1, 50), st.one_of(st.integers(-3, 1200), hostile_texts, st.none(), st.floats())),
    "category": (mostly(st.none(), st.sampled_from(CATEGORIES)), hostile_texts),
    "tier": (mostly(st.none(), st.sampled_from(TIERS)), hostile_texts),
    "since": (st.one_of(st.none(), valid_days), moments),
    "until": (st.one_of(st.none(), valid_days, st.just("9999-12-31")), moments),
    "include_pending": (st.booleans(), st.one_of(st.integers(), hostile_texts)),
    "min_score": (st.sampled_from([None, 0.0, 0.3]), st.one_of(st.floats(), st.integers(-1, 2), hostile_texts)),
}
NOTES: Spec = {
    "kind": (st.sampled_from(["Note", "Decision", "Tea break"]), st.one_of(hostile_texts, long_texts, st.none())),
    "lines": (st.one_of(plain, st.lists(plain, min_size=1, max_size=3)),
              st.one_of(hostile_texts, long_texts, st.lists(texts, max_size=3), json_values)),
    "core": (st.lists(plain, min_size=1, max_size=4).map(lambda xs: "".join(f"- {x}\n" for x in xs)),
             st.one_of(hostile_texts, st.integers(), st.just("x" * 2_000_001))),
    "title": (plain, st.one_of(hostile_texts, long_texts, st.none())),
    "checklist": (st.lists(plain, min_size=1, max_size=3), st.one_of(hostile_texts, json_values)),
    "session_id": (st.one_of(st.none(), ids), st.one_of(hostile_texts, long_texts, st.integers())),
}
TALK: Spec = {
    "thread_id": (st.one_of(st.sampled_from(["t1", "t2"]), ids), st.one_of(hostile_texts, long_texts, st.none())),
    "conversation": (st.lists(st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant"]),
                                                     "content": plain}), min_size=1, max_size=4),
                     st.one_of(json_values, st.lists(messages, min_size=1, max_size=4))),
    "role": (st.sampled_from(["user", "assistant"]), roles),
    "content": (plain, contents),
}


SUMMARY: Spec = {
    "key": (st.sampled_from(["workContext", "topOfMind"]), hostile_texts),
    "text": (plain, st.one_of(hostile_texts, long_texts, st.none(), st.integers())),
}


def test_facts_add_update_get_delete(store: Memory) -> None:
    @fuzz(60)
    @given(st.data())
    def run(data: st.DataObject) -> None:
        EXAMPLES["facts.*"] += 1
        new = draw_args(data, FACT)
        attempt_write(store, lambda: store.facts.add(new["content"], new["category"], new["confidence"],
                                                     source=new["source"]))
        known = [f.id for f in store.facts.list()]  # drawn by position: the strategy may not depend on the store
        pick = data.draw(mostly(st.integers(0, 10**6), texts), label="fact id")
        fact_id = known[pick % len(known)] if isinstance(pick, int) and known else str(pick)
        attempt(lambda: store.facts.get(fact_id))
        change = draw_args(data, {k: v for k, v in FACT.items() if k != "source"})
        del change[data.draw(st.sampled_from(list(change)))]  # an update changes some fields
        attempt_write(store, lambda: store.facts.update(fact_id, **change))
        if data.draw(st.booleans()):
            attempt_write(store, lambda: store.facts.delete(fact_id))
        summary = draw_args(data, SUMMARY)
        attempt_write(store, lambda: store.facts.set_summaries({summary["key"]: summary["text"]}))

    run()


def test_search_with_random_text_filters_and_dates(store: Memory) -> None:
    @fuzz(80)
    @given(st.data())
    def run(data: st.DataObject) -> None:
        EXAMPLES["search"] += 1
        args = draw_args(data, SEARCH)
        attempt(lambda: store.search(**args))

    run()


def test_daily_append_core_write_and_plans(store: Memory) -> None:
    @fuzz(40)
    @given(st.data())
    def run(data: st.DataObject) -> None:
        EXAMPLES["daily.append"] += 1
        EXAMPLES["core.write"] += 1
        EXAMPLES["plans.start"] += 1
        args = draw_args(data, NOTES)
        attempt_write(store, lambda: store.daily.append(args["kind"], args["lines"]))
        attempt_write(store, lambda: store.core.write(args["core"]))
        attempt_write(store, lambda: store.plans.start(args["title"], args["checklist"], session_id=args["session_id"]))
        plan_id = data.draw(mostly(st.sampled_from(["active", "plan_00000000"]), texts), label="plan id")
        active = store.plans.active()
        plan_id = active.id if plan_id == "active" and active is not None else plan_id
        attempt_write(store, lambda: store.plans.check(plan_id, data.draw(st.integers(-2, 5), label="index")))
        attempt_write(store, lambda: store.plans.attach_session(plan_id, args["session_id"]))

    run()


def test_queue_add_and_sessions(store: Memory) -> None:
    @fuzz(50)
    @given(st.data(), st.booleans())
    def run(data: st.DataObject, end: bool) -> None:
        EXAMPLES["queue.add"] += 1
        EXAMPLES["session.add"] += 1
        args = draw_args(data, TALK)
        attempt_write(store, lambda: store.queue.add(args["thread_id"], args["conversation"]))
        name = "fuzz" if attempt(lambda: store.session(args["thread_id"])) is not None else args["thread_id"]
        session = store.session(name)
        attempt(lambda: session.add(args["role"], args["content"]))
        if end:
            attempt(session.end)

    run()
    attempt(store.queue.flush)


@pytest.fixture(scope="module")
def export_template(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A real export with a row in most sections, as a file holds it."""
    root = tmp_path_factory.mktemp("source") / "mem"
    with Memory(root, embedder=HashEmbedder(), clock=FakeClock(START), timezone="UTC", queue_replay=False) as mem:
        fact = mem.facts.add("Likes jasmine tea", "preference", 0.9, source="t1")  # not in the target stores
        assert fact is not None
        gone = mem.facts.add("Works at Initech", "context")
        assert gone is not None
        mem.facts.delete(gone.id)
        mem.facts.set_summaries({"topOfMind": "Moving to Lisbon"})
        mem.plans.start("Move to Lisbon", ["find a flat", "book movers"], session_id="s1")
        mem.daily.append("Note", ["tea with Maya\nand a second line"])
        mem.core.write("## Work\n- Works at Acme\n")
        mem.queue.add("t9", [{"role": "user", "content": "remember my cat Pixel"}])
        mem.search("tea")
        data = mem.export()
    return dict(json.loads(json.dumps(data)))


def leaves(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every path into ``value`` (to a leaf or a container)."""
    yield path
    children = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, child in children:
        yield from leaves(child, (*path, key))


def test_import_of_random_and_mutated_exports(store: Memory, export_template: dict[str, Any]) -> None:
    paths = [p for p in leaves(export_template) if p]

    @fuzz(60)
    @given(st.data(), st.booleans())
    def run(data: st.DataObject, replace: bool) -> None:
        EXAMPLES["import_"] += 1
        mutated = copy.deepcopy(export_template)
        if data.draw(st.booleans()):
            path = data.draw(st.sampled_from(paths))
            target = mutated
            for key in path[:-1]:
                target = target[key]
            if data.draw(st.booleans()) and isinstance(target, dict):
                del target[path[-1]]
            else:
                target[path[-1]] = data.draw(json_values)
        else:
            mutated = data.draw(st.one_of(json_values, st.dictionaries(
                st.sampled_from(["format", "version", "facts", "files", "plans", "scope", "outbox"]), json_values)))
        attempt_write(store, lambda: store.import_(mutated, replace=replace))

    run()


# --- the CLI ---------------------------------------------------------------------------------
def invoke(root: Path, args: list[str], stdin: bytes | None = None) -> Result:
    result = CliRunner().invoke(cli, ["--root", str(root), *args], env=ENV, input=stdin)
    assert result.exception is None or isinstance(result.exception, SystemExit), (args, result.exception)
    assert "Traceback" not in result.output, result.output
    if result.exit_code == 1:
        lines = result.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("Error: "), (args, result.stderr)
    elif result.exit_code == 2:  # click's own refusal of an option value: usage and one error line
        assert result.stderr.rstrip().splitlines()[-1].startswith("Error: "), (args, result.stderr)
    else:
        assert result.exit_code == 0, (args, result.exit_code, result.output)
    EXAMPLES[f"exit {args[0]} {result.exit_code}"] += 1
    return result


arg_texts = st.one_of(texts, st.sampled_from(["--json", "-k", "0", "1e3", "nan", "-1", "--", "-"])).map(
    lambda t: t.replace("\x00", ""))  # argv cannot hold NUL


@pytest.fixture
def cli_root(tmp_path: Path, clock: FakeClock) -> Iterator[Path]:
    root = tmp_path / "mem"
    assert invoke(root, ["remember", "Prefers green tea"]).exit_code == 0
    yield root
    healthy(root, clock)


def test_cli_remember_search_and_note(cli_root: Path) -> None:
    plain = st.sampled_from(["tea", "green tea", "Maya likes tea", "Lisbon", "dark mode"])
    words = st.one_of(plain, plain, arg_texts)
    flags = st.one_of(st.just([]), st.tuples(st.sampled_from(["--since", "--until", "--category", "--tier", "-k",
                                                              "--min-score"]),
                                             st.one_of(moments.map(str), arg_texts, st.sampled_from(
                                                 [*CATEGORIES, *TIERS, "3", "0.2"]))).map(list))
    confidences = st.one_of(st.floats(0, 1).map(str), st.sampled_from(["0.9", "1", "0.5"]), arg_texts)

    @fuzz(25)
    @given(st.lists(words, min_size=1, max_size=2), confidences, words, flags, words)
    def run(contents: list[str], confidence: str, query: str, flag: list[str], kind: str) -> None:
        EXAMPLES["cli remember"] += 1
        EXAMPLES["cli search"] += 1
        EXAMPLES["cli note"] += 1
        invoke(cli_root, ["remember", *contents, "--confidence", confidence])
        invoke(cli_root, ["search", query, *[f.replace("\x00", "") for f in flag]])
        invoke(cli_root, ["note", query, "--kind", kind])

    run()


def exports(template: dict[str, Any]) -> st.SearchStrategy[bytes]:
    """A real export as a file holds it: whole, with one field spoiled, or cut short."""
    paths = [p for p in leaves(template) if p]
    whole = json.dumps(template, ensure_ascii=False).encode()

    def spoil(path: tuple[Any, ...], value: Any) -> bytes:
        data = copy.deepcopy(template)
        target = data
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
        return json.dumps(data, ensure_ascii=False).encode("utf-8", "surrogatepass")

    return st.one_of(st.just(whole), st.just(whole), st.builds(spoil, st.sampled_from(paths), shallow_json),
                     st.integers(1, len(whole) - 1).map(lambda n: whole[:n]))


byte_files = st.one_of(
    st.binary(max_size=200),
    shallow_json.map(lambda v: json.dumps(v, ensure_ascii=False).encode("utf-8", "surrogatepass")),
    st.lists(shallow_messages, max_size=4).map(lambda ms: "\n".join(json.dumps(m) for m in ms).encode()),
    st.lists(st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant"]), "content": texts}), min_size=1,
             max_size=3).map(lambda ms: "\n".join(json.dumps(m, ensure_ascii=False) for m in ms).encode(
                 "utf-8", "surrogatepass")),
    st.integers(60, 100_000).map(lambda n: ("[" * n + "]" * n).encode()),
)


def test_cli_import_and_ingest_of_random_files(cli_root: Path, tmp_path: Path, export_template: dict[str, Any]) -> None:
    @fuzz(25)
    @given(st.one_of(exports(export_template), exports(export_template), byte_files), byte_files,
           st.sampled_from(["file", "stdin"]))
    def run(export: bytes, transcript: bytes, how: str) -> None:
        EXAMPLES["cli import"] += 1
        EXAMPLES["cli ingest"] += 1
        for command, raw in (("import", export), ("ingest", transcript)):
            path = tmp_path / "input.json"
            path.write_bytes(raw)
            source, stdin = (str(path), None) if how == "file" else ("-", raw)
            invoke(cli_root, [command, source], stdin)

    run()


def test_examples_per_target_report() -> None:
    """Runs last in this file: prints how many examples each target saw (``pytest -s``)."""
    print("\nfuzz examples per target:", dict(sorted(EXAMPLES.items())))


def test_the_fingerprint_sees_a_write(store: Memory) -> None:
    """The nothing-written check above is only worth something if it sees writes."""
    before = fingerprint(store)
    store.daily.append("Note", ["one more"])
    assert fingerprint(store) != before
    store.facts.add("Takes the tram")
    assert fingerprint(store)[1] != before[1]
