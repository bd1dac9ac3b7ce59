"""The ``prices`` setting: USD per million tokens, per ``provider:model``.

In ``tiermem.toml`` it is the one nested table the config loader knows::

    [prices."openai:gpt-4o-mini"]
    input_per_mtok = 0.15
    output_per_mtok = 0.60

In the environment, ``TIERMEM_PRICES`` holds the same as JSON; as an argument, a dict. Anything
else (an unknown key, a negative or non-numeric price) is a :class:`~tiermem.errors.ConfigError`.
Imported by :mod:`tiermem.config`, so it imports nothing heavy.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from tiermem.errors import ConfigError

PRICE_KEYS = ("input_per_mtok", "output_per_mtok")


@dataclass(frozen=True)
class Price:
    """USD per million prompt (input) and completion (output) tokens."""

    input_per_mtok: float
    output_per_mtok: float

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (prompt_tokens * self.input_per_mtok + completion_tokens * self.output_per_mtok) / 1_000_000


@dataclass(frozen=True)
class Prices(Mapping[str, Price]):
    """An immutable (hashable, like every setting) map of ``provider:model`` to :class:`Price`."""

    entries: tuple[tuple[str, Price], ...] = ()

    def __getitem__(self, key: str) -> Price:
        for name, price in self.entries:
            if name == key:
                return price
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return iter(name for name, _ in self.entries)

    def __len__(self) -> int:
        return len(self.entries)

    def for_model(self, model_id: str) -> Price | None:
        """The price of ``model_id`` (``provider:model``); an embedder's ``@<dims>d`` suffix is ignored."""
        found = self.get(model_id)
        if found is None and "@" in model_id:
            found = self.get(model_id.rsplit("@", 1)[0])
        return found

    def to_dict(self) -> dict[str, dict[str, float]]:
        return {name: {"input_per_mtok": p.input_per_mtok, "output_per_mtok": p.output_per_mtok}
                for name, p in self.entries}


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{where} must be a number, got {value!r}")
    number = float(value)
    if math.isnan(number) or math.isinf(number) or number < 0:
        raise ConfigError(f"{where} must be a finite number >= 0, got {value!r}")
    return number


def parse_prices(value: Any, source: str) -> Prices:
    """``value`` (a table, a dict, JSON text, or :class:`Prices`) as :class:`Prices`."""
    if isinstance(value, Prices):
        return value
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else {}
        except ValueError as exc:
            raise ConfigError(f"prices ({source}) must be a JSON object of tables: {exc}") from exc
    if not isinstance(value, Mapping):
        raise ConfigError(f"prices ({source}) must be a table of models, e.g. [prices.\"openai:gpt-4o-mini\"]")
    out: list[tuple[str, Price]] = []
    for name, table in value.items():
        where = f'prices."{name}" ({source})'
        if not isinstance(name, str) or not name.strip():
            raise ConfigError(f"prices ({source}): a model name must be non-empty text, got {name!r}")
        if not isinstance(table, Mapping):
            raise ConfigError(f"{where} must be a table with {' and '.join(PRICE_KEYS)}")
        unknown = sorted(set(table) - set(PRICE_KEYS))
        if unknown:
            raise ConfigError(f"unknown setting {unknown[0]!r} in {where} (known: {', '.join(PRICE_KEYS)})")
        missing = [key for key in PRICE_KEYS if key not in table]
        if missing:
            raise ConfigError(f"{where} needs {' and '.join(missing)}")
        out.append((name.strip(), Price(*(_number(table[key], f"{where}.{key}") for key in PRICE_KEYS))))
    return Prices(tuple(out))
