"""Counts read as English: "1 fact", "2 facts", never "1 facts" (issue 22, item 20)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from tiermem.cli.main import cli
from tiermem.plural import counted

NOUNS = ("facts|rows|tables|files|vectors|occurrences|items|bullets|messages|threads|lines|calls|records|"
         "symlinks|entries|hits|days|tokens|sessions")
ONE_PLURAL = re.compile(rf"(?<![\d.])1 (?:{NOUNS})\b")


def test_counted_is_singular_for_exactly_one() -> None:
    assert [counted(n, "fact") for n in (0, 1, 2)] == ["0 facts", "1 fact", "2 facts"]
    assert counted(1, "history entry", "history entries") == "1 history entry"
    assert counted(3, "history entry", "history entries") == "3 history entries"


def _run(root: Path, *args: str, stdin: str | None = None) -> str:
    env = {"TIERMEM_EMBEDDER": "hash", "TIERMEM_LLM": "none", "TIERMEM_TIMEZONE": "UTC", "COLUMNS": "200"}
    result = CliRunner().invoke(cli, ["--root", str(root), *args], env=env, input=stdin)
    assert result.exit_code == 0, result.output
    return result.output


@pytest.mark.usefixtures("backend")
def test_the_cli_says_one_of_a_thing_in_the_singular(tmp_path: Path) -> None:
    root = tmp_path / "mem"
    shown: list[str] = []
    transcript = tmp_path / "chat.jsonl"
    transcript.write_text(json.dumps({"role": "user", "content": "I keep bees on the roof."}) + "\n",
                          encoding="utf-8")
    shown.append(_run(root, "ingest", str(transcript)))
    assert "1 message in 1 thread: 1 daily line, 0 LLM calls, 0 facts added" in shown[-1]
    fact_id = _run(root, "remember", "Keeps bees on the roof").split()[1].rstrip(":")
    shown.append(_run(root, "purge", "--fact", fact_id, "--yes"))
    assert "1 fact, " in shown[-1]
    shown.append(_run(root, "mirror"))
    for output in shown:
        assert not ONE_PLURAL.search(output), output


@pytest.mark.sqlite_only  # file modes of the root's files: the same on both backends' mirrors, once is enough
def test_doctor_counts_one_loose_file_in_the_singular(tmp_path: Path) -> None:
    root = tmp_path / "mem"
    _run(root, "remember", "Keeps bees on the roof")
    os.chmod(root / "tiermem.db", 0o644)
    result = CliRunner().invoke(cli, ["--root", str(root), "doctor"], env={"TIERMEM_EMBEDDER": "hash"})
    assert "1 file or folder can be read by other users" in result.output, result.output
    assert not ONE_PLURAL.search(result.output)
