"""A small local HTTP server that speaks enough of the OpenAI, Anthropic and Gemini APIs for tests.

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
  request went to ``/v1/messages``, a Responses-API response when it went to ``/v1/responses``,
  a Gemini ``GenerateContentResponse`` for ``models/M:generateContent``);
- ``dict`` / ``list``: sent as the JSON body with status 200;
- :class:`Reply`: full control (status, body, headers, delay, dropped connection), sent as is.

Streaming: when the request asks for a stream (``"stream": true`` for ``/v1/messages`` and
``/v1/responses``, the ``:streamGenerateContent`` path for Gemini), a ``str`` or ``dict`` reply is
sent as the server-sent events the real API sends for that body (Anthropic ``message_start`` ...
``message_stop``; Responses ``response.created`` ... ``response.completed``; Gemini ``data:``
chunks). So the real coding-agent CLIs (Claude Code, Codex, Gemini CLI) can run against it, and a
test scripts tool calls the same way streamed or not:
``anthropic_reply("", tool_uses=[anthropic_tool_use(...)])``,
``responses_reply(response_function_call(..., namespace="mcp__S"))``,
``gemini_reply("", calls=[gemini_function_call(...)])``.
``server.requests_with("some text")`` finds the requests whose JSON body holds that text anywhere
(e.g. context a hook injected); ``RecordedRequest.text`` is every string of the body.

A request beyond the script gets HTTP 400 (not retried by clients) and counts in
``unexpected``; tests assert ``server.remaining == []`` and ``server.unexpected == 0``.
"""

from __future__ import annotations

import contextlib
import itertools
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
    "anthropic_tool_use",
    "gemini_function_call",
    "gemini_reply",
    "sse_events",
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

    @property
    def stream(self) -> bool:
        """Whether the client asked for server-sent events."""
        body = self.body
        return ":streamGenerateContent" in self.path or (isinstance(body, dict) and body.get("stream") is True)

    @property
    def text(self) -> str:
        """Every string value of the JSON body (system prompt, messages, tool outputs...), one a line."""
        return "\n".join(_strings(self.body))


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


_ids = itertools.count(1)


def _fresh(prefix: str) -> str:
    """A new id: Claude Code merges assistant messages that share an id, and a tool call id must be
    unique within a conversation, so scripted replies never repeat one."""
    return f"{prefix}_{next(_ids)}"


def anthropic_reply(text: str, *, model: str = "claude-fake", stop_reason: str | None = None,
                    tool_uses: Sequence[dict[str, Any]] = ()) -> dict[str, Any]:
    """An Anthropic Messages API body: a text block (left out when ``text`` is empty and there are
    tool uses) then the ``tool_use`` blocks; ``stop_reason`` is ``tool_use`` when there are some."""
    blocks = [{"type": "text", "text": text}] if text or not tool_uses else []
    return {
        "id": _fresh("msg_fake"),
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [*blocks, *tool_uses],
        "stop_reason": stop_reason or ("tool_use" if tool_uses else "end_turn"),
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 5},
    }


def anthropic_tool_use(name: str, tool_input: dict[str, Any], *, tool_id: str | None = None) -> dict[str, Any]:
    """A ``tool_use`` content block: the model asks for tool ``name`` (an MCP tool of Claude Code is
    ``mcp__SERVER__TOOL``)."""
    return {"type": "tool_use", "id": tool_id or _fresh("toolu_fake"), "name": name, "input": tool_input}


# --- the Responses API (``POST /v1/responses``), as the OpenAI Agents SDK and Codex use it ---
def response_message(text: str, *, item_id: str = "msg_fake") -> dict[str, Any]:
    """An assistant output message of a Responses-API response."""
    return {"type": "message", "id": item_id, "status": "completed", "role": "assistant",
            "content": [{"type": "output_text", "text": text, "annotations": []}]}


def response_function_call(name: str, arguments: dict[str, Any] | str, *, call_id: str | None = None,
                           item_id: str | None = None, namespace: str | None = None) -> dict[str, Any]:
    """A ``function_call`` output item: the model asks for tool ``name`` with ``arguments``. A tool
    offered inside a ``namespace`` tool (Codex offers MCP server S's tools as namespace ``mcp__S``)
    is called by its short name with that ``namespace``."""
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    call_id = call_id or _fresh("call_fake")
    item = {"type": "function_call", "id": item_id or f"fc_{call_id}", "call_id": call_id, "name": name,
            "arguments": text, "status": "completed"}
    return item | ({"namespace": namespace} if namespace else {})


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


# --- Gemini (``POST /v1beta/models/MODEL:generateContent`` / ``:streamGenerateContent?alt=sse``) ---
def gemini_function_call(name: str, args: dict[str, Any]) -> dict[str, Any]:
    """A ``functionCall`` part: the model asks for tool ``name`` with ``args``."""
    return {"functionCall": {"name": name, "args": args}}


def gemini_reply(text: str, *, model: str = "gemini-fake", calls: Sequence[dict[str, Any]] = ()) -> dict[str, Any]:
    """A ``GenerateContentResponse`` with one candidate: the text part (left out when empty and there
    are calls) then the ``functionCall`` parts."""
    parts = [{"text": text}] if text or not calls else []
    return {"candidates": [{"content": {"role": "model", "parts": [*parts, *calls]}, "finishReason": "STOP",
                            "index": 0}],
            "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15},
            "modelVersion": model, "responseId": "gemini_fake"}


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

    def requests_with(self, text: str) -> list[RecordedRequest]:
        """The requests whose JSON body holds ``text`` in one of its strings."""
        with self._lock:
            return [request for request in self.requests if text in request.text]

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


# --- how each API wraps a text reply and streams a body ------------------------------------
Event = tuple[str | None, Any]  # (SSE event name or None for a bare ``data:`` line, JSON data)


