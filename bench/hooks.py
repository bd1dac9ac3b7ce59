"""P8: the coding-agent hooks as a client runs them, whole process, wall time.

    python bench/hooks.py [--runs 20] [--records 10000] [--messages 2000] [--embedder local]
                          [--cache DIR] [--only CASE,...] [--json]

Each run is a fresh ``tiermem --root ROOT hook claude-code EVENT`` process with the event's JSON
payload on stdin (as Claude Code sends it), timed from ``Popen`` to its exit, with its CPU time
(user + system). Right before each run the bench times ``python -c pass`` (the hook's own
interpreter: the baseline the differences are taken from) and ``python3 -c pass`` (``python3`` on
PATH), so a change of the machine's load hits both; medians of ``--runs``. The root is built once
under ``--cache``: ``--records`` Daily records in the project scope of a git repository (100 per
day), 37 facts in each of the person and project scopes, every item embedded with ``--embedder``
(the local MiniLM by default).

- ``prompt_up``: ``UserPromptSubmit`` with the resident server running and the repository's
  memory loaded (as a session-start hook leaves it); a new session id per run, so nothing was
  given before, and another question each run (:func:`prompt`); how many runs injected
  something is reported (a hook past its budget injects nothing);
- ``prompt_down``: the same with no server. The bench holds ``server.lock`` meanwhile, so the hook
  finds "a server is starting" and starts none: what is timed is the hook alone;
- ``start``: ``SessionStart`` (``source=startup``) with the server running; ``start_down``:
  without (as ``prompt_down``), so the hook builds the text itself;
- ``stop``: ``Stop`` of a new session whose transcript holds ``--messages`` messages in Claude
  Code's JSONL shape (user prompts, assistant text, tool_use and tool_result, and the client's
  bookkeeping lines between them), the server running, on a copy of the root (each save adds
  ``--messages`` records). After each run the bench waits until the transcript is journaled to its
  end and every new record has its vector (by the hook or the server), so no run overlaps the work
  of the one before; ``stop_down``: no server (the hook saves by itself, within its budget: the
  messages it got to are reported).

Printed: per case the median, min and max seconds, the median CPU seconds of the hook (and of the
server meanwhile, for ``prompt_up`` and ``start``: load-independent figures on a busy machine), the
baselines and the difference, with the targets (prompt <= 0.35 s and start <= 0.5 s over the baseline; stop <= 1 s).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

TARGETS = {"prompt_up": ("over_baseline", 0.35), "prompt_down": ("over_baseline", 0.35),
           "start": ("over_baseline", 0.5), "start_down": ("over_baseline", 0.5), "stop": ("wall", 1.0),
           "stop_down": ("wall", 1.0)}
CASES = tuple(TARGETS)
DOWN = ("prompt_down", "start_down", "stop_down")  # no server: the hook does the work itself
PROMPT = "How do we run the database migrations of the billing service before a deploy?"
TOPICS = ["billing", "ledger", "invoices", "auth", "search", "cache", "queue", "deploy", "metrics", "parser",
          "scheduler", "exports", "webhooks", "payments", "profiles", "sessions", "uploads", "reports"]
VERBS = ["fixed", "refactored", "tested", "profiled", "documented", "reviewed", "renamed", "split", "merged",
         "debugged"]
ASK = ["fix", "refactor", "test", "profile", "document", "review", "rename", "split", "merge", "debug"]
THINGS = ["the retry loop", "the connection pool", "a flaky test", "the migration script", "the config loader",
          "the JSON encoder", "the rate limiter", "the error messages", "the CLI flags", "the index build"]


def prompt(i: int) -> str:
    """The prompt of run ``i``: a question about the journal's subjects, another each run (so the
    query is embedded each time; its words recur, as in a real project)."""
    rng = random.Random(i)
    return (f"How do we {rng.choice(ASK)} {rng.choice(THINGS)} of the "
            f"{rng.choice(TOPICS)} service before a deploy?" if i else PROMPT)


def _record(rng: random.Random, i: int) -> str:
    topic, verb, thing = rng.choice(TOPICS), rng.choice(VERBS), rng.choice(THINGS)
    return (f"user: we {verb} {thing} in services/{topic}/mod_{i % 97}.py; "
            f"next time check {rng.choice(THINGS)} of {rng.choice(TOPICS)} first (note {i})")


def _git_repo(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@x", "GIT_COMMITTER_NAME": "b",
           "GIT_COMMITTER_EMAIL": "b@x"}
    subprocess.run(["git", "init", "-q", str(folder)], check=True, env=env)
    (folder / "README.md").write_text("bench repository\n")
    subprocess.run(["git", "-C", str(folder), "add", "README.md"], check=True, env=env)
    subprocess.run(["git", "-C", str(folder), "commit", "-q", "-m", "first"], check=True, env=env)


def build(folder: Path, records: int, embedder: str) -> tuple[Path, Path]:
    """The root and the repository (built once; a ``done`` file marks a finished build)."""
    root, repo = folder / "root", folder / "repo"
    if (folder / "done").exists():
        return root, repo
    shutil.rmtree(folder, ignore_errors=True)
    _git_repo(repo)
    from datetime import UTC, datetime, timedelta

    from tiermem import Memory
    from tiermem.agents.project import coding_scopes
    from tiermem.config import load_settings
    from tiermem.facts.store import NewFact

    started = time.perf_counter()
    scopes = coding_scopes(root, repo, load_settings(root))
    rng = random.Random(23)
    with Memory(root, embedder=embedder, user_id=scopes.project.user_id, agent_name=scopes.project.agent_name,
                max_facts=10_000) as project:
        first = datetime.now(UTC) - timedelta(days=records // 100 + 1)
        for day in range(0, records, 100):
            lines = [_record(rng, i) for i in range(day, min(day + 100, records))]
            project.daily.append("Conversation", lines, at=first + timedelta(days=day // 100))
        project.facts.add_many([NewFact(f"The {t} service is deployed with make deploy-{t} after its migrations",
                                        "knowledge", 0.9) for t in TOPICS] +
                               [NewFact(f"Tests of {t} need the {t} fixture database", "context", 0.8)
                                for t in TOPICS])
        project.facts.add("Database migrations of billing run with 'make migrate SERVICE=billing' before a deploy",
                          "knowledge", 0.95)
        assert project.search(PROMPT, k=3, min_score=0)  # embeds everything, writes the index file
    with Memory(root, embedder=embedder, user_id=scopes.person.user_id, agent_name=scopes.person.agent_name) as person:
        person.facts.add_many([NewFact(f"Prefers {t} code reviewed before merging", "preference", 0.8)
                               for t in TOPICS])
        person.facts.add("Always indents with tabs", "preference", 0.9)
        assert person.search(PROMPT, k=3, min_score=0)
    (folder / "done").write_text(f"built in {time.perf_counter() - started:.1f} s\n")
    return root, repo


def transcript(path: Path, session: str, cwd: Path, messages: int) -> Path:
    """A Claude Code JSONL transcript of ``messages`` messages (plus bookkeeping lines)."""
    rng = random.Random(5)
    parent: str | None = None
    lines: list[dict[str, Any]] = [{"type": "queue-operation", "operation": "enqueue", "sessionId": session,
                                    "timestamp": "2026-11-28T06:00:00.000Z", "content": "start"}]

    def entry(kind: str, message: dict[str, Any], **extra: Any) -> None:
        nonlocal parent
        uid = str(uuid.UUID(int=rng.getrandbits(128)))
        lines.append({"parentUuid": parent, "isSidechain": False, "type": kind, "message": message, "uuid": uid,
                      "timestamp": "2026-11-28T06:00:01.000Z", "userType": "external", "entrypoint": "cli",
                      "cwd": str(cwd), "sessionId": session, "version": "2.1.197", "gitBranch": "master", **extra})
        parent = uid

    n = 0
    while n < messages:
        entry("user", {"role": "user", "content": f"Please look at {_record(rng, n)}"}, permissionMode="default")
        tool = f"toolu_{n:06d}"
        entry("assistant", {"id": f"msg_{n}", "type": "message", "role": "assistant", "model": "claude-opus-4-8",
                            "content": [{"type": "tool_use", "id": tool, "name": "Read",
                                         "input": {"file_path": f"/repo/services/mod_{n % 97}.py"}}],
                            "stop_reason": "tool_use", "usage": {"input_tokens": 10, "output_tokens": 5}})
        entry("user", {"role": "user", "content": [{"tool_use_id": tool, "type": "tool_result",
                                                    "content": "def handler():\n    return 42\n" * 20}]})
        lines.append({"parentUuid": parent, "isSidechain": False, "type": "attachment",
                      "attachment": {"type": "hook_success", "hookName": "PostToolUse"}, "sessionId": session})
        entry("assistant", {"id": f"msg_{n}b", "type": "message", "role": "assistant", "model": "claude-opus-4-8",
                            "content": [{"type": "text", "text": f"Done: {_record(rng, n + 1)}."}],
                            "stop_reason": "end_turn", "usage": {"input_tokens": 10, "output_tokens": 5}})
        n += 4
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def _tiermem() -> list[str]:
    exe = Path(sys.executable).with_name("tiermem")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "tiermem.cli.main"]


@dataclass
class Sample:
    wall: float  # seconds from Popen to exit
    cpu: float  # user + system seconds of the process
    saved: int | None = None  # stop_down: messages the hook journaled within its budget
    server_cpu: float | None = None  # prompt_up, start: CPU seconds the server spent meanwhile
    injected: bool | None = None  # prompts: the hook printed context (False: nothing, e.g. past its budget)


def _timed(args: list[str], payload: dict[str, Any] | None, env: dict[str, str]) -> tuple[Sample, bytes]:
    data = b"" if payload is None else json.dumps(payload).encode()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(args, input=data, capture_output=True, env=env, check=False)
    took = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{args} exited {done.returncode}: {done.stderr.decode(errors='replace')[-2000:]}")
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return Sample(took, cpu), done.stdout


def _hook(root: Path, event: str) -> list[str]:
    return [*_tiermem(), "--root", str(root), "hook", "claude-code", event]


def _payload(event: str, repo: Path, session: str, **extra: Any) -> dict[str, Any]:
    return {"session_id": session, "transcript_path": str(repo / f"{session}.jsonl"), "cwd": str(repo),
            "hook_event_name": event, **extra}


def _wait_until(check: Callable[[], bool], seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.2)


def _start_server(root: Path, repo: Path, env: dict[str, str]) -> None:
    """A new server (one left running may hold other code or settings), as a session's start hook
    leaves it: running, the repository's memory loaded, one session started (not timed)."""
    from tiermem.agents import server_client

    _stop_server(root)
    os.environ.update(env)
    server_client.ensure_server(root, str(repo))
    _wait_until(lambda: server_client.healthy(root), 300, "the resident server")
    _timed(_hook(root, "SessionStart"), _payload("SessionStart", repo, "bench-warm", source="startup"), env)


