"""Floors by use (R49a, issue 24 item 3): explicit questions and automatic injection have floors of
their own, each read from its setting (else the embedder model's default) and used where it belongs.

The store tests place one item's score between the two floors: they measure its score first,
then open the store with the floors set just below and just above it, either way round.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tiermem import Memory
from tiermem.agents.inject import prompt_context
from tiermem.cli.main import cli
from tiermem.config import Settings
from tiermem.errors import ConfigError, InvalidInput
from tiermem.search.floor import MODEL_FLOORS, UNKNOWN_MODEL_FLOORS, Floors, default_floors, default_min_score
from tiermem.search.index_files import QUERY_ONLY, index_shape
from tiermem.search.loaded import LoadedIndexer
from tiermem.testing import FakeClock, HashEmbedder
from tiermem.types import Scope

PERSON, PROJECT = "maya", "project-0123456789abcdef"
NOTE = "Deploys of ledgerd go through the staging cluster first"
NOTE_QUERY = "how do ledgerd releases work"  # shares one of its terms: a score with room on both sides
GAP = 0.05  # the floors are set this far below and above the measured score


@dataclass
class State:
    given: set[str] = field(default_factory=set)


def open_mem(root: Path, clock: FakeClock, user: str = "default", **settings: Any) -> Memory:
    return Memory(root, embedder=HashEmbedder(), clock=clock, timezone="UTC", user_id=user, agent_name="coding",
                  coding_person=PERSON, **settings)


def score_of(root: Path, clock: FakeClock, user: str, query: str, text: str) -> float:
    """The score of the hit ``text`` for ``query`` (no floor), checked to leave room for both floors."""
    with open_mem(root, clock, user) as mem:
        [score] = [hit.score for hit in mem.search(query, k=10, min_score=0) if hit.text == text]
    assert GAP < score < 1 - GAP, score
    return score


def floors(score: float, inject_above: bool) -> dict[str, float]:
    """Settings with ``score`` between the floors: the injection floor above it, or the explicit one."""
    low, high = score - GAP, score + GAP
    if inject_above:
        return {"search_min_score": low, "search_inject_min_score": high}
    return {"search_min_score": high, "search_inject_min_score": low}


def notes_of(text: str) -> list[str]:
    return text.split("Relevant notes:\n", 1)[1].split("\n\n")[0].splitlines() if "Relevant notes:" in text else []


# --- each floor where it belongs (both backends) -----------------------------------------------
@pytest.fixture
def noted(root: Path, clock: FakeClock, backend: str) -> float:
    """A project scope whose journal holds NOTE; the NOTE's score for NOTE_QUERY."""
    with open_mem(root, clock, PROJECT) as mem:
        mem.daily.append("Note", NOTE)
    return score_of(root, clock, PROJECT, NOTE_QUERY, NOTE)


def test_a_hit_between_the_floors_is_found_by_search_and_not_injected(root: Path, clock: FakeClock,
                                                                       noted: float) -> None:
    with open_mem(root, clock, PROJECT, **floors(noted, inject_above=True)) as mem:
        assert [hit.text for hit in mem.search(NOTE_QUERY)] == [NOTE]
        assert mem.search_floor() < noted < mem.search_floor("inject")
        assert notes_of(mem.format_for_injection(query=NOTE_QUERY)) == []
        assert "Relevant notes:" not in mem.format_for_injection(query=NOTE_QUERY)


def test_a_hit_between_the_floors_is_injected_and_not_found_by_search(root: Path, clock: FakeClock,
                                                                       noted: float) -> None:
    with open_mem(root, clock, PROJECT, **floors(noted, inject_above=False)) as mem:
        assert mem.search(NOTE_QUERY) == []
        assert [line.split(": ", 1)[1] for line in notes_of(mem.format_for_injection(query=NOTE_QUERY))] == [NOTE]


def test_the_prompt_hook_uses_the_injection_floor(root: Path, clock: FakeClock, noted: float) -> None:
    for inject_above, shown in ((True, False), (False, True)):
        settings = floors(noted, inject_above)
        with open_mem(root, clock, PERSON, **settings) as person, open_mem(root, clock, PROJECT, **settings) as project:
            text = prompt_context(person, project, State(), NOTE_QUERY, 600)
            assert (NOTE in text) is shown, (inject_above, text)
            assert bool(text) is shown  # nothing else is relevant: the hook says nothing at all


