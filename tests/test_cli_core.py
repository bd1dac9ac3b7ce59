"""``tiermem core show|edit``: MEMORY.md read and edited through the store (on PostgreSQL it lives
in the database), each edit keeping the text it replaced as a version."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from tiermem import Memory
from tiermem.cli.main import cli

pytestmark = pytest.mark.usefixtures("backend")

BEFORE = "## Work\n- Works as a nurse.\n"
EDITOR_SCRIPT = """import sys
path = sys.argv[1]
with open(path, encoding="utf-8") as handle:
    text = handle.read()
with open(path, "w", encoding="utf-8") as handle:
    handle.write(text.replace("a nurse", "a surgeon") + "- Likes green tea.\\n")
"""


@pytest.fixture
def root(tmp_path: Path) -> Path:
    with Memory(tmp_path, embedder="hash") as mem:
        mem.core.write(BEFORE)
    return tmp_path


def editor(tmp_path: Path, script: str) -> str:
    path = tmp_path / "editor.py"
    path.write_text(script, encoding="utf-8")
    return f'"{sys.executable}" "{path}"'


def run(root: Path, *args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["--root", str(root), *args], env={"TIERMEM_EMBEDDER": "hash", **(env or {})})
    return result.exit_code, result.output


def test_show_prints_the_current_text(root: Path) -> None:
    code, out = run(root, "core", "show")
    assert code == 0 and out == BEFORE
    code, out = run(root, "core", "show", "--json")
    data = json.loads(out)
    assert code == 0 and data["text"] == BEFORE and data["items"] == ["Works as a nurse."]
    assert data["path"] == str(root / "MEMORY.md") and data["userId"] == "default"


def test_show_of_an_empty_memory_says_so(root: Path) -> None:
    code, out = run(root, "--user", "bob", "core", "show")
    assert code == 0 and "MEMORY.md of user 'bob' is empty" in out


def test_edit_saves_a_new_text_and_keeps_the_old_one(root: Path, tmp_path: Path) -> None:
    code, out = run(root, "core", "edit", "--json", env={"EDITOR": editor(tmp_path, EDITOR_SCRIPT), "VISUAL": ""})
    data = json.loads(out)
    assert code == 0 and data["status"] == "saved" and data["bullets"] == 2 and data["changedMeanwhile"] is False
    after = "## Work\n- Works as a surgeon.\n- Likes green tea.\n"
    assert run(root, "core", "show")[1] == after
    assert (root / "MEMORY.md").read_text(encoding="utf-8") == after  # the file a person reads (or its mirror)
    with Memory(root, embedder="hash") as mem:
        kept = mem.dream_versions()[0]
        assert (kept.id, kept.cause, kept.content) == (data["savedVersionId"], "edit", BEFORE)
        assert mem.core.items() == ["Works as a surgeon.", "Likes green tea."]
    code, out = run(root, "core", "show", "--version", str(data["savedVersionId"]))
    assert code == 0 and out == BEFORE
    code, out = run(root, "rollback", str(data["savedVersionId"]))  # the edit can be undone
    assert code == 0 and run(root, "core", "show")[1] == BEFORE


def test_quitting_the_editor_without_saving_changes_nothing(root: Path, tmp_path: Path) -> None:
    code, out = run(root, "core", "edit", env={"EDITOR": editor(tmp_path, "pass\n"), "VISUAL": ""})
    assert code == 0 and out.strip() == "MEMORY.md unchanged"
    with Memory(root, embedder="hash") as mem:
        assert mem.core.read() == BEFORE and [v.cause for v in mem.dream_versions()] == []


def test_a_text_that_is_not_memory_is_refused_and_nothing_written(root: Path, tmp_path: Path) -> None:
    nul = "import sys\nopen(sys.argv[1], 'w').write('- a\\x00b\\n')\n"
    code, out = run(root, "core", "edit", env={"EDITOR": editor(tmp_path, nul), "VISUAL": ""})
    assert code == 1 and "NUL" in out and "Traceback" not in out
    assert run(root, "core", "show")[1] == BEFORE


def test_show_of_a_missing_version_is_a_one_line_error(root: Path) -> None:
    code, out = run(root, "core", "show", "--version", "99")
    assert code == 1 and "version 99 does not exist" in out and "Traceback" not in out
