"""The save a coding-agent hook makes (issue 23, P8), in a fresh process: read a Claude Code
transcript from the session's cursor, journal the new messages in the project scope, queue them.

    python bench/save_transcript.py [--runs 5] [--messages 2000] [--json]

Cases, each a new ``python`` process timed from start to exit (wall and CPU seconds), medians of
``--runs``, beside ``python -c pass``:

- ``first``: a new session whose transcript already holds ``--messages`` messages (all read, from
  position 0) — the most a single save does;
- ``turn``: the same transcript after one more turn (4 messages) — what a Stop hook does after
  each turn of a long session.

The store is opened as a hook opens it (no LLM, no queue replay, no shutdown flush,
``embed_on_write = false``). :func:`save_process` is the timed unit; :func:`claude_transcript`
writes the transcript (user prompts, tool calls with ~600-character results, replies, and the
client's bookkeeping lines between them). Printed: the internal split of the last run (imports,
opening the store, the save) too.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

_SAVE = """
import sys, time
started = time.perf_counter()
from pathlib import Path
from tiermem import Memory
from tiermem.agents.save import save_transcript
from tiermem.agents.session_state import SessionState
imported = time.perf_counter()
root, transcript, session = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
with Memory(root, llm="none", user_id="project-0123456789abcdef", agent_name="coding", queue_replay=False,
            shutdown_flush_seconds=0, embed_on_write=False) as mem:
    opened = time.perf_counter()
    state = SessionState.load(root, "claude-code", session)
    report = save_transcript(mem, "claude-code", session, transcript, state)
    saved = time.perf_counter()
print(f"{imported - started:.3f} {opened - imported:.3f} {saved - opened:.3f} {report.read} {report.journaled}")
"""


def claude_transcript(path: Path, messages: int, start: int = 0) -> Path:
    """Append ``messages`` messages (in turns of 4) of a Claude Code session to ``path``."""
    lines: list[dict[str, Any]] = []
    for n in range(start, start + messages, 4):
        tool = f"toolu_{n:06d}"
        lines += [
            {"type": "user", "message": {"role": "user", "content": f"Look at services/mod_{n}.py: why does"
                                         f" the retry loop of the billing client {n} give up early?"}},
            {"type": "assistant", "message": {"role": "assistant", "model": "claude-opus-4-8", "content": [
                {"type": "tool_use", "id": tool, "name": "Read",
                 "input": {"file_path": f"/repo/services/mod_{n}.py"}}]}},
            {"type": "user", "message": {"role": "user", "content": [
                {"tool_use_id": tool, "type": "tool_result", "content": "def handler():\n    return 42\n" * 20}]}},
            {"type": "attachment", "attachment": {"type": "hook_success", "hookName": "PostToolUse"}},
            {"type": "assistant", "message": {"role": "assistant", "model": "claude-opus-4-8", "content": [
                {"type": "thinking", "thinking": "the loop counts attempts from one"},
                {"type": "text", "text": f"mod_{n}: the loop counts from 1, so it stops one try early."}]}},
        ]
    with path.open("a", encoding="utf-8") as handle:
        handle.write("".join(json.dumps(line) + "\n" for line in lines))
    return path


def save_process(root: Path, transcript: Path, session: str) -> tuple[float, float, list[str]]:
    """Wall and CPU seconds of one fresh process saving ``transcript`` for ``session``, and what it printed."""
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", _SAVE, str(root), str(transcript), session],
                          capture_output=True, text=True, check=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done.stdout.split()


def _baseline() -> tuple[float, float]:
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.perf_counter() - started, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def run(runs: int, messages: int) -> dict[str, Any]:
    results: dict[str, Any] = {"baseline": [], "first": [], "turn": []}
    split: dict[str, list[str]] = {}
    with tempfile.TemporaryDirectory(prefix="tiermem-save-") as folder:
        base = Path(folder)
        full = claude_transcript(base / "full.jsonl", messages)
        for i in range(runs):
            results["baseline"].append(_baseline())
            root = base / f"root{i}"
            shutil.rmtree(root, ignore_errors=True)
            wall, cpu, split["first"] = save_process(root, full, f"first-{i}")
            results["first"].append((wall, cpu))
            grown = base / f"turn{i}.jsonl"
            shutil.copy(full, grown)
            claude_transcript(grown, 4, start=messages)
            wall, cpu, split["turn"] = save_process(root, grown, f"first-{i}")  # the same session, one turn on
            results["turn"].append((wall, cpu))
    out: dict[str, Any] = {}
    for case, samples in results.items():
        walls, cpus = [s[0] for s in samples], [s[1] for s in samples]
        out[case] = {"wall": statistics.median(walls), "cpu": statistics.median(cpus), "min": min(walls),
                     "max": max(walls)}
        if case in split:
            imported, opened, saved, read, journaled = split[case]
            out[case].update(imports=float(imported), open=float(opened), save=float(saved), read=int(read),
                             journaled=int(journaled))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--messages", type=int, default=2000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    out = run(args.runs, args.messages)
    if args.json:
        print(json.dumps(out, indent=2))
        return
    for case, row in out.items():
        line = (f"{case:9s} wall {row['wall']:.3f} s (min {row['min']:.3f}, max {row['max']:.3f}),"
                f" cpu {row['cpu']:.3f} s")
        if "save" in row:
            line += (f"  [imports {row['imports']:.3f}, open {row['open']:.3f}, save {row['save']:.3f}:"
                     f" {row['read']} read, {row['journaled']} journaled]")
        print(line)


if __name__ == "__main__":
    main()
