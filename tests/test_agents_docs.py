"""The shell commands and settings docs/coding-agents.md and the README's coding-agent section
show work as written, in order, with the default embedder: in a temporary HOME (so ``~`` and the
default memory root ``~/.local/share/tiermem`` are the reader's), with ``~/src/shop`` a git
repository, ``tiermem`` this virtualenv's. Between setting up and looking, a Claude Code session
is played by running the hook commands setup wrote, with a transcript holding a long tool result
(which the documented ``tool_result_max_chars`` cuts). ``tiermem ui`` runs until it serves.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import tomllib
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from agent_clients import git_repo, model_cache, resident_server_stopped, shared_model_cache  # noqa: F401

from tiermem.agents.project import open_scopes
from tiermem.config import load_settings
from tiermem.tiers.markdown import parse_records

DOCS = Path(__file__).parent.parent
BLOCK = re.compile(r"^```(\w*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
BIN = Path(sys.executable).parent
pytestmark = pytest.mark.usefixtures("shared_model_cache")


def blocks(document: str, language: str) -> list[str]:
    return [code for lang, code in BLOCK.findall((DOCS / document).read_text(encoding="utf-8")) if lang == language]


def readme_block() -> str:
    section = (DOCS / "README.md").read_text(encoding="utf-8").split("## Use it from Claude Code", 1)[1]
    return BLOCK.findall(section.split("\n## ", 1)[0])[0][1]


def _shell(script: str, home: Path) -> str:
    env = {"PATH": f"{BIN}:/usr/bin:/bin", "HOME": str(home), "LANG": "C.UTF-8",
           "TIERMEM_CACHE_DIR": os.environ["TIERMEM_CACHE_DIR"]}
    done = subprocess.run(["bash", "-e", "-c", script], cwd=home, env=env, capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, f"{script}\n{done.stdout}\n{done.stderr}"
    return done.stdout


def _ui(line: str, home: Path) -> None:
    """Run ``tiermem ... ui`` until it says where it serves and answers there, then stop it (a busy
    port 8767 on this machine is a one-line refusal naming --port: the command itself was fine)."""
    env = {"PATH": f"{BIN}:/usr/bin:/bin", "HOME": str(home), "TIERMEM_CACHE_DIR": os.environ["TIERMEM_CACHE_DIR"]}
    proc = subprocess.Popen(["bash", "-c", f"exec {line}"], cwd=home, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        assert proc.stdout is not None
        said = proc.stdout.readline()
        if proc.poll() is not None and "--port" in said:
            return
        found = re.search(r"http://127\.0\.0\.1:\d+", said)
        assert found, said
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(found.group(0) + "/", timeout=10) as page:
                    assert page.status == 200
                    return
            except urllib.error.URLError:
                assert time.monotonic() < deadline and proc.poll() is None, said
                time.sleep(0.2)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _session(shop: Path, home: Path) -> None:
    """What Claude Code does in one short session: the hooks setup wrote, with their payloads."""
    settings = json.loads((shop / ".claude" / "settings.json").read_text())
    transcript = home / "session.jsonl"
    lines = [{"type": "user", "message": {"role": "user", "content": "List the services, please."}},
             {"type": "assistant", "message": {"id": "m1", "role": "assistant", "model": "claude", "content": [
                 {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls services"}}]}},
             {"type": "user", "message": {"role": "user", "content": [
                 {"type": "tool_result", "tool_use_id": "t1", "content": "ledgerd " * 125}]}},
             {"type": "assistant", "message": {"id": "m2", "role": "assistant", "model": "claude", "content": [
                 {"type": "text", "text": "There is one service: ledgerd."}]}}]
    transcript.write_text("".join(json.dumps(line) + "\n" for line in lines))
    for event in ("SessionStart", "Stop"):
        [group] = [g for g in settings["hooks"][event] if " hook claude-code " in g["hooks"][0]["command"]]
        payload = {"session_id": "s1", "cwd": str(shop), "hook_event_name": event, "source": "startup",
                   "transcript_path": str(transcript)}
        done = subprocess.run(group["hooks"][0]["command"], shell=True, cwd=shop, input=json.dumps(payload),
                              capture_output=True, text=True, timeout=60, check=False)
        assert (done.returncode, done.stderr) == (0, ""), event


def test_the_coding_agent_examples_work_as_written(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    shop = git_repo(home / "src" / "shop", "shop")
    root = home / ".local" / "share" / "tiermem"
    setup, project, init, look, off = blocks("docs/coding-agents.md", "bash")
    llm, cap = blocks("docs/coding-agents.md", "toml")

    for script in (readme_block(), setup, project, init):
        _shell(script, home)
    for made in (".claude/settings.json", ".claude.json", ".codex/hooks.json", ".codex/config.toml",
                 ".gemini/settings.json"):
        assert (home / made).is_file(), made
    assert (shop / ".mcp.json").is_file() and (shop / ".claude" / "settings.local.json").is_file()

    other = tmp_path / "other-root"
    other.mkdir()
    (other / "tiermem.toml").write_text(llm)
    assert load_settings(other).llm == "openai:gpt-4o-mini"
    with (root / "tiermem.toml").open("a") as config:  # the commented file init wrote, and the setting
        config.write(cap)
    with resident_server_stopped(root):
        _session(shop, home)
    person, mem, _ = open_scopes(root, shop, queue_replay=False, shutdown_flush_seconds=0)
    with person, mem:
        [result] = [r.text for r in parse_records(mem.daily.read()) if "ledgerd ledgerd" in r.text]
    assert "[… 800 characters omitted]" in result  # 1000 characters cut at the documented 200

    for line in look.strip().splitlines():
        if line.endswith(" ui"):
            _ui(line, home)
        else:
            out = _shell(line, home)
            assert "scopes" not in line or "--user project-" in out

    _shell(off, home)
    assert not (home / ".claude" / "settings.json").exists()  # setup made it: gone with what it added
    assert not (shop / ".mcp.json").exists() and not (shop / ".claude" / "settings.local.json").exists()
    assert tomllib.loads((home / ".codex" / "config.toml").read_text())["mcp_servers"]["tiermem"]  # codex stays
