"""Route specs, resolution from settings and env, and building models from routes."""

from __future__ import annotations

import pytest

from roleplay.errors import RpError
from roleplay.harness.models.demo import DemoModel
from roleplay.harness.models.openai_compat import OpenAICompatModel
from roleplay.harness.models.routes import Route, build_model, deprecation_note, parse_route_spec, resolve_route
from roleplay.harness.models.scripted import ScriptedModel

DS = {"DEEPSEEK_API_KEY": "sk-ds"}
OA = {"OPENAI_API_KEY": "sk-oa"}


@pytest.mark.parametrize(
    "spec, route",
    [
        ("deepseek/deepseek-flash", Route("deepseek", "deepseek-flash")),
        ("deepseek/deepseek-v4-pro/max", Route("deepseek", "deepseek-v4-pro", "max")),
        ("openai/gpt-4o-mini", Route("openai", "gpt-4o-mini")),
        ("openai/meta-llama/llama-3-8b", Route("openai", "meta-llama/llama-3-8b")),
        ("openai/meta-llama/llama-3-8b/low", Route("openai", "meta-llama/llama-3-8b", "low")),
        ("deepseek", Route("deepseek", "deepseek-flash")),
        ("demo", Route("demo", "demo")),
        ("scripted", Route("scripted", "scripted")),
        ("deepseek-v4-pro", Route("deepseek", "deepseek-v4-pro")),
    ],
)
def test_parse_specs(spec, route):
    assert parse_route_spec(spec, {}) == route


def test_bare_unknown_name_goes_to_the_configured_provider():
    assert parse_route_spec("qwen2.5:7b", {"OPENAI_BASE_URL": "http://localhost:11434/v1"}) == Route("openai", "qwen2.5:7b")
    with pytest.raises(RpError) as err:
        parse_route_spec("qwen2.5:7b", {})
    assert err.value.code == "model.not_configured"


@pytest.mark.parametrize(
    "spec, code", [("", "model.bad_route"), ("mistral/large", "model.unknown_provider"), ("openai/a//b", "model.bad_route")]
)
def test_bad_specs(spec, code):
    with pytest.raises(RpError) as err:
        parse_route_spec(spec, {})
    assert err.value.code == code


def test_defaults_from_env():
    assert resolve_route(None, None, DS) == Route("deepseek", "deepseek-flash")
    assert resolve_route(None, None, {**DS, **OA}).provider == "deepseek"
    assert resolve_route(None, None, OA) == Route("openai", "gpt-4o-mini")
    assert resolve_route(None, None, {"OPENAI_BASE_URL": "http://h/v1", "OPENAI_MODEL": "llama3"}) == Route("openai", "llama3")
    assert resolve_route(None, None, {**DS, "DEEPSEEK_MODEL": "deepseek-v4-pro"}).model == "deepseek-v4-pro"
    assert resolve_route(None, None, {**DS, "RP_MODEL": "demo"}).provider == "demo"


def test_nothing_configured_says_what_to_do():
    with pytest.raises(RpError) as err:
        resolve_route(None, None, {})
    assert err.value.code == "model.not_configured"
    assert "DEEPSEEK_API_KEY" in err.value.message and "--model demo" in err.value.message


def test_precedence_spec_then_settings_then_env():
    settings = {"model": "openai/gpt-4o", "reasoning_effort": "low", "max_output_tokens": 2048, "base_url": "http://proxy/v1"}
    assert resolve_route(None, settings, DS) == Route("openai", "gpt-4o", "low", 2048, "http://proxy/v1")
    assert resolve_route("deepseek/deepseek-flash/max", settings, DS) == Route("deepseek", "deepseek-flash", "max", 2048, "http://proxy/v1")


@pytest.mark.parametrize(
    "settings, pointer",
    [
        ({"model": 3}, "/model"),
        ({"reasoning_effort": "huge"}, "/reasoning_effort"),
        ({"max_output_tokens": 0}, "/max_output_tokens"),
        ({"max_output_tokens": True}, "/max_output_tokens"),
        ({"base_url": "ftp://x"}, "/base_url"),
        ({"temperature": 1}, "/temperature"),
    ],
)
def test_bad_settings_point_at_the_field(settings, pointer):
    with pytest.raises(RpError) as err:
        resolve_route("demo", settings, {})
    assert err.value.pointer == pointer


def test_build_models():
    demo = build_model(Route("demo", "demo"), {})
    assert isinstance(demo, DemoModel) and "not a real model" in demo.label
    assert isinstance(build_model(Route("scripted", "scripted"), {}), ScriptedModel)
    ds = build_model(Route("deepseek", "deepseek-flash", max_output_tokens=1000), {**DS, "DEEPSEEK_BASE_URL": "http://127.0.0.1:9/"})
    assert isinstance(ds, OpenAICompatModel) and ds.provider == "deepseek"
    assert ds.base_url == "http://127.0.0.1:9" and ds.beta_base_url == "http://127.0.0.1:9/beta"
    assert ds.default_max_tokens == 1000 and "sk-ds" not in repr(ds)


