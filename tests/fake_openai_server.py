"""A small local HTTP server that speaks enough of the OpenAI and Anthropic APIs for tests.

Real SDK clients talk to it over a real socket, so the whole client path (request building,
HTTP, error mapping, retries) is exercised without patching anything. Reusable: give it a list
of canned replies (used in order) or a callable that decides per request; it records every
request it got.

    with FakeLLMServer(["{\"newFacts\": []}", Reply(status=429), chat_reply("ok")]) as server:
        llm = OpenAIChat("gpt-4o-mini", base_url=server.url, api_key="sk-test")
        ...
        assert server.requests[0].body["model"] == "gpt-4o-mini"

A reply may be:
- ``str``: the assistant text, wrapped in a chat completion (or an Anthropic message when the
  request went to ``/v1/messages``, or a Responses-API response when it went to ``/v1/responses``);
- ``dict`` / ``list``: sent as the JSON body with status 200;
- :class:`Reply`: full control (status, body, headers, delay, dropped connection).

A request beyond the script gets HTTP 400 (not retried by clients) and counts in
``unexpected``; tests assert ``server.remaining == []`` and ``server.unexpected == 0``.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = [
    "FakeLLMServer",
    "RecordedRequest",
    "Reply",
    "ReplySpec",
    "chat_reply",
    "anthropic_reply",
    "error_reply",
    "responses_reply",
    "response_message",
    "response_function_call",
    "response_reasoning",
]


@dataclass(frozen=True)
class RecordedRequest:
    """One request the server received."""

    method: str
    path: str
    headers: dict[str, str]
    raw: bytes

    @property
    def body(self) -> Any:
        """The JSON body (``None`` when it is not JSON)."""
        try:
            return json.loads(self.raw)
        except ValueError:
            return None

    @property
    def messages(self) -> list[dict[str, Any]]:
        body = self.body
        return list(body.get("messages", [])) if isinstance(body, dict) else []


@dataclass(frozen=True)
class Reply:
    """A scripted HTTP reply. ``body`` str/bytes is sent as is, dict/list as JSON;
    ``drop=True`` closes the connection without answering; ``delay`` waits first (seconds)."""

    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    drop: bool = False
    content_type: str = "application/json"


ReplySpec = str | dict[str, Any] | list[Any] | Reply
Responder = Callable[[RecordedRequest], ReplySpec]


def chat_reply(content: str | None, *, model: str = "fake-model", finish_reason: str = "stop",
               refusal: str | None = None, prompt_tokens: int = 10) -> dict[str, Any]:
    """An OpenAI chat completion body with one choice."""
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 1_767_225_600,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content, "refusal": refusal},
                "finish_reason": finish_reason,
                "logprobs": None,
            }
        ],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": 5,
                  "total_tokens": prompt_tokens + 5},
    }


def anthropic_reply(text: str, *, model: str = "claude-fake", stop_reason: str = "end_turn") -> dict[str, Any]:
    """An Anthropic Messages API body with one text block."""
    return {
        "id": "msg_fake",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [{"type": "text", "text": text}],
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 5},
    }


# --- the Responses API (``POST /v1/responses``, non-streaming), as the OpenAI Agents SDK uses it ---
def response_message(text: str, *, item_id: str = "msg_fake") -> dict[str, Any]:
    """An assistant output message of a Responses-API response."""
    return {"type": "message", "id": item_id, "status": "completed", "role": "assistant",
            "content": [{"type": "output_text", "text": text, "annotations": []}]}


def response_function_call(name: str, arguments: dict[str, Any] | str, *, call_id: str = "call_fake",
                           item_id: str | None = None) -> dict[str, Any]:
    """A ``function_call`` output item: the model asks for tool ``name`` with ``arguments``."""
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"type": "function_call", "id": item_id or f"fc_{call_id}", "call_id": call_id, "name": name,
            "arguments": text, "status": "completed"}


def response_reasoning(summary: str, *, item_id: str = "rs_fake") -> dict[str, Any]:
    """A ``reasoning`` output item (it has no role)."""
    return {"type": "reasoning", "id": item_id, "summary": [{"type": "summary_text", "text": summary}]}


def responses_reply(*output: dict[str, Any], model: str = "fake-model", response_id: str = "resp_fake",
                    input_tokens: int = 10) -> dict[str, Any]:
    """A Responses-API response body whose ``output`` is the given items."""
    return {
        "id": response_id, "object": "response", "created_at": 1_767_225_600, "model": model,
        "status": "completed", "output": list(output), "parallel_tool_calls": True, "tool_choice": "auto",
        "tools": [], "error": None, "incomplete_details": None, "instructions": None, "metadata": {},
        "temperature": 1.0, "top_p": 1.0,
        "usage": {"input_tokens": input_tokens, "output_tokens": 5, "total_tokens": input_tokens + 5,
                  "input_tokens_details": {"cached_tokens": 0}, "output_tokens_details": {"reasoning_tokens": 0}},
    }


def error_reply(status: int, message: str = "error", *, headers: dict[str, str] | None = None,
                error_type: str = "server_error") -> Reply:
    """An error in the shape both APIs use: ``{"error": {"message", "type"}}``."""
    body = {"type": "error", "error": {"message": message, "type": error_type, "code": None}}
    return Reply(status=status, body=body, headers=dict(headers or {}))


class FakeLLMServer:
    """``http.server`` in a daemon thread on 127.0.0.1 (a free port)."""

    def __init__(self, replies: Sequence[ReplySpec] | Responder | None = None) -> None:
        self._lock = threading.Lock()
        self._script: list[ReplySpec] = [] if callable(replies) or replies is None else list(replies)
        self._responder: Responder | None = replies if callable(replies) else None
        self.requests: list[RecordedRequest] = []
        self.unexpected = 0
        self._release = threading.Event()  # set on close so delayed replies stop waiting
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02},
                                        name="fake-llm-server", daemon=True)
        self._thread.start()

    # -- public -------------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT`` (what the Anthropic SDK takes)."""
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT/v1`` (what the OpenAI SDK takes as ``base_url``)."""
        return self.base_url + "/v1"

    @property
    def call_count(self) -> int:
        with self._lock:
            return len(self.requests)

    @property
    def remaining(self) -> list[ReplySpec]:
        with self._lock:
            return list(self._script)

    def add(self, *replies: ReplySpec) -> None:
        """Append replies to the script."""
        with self._lock:
            self._script.extend(replies)

    def close(self) -> None:
        self._release.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> FakeLLMServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals ----------------------------------------------------------------------
    def _next(self, request: RecordedRequest) -> ReplySpec:
        with self._lock:
            self.requests.append(request)
            if self._responder is not None:
                responder = self._responder
            elif self._script:
                return self._script.pop(0)
            else:
                self.unexpected += 1
                return error_reply(400, f"fake server: no reply scripted for call #{len(self.requests)}",
                                   error_type="invalid_request_error")
        return responder(request)

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib name
                return  # keep test output quiet

            def do_GET(self) -> None:  # noqa: N802 - stdlib name
                self._serve(b"")

            def do_POST(self) -> None:  # noqa: N802 - stdlib name
                length = int(self.headers.get("Content-Length") or 0)
                self._serve(self.rfile.read(length) if length else b"")

            def _serve(self, raw: bytes) -> None:
                request = RecordedRequest(self.command, self.path,
                                          {k.lower(): v for k, v in self.headers.items()}, raw)
                reply = _as_reply(server._next(request), request)
                if reply.delay:
                    server._release.wait(reply.delay)
                if reply.drop:
                    self.close_connection = True
                    return  # no status line: the client sees the connection drop
                payload = _encode(reply.body)
                self.send_response(reply.status)
                self.send_header("Content-Type", reply.content_type)
                self.send_header("Content-Length", str(len(payload)))
                for key, value in reply.headers.items():
                    self.send_header(key, value)
                self.end_headers()
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    self.wfile.write(payload)  # the client may have given up (timeout test)

        return Handler


def _as_reply(spec: ReplySpec, request: RecordedRequest) -> Reply:
    if isinstance(spec, Reply):
        return spec
    if isinstance(spec, str):
        body = request.body if isinstance(request.body, dict) else {}
        model = str(body.get("model", "fake-model"))
        if request.path.rstrip("/").endswith("/messages"):
            return Reply(body=anthropic_reply(spec, model=model))
        if request.path.rstrip("/").endswith("/responses"):
            return Reply(body=responses_reply(response_message(spec), model=model))
        return Reply(body=chat_reply(spec, model=model))
    return Reply(body=spec)


def _encode(body: Any) -> bytes:
    if body is None:
        return b""
    if isinstance(body, bytes):
        return body
    if isinstance(body, str):
        return body.encode("utf-8")
    return json.dumps(body).encode("utf-8")

