"""The OpenAI(-compatible) embedder against a real local HTTP server (no SDK patching)."""

from __future__ import annotations

import base64
import hashlib
import json
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np
import pytest

from tiermem.embedders.openai import OpenAIEmbedder
from tiermem.errors import ConfigError, ProviderError
from tiermem.models.registry import ProviderOptions, make_embedder

DIM = 8


def raw_vector(text: str, dim: int = DIM) -> list[float]:
    """What the fake server returns for ``text``: deterministic and deliberately not normalised."""
    digest = hashlib.sha256(text.encode()).digest()
    return [float(b) - 100.0 for b in digest[:dim]]


@dataclass
class Reply:
    status: int = 200
    body: Any = None  # None: a normal embeddings reply; bytes: sent as is; else JSON
    headers: dict[str, str] = field(default_factory=dict)
    hang: bool = False


@dataclass
class FakeServer:
    url: str
    script: list[Reply] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    released: threading.Event = field(default_factory=threading.Event)
    reverse_order: bool = False

    def answer(self, body: dict[str, Any]) -> Reply:
        reply = self.script.pop(0) if self.script else Reply()
        if reply.body is None and reply.status == 200:
            data = []
            for index, text in enumerate(body["input"]):
                vector = raw_vector(text, int(body.get("dimensions", DIM)))
                if body.get("encoding_format") == "base64":
                    encoded: Any = base64.b64encode(np.asarray(vector, dtype="<f4").tobytes()).decode()
                else:
                    encoded = vector
                data.append({"object": "embedding", "index": index, "embedding": encoded})
            if self.reverse_order:
                data.reverse()
            reply.body = {"object": "list", "data": data, "model": body["model"], "usage": {}}
        return reply


@pytest.fixture()
def server() -> Iterator[FakeServer]:
    holder: dict[str, FakeServer] = {}

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
            fake = holder["server"]
            length = int(self.headers.get("Content-Length", "0"))
            body = json.loads(self.rfile.read(length))
            fake.requests.append({"path": self.path, "auth": self.headers.get("Authorization"), "body": body})
            reply = fake.answer(body)
            if reply.hang:
                fake.released.wait(5)
                return
            payload = reply.body if isinstance(reply.body, bytes) else json.dumps(reply.body).encode()
            self.send_response(reply.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            for name, value in reply.headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    holder["server"] = FakeServer(url=f"http://127.0.0.1:{httpd.server_address[1]}/v1")
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield holder["server"]
    finally:
        holder["server"].released.set()
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)


def compatible(server: FakeServer, **kwargs: Any) -> OpenAIEmbedder:
    kwargs.setdefault("max_retries", 2)
    kwargs.setdefault("timeout", 5.0)
    return OpenAIEmbedder("local-embed", provider="openai-compatible", base_url=server.url, **kwargs)


def expected(texts: list[str], dim: int = DIM) -> np.ndarray:
    raw = np.asarray([raw_vector(t, dim) for t in texts], dtype=np.float32)
    return raw / np.linalg.norm(raw, axis=1, keepdims=True)


def test_compatible_server_vectors_are_normalised_float32(server: FakeServer) -> None:
    emb = compatible(server)
    texts = ["The user likes tea.", "东京", "bees"]
    vectors = emb.embed(texts)
    assert vectors.dtype == np.float32 and vectors.shape == (3, DIM)
    np.testing.assert_allclose(vectors, expected(texts), atol=1e-6)
    assert emb.dim == DIM and emb.model_id == "openai-compatible:local-embed"
    (request,) = server.requests
    assert request["path"] == "/v1/embeddings"
    assert request["body"] == {"input": texts, "model": "local-embed", "encoding_format": "float"}


def test_openai_provider_sends_key_dimensions_and_decodes_base64(server: FakeServer) -> None:
    options = ProviderOptions(base_url=server.url, api_key="sk-test", extra={"dimensions": 4})
    emb = make_embedder("openai:text-embedding-3-small", options)
    assert isinstance(emb, OpenAIEmbedder) and emb.dim == 4 and not server.requests
    vectors = emb.embed(["one", "two"])
    np.testing.assert_allclose(vectors, expected(["one", "two"], 4), atol=1e-6)
    body = server.requests[0]["body"]
    assert body["dimensions"] == 4 and body["encoding_format"] == "base64"
    assert body["model"] == "text-embedding-3-small"
    assert server.requests[0]["auth"] == "Bearer sk-test"
    assert emb.model_id == "openai:text-embedding-3-small@4d"


