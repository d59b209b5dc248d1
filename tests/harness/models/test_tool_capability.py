"""Models that cannot call tools: the route options ``?tools=off`` / ``?json=off`` and their
capability flags, and the provider refusals recognised as ``model.tools_unsupported``."""

from __future__ import annotations

import httpx2
import openai
import pytest

from roleplay.errors import RpError
from roleplay.harness.models.failures import is_retryable, map_error
from roleplay.harness.models.routes import Route, build_model, parse_route_spec, resolve_route
from roleplay.harness.models.types import Capabilities, ChatMessage, ModelRequest, ToolSpec, complete
from roleplay.testing.fake_openai import FakeError, serve_fake_openai

REQUEST = httpx2.Request("POST", "http://127.0.0.1/v1/chat/completions")
ENV = {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}
pytestmark = pytest.mark.anyio


def status_error(status: int, message: str) -> openai.APIStatusError:
    return openai.APIStatusError(f"Error code: {status}", response=httpx2.Response(status, request=REQUEST), body={"message": message})


@pytest.mark.parametrize(
    "spec, tools, json_mode, shown",
    [
        ("openai/llama3?tools=off", False, None, "openai/llama3?tools=off"),
        ("openai/meta-llama/llama-3-8b/low?tools=off&json=off", False, False, "openai/meta-llama/llama-3-8b/low?tools=off&json=off"),
        ("openai/qwen?json=OFF&tools=on", True, False, "openai/qwen?tools=on&json=off"),
        ("demo?tools=off", False, None, "demo/demo?tools=off"),
        ("openai/gpt-4o-mini", None, None, "openai/gpt-4o-mini"),
    ],
)
def test_route_options_parse_and_round_trip(spec: str, tools: bool | None, json_mode: bool | None, shown: str) -> None:
    route = parse_route_spec(spec, ENV)
    assert (route.tools, route.json_mode, route.spec) == (tools, json_mode, shown)
    assert parse_route_spec(route.spec, ENV) == route
    assert "?" not in route.model


@pytest.mark.parametrize("spec", ["openai/x?tool=off", "openai/x?tools=no", "openai/x?tools", "openai/x?tools=off&"])
def test_a_bad_route_option_is_refused_with_the_accepted_words(spec: str) -> None:
    with pytest.raises(RpError) as caught:
        parse_route_spec(spec, ENV)
    assert caught.value.code == "model.bad_route" and "tools=on|off" in caught.value.message


def test_resolve_route_keeps_the_options_and_the_log_records_them() -> None:
    route = resolve_route("openai/fake?tools=off", {"max_output_tokens": 100}, ENV)
    assert route.tools is False and route.max_output_tokens == 100
    assert route.to_dict()["tools"] is False and "json_mode" not in route.to_dict()


def test_built_models_carry_the_route_flags() -> None:
    assert build_model(Route("openai", "fake"), ENV).capabilities.supports_tools is True
    local = build_model(parse_route_spec("openai/fake?tools=off&json=off", ENV), ENV)
    assert (local.capabilities.supports_tools, local.capabilities.supports_json_mode) == (False, False)
    assert local.capabilities.max_tokens_param == "max_tokens"  # the provider's other flags stay
    assert build_model(parse_route_spec("demo?tools=off"), {}).capabilities.supports_tools is False
    assert Capabilities().supports_tools and Capabilities().supports_json_mode


@pytest.mark.parametrize(
    "status, message",
    [
        (400, "registry.ollama.ai/library/gemma3:4b does not support tools"),  # Ollama
        (500, "tools param requires --jinja flag"),  # llama.cpp without --jinja
        (500, "Unsupported param: tools"),  # older llama.cpp
        (400, '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'),  # vLLM
        (404, "No endpoints found that support tool use. To learn more about provider routing, visit: …"),  # OpenRouter
    ],
)
def test_provider_refusals_of_tools_are_recognised_and_not_retried(status: int, message: str) -> None:
    exc = status_error(status, message)
    err = map_error(exc, provider="openai", model="m", base_url="http://x", caps=Capabilities(), api_key=None, attempts=1)
    assert err.code == "model.tools_unsupported" and "openai/m?tools=off" in err.message
    assert not is_retryable(exc)


def test_unrelated_errors_keep_their_codes() -> None:
    for status, message, code in [(400, "messages must not be empty", "model.bad_request"), (500, "boom", "model.server_error")]:
        err = map_error(
            status_error(status, message), provider="p", model="m", base_url="http://x", caps=Capabilities(), api_key=None, attempts=1
        )
        assert err.code == code


async def test_a_refused_tool_request_fails_once_through_the_sdk() -> None:
    tools = [ToolSpec("lookup", "look something up", {"type": "object", "properties": {}})]
    with serve_fake_openai(flavor="openai") as fake:
        fake.enqueue(FakeError(500, "tools param requires --jinja flag", type="server_error"))
        model = build_model(Route("openai", "fake"), {"OPENAI_BASE_URL": fake.base_url})
        with pytest.raises(RpError) as caught:
            await complete(model, ModelRequest([ChatMessage("user", "hi")], tools))
        await model.aclose()  # type: ignore[attr-defined]
    assert caught.value.code == "model.tools_unsupported" and len(fake.chat_requests) == 1  # no retries
