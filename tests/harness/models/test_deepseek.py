"""DeepSeek's flags, exercised through the real SDK against the DeepSeek-flavoured fake server."""

from __future__ import annotations

import pytest

from roleplay.errors import RpError
from roleplay.harness.models.deepseek import DEEPSEEK_BETA_BASE_URL, deepseek_model
from roleplay.harness.models.openai_compat import OpenAICompatModel
from roleplay.harness.models.types import ChatMessage, ModelRequest, ToolCall, ToolSpec, complete
from roleplay.testing.fake_openai import FakeError, FakeReply, serve_fake_openai

pytestmark = pytest.mark.anyio

KEY = "sk-deepseek-test-key-42"
LOOKUP = ToolSpec("lookup", "Look up lore", {"type": "object", "properties": {"q": {"type": "string"}}})
STRICT = ToolSpec(
    "set_mood",
    "Set the mood",
    {"type": "object", "properties": {"mood": {"type": "string"}}, "required": ["mood"], "additionalProperties": False},
    strict=True,
)


def ds(fake, model="deepseek-flash", **kw):
    return deepseek_model(model, api_key=KEY, base_url=fake.root_url, **kw)


async def test_reasoning_round_trip_on_tool_turns(fake_deepseek):
    fake_deepseek.enqueue(
        FakeReply(
            reasoning="The user wants lore; call lookup.", tool_calls=[{"id": "c7", "name": "lookup", "arguments": {"q": "dragons"}}]
        ),
        FakeReply(reasoning="Now answer.", text="Dragons sleep under the hill."),
    )
    model = ds(fake_deepseek)
    history = [ChatMessage("user", "Tell me about dragons")]
    first = await complete(model, ModelRequest(history, tools=[LOOKUP]))
    assert first.reasoning == "The user wants lore; call lookup."
    assert first.tool_calls == [ToolCall("c7", "lookup", '{"q": "dragons"}')]
    history += [
        ChatMessage("assistant", first.text, tool_calls=first.tool_calls, reasoning=first.reasoning),
        ChatMessage("tool", "Dragons: ancient, sleepy.", tool_call_id="c7"),
    ]
    second = await complete(model, ModelRequest(history, tools=[LOOKUP]))
    await model.aclose()
    assert second.text == "Dragons sleep under the hill." and second.reasoning == "Now answer."
    sent = fake_deepseek.chat_requests[1].body["messages"][1]
    assert sent["reasoning_content"] == "The user wants lore; call lookup."
    assert sent["tool_calls"][0]["id"] == "c7"


async def test_tool_turn_without_reasoning_is_sent_with_empty_field(fake_deepseek):
    fake_deepseek.enqueue("done")
    model = ds(fake_deepseek)
    history = [
        ChatMessage("user", "hi", name="alice"),
        ChatMessage("assistant", "Checking.", tool_calls=[ToolCall("c1", "lookup", "{}")]),
        ChatMessage("tool", "nothing", tool_call_id="c1"),
        ChatMessage("assistant", "Plain turn.", reasoning="old thoughts"),
        ChatMessage("user", "and?"),
    ]
    await complete(model, ModelRequest(history, tools=[LOOKUP]))
    await model.aclose()
    messages = fake_deepseek.chat_requests[0].body["messages"]
    assert messages[0] == {"role": "user", "content": "hi", "name": "alice"}
    assert messages[1]["reasoning_content"] == "" and messages[1]["content"] == "Checking."
    # Reasoning of turns without tool calls is not needed by the API and costs tokens.
    assert "reasoning_content" not in messages[3]


async def test_the_fake_enforces_the_rule_a_plain_provider_breaks(fake_deepseek):
    # Without DeepSeek's flag the history loses reasoning_content and the API answers 400.
    model = OpenAICompatModel(model="deepseek-flash", base_url=fake_deepseek.root_url, api_key=KEY, provider="deepseek")
    history = [
        ChatMessage("user", "x"),
        ChatMessage("assistant", "", tool_calls=[ToolCall("c1", "lookup", "{}")], reasoning="r"),
        ChatMessage("tool", "y", tool_call_id="c1"),
    ]
    with pytest.raises(RpError) as err:
        await complete(model, ModelRequest(history, tools=[LOOKUP]))
    await model.aclose()
    assert err.value.code == "model.bad_request"
    assert "reasoning_content in the thinking mode must be passed back" in err.value.message