def test_batches_keep_input_order(server: FakeServer) -> None:
    server.reverse_order = True  # the server lists items out of order; "index" decides
    emb = compatible(server, batch_size=2)
    texts = [f"fact number {i}" for i in range(5)]
    np.testing.assert_allclose(emb.embed(texts), expected(texts), atol=1e-6)
    assert [len(r["body"]["input"]) for r in server.requests] == [2, 2, 1]


def test_server_error_then_success_is_retried(server: FakeServer) -> None:
    server.script = [Reply(500, {"error": {"message": "boom"}}, {"retry-after-ms": "1"})]
    emb = compatible(server)
    np.testing.assert_allclose(emb.embed(["retry me"]), expected(["retry me"]), atol=1e-6)
    assert len(server.requests) == 2


def test_rate_limit_past_the_retries_is_a_provider_error(server: FakeServer) -> None:
    busy = Reply(429, {"error": {"message": "slow down"}}, {"retry-after-ms": "1"})
    server.script = [busy, Reply(**{**busy.__dict__})]
    emb = compatible(server, max_retries=1)
    with pytest.raises(ProviderError, match="429"):
        emb.embed(["too fast"])
    assert len(server.requests) == 2


def test_client_error_is_not_retried(server: FakeServer) -> None:
    server.script = [Reply(400, {"error": {"message": "input too long"}})]
    with pytest.raises(ProviderError, match="400.*input too long"):
        compatible(server).embed(["x"])
    assert len(server.requests) == 1


@pytest.mark.parametrize(
    "body",
    [
        {"object": "list", "data": "not a list"},
        {"object": "list", "data": [{"index": 0, "embedding": ["a", "b"]}]},
        {"object": "list", "data": []},
        {"object": "list", "data": [{"index": 0, "embedding": [1.0, 2.0]}, {"index": 1, "embedding": [1.0]}]},
        b"<html>gateway says hi</html>",
    ],
)
def test_malformed_body_is_a_provider_error(server: FakeServer, body: Any) -> None:
    server.script = [Reply(200, body)]
    with pytest.raises(ProviderError):
        compatible(server).embed(["a", "b"])


def test_dimension_change_between_calls_is_a_provider_error(server: FakeServer) -> None:
    emb = compatible(server)
    emb.embed(["first"])
    server.script = [Reply(200, {"object": "list", "data": [{"index": 0, "embedding": [1.0, 0.0, 0.0]}]})]
    with pytest.raises(ProviderError, match="3-dim"):
        emb.embed(["second"])


def test_dim_probe_when_unknown(server: FakeServer) -> None:
    emb = compatible(server)
    assert emb.dim == DIM
    assert server.requests[0]["body"]["input"] == ["dimension probe"]
    assert emb.embed([]).shape == (0, DIM) and len(server.requests) == 1


def test_empty_text_is_sent_as_a_space(server: FakeServer) -> None:
    compatible(server).embed(["", "ok"])
    assert server.requests[0]["body"]["input"] == [" ", "ok"]


def test_timeout_is_a_provider_error(server: FakeServer) -> None:
    server.script = [Reply(hang=True)]
    with pytest.raises(ProviderError, match="timed out"):
        compatible(server, timeout=0.3, max_retries=0).embed(["slow"])


def test_connection_refused_is_a_provider_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    emb = OpenAIEmbedder("m", provider="openai-compatible", base_url=f"http://127.0.0.1:{port}/v1", max_retries=0)
    with pytest.raises(ProviderError):
        emb.embed(["nobody home"])


def test_configuration_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ConfigError, match="API key"):
        make_embedder("openai:text-embedding-3-small", ProviderOptions())
    with pytest.raises(ConfigError, match="base_url"):
        make_embedder("openai-compatible:nomic-embed-text", ProviderOptions())
    with pytest.raises(ConfigError, match="model name"):
        make_embedder("openai-compatible:", ProviderOptions(base_url="http://127.0.0.1:9/v1"))
    assert make_embedder("openai", ProviderOptions(api_key="k")).dim == 1536  # default model, no request
