"""Embedders are chosen by name through the registry, and nothing heavy loads before that."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tiermem.embedders.local import LocalEmbedder
from tiermem.errors import ConfigError
from tiermem.models.registry import ProviderOptions, make_embedder
from tiermem.testing import HashEmbedder


def test_hash_embedder_by_name() -> None:
    default = make_embedder("hash", ProviderOptions())
    small = make_embedder("hash:64", ProviderOptions())
    assert isinstance(default, HashEmbedder) and default.dim == 256
    assert small.dim == 64 and small.embed(["bees"]).shape == (1, 64)
    with pytest.raises(ConfigError):
        make_embedder("hash:4", ProviderOptions())
    for junk in ("²", "١٢٨", "1_024", "sixty-four", "9" * 5000):  # was a ValueError, 128 or a silent 256
        with pytest.raises(ConfigError, match="hash embedder dimension"):
            make_embedder(f"hash:{junk}", ProviderOptions())


def test_local_embedder_by_name(tmp_path: Path) -> None:
    emb = make_embedder("local", ProviderOptions(extra={"cache_dir": str(tmp_path), "batch_size": 8}))
    assert isinstance(emb, LocalEmbedder) and emb.dim == 384
    assert make_embedder("local:all-MiniLM-L6-v2-int8", ProviderOptions()).model_id == emb.model_id  # the default
    with pytest.raises(ConfigError, match="only all-MiniLM-L6-v2"):
        make_embedder("local:bge-small", ProviderOptions())
    assert list(tmp_path.iterdir()) == []  # constructing builds nothing


def test_unknown_embedder_lists_the_known_ones() -> None:
    with pytest.raises(ConfigError, match="hash, local, openai, openai-compatible"):
        make_embedder("word2vec", ProviderOptions())


def test_import_loads_no_heavy_module() -> None:
    code = (
        "import sys, tiermem, tiermem.models.registry, tiermem.embedders\n"
        "from tiermem.models.registry import make_embedder, ProviderOptions\n"
        "make_embedder('local', ProviderOptions())\n"
        "heavy = {'numpy', 'onnxruntime', 'onnx', 'tokenizers', 'openai', 'safetensors', 'torch'}\n"
        "print(sorted(heavy & set(sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_local_vectors_match_between_registry_and_direct_use(tmp_path: Path) -> None:
    options = ProviderOptions(extra={"cache_dir": str(tmp_path)})
    a = make_embedder("local", options).embed(["same text"])
    b = LocalEmbedder(cache_dir=tmp_path).embed(["same text"])
    np.testing.assert_array_equal(a, b)
