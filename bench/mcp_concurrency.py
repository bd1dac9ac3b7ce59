"""Many MCP clients at once over streamable HTTP: session times, per-call latency, errors.

    python bench/mcp_concurrency.py [--clients 50] [--recalls 10] [--remembers 2]
                                    [--seed-facts 300] [--embedder hash] [--deadline 300]
                                    [--floor] [--server-path DIR] [--json]

Starts ``tiermem --root TMP mcp --http PORT`` (with ``TIERMEM_MCP_TOKEN``) on 127.0.0.1 over a
store seeded with ``--seed-facts`` facts and a few daily notes, then opens ``--clients``
sessions at once (one asyncio task each, in this process). A client's session is: connect and
initialise, ``--recalls`` ``recall`` calls (no two queries alike) with ``--remembers``
``remember`` calls spread among them, close. Prints the median and p95 client session time
(connect to close), the median and p95 of each tool's round trip, the wall time, the error
count (tool error results and exceptions), how many of the remembered facts ``list_facts`` does
not show afterwards, and the CPU seconds the server and this process (the clients) spent
meanwhile (Linux): on a busy machine they say more than the wall time.

``--floor`` replaces every call with ``plan_active`` (one small SQL read): what the protocol
alone costs. ``--server-path DIR`` runs the server from another checkout (``git archive
<commit> tiermem | tar -x -C DIR``) to compare before and after. Bounded: the run stops after
``--deadline`` seconds (reported as errors), and the server is stopped in any case. The hash
embedder keeps the model out of the figures unless ``--embedder local`` is given;
``--embed-latency MS`` instead serves the hash embedder's vectors from a local OpenAI-compatible
endpoint (in this process) that answers each request after MS milliseconds: a remote embedder
(OpenAI, Ollama on another machine), where calls mostly wait.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tiermem import Memory
from tiermem.facts.store import NewFact
from tiermem.testing import HashEmbedder

TOPICS = ("Postgres", "Kubernetes", "dark mode", "Lisbon", "Rust", "espresso", "cycling", "the Q3 launch",
          "vim", "pagination", "the billing service", "Grafana")


_TLS = ssl.create_default_context()  # unused over http://, but each client would otherwise load the CA store


def _http_client(token: str) -> httpx2.AsyncClient:
    """An HTTP client like the SDK's default one, sending the bearer token."""
    return httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=httpx2.Timeout(30, read=300),
                              verify=_TLS)


