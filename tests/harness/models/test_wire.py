"""Wire translation: pure functions, no server."""

from __future__ import annotations

import pytest
from jsonschema import Draft202012Validator

from roleplay.errors import RpError
from roleplay.harness.models.deepseek import DEEPSEEK_CAPABILITIES
from roleplay.harness.models.types import Capabilities, ChatMessage, ToolCall, ToolSpec
from roleplay.harness.models.wire import declared_parameters, messages_to_wire, tool_choice_to_wire, tools_to_wire, usage_from_wire
from roleplay.testing.fake_openai import declaration_error

PLAIN = Capabilities()


def test_text_blocks_collapse_to_a_string_for_compatibility():
    out = messages_to_wire(
        [
            ChatMessage("system", [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]),
            ChatMessage("user", [{"type": "text", "text": "hi"}]),
        ],
        PLAIN,
    )
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
    ds = usage_from_wire(
        {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15, "prompt_cache_hit_tokens": 6, "prompt_cache_miss_tokens": 4}
    )
    assert (ds.cache_hit_tokens, ds.cache_miss_tokens) == (6, 4)
    oa = usage_from_wire(
        {
            "prompt_tokens": 10,
            "completion_tokens": 5,
            "prompt_tokens_details": {"cached_tokens": 8},
            "completion_tokens_details": {"reasoning_tokens": 3},
        }
    )
    assert (oa.total_tokens, oa.cache_hit_tokens, oa.cache_miss_tokens, oa.reasoning_tokens) == (15, 8, 2, 3)
    bare = usage_from_wire({"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2, "prompt_tokens_details": None})
    assert bare.cache_hit_tokens is None and bare.cache_miss_tokens is None
    assert usage_from_wire(None) is None


# -- declarations the provider accepts -------------------------------------------------------------

FULL = {
    "type": "object",
    "description": "the full form",
    "properties": {"body": {"type": "string"}, "effects": {"type": "array", "items": {"oneOf": [{"type": "string"}, {"type": "integer"}]}}},
    "required": ["body", "effects"],
    "additionalProperties": False,
}
RETRY = {
    "type": "object",
    "description": "the repair form",
    "properties": {"retry": {"type": "object", "properties": {"token": {"type": "string"}}, "required": ["token"]}},
    "required": ["retry"],
    "additionalProperties": False,
}
UNION = {"type": "object", "oneOf": [FULL, RETRY]}
ACCEPTED = [{"body": "b", "effects": []}, {"body": "b", "effects": ["x", 2]}, {"retry": {"token": "t"}}]


def refused(parameters, caps):
    """What the fake (OpenAI's rules) answers for this tool as our wire declares it."""
    return declaration_error(tools_to_wire([ToolSpec("rp_commit_turn", "d", parameters)], caps), "openai")


def test_a_root_union_is_declared_as_one_merged_object_the_provider_accepts():
    assert refused(UNION, Capabilities(accepts_root_combinators=True)) is not None  # as the bug sent it
    assert refused(UNION, PLAIN) is None and refused(UNION, DEEPSEEK_CAPABILITIES) is None
    declared = declared_parameters(UNION, PLAIN)
    assert declared["type"] == "object" and not {"oneOf", "anyOf", "allOf", "enum", "not"} & set(declared)
    assert declared["properties"] == {**FULL["properties"], **RETRY["properties"]}  # nested unions stay
    assert declared["additionalProperties"] is False and declared.get("required", []) == []
    # The model still reads both forms and what each requires.
    assert "the full form" in declared["description"] and "the repair form" in declared["description"]
    assert "body, effects" in declared["description"] and "retry" in declared["description"]


def test_the_merged_declaration_never_refuses_what_the_union_accepts():
    declared = Draft202012Validator(declared_parameters(UNION, PLAIN))
    assert all(Draft202012Validator(UNION).is_valid(x) and declared.is_valid(x) for x in ACCEPTED)
    # A property both branches declare differently admits either; an open branch admits anything.
    a = {"type": "object", "properties": {"v": {"type": "string"}}, "additionalProperties": False}
    b = {"type": "object", "properties": {"v": {"type": "integer"}, "w": {"type": "boolean"}}, "additionalProperties": False}
    c = {"type": "object", "properties": {"u": {"type": "null"}}}
    merged = declared_parameters({"anyOf": [a, b]}, PLAIN)
    assert all(Draft202012Validator(merged).is_valid(x) for x in ({"v": "s"}, {"v": 1, "w": True}))
    opened = declared_parameters({"oneOf": [a, c]}, PLAIN)
    assert "additionalProperties" not in opened and Draft202012Validator(opened).is_valid({"v": [1], "z": 0})


def test_all_of_parts_are_merged_and_enum_or_not_are_dropped_from_the_root():
    parts = {
        "allOf": [
            {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
            {"properties": {"b": {"type": "integer"}}, "required": ["b"]},
        ]
    }
    merged = declared_parameters(parts, PLAIN)
    assert merged["properties"] == {"a": {"type": "string"}, "b": {"type": "integer"}} and sorted(merged["required"]) == ["a", "b"]
    limited = declared_parameters({**FULL, "enum": [{"body": "x", "effects": []}], "not": {"required": ["x"]}}, PLAIN)
    assert limited == FULL
    assert refused({"properties": {"a": {"type": "string"}}}, PLAIN) is None  # an untyped root becomes an object


def test_a_declaration_the_provider_accepts_is_sent_unchanged():
    assert declared_parameters(FULL, PLAIN) is FULL
    assert declared_parameters(UNION, Capabilities(accepts_root_combinators=True)) is UNION