def _stop_server(root: Path) -> None:
    import signal

    from tiermem.agents import server_client

    info = server_client.read_info(root)
    if info is not None and server_client.pid_alive(info.pid):
        os.kill(info.pid, signal.SIGTERM)
        _wait_until(lambda: not server_client.lock_held(root), 300, "the server to stop")


def _saved(root: Path, repo: Path, session: str, messages: int, embedder: str) -> bool:
    """The session's transcript is journaled to its end and every new record has its vector."""
    from tiermem import Memory
    from tiermem.agents.project import coding_scopes
    from tiermem.agents.session_state import SessionState
    from tiermem.config import load_settings

    if SessionState.load(root, "claude-code", session).cursor.messages < messages:
        return False
    user = coding_scopes(root, repo, load_settings(root)).project.user_id
    with Memory(root, embedder=embedder, user_id=user, agent_name="coding", queue_replay=False,
                shutdown_flush_seconds=0, embed_on_write=False) as mem:
        return mem.vector_status().missing == 0


def run_case(case: str, root: Path, repo: Path, args: argparse.Namespace,
             env: dict[str, str]) -> dict[str, list[Sample]]:
    """``args.runs`` runs of the case, each right after a baseline run (load changes hit both)."""
    out: dict[str, list[Sample]] = {"baseline": [], "python3": [], case: []}
    python3 = shutil.which("python3") or sys.executable
    for i in range(args.runs):
        out["baseline"].append(_timed([sys.executable, "-c", "pass"], None, env)[0])
        out["python3"].append(_timed([python3, "-c", "pass"], None, env)[0])
        session = f"bench-{case}-{uuid.uuid4().hex[:12]}"
        server_before = _server_cpu(root)
        if case in ("prompt_up", "prompt_down"):
            sample, shown = _timed(_hook(root, "UserPromptSubmit"), _payload(
                "UserPromptSubmit", repo, session, prompt=prompt(i), permission_mode="default"), env)
            sample.injected = b"additionalContext" in shown
        elif case in ("start", "start_down"):
            sample = _timed(_hook(root, "SessionStart"), _payload("SessionStart", repo, session, source="startup"),
                            env)[0]
        else:
            transcript(repo / f"{session}.jsonl", session, repo, args.messages)
            sample = _timed(_hook(root, "Stop"), _payload("Stop", repo, session, stop_hook_active=False), env)[0]
            if case == "stop":
                _wait_until(partial(_saved, root, repo, session, args.messages, args.embedder), 900,
                            "the save and its embedding")
            else:  # the hook saved what its budget allowed; the rest would be the next save's
                from tiermem.agents.session_state import SessionState

                sample.saved = SessionState.load(root, "claude-code", session).cursor.messages
            (repo / f"{session}.jsonl").unlink()
        if case in ("prompt_up", "start") and server_before is not None:
            after = _server_cpu(root)
            sample.server_cpu = None if after is None else after - server_before
        out[case].append(sample)
    return out