async def test_strict_tools_use_the_beta_path(fake_deepseek):
    fake_deepseek.enqueue("calm", "plain")
    model = ds(fake_deepseek)
    await complete(model, ModelRequest([ChatMessage("user", "set it")], tools=[STRICT, LOOKUP]))
    await complete(model, ModelRequest([ChatMessage("user", "no strict")], tools=[LOOKUP]))
    await model.aclose()
    strict_req, plain_req = fake_deepseek.chat_requests
    assert strict_req.path == "/beta/chat/completions"
    assert strict_req.body["tools"][0]["function"]["strict"] is True
    assert "strict" not in strict_req.body["tools"][1]["function"]
    assert plain_req.path == "/chat/completions"


def test_real_endpoint_uses_the_documented_beta_url():
    model = deepseek_model(api_key=KEY)
    assert model.base_url == "https://api.deepseek.com"
    prepared = model.prepare(ModelRequest([ChatMessage("user", "x")], tools=[STRICT]))
    assert prepared.base_url == DEEPSEEK_BETA_BASE_URL


@pytest.mark.parametrize(
    "effort, thinking, sent",
    [
        ("minimal", "enabled", "low"),
        ("low", "enabled", "low"),
        ("medium", "enabled", "high"),
        ("high", "enabled", "high"),
        ("xhigh", "enabled", "high"),
        ("max", "enabled", "max"),
        ("ultra", "enabled", "max"),
        ("none", "disabled", None),
    ],
)
def test_effort_maps_to_thinking_and_reasoning_effort(effort, thinking, sent):
    prepared = deepseek_model(api_key=KEY).prepare(ModelRequest([ChatMessage("user", "x")], reasoning_effort=effort, max_tokens=512))
    assert prepared.kwargs["extra_body"]["thinking"] == {"type": thinking}
    assert prepared.kwargs.get("reasoning_effort") == sent
    assert prepared.kwargs["max_tokens"] == 512 and "max_completion_tokens" not in prepared.kwargs


async def test_effort_and_thinking_reach_the_wire(fake_deepseek):
    fake_deepseek.enqueue("ok")
    model = ds(fake_deepseek)
    await complete(model, ModelRequest([ChatMessage("user", "x")], reasoning_effort="ultra", extra={"user_id": "u1"}))
    await model.aclose()
    body = fake_deepseek.chat_requests[0].body
    assert body["thinking"] == {"type": "enabled"} and body["reasoning_effort"] == "max" and body["user_id"] == "u1"


async def test_forced_tool_choice_is_downgraded_in_thinking_mode(fake_deepseek):
    fake_deepseek.enqueue(FakeReply(tool_calls=[{"name": "lookup", "arguments": {"q": "x"}}]))
    model = ds(fake_deepseek)
    response = await complete(model, ModelRequest([ChatMessage("user", "x")], tools=[LOOKUP], tool_choice="required"))
    await model.aclose()
    assert fake_deepseek.chat_requests[0].body["tool_choice"] == "auto"
    assert response.warnings == ("tool_choice 'required' is not supported in thinking mode; sent 'auto' instead",)


async def test_forced_tool_choice_is_kept_without_thinking(fake_deepseek):
    fake_deepseek.enqueue(
        FakeReply(tool_calls=[{"name": "lookup", "arguments": {}}]), FakeReply(tool_calls=[{"name": "lookup", "arguments": {}}])
    )
    model = ds(fake_deepseek)
    await complete(model, ModelRequest([ChatMessage("user", "x")], tools=[LOOKUP], tool_choice={"name": "lookup"}, reasoning_effort="none"))
    legacy = ds(fake_deepseek, model="deepseek-chat")
    await complete(legacy, ModelRequest([ChatMessage("user", "x")], tools=[LOOKUP], tool_choice="required"))
    await model.aclose()
    await legacy.aclose()
    first, second = fake_deepseek.chat_requests
    assert first.body["tool_choice"] == {"type": "function", "function": {"name": "lookup"}}
    assert first.body["thinking"] == {"type": "disabled"}
    assert second.body["tool_choice"] == "required" and "thinking" not in second.body


