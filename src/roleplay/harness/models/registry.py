"""Known providers and models: what ``rp models list`` shows and what route resolution checks.

Model limits change with each model generation (DeepSeek went from 128K to 1M context), so they
are data here rather than constants in provider code. OpenAI-compatible endpoints accept any
model name; the names listed for them are examples, not a whitelist.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, TypedDict

from roleplay.errors import RpError

from .deepseek import DEEPSEEK_BASE_URL

OPENAI_BASE_URL = "https://api.openai.com/v1"


@dataclass(frozen=True)
class ModelInfo:
    name: str
    description: str
    context_window: int | None = None
    max_output_tokens: int | None = None
    # Why and since when the name is deprecated; None for current names.
    deprecated: str | None = None
    alias_of: str | None = None


@dataclass(frozen=True)
class ProviderInfo:
    name: str
    label: str
    default_model: str
    models: tuple[ModelInfo, ...]
    key_env: str | None = None
    base_url_env: str | None = None
    model_env: str | None = None
    default_base_url: str | None = None
    # Accepts model names beyond the listed ones (any OpenAI-compatible server).
    open_models: bool = False
    demo: bool = False
    test_double: bool = False

    def model(self, name: str) -> ModelInfo | None:
        return next((m for m in self.models if m.name == name), None)


class _Limits(TypedDict):
    context_window: int
    max_output_tokens: int


_DEEPSEEK_LIMITS: _Limits = {"context_window": 1_000_000, "max_output_tokens": 384_000}
_DEPRECATED_ALIAS = "alias retired 2026-07-24 15:59 UTC"

PROVIDERS: dict[str, ProviderInfo] = {
    p.name: p
    for p in (
        ProviderInfo(
            name="deepseek",
            label="DeepSeek",
            default_model="deepseek-flash",
            key_env="DEEPSEEK_API_KEY",
            base_url_env="DEEPSEEK_BASE_URL",
            model_env="DEEPSEEK_MODEL",
            default_base_url=DEEPSEEK_BASE_URL,
            models=(
                ModelInfo("deepseek-flash", "DeepSeek-V4.1-Flash, thinking by default", **_DEEPSEEK_LIMITS),
                ModelInfo("deepseek-v4-pro", "DeepSeek-V4-Pro, thinking by default", **_DEEPSEEK_LIMITS),
                ModelInfo(
                    "deepseek-v4-flash",
                    "older name, served by V4.1-Flash",
                    deprecated="older name, still served",
                    alias_of="deepseek-flash",
                    **_DEEPSEEK_LIMITS,
                ),
                ModelInfo(
                    "deepseek-chat",
                    "V4-Flash without thinking",
                    deprecated=_DEPRECATED_ALIAS,
                    alias_of="deepseek-flash",
                    **_DEEPSEEK_LIMITS,
                ),
                ModelInfo(
                    "deepseek-reasoner",
                    "V4-Flash with thinking",
                    deprecated=_DEPRECATED_ALIAS,
                    alias_of="deepseek-flash",
                    **_DEEPSEEK_LIMITS,
                ),
            ),
        ),
        ProviderInfo(
            name="openai",
            label="OpenAI-compatible (OpenAI, OpenRouter, Ollama, vLLM, llama.cpp…)",
            default_model="gpt-4o-mini",
            key_env="OPENAI_API_KEY",
            base_url_env="OPENAI_BASE_URL",
            model_env="OPENAI_MODEL",
            default_base_url=OPENAI_BASE_URL,
            open_models=True,
            models=(
                ModelInfo("gpt-4o-mini", "example; any model the endpoint serves works"),
                ModelInfo("gpt-4o", "example; any model the endpoint serves works"),
            ),
        ),
        ProviderInfo(
            name="demo",
            label="demo (offline, not a real model)",
            default_model="demo",
            demo=True,
            models=(ModelInfo("demo", "offline demo: deterministic template replies, no key needed"),),
        ),
        ProviderInfo(
            name="scripted",
            label="scripted (test double)",
            default_model="scripted",
            test_double=True,
            open_models=True,
            models=(ModelInfo("scripted", "replies queued by a test; empty when built from a route"),),
        ),
    )
}


def get_provider(name: str) -> ProviderInfo:
    try:
        return PROVIDERS[name]
    except KeyError:
        raise RpError(
            "model.unknown_provider",
            f"unknown model provider {name!r}; known: {', '.join(PROVIDERS)}",
            details={"provider": name},
        ) from None


def provider_for_model(name: str) -> str | None:
    """The provider that lists this model name, for specs given without a provider."""
    for provider in PROVIDERS.values():
        if provider.model(name) is not None and not provider.open_models:
            return provider.name
    return None


def context_window(provider: str, model: str) -> int | None:
    """The context window of a listed model in tokens, or None (an unlisted model, or one whose
    window we do not know: the demo, any model of an OpenAI-compatible server)."""
    info = PROVIDERS[provider].model(model) if provider in PROVIDERS else None
    if info is not None and info.context_window is None and info.alias_of is not None:
        info = PROVIDERS[provider].model(info.alias_of)
    return info.context_window if info is not None else None


def is_configured(provider: ProviderInfo, env: Mapping[str, str]) -> bool:
    if provider.demo or provider.test_double:
        return True
    if provider.key_env and env.get(provider.key_env):
        return True
    # A custom OpenAI-compatible base URL (Ollama, llama.cpp) needs no key.
    return bool(provider.open_models and provider.base_url_env and env.get(provider.base_url_env))
