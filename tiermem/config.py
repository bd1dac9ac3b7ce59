"""Settings: constructor arguments > ``TIERMEM_*`` environment > ``<root>/tiermem.toml`` > defaults.

Nothing is read at import time; :func:`load_settings` reads the environment and the file when a
``Memory`` (or the CLI) opens a root.
"""

from __future__ import annotations

import getpass
import math
import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from datetime import datetime, tzinfo
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from tiermem import validate
from tiermem.calls.prices import Prices, parse_prices
from tiermem.errors import ConfigError, InvalidInput
from tiermem.types import CATEGORIES, Scope

CONFIG_FILE = "tiermem.toml"
ENV_PREFIX = "TIERMEM_"
DEFAULT_PERSON = "person"  # the person scope's user when the OS user name cannot be used
MAX_DAYS = 36_500  # retention settings: at most 100 years
MAX_LOOKBACK_DAYS = 3660  # the most days one Deep Dream reads (about ten years)


@dataclass(frozen=True)
class Settings:
    """Every tunable of tiermem. Immutable; derive a changed copy with ``dataclasses.replace``."""

    enabled: bool = True
    llm: str = "none"
    llm_base_url: str | None = None
    embedder: str = "local"
    embedder_base_url: str | None = None
    provider_timeout_seconds: float = 60.0
    provider_max_retries: int = 3
    debounce_seconds: float = 30.0
    update_delay_seconds: float = 0.5
    queue_max_attempts: int = 5
    queue_replay: bool = True
    extract_min_turns: int = 10
    extract_idle_seconds: float = 300.0
    shutdown_flush_seconds: float = 10.0
    embed_on_write: bool = True  # false: new facts and journal records wait unembedded for the next search
    queue_lease_seconds: float | None = None  # a claim's lease; None: computed (queue/worker.py lease_seconds)
    sqlite_synchronous: str = "normal"  # "full": a power loss keeps the last commits too (slower writes)
    allow_symlinks: bool = False  # a symlink inside the root that leads outside it is refused unless true
    # postgresql://user:pass@host:5432/db: the store in PostgreSQL (docs/postgres.md); kept out of repr (password)
    database_url: str | None = field(default=None, repr=False)
    mirror_files: bool = True  # PostgreSQL: rewrite the Daily files and MEMORY.md under the root for people to read
    postgres_pool_size: int = 5  # connections per process and database URL
    postgres_statement_timeout_seconds: float = 30.0
    fact_confidence_threshold: float = 0.5
    max_facts: int = 500
    max_injection_tokens: int = 2000
    inject_core: bool = True  # R21: MEMORY.md bullets in the injection text ("Core Memory:")
    inject_core_max_share: float = 0.5  # at most this share of the injection budget goes to Core
    inject_notes: int = 5  # with query=: at most this many Daily hits under "Relevant notes:"
    daily_retention_days: int = 90
    timezone: str | None = None
    session_max_tokens: int = 8000
    max_live_sessions: int = 256
    redact_secrets: bool = True
    dream_schedule: str | None = "03:00"
    dream_lookback_days: int = 2
    dream_input_tokens: int = 12_000  # the most Daily text one Deep Dream call reads (most recent first)
    tool_result_max_chars: int = 4000  # a tool result longer than this is journaled with "[… N characters omitted]"
    search_keyword_weight: float = 1.0  # score = weighted mean of keyword coverage and cosine (search/evidence.py)
    search_vector_weight: float = 1.0
    search_recency_half_life_days: float | None = None
    search_mmr_lambda: float | None = None
    search_fusion: str = "weighted"  # or "rrf"; weighted beat RRF on LoCoMo by 0.07-0.09 R@10
    search_min_score: float | None = None  # floor of explicit questions (search, recall); None: the model's default
    search_inject_min_score: float | None = None  # automatic injection (relevant notes, prompt hooks): search/floor.py
    search_candidates: int = 50  # per retriever, before fusion
    search_keyword_budget: int = 5_000  # summed document frequency of the terms one query may use (BM25 cost)
    search_chunk_context: bool = True  # index a Markdown chunk with its neighbours (and a daily record's date)
    search_context_weight: float = 0.75  # that context's weight against the chunk's own text (BM25, score)
    search_reply_support: float = 0.5  # order: a daily record after a question gains this x its score (thread.py)
    search_next_support: float = 0.2  # order: ... and this x the score of another speaker's reply after it
    search_sentence_vectors: bool = True  # also a vector per sentence of longer items (max-sim); LoCoMo +0.02 R@5
    search_max_part_vectors: int = 100_000  # per scope; above it sentence vectors are dropped (memory)
    search_derived_vectors: bool = True  # a Markdown chunk's vector combined from its sentences' (issue 16)
    search_exact_max_items: int = 50_000  # above: binary-code shortlist, then re-scoring
    search_float_max_items: int = 250_000  # above: int8 vectors in memory, exact re-scoring from SQLite
    search_shortlist: int = 2000  # shortlist size of the binary-code step
    search_index_file: bool = True  # SQLite: keep each scope's vector index in <root>/.vectors/ (fast cold start)
    call_log_retention_days: int = 90  # rows of the LLM call log older than this are removed (docs/calls.md)
    log_prompts: bool = False  # the call log keeps prompt and reply texts (redacted) only when true
    prices: Prices = Prices()  # USD per million tokens per provider:model: [prices."openai:gpt-4o-mini"]
    coding_server_idle_minutes: float = 30.0  # the coding agents' resident server exits after this quiet time
    coding_agent_name: str = "coding"  # agent name of the coding agents' person and project scopes (R74)
    coding_person: str | None = None  # user id of the person scope; None: the OS user name (coding_person_name)
    coding_person_categories: str | None = "preference,behavior,correction"  # extracted into the person scope
    coding_start_tokens: int = 1500  # budget of the memory text a coding agent gets at session start
    coding_prompt_tokens: int = 600  # budget of the relevant memory a coding agent gets with each prompt

    def tz(self) -> tzinfo:
        """The configured time zone, or the system's local zone."""
        if self.timezone:
            try:
                return ZoneInfo(self.timezone)
            except (ZoneInfoNotFoundError, ValueError) as exc:
                raise ConfigError(f"unknown timezone {self.timezone!r}") from exc
        local = datetime.now().astimezone().tzinfo
        assert local is not None
        return local

    def coding_person_name(self) -> str:
        """The user id of the coding agents' person scope: ``coding_person``, else the OS user name
        made to fit a user id (other characters become ``_``, at most 64), else ``"person"``."""
        if self.coding_person is not None:
            return self.coding_person
        try:
            login = getpass.getuser()
        except Exception:  # no LOGNAME/USER and no password entry (a container's bare uid)
            return DEFAULT_PERSON
        return _fitted_name(login) or DEFAULT_PERSON

    def person_categories(self) -> tuple[str, ...]:
        """The fact categories extraction puts into the person scope (``coding_person_categories``)."""
        return _category_list(self.coding_person_categories)

    def coding_person_scope(self, scope: Scope) -> Scope | None:
        """The person scope that goes with ``scope`` when it is a coding agent's project scope
        (agent ``coding_agent_name``, user not the person, R74): extraction puts the person
        categories there, the MCP server reads it too. ``None`` for every other scope."""
        person = self.coding_person_name()
        if scope.agent_name != self.coding_agent_name or scope.user_id == person:
            return None
        return Scope(person, self.coding_agent_name)