@pytest.mark.usefixtures("backend")
def test_a_fact_is_kept_for_its_relevance_only_over_the_injection_floor(root: Path, clock: FakeClock) -> None:
    """Over the budget, the facts a query search ranks stay first; below the injection floor a fact
    is not ranked, so confidence decides."""
    query, relevant, other = "which repository owns billing", "The billing API lives in services/ledgerd", "Prefers tea"
    with open_mem(root, clock) as mem:
        mem.facts.add(other, "preference", 0.95)
        mem.facts.add(relevant, "knowledge", 0.9)
        assert relevant in mem.format_for_injection() and other in mem.format_for_injection()
    score = score_of(root, clock, "default", query, relevant)
    for inject_above, kept in ((True, other), (False, relevant)):
        with open_mem(root, clock, **floors(score, inject_above)) as mem:
            text = mem.format_for_injection(max_tokens=25, query=query)  # room for one fact
            dropped = other if kept == relevant else relevant
            assert kept in text and dropped not in text, (inject_above, text)


# --- the public reading and the defaults --------------------------------------------------------
def test_search_floor_reads_each_use(tmp_path: Path, clock: FakeClock) -> None:
    model = HashEmbedder().model_id
    with open_mem(tmp_path / "a", clock) as mem:
        assert mem.search_floor() == mem.search_floor("explicit") == mem.search_floor(use="explicit")
        assert mem.search_floor() == default_floors(model).explicit == default_min_score(model)
        assert mem.search_floor("inject") == default_floors(model).inject
    with open_mem(tmp_path / "b", clock, search_min_score=0.05, search_inject_min_score=0.7) as mem:
        assert (mem.search_floor(), mem.search_floor("inject")) == (0.05, 0.7)


def test_a_raised_search_min_score_raises_the_injection_floor_too(tmp_path: Path, clock: FakeClock) -> None:
    """A store configured before the two floors (one ``search_min_score``) injects no more than it did."""
    default = default_floors(HashEmbedder().model_id).inject
    raised = 0.99
    assert default < raised
    with open_mem(tmp_path / "a", clock, search_min_score=raised) as mem:
        assert (mem.search_floor(), mem.search_floor("inject")) == (raised, raised)
    with open_mem(tmp_path / "d", clock, search_min_score=0.9) as mem:  # raised, but under the default: no lower
        assert (mem.search_floor(), mem.search_floor("inject")) == (0.9, default)
    with open_mem(tmp_path / "b", clock, search_min_score=0.0) as mem:  # "show me everything" stays a search matter
        assert (mem.search_floor(), mem.search_floor("inject")) == (0.0, default)
    with open_mem(tmp_path / "c", clock, search_min_score=0.9, search_inject_min_score=0.1) as mem:
        assert mem.search_floor("inject") == 0.1  # set: it decides


@pytest.mark.parametrize("use", ["explicit ", "Inject", "injection", "", None, 1, ("inject",)])
def test_search_floor_refuses_an_unknown_use(tmp_path: Path, clock: FakeClock, use: Any) -> None:
    with open_mem(tmp_path, clock) as mem, pytest.raises(InvalidInput, match="use must be one of 'explicit', 'inject'"):
        mem.search_floor(use)


def test_default_floors_by_model() -> None:
    assert isinstance(default_floors("hash-256"), Floors)
    assert default_floors("all-MiniLM-L6-v2-int8@abc") == MODEL_FLOORS["all-MiniLM-L6-v2"]  # int8 and fp32 alike
    assert default_floors("all-MiniLM-L6-v2@abc") == Floors(explicit=0.54, inject=0.99)  # docs/search.md's table
    assert default_floors("hash-256") == default_floors("hash-64") == Floors(explicit=0.58, inject=0.97)
    assert default_floors("openai:text-embedding-3-small") == Floors(explicit=0.30, inject=0.30)
    assert default_floors("some-other-model") == UNKNOWN_MODEL_FLOORS
    for model_floors in [*MODEL_FLOORS.values(), UNKNOWN_MODEL_FLOORS]:
        assert 0 <= model_floors.explicit <= model_floors.inject <= 1  # injection never less strict
    assert default_min_score("some-other-model") == UNKNOWN_MODEL_FLOORS.explicit


