"""``tiermem calls`` (table, --json, filters), the totals in ``tiermem stats``, and the settings of the
call log: ``prices`` (the one nested table of tiermem.toml), ``log_prompts``, ``call_log_retention_days``."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tiermem import ConfigError, Memory, ProviderError
from tiermem.calls import Price
from tiermem.cli.main import cli
from tiermem.config import load_settings
from tiermem.testing import FakeClock, HashEmbedder, ScriptedChatModel

pytestmark = pytest.mark.usefixtures("backend")

GOOD = json.dumps({"user": None, "history": None, "factsToRemove": [], "newFacts": []})


def run(root: Path, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["--root", str(root), *args], env={"TIERMEM_EMBEDDER": "hash"})
    return result.exit_code, result.stdout if result.exit_code == 0 else result.output


@pytest.fixture
def logged(root: Path, clock: FakeClock) -> Path:
    """Three calls an hour apart: extraction (parse failure, then ok), then a provider error."""
    llm = ScriptedChatModel(["no json here", GOOD, ProviderError("gateway down")])
    prices = {"custom:ScriptedChatModel": {"input_per_mtok": 1.0, "output_per_mtok": 4.0}}
    (root).mkdir(parents=True)
    (root / "tiermem.toml").write_text('[prices."custom:ScriptedChatModel"]\ninput_per_mtok = 1.0\n'
                                       'output_per_mtok = 4.0\n')
    with Memory(root, llm=llm, embedder=HashEmbedder(), clock=clock, timezone="UTC") as mem:
        assert mem.settings.prices == load_settings(root, {"prices": prices}).prices
        mem.extract([{"role": "user", "content": "I like tea."}])
        clock.advance(7200)
        with pytest.raises(ProviderError):
            mem.extract([{"role": "user", "content": "I like coffee."}])
    return root


def test_json_lists_every_row_newest_first(logged: Path) -> None:
    code, out = run(logged, "calls", "--json")
    assert code == 0, out
    rows = json.loads(out)
    assert [(r["purpose"], r["outcome"]) for r in rows] == [("extraction", "provider_error"), ("extraction", "ok"),
                                                            ("extraction", "parse_failed")]
    assert rows[0]["error"] == "ProviderError: gateway down" and rows[0]["cost"] is None
    assert rows[1]["cost"] == pytest.approx((rows[1]["prompt_tokens"] + 4 * rows[1]["completion_tokens"]) / 1e6)
    assert set(rows[0]) == {"id", "at", "purpose", "provider", "model", "prompt_tokens", "completion_tokens",
                            "tokens_counted", "latency_ms", "outcome", "attempt", "error", "cost", "prompt",
                            "completion"}


@pytest.mark.parametrize(("args", "outcomes"), [
    (("--outcome", "parse_failed"), ["parse_failed"]),
    (("--purpose", "extraction", "--outcome", "ok"), ["ok"]),
    (("--purpose", "dream"), []),
    (("--model", "custom:ScriptedChatModel"), ["provider_error", "ok", "parse_failed"]),
    (("--model", "openai:gpt-4o-mini"), []),
    (("--since", "2026-03-14T10:00:00"), ["provider_error"]),
    (("--since", "2026-03-14"), ["provider_error", "ok", "parse_failed"]),
    (("--limit", "1"), ["provider_error"]),
])
def test_filters(logged: Path, args: tuple[str, ...], outcomes: list[str]) -> None:
    code, out = run(logged, "calls", *args, "--json")
    assert code == 0, out
    assert [r["outcome"] for r in json.loads(out)] == outcomes


def test_table_and_bad_filters(logged: Path) -> None:
    code, out = run(logged, "calls")
    assert code == 0, out
    # at 80 columns the note number may wrap under its outcome (the model name stays whole)
    assert re.search(r"parse_failed\s+\[2\]", out) and re.search(r"provider_error\s+\[1\]", out), out
    assert "custom:ScriptedChatModel" in out and "extraction" in out
    assert "[1] ProviderError: gateway down" in out and "[2] the reply contains no JSON object" in out
    assert "3 rows:" in out and "$0.00" in out
    code, out = run(logged, "calls", "--limit", "1")
    assert code == 0 and "1 row:" in out, out  # not "1 rows" (issue 22, item 20)
    code, out = run(logged, "calls", "--since", "last tuesday")
    assert code == 1 and "since" in out
    code, out = run(logged, "calls", "--outcome", "meh")
    assert code == 2


def test_stats_has_the_totals(logged: Path) -> None:
    code, out = run(logged, "stats", "--json")
    assert code == 0, out
    data = json.loads(out)
    assert data["llm_calls"] == 3 and data["llm_calls_by_purpose"] == {"extraction": 3}
    assert data["llm_calls_failed"] == 2 and data["llm_prompt_tokens"] > 0 and data["llm_cost_usd"] > 0
    code, out = run(logged, "stats")
    assert code == 0 and "llm calls" in out


def test_no_calls_yet(root: Path, clock: FakeClock) -> None:
    with Memory(root, embedder=HashEmbedder(), clock=clock):
        pass
    assert run(root, "calls") == (0, "no calls\n")
    code, out = run(root, "calls", "--json")
    assert code == 0 and json.loads(out) == []


# --- settings ------------------------------------------------------------------------------------
def settings_from(tmp_path: Path, toml: str, env: dict[str, str] | None = None) -> Any:
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "tiermem.toml").write_text(toml)
    return load_settings(tmp_path, {}, env or {})


def test_prices_table_beside_or_inside_the_tiermem_table(tmp_path: Path) -> None:
    table = '[prices."openai:gpt-4o-mini"]\ninput_per_mtok = 0.15\noutput_per_mtok = 0.6\n'
    top = settings_from(tmp_path / "a", table)
    beside = settings_from(tmp_path / "b", "[tiermem]\nlog_prompts = true\n\n" + table)
    inside = settings_from(tmp_path / "c", "[tiermem]\n" + table.replace("[prices.", "[tiermem.prices."))
    for settings in (top, beside, inside):
        assert settings.prices["openai:gpt-4o-mini"] == Price(0.15, 0.6)
    assert beside.log_prompts and not top.log_prompts and top.call_log_retention_days == 90


@pytest.mark.parametrize("toml", [
    '[prices."openai:gpt-4o-mini"]\ninput_per_mtok = 0.15\noutput_per_mtok = 0.6\ncached_per_mtok = 0.01\n',
    '[prices."openai:gpt-4o-mini"]\ninput_per_mtok = 0.15\n',
    '[prices."openai:gpt-4o-mini"]\ninput_per_mtok = -1\noutput_per_mtok = 0.6\n',
    '[prices."openai:gpt-4o-mini"]\ninput_per_mtok = "cheap"\noutput_per_mtok = 0.6\n',
    'prices = 3\n',
    '[costs."openai:gpt-4o-mini"]\ninput_per_mtok = 0.15\noutput_per_mtok = 0.6\n',  # unknown tables still fail
    'call_log_retention_days = 0\n',
    'call_log_retention_days = 36501\n',  # over 100 years: the clean-up's cut-off would leave the calendar
    'call_log_retention_days = 1000000\n',
    'log_prompts = "maybe"\n',
])
def test_bad_call_log_settings_are_config_errors(tmp_path: Path, toml: str) -> None:
    with pytest.raises(ConfigError):
        settings_from(tmp_path, toml)


def test_prices_and_switches_from_the_environment(tmp_path: Path) -> None:
    env = {"TIERMEM_PRICES": '{"anthropic:claude-haiku-4-5": {"input_per_mtok": 1, "output_per_mtok": 5}}',
           "TIERMEM_LOG_PROMPTS": "true", "TIERMEM_CALL_LOG_RETENTION_DAYS": "7"}
    settings = settings_from(tmp_path, "", env)
    assert settings.prices.for_model("anthropic:claude-haiku-4-5") == Price(1.0, 5.0)
    assert settings.log_prompts and settings.call_log_retention_days == 7
    with pytest.raises(ConfigError, match="prices"):
        settings_from(tmp_path, "", {"TIERMEM_PRICES": "{not json"})
    with pytest.raises(ConfigError, match="call_log_retention_days"):
        settings_from(tmp_path, "", {"TIERMEM_CALL_LOG_RETENTION_DAYS": "1000000"})
    assert settings_from(tmp_path, "", {"TIERMEM_CALL_LOG_RETENTION_DAYS": "36500"}).call_log_retention_days == 36500
