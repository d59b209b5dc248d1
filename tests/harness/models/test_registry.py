"""The provider/model registry behind route resolution and `rp models list`."""

from __future__ import annotations

import pytest

from roleplay.errors import RpError
from roleplay.harness.models.registry import PROVIDERS, get_provider, is_configured, provider_for_model


def test_deepseek_current_and_deprecated_names():
    deepseek = get_provider("deepseek")
    assert deepseek.default_model == "deepseek-flash"
    current = [m.name for m in deepseek.models if m.deprecated is None]
    deprecated = {m.name: m.alias_of for m in deepseek.models if m.deprecated}
    assert current == ["deepseek-flash", "deepseek-v4-pro"]
    assert deprecated == {"deepseek-v4-flash": "deepseek-flash", "deepseek-chat": "deepseek-flash", "deepseek-reasoner": "deepseek-flash"}
    assert deepseek.model("deepseek-flash").context_window == 1_000_000


def test_demo_is_marked_and_always_configured():
    demo = PROVIDERS["demo"]
    assert demo.demo and "not a real model" in demo.label and is_configured(demo, {})


def test_configuration_comes_from_env():
    assert not is_configured(PROVIDERS["deepseek"], {})
    assert is_configured(PROVIDERS["deepseek"], {"DEEPSEEK_API_KEY": "k"})
    assert not is_configured(PROVIDERS["openai"], {"DEEPSEEK_API_KEY": "k"})
    assert is_configured(PROVIDERS["openai"], {"OPENAI_BASE_URL": "http://localhost:11434/v1"})


def test_bare_model_names_find_their_provider():
    assert provider_for_model("deepseek-v4-pro") == "deepseek"
    # OpenAI-compatible names are examples, not a claim on the name.
    assert provider_for_model("gpt-4o-mini") is None


def test_unknown_provider():
    with pytest.raises(RpError) as err:
        get_provider("anthropic")
    assert err.value.code == "model.unknown_provider" and "deepseek" in err.value.message


def test_context_window_is_known_per_listed_model_and_the_built_model_carries_it():
    from roleplay.harness.models.registry import context_window
    from roleplay.harness.models.routes import Route, build_model, resolve_route, route_context_window

    assert context_window("deepseek", "deepseek-v4-pro") == 1_000_000
    assert context_window("deepseek", "deepseek-chat") == 1_000_000  # a deprecated alias
    assert context_window("openai", "some-local-model") is None and context_window("demo", "demo") is None
    env = {"DEEPSEEK_API_KEY": "k", "OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}
    assert build_model(Route("deepseek", "deepseek-flash"), env).capabilities.context_window == 1_000_000
    # A route's own window beats the listed one, for the request budget and the capability flag.
    small = resolve_route("deepseek/deepseek-flash", {"context_window": 32_000}, env)
    assert route_context_window(small) == 32_000
    assert build_model(small, env).capabilities.context_window == 32_000
    assert build_model(Route("openai", "llama3", context_window=8192), env).capabilities.context_window == 8192
    with pytest.raises(RpError) as err:
        resolve_route("demo", {"context_window": 0}, env)
    assert err.value.code == "model.bad_route" and err.value.pointer == "/context_window"