BlockParts = Callable[[dict[str, Any]], tuple[dict[str, Any], dict[str, Any] | None]]
_BLOCK_PARTS: dict[str, BlockParts] = {  # a content block -> (its empty start, its one delta)
    "text": lambda block: ({**block, "text": ""}, {"type": "text_delta", "text": block["text"]}),
    "tool_use": lambda block: ({**block, "input": {}},
                               {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}),
}


def _anthropic_events(message: dict[str, Any]) -> list[Event]:
    """The ``/v1/messages`` stream that yields ``message``: one delta per content block."""
    head = {**message, "content": [], "stop_reason": None, "stop_sequence": None}
    events: list[Event] = [("message_start", {"type": "message_start", "message": head})]
    for index, block in enumerate(message.get("content", [])):
        parts = _BLOCK_PARTS.get(str(block.get("type")))
        start, delta = parts(block) if parts else (block, None)
        events.append(("content_block_start", {"type": "content_block_start", "index": index, "content_block": start}))
        if delta is not None:
            events.append(("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}))
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    usage = {"output_tokens": message.get("usage", {}).get("output_tokens", 5)}
    events.append(("message_delta", {"type": "message_delta", "usage": usage,
                                      "delta": {"stop_reason": message.get("stop_reason"), "stop_sequence": None}}))
    return [*events, ("message_stop", {"type": "message_stop"})]


_EMPTY_ITEM: dict[Any, dict[str, Any]] = {  # an output item as first announced, before its deltas
    "message": {"status": "in_progress", "content": []},
    "function_call": {"status": "in_progress", "arguments": ""},
}


def _responses_events(response: dict[str, Any]) -> list[Event]:
    """The ``/v1/responses`` stream that yields ``response``: each output item added, its text or
    arguments as one delta, done; ``sequence_number`` counts the events."""
    events: list[Event] = []

    def emit(kind: str, **data: Any) -> None:
        events.append((kind, {"type": kind, "sequence_number": len(events), **data}))

    pending = {**response, "status": "in_progress", "output": []}
    emit("response.created", response=pending)
    emit("response.in_progress", response=pending)
    for index, item in enumerate(response.get("output", [])):
        at = {"item_id": item.get("id"), "output_index": index}
        emit("response.output_item.added", output_index=index, item={**item, **_EMPTY_ITEM.get(item.get("type"), {})})
        for part_index, part in enumerate(item.get("content", []) if item.get("type") == "message" else []):
            emit("response.content_part.added", **at, content_index=part_index, part={**part, "text": ""})
            emit("response.output_text.delta", **at, content_index=part_index, delta=part["text"], logprobs=[])
            emit("response.output_text.done", **at, content_index=part_index, text=part["text"], logprobs=[])
            emit("response.content_part.done", **at, content_index=part_index, part=part)
        if item.get("type") == "function_call":
            emit("response.function_call_arguments.delta", **at, delta=item["arguments"])
            emit("response.function_call_arguments.done", **at, arguments=item["arguments"])
        emit("response.output_item.done", output_index=index, item=item)
    emit("response.completed", response=response)
    return events


@dataclass(frozen=True)
class _Api:
    """One API the server speaks: which paths are its, how a text reply is wrapped, how a body streams."""

    matches: Callable[[str], bool]
    wrap: Callable[[str, RecordedRequest], Any]
    stream: Callable[[Any], list[Event]] | None  # None: a stream request gets the JSON body


def _model(request: RecordedRequest, default: str) -> str:
    body = request.body if isinstance(request.body, dict) else {}
    return str(body.get("model", default))


def _gemini_model(request: RecordedRequest) -> str:
    return request.path.split("/models/", 1)[-1].split(":", 1)[0]


def _route(path: str) -> str:
    return path.split("?", 1)[0].rstrip("/")


_APIS: tuple[_Api, ...] = (
    _Api(lambda path: path.endswith("/messages"), lambda text, r: anthropic_reply(text, model=_model(r, "claude-fake")),
         _anthropic_events),
    _Api(lambda path: path.endswith("/responses"),
         lambda text, r: responses_reply(response_message(text), model=_model(r, "fake-model")), _responses_events),
    _Api(lambda path: ":generateContent" in path or ":streamGenerateContent" in path,
         lambda text, r: gemini_reply(text, model=_gemini_model(r)), lambda body: [(None, body)]),
    _Api(lambda path: True, lambda text, r: chat_reply(text, model=_model(r, "fake-model")), None),
)


def sse_events(events: Sequence[Event]) -> bytes:
    """Server-sent events: ``event: NAME`` (when named) and ``data: JSON`` (a str as is), a blank line after each."""
    lines: list[str] = []
    for name, data in events:
        lines += [f"event: {name}"] if name else []
        lines += [f"data: {data if isinstance(data, str) else json.dumps(data)}", ""]
    return ("\n".join(lines) + "\n").encode("utf-8")


def _as_reply(spec: ReplySpec, request: RecordedRequest) -> Reply:
    if isinstance(spec, Reply):
        return spec
    route = _route(request.path)
    api = next(api for api in _APIS if api.matches(route))
    body = api.wrap(spec, request) if isinstance(spec, str) else spec
    if request.stream and api.stream is not None and isinstance(body, dict):
        return Reply(body=sse_events(api.stream(body)), content_type="text/event-stream",
                     headers={"Cache-Control": "no-cache"})
    return Reply(body=body)


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    items = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
    return [text for item in items for text in _strings(item)]


def _encode(body: Any) -> bytes:
    if body is None:
        return b""
    if isinstance(body, bytes):
        return body
    if isinstance(body, str):
        return body.encode("utf-8")
    return json.dumps(body).encode("utf-8")