def _server_cpu(root: Path) -> float | None:
    """User + system CPU seconds of the running server so far (Linux ``/proc``); None without."""
    from tiermem.agents.server_client import read_info

    info = read_info(root)
    try:
        fields = Path(f"/proc/{info.pid}/stat").read_text().rpartition(")")[2].split() if info else []
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK") if fields else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--messages", type=int, default=2000)
    parser.add_argument("--embedder", default="local")
    parser.add_argument("--cache", default="/tmp/tiermem-bench-hooks")
    parser.add_argument("--only", default=",".join(CASES), help="comma-separated cases")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    folder = Path(args.cache) / f"r{args.records}-{args.embedder.replace('/', '_').replace(':', '_')}"
    root, repo = build(folder, args.records, args.embedder)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIERMEM_") or k == "TIERMEM_CACHE_DIR"}
    env["TIERMEM_EMBEDDER"] = args.embedder
    results: dict[str, dict[str, list[Sample]]] = {}
    for case in [c for c in args.only.split(",") if c in CASES]:
        results[case] = measure(case, folder, root, repo, env, args)
    report(results, args, folder)


def measure(case: str, folder: Path, root: Path, repo: Path, env: dict[str, str],
            args: argparse.Namespace) -> dict[str, list[Sample]]:
    """One case on its root: ``stop`` on a fresh copy (its saves grow the journal), the others on
    the built root; the server up, or (``prompt_down``) kept from starting by the bench holding
    its lock."""
    if case in ("stop", "stop_down"):
        scratch = folder / "scratch"
        shutil.rmtree(scratch, ignore_errors=True)
        shutil.copytree(root, scratch / "root", symlinks=True)
        (scratch / "root" / "agents" / "server.json").unlink(missing_ok=True)
        root = scratch / "root"
    try:
        if case in DOWN:
            from filelock import FileLock

            from tiermem.agents.server_client import ServerFiles

            _stop_server(root)
            with FileLock(ServerFiles.of(root).lock, timeout=0):
                return run_case(case, root, repo, args, env)
        _start_server(root, repo, env)
        return run_case(case, root, repo, args, env)
    finally:
        _stop_server(root)
        if case in ("stop", "stop_down"):
            shutil.rmtree(folder / "scratch", ignore_errors=True)


