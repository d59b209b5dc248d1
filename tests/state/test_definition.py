"""Namespace definitions, namespace ids and the all-validate invariant."""

from __future__ import annotations

import pytest

from roleplay.state import limits
from roleplay.state.definition import (
    DEFAULT_NAMESPACE,
    UPDATE_MODES,
    definition_warnings,
    namespace_name_problems,
    plain_copy,
    validate_definition,
    validate_namespace_content,
)


def test_the_story_definition_is_valid(definition):
    assert validate_definition(definition) == []
    assert DEFAULT_NAMESPACE == "story"


@pytest.mark.parametrize("mode", UPDATE_MODES)
def test_each_update_mode_is_accepted(make, mode):
    assert validate_definition(make.definition(mode)) == []


def test_description_is_optional_everything_else_required(definition):
    del definition["description"]
    assert validate_definition(definition) == []
    for key in ("title", "updateMode", "schema", "rules"):
        broken = dict(definition)
        del broken[key]
        assert [(p.code, p.pointer) for p in validate_definition(broken, "/definition")] == [
            ("state.definition.field_missing", f"/definition/{key}")
        ]


@pytest.mark.parametrize(
    ("key", "value", "code"),
    [
        ("title", "", "state.definition.title_invalid"),
        ("title", "x" * (limits.MAX_TITLE + 1), "state.definition.title_invalid"),
        ("description", 5, "state.definition.description_invalid"),
        ("updateMode", "free", "state.definition.update_mode_invalid"),
        ("owner", "李钰", "state.definition.field_unknown"),
        ("alias", "stat_data", "state.definition.field_unknown"),
    ],
)
def test_field_problems(definition, key, value, code):
    definition[key] = value
    assert [(p.code, p.pointer) for p in validate_definition(definition)] == [(code, f"/{key}")]


def test_schema_problems_suppress_follow_on_rule_noise(definition):
    definition["schema"]["properties"]["day"]["$ref"] = "#/x"
    problems = validate_definition(definition)
    assert [(p.code, p.pointer) for p in problems] == [("state.schema.ref_forbidden", "/schema/properties/day/$ref")]


def test_rules_are_checked_against_the_schema(definition):
    definition["rules"][0]["target"] = "/characters/李钰/nickname"
    assert [(p.code, p.pointer) for p in validate_definition(definition)] == [("state.rule.target_not_in_schema", "/rules/0/target")]


def test_not_an_object():
    assert validate_definition([])[0].code == "state.definition.not_object"


def test_definition_initial_value_and_value_must_all_validate(definition, make):
    good = make.value()
    assert validate_namespace_content(definition, {"initialValue": good, "value": good}) == []
    bad = make.value()
    bad["day"] = 0
    problems = validate_namespace_content(definition, {"initialValue": good, "value": bad}, "/namespaces/story")
    assert [(p.code, p.pointer) for p in problems] == [("state.value.schema_violation", "/namespaces/story/value/day")]
    problems = validate_namespace_content(definition, {"initialValue": bad, "value": good})
    assert [p.pointer for p in problems] == ["/initialValue/day"]


def test_values_are_still_checked_for_plain_json_when_the_schema_is_broken(definition):
    definition["schema"] = {"oneOf": []}
    problems = validate_namespace_content(definition, {"initialValue": float("nan"), "value": 1})
    assert [(p.code, p.pointer) for p in problems] == [
        ("state.schema.composition_forbidden", "/definition/schema/oneOf"),
        ("state.value.not_json", "/initialValue"),
    ]


@pytest.mark.parametrize("name", ["story", "world-2", "A_b", "x" * limits.MAX_NAMESPACE_NAME])
def test_namespace_ids_are_partition_ids(name):
    assert namespace_name_problems(name) == []


@pytest.mark.parametrize("name", ["", "李钰", "characters/李钰", "-x", "a b", None, 3, "x" * (limits.MAX_NAMESPACE_NAME + 1)])
def test_namespace_ids_are_not_names_or_paths(name):
    assert [p.code for p in namespace_name_problems(name)] == ["state.namespace.name_invalid"]


def test_rules_required_without_rules_warns(make):
    definition = make.definition()
    definition["rules"] = []
    assert [p.code for p in definition_warnings(definition)] == ["state.definition.no_rules"]
    assert definition_warnings(make.definition("schema-only") | {"rules": []}) == []


def test_plain_copy_is_independent():
    source = {"a": [1]}
    copy = plain_copy(source)
    copy["a"].append(2)
    assert source == {"a": [1]}


def test_a_definition_found_valid_is_known_by_its_content_not_its_object(definition):
    # Valid definitions are remembered by their canonical text: the same content is not walked
    # again, and any change to it (in place included) is checked afresh.
    assert validate_definition(definition) == []
    assert validate_definition(dict(definition)) == []
    definition["updateMode"] = "sometimes"
    assert [p.code for p in validate_definition(definition)] == ["state.definition.update_mode_invalid"]
    definition["updateMode"] = UPDATE_MODES[0]
    del definition["schema"]
    assert validate_definition(definition) != []


def test_a_definition_that_is_not_plain_json_is_never_taken_for_a_known_one(definition, monkeypatch):
    # A tuple prints as the list a valid definition holds: it must not pass on that text.
    from roleplay.state import definition as module

    assert validate_definition(definition) == []
    checked = []
    real = module._definition_problems
    monkeypatch.setattr(module, "_definition_problems", lambda d, base: checked.append(d) or real(d, base))
    assert validate_definition(dict(definition)) == [] and checked == []  # known: not walked again
    odd = {**definition, "rules": tuple(definition["rules"])}
    validate_definition(odd)
    assert checked == [odd]  # walked: its text is the known one's, its types are not