_FIELDS = {f.name: f for f in fields(Settings)}


def _coerce(name: str, value: Any, source: str) -> Any:
    """Convert ``value`` (maybe a string from the environment) to the field's type."""
    if name == "prices":  # the one nested table: {"provider:model": {input_per_mtok, output_per_mtok}}
        return parse_prices(value, source)
    kind = str(_FIELDS[name].type)
    optional = "None" in kind
    if value is None or (optional and isinstance(value, str) and value.strip().lower() in ("", "none", "off")):
        if optional:
            return None
        raise ConfigError(f"{name} ({source}) must not be empty")
    try:
        if kind.startswith("bool"):
            if isinstance(value, str):
                lowered = value.strip().lower()
                if lowered not in ("1", "0", "true", "false", "yes", "no", "on", "off"):
                    raise ValueError(value)
                return lowered in ("1", "true", "yes", "on")
            if not isinstance(value, bool):
                raise ValueError(value)
            return value
        if kind.startswith("int"):
            if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                raise ValueError(value)
            return int(value)
        if kind.startswith("float"):
            if isinstance(value, bool):
                raise ValueError(value)
            result = float(value)
            if math.isnan(result) or math.isinf(result):
                raise ValueError(value)
            return result
        if not isinstance(value, str):
            raise ValueError(value)
        return value
    except ValueError as exc:
        raise ConfigError(f"{name} ({source}): {value!r} is not a valid {kind}") from exc


def _check(settings: Settings) -> Settings:
    if not 0.0 <= settings.fact_confidence_threshold <= 1.0:
        raise ConfigError("fact_confidence_threshold must be within [0, 1]")
    if not 0.0 <= settings.inject_core_max_share <= 1.0:
        raise ConfigError("inject_core_max_share must be within [0, 1]")
    for name in ("max_facts", "max_injection_tokens", "max_live_sessions", "session_max_tokens",
                 "daily_retention_days", "queue_max_attempts", "dream_lookback_days", "extract_min_turns",
                 "dream_input_tokens", "tool_result_max_chars", "call_log_retention_days"):
        if getattr(settings, name) < 1:
            raise ConfigError(f"{name} must be at least 1")
    for name in ("debounce_seconds", "update_delay_seconds", "provider_timeout_seconds", "extract_idle_seconds",
                 "inject_notes"):
        if getattr(settings, name) < 0:
            raise ConfigError(f"{name} must not be negative")
    if not 0 < settings.coding_server_idle_minutes <= 10_080:
        raise ConfigError("coding_server_idle_minutes must be more than 0 and at most 10080 (a week)")
    for name in ("call_log_retention_days", "daily_retention_days"):
        if getattr(settings, name) > MAX_DAYS:  # a cut-off computed from it stays a date
            raise ConfigError(f"{name} must be at most {MAX_DAYS} (100 years)")
    if settings.dream_lookback_days > MAX_LOOKBACK_DAYS:
        raise ConfigError(f"dream_lookback_days must be at most {MAX_LOOKBACK_DAYS}")
    if settings.sqlite_synchronous not in ("normal", "full"):
        raise ConfigError(f"sqlite_synchronous must be 'normal' or 'full', got {settings.sqlite_synchronous!r}")
    if settings.postgres_pool_size < 1 or settings.postgres_statement_timeout_seconds <= 0:
        raise ConfigError("postgres_pool_size must be at least 1 and postgres_statement_timeout_seconds positive")
    if settings.queue_lease_seconds is not None and settings.queue_lease_seconds <= 0:
        raise ConfigError("queue_lease_seconds must be positive")
    _check_search(settings)
    _check_coding(settings)
    settings.tz()  # fail early on an unknown zone
    return settings


