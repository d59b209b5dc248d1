"""TypeScript-like rule types → restricted schema; unsafe types fail closed."""

import pytest

from roleplay.compat.mvu.typeexpr import TypeFailure, parse_type, tokenize
from roleplay.state import check_restricted_schema


def schema(text):
    result, _warnings = parse_type(text)
    assert check_restricted_schema(result) == []
    return result


def test_index_signature_with_member_comment_description():
    assert schema("{\n  [事务名: string]: string; // 事务描述\n}") == {
        "type": "object",
        "additionalProperties": {"type": "string", "description": "事务描述"},
    }


def test_nested_object_with_optional_member():
    result = schema("{\n  [称号名: string]: {\n    效果: string;\n    自我评价?: string;  // 默认为 '待评价'\n  }\n}")
    member = result["additionalProperties"]
    assert member["required"] == ["效果"] and member["additionalProperties"] is False
    assert member["properties"]["自我评价"] == {"type": "string", "description": "默认为 '待评价'"}


@pytest.mark.parametrize(
    "text,expected",
    [
        ("number", {"type": "number"}),
        ("boolean", {"type": "boolean"}),
        ("'主线' | '支线' | '每日'", {"enum": ["主线", "支线", "每日"]}),
        ("| 'a' | 'b'", {"enum": ["a", "b"]}),
        ("number | null", {"type": ["number", "null"]}),
        ("'待初始化' | null", {"enum": ["待初始化", None]}),
        ("string | '待初始化'", {"type": "string"}),
        ("string[]", {"type": "array", "items": {"type": "string"}}),
        ("Array<number>", {"type": "array", "items": {"type": "number"}}),
        ("(1 | 2)[]", {"type": "array", "items": {"enum": [1, 2]}}),
        ("Record<string, number>", {"type": "object", "additionalProperties": {"type": "number"}}),
        ("any", {}),
    ],
)
def test_supported_types(text, expected):
    assert schema(text) == expected


def test_record_with_literal_keys_is_a_closed_object():
    result = schema('Record<"20"|"19", string[]>')
    assert result["required"] == ["20", "19"] and result["additionalProperties"] is False


def test_community_variants_warn():
    result, warnings = parse_type("无|逃离|交易")
    assert result == {"enum": ["无", "逃离", "交易"]} and warnings
    result, warnings = parse_type("record<string, { name: string, desc: string }>")
    assert result["additionalProperties"]["required"] == ["name", "desc"] and warnings


@pytest.mark.parametrize(
    "text",
    [
        "z.coerce.number().transform(v => _.clamp(v, 0, 100))",
        "object（readonly/derived）",
        "{ 当前状态: '冷却中'; n: number; } | { 当前状态: '进行中' }",
        "number | '待初始化'",
        "Map<string, number>",
        "{ a: string",
        "",
        "Date",
    ],
)
def test_unsafe_types_fail_closed(text):
    with pytest.raises(TypeFailure):
        parse_type(text)


def test_tokenizer_reports_offsets():
    toks = tokenize("{ a: 'x' }")
    assert [(t.kind, t.offset) for t in toks][:4] == [("punct", 0), ("ident", 2), ("punct", 3), ("str", 5)]
    with pytest.raises(TypeFailure) as info:
        tokenize("{ a: 'x }")
    assert info.value.offset == 5
