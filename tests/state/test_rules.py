"""Rule shape, fit to the schema, static matching and every-turn diagnostics."""

from __future__ import annotations

import pytest

from roleplay.state import limits
from roleplay.state.rules import every_turn_diagnostics, rule_pointer, rules_by_id, static_rule_mismatches, validate_rules

SCHEMA = {
    "type": "object",
    "properties": {
        "n": {"type": "integer"},
        "s": {"type": "string"},
        "l": {"type": "array", "items": {"type": "string"}},
    },
    "additionalProperties": False,
}


def rule(**overrides):
    base = {"id": "r", "target": "/n", "when": "always", "effect": {"op": "increment"}, "cadence": "when-applicable"}
    base.update(overrides)
    return {k: v for k, v in base.items() if v is not None}


def codes(rules, schema=SCHEMA):
    return [(p.code, p.pointer) for p in validate_rules(rules, schema)]


def test_a_complete_rule_with_every_field_is_valid():
    full = rule(condition='state("story", "/n") > 0', guidance="small steps", effect={"op": "increment", "minimum": -1, "maximum": 2})
    assert codes([full]) == []


@pytest.mark.parametrize("missing", ["id", "target", "when", "effect", "cadence"])
def test_required_fields(missing):
    assert codes([rule(**{missing: None})]) == [("state.rule.field_missing", f"/rules/0/{missing}")]


def test_condition_and_guidance_are_optional_but_unknown_fields_are_not():
    assert codes([rule()]) == []
    assert codes([rule(script="x")]) == [("state.rule.field_unknown", "/rules/0/script")]


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({"id": ""}, ("state.rule.id_invalid", "/rules/0/id")),
        ({"id": "x" * (limits.MAX_RULE_ID + 1)}, ("state.rule.id_invalid", "/rules/0/id")),
        ({"when": " "}, ("state.rule.field_invalid", "/rules/0/when")),
        ({"guidance": 3}, ("state.rule.field_invalid", "/rules/0/guidance")),
        ({"cadence": "sometimes"}, ("state.rule.cadence_invalid", "/rules/0/cadence")),
        ({"condition": "state(story)"}, ("state.condition.syntax", "/rules/0/condition")),
        ({"target": "n"}, ("state.rule.target_invalid", "/rules/0/target")),
        ({"target": "/missing"}, ("state.rule.target_not_in_schema", "/rules/0/target")),
        ({"target": "/s"}, ("state.rule.op_type_mismatch", "/rules/0/target")),
        ({"effect": {"op": "append"}}, ("state.rule.op_type_mismatch", "/rules/0/target")),
        ({"effect": {"op": "remove"}, "target": ""}, ("state.rule.root_remove", "/rules/0/target")),
        ({"effect": {"op": "merge"}}, ("state.rule.op_unsupported", "/rules/0/effect/op")),
        ({"effect": "increment"}, ("state.rule.effect_invalid", "/rules/0/effect")),
        ({"effect": {"op": "increment", "step": 1}}, ("state.rule.field_unknown", "/rules/0/effect/step")),
        ({"effect": {"op": "set", "minimum": 1}, "target": "/s"}, ("state.rule.bounds_invalid", "/rules/0/effect/minimum")),
        ({"effect": {"op": "increment", "minimum": 2, "maximum": 1}}, ("state.rule.bounds_invalid", "/rules/0/effect/minimum")),
        ({"effect": {"op": "increment", "maximum": float("nan")}}, ("state.rule.bounds_invalid", "/rules/0/effect/maximum")),
        ({"effect": {"op": "increment", "maximum": True}}, ("state.rule.bounds_invalid", "/rules/0/effect/maximum")),
    ],
)
def test_invalid_rules(overrides, expected):
    assert codes([rule(**overrides)]) == [expected]


def test_supported_effects_fit_their_targets():
    rules = [
        rule(id="a", target="/s", effect={"op": "set"}),
        rule(id="b", target="/n", effect={"op": "increment", "minimum": -3, "maximum": 3}),
        rule(id="c", target="/l", effect={"op": "append"}),
        rule(id="d", target="/l/0", effect={"op": "remove"}),
    ]
    assert codes(rules) == []


def test_duplicate_ids_and_list_shape():
    assert codes([rule(), rule()]) == [("state.rule.id_duplicate", "/rules/1/id")]
    assert codes("nope") == [("state.rule.list_invalid", "/rules")]
    assert codes([3]) == [("state.rule.not_object", "/rules/0")]
    assert codes([rule(id=f"r{i}") for i in range(limits.MAX_RULES + 1)]) == [("state.rule.too_many", "/rules")]


def test_target_checks_are_skipped_without_a_usable_schema():
    assert codes([rule(target="/anything")], None) == []


def test_static_rule_mismatches():
    r = rule(effect={"op": "increment", "minimum": -1, "maximum": 2})
    assert static_rule_mismatches(r, {"op": "increment", "path": "/n", "by": 2}) == []
    assert [m[0] for m in static_rule_mismatches(r, {"op": "increment", "path": "/n", "by": 3})] == ["state.update.by_out_of_bounds"]
    assert [m[2] for m in static_rule_mismatches(r, {"op": "increment", "path": "/n", "by": -2})] == ["by"]
    assert [m[0] for m in static_rule_mismatches(r, {"op": "set", "path": "/s", "value": 1})] == [
        "state.update.rule_target_mismatch",
        "state.update.rule_op_mismatch",
    ]


def test_lookup_helpers():
    definition = {"rules": [rule(id="a"), rule(id="b")]}
    assert list(rules_by_id(definition)) == ["a", "b"]
    assert rule_pointer(definition, "b") == "/definition/rules/1"
    assert rule_pointer(definition, "z") is None


def every_turn_definition(mode="rules-required"):
    return {
        "updateMode": mode,
        "rules": [
            rule(id="tick", cadence="every-turn"),
            rule(id="gated", cadence="every-turn", target="/s", effect={"op": "set"}, condition='state("ns", "/n") > 5'),
            rule(id="broken", cadence="every-turn", target="/s", effect={"op": "set"}, condition='state("ns", "/gone") > 5'),
            rule(id="optional", target="/l", effect={"op": "append"}),
        ],
    }


def test_every_turn_rules_missing_from_a_commit_are_diagnosed():
    found = every_turn_diagnostics("ns", every_turn_definition(), [], {"ns": {"n": 1}})
    assert [(p.code, p.pointer, p.details.get("ruleId")) for p in found] == [
        ("state.rule.every_turn_missing", "/definition/rules/0", "tick"),
        ("state.condition.path_missing", "/definition/rules/2/condition", "broken"),
    ]


def test_every_turn_rules_are_satisfied_by_rule_id_or_unattributed_target():
    values = {"ns": {"n": 9}}
    by_id = every_turn_diagnostics(
        "ns", every_turn_definition(), [{"ruleId": "tick", "path": "/n"}, {"ruleId": "gated", "path": "/s"}], values
    )
    assert [p.code for p in by_id] == ["state.condition.path_missing"]
    by_path = every_turn_diagnostics("ns", every_turn_definition("schema-only"), [{"path": "/n"}, {"path": "/s"}], values)
    assert [p.code for p in by_path] == ["state.condition.path_missing"]
    # An applicable gated rule that is not exercised is reported.
    missing = every_turn_diagnostics("ns", every_turn_definition(), [{"ruleId": "tick", "path": "/n"}], values)
    assert [p.details.get("ruleId") for p in missing] == ["gated", "broken"]


def test_disabled_namespaces_expect_nothing():
    assert every_turn_diagnostics("ns", every_turn_definition("disabled"), [], {"ns": {}}) == []
