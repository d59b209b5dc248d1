"""The offline demo model: deterministic, labelled, policy-driven, loop-safe."""

from __future__ import annotations

import pytest

from roleplay.errors import RpError
from roleplay.harness.models.demo import DEMO_LABEL, DemoModel, DemoPolicies, reflect, trailing_tool_rounds
from roleplay.harness.models.types import ChatMessage, ChatModel, ModelRequest, ReasoningDelta, TextDelta, ToolCall, ToolSpec, complete

pytestmark = pytest.mark.anyio

LOOK = ToolSpec("look", "Look around", {"type": "object"})


def req(*messages: ChatMessage, **kw) -> ModelRequest:
    return ModelRequest(list(messages), **kw)


async def test_it_says_it_is_a_demo_and_quotes_the_user():
    model = DemoModel(policies=DemoPolicies())
    assert isinstance(model, ChatModel) and model.label == DEMO_LABEL and "demo" in model.label
    response = await complete(model, req(ChatMessage("user", "I open the heavy door")))
    assert response.text.startswith("[demo reply: offline, not a real model]")
    assert "“I open the heavy door”" in response.text
    assert response.provider == "demo" and response.usage.total_tokens > 0


async def test_same_request_same_reply_and_variation_comes_from_the_request():
    endings = ("The story waits", "the scene shifts", "the narrator nods", "the room falls quiet")
    used = set()
    for said in ["I wave", "I run", "I hide", "I sing", "I wait", "I laugh"]:
        a = await complete(DemoModel(policies=DemoPolicies()), req(ChatMessage("user", said)))
        b = await complete(DemoModel(policies=DemoPolicies()), req(ChatMessage("user", said)))
        assert a == b
        used |= {e for e in endings if e in a.text}
    # Different requests pick different templates (hash-derived), not one canned line.
    assert len(used) > 1


async def test_it_streams_deltas_and_optional_reasoning():
    events = [e async for e in DemoModel(policies=DemoPolicies()).stream(req(ChatMessage("user", "hello"), reasoning_effort="high"))]
    assert sum(isinstance(e, TextDelta) for e in events) >= 2
    assert any(isinstance(e, ReasoningDelta) for e in events)
    plain = [e async for e in DemoModel(policies=DemoPolicies()).stream(req(ChatMessage("user", "hello")))]
    assert not any(isinstance(e, ReasoningDelta) for e in plain)


async def test_policies_are_consulted_in_order_and_can_call_tools():
    policies = DemoPolicies()
    policies.register("silent", lambda r: None)
    policies.register("looker", lambda r: {"tool_calls": [{"name": "look", "arguments": {}}]})
    policies.register("never", lambda r: "unreachable")
    policies.register("first", lambda r: None, first=True)
    assert policies.names() == ["first", "silent", "looker", "never"]
    response = await complete(DemoModel(policies=policies), req(ChatMessage("user", "look"), tools=[LOOK]))
    assert [c.name for c in response.tool_calls] == ["look"] and response.tool_calls[0].id.startswith("demo_")


async def test_registering_a_name_again_replaces_it():
    policies = DemoPolicies()
    policies.register("p", lambda r: "old")
    policies.register("p", lambda r: "new")
    assert policies.names() == ["p"]
    assert (await complete(DemoModel(policies=policies), req(ChatMessage("user", "x")))).text == "new"
    policies.unregister("p")
    with pytest.raises(RpError) as err:
        policies.unregister("p")
    assert err.value.code == "model.demo_policy_unknown"


async def test_tool_calls_are_dropped_when_not_allowed():
    policies = DemoPolicies()
    policies.register("eager", lambda r: {"tool_calls": [{"name": "look", "arguments": {}}, {"name": "secret", "arguments": {}}]})
    model = DemoModel(policies=policies)
    offered = await complete(model, req(ChatMessage("user", "x"), tools=[LOOK]))
    assert [c.name for c in offered.tool_calls] == ["look"]  # "secret" was never offered
    for request in (req(ChatMessage("user", "x")), req(ChatMessage("user", "x"), tools=[LOOK], tool_choice="none")):
        response = await complete(model, request)
        assert response.tool_calls == [] and response.text.startswith("[demo reply")


async def test_a_tool_calling_policy_cannot_loop_forever():
    policies = DemoPolicies()
    policies.register("always_look", lambda r: {"tool_calls": [{"name": "look", "arguments": {}}]})
    model = DemoModel(policies=policies, max_tool_rounds=3)
    history = [ChatMessage("user", "explore")]
    for step in range(10):
        response = await complete(model, req(*history, tools=[LOOK]))
        if not response.tool_calls:
            break
        history.append(ChatMessage("assistant", "", tool_calls=response.tool_calls))
        history.append(ChatMessage("tool", f"room {step}", tool_call_id=response.tool_calls[0].id))
    assert step == 3 and trailing_tool_rounds(history) == 3
    assert "The tools answered (room 2)" in response.text


async def test_fallback_after_a_tool_result_replies_with_text():
    history = [
        ChatMessage("user", "what is here?"),
        ChatMessage("assistant", "", tool_calls=[ToolCall("c1", "look", "{}")]),
        ChatMessage("tool", "A lantern and a map.", tool_call_id="c1"),
    ]
    response = await complete(DemoModel(policies=DemoPolicies()), req(*history, tools=[LOOK]))
    assert response.tool_calls == [] and "A lantern and a map." in response.text


async def test_empty_conversation_gets_a_greeting():
    response = await complete(DemoModel(policies=DemoPolicies()), req(ChatMessage("system", "You are a narrator.")))
    assert "demo model" in response.text and "DEEPSEEK_API_KEY" in response.text


def test_reflect_swaps_persons():
    assert reflect("I lost my key.") == "you lost your key"
    assert reflect("Give me your sword!") == "give you my sword"
