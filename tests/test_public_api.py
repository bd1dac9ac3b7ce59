"""The public names of SPEC.md's contract exist and keep their shapes."""

from __future__ import annotations

import inspect
import subprocess
import sys
from pathlib import Path

import pytest

import tiermem
from tiermem import FactNotFound, Memory, TiermemError
from tiermem.testing import FakeClock, HashEmbedder, ScriptedChatModel

pytestmark = pytest.mark.usefixtures("backend")

CONTRACT = {"Memory", "Fact", "SearchHit", "TiermemError", "FactNotFound"}


def test_exports() -> None:
    assert set(tiermem.__all__) >= CONTRACT
    for name in tiermem.__all__:
        assert getattr(tiermem, name) is not None
    assert issubclass(FactNotFound, KeyError) and issubclass(FactNotFound, TiermemError)


def test_memory_signature() -> None:
    params = list(inspect.signature(Memory).parameters)
    assert params[:7] == ["root", "llm", "embedder", "clock", "user_id", "agent_name", "settings"]


def test_facts_methods_signatures(tmp_path: object) -> None:
    from tiermem.facts.store import FactStore

    assert list(inspect.signature(FactStore.add).parameters)[:5] == ["self", "content", "category", "confidence",
                                                                     "source"]
    assert list(inspect.signature(FactStore.update).parameters)[:5] == ["self", "fact_id", "content", "category",
                                                                        "confidence"]


def test_scripted_chat_model_contract() -> None:
    model = ScriptedChatModel(["one", ValueError("boom")])
    assert model.complete([{"role": "user", "content": "hi"}]) == "one"
    assert model.requests[0].messages == [{"role": "user", "content": "hi"}]
    try:
        model.complete([])
    except ValueError as exc:
        assert str(exc) == "boom"
    assert model.remaining == []
    try:
        model.complete([])
    except AssertionError:
        pass
    else:  # pragma: no cover
        raise AssertionError("a call beyond the script must fail")


def test_hash_embedder_and_fake_clock() -> None:
    from datetime import UTC, datetime

    emb = HashEmbedder()
    vecs = emb.embed(["bees make honey", "honey bees", "tax return deadline"])
    assert vecs.shape == (3, 256) and str(vecs.dtype) == "float32"
    assert float(vecs[0] @ vecs[1]) > float(vecs[0] @ vecs[2])
    clock = FakeClock(datetime(2026, 1, 1, tzinfo=UTC))
    clock.advance(90)
    assert clock.now() == datetime(2026, 1, 1, 0, 1, 30, tzinfo=UTC)


def test_import_is_light() -> None:
    heavy = "{'numpy', 'openai', 'onnxruntime', 'anthropic', 'mcp', 'rich'}"
    code = f"import sys, tiermem; print(sorted({heavy} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]"


def test_provider_objects_must_implement_their_protocol(tmp_path: Path) -> None:
    """An llm/embedder that is neither a name nor a protocol object is refused up front, nothing created."""
    from tiermem import InvalidInput

    with pytest.raises(InvalidInput, match="llm must be"):
        Memory(tmp_path / "a", llm=5)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match="embedder must be"):
        Memory(tmp_path / "b", embedder=object())  # type: ignore[arg-type]
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
    with Memory(tmp_path / "c", llm=ScriptedChatModel([]), embedder=HashEmbedder()) as mem:
        from tiermem.calls import unwrap_model  # mem.llm logs each call (tiermem.calls) around the model given

        assert unwrap_model(mem.llm) is mem._llm_object and isinstance(unwrap_model(mem.llm), ScriptedChatModel)
        assert isinstance(mem.embedder, HashEmbedder)
