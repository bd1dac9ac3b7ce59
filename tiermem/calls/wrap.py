"""The logging wrappers ``Memory`` puts around its models, so that every call is logged whoever made
the model: a registered provider, the scripted test model, a user's own ``ChatModel``.

A wrapper times the call, collects what the provider reports while it runs (its attempts and token
usage, :mod:`tiermem.calls.trace`) and hands all of it to the :class:`CallRecorder`. Attributes it
does not have are the wrapped model's (``mem.llm.requests`` of a ``ScriptedChatModel`` still works);
:func:`unwrap_model` gives the model itself.

Embedders: only remote ones are wrapped — an embedder whose ``remote`` attribute is true (the
OpenAI / OpenAI-compatible embedder, or a user's own that sets it). The local MiniLM and the hash
embedder make no remote call and are not logged.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, TypeVar

from tiermem.calls.recorder import CallInput, CallRecorder
from tiermem.calls.trace import current_purpose, remember_reply, tracing

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from tiermem.models.protocols import ChatModel, Embedder

T = TypeVar("T")


def model_id_of(model: object) -> str:
    """``provider:model`` of a model with a ``model_id`` like that, else ``custom:<class name>``."""
    found = getattr(model, "model_id", None)
    if isinstance(found, str) and found.strip():
        return found if ":" in found else f"custom:{found}"
    return f"custom:{type(model).__name__}"


def _forward(wrapper: object, name: str) -> Any:
    """An attribute of the wrapped model (``mem.llm.requests``); never a dunder nor the wrapper's own
    fields (a copy made without ``__init__`` must not recurse)."""
    inner = wrapper.__dict__.get("_tiermem_inner")
    if inner is None or name.startswith("__") or name in ("_tiermem_inner", "_recorder"):
        raise AttributeError(name)
    return getattr(inner, name)


def unwrap_model(model: T) -> T:
    """The model inside a logging wrapper (the object itself when it is not wrapped)."""
    inner = getattr(model, "_tiermem_inner", None) if isinstance(model, (LoggedChatModel, LoggedEmbedder)) else None
    return model if inner is None else inner


class LoggedChatModel:
    """A :class:`~tiermem.models.protocols.ChatModel` that logs each call of the model it wraps."""

    def __init__(self, inner: ChatModel, recorder: CallRecorder) -> None:
        self._tiermem_inner = inner
        self._recorder = recorder

    @property
    def inner(self) -> ChatModel:
        return self._tiermem_inner

    @property
    def model_id(self) -> str:
        return model_id_of(self._tiermem_inner)

    def __getattr__(self, name: str) -> Any:
        return _forward(self, name)

    def complete(self, messages: list[dict[str, Any]], *, json_schema: dict[str, Any] | None = None) -> str:
        purpose = current_purpose()
        start = time.perf_counter()
        with tracing() as trace:
            try:
                reply = self._tiermem_inner.complete(messages, json_schema=json_schema)
            except Exception as exc:
                elapsed = (time.perf_counter() - start) * 1000
                self._recorder.record(CallInput(purpose, self.model_id, messages, failure=exc), trace, elapsed)
                raise
        elapsed = (time.perf_counter() - start) * 1000
        text = reply if isinstance(reply, str) else None
        row = self._recorder.record(CallInput(purpose, self.model_id, messages, text), trace, elapsed)
        if row is not None and isinstance(reply, str):
            recorder = self._recorder
            remember_reply(reply, lambda error: recorder.mark_parse_failed(row, error))
        return reply


class LoggedEmbedder:
    """An :class:`~tiermem.models.protocols.Embedder` that logs the requests of a remote embedder
    (purpose ``embed``; nothing when the embedder reported no request)."""

    def __init__(self, inner: Embedder, recorder: CallRecorder) -> None:
        self._tiermem_inner = inner
        self._recorder = recorder

    @property
    def inner(self) -> Embedder:
        return self._tiermem_inner

    @property
    def model_id(self) -> str:
        return self._tiermem_inner.model_id

    @property
    def dim(self) -> int:  # may send a probe request
        return int(self._logged(lambda: self._tiermem_inner.dim, ["dimension probe"]))

    def __getattr__(self, name: str) -> Any:
        return _forward(self, name)

    def embed(self, texts: list[str]) -> npt.NDArray[np.float32]:
        result: npt.NDArray[np.float32] = self._logged(lambda: self._tiermem_inner.embed(texts), texts)
        return result

    def _logged(self, run: Any, sent: list[str]) -> Any:
        start = time.perf_counter()
        with tracing() as trace:
            try:
                result = run()
            except Exception as exc:
                if trace.attempts:
                    elapsed = (time.perf_counter() - start) * 1000
                    self._recorder.record(CallInput("embed", model_id_of(self._tiermem_inner), sent, failure=exc),
                                          trace, elapsed)
                raise
        if trace.attempts:
            elapsed = (time.perf_counter() - start) * 1000
            self._recorder.record(CallInput("embed", model_id_of(self._tiermem_inner), sent), trace, elapsed)
        return result


def wrap_llm(model: ChatModel | None, recorder: CallRecorder) -> ChatModel | None:
    """``model`` logged by ``recorder`` (a model wrapped for another Memory is re-wrapped, not nested)."""
    if model is None:
        return None
    return LoggedChatModel(unwrap_model(model), recorder)


def wrap_embedder(embedder: Embedder, recorder: CallRecorder) -> Embedder:
    """A remote ``embedder`` logged by ``recorder``; any other as it is."""
    inner = unwrap_model(embedder)
    return LoggedEmbedder(inner, recorder) if getattr(inner, "remote", False) is True else inner