# --- the settings ---------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["search_min_score", "search_inject_min_score"])
@pytest.mark.parametrize("value", [math.nan, math.inf, 1.5, -0.1, "high", True])
def test_a_bad_floor_setting_is_refused_and_creates_nothing(tmp_path: Path, name: str, value: Any) -> None:
    root = tmp_path / "mem"
    with pytest.raises(ConfigError, match=f"{name}.*(must be within|is not a valid)"):
        Memory(root, embedder=HashEmbedder(), timezone="UTC", **{name: value})
    assert not root.exists()


@pytest.mark.parametrize("value", ["nan", "1.01", "-1", "high"])
def test_a_bad_injection_floor_from_the_environment_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               value: str) -> None:
    monkeypatch.setenv("TIERMEM_SEARCH_INJECT_MIN_SCORE", value)
    with pytest.raises(ConfigError, match="search_inject_min_score"):
        Memory(tmp_path / "mem", embedder=HashEmbedder(), timezone="UTC")
    assert not (tmp_path / "mem").exists()


def test_the_floors_come_from_tiermem_toml_and_the_environment(tmp_path: Path, clock: FakeClock,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    tmp_path.joinpath("tiermem.toml").write_text("search_min_score = 0.3\nsearch_inject_min_score = 0.45\n")
    with open_mem(tmp_path, clock) as mem:  # an existing file's search_min_score keeps its meaning
        assert (mem.search_floor(), mem.search_floor("inject")) == (0.3, 0.45)
    monkeypatch.setenv("TIERMEM_SEARCH_INJECT_MIN_SCORE", "0.55")
    monkeypatch.setenv("TIERMEM_SEARCH_MIN_SCORE", "0.15")
    with open_mem(tmp_path, clock) as mem:
        assert (mem.search_floor(), mem.search_floor("inject")) == (0.15, 0.55)
        assert (mem.settings.search_min_score, mem.settings.search_inject_min_score) == (0.15, 0.55)


def test_the_injection_floor_is_query_only() -> None:
    assert "search_inject_min_score" in QUERY_ONLY
    assert index_shape(Settings(search_inject_min_score=0.8)) == index_shape(Settings())


@pytest.fixture
def saved(tmp_path: Path, clock: FakeClock) -> Iterator[Path]:
    """A SQLite store whose default scope has a vector index file."""
    with open_mem(tmp_path, clock) as mem:
        mem.facts.add("The user likes dark roast coffee")
        assert mem.search("coffee", min_score=0)
        assert isinstance(mem._search.indexer, LoadedIndexer) and mem._search.indexer.files_written == 1
    yield tmp_path


def test_changing_the_injection_floor_keeps_the_index_file(saved: Path, clock: FakeClock) -> None:
    with open_mem(saved, clock, search_inject_min_score=0.9) as mem:
        assert mem.search("coffee", min_score=0)
        indexer = mem._search.indexer
        assert isinstance(indexer, LoadedIndexer)
        assert indexer.load_sources[Scope("default", "coding")] == "file"


# --- stats ------------------------------------------------------------------------------------------
@pytest.mark.usefixtures("backend")
def test_stats_show_both_floors(tmp_path: Path, clock: FakeClock) -> None:
    with open_mem(tmp_path, clock, search_min_score=0.12, search_inject_min_score=0.34) as mem:
        mem.facts.add("Prefers tea over coffee")
        data = mem.stats()
    assert (data["search_min_score"], data["search_inject_min_score"]) == (0.12, 0.34)
    env = {"TIERMEM_EMBEDDER": "hash", "TIERMEM_TIMEZONE": "UTC", "TIERMEM_SEARCH_MIN_SCORE": "0.2",
           "TIERMEM_SEARCH_INJECT_MIN_SCORE": "0.4"}
    result = CliRunner().invoke(cli, ["--root", str(tmp_path), "stats", "--json"], env=env)
    assert result.exit_code == 0, result.output
    shown = json.loads(result.stdout)
    assert (shown["search_min_score"], shown["search_inject_min_score"]) == (0.2, 0.4)
    table = CliRunner().invoke(cli, ["--root", str(tmp_path), "stats"], env=env).stdout
    assert "search inject min score" in table
