"""Registry factory for ``hash[:DIM]``: the deterministic word-hashing embedder of
:mod:`tiermem.testing` (for tests and offline demos; not a semantic model)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tiermem import validate
from tiermem.errors import ConfigError, InvalidInput
from tiermem.testing import HashEmbedder

if TYPE_CHECKING:
    from tiermem.models.registry import ProviderOptions

DEFAULT_DIM = 256


def create_hash_embedder(model: str, options: ProviderOptions) -> HashEmbedder:
    """``hash`` gives 256 dimensions; ``hash:64`` gives 64 (at least 8)."""
    text = model.strip()
    try:
        dim = validate.whole_number(text, "dimension", 8, 65536) if text else DEFAULT_DIM
    except InvalidInput:
        raise ConfigError(f"hash embedder dimension must be a whole number within 8..65536,"
                          f" got {text[:40]!r}") from None
    return HashEmbedder(dim=dim)
