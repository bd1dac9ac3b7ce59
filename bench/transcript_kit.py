"""Building blocks for the synthetic coding-agent transcripts (dev tool, not part of tiermem).

A :class:`Session` plays an agent working on a small in-memory repository: file reads show the
file as it is at that moment (numbered like ``cat -n``), edits really change it (and fail when
the old text is not there), greps really search it. Command outputs are written by the scenario.
Everything is deterministic: tool call ids are derived from a hash of the transcript name and a
counter. One builder emits OpenAI-style or Anthropic-style messages.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any

_B62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

# tool names and argument names per shape (the OpenAI agent uses snake_case tools, the
# Anthropic one the Claude Code names)
_TOOLS = {
    "openai": {
        "read": ("read_file", "path"),
        "grep": ("grep", "path"),
        "ls": ("list_dir", "path"),
        "edit": ("edit_file", "path"),
        "write": ("write_file", "path"),
        "run": ("run_command", "command"),
    },
    "anthropic": {
        "read": ("Read", "file_path"),
        "grep": ("Grep", "path"),
        "ls": ("LS", "path"),
        "edit": ("Edit", "file_path"),
        "write": ("Write", "file_path"),
        "run": ("Bash", "command"),
    },
}


@dataclass(frozen=True)
class Call:
    name: str
    args: dict[str, Any]
    output: str
    is_error: bool


class Session:
    """A transcript under construction plus the repository the agent works on."""

    def __init__(self, name: str, shape: str, root: str, files: dict[str, str]) -> None:
        self.name = name
        self.shape = shape
        self.root = root
        self.files = dict(files)
        self.messages: list[dict[str, Any]] = []
        self._counter = 0

    # -- messages -------------------------------------------------------------------------
    def system(self, text: str) -> None:
        self.messages.append({"role": "system", "content": text})

    def user(self, text: str) -> None:
        self.messages.append({"role": "user", "content": text})

    def say(self, text: str) -> None:
        if self.shape == "anthropic":
            self.messages.append({"role": "assistant", "content": [{"type": "text", "text": text}]})
        else:
            self.messages.append({"role": "assistant", "content": text})

    def do(self, text: str | None, *calls: Call) -> None:
        """One assistant message making ``calls`` (in parallel), then their results."""
        ids = [self._next_id() for _ in calls]
        if self.shape == "anthropic":
            content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
            for call_id, call in zip(ids, calls, strict=True):
                content.append({"type": "tool_use", "id": call_id, "name": call.name, "input": call.args})
            self.messages.append({"role": "assistant", "content": content})
            results = []
            for call_id, call in zip(ids, calls, strict=True):
                block: dict[str, Any] = {"type": "tool_result", "tool_use_id": call_id, "content": call.output}
                if call.is_error:
                    block["is_error"] = True
                results.append(block)
            self.messages.append({"role": "user", "content": results})
            return
        tool_calls = [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": call.name, "arguments": json.dumps(call.args)},
            }
            for call_id, call in zip(ids, calls, strict=True)
        ]
        self.messages.append({"role": "assistant", "content": text, "tool_calls": tool_calls})
        for call_id, call in zip(ids, calls, strict=True):
            self.messages.append({"role": "tool", "tool_call_id": call_id, "content": call.output})

    def _next_id(self) -> str:
        self._counter += 1
        digest = hashlib.sha256(f"{self.name}:{self._counter}".encode()).digest()
        if self.shape == "anthropic":
            number = int.from_bytes(digest[:17], "big")
            chars = []
            for _ in range(22):
                number, rest = divmod(number, 62)
                chars.append(_B62[rest])
            return "toolu_01" + "".join(chars)
        return "call_" + digest.hex()[:24]

    # -- tools ------------------------------------------------------------------------------
    def _tool(self, kind: str) -> tuple[str, str]:
        return _TOOLS[self.shape][kind]

    def read(self, path: str) -> Call:
        name, arg = self._tool("read")
        text = self.files.get(path)
        if text is None:
            return Call(name, {arg: path}, f"Error: file not found: {path}", True)
        lines = text.rstrip("\n").split("\n")
        numbered = "\n".join(f"{n:>6}\t{line}" for n, line in enumerate(lines, start=1))
        return Call(name, {arg: path}, numbered, False)

    def grep(self, pattern: str, path: str = ".") -> Call:
        name, arg = self._tool("grep")
        regex = re.compile(pattern)
        hits = []
        for file_path in sorted(self.files):
            if path not in (".", "") and not file_path.startswith(path.rstrip("/")):
                continue
            for n, line in enumerate(self.files[file_path].split("\n"), start=1):
                if regex.search(line):
                    hits.append(f"{file_path}:{n}:{line}")
        return Call(name, {"pattern": pattern, arg: path}, "\n".join(hits) or "No matches found", False)

    def ls(self, path: str = ".") -> Call:
        name, arg = self._tool("ls")
        prefix = "" if path in (".", "") else path.rstrip("/") + "/"
        entries = sorted(p[len(prefix) :] for p in self.files if p.startswith(prefix))
        listing = "\n".join(f"- {entry}" for entry in entries)
        return Call(name, {arg: path}, f"{self.root}/{prefix}\n{listing}", False)

    def edit(self, path: str, old: str, new: str) -> Call:
        name, arg = self._tool("edit")
        args = {arg: path, "old_string": old, "new_string": new}
        text = self.files.get(path)
        if text is None:
            return Call(name, args, f"Error: file not found: {path}", True)
        count = text.count(old)
        if count == 0:
            message = (
                f"Error: old_string not found in {path}. Make sure it matches the file exactly, "
                "including whitespace and indentation."
            )
            if self.shape == "anthropic":
                message = "<tool_use_error>String to replace not found in file.\nString: " + old + "</tool_use_error>"
            return Call(name, args, message, True)
        if count > 1:
            return Call(
                name,
                args,
                f"Error: old_string matches {count} places in {path}; give more context to make it unique.",
                True,
            )
        self.files[path] = text.replace(old, new, 1)
        start = text[: text.index(old)].count("\n") + 1
        lines = self.files[path].split("\n")
        window = lines[max(0, start - 3) : start + new.count("\n") + 3]
        snippet = "\n".join(f"{n:>6}\t{line}" for n, line in enumerate(window, start=max(1, start - 2)))
        return Call(
            name,
            args,
            f"The file {path} has been updated. Here's the result of running `cat -n` on a snippet:\n{snippet}",
            False,
        )

    def write(self, path: str, text: str) -> Call:
        name, arg = self._tool("write")
        existed = path in self.files
        self.files[path] = text
        verb = "Overwrote" if existed else "Created"
        return Call(name, {arg: path, "content": text}, f"{verb} {path} ({text.count(chr(10))} lines)", False)

    def run(self, command: str, output: str, code: int = 0) -> Call:
        name, arg = self._tool("run")
        body = output.rstrip("\n")
        if self.shape == "openai":
            body = f"{body}\n\n[exit code: {code}]" if body else f"[exit code: {code}]"
        elif code:
            body = f"{body}\n\nExit code {code}"
        return Call(name, {arg: command}, body, code != 0)


def pytest_output(
    root: str,
    rows: list[tuple[str, str]],
    failures: list[tuple[str, str]],
    summary: list[str],
    seconds: float,
    platform: str = "linux -- Python 3.11.7, pytest-8.3.3, pluggy-1.5.0",
) -> str:
    """A pytest run: ``rows`` are (test file, result letters), ``failures`` (test name, body),
    ``summary`` the "FAILED ..." lines."""
    total = sum(len(letters) for _, letters in rows)
    failed = sum(letters.count("F") for _, letters in rows)
    errored = sum(letters.count("E") for _, letters in rows)
    out = [
        "=" * 29 + " test session starts " + "=" * 30,
        f"platform {platform}",
        f"rootdir: {root}",
        "configfile: pyproject.toml",
        f"collected {total} items",
        "",
    ]
    done = 0
    for path, letters in rows:
        done += len(letters)
        line = f"{path} {letters}"
        out.append(f"{line:<73}[{round(100 * done / total):>3}%]")
    if failures:
        out += ["", "=" * 35 + " FAILURES " + "=" * 35]
        for name, body in failures:
            bar = "_" * max(1, (78 - len(name) - 2) // 2)
            out += [f"{bar} {name} {bar}", "", body.rstrip("\n"), ""]
        out.append("=" * 27 + " short test summary info " + "=" * 28)
        out += summary
    parts = []
    if failed:
        parts.append(f"{failed} failed")
    parts.append(f"{total - failed - errored} passed")
    if errored:
        parts.append(f"{errored} error{'s' if errored > 1 else ''}")
    tail = f" {', '.join(parts)} in {seconds:.2f}s "
    pad = (80 - len(tail)) // 2
    out.append("=" * pad + tail + "=" * (80 - pad - len(tail)))
    return "\n".join(out)