async def test_cache_usage_fields(fake_deepseek):
    fake_deepseek.enqueue(FakeReply(text="hi", usage={"prompt_tokens": 1000, "prompt_cache_hit_tokens": 896}))
    model = ds(fake_deepseek)
    response = await complete(model, ModelRequest([ChatMessage("user", "x")]))
    await model.aclose()
    assert response.usage.cache_hit_tokens == 896 and response.usage.cache_miss_tokens == 104
    assert response.usage.prompt_tokens == 1000


async def test_context_overflow_message_is_recognised():
    with serve_fake_openai(flavor="deepseek", context_limit=50, strict=True) as fake:
        model = ds(fake)
        with pytest.raises(RpError) as err:
            await complete(model, ModelRequest([ChatMessage("user", "a long story " * 40)], max_tokens=8))
        await model.aclose()
    assert err.value.code == "model.context_overflow"
    assert err.value.details["limit"] == 50 and err.value.details["status"] == 400


async def test_model_not_exist_400_is_unknown_model():
    with serve_fake_openai(flavor="deepseek", models=["deepseek-flash"], strict=True) as fake:
        model = ds(fake, model="deepseek-v9")
        with pytest.raises(RpError) as err:
            await complete(model, ModelRequest([ChatMessage("user", "x")]))
        await model.aclose()
    assert err.value.code == "model.unknown_model" and err.value.details["status"] == 400


async def test_auth_failure_message_hides_the_key():
    with serve_fake_openai(flavor="deepseek", api_keys=["sk-other"], strict=True) as fake:
        model = ds(fake)
        with pytest.raises(RpError) as err:
            await complete(model, ModelRequest([ChatMessage("user", "x")]))
        await model.aclose()
    assert err.value.code == "model.auth" and KEY not in str(err.value)


async def test_images_are_refused_before_any_request(fake_deepseek):
    model = ds(fake_deepseek)
    blocks = [{"type": "image", "mediaType": "image/png", "data": "AAAA"}]
    with pytest.raises(RpError) as err:
        await complete(model, ModelRequest([ChatMessage("user", blocks)]))
    await model.aclose()
    assert err.value.code == "model.images_unsupported" and err.value.pointer == "/messages/0/content/0"
    assert fake_deepseek.chat_requests == []


async def test_scripted_overflow_error_and_label(fake_deepseek):
    fake_deepseek.enqueue(FakeError.context_overflow(limit=131072))
    model = ds(fake_deepseek)
    assert model.label == "DeepSeek deepseek-flash" and model.provider == "deepseek"
    with pytest.raises(RpError) as err:
        await complete(model, ModelRequest([ChatMessage("user", "x")]))
    await model.aclose()
    assert err.value.details["limit"] == 131072 and "131072" in err.value.message


SAMPLING = {"temperature": 0.65, "top_p": 0.9, "frequency_penalty": 0.2, "presence_penalty": 0.3}


def test_sampling_is_sent_without_thinking_and_left_out_with_a_warning_while_thinking():
    # DeepSeek accepts temperature and the penalties in thinking mode but ignores them.
    plain = deepseek_model(api_key=KEY).prepare(ModelRequest([ChatMessage("user", "x")], reasoning_effort="none", **SAMPLING))
    assert {k: plain.kwargs[k] for k in SAMPLING} == SAMPLING and not plain.warnings
    thinking = deepseek_model(api_key=KEY).prepare(ModelRequest([ChatMessage("user", "x")], reasoning_effort="high", temperature=0.65))
    assert "temperature" not in thinking.kwargs
    assert thinking.warnings == ["temperature not sent: this model ignores or refuses them while it thinks"]


def test_a_plain_openai_compatible_server_gets_the_sampling_even_while_thinking():
    model = OpenAICompatModel(model="local", base_url="http://127.0.0.1:9/v1", api_key="x")
    prepared = model.prepare(ModelRequest([ChatMessage("user", "x")], reasoning_effort="high", **SAMPLING))
    assert {k: prepared.kwargs[k] for k in SAMPLING} == SAMPLING and not prepared.warnings
