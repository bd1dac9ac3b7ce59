"""Registry factory for ``hash[:DIM]``: the deterministic word-hashing embedder of
:mod:`tiermem.testing` (for tests and offline demos; not a semantic model)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tiermem.errors import ConfigError
from tiermem.testing import HashEmbedder

if TYPE_CHECKING:
    from tiermem.models.registry import ProviderOptions

DEFAULT_DIM = 256


def create_hash_embedder(model: str, options: ProviderOptions) -> HashEmbedder:
    """``hash`` gives 256 dimensions; ``hash:64`` gives 64 (at least 8)."""
    text = model.strip()
    dim = int(text) if text.isdigit() else DEFAULT_DIM
    if dim < 8 or dim > 65536:
        raise ConfigError(f"hash embedder dimension must be within 8..65536, got {dim}")
    return HashEmbedder(dim=dim)
