"""int8 is the default local graph for new stores; a store indexed with fp32 keeps fp32 (issue 16).

Plain ``local`` resolves by the model the store's vectors were made with, so an upgrade neither
strands a store's vectors nor asks for a reindex; ``tiermem reindex --embedder
local:all-MiniLM-L6-v2-int8`` moves a store over. Uses the installed MiniLM (a few facts only).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from click.testing import CliRunner

from tiermem import Memory
from tiermem.cli.main import cli
from tiermem.embedders.local import DEFAULT_PRECISION, PINNED_SHA256, resolve_precision
from tiermem.errors import ConfigError
from tiermem.facts.store import NewFact
from tiermem.search.floor import default_min_score

pytestmark = pytest.mark.usefixtures("backend")  # the index model lives in the database: both backends

SHA = PINNED_SHA256["model.safetensors"][:8]
FP32 = f"all-MiniLM-L6-v2@{SHA}"
INT8 = f"all-MiniLM-L6-v2-int8@{SHA}"
FACTS = ["Alice adopted a puppy named Biscuit", "The quarterly tax filing is due in April",
         "Bob switched from coffee to green tea"]
QUERY = "new dog"  # no word in common with the fact it should find: only its vector ranks it first


@pytest.fixture(scope="module")
def graph_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("graphs")  # each graph is built once for the module, not per test


@pytest.fixture(autouse=True)
def _shared_graphs(graph_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TIERMEM_CACHE_DIR", str(graph_cache))


def _fill(root: Path, **kwargs: str) -> None:
    with Memory(root, timezone="UTC", **kwargs) as mem:  # type: ignore[arg-type]
        mem.facts.add_many([NewFact(text) for text in FACTS])
        assert mem.search(QUERY, tier="fact", min_score=0.0)  # embeds now, and records the index model


def _finds_by_vector(mem: Memory) -> None:
    hits = mem.search(QUERY, tier="fact", min_score=0.0)
    assert hits and hits[0].text == FACTS[0], hits
    assert hits[0].extra["keyword"] == 0.0 and hits[0].extra["vector"] > 0.3, hits[0].extra


def test_resolution_of_local_names() -> None:
    assert DEFAULT_PRECISION == "int8"
    assert resolve_precision("") == resolve_precision("", "hash-256") == "int8"  # no MiniLM vectors yet
    assert resolve_precision("", FP32) == "fp32" and resolve_precision("", INT8) == "int8"
    assert resolve_precision("all-MiniLM-L6-v2", INT8) == "fp32"  # an explicit name wins over the store
    assert resolve_precision("all-minilm-l6-v2-INT8", FP32) == "int8"
    with pytest.raises(ConfigError, match="only all-MiniLM-L6-v2"):
        resolve_precision("bge-small", FP32)


def test_floor_knows_both_graphs() -> None:
    assert default_min_score(INT8) == default_min_score(FP32) == 0.54


def test_new_store_gets_int8(tmp_path: Path) -> None:
    _fill(tmp_path)
    with Memory(tmp_path, timezone="UTC") as mem:
        assert mem.embedder.model_id == INT8
        status = mem.vector_status()
        assert (status.index_model, status.missing, status.models) == (INT8, 0, {INT8: len(FACTS)})
        assert mem.search_floor() == 0.54
        _finds_by_vector(mem)
        stats = mem.stats()
    assert (stats["embedder"], stats["embedder_model"], stats["index_model"]) == ("local", INT8, INT8)


def test_fp32_store_keeps_fp32_with_default_settings(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    _fill(tmp_path, embedder="local:all-MiniLM-L6-v2")  # a store indexed before int8 became the default
    caplog.set_level(logging.WARNING, logger="tiermem")
    with Memory(tmp_path, timezone="UTC") as mem:  # default settings: embedder "local"
        _finds_by_vector(mem)
        assert mem.embedder.model_id == FP32
        status = mem.vector_status()
        assert (status.index_model, status.missing, status.model_changed) == (FP32, 0, False)
        assert status.models == {FP32: len(FACTS)}  # searched with the stored vectors, none added
        mem.facts.add("Carol plays the cello")
        assert mem.vector_status().models == {FP32: len(FACTS) + 1}  # new items join the same index
        assert mem.stats()["embedder_model"] == FP32
    assert not [r for r in caplog.records if "search index was built with" in r.getMessage()]
    doctor = CliRunner().invoke(cli, ["--root", str(tmp_path), "doctor"])
    assert doctor.exit_code == 0 and f"search vectors: {FP32}" in doctor.stdout, doctor.output
    with Memory(tmp_path, embedder="local:all-MiniLM-L6-v2-int8", timezone="UTC") as mem:  # explicit: int8
        assert mem.embedder.model_id == INT8 and mem.vector_status().model_changed


def test_reindex_with_int8_moves_an_fp32_store(tmp_path: Path) -> None:
    _fill(tmp_path, embedder="local:all-MiniLM-L6-v2")
    result = CliRunner().invoke(cli, ["--root", str(tmp_path), "reindex", "--embedder",
                                      "local:all-MiniLM-L6-v2-int8", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["model"] == INT8
    with Memory(tmp_path, timezone="UTC") as mem:  # plain `local` now follows the store to int8
        assert mem.embedder.model_id == INT8
        status = mem.vector_status()
        assert (status.index_model, status.missing) == (INT8, 0)
        assert status.models == {FP32: len(FACTS), INT8: len(FACTS)}  # the fp32 ones stay (a way back)
        _finds_by_vector(mem)
    stats = CliRunner().invoke(cli, ["--root", str(tmp_path), "stats", "--json"])
    assert json.loads(stats.stdout)["embedder_model"] == INT8
