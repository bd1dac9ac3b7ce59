"""A test seam shared by the search tests: the hash embedder, keeping every text it was asked to embed."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from tiermem.testing import HashEmbedder


class RecordingEmbedder(HashEmbedder):
    """The hash embedder, keeping every text it was asked to embed (the embedder is the seam)."""

    def __init__(self) -> None:
        super().__init__()
        self.texts: list[str] = []

    def embed(self, texts: list[str]) -> npt.NDArray[np.float32]:
        self.texts += texts
        return super().embed(texts)