def test_openai_official_and_local_servers_differ_in_max_tokens_param():
    official = build_model(Route("openai", "gpt-4o-mini"), OA)
    local = build_model(Route("openai", "llama3"), {"OPENAI_BASE_URL": "http://localhost:11434/v1"})
    assert official.base_url == "https://api.openai.com/v1" and official.capabilities.max_tokens_param == "max_completion_tokens"
    assert local.capabilities.max_tokens_param == "max_tokens" and "localhost" in local.label
    # OpenAI's reasoning models refuse temperature and the penalties; a local server takes them.
    assert not official.capabilities.supports_sampling_in_thinking and local.capabilities.supports_sampling_in_thinking


@pytest.mark.parametrize("route, env", [(Route("deepseek", "deepseek-flash"), OA), (Route("openai", "gpt-4o"), DS)])
def test_build_without_key_is_not_configured(route, env):
    with pytest.raises(RpError) as err:
        build_model(route, env)
    assert err.value.code == "model.not_configured" and "--model demo" in err.value.message


def test_deprecation_note():
    assert (
        deprecation_note(Route("deepseek", "deepseek-chat"))
        == "deepseek/deepseek-chat: alias retired 2026-07-24 15:59 UTC; use deepseek/deepseek-flash"
    )
    assert deprecation_note(Route("deepseek", "deepseek-flash")) is None
    assert deprecation_note(Route("openai", "anything")) is None


# -- credentials in a base URL are never stored or shown ----------------------------------------------

SECRET_URL_PARTS = ("alice", "s3cret", "tok123")


def credentialed(url: str) -> str:
    """``url`` with userinfo and a query token, as users paste them into OPENAI_BASE_URL."""
    scheme, rest = url.split("://", 1)
    return f"{scheme}://alice:s3cret@{rest}?token=tok123"


def test_route_records_labels_and_reprs_redact_the_base_url():
    url = credentialed("http://127.0.0.1:9/v1")
    route = resolve_route("openai/llama3", {"base_url": url}, {})
    model = build_model(route, {})
    shown = " ".join([str(route.to_dict()), model.label, repr(model)])
    assert not any(part in shown for part in SECRET_URL_PARTS), shown
    assert "http://***@127.0.0.1:9/v1?token=***" in model.label
    assert build_model(resolve_route("openai/llama3", None, {"OPENAI_BASE_URL": url}), {"OPENAI_BASE_URL": url}).label == model.label


@pytest.mark.anyio
async def test_the_stored_model_request_route_carries_no_credentials(store):
    from roleplay.harness.loop import AgentLoop, AgentSpec
    from roleplay.harness.prompts import PromptAssembly, PromptSection
    from roleplay.harness.sessions import SessionService
    from roleplay.harness.tools import ToolRegistry
    from roleplay.testing.fake_openai import serve_fake_openai

    service = SessionService(store)
    with serve_fake_openai(strict=True) as fake:
        fake.enqueue("hello")
        # Userinfo only: the SDK cannot send a request through a base URL with a query string.
        url = fake.base_url.replace("http://", "http://alice:s3cret@")
        model = build_model(resolve_route("openai/llama3", None, {"OPENAI_BASE_URL": url}), {"OPENAI_BASE_URL": url})
        spec = AgentSpec(prompt=PromptAssembly([PromptSection("identity", "Be brief.", 0)]), tools=ToolRegistry([]))
        sid = (await service.create("chat")).id
        result = await AgentLoop(service, model, spec).run_turn(sid, "hi")
        await model.aclose()
    assert result.outcome == "completed"
    (request,) = [e for e in await service.events(sid) if e.type == "model/request"]
    assert request.payload["route"]["label"] == f"llama3 via {fake.base_url.replace('http://', 'http://***@')}"
    stored = str([e.to_dict() for e in await service.events(sid)])
    assert "s3cret" not in stored and "alice" not in stored


# Environment values escape the argument check: a stray byte arrives as a lone surrogate, a pasted
# key may carry a curly quote. Each is refused with a code before anything is sent or stored.
@pytest.mark.parametrize(
    "env, code, pointer",
    [
        ({"RP_MODEL": "deepseek/de\udcffmo", **DS}, "model.bad_route", "/model"),
        ({"DEEPSEEK_MODEL": "de\udcffmo", **DS}, "model.bad_route", "/model"),
    ],
)
def test_route_names_that_are_not_text_are_refused(env, code, pointer):
    with pytest.raises(RpError) as info:
        resolve_route(None, None, env)
    assert (info.value.code, info.value.pointer) == (code, pointer)
    assert "not valid UTF-8" in info.value.message


@pytest.mark.parametrize(
    "route, env, name, offset",
    [
        (Route("deepseek", "deepseek-flash"), {"DEEPSEEK_API_KEY": "sk-\udcffab"}, "DEEPSEEK_API_KEY", 3),
        (Route("openai", "gpt-4o-mini"), {"OPENAI_API_KEY": "sk-ab\u201d"}, "OPENAI_API_KEY", 5),  # a pasted curly quote
        (Route("openai", "gpt-4o-mini"), {"OPENAI_API_KEY": "sk-ab\n"}, "OPENAI_API_KEY", 5),
        (Route("openai", "gpt-4o-mini"), {"OPENAI_BASE_URL": "http://h\udcff/v1"}, "OPENAI_BASE_URL", 8),
    ],
)
def test_keys_and_base_urls_an_http_request_cannot_carry_are_refused(route, env, name, offset):
    with pytest.raises(RpError) as info:
        build_model(route, env)
    assert info.value.code == "model.bad_environment"
    assert info.value.details == {"variable": name, "offset": offset}
    assert "sk" not in info.value.message  # a key is never echoed