def _check_search(settings: Settings) -> None:
    if settings.search_fusion not in ("rrf", "weighted"):
        raise ConfigError(f"search_fusion must be 'rrf' or 'weighted', got {settings.search_fusion!r}")
    if min(settings.search_keyword_weight, settings.search_vector_weight, settings.search_context_weight,
           settings.search_reply_support, settings.search_next_support) < 0:
        raise ConfigError("search weights must not be negative")
    for name in ("search_min_score", "search_inject_min_score"):
        value = getattr(settings, name)
        if value is not None and not 0.0 <= value <= 1.0:
            raise ConfigError(f"{name} must be within [0, 1]")
    if settings.search_mmr_lambda is not None and not 0.0 <= settings.search_mmr_lambda <= 1.0:
        raise ConfigError("search_mmr_lambda must be within [0, 1]")
    if settings.search_recency_half_life_days is not None and settings.search_recency_half_life_days <= 0:
        raise ConfigError("search_recency_half_life_days must be positive")
    for name in ("search_candidates", "search_keyword_budget", "search_exact_max_items", "search_float_max_items",
                 "search_shortlist", "search_max_part_vectors"):
        if getattr(settings, name) < 1:
            raise ConfigError(f"{name} must be at least 1")


def _check_coding(settings: Settings) -> None:
    for name in ("coding_agent_name", "coding_person"):
        value = getattr(settings, name)
        try:
            if value is not None:
                validate.name(value, name)
        except InvalidInput as exc:
            raise ConfigError(str(exc)) from None
    unknown = [c for c in _category_list(settings.coding_person_categories) if c not in CATEGORIES]
    if unknown:
        raise ConfigError(f"coding_person_categories: unknown {', '.join(map(repr, unknown))}; known:"
                          f" {', '.join(CATEGORIES)}")
    if min(settings.coding_start_tokens, settings.coding_prompt_tokens) < 1:
        raise ConfigError("coding_start_tokens and coding_prompt_tokens must be at least 1")


def _category_list(text: str | None) -> tuple[str, ...]:
    return tuple(dict.fromkeys(part.strip() for part in (text or "").split(",") if part.strip()))


def _fitted_name(text: str) -> str | None:
    """``text`` as a user id (what :func:`tiermem.validate.name` accepts), ``None`` if nothing is left."""
    fitted = re.sub(r"\.{2,}", ".", re.sub(r"[^A-Za-z0-9_.@-]", "_", text)).lstrip("_.@-")[:64]
    try:
        return validate.name(fitted, "user name")
    except InvalidInput:
        return None


def read_file(root: Path) -> dict[str, Any]:
    """The ``[tiermem]`` table (or top level) of ``<root>/tiermem.toml``; ``{}`` if absent."""
    path = root / CONFIG_FILE
    if not path.is_file():
        return {}
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: {exc}") from exc
    table = data.get("tiermem", data)
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [tiermem] must be a table")
    if table is not data and "prices" in data and "prices" not in table:  # [prices."m"] beside [tiermem]
        table = {**table, "prices": data["prices"]}
    return table


def load_settings(
    root: Path,
    overrides: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
) -> Settings:
    """Merge defaults, the config file, the environment and ``overrides`` (``None`` = not given)."""
    env = os.environ if environ is None else environ
    merged: dict[str, Any] = {}
    layers: list[tuple[str, Mapping[str, Any]]] = [
        (str(root / CONFIG_FILE), read_file(root)),
        ("environment", {k[len(ENV_PREFIX):].lower(): v for k, v in env.items() if k.startswith(ENV_PREFIX)}),
        ("arguments", {k: v for k, v in (overrides or {}).items() if v is not None}),
    ]
    for source, layer in layers:
        for key, value in layer.items():
            if key not in _FIELDS:
                if source == "environment":
                    continue  # TIERMEM_HOME, TIERMEM_USER ... belong to the CLI
                raise ConfigError(f"unknown setting {key!r} ({source})")
            merged[key] = _coerce(key, value, source)
    return _check(Settings(**merged))
