"""``tiermem setup CLIENT`` (R71): merged into configs that already hold other hooks and servers,
idempotent (byte-identical), reversible (--remove), --dry-run writes nothing, malformed configs
are refused untouched, commands quoted, and the clients' real binaries run the hooks it wrote."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from tiermem.agents.clients import client
from tiermem.agents.codex import trust_hash
from tiermem.agents.config_files import is_tiermem_command
from tiermem.agents.setup import SetupReport, default_root, setup, tiermem_command
from tiermem.cli.main import cli
from tiermem.errors import InvalidInput

TIERMEM = ("/opt/my tools/bin/tiermem",)  # a space in the path: the commands must quote it


def _json(data: object) -> str:
    return json.dumps(data, indent=2) + "\n"


OTHER_HOOK = {"type": "command", "command": "echo other hook"}
CLAUDE_SETTINGS = {
    "model": "opus",
    "hooks": {"SessionStart": [{"matcher": "startup", "hooks": [OTHER_HOOK]}],
              "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "lint.sh"}]}]},
    "permissions": {"allow": ["Bash(ls)"]},
}
OTHER_SERVER = {"type": "stdio", "command": "other-server", "args": ["--x"]}
CODEX_CONFIG = """# my Codex config
model = "o3"  # the model I use

[features]
plugins = false  # no plugin sync

[mcp_servers.other]
command = "other-server"
args = ["--x"]

[hooks.state."/elsewhere/hooks.json:stop:0:0"]
enabled = true
trusted_hash = "sha256:0123"

