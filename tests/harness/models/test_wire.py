"""Wire translation: pure functions, no server."""

from __future__ import annotations

import pytest

from roleplay.errors import RpError
from roleplay.harness.models.deepseek import DEEPSEEK_CAPABILITIES
from roleplay.harness.models.types import Capabilities, ChatMessage, ToolCall, ToolSpec
from roleplay.harness.models.wire import messages_to_wire, tool_choice_to_wire, tools_to_wire, usage_from_wire

PLAIN = Capabilities()


def test_text_blocks_collapse_to_a_string_for_compatibility():
    out = messages_to_wire([ChatMessage("system", [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]), ChatMessage("user", [{"type": "text", "text": "hi"}])], PLAIN)
    assert out == [{"role": "system", "content": "ab"}, {"role": "user", "content": "hi"}]


def test_reasoning_is_sent_only_where_the_provider_needs_it():
    msg = ChatMessage("assistant", "t", tool_calls=[ToolCall("c", "f", "{}")], reasoning="why")
    assert "reasoning_content" not in messages_to_wire([msg], PLAIN)[0]
    assert messages_to_wire([msg], DEEPSEEK_CAPABILITIES)[0]["reasoning_content"] == "why"
    assert "reasoning_content" not in messages_to_wire([ChatMessage("assistant", "t", reasoning="why")], DEEPSEEK_CAPABILITIES)[0]


def test_name_is_not_sent_on_tool_messages():
    out = messages_to_wire([ChatMessage("tool", "r", tool_call_id="c", name="f")], PLAIN)
    assert out == [{"role": "tool", "content": "r", "tool_call_id": "c"}]


@pytest.mark.parametrize(
    "message, code, pointer",
    [
        (ChatMessage("tool", "r"), "model.bad_message", "/messages/0/tool_call_id"),
        (ChatMessage("assistant", [{"type": "image", "mediaType": "image/png", "data": "x"}]), "model.bad_message", "/messages/0/content"),
        (ChatMessage("user", [{"type": "audio"}]), "model.bad_message", "/messages/0/content/0/type"),
        (ChatMessage("user", [{"type": "image", "mediaType": "text/html", "data": "x"}]), "model.bad_message", "/messages/0/content/0"),
    ],
)
def test_bad_messages_are_reported_with_a_pointer(message, code, pointer):
    with pytest.raises(RpError) as err:
        messages_to_wire([message], PLAIN)
    assert (err.value.code, err.value.pointer) == (code, pointer)


def test_strict_flag_is_dropped_when_unsupported():
    tool = ToolSpec("f", "d", {"type": "object"}, strict=True)
    assert tools_to_wire([tool], PLAIN)[0]["function"]["strict"] is True
    assert "strict" not in tools_to_wire([tool], Capabilities(supports_strict_tools=False))[0]["function"]


def test_tool_choice():
    assert tool_choice_to_wire("none") == "none"
    assert tool_choice_to_wire({"name": "f"}) == {"type": "function", "function": {"name": "f"}}


def test_usage_from_deepseek_and_openai_shapes():
    ds = usage_from_wire({"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15, "prompt_cache_hit_tokens": 6, "prompt_cache_miss_tokens": 4})
    assert (ds.cache_hit_tokens, ds.cache_miss_tokens) == (6, 4)
    oa = usage_from_wire({"prompt_tokens": 10, "completion_tokens": 5, "prompt_tokens_details": {"cached_tokens": 8}, "completion_tokens_details": {"reasoning_tokens": 3}})
    assert (oa.total_tokens, oa.cache_hit_tokens, oa.cache_miss_tokens, oa.reasoning_tokens) == (15, 8, 2, 3)
    bare = usage_from_wire({"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2, "prompt_tokens_details": None})
    assert bare.cache_hit_tokens is None and bare.cache_miss_tokens is None
    assert usage_from_wire(None) is None
