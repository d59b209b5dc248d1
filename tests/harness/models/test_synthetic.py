"""Reply forms and the synthetic stream shared by the scripted and demo models."""

from __future__ import annotations

import pytest

from roleplay.errors import RpError
from roleplay.harness.models.synthetic import Reply, coerce_reply, split_chunks, stream_reply
from roleplay.harness.models.types import (
    ChatMessage,
    Completed,
    ModelRequest,
    ModelResponse,
    ReasoningDelta,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    Usage,
)

pytestmark = pytest.mark.anyio


def test_split_chunks_joins_back_and_respects_the_count():
    text = "one two three four five six seven"
    chunks = split_chunks(text, 3)
    assert "".join(chunks) == text and len(chunks) == 3
    assert split_chunks("", 3) == [] and split_chunks("solo", 3) == ["solo"]


def test_reply_forms():
    assert coerce_reply("hi", call_id_prefix="c").text == "hi"
    spec = coerce_reply(
        {
            "text": "t",
            "tool_calls": [{"name": "f", "arguments": {"a": 1}}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3},
        },
        call_id_prefix="c",
    )
    assert spec.tool_calls == [ToolCall("c_0", "f", '{"a": 1}')] and spec.usage == Usage(1, 2, 3)
    done = ModelResponse("x", "r", [ToolCall("k", "f", "{}")], None, "stop", "m", "p")
    assert coerce_reply(done, call_id_prefix="c").tool_calls[0].id == "k"


@pytest.mark.parametrize("value", [42, {"text": "x", "bogus": 1}, {"tool_calls": [{"arguments": "{}"}]}])
def test_bad_reply_forms(value):
    with pytest.raises(RpError) as err:
        coerce_reply(value, call_id_prefix="c")
    assert err.value.code == "model.bad_reply"


async def test_stream_order_and_completion():
    request = ModelRequest([ChatMessage("user", "hello there")])
    reply = Reply(text="a b c d", reasoning="think hard", tool_calls=[ToolCall("c1", "f", '{"x": 1}')])
    events = [e async for e in stream_reply(reply, request, provider="p", model="m")]
    kinds = [type(e).__name__ for e in events]
    assert kinds[0] == "ReasoningDelta" and kinds[-1] == "Completed"
    assert kinds.index("TextDelta") > kinds.index("ReasoningDelta") and kinds.index("ToolCallDelta") > kinds.index("TextDelta")
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "a b c d"
    assert "".join(e.text for e in events if isinstance(e, ReasoningDelta)) == "think hard"
    assert "".join(e.arguments_fragment for e in events if isinstance(e, ToolCallDelta)) == '{"x": 1}'
    final = events[-1]
    assert isinstance(final, Completed) and final.response.finish_reason == "tool_calls"
    usage = final.response.usage
    assert usage.prompt_tokens > 0 and usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