# the end
"""
GEMINI_SETTINGS = {
    "model": {"name": "gemini-2.5-flash"},
    "hooks": {"SessionStart": [{"hooks": [{"name": "other", **OTHER_HOOK}]}],
              "AfterTool": [{"hooks": [{"name": "fmt", "type": "command", "command": "fmt.sh", "timeout": 500}]}]},
    "mcpServers": {"other": {"command": "other-server"}},
}

# (client, project?) -> the files there before, relative to the test folder (home/, repo/)
CASES: dict[tuple[str, bool], dict[str, str]] = {
    ("claude-code", False): {"home/.claude/settings.json": _json(CLAUDE_SETTINGS),
                             "home/.claude.json": json.dumps({"numStartups": 3, "mcpServers": {"other": OTHER_SERVER}},
                                                             indent=2)},
    ("claude-code", True): {"repo/.claude/settings.json": _json(CLAUDE_SETTINGS),
                            "repo/.mcp.json": _json({"mcpServers": {"other": OTHER_SERVER}})},
    ("codex", False): {"home/.codex/config.toml": CODEX_CONFIG,
                       "home/.codex/hooks.json": _json({"hooks": CLAUDE_SETTINGS["hooks"]})},
    ("codex", True): {"home/.codex/config.toml": CODEX_CONFIG,
                      "repo/.codex/config.toml": CODEX_CONFIG,
                      "repo/.codex/hooks.json": _json({"hooks": CLAUDE_SETTINGS["hooks"]})},
    ("gemini", False): {"home/.gemini/settings.json": _json(GEMINI_SETTINGS)},
    ("gemini", True): {"repo/.gemini/settings.json": _json(GEMINI_SETTINGS)},
}
IDS = [f"{name}-{'project' if project else 'global'}" for name, project in CASES]

Run = Callable[..., SetupReport]


@pytest.fixture(params=list(CASES), ids=IDS)
def case(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, bool]:
    (tmp_path / "repo").mkdir()
    (tmp_path / "home").mkdir()
    for name, text in CASES[request.param].items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text, encoding="utf-8")
    return request.param  # type: ignore[no-any-return]


@pytest.fixture
def run(tmp_path: Path) -> Run:
    def run(name: str, project: bool = False, **kw: object) -> SetupReport:
        options: dict[str, object] = {"tiermem": TIERMEM, "home": tmp_path / "home", "env": {}}
        options.update(kw)
        root = options.pop("root", tmp_path / "mem root")
        return setup(name, tmp_path / "repo" if project else None, root, **options)  # type: ignore[arg-type]
    return run


def snapshot(folder: Path) -> dict[str, tuple[bytes, int, int]]:
    """Every file under ``folder``: bytes, mode and mtime (a rewrite with the same bytes shows)."""
    return {str(p.relative_to(folder)): (p.read_bytes(), p.stat().st_mode, p.stat().st_mtime_ns)
            for p in sorted(folder.rglob("*")) if p.is_file()}


def our_commands(folder: Path, name: str) -> list[str]:
    """Every hook command naming ``hook <client>`` in the JSON files under ``folder``."""
    found: list[str] = []

    def walk(node: object) -> None:
        if isinstance(node, dict):
            command = node.get("command")
            if isinstance(command, str) and f" hook {name} " in command:
                found.append(command)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    for path in folder.rglob("*.json"):
        walk(json.loads(path.read_text()))
    return found


# ----------------------------------------------------------------------------- every client, every place


def test_setup_adds_each_event_once_and_a_second_run_changes_no_byte(case: tuple[str, bool], run: Run,
                                                                     tmp_path: Path) -> None:
    name, project = case
    first = run(name, project)
    assert first.changed and all(c.status in ("added", "updated") for p in first.files for c in p.changes
                                 if not c.item.startswith("hooksConfig"))
    events = client(name).events
    commands = our_commands(tmp_path, name)
    assert sorted(shlex.split(c)[-1] for c in commands) == sorted(events)
    assert all(shlex.split(c)[:-1] == [*TIERMEM, "--root", str(tmp_path / "mem root"), "hook", name]
               for c in commands)
    before = snapshot(tmp_path)
    second = run(name, project)
    assert not second.changed
    assert all(c.status == "unchanged" for p in second.files for c in p.changes)
    assert snapshot(tmp_path) == before


def test_remove_gives_back_the_original_files_byte_for_byte(case: tuple[str, bool], run: Run, tmp_path: Path) -> None:
    name, project = case
    original = {n: (tmp_path / n).read_bytes() for n in CASES[case]}
    run(name, project)
    report = run(name, project, remove=True)
    assert report.changed and any(c.status == "removed" for p in report.files for c in p.changes)
    files = {str(p.relative_to(tmp_path)): p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    assert files == original  # created files are gone again, the others are as they were
    assert run(name, project, remove=True).changed is False


def test_dry_run_writes_nothing_and_says_what_would_change(case: tuple[str, bool], run: Run, tmp_path: Path) -> None:
    name, project = case
    before = snapshot(tmp_path)
    report = run(name, project, dry_run=True)
    assert report.changed and report.dry_run
    assert snapshot(tmp_path) == before
    run(name, project)
    after_setup = snapshot(tmp_path)
    assert run(name, project, remove=True, dry_run=True).changed
    assert snapshot(tmp_path) == after_setup


def test_a_malformed_config_is_a_clear_error_and_nothing_is_written(case: tuple[str, bool], run: Run,
                                                                    tmp_path: Path) -> None:
    name, project = case
    for broken in CASES[case]:  # each file in turn; the others are fine
        for other, text in CASES[case].items():
            (tmp_path / other).write_text(text)
        (tmp_path / broken).write_text("[[not toml\n" if broken.endswith(".toml") else '{"hooks": {\n')
        before = snapshot(tmp_path)
        with pytest.raises(InvalidInput, match=f"{tmp_path / broken}: not valid .*changed nothing"):
            run(name, project)
        with pytest.raises(InvalidInput):
            run(name, project, remove=True)
        assert snapshot(tmp_path) == before


def test_a_new_root_updates_our_entries_in_place(case: tuple[str, bool], run: Run, tmp_path: Path) -> None:
    name, project = case
    original = {n: (tmp_path / n).read_bytes() for n in CASES[case]}
    run(name, project)
    report = run(name, project, root=tmp_path / "other root")
    assert any(c.status == "updated" for p in report.files for c in p.changes)
    commands = our_commands(tmp_path, name)
    assert len(commands) == len(client(name).events)
    assert all(shlex.split(c)[2] == str(tmp_path / "other root") for c in commands)
    run(name, project, remove=True)
    assert {n: (tmp_path / n).read_bytes() for n in CASES[case]} == original


# ----------------------------------------------------------------------------- per client


def test_claude_code_global_keeps_the_other_hooks_and_servers(run: Run, tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / ".claude").mkdir(parents=True)
    (home / ".claude/settings.json").write_text(_json(CLAUDE_SETTINGS))
    run("claude-code")
    settings = json.loads((home / ".claude/settings.json").read_text())
    assert list(settings) == ["model", "hooks", "permissions"]
    start = settings["hooks"]["SessionStart"]
    assert start[0] == {"matcher": "startup", "hooks": [OTHER_HOOK]} and len(start) == 2
    assert start[1]["hooks"][0]["timeout"] == 3 and settings["hooks"]["UserPromptSubmit"][0]["hooks"][0]["timeout"] == 2
    assert settings["hooks"]["PreToolUse"] == CLAUDE_SETTINGS["hooks"]["PreToolUse"]  # type: ignore[index]
    assert settings["permissions"]["allow"] == ["Bash(ls)", "mcp__tiermem"]
    server = json.loads((home / ".claude.json").read_text())["mcpServers"]["tiermem"]
    assert [server["command"], *server["args"]] == [*TIERMEM, "--root", str(tmp_path / "mem root"), "mcp",
                                                    "--coding-agent"]
    assert server["alwaysLoad"] is True


def test_claude_code_project_approves_its_server_in_the_local_settings(run: Run, tmp_path: Path) -> None:
    (tmp_path / "repo").mkdir()
    run("claude-code", project=True)
    local = json.loads((tmp_path / "repo/.claude/settings.local.json").read_text())
    assert local == {"enabledMcpjsonServers": ["tiermem"], "permissions": {"allow": ["mcp__tiermem"]}}
    assert "tiermem" in json.loads((tmp_path / "repo/.mcp.json").read_text())["mcpServers"]


def test_claude_code_follows_claude_config_dir(run: Run, tmp_path: Path) -> None:
    config = tmp_path / "claude config"
    run("claude-code", env={"CLAUDE_CONFIG_DIR": str(config)})
    assert sorted(p.name for p in config.iterdir()) == [".claude.json", "settings.json"]
    assert not (tmp_path / "home/.claude").exists()


def test_codex_keeps_comments_and_trusts_exactly_its_own_hooks(run: Run, tmp_path: Path) -> None:
    codex_home = tmp_path / "codex home"
    codex_home.mkdir()
    (codex_home / "config.toml").write_text(CODEX_CONFIG)
    run("codex", env={"CODEX_HOME": str(codex_home)})
    text = (codex_home / "config.toml").read_text()
    assert text.startswith('# my Codex config\nmodel = "o3"  # the model I use\n\n[features]\n'
                           'plugins = false  # no plugin sync\nhooks = true # tiermem setup\n\n[mcp_servers.other]\n'
                           'command = "other-server"\nargs = ["--x"]\n\n[mcp_servers.tiermem]\n')
    assert '"approve"\n\n[hooks.state."/elsewhere/hooks.json:stop:0:0"]\n' in text  # the user's comments stay
    import tomlkit

    doc = tomlkit.parse(text).unwrap()
    hooks = json.loads((codex_home / "hooks.json").read_text())["hooks"]
    source = os.path.realpath(codex_home / "hooks.json")
    ours = {k: v for k, v in doc["hooks"]["state"].items() if k.startswith(source)}
    assert sorted(ours) == sorted(f"{source}:{label}:0:0" for label in
                                  ("session_start", "user_prompt_submit", "pre_compact", "stop", "session_end"))
    stop = hooks["Stop"][0]
    assert ours[f"{source}:stop:0:0"] == {"enabled": True, "trusted_hash": trust_hash("Stop", stop, stop["hooks"][0])}
    assert doc["hooks"]["state"]["/elsewhere/hooks.json:stop:0:0"]["trusted_hash"] == "sha256:0123"
    assert hooks["SessionEnd"][0]["hooks"][0]["timeout"] == 3  # Codex clamps SessionEnd to 1-3 s
    assert doc["mcp_servers"]["tiermem"]["default_tools_approval_mode"] == "approve"
    assert "required" not in doc["mcp_servers"]["tiermem"]  # a required server that fails would stop Codex


def test_codex_trust_hash_is_what_codex_computes() -> None:
    # the values notes/agents/tools/codex_trust.py gives (checked against Codex 0.171.0 itself; the
    # real-binary test below runs hooks trusted this way)
    stop = {"type": "command", "command": "/x/tiermem --root /r hook codex Stop", "timeout": 6}
    assert trust_hash("Stop", {"hooks": [stop]}, stop) == \
        "sha256:4930158b9d0f814e9e8fe00ab94b0baf931773c57ee60e8af303e13ea39eb64e"
    end = {"type": "command", "command": "/x/tiermem --root /r hook codex SessionEnd", "timeout": 3}
    assert trust_hash("SessionEnd", {"hooks": [end]}, end) == \
        "sha256:b9069cfbbaa48d5215c8dcfbc7049f4e70211b9f4b5eff323f6fc914353698da"
    assert trust_hash("Stop", {"matcher": "*", "hooks": [stop]}, stop) == trust_hash("Stop", {}, stop)
    assert trust_hash("SessionEnd", {}, {**end, "timeout": 60}) == trust_hash("SessionEnd", {}, end)  # 1-3 s
    assert trust_hash("SessionStart", {"matcher": "startup"}, stop) != trust_hash("SessionStart", {}, stop)


def test_codex_turns_hooks_on_and_remove_turns_them_back_off(run: Run, tmp_path: Path) -> None:
    config = tmp_path / "home/.codex/config.toml"
    config.parent.mkdir(parents=True)
    original = "[features]\nhooks = false  # I said no\n"
    config.write_text(original)
    report = run("codex")
    assert any(c.item == "features.hooks" and c.status == "updated" for p in report.files for c in p.changes)
    assert "hooks = true # tiermem setup; was false" in config.read_text()
    run("codex", remove=True)
    assert config.read_text().startswith("[features]\nhooks = false")


def test_codex_drops_trust_it_wrote_for_hooks_that_are_gone(run: Run, tmp_path: Path) -> None:
    run("codex")
    config = tmp_path / "home/.codex/config.toml"
    hooks_file = os.path.realpath(tmp_path / "home/.codex/hooks.json")
    stale = (f'\n[hooks.state."{hooks_file}:notification:0:0"] # tiermem setup\n'
             'enabled = true\ntrusted_hash = "sha256:1"\n')
    config.write_text(config.read_text() + stale)
    assert run("codex").changed
    assert ":notification:" not in config.read_text()


def test_gemini_switches_hooks_on_and_uses_milliseconds(run: Run, tmp_path: Path) -> None:
    settings = tmp_path / "home/.gemini/settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_text(_json({"hooksConfig": {"enabled": False, "disabled": ["x"]}}))
    run("gemini")
    doc = json.loads(settings.read_text())
    assert doc["hooksConfig"] == {"enabled": True, "disabled": ["x"]}
    start = doc["hooks"]["SessionStart"][0]["hooks"][0]
    assert start["timeout"] == 3000 and start["name"] == "tiermem"
    assert doc["mcpServers"]["tiermem"]["trust"] is True


# ----------------------------------------------------------------------------- refusals and file handling


def test_an_unknown_client_is_a_clear_error(run: Run, tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="unknown coding-agent client 'cursor'; known: claude-code, codex, gemini"):
        run("cursor")
    assert not any((tmp_path / "home").rglob("*")) if (tmp_path / "home").exists() else True


def test_a_server_called_tiermem_that_is_not_ours_is_left_alone(run: Run, tmp_path: Path) -> None:
    (tmp_path / "repo").mkdir()
    mcp = tmp_path / "repo/.mcp.json"
    mcp.write_text(_json({"mcpServers": {"tiermem": {"command": "npx", "args": ["some-other-tiermem"]}}}))
    before = snapshot(tmp_path)
    with pytest.raises(InvalidInput, match="mcpServers.tiermem is already there and does not run tiermem"):
        run("claude-code", project=True)
    assert snapshot(tmp_path) == before
    run("claude-code", project=False)
    mcp_before = mcp.read_bytes()
    run("claude-code", project=True, remove=True)
    assert mcp.read_bytes() == mcp_before


def test_a_part_of_the_wrong_type_is_refused(run: Run, tmp_path: Path) -> None:
    settings = tmp_path / "home/.claude/settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_text('{"hooks": []}\n')
    with pytest.raises(InvalidInput, match="hooks is a list, expected an object"):
        run("claude-code")
    assert settings.read_text() == '{"hooks": []}\n' and not (tmp_path / "home/.claude.json").exists()


def test_a_missing_project_folder_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="does not exist"):
        setup("gemini", tmp_path / "nope", tmp_path / "mem", tiermem=TIERMEM, home=tmp_path, env={})


def test_modes_are_kept_new_files_are_private_and_links_are_written_through(run: Run, tmp_path: Path) -> None:
    dotfiles = tmp_path / "dotfiles/settings.json"
    dotfiles.parent.mkdir()
    dotfiles.write_text(_json({"model": "opus"}))
    dotfiles.chmod(0o644)
    (tmp_path / "home/.claude").mkdir(parents=True)
    (tmp_path / "home/.claude/settings.json").symlink_to(dotfiles)
    run("claude-code")
    assert (tmp_path / "home/.claude/settings.json").is_symlink()
    assert "hooks" in json.loads(dotfiles.read_text()) and dotfiles.stat().st_mode & 0o777 == 0o644
    assert (tmp_path / "home/.claude.json").stat().st_mode & 0o777 == 0o600
    assert not [p for p in dotfiles.parent.iterdir() if p.name != "settings.json"]  # no temp file left


# ----------------------------------------------------------------------------- the command that runs tiermem


def test_tiermem_command_is_absolute(tmp_path: Path) -> None:
    script = tmp_path / "venv bin" / "tiermem"
    script.parent.mkdir()
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    python = tmp_path / "venv bin" / "python"
    assert tiermem_command(str(script), str(python)) == [str(script)]
    assert tiermem_command("/usr/lib/python3/pytest", str(python)) == [str(script)]  # beside the running Python
    bare = tmp_path / "bare" / "python"
    assert tiermem_command("-c", str(bare)) == [str(bare), "-m", "tiermem"]
    assert all(is_tiermem_command(c) for c in ([str(script)], [str(bare), "-m", "tiermem"]))


def test_python_dash_m_tiermem_runs_the_cli() -> None:
    done = subprocess.run([sys.executable, "-m", "tiermem", "setup", "--help"], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0 and "claude-code, codex or gemini" in done.stdout


def test_default_root_is_per_person(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert default_root({"TIERMEM_HOME": str(tmp_path / "m")}) == tmp_path / "m"
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert default_root({}) == tmp_path / "data/tiermem"


# ----------------------------------------------------------------------------- the CLI


def test_cli_prints_changes_root_and_ui_command(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.delenv("CODEX_HOME", raising=False)
    runner = CliRunner()
    dry = runner.invoke(cli, ["setup", "codex", "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert "would set up in your global config (dry run, nothing written)" in dry.output
    assert "hooks.SessionStart: would add" in dry.output and not (tmp_path / ".codex").exists()
    assert f"memory root: {tmp_path / 'data/tiermem'}" in dry.output
    assert f"--root {tmp_path / 'data/tiermem'} ui" in dry.output
    done = runner.invoke(cli, ["--root", str(tmp_path / "mine"), "setup", "codex", "--json"])
    data = json.loads(done.output)
    assert data["root"] == str(tmp_path / "mine") and data["scope"] == "global" and data["changed"] is True
    assert {f["outcome"] for f in data["files"]} == {"created"}
    again = runner.invoke(cli, ["setup", "codex", "--root", str(tmp_path / "mine"), "--json"])
    assert json.loads(again.output)["changed"] is False


def test_cli_project_defaults_to_the_current_folder(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    done = CliRunner().invoke(cli, ["setup", "gemini", "--project", "--root", str(tmp_path / "m")])
    assert done.exit_code == 0, done.output
    assert (tmp_path / ".gemini/settings.json").exists() and not (tmp_path / "home").exists()


def test_cli_refusals(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    runner = CliRunner()
    both = runner.invoke(cli, ["setup", "gemini", "--project", str(tmp_path), "--global"])
    assert both.exit_code == 2 and "--project and --global exclude each other" in both.output
    bad = runner.invoke(cli, ["setup", "vim"])
    assert bad.exit_code == 1 and "unknown coding-agent client 'vim'" in bad.output
    assert not any(tmp_path.iterdir())


# ----------------------------------------------------------------------------- the real clients


def _binary(name: str) -> str:
    folder = os.environ.get("CODING_AGENT_BIN")  # e.g. node_modules/.bin of the pinned npm install
    found = shutil.which(name, path=folder) if folder else shutil.which(name)
    if found is None:
        pytest.skip(f"{name} is not installed (set CODING_AGENT_BIN to its folder)")
    return found


def _recording_tiermem(tmp_path: Path) -> tuple[Path, Path]:
    """A stand-in tiermem (a path with a space) that logs the hook calls it gets and answers nothing."""
    log = tmp_path / "calls.log"
    script = tmp_path / "bin dir" / "tiermem"
    script.parent.mkdir()
    script.write_text(f"#!/bin/sh\nif [ \"$3\" = hook ]; then cat >/dev/null; echo \"$5\" >> '{log}'; fi\n")
    script.chmod(0o755)
    return script, log


@pytest.mark.parametrize("name", ["claude-code", "codex"])
def test_the_real_client_runs_every_hook_setup_wrote(name: str, tmp_path: Path) -> None:
    sys.path.insert(0, str(Path(__file__).parent))
    from fake_openai_server import FakeLLMServer

    binary = _binary("claude" if name == "claude-code" else "codex")
    script, log = _recording_tiermem(tmp_path)
    home, repo = tmp_path / "home", tmp_path / "my repo"
    home.mkdir()
    repo.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    with FakeLLMServer() as server:
        server.add("Done.")
        env = {"PATH": f"{Path(binary).parent}:/usr/bin:/bin", "HOME": str(home)}
        if name == "codex":
            (home / ".codex").mkdir()
            (home / ".codex/config.toml").write_text(
                f'model = "gpt-5-fake"\nmodel_provider = "fake"\n\n[model_providers.fake]\nname = "Fake"\n'
                f'base_url = "{server.url}"\nwire_api = "responses"\nenv_key = "FAKE_API_KEY"\n\n'
                '[features]\nplugins = false\n')
            env["FAKE_API_KEY"] = "x"
            command = [binary, "exec", "hello"]
        else:
            env.update(ANTHROPIC_BASE_URL=server.base_url, ANTHROPIC_API_KEY="sk-ant-fake",
                       CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1")
            command = [binary, "-p", "hello"]
        setup(name, None, tmp_path / "mem root", tiermem=[str(script)], home=home, env={})
        done = subprocess.run(command, cwd=repo, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=180)
    assert done.returncode == 0 and "Done." in done.stdout, done.stderr[-2000:]
    assert log.read_text().split() == ["SessionStart", "UserPromptSubmit", "Stop", "SessionEnd"]
