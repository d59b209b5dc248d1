"""The condition language: parser, evaluator, fail-closed diagnostics and bounds."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from roleplay.errors import Problem, ValidationError
from roleplay.state import limits
from roleplay.state.conditions import Condition, condition_problems, evaluate_condition, json_equal, parse_condition

VALUES = {
    "story": {
        "characters": {"李钰": {"好感度": 42, "mood": "平静", "met": True, "secret": None}},
        "list": [1, 2],
        "a/b": 1,
    },
    "world": {"day": 3},
}


def active(expr: str) -> bool:
    result, diagnostics = evaluate_condition(expr, VALUES)
    assert diagnostics == []
    return result


def inactive_code(expr) -> str:
    result, diagnostics = evaluate_condition(expr, VALUES)
    assert result is False
    assert len(diagnostics) == 1 and isinstance(diagnostics[0], Problem)
    return diagnostics[0].code


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        ('state("story", "/characters/李钰/好感度") > 40', True),
        ('state("story", "/characters/李钰/好感度") >= 42', True),
        ('state("story", "/characters/李钰/好感度") < 42', False),
        ('state("story", "/characters/李钰/好感度") <= 42', True),
        ('state("story", "/characters/李钰/好感度") == 42.0', True),
        ('state("story", "/characters/李钰/好感度") != 42', False),
        ('state("story", "/characters/李钰/mood") == "平静"', True),
        ('state("story", "/characters/李钰/mood") < "晴"', True),
        ('state("story", "/characters/李钰/met")', True),
        ('!state("story", "/characters/李钰/met")', False),
        ('state("story", "/characters/李钰/secret") == null', True),
        ('state("story", "/list") == state("story", "/list")', True),
        ('state("story", "/a~1b") == 1', True),
        ('exists("story", "/characters/李钰")', True),
        ('exists("story", "/characters/王五")', False),
        ('exists("nowhere", "/x")', False),
        ('state("world", "/day") == 3 && state("story", "/list/1") == 2', True),
        ("true || false && false", True),  # && binds tighter than ||
        ("(true || false) && false", False),
        ("!(1 == 2)", True),
        ('"1" == 1', False),  # different JSON types are unequal, not a mismatch
        ("true == 1", False),
        ("-1.5e1 < 0", True),
    ],
)
def test_evaluation(expr, expected):
    assert active(expr) is expected


def test_short_circuit_guards_missing_paths():
    assert active('exists("story", "/nope") && state("story", "/nope") > 1') is False
    assert active('!exists("story", "/nope") || state("story", "/nope") > 1') is True


@pytest.mark.parametrize(
    ("expr", "code"),
    [
        ('state("story", "/nope") > 1', "state.condition.path_missing"),
        ('state("story", "/list/5") == 1', "state.condition.path_missing"),
        ('state("ghost", "/x") == 1', "state.condition.namespace_missing"),
        ('state("story", "/characters/李钰/mood") > 1', "state.condition.type_mismatch"),
        ('state("story", "/characters/李钰/met") > false', "state.condition.type_mismatch"),
        ('!state("story", "/list")', "state.condition.type_mismatch"),
        ("1 && true", "state.condition.type_mismatch"),
        ("false || 1", "state.condition.type_mismatch"),
        ('state("world", "/day")', "state.condition.type_mismatch"),
        ("", "state.condition.syntax"),
        ("(true", "state.condition.syntax"),
        ("true)", "state.condition.syntax"),
        ("1 < 2 < 3", "state.condition.syntax"),
        ("'single'", "state.condition.syntax"),
        ('state("story")', "state.condition.syntax"),
        ('state(story, "/x")', "state.condition.syntax"),
        ('state("story", "x")', "state.condition.pointer_invalid"),
        (None, "state.condition.not_text"),
    ],
)
def test_missing_paths_type_mismatches_and_malformed_expressions_are_inactive_with_diagnostics(expr, code):
    assert inactive_code(expr) == code


@pytest.mark.parametrize(
    "expr",
    [
        "stat_data.day > 1",  # alias + property access
        'state("story", "/list").length > 1',  # property access
        'state("story", "/list")[0] == 1',  # indexing
        "1 + 1 == 2",  # arithmetic
        "2 * 3 > 1",
        'getvar("day") > 1',  # arbitrary function
        "eval(1)",
        "x",  # bare alias
        "true; false",
        "`1`",
        "undefined == null",
        "NaN == NaN",
        "1e999 > 1",
    ],
)
def test_aliases_property_access_arithmetic_functions_and_code_are_rejected(expr):
    assert inactive_code(expr) == "state.condition.syntax"


def test_syntax_diagnostics_carry_expression_and_offset():
    _, [diag] = evaluate_condition("true && foo", VALUES)
    assert diag.details == {"expression": "true && foo", "offset": 8}


def test_input_size_tokens_and_nesting_are_bounded():
    assert inactive_code("1" * (limits.MAX_CONDITION_CHARS + 1)) == "state.condition.too_large"
    many = " && ".join(["true"] * (limits.MAX_CONDITION_TOKENS // 2 + 1))
    assert len(many) <= limits.MAX_CONDITION_CHARS
    assert inactive_code(many) == "state.condition.too_large"
    depth = limits.MAX_CONDITION_DEPTH
    assert active("(" * depth + "true" + ")" * depth) is True
    assert inactive_code("(" * (depth + 1) + "true" + ")" * (depth + 1)) == "state.condition.too_deep"
    assert inactive_code("!" * (depth + 1) + "true") == "state.condition.too_deep"


def test_parse_condition_api():
    condition = parse_condition('exists("story", "/list")')
    assert isinstance(condition, Condition)
    assert evaluate_condition(condition, VALUES) == (True, [])
    with pytest.raises(ValidationError) as caught:
        parse_condition("1 +")
    assert caught.value.code == "state.condition.syntax"
    assert condition_problems("true") == []
    assert [p.code for p in condition_problems("(")] == ["state.condition.syntax"]


def test_cached_diagnostics_are_not_shared_between_calls():
    _, [first] = evaluate_condition("(", VALUES)
    first.details["mutated"] = True
    _, [second] = evaluate_condition("(", VALUES)
    assert "mutated" not in second.details


def test_values_mapping_is_not_required_to_hold_every_namespace():
    assert evaluate_condition('exists("story", "/x")', {}) == (False, [])
    assert evaluate_condition("true", {}) == (True, [])


def test_json_equal():
    assert json_equal({"a": [1, 2.0]}, {"a": [1.0, 2]})
    assert not json_equal([True], [1])
    assert not json_equal({"a": 1}, {"b": 1})
    assert not json_equal(None, 0)


ALPHABET = st.sampled_from(
    list('()!&|=<>",-.0123456789eE ') + ["state", "exists", "true", "false", "null", '"story"', '"/list/0"', "&&", "||"]
)


@settings(max_examples=400, deadline=None)
@given(st.one_of(st.text(max_size=80), st.lists(ALPHABET, max_size=40).map("".join)))
def test_garbage_never_raises_and_inactive_always_explains(text):
    result, diagnostics = evaluate_condition(text, VALUES)
    assert isinstance(result, bool)
    if not result and diagnostics:
        assert all(d.code.startswith("state.condition.") for d in diagnostics)
    if diagnostics:
        assert result is False


@settings(max_examples=100, deadline=None)
@given(st.one_of(st.none(), st.integers(), st.lists(st.integers()), st.dictionaries(st.text(), st.integers())))
def test_non_text_input_never_raises(value):
    assert evaluate_condition(value, VALUES)[0] is False
