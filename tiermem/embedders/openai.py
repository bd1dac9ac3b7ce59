"""Embeddings from OpenAI (``openai:MODEL``) or any OpenAI-compatible server
(``openai-compatible:MODEL`` with a ``base_url``: vLLM, Ollama, LM Studio, llama.cpp server).

Uses the official ``openai`` SDK, imported on first use. Requests carry up to ``batch_size``
inputs (and stay under a token budget per request); the SDK retries 408/409/429/5xx and
connection errors with exponential backoff (honouring ``Retry-After``) up to ``max_retries``
times, each attempt bounded by ``timeout``. Whatever still fails becomes a
:class:`~tiermem.errors.ProviderError`. Vectors come back as float32, L2-normalised.
"""

from __future__ import annotations

import base64
import logging
import os
import threading
import time
from typing import TYPE_CHECKING, Any

from tiermem.errors import ConfigError, InvalidInput, ProviderError

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from tiermem.models.registry import ProviderOptions

__all__ = ["OpenAIEmbedder", "create_openai_embedder", "create_compatible_embedder"]

log = logging.getLogger(__name__)

DEFAULT_MODEL = "text-embedding-3-small"
KNOWN_DIMS = {"text-embedding-3-small": 1536, "text-embedding-3-large": 3072, "text-embedding-ada-002": 1536}
MAX_INPUT_TOKENS = 8191  # OpenAI's per-input limit; longer inputs are cut, not rejected
_REQUEST_TOKEN_BUDGET = 300_000  # OpenAI's limit on tokens summed over one request's inputs


def _token_bound(text: str) -> int:
    """An upper bound of the token count: a BPE token is at least one UTF-8 byte."""
    return len(text.encode("utf-8"))


