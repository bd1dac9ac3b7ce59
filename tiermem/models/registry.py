"""Providers register a factory under a name; ``"openai:gpt-4o-mini"`` picks ``openai``.

Built-in providers register through the same :func:`register_llm` / :func:`register_embedder`
hooks a plugin would use, so there is no if/elif over provider names anywhere.
Factories are imported lazily: a provider's SDK loads only when that provider is chosen.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tiermem.errors import ConfigError
from tiermem.models.protocols import ChatModel, Embedder


@dataclass(frozen=True)
class ProviderOptions:
    """What a factory may use besides the model name."""

    base_url: str | None = None
    api_key: str | None = None
    timeout: float = 60.0
    max_retries: int = 3
    extra: dict[str, Any] | None = None
    #: the model id the store's vector index was built with (``None``: no vectors yet); a factory
    #: may resolve a bare alias (plain ``local``) to it, so a new default never strands old vectors
    stored_model: str | None = None


LLMFactory = Callable[[str, ProviderOptions], ChatModel | None]
EmbedderFactory = Callable[[str, ProviderOptions], Embedder]

_LLMS: dict[str, LLMFactory | str] = {}
_EMBEDDERS: dict[str, EmbedderFactory | str] = {}


def register_llm(prefix: str, factory: LLMFactory | str) -> None:
    """Register an LLM factory (or ``"module:function"`` to import lazily) under ``prefix``."""
    _LLMS[prefix] = factory


def register_embedder(prefix: str, factory: EmbedderFactory | str) -> None:
    """Register an embedder factory (or ``"module:function"``) under ``prefix``."""
    _EMBEDDERS[prefix] = factory


def _split(table: dict[str, Any], spec: object, kind: str) -> tuple[str, str]:
    """``(prefix, model)`` of ``spec``; :class:`ConfigError` when no provider is registered under it."""
    if not isinstance(spec, str) or not spec.strip():
        raise ConfigError(f"{kind} must be a provider name such as 'openai:MODEL', got {spec!r}")
    prefix, _, model = spec.strip().partition(":")
    if prefix not in table:
        known = ", ".join(sorted(table))
        setting = "TIERMEM_LLM" if kind == "llm" else "TIERMEM_EMBEDDER"
        raise ConfigError(f"unknown {kind} provider {prefix!r} (known: {known}; set by {kind}= or {setting})")
    return prefix, model


def check_names(llm: str | None, embedder: str | None) -> None:
    """Raise :class:`ConfigError` unless each name given picks a registered provider.

    Only the prefix is checked (no SDK is imported, nothing is built): ``Memory`` calls this when
    it opens, so a typo fails at once; a missing API key fails when the model is first needed.
    """
    if llm is not None:
        _split(_LLMS, llm, "llm")
    if embedder is not None:
        _split(_EMBEDDERS, embedder, "embedder")


def _resolve(table: dict[str, Any], spec: str, kind: str) -> tuple[Callable[..., Any], str]:
    prefix, model = _split(table, spec, kind)
    factory = table[prefix]
    if isinstance(factory, str):
        module_name, _, attr = factory.partition(":")
        factory = getattr(importlib.import_module(module_name), attr)
        table[prefix] = factory
    return factory, model


def make_llm(spec: str, options: ProviderOptions) -> ChatModel | None:
    """Build the chat model named by ``spec``; ``"none"`` gives ``None``."""
    factory, model = _resolve(_LLMS, spec, "llm")
    result: ChatModel | None = factory(model, options)
    return result


def make_embedder(spec: str, options: ProviderOptions) -> Embedder:
    """Build the embedder named by ``spec`` (``local``, ``hash``, ``openai:MODEL``, ...)."""
    factory, model = _resolve(_EMBEDDERS, spec, "embedder")
    result: Embedder = factory(model, options)
    return result


def _no_llm(model: str, options: ProviderOptions) -> None:
    return None


register_llm("none", _no_llm)
register_llm("openai", "tiermem.models.openai_chat:make_openai")
register_llm("openai-compatible", "tiermem.models.openai_chat:make_openai_compatible")
register_llm("anthropic", "tiermem.models.anthropic_chat:make_anthropic")
register_embedder("local", "tiermem.embedders.local:create_local_embedder")
register_embedder("hash", "tiermem.embedders.hashing:create_hash_embedder")
register_embedder("openai", "tiermem.embedders.openai:create_openai_embedder")
register_embedder("openai-compatible", "tiermem.embedders.openai:create_compatible_embedder")
