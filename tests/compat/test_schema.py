"""$meta / markers / ValueWithDescription → restricted schema, and zod JSON Schema mapping."""

import json

from compat.mvu_support import STAGEDOG

from roleplay.compat.mvu.diagnostics import Loc
from roleplay.compat.mvu.schema import (
    EXTENSIBLE_MARKER,
    derive_from_data,
    from_json_schema,
    infer_schema,
    merge_item_schemas,
)
from roleplay.state import check_restricted_schema, validate_value

L = Loc("schema.json")


def test_plain_objects_are_closed_and_every_key_is_required():
    derived = derive_from_data({"a": {"b": 1, "c": "x", "d": None, "e": True}})
    assert derived.schema["properties"]["a"] == {
        "type": "object",
        "properties": {"b": {"type": "number"}, "c": {"type": "string"}, "d": {}, "e": {"type": "boolean"}},
        "required": ["b", "c", "d", "e"],
        "additionalProperties": False,
    }
    assert check_restricted_schema(derived.schema) == [] and validate_value(derived.schema, derived.value) == []


def test_meta_extensible_and_required():
    derived = derive_from_data(
        {"o": {"optionalField": 1, "requiredField": 2, "$meta": {"extensible": True, "required": ["requiredField"]}}}
    )
    node = derived.schema["properties"]["o"]
    assert node["additionalProperties"] is True and node["required"] == ["requiredField"]
    assert derived.value == {"o": {"optionalField": 1, "requiredField": 2}}


def test_recursive_extensible_until_a_descendant_closes_itself():
    data = {"r": {"$meta": {"recursiveExtensible": True}, "a": {"b": {"c": 1}}, "closed": {"$meta": {"extensible": False}, "x": {"y": 1}}}}
    schema = derive_from_data(data).schema["properties"]["r"]
    assert schema["additionalProperties"] is True
    assert schema["properties"]["a"]["properties"]["b"]["additionalProperties"] is True
    assert schema["properties"]["closed"]["additionalProperties"] is False
    assert schema["properties"]["closed"]["properties"]["x"]["additionalProperties"] is False


def test_array_marker_and_array_meta_are_removed():
    derived = derive_from_data(
        {"l": ["item1", "item2", EXTENSIBLE_MARKER], "m": [{"$arrayMeta": True, "$meta": {"extensible": True}}, 1, 2]}
    )
    assert derived.value == {"l": ["item1", "item2"], "m": [1, 2]}
    assert derived.extensible_arrays == {"/l", "/m"}
    assert derived.schema["properties"]["l"] == {"type": "array", "items": {"type": "string"}}


def test_value_with_description_splits_recursively():
    derived = derive_from_data(
        {"理": {"好感度": [0, "[-30,100]之间"], "情绪": {"p": [0.1, "情绪"]}}, "物品": [{"名": ["x", "名称"]}, "背包"]}
    )
    assert derived.value == {"理": {"好感度": 0, "情绪": {"p": 0.1}}, "物品": {"名": "x"}}
    assert derived.vwd["/物品"] == "背包" and derived.vwd["/物品/名"] == "名称"
    assert derived.vwd["/理/好感度"] == "[-30,100]之间" and derived.vwd["/理/情绪/p"] == "情绪"
    assert derived.schema["properties"]["理"]["properties"]["好感度"] == {"type": "number", "description": "[-30,100]之间"}
    assert validate_value(derived.schema, derived.value) == []


def test_a_two_string_array_is_a_pair_as_in_mvu_with_a_note():
    derived = derive_from_data({"标签": ["a", "b"]})
    assert derived.value == {"标签": "a"}
    assert "mvu.vwd.string_pair" in [d.code for d in derived.diagnostics]


def test_strict_set_and_unsupported_meta_are_recorded():
    derived = derive_from_data(
        {"$meta": {"strictSet": True, "strictTemplate": True, "odd": 1}, "a": {"$meta": {"template": {"x": 1}}, "k": 1}}
    )
    assert derived.strict_set is True
    codes = [d.code for d in derived.diagnostics]
    assert codes.count("mvu.meta.template_unsupported") == 2 and "mvu.meta.unknown_key" in codes
    assert derived.value == {"a": {"k": 1}}


def test_item_schemas_generalise_heterogeneous_arrays():
    assert merge_item_schemas([infer_schema(1), infer_schema("x")]) == {"type": ["number", "string"]}
    merged = merge_item_schemas([infer_schema({"a": 1, "b": 2}), infer_schema({"a": 3})])
    assert merged["required"] == ["a"] and set(merged["properties"]) == {"a", "b"}


def test_example_schema_json_maps_with_one_diagnostic_per_dropped_keyword(mvu_corpus):
    document = json.loads((mvu_corpus / STAGEDOG / "schema.json").read_text("utf-8"))
    schema, problems = from_json_schema(document, L)
    assert check_restricted_schema(schema) == []
    clothes = schema["properties"]["白娅"]["properties"]["着装"]
    assert clothes["additionalProperties"] is False and clothes["required"] == ["上装", "下装", "内衣", "袜子", "鞋子", "饰品"]
    assert clothes["properties"]["上装"] == {"type": "string", "description": "服装描述"}
    assert [p.pointer for p in problems] == [
        "/$schema",
        "/properties/世界/properties/近期事务/propertyNames",
        "/properties/白娅/properties/称号/propertyNames",
        "/properties/主角/properties/物品栏/propertyNames",
    ]
    initvar = {
        "世界": {"当前时间": "t", "当前地点": "p", "近期事务": {"a": "b"}},
        "白娅": {"依存度": 1, "着装": {k: "x" for k in clothes["required"]}, "称号": {}},
        "主角": {"物品栏": {}},
    }
    assert validate_value(schema, initvar) == []


def test_literal_unions_refs_and_intersections():
    document = {
        "$defs": {"Mood": {"anyOf": [{"const": "好"}, {"const": "坏"}]}},
        "type": "object",
        "properties": {
            "mood": {"$ref": "#/$defs/Mood"},
            "hp": {"anyOf": [{"type": "number"}, {"type": "null"}], "exclusiveMinimum": 0},
            "mix": {
                "allOf": [
                    {"type": "object", "properties": {"a": {"type": "string"}}},
                    {"type": "object", "additionalProperties": {"type": "number"}},
                ]
            },
        },
    }
    schema, problems = from_json_schema(document, L)
    assert schema["properties"]["mood"] == {"enum": ["好", "坏"]}
    assert schema["properties"]["hp"] == {"type": ["number", "null"], "minimum": 0}
    assert schema["properties"]["mix"]["additionalProperties"] == {"type": "number"}
    assert {p.details["severity"] for p in problems} == {"info", "warning"}


def test_plain_type_unions_become_type_lists():
    schema, _ = from_json_schema({"anyOf": [{"type": "object"}, {"type": "array"}]}, L)
    assert schema == {"type": ["object", "array"]}


def test_undecidable_schemas_fail_closed():
    for document in (
        {
            "type": "object",
            "properties": {"a": {"anyOf": [{"type": "object", "properties": {"k": {"type": "string"}}}, {"type": "array"}]}},
        },
        {"$defs": {"N": {"type": "object", "properties": {"n": {"$ref": "#/$defs/N"}}}}, "$ref": "#/$defs/N"},
        {"type": "array", "prefixItems": [{"type": "string"}]},
        {"type": "object", "x-custom": 1},
        {"if": {"type": "string"}, "then": {"minLength": 1}},
    ):
        schema, problems = from_json_schema(document, L)
        assert schema is None and any(p.details["severity"] == "error" for p in problems), document