class _EmbeddingsHandler(BaseHTTPRequestHandler):
    """``POST /v1/embeddings`` answered with the hash embedder's vectors after ``delay`` seconds."""

    delay = 0.0
    embedder = HashEmbedder()

    def do_POST(self) -> None:  # noqa: N802 - the name http.server calls
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        time.sleep(self.delay)  # the network and the remote model
        vectors = self.embedder.embed([str(t) for t in texts])
        data = [{"object": "embedding", "index": i, "embedding": [round(float(x), 6) for x in v]}
                for i, v in enumerate(vectors)]
        payload = json.dumps({"object": "list", "data": data, "model": body.get("model", "bench"),
                              "usage": {"prompt_tokens": 0, "total_tokens": 0}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args: Any) -> None:
        pass


def _remote_embedder(latency_ms: float) -> tuple[ThreadingHTTPServer, dict[str, str]]:
    """A local embeddings endpoint with ``latency_ms`` per request, and the settings that use it."""
    handler = type("Handler", (_EmbeddingsHandler,), {"delay": latency_ms / 1000})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, {"TIERMEM_EMBEDDER": "openai-compatible:bench-hash",
                    "TIERMEM_EMBEDDER_BASE_URL": f"http://127.0.0.1:{server.server_address[1]}/v1"}


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _seed(root: Path, embedder: str, facts: int, env: dict[str, str]) -> None:
    with Memory(root, embedder=env.get("TIERMEM_EMBEDDER", embedder), llm="none",
                embedder_base_url=env.get("TIERMEM_EMBEDDER_BASE_URL")) as mem:
        mem.facts.add_many([NewFact.checked(f"Seed fact {i}: the team uses {TOPICS[i % len(TOPICS)]} for project "
                                            f"{i % 17}", "knowledge", 0.9, None) for i in range(facts)])
        for i in range(10):
            mem.daily.append("Note", f"Talked about {TOPICS[i % len(TOPICS)]} and project {i}")


def _start_server(root: Path, embedder: str, port: int, token: str, log: Path,
                  server_path: str | None, extra: dict[str, str]) -> subprocess.Popen[bytes]:
    env = {**os.environ, "TIERMEM_EMBEDDER": embedder, "TIERMEM_LLM": "none", "TIERMEM_MCP_TOKEN": token, **extra}
    if server_path:  # another checkout's tiermem (e.g. the one before a change), first on the path
        env["PYTHONPATH"] = os.pathsep.join(p for p in (server_path, env.get("PYTHONPATH")) if p)
    with log.open("w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "tiermem.cli.main", "--root", str(root), "mcp",
                                 "--http", str(port)], env=env, stdout=out, stderr=subprocess.STDOUT,
                                cwd=root.parent)  # not the checkout: ``-m`` would import tiermem from it
    deadline = time.monotonic() + 60
    while True:
        if proc.poll() is not None:
            raise SystemExit(f"the server exited: {log.read_text()}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return proc
        except OSError:
            if time.monotonic() > deadline:
                proc.kill()
                raise SystemExit("the server did not start within 60 s") from None
            time.sleep(0.05)


class Run:
    """What the clients measured."""

    def __init__(self) -> None:
        self.sessions: list[float] = []
        self.calls: dict[str, list[float]] = {}
        self.errors: list[str] = []
        self.remembered: list[str] = []


def _plan(recalls: int, remembers: int) -> list[str]:
    """The calls of one session: the remembers spread evenly among the recalls."""
    calls = ["recall"] * recalls
    for j in range(remembers):
        calls.insert((j + 1) * len(calls) // (remembers + 1), "remember")
    return calls


async def _client(url: str, token: str, number: int, calls: list[str], run: Run, floor: bool) -> None:
    started = time.perf_counter()
    try:
        http = _http_client(token)
        async with http, Client(streamable_http_client(url, http_client=http), read_timeout_seconds=120) as client:
            for step, name in enumerate(calls):
                topic = TOPICS[(number + step) % len(TOPICS)]
                if floor:
                    name, args = "plan_active", {}
                elif name == "recall":
                    query = f"what does the team use for {topic} (client {number}, question {step})"
                    args: dict[str, Any] = {"query": query, "k": 10}  # no two alike: no cache helps
                else:
                    content = f"Client {number} step {step} decided to try {topic} next week"
                    args = {"content": content, "category": "context"}
                began = time.perf_counter()
                result = await client.call_tool(name, args)
                run.calls.setdefault(name, []).append(time.perf_counter() - began)
                if result.is_error:
                    run.errors.append(f"client {number} {name}: {result.content}")
                elif name == "remember":
                    run.remembered.append(args["content"])
        run.sessions.append(time.perf_counter() - started)
    except Exception as exc:  # counted, never fatal to the other clients
        run.errors.append(f"client {number}: {type(exc).__name__}: {exc}")


async def _clients(url: str, token: str, args: argparse.Namespace, run: Run) -> float:
    calls = _plan(args.recalls, args.remembers)
    started = time.perf_counter()
    with anyio.move_on_after(args.deadline) as scope:
        async with anyio.create_task_group() as group:
            for number in range(args.clients):
                group.start_soon(_client, url, token, number, calls, run, args.floor)
    if scope.cancelled_caught:
        run.errors.append(f"deadline of {args.deadline} s reached with {args.clients - len(run.sessions)} "
                          "sessions unfinished")
    return time.perf_counter() - started


async def _stored(url: str, token: str) -> set[str]:
    http = _http_client(token)
    async with http, Client(streamable_http_client(url, http_client=http), read_timeout_seconds=120) as client:
        result = await client.call_tool("list_facts", {})
        assert isinstance(result.structured_content, dict)
        return {fact["content"] for fact in result.structured_content["facts"]}


def _cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of process ``pid`` so far (Linux ``/proc``; None elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _quantile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def measure(args: argparse.Namespace) -> dict[str, Any]:
    token = secrets.token_urlsafe(24)
    remote, extra = _remote_embedder(args.embed_latency) if args.embed_latency is not None else (None, {})
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "mem"
        _seed(root, args.embedder, args.seed_facts, extra)
        port = _free_port()
        proc = _start_server(root, args.embedder, port, token, Path(tmp) / "server.log", args.server_path, extra)
        url = f"http://127.0.0.1:{port}/mcp"
        run = Run()
        try:
            anyio.run(_stored, url, token)  # warm up: the embedder and the vector index are loaded
            server_cpu, client_cpu = _cpu_seconds(proc.pid), time.process_time()
            wall = anyio.run(_clients, url, token, args, run)
            server_after = _cpu_seconds(proc.pid)
            client_cpu = time.process_time() - client_cpu
            lost = set(run.remembered) - anyio.run(_stored, url, token)
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=15)
            if remote is not None:
                remote.shutdown()
    return {
        "clients": args.clients, "recalls": args.recalls, "remembers": args.remembers,
        "seed_facts": args.seed_facts, "wall_s": round(wall, 2),
        "embedder": args.embedder if args.embed_latency is None else f"remote, {args.embed_latency:g} ms a request",
        "session_median_s": round(statistics.median(run.sessions), 3) if run.sessions else None,
        "session_p95_s": round(_quantile(run.sessions, 0.95), 3),
        "calls": {name: {"n": len(times), "median_ms": round(_quantile(times, 0.5) * 1000, 1),
                         "p95_ms": round(_quantile(times, 0.95) * 1000, 1)} for name, times in run.calls.items()},
        "errors": len(run.errors), "error_samples": run.errors[:5], "remembered_missing": len(lost),
        "server_cpu_s": None if server_cpu is None or server_after is None else round(server_after - server_cpu, 2),
        "client_cpu_s": round(client_cpu, 2), "floor": args.floor,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--recalls", type=int, default=10)
    parser.add_argument("--remembers", type=int, default=2)
    parser.add_argument("--seed-facts", type=int, default=300)
    parser.add_argument("--embedder", default="hash")
    parser.add_argument("--embed-latency", type=float, default=None, metavar="MS",
                        help="embed through a local OpenAI-compatible endpoint answering after MS ms")
    parser.add_argument("--deadline", type=float, default=300.0)
    parser.add_argument("--floor", action="store_true", help="call plan_active instead (the protocol's cost)")
    parser.add_argument("--server-path", default=None, metavar="DIR",
                        help="run the server from the tiermem package under DIR (an older checkout, to compare)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    report = measure(args)
    if args.json:
        print(json.dumps(report, indent=2))
        return
    what = ("plan_active calls (--floor)" if args.floor
            else f"{report['recalls']} recalls + {report['remembers']} remembers")
    print(f"{report['clients']} clients x ({what}), "
          f"{report['seed_facts']} seeded facts, embedder {report['embedder']}: wall {report['wall_s']} s")
    print(f"client session: median {report['session_median_s']} s, p95 {report['session_p95_s']} s")
    for name, row in report["calls"].items():
        print(f"{name:>9}: {row['n']} calls, median {row['median_ms']} ms, p95 {row['p95_ms']} ms")
    print(f"errors: {report['errors']}; remembered facts missing afterwards: {report['remembered_missing']}")
    print(f"CPU meanwhile: server {report['server_cpu_s']} s, clients {report['client_cpu_s']} s")
    for sample in report["error_samples"]:
        print(f"  {sample}")


if __name__ == "__main__":
    main()
