"""The scripted test model: queue, responder, recording, exhaustion."""

from __future__ import annotations

import pytest

from roleplay.errors import RpError
from roleplay.harness.models.scripted import ScriptedModel
from roleplay.harness.models.synthetic import Reply
from roleplay.harness.models.types import ChatMessage, ChatModel, ModelRequest, TextDelta, ToolCall, ToolSpec, complete

pytestmark = pytest.mark.anyio


def req(text: str, **kw) -> ModelRequest:
    return ModelRequest([ChatMessage("user", text)], **kw)


async def test_queue_is_consumed_in_order_and_requests_are_recorded():
    model = ScriptedModel(["first reply"])
    model.enqueue(Reply(text="", tool_calls=[{"name": "roll", "arguments": {"n": 2}}], reasoning="roll it"))
    assert isinstance(model, ChatModel) and model.pending == 2
    tools = [ToolSpec("roll", "Roll", {"type": "object"})]
    first = await complete(model, req("a", tools=tools))
    second = await complete(model, req("b"))
    assert first.text == "first reply" and first.finish_reason == "stop"
    assert second.tool_calls == [ToolCall("call_2_0", "roll", '{"n": 2}')] and second.reasoning == "roll it"
    assert [r.messages[0].content for r in model.requests] == ["a", "b"]
    assert model.requests[0].tools == tools and model.pending == 0


async def test_text_streams_in_a_few_chunks():
    model = ScriptedModel(["The night was dark and full of quiet rain."])
    deltas = [e for e in [ev async for ev in model.stream(req("x"))] if isinstance(e, TextDelta)]
    assert 2 <= len(deltas) <= 3 and "".join(d.text for d in deltas) == "The night was dark and full of quiet rain."


async def test_exceptions_in_the_script_are_raised_and_the_request_still_recorded():
    model = ScriptedModel([RpError("model.rate_limited", "slow"), TimeoutError])
    with pytest.raises(RpError) as err:
        await complete(model, req("x"))
    assert err.value.code == "model.rate_limited"
    with pytest.raises(TimeoutError):
        await complete(model, req("y"))
    assert len(model.requests) == 2


async def test_responder_answers_after_the_queue():
    async def responder(request: ModelRequest):
        return f"echo: {request.messages[-1].content}"

    model = ScriptedModel(["queued"], responder=responder)
    assert (await complete(model, req("one"))).text == "queued"
    assert (await complete(model, req("two"))).text == "echo: two"


async def test_empty_script_is_an_error():
    model = ScriptedModel(model="writer")
    with pytest.raises(RpError) as err:
        await complete(model, req("x"))
    assert err.value.code == "model.script_exhausted" and err.value.details == {"requests": 1}
    assert "writer" in err.value.message and "test double" in model.label