class OpenAIEmbedder:
    """An embedder behind the OpenAI embeddings API. Thread-safe. ``remote``: its requests are
    model calls the LLM call log records (purpose ``embed``, :mod:`tiermem.calls`).

    ``provider`` is ``"openai"`` or ``"openai-compatible"`` (then ``base_url`` is required and
    the API key optional). ``dim`` comes from ``dimensions``, the table of known models, or the
    first response (asking ``dim`` before any call sends one small probe request).
    """

    remote = True

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        *,
        provider: str = "openai",
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 3,
        batch_size: int = 256,
        dimensions: int | None = None,
        max_input_tokens: int | None = MAX_INPUT_TOKENS,
    ) -> None:
        if provider not in ("openai", "openai-compatible"):
            raise ConfigError(f"provider must be 'openai' or 'openai-compatible', not {provider!r}")
        if not model.strip():
            raise ConfigError(f"{provider} embedder needs a model name, e.g. '{provider}:{DEFAULT_MODEL}'")
        if provider == "openai-compatible" and not base_url:
            raise ConfigError("openai-compatible embedders need a base_url, e.g. http://localhost:11434/v1")
        if provider == "openai" and not (api_key or os.environ.get("OPENAI_API_KEY")):
            raise ConfigError("the openai embedder needs an API key (set OPENAI_API_KEY or api_key)")
        if batch_size < 1 or max_retries < 0 or timeout <= 0 or (dimensions is not None and dimensions < 1):
            raise ConfigError("batch_size and dimensions must be positive, max_retries >= 0, timeout > 0")
        self._model = model.strip()
        self._provider = provider
        self._base_url = base_url
        self._api_key = api_key or os.environ.get("OPENAI_API_KEY") or "not-needed"
        self._timeout = timeout
        self._max_retries = max_retries
        self._batch_size = batch_size
        self._dimensions = dimensions
        self._max_input_tokens = max_input_tokens
        self._dim: int | None = dimensions or (KNOWN_DIMS.get(self._model) if provider == "openai" else None)
        self._client: Any = None
        self._lock = threading.Lock()

    @property
    def dim(self) -> int:
        if self._dim is None:
            self.embed(["dimension probe"])
        assert self._dim is not None
        return self._dim

    @property
    def model_id(self) -> str:
        suffix = f"@{self._dimensions}d" if self._dimensions else ""
        return f"{self._provider}:{self._model}{suffix}"

    def _get_client(self) -> Any:
        with self._lock:
            if self._client is None:
                try:
                    import openai
                except ImportError as exc:
                    raise ConfigError("the openai embedder needs the 'openai' package") from exc
                try:
                    self._client = openai.OpenAI(
                        api_key=self._api_key,
                        base_url=self._base_url,
                        timeout=self._timeout,
                        max_retries=self._max_retries,
                        http_client=openai.DefaultHttpxClient(event_hooks=_CALL_LOG_HOOKS),
                    )
                except openai.OpenAIError as exc:
                    raise ConfigError(f"cannot set up the {self._provider} client: {exc}") from exc
            return self._client

    def embed(self, texts: list[str]) -> npt.NDArray[np.float32]:
        import numpy as np

        if isinstance(texts, str) or not all(isinstance(text, str) for text in texts):
            raise InvalidInput("embed() takes a list of strings")
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        inputs = [self._prepare(text) for text in texts]
        parts = [self._request(batch) for batch in self._batches(inputs)]
        vectors = np.concatenate(parts) if len(parts) > 1 else parts[0]
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        result: npt.NDArray[np.float32] = (vectors / np.where(norms > 0, norms, 1.0)).astype(np.float32)
        return result

    def _prepare(self, text: str) -> str:
        if not text.strip():
            return " "  # the API rejects empty strings
        if self._max_input_tokens is not None and _token_bound(text) > self._max_input_tokens:
            from tiermem.tokens import truncate_to_tokens

            return truncate_to_tokens(text, self._max_input_tokens)
        return text

    def _batches(self, inputs: list[str]) -> list[list[str]]:
        batches: list[list[str]] = []
        current: list[str] = []
        budget = 0
        for text in inputs:
            cost = min(_token_bound(text), self._max_input_tokens or _REQUEST_TOKEN_BUDGET)
            if current and (len(current) >= self._batch_size or budget + cost > _REQUEST_TOKEN_BUDGET):
                batches.append(current)
                current, budget = [], 0
            current.append(text)
            budget += cost
        if current:
            batches.append(current)
        return batches

    def _request(self, batch: list[str]) -> npt.NDArray[np.float32]:
        import openai

        client = self._get_client()
        params: dict[str, Any] = {"input": batch, "model": self._model}
        # base64 halves the payload; compatible servers do not all support it, floats they do
        params["encoding_format"] = "base64" if self._provider == "openai" else "float"
        if self._dimensions:
            params["dimensions"] = self._dimensions
        try:
            response = client.embeddings.create(**params)
        except openai.APIStatusError as exc:
            raise ProviderError(
                f"{self._provider} embeddings ({self._model}) failed with HTTP {exc.status_code}: {exc.message}"
            ) from exc
        except openai.APITimeoutError as exc:
            raise ProviderError(f"{self._provider} embeddings timed out after {self._timeout}s") from exc
        except (openai.OpenAIError, ValueError, TypeError) as exc:
            raise ProviderError(f"{self._provider} embeddings ({self._model}) failed: {exc}") from exc
        finally:
            _request_ended()
        vectors = self._parse(response, len(batch))
        _note_usage(response, batch)
        return vectors

    def _parse(self, response: Any, expected: int) -> npt.NDArray[np.float32]:
        import numpy as np

        try:
            items = sorted(response.data, key=lambda item: int(item.index))
            rows = [_vector(item.embedding) for item in items]
            vectors = np.asarray(rows, dtype=np.float32)
        except (AttributeError, TypeError, ValueError) as exc:
            raise ProviderError(f"malformed embeddings response from {self._provider}: {exc}") from exc
        if vectors.ndim != 2 or vectors.shape[0] != expected or vectors.shape[1] == 0:
            raise ProviderError(
                f"malformed embeddings response from {self._provider}: expected {expected} vectors, "
                f"got shape {vectors.shape}"
            )
        if not np.isfinite(vectors).all():
            raise ProviderError(f"{self._provider} returned non-finite embedding values")
        with self._lock:
            if self._dim is None:
                self._dim = int(vectors.shape[1])
            elif vectors.shape[1] != self._dim:
                raise ProviderError(f"{self._provider} returned {vectors.shape[1]}-dim vectors; expected {self._dim}")
        result: npt.NDArray[np.float32] = vectors
        return result


