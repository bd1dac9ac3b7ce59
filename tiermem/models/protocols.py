"""The two model seams: a chat model and an embedder."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt


@runtime_checkable
class ChatModel(Protocol):
    """Anything that answers a list of ``{role, content}`` messages with text.

    With ``json_schema`` given, a provider that supports structured output must use it; the
    reply is still returned as text (the JSON), and callers parse it defensively.
    """

    def complete(self, messages: list[dict[str, Any]], *, json_schema: dict[str, Any] | None = None) -> str: ...


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalised float32 vectors of shape ``(len(texts), dim)``."""

    @property
    def dim(self) -> int: ...

    @property
    def model_id(self) -> str: ...

    def embed(self, texts: list[str]) -> npt.NDArray[np.float32]: ...