def _median(samples: list[Sample], what: str) -> float:
    return round(float(statistics.median(getattr(s, what) for s in samples)), 3)


def report(results: dict[str, dict[str, list[Sample]]], args: argparse.Namespace, folder: Path) -> None:
    out: dict[str, Any] = {"runs": args.runs, "records": args.records, "messages": args.messages,
                           "embedder": args.embedder, "cores": os.cpu_count(), "load": os.getloadavg(),
                           "python3": shutil.which("python3"), "build": (folder / "done").read_text().strip(),
                           "cases": {}}
    for case, samples in results.items():
        hook, base, python3 = samples[case], samples["baseline"], samples["python3"]
        row: dict[str, Any] = {
            "median_s": _median(hook, "wall"), "min_s": round(min(s.wall for s in hook), 3),
            "max_s": round(max(s.wall for s in hook), 3), "cpu_s": _median(hook, "cpu"),
            "baseline_s": _median(base, "wall"), "baseline_cpu_s": _median(base, "cpu"),
            "python3_s": _median(python3, "wall")}
        if hook[0].saved is not None:
            row["saved_messages_median"] = statistics.median(s.saved or 0 for s in hook)
        if hook[0].server_cpu is not None:
            row["server_cpu_s"] = round(float(statistics.median(s.server_cpu or 0.0 for s in hook)), 3)
        if hook[0].injected is not None:
            row["injected"] = f"{sum(1 for s in hook if s.injected)}/{len(hook)}"
        row["over_baseline_s"] = round(row["median_s"] - row["baseline_s"], 3)
        row["over_python3_s"] = round(row["median_s"] - row["python3_s"], 3)
        kind, target = TARGETS[case]
        value = row["over_baseline_s"] if kind == "over_baseline" else row["median_s"]
        row.update(target_s=target, target_is=kind, met=value <= target)
        out["cases"][case] = row
    if args.json:
        print(json.dumps(out, indent=1))
        return
    print(f"runs {args.runs}, records {args.records}, embedder {args.embedder}, load {out['load']}")
    for case, row in out["cases"].items():
        print(f"{case:12} median {row['median_s']:.3f} s (min {row['min_s']:.3f}, max {row['max_s']:.3f};"
              f" cpu {row['cpu_s']:.3f} s); baseline {row['baseline_s']:.3f} s, over it {row['over_baseline_s']:.3f} s;"
              f" target {row['target_s']} s {row['target_is']}: {'met' if row['met'] else 'MISSED'}")


if __name__ == "__main__":
    main()