# --- the LLM call log (tiermem.calls): each HTTP attempt the SDK makes, retries included ---------
_http = threading.local()  # this thread's request in flight: when it started, whether it was answered


def _on_request(request: Any) -> None:
    """httpx hook: a request starts. One still open means the one before got no answer (a connection
    error or timeout the SDK retries): that one is logged as failed."""
    from tiermem.calls import note_attempt

    if getattr(_http, "started", None) is not None:
        note_attempt((time.perf_counter() - _http.started) * 1000, "no response (connection error or timeout)")
    _http.started = time.perf_counter()


def _on_response(response: Any) -> None:
    """httpx hook: an answer (its headers) arrived; an HTTP error status is a failed attempt."""
    from tiermem.calls import note_attempt

    started = getattr(_http, "started", None)
    _http.started = None
    status = int(response.status_code)
    latency = 0.0 if started is None else (time.perf_counter() - started) * 1000
    note_attempt(latency, None if status < 400 else f"HTTP {status}")


def _request_ended() -> None:
    """After the SDK call: a request left unanswered failed (the caller gets the error)."""
    from tiermem.calls import note_attempt

    started = getattr(_http, "started", None)
    if started is not None:
        _http.started = None
        note_attempt((time.perf_counter() - started) * 1000, "no response (connection error or timeout)")


def _note_usage(response: Any, batch: list[str]) -> None:
    """The prompt tokens the server reported (compatible servers may not), else counted."""
    from tiermem.calls.trace import note_usage, tracing_active

    if not tracing_active():
        return
    reported = getattr(getattr(response, "usage", None), "prompt_tokens", None)
    if isinstance(reported, int) and not isinstance(reported, bool) and reported > 0:
        note_usage(reported, 0)
    else:
        from tiermem.tokens import count_tokens

        note_usage(sum(count_tokens(text) for text in batch), 0, counted=True)


_CALL_LOG_HOOKS: dict[str, list[Any]] = {"request": [_on_request], "response": [_on_response]}


def _vector(embedding: Any) -> Any:
    """One embedding as floats: a list of numbers, or base64 of little-endian float32."""
    import numpy as np

    if isinstance(embedding, str):
        return np.frombuffer(base64.b64decode(embedding, validate=True), dtype="<f4")
    if not isinstance(embedding, list) or not all(
        isinstance(x, (int, float)) and not isinstance(x, bool) for x in embedding
    ):
        raise ValueError("an embedding must be a list of numbers")
    return embedding


def _options(options: ProviderOptions) -> dict[str, Any]:
    extra = options.extra or {}
    known = {"batch_size", "dimensions", "max_input_tokens"}
    return {
        "timeout": options.timeout,
        "max_retries": options.max_retries,
        **{key: extra[key] for key in known if key in extra},
    }


def create_openai_embedder(model: str, options: ProviderOptions) -> OpenAIEmbedder:
    """Registry factory for ``openai[:MODEL]`` (default ``text-embedding-3-small``)."""
    return OpenAIEmbedder(
        model.strip() or DEFAULT_MODEL,
        provider="openai",
        base_url=options.base_url,
        api_key=options.api_key,
        **_options(options),
    )


def create_compatible_embedder(model: str, options: ProviderOptions) -> OpenAIEmbedder:
    """Registry factory for ``openai-compatible:MODEL``; ``options.base_url`` is required."""
    return OpenAIEmbedder(
        model,
        provider="openai-compatible",
        base_url=options.base_url,
        api_key=options.api_key,
        **_options(options),
    )
