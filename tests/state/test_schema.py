"""Restricted schema: keyword whitelist with pointers, then jsonschema validation."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from roleplay.state import limits
from roleplay.state.schema import (
    ALLOWED_KEYWORDS,
    check_plain_json,
    check_restricted_schema,
    child_schema,
    item_schema,
    schema_at,
    validate_value,
)

FULL = {
    "type": "object",
    "title": "t",
    "description": "d",
    "properties": {
        "e": {"enum": ["a", 1, None]},
        "c": {"const": {"k": [1]}},
        "n": {"type": "number", "minimum": 0, "maximum": 1.5},
        "s": {"type": "string", "minLength": 1, "maxLength": 3},
        "l": {"type": "array", "items": {"type": "integer"}, "minItems": 0, "maxItems": 2},
        "u": {"type": ["string", "null"]},
    },
    "required": ["n"],
    "additionalProperties": {"type": "boolean"},
}


def test_every_allowed_keyword_is_accepted():
    used = set()

    def walk(node):
        if isinstance(node, dict):
            used.update(k for k in node if k in ALLOWED_KEYWORDS)
            for v in node.get("properties", {}).values():
                walk(v)
            for key in ("items", "additionalProperties"):
                walk(node.get(key))

    walk(FULL)
    assert used == set(ALLOWED_KEYWORDS)
    assert check_restricted_schema(FULL) == []


@pytest.mark.parametrize(
    ("keyword", "value", "code"),
    [
        ("$ref", "#/x", "state.schema.ref_forbidden"),
        ("$defs", {}, "state.schema.ref_forbidden"),
        ("allOf", [{}], "state.schema.composition_forbidden"),
        ("anyOf", [{}], "state.schema.composition_forbidden"),
        ("oneOf", [{}], "state.schema.composition_forbidden"),
        ("not", {}, "state.schema.composition_forbidden"),
        ("if", {}, "state.schema.conditional_forbidden"),
        ("then", {}, "state.schema.conditional_forbidden"),
        ("else", {}, "state.schema.conditional_forbidden"),
        ("dependentRequired", {}, "state.schema.conditional_forbidden"),
        ("pattern", "^a", "state.schema.pattern_forbidden"),
        ("patternProperties", {}, "state.schema.pattern_forbidden"),
        ("format", "email", "state.schema.pattern_forbidden"),
        ("x-script", "alert(1)", "state.schema.keyword_unknown"),
        ("default", 1, "state.schema.keyword_unknown"),
        ("$schema", "https://json-schema.org/draft/2020-12/schema", "state.schema.keyword_unknown"),
        ("uniqueItems", True, "state.schema.keyword_unknown"),
    ],
)
def test_forbidden_keywords_are_rejected_with_a_pointer_to_the_keyword(keyword, value, code):
    schema = {"type": "object", "properties": {"a/b": {"type": "array", "items": {"type": "string", keyword: value}}}}
    problems = check_restricted_schema(schema, "/schema")
    assert [(p.code, p.pointer) for p in problems] == [(code, f"/schema/properties/a~1b/items/{keyword}")]


def test_all_violations_are_reported_at_once():
    schema = {"$ref": "#", "properties": {"a": {"pattern": "x"}, "b": {"oneOf": []}}}
    assert {p.pointer for p in check_restricted_schema(schema)} == {"/$ref", "/properties/a/pattern", "/properties/b/oneOf"}


@pytest.mark.parametrize(
    ("schema", "pointer"),
    [
        ({"type": "decimal"}, "/type"),
        ({"type": []}, "/type"),
        ({"type": ["string", "string"]}, "/type"),
        ({"type": ["string", 1]}, "/type"),
        ({"type": 3}, "/type"),
        ({"enum": []}, "/enum"),
        ({"required": ["a", "a"]}, "/required"),
        ({"required": "a"}, "/required"),
        ({"minItems": -1}, "/minItems"),
        ({"maxLength": 1.5}, "/maxLength"),
        ({"minimum": "1"}, "/minimum"),
        ({"maximum": float("inf")}, "/maximum"),
        ({"title": 1}, "/title"),
        ({"properties": []}, "/properties"),
    ],
)
def test_keyword_values_are_checked(schema, pointer):
    problems = check_restricted_schema(schema)
    assert [(p.code, p.pointer) for p in problems] == [("state.schema.keyword_invalid", pointer)]


def test_type_may_be_one_type_or_a_finite_array_of_types():
    assert check_restricted_schema({"type": "integer"}) == []
    assert check_restricted_schema({"type": ["integer", "string", "null"]}) == []


def test_items_must_be_one_schema_and_schemas_must_be_objects():
    assert check_restricted_schema({"items": [{"type": "string"}]})[0].code == "state.schema.not_object"
    assert check_restricted_schema(True)[0].code == "state.schema.not_object"
    assert check_restricted_schema({"additionalProperties": False}) == []


def test_schema_size_and_depth_are_bounded():
    wide = {"properties": {f"p{i}": {} for i in range(limits.MAX_SCHEMA_NODES)}}
    assert [p.code for p in check_restricted_schema(wide)] == ["state.schema.too_large"]
    deep: dict = {}
    for _ in range(limits.MAX_SCHEMA_DEPTH + 2):
        deep = {"items": deep}
    assert [p.code for p in check_restricted_schema(deep)] == ["state.schema.too_deep"]


def test_validate_value_reports_instance_pointers_sorted():
    problems = validate_value(FULL, {"n": -1, "s": "", "l": [1, "x"], "extra": 3}, "/value")
    assert [(p.code, p.pointer, p.details["keyword"]) for p in problems] == [
        ("state.value.schema_violation", "/value/extra", "type"),
        ("state.value.schema_violation", "/value/l/1", "type"),
        ("state.value.schema_violation", "/value/n", "minimum"),
        ("state.value.schema_violation", "/value/s", "minLength"),
    ]
    assert validate_value(FULL, {"n": 1, "flag": True}) == []


def test_booleans_are_not_numbers_and_enum_is_type_strict():
    assert validate_value({"type": "integer"}, True)
    assert validate_value({"enum": [1]}, True)
    assert validate_value({"enum": [1]}, 1.0) == []


def test_a_value_found_valid_is_known_by_its_canonical_text_not_by_equality():
    # 1, 1.0 and True are equal in Python; a value kept as valid must not vouch for the others.
    for schema, valid, invalid in (({"type": "integer"}, 1, True), ({"enum": [1]}, 1, True), ({"const": [0]}, [0], [False])):
        for _ in range(2):
            assert validate_value(schema, valid) == []
            assert validate_value(schema, invalid)
    assert validate_value({"type": "object", "properties": {"a": {"enum": [2]}}}, {"a": 2.0}) == []
    assert validate_value({"type": "object", "properties": {"a": {"type": "boolean"}}}, {"a": 1})


_SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 3), st.sampled_from([0.0, 1.0, 1.5, -2.5]), st.sampled_from(["", "a", "abcd"])
)
_VALUES = st.recursive(
    _SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from("enslucx"), inner, max_size=4), max_leaves=8
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_VALUES, min_size=1, max_size=4))
def test_validate_value_matches_a_fresh_jsonschema_validation_every_time(values):
    # The reference: a new jsonschema validator, nothing remembered between calls.
    reference = Draft202012Validator(FULL)
    for value in values * 2:
        expected = sorted((list(e.absolute_path), e.message) for e in reference.iter_errors(value))
        assert sorted(([*_tokens(p.pointer)], p.message) for p in validate_value(FULL, value)) == expected


def _tokens(pointer: str | None) -> list[object]:
    parts = (pointer or "").split("/")[1:]
    return [int(t) if t.isdigit() else t.replace("~1", "/").replace("~0", "~") for t in parts]


def test_plain_json_check_rejects_non_json():
    assert [p.pointer for p in check_plain_json({"a": [1, float("nan")]}, "/v")] == ["/v/a/1"]
    assert check_plain_json({1: "x"})[0].code == "state.value.not_json"
    assert check_plain_json({"s": {1, 2}})[0].code == "state.value.not_json"
    assert check_plain_json(("tuple",))[0].code == "state.value.not_json"
    deep: list = []
    for _ in range(limits.MAX_VALUE_DEPTH + 1):
        deep = [deep]
    assert check_plain_json(deep)[0].code == "state.value.too_deep"
    assert check_plain_json(list(range(limits.MAX_VALUE_NODES)))[0].code == "state.value.too_large"
    assert validate_value({}, float("inf"))[0].code == "state.value.not_json"


def test_structural_navigation():
    assert schema_at(FULL, ("n",)) == {"type": "number", "minimum": 0, "maximum": 1.5}
    assert schema_at(FULL, ("other",)) == {"type": "boolean"}
    assert schema_at(FULL, ("l", "0")) == {"type": "integer"}
    assert schema_at(FULL, ("n", "x")) is None
    assert schema_at({"type": "object", "additionalProperties": False}, ("x",)) is None
    assert schema_at({}, ("a", "0", "b")) == {}
    assert child_schema({"type": "array"}, "x") is None
    assert item_schema({"type": "string"}) is None
    assert item_schema({"type": "array"}) == {}


def test_index_like_tokens_under_object_or_array_unions_are_left_to_the_final_check():
    node = {"type": ["object", "array"], "items": {"type": "string"}, "additionalProperties": {"type": "integer"}}
    assert child_schema(node, "0") == {}
    assert child_schema(node, "name") == {"type": "integer"}
    assert child_schema({"type": "array", "items": {"type": "string"}}, "0") == {"type": "string"}
