"""Settings precedence (R63): arguments > TIERMEM_* environment > tiermem.toml > defaults."""

from __future__ import annotations

from pathlib import Path

import pytest

from tiermem import ConfigError, Memory
from tiermem.config import load_settings
from tiermem.testing import HashEmbedder


def test_precedence(tmp_path: Path) -> None:
    (tmp_path / "tiermem.toml").write_text("[tiermem]\nmax_facts = 10\ndebounce_seconds = 5\nllm = 'none'\n")
    env = {"TIERMEM_DEBOUNCE_SECONDS": "7", "TIERMEM_MAX_INJECTION_TOKENS": "99", "TIERMEM_HOME": "/x"}
    settings = load_settings(tmp_path, {"max_injection_tokens": 50, "max_facts": None}, env)
    assert settings.max_facts == 10  # file (argument None = not given)
    assert settings.debounce_seconds == 7.0  # environment beats file
    assert settings.max_injection_tokens == 50  # argument beats environment
    assert settings.fact_confidence_threshold == 0.5  # default


def test_defaults_without_anything(tmp_path: Path) -> None:
    s = load_settings(tmp_path, {}, {})
    assert (s.debounce_seconds, s.update_delay_seconds, s.max_facts, s.max_injection_tokens) == (30.0, 0.5, 500, 2000)
    assert (s.llm, s.embedder, s.daily_retention_days, s.max_live_sessions) == ("none", "local", 90, 256)


@pytest.mark.parametrize(
    ("overrides", "env", "toml"),
    [
        ({"max_facts": "many"}, {}, ""),
        ({"no_such_setting": 1}, {}, ""),
        ({}, {"TIERMEM_ENABLED": "perhaps"}, ""),
        ({}, {}, "[tiermem]\nunknown = 1\n"),
        ({}, {}, "not toml ==="),
        ({"fact_confidence_threshold": 2.0}, {}, ""),
        ({"timezone": "Mars/Olympus"}, {}, ""),
        ({"debounce_seconds": float("nan")}, {}, ""),
    ],
)
def test_invalid_configuration_is_a_config_error(
    tmp_path: Path, overrides: dict[str, object], env: dict[str, str], toml: str
) -> None:
    if toml:
        (tmp_path / "tiermem.toml").write_text(toml)
    with pytest.raises(ConfigError):
        load_settings(tmp_path, overrides, env)


def test_memory_passes_settings_through(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TIERMEM_MAX_FACTS", "3")
    with Memory(tmp_path, embedder=HashEmbedder()) as m:
        assert m.settings.max_facts == 3
    with Memory(tmp_path, embedder=HashEmbedder(), max_facts=4) as m:
        assert m.settings.max_facts == 4


def test_unknown_provider_names_fail_clearly(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="nosuch"):  # the name is checked when the store opens
        Memory(tmp_path, llm="nosuch:model", embedder=HashEmbedder())
    with Memory(tmp_path, llm="none", embedder=HashEmbedder()) as m:
        assert m.llm is None


@pytest.mark.parametrize(("name", "value"), [("daily_retention_days", 36_501), ("daily_retention_days", 10**12),
                                             ("dream_lookback_days", 3661), ("call_log_retention_days", 10**6)])
def test_day_counts_are_bounded(tmp_path: Path, name: str, value: int) -> None:
    """A cut-off date computed from a day count must stay within the calendar (issue 22 item 8)."""
    with pytest.raises(ConfigError, match=name):
        load_settings(tmp_path, {name: value})


def test_the_settings_repr_holds_no_database_password(tmp_path: Path) -> None:
    """Settings show up in tracebacks and logs: the URL, and so its password, is not in their repr."""
    settings = load_settings(tmp_path, {"database_url": "postgresql://tm:Hunter2-secret@db.example/tm"})
    assert settings.database_url is not None
    assert "Hunter2-secret" not in repr(settings)
