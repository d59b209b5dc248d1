"""state.update: static validation, ordered execution, final schema, atomicity."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from roleplay.canonical import canonical_json
from roleplay.errors import RpError, ValidationError
from roleplay.state import limits
from roleplay.state.projection import apply_bootstrap, bootstrap_payload
from roleplay.state.schema import validate_value
from roleplay.state.shape import empty_projection
from roleplay.state.update import execute_updates, static_problems

AFF = "/characters/李钰/好感度"
FIXTURE_HC = settings(suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)


def rejected(projection, effects, prefix="/effects"):
    before = canonical_json(projection)
    with pytest.raises(ValidationError) as caught:
        execute_updates(projection, effects, prefix)
    assert caught.value.code == "state.update.rejected"
    assert canonical_json(projection) == before, "a rejected update must leave the projection untouched"
    return [(p.code, p.pointer) for p in caught.value.problems], caught.value.problems


def build(definition, value, namespace="story"):
    return apply_bootstrap(empty_projection(), bootstrap_payload(definition, value, namespace=namespace))


# --- success path -------------------------------------------------------------------------------


def test_the_reference_commit_shape_applies(projection, make):
    outcome = execute_updates(projection, [make.effect([make.change("increment", AFF, by=2, rule="liyu-affection")])])
    assert outcome.values["story"]["characters"]["李钰"]["好感度"] == 12
    assert outcome.records == [
        {
            "namespace": "story",
            "changeIndex": 0,
            "op": "increment",
            "path": AFF,
            "reason": "剧情需要",
            "ruleId": "liyu-affection",
            "before": 10,
            "after": 12,
        }
    ]
    assert outcome.diagnostics == {"story": []}
    assert projection["namespaces"]["story"]["value"]["characters"]["李钰"]["好感度"] == 10


def test_all_four_operations_and_their_records(projection, make):
    changes = [
        make.change("set", "/characters/李钰/mood", value="愉快", rule="liyu-mood"),
        make.change("append", "/characters/李钰/items", value="剑", rule="liyu-items"),
        make.change("remove", "/characters/李钰/secret", rule="liyu-secret-clear"),
        make.change("set", "/weather", value="雨", rule="weather"),
        make.change("increment", "/day", by=1, rule="next-day"),
        make.change("increment", AFF, by=-5, rule="liyu-affection"),
    ]
    outcome = execute_updates(projection, [make.effect(changes)])
    assert outcome.values["story"] == {
        "day": 2,
        "weather": "雨",
        "characters": {"李钰": {"好感度": 5, "items": ["玉佩", "剑"], "mood": "愉快"}},
    }
    records = {r["path"]: r for r in outcome.records}
    assert records["/characters/李钰/items"]["before"] == ["玉佩"] and records["/characters/李钰/items"]["after"] == ["玉佩", "剑"]
    assert "after" not in records["/characters/李钰/secret"] and records["/characters/李钰/secret"]["before"] == "身世"
    assert "before" not in records["/weather"]  # created
    assert [r["changeIndex"] for r in outcome.records] == list(range(6))


def test_integral_float_delta_keeps_integers(projection, make):
    outcome = execute_updates(projection, [make.effect([make.change("increment", AFF, by=2.0, rule="liyu-affection")])])
    value = outcome.values["story"]["characters"]["李钰"]["好感度"]
    assert value == 12 and isinstance(value, int)


# --- commit shape: fields per operation ---------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            {"op": "set", "path": "/weather", "reason": "r", "ruleId": "weather"},
            ("state.update.field_missing", "/effects/0/payload/changes/0/value"),
        ),
        (
            {"op": "append", "path": "/characters/李钰/items", "reason": "r", "ruleId": "liyu-items"},
            ("state.update.field_missing", "/effects/0/payload/changes/0/value"),
        ),
        (
            {"op": "increment", "path": AFF, "reason": "r", "ruleId": "liyu-affection"},
            ("state.update.field_missing", "/effects/0/payload/changes/0/by"),
        ),
        (
            {"op": "increment", "path": AFF, "value": 1, "by": 1, "reason": "r", "ruleId": "liyu-affection"},
            ("state.update.field_unknown", "/effects/0/payload/changes/0/value"),
        ),
        (
            {"op": "remove", "path": "/characters/李钰/secret", "value": None, "reason": "r", "ruleId": "liyu-secret-clear"},
            ("state.update.field_unknown", "/effects/0/payload/changes/0/value"),
        ),
        (
            {"op": "set", "path": "/weather", "value": "雨", "by": 1, "reason": "r", "ruleId": "weather"},
            ("state.update.field_unknown", "/effects/0/payload/changes/0/by"),
        ),
    ],
)
def test_operand_fields_per_operation(projection, make, change, expected):
    codes, _ = rejected(projection, [make.effect([change])])
    assert codes == [expected]


@pytest.mark.parametrize("by", [float("nan"), float("inf"), -float("inf"), "2", True, None, [1]])
def test_non_finite_by_is_invalid(projection, make, by):
    codes, _ = rejected(projection, [make.effect([make.change("increment", AFF, by=by, rule="liyu-affection")])])
    assert codes == [("state.update.by_invalid", "/effects/0/payload/changes/0/by")]


def test_every_change_needs_a_reason(projection, make):
    no_reason = {"op": "increment", "path": AFF, "by": 1, "ruleId": "liyu-affection"}
    assert rejected(projection, [make.effect([no_reason])])[0] == [("state.update.reason_missing", "/effects/0/payload/changes/0/reason")]
    for bad in ("", "   ", 3, "x" * (limits.MAX_REASON + 1)):
        change = make.change("increment", AFF, by=1, rule="liyu-affection", reason=bad)
        assert rejected(projection, [make.effect([change])])[0] == [("state.update.reason_invalid", "/effects/0/payload/changes/0/reason")]


def test_root_removal_is_invalid(schema_only, make):
    codes, problems = rejected(schema_only, [make.effect([make.change("remove", "")])])
    assert codes == [("state.update.root_remove", "/effects/0/payload/changes/0/path")]
    assert problems[0].details == {"namespace": "story", "changeIndex": 0}


@pytest.mark.parametrize("op", ["merge", "script", "patch", "replace", "add", "eval", "move", "MERGE"])
def test_script_merge_and_patch_ops_are_invalid(schema_only, make, op):
    codes, problems = rejected(schema_only, [make.effect([{"op": op, "path": "/weather", "value": {}, "reason": "r"}])])
    assert codes == [("state.update.op_unsupported", "/effects/0/payload/changes/0/op")]


def test_script_fields_are_invalid(schema_only, make):
    change = make.change("set", "/weather", value="雨", script="state.weather = 'x'")
    assert rejected(schema_only, [make.effect([change])])[0] == [("state.update.field_unknown", "/effects/0/payload/changes/0/script")]


def test_duplicate_paths_are_invalid(schema_only, make):
    changes = [make.change("set", "/weather", value="雨"), make.change("set", "/weather", value="晴")]
    codes, problems = rejected(schema_only, [make.effect(changes)])
    assert codes == [("state.update.path_duplicate", "/effects/0/payload/changes/1/path")]
    assert problems[0].details["otherChangeIndex"] == 0


LIYU = {"好感度": 1, "items": []}


@pytest.mark.parametrize(
    ("first", "second"),
    [
        (("set", "/characters/李钰", LIYU), ("set", AFF, 2)),  # descendant after ancestor
        (("set", AFF, 2), ("set", "/characters/李钰", LIYU)),  # ancestor after descendant
        (("set", "", {"day": 1, "characters": {}}), ("set", "/day", 2)),  # the root overlaps everything
        (("remove", "/characters/李钰/secret", None), ("set", "/characters/李钰", LIYU)),
    ],
)
def test_ancestor_descendant_conflicts_are_invalid(schema_only, make, first, second):
    changes = [make.change(op, path) if op == "remove" else make.change(op, path, value=value) for op, path, value in (first, second)]
    codes, _ = rejected(schema_only, [make.effect(changes)])
    assert codes == [("state.update.path_conflict", "/effects/0/payload/changes/1/path")]


@pytest.mark.parametrize(
    ("change", "code"),
    [
        ({"op": "increment", "path": "/characters/王五/好感度", "by": 1, "reason": "r"}, "state.update.target_missing"),
        ({"op": "append", "path": "/characters/王五/items", "value": "x", "reason": "r"}, "state.update.target_missing"),
        ({"op": "remove", "path": "/characters/李钰/nothing", "reason": "r"}, "state.update.target_missing"),
        ({"op": "remove", "path": "/weather", "reason": "r"}, "state.update.target_missing"),
        ({"op": "set", "path": "/characters/王五/mood", "value": "x", "reason": "r"}, "state.update.parent_missing"),
        ({"op": "set", "path": "/characters/李钰/items/3", "value": "x", "reason": "r"}, "state.update.target_missing"),
    ],
)
def test_missing_targets_where_the_operation_needs_one_are_invalid(make, change, code):
    definition = make.definition("schema-only")
    definition["schema"]["properties"]["characters"]["additionalProperties"]["additionalProperties"] = True
    projection = build(definition, make.value())
    codes, problems = rejected(projection, [make.effect([change])])
    assert codes == [(code, "/effects/0/payload/changes/0/path")]
    assert problems[0].details["changeIndex"] == 0


def test_set_creates_a_missing_member_under_an_existing_parent(schema_only, make):
    outcome = execute_updates(schema_only, [make.effect([make.change("set", "/characters/王五", value={"好感度": 0, "items": []})])])
    assert outcome.values["story"]["characters"]["王五"] == {"好感度": 0, "items": []}


def test_dynamic_type_mismatches_on_an_open_schema(make):
    definition = {"title": "t", "updateMode": "schema-only", "schema": {}, "rules": []}
    projection = build(definition, {"s": "x", "n": 1e308, "scalar": 1})
    cases = [
        ({"op": "increment", "path": "/s", "by": 1, "reason": "r"}, "state.update.target_type_mismatch", "path"),
        ({"op": "append", "path": "/s", "value": 1, "reason": "r"}, "state.update.target_type_mismatch", "path"),
        ({"op": "set", "path": "/scalar/x", "value": 1, "reason": "r"}, "state.update.target_type_mismatch", "path"),
        ({"op": "increment", "path": "/n", "by": 1e308, "reason": "r"}, "state.update.result_not_finite", "by"),
    ]
    for change, code, field in cases:
        assert rejected(projection, [make.effect([change])])[0] == [(code, f"/effects/0/payload/changes/0/{field}")]


# --- envelope -------------------------------------------------------------------------------------


def test_envelope_problems_are_collected_together(projection, make):
    effect = {"kind": "state.patch", "namespace": "story", "expectedRevision": -1, "payload": {"changes": [], "merge": True}, "x": 1}
    codes, _ = rejected(projection, [effect])
    assert codes == [
        ("state.update.field_unknown", "/effects/0/x"),
        ("state.update.kind_invalid", "/effects/0/kind"),
        ("state.update.revision_invalid", "/effects/0/expectedRevision"),
        ("state.update.field_unknown", "/effects/0/payload/merge"),
        ("state.update.changes_invalid", "/effects/0/payload/changes"),
    ]


@pytest.mark.parametrize(
    ("effects", "expected"),
    [
        ("nope", [("state.update.effects_invalid", "/effects")]),
        ([3], [("state.update.effect_invalid", "/effects/0")]),
        ([{}], [("state.update.field_missing", f"/effects/0/{k}") for k in ("kind", "namespace", "expectedRevision", "payload")]),
        (
            [
                {
                    "kind": "state.update",
                    "namespace": "ghost",
                    "expectedRevision": 1,
                    "payload": {"changes": [{"op": "set", "path": "/a", "value": 1, "reason": "r"}]},
                }
            ],
            [("state.update.namespace_unknown", "/effects/0/namespace")],
        ),
        (
            [{"kind": "state.update", "namespace": "story", "expectedRevision": 1, "payload": []}],
            [("state.update.payload_invalid", "/effects/0/payload")],
        ),
        (
            [{"kind": "state.update", "namespace": "story", "expectedRevision": 1, "payload": {}}],
            [("state.update.field_missing", "/effects/0/payload/changes")],
        ),
    ],
)
def test_envelope_shapes(projection, effects, expected):
    assert rejected(projection, effects)[0] == expected


def test_too_many_changes(schema_only, make):
    changes = [make.change("set", f"/characters/c{i}", value={"好感度": 0, "items": []}) for i in range(limits.MAX_CHANGES + 1)]
    assert rejected(schema_only, [make.effect(changes)])[0] == [("state.update.changes_invalid", "/effects/0/payload/changes")]


def test_one_effect_per_namespace(projection, make):
    one = make.effect([make.change("increment", AFF, by=1, rule="liyu-affection")])
    codes, _ = rejected(projection, [one, one])
    assert codes == [("state.update.namespace_duplicate", "/effects/1/namespace")]


def test_expected_revision_is_a_compare_and_swap(projection, make):
    codes, problems = rejected(projection, [make.effect([make.change("increment", AFF, by=1, rule="liyu-affection")], revision=7)])
    assert codes == [("state.update.revision_mismatch", "/effects/0/expectedRevision")]
    assert problems[0].details == {"namespace": "story", "currentRevision": 1}


def test_disabled_namespaces_cannot_be_changed_by_story_commits(make):
    projection = make.bootstrapped("disabled")
    codes, _ = rejected(projection, [make.effect([make.change("set", "/weather", value="雨")])])
    assert codes == [("state.update.namespace_disabled", "/effects/0/namespace")]


# --- rules ----------------------------------------------------------------------------------------


def test_rules_required_needs_a_matching_rule_id(projection, make):
    codes, _ = rejected(projection, [make.effect([make.change("set", "/weather", value="雨")])])
    assert codes == [("state.update.rule_required", "/effects/0/payload/changes/0/ruleId")]
    codes, _ = rejected(projection, [make.effect([make.change("set", "/weather", value="雨", rule="nope")])])
    assert codes == [("state.update.rule_unknown", "/effects/0/payload/changes/0/ruleId")]
    codes, _ = rejected(projection, [make.effect([{**make.change("set", "/weather", value="雨"), "ruleId": 5}])])
    assert codes == [("state.update.rule_id_invalid", "/effects/0/payload/changes/0/ruleId")]


def test_rules_required_enforces_target_operation_and_bounds(projection, make):
    changes = [
        make.change("set", "/characters/李钰/mood", value="x", rule="weather"),  # wrong target
        make.change("set", AFF, value=3, rule="liyu-affection"),  # wrong op
        make.change("increment", "/day", by=2, rule="next-day"),  # above maximum 1
    ]
    codes, problems = rejected(projection, [make.effect(changes)])
    assert codes == [
        ("state.update.rule_target_mismatch", "/effects/0/payload/changes/0/path"),
        ("state.update.rule_op_mismatch", "/effects/0/payload/changes/1/op"),
        ("state.update.by_out_of_bounds", "/effects/0/payload/changes/2/by"),
    ]
    assert [p.details["ruleId"] for p in problems] == ["weather", "liyu-affection", "next-day"]
    codes, _ = rejected(projection, [make.effect([make.change("increment", AFF, by=-6, rule="liyu-affection")])])
    assert codes == [("state.update.by_out_of_bounds", "/effects/0/payload/changes/0/by")]


def gated_definition():
    return {
        "title": "t",
        "updateMode": "rules-required",
        "schema": {"type": "object", "properties": {"day": {"type": "integer"}, "phase": {"type": "string"}, "other": {"type": "string"}}},
        "rules": [
            {"id": "tick", "target": "/day", "when": "w", "effect": {"op": "increment"}, "cadence": "when-applicable"},
            {
                "id": "night",
                "target": "/phase",
                "when": "w",
                "condition": 'state("story", "/day") >= 2',
                "effect": {"op": "set"},
                "cadence": "when-applicable",
            },
            {
                "id": "x",
                "target": "/other",
                "when": "w",
                "condition": 'state("world", "/open") == true',
                "effect": {"op": "set"},
                "cadence": "when-applicable",
            },
            {
                "id": "broken",
                "target": "/other",
                "when": "w",
                "condition": 'state("story", "/missing") == 1',
                "effect": {"op": "set"},
                "cadence": "when-applicable",
            },
        ],
    }


def test_conditions_are_evaluated_in_order_against_the_working_state(make):
    projection = build(gated_definition(), {"day": 1})
    ok = [make.change("increment", "/day", by=1, rule="tick"), make.change("set", "/phase", value="夜", rule="night")]
    assert execute_updates(projection, [make.effect(ok)]).values["story"] == {"day": 2, "phase": "夜"}
    codes, problems = rejected(projection, [make.effect(list(reversed(ok)))])
    assert codes == [("state.update.condition_inactive", "/effects/0/payload/changes/0/ruleId")]
    assert problems[0].details["ruleId"] == "night" and problems[0].details["changeIndex"] == 0


def test_a_broken_condition_is_inactive_and_explained(make):
    projection = build(gated_definition(), {"day": 1})
    _, problems = rejected(projection, [make.effect([make.change("set", "/other", value="v", rule="broken")])])
    assert problems[0].code == "state.update.condition_inactive"
    assert [d["code"] for d in problems[0].details["diagnostics"]] == ["state.condition.path_missing"]


def test_conditions_read_other_namespaces_as_committed(make):
    story = build(gated_definition(), {"day": 1})
    world = build({"title": "w", "updateMode": "schema-only", "schema": {}, "rules": []}, {"open": False}, "world")
    projection = {**story, "namespaces": {**story["namespaces"], **world["namespaces"]}}
    effects = [
        make.effect([make.change("set", "/open", value=True)], namespace="world"),
        make.effect([make.change("set", "/other", value="v", rule="x")]),
    ]
    codes, _ = rejected(projection, effects)
    assert codes == [("state.update.condition_inactive", "/effects/1/payload/changes/0/ruleId")]


def test_schema_only_rule_id_is_optional_but_enforced_when_given(schema_only, make):
    assert execute_updates(schema_only, [make.effect([make.change("set", "/weather", value="雪")])]).values["story"]["weather"] == "雪"
    codes, _ = rejected(schema_only, [make.effect([make.change("increment", AFF, by=9, rule="liyu-affection")])])
    assert codes == [("state.update.by_out_of_bounds", "/effects/0/payload/changes/0/by")]
    # Operations and the schema still apply.
    codes, _ = rejected(schema_only, [make.effect([make.change("increment", "/weather", by=1)])])
    assert codes == [("state.update.op_type_mismatch", "/effects/0/payload/changes/0/op")]


# --- static schema checks -------------------------------------------------------------------------


def test_static_value_type_and_path_problems_are_collected_together(schema_only, make):
    changes = [
        make.change("set", "/weather", value="台风"),
        make.change("set", "/characters/李钰/nickname", value="x"),
        make.change("append", "/characters/李钰/items", value=3),
        make.change("increment", "/day", by=0.5),
        make.change("set", "/characters/王五", value={"好感度": "高", "items": []}),
        make.change("set", "not-a-pointer", value=1),
    ]
    codes, problems = rejected(schema_only, [make.effect(changes)])
    assert codes == [
        ("state.update.value_invalid", "/effects/0/payload/changes/0/value"),
        ("state.update.path_not_in_schema", "/effects/0/payload/changes/1/path"),
        ("state.update.value_invalid", "/effects/0/payload/changes/2/value"),
        ("state.update.by_not_integer", "/effects/0/payload/changes/3/by"),
        ("state.update.value_invalid", "/effects/0/payload/changes/4/value/好感度"),
        ("state.update.path_invalid", "/effects/0/payload/changes/5/path"),
    ]
    assert static_problems(schema_only, [make.effect(changes)], "/effects") == problems


# --- final schema, uncertainty and atomicity --------------------------------------------------------


def test_final_schema_errors_map_to_the_last_change_covering_the_target(make):
    projection = make.bootstrapped("schema-only", {"day": 1, "characters": {"李钰": {"好感度": 98, "items": ["a", "b", "c"]}}})
    changes = [
        make.change("increment", AFF, by=5),
        make.change("append", "/characters/李钰/items", value="d"),
        make.change("remove", "/day"),
    ]
    codes, problems = rejected(projection, [make.effect(changes)])
    assert sorted(codes) == [
        ("state.update.schema_violation", "/effects/0/payload/changes/0/by"),
        ("state.update.schema_violation", "/effects/0/payload/changes/1/path"),
        ("state.update.schema_violation", "/effects/0/payload/changes/2/path"),
    ]
    by_change = {p.details["changeIndex"]: p.details for p in problems}
    assert by_change[0]["target"] == AFF and by_change[0]["keyword"] == "maximum"
    assert by_change[2]["keyword"] == "required" and by_change[2]["target"] == ""


def test_required_errors_blame_the_change_that_removed_the_member(make):
    projection = make.bootstrapped("schema-only")
    changes = [make.change("remove", "/day"), make.change("set", "/weather", value="雨")]
    _, problems = rejected(projection, [make.effect(changes)])
    assert [(p.pointer, p.details["changeIndex"]) for p in problems] == [("/effects/0/payload/changes/0/path", 0)]


def test_final_errors_point_at_the_field_that_produced_the_value():
    # Static checks catch most of these first; the mapping is still defined for every op.
    from roleplay.state.update import _Change, _field_for

    set_change = _Change(0, {}, "set", ("a",), None)
    assert _field_for(set_change, ("a", "b", "0")) == "value/b/0"
    assert _field_for(_Change(0, {}, "increment", ("n",), None), ("n",)) == "by"
    append = _Change(0, {}, "append", ("l",), None, appended_index=2)
    assert _field_for(append, ("l", "2", "x")) == "value/x"
    assert _field_for(append, ("l", "1")) == "path"
    assert _field_for(append, ("l",)) == "path"
    assert _field_for(_Change(0, {}, "remove", ("a", "b"), None), ("a",)) == "path"


def test_unmappable_final_schema_errors_fall_back_to_the_payload(make):
    projection = make.bootstrapped("schema-only")
    projection["namespaces"]["story"]["value"]["characters"]["李钰"]["好感度"] = 500  # corrupt on purpose
    codes, problems = rejected(projection, [make.effect([make.change("set", "/weather", value="雨")])])
    assert codes == [("state.update.schema_violation", "/effects/0/payload")]
    assert problems[0].details == {"namespace": "story", "target": AFF, "keyword": "maximum"}


def test_dynamic_validation_stops_once_the_state_is_uncertain(make):
    projection = make.bootstrapped("schema-only")
    changes = [
        make.change("increment", "/characters/王五/好感度", by=1),  # fails: no such character
        make.change("remove", "/characters/赵六/mood"),  # would also fail, but is not checked
    ]
    codes, _ = rejected(projection, [make.effect(changes)])
    assert codes == [("state.update.target_missing", "/effects/0/payload/changes/0/path")]


def test_independent_namespaces_are_still_checked(make):
    story = make.bootstrapped("schema-only")
    world = build({"title": "w", "updateMode": "schema-only", "schema": {"type": "object"}, "rules": []}, {}, "world")
    projection = {**story, "namespaces": {**story["namespaces"], **world["namespaces"]}}
    effects = [
        make.effect([make.change("remove", "/nothing")], namespace="world"),
        make.effect([make.change("remove", "/characters/王五/mood")]),
    ]
    codes, problems = rejected(projection, effects)
    assert codes == [
        ("state.update.target_missing", "/effects/0/payload/changes/0/path"),
        ("state.update.target_missing", "/effects/1/payload/changes/0/path"),
    ]
    assert [p.details["namespace"] for p in problems] == ["world", "story"]


def test_all_or_nothing_across_namespaces(make):
    story = make.bootstrapped("schema-only")
    world = build({"title": "w", "updateMode": "schema-only", "schema": {"type": "object"}, "rules": []}, {}, "world")
    projection = {**story, "namespaces": {**story["namespaces"], **world["namespaces"]}}
    effects = [make.effect([make.change("set", "/ok", value=1)], namespace="world"), make.effect([make.change("remove", "/gone")])]
    rejected(projection, effects)
    assert projection["namespaces"]["world"]["value"] == {}


def test_every_turn_rules_missing_add_a_diagnostic_without_rejecting(projection, make):
    outcome = execute_updates(projection, [make.effect([make.change("set", "/weather", value="雨", rule="weather")])])
    assert outcome.values["story"]["weather"] == "雨"
    assert [(p.code, p.details["ruleId"]) for p in outcome.diagnostics["story"]] == [("state.rule.every_turn_missing", "liyu-affection")]
    assert execute_updates(projection, []).diagnostics["story"][0].code == "state.rule.every_turn_missing"


def test_inputs_are_not_mutated(projection, make):
    effects = [make.effect([make.change("append", "/characters/李钰/items", value="剑", rule="liyu-items")])]
    snapshot = canonical_json(effects)
    outcome = execute_updates(projection, effects)
    outcome.values["story"]["characters"]["李钰"]["items"].append("x")
    assert canonical_json(effects) == snapshot
    assert projection["namespaces"]["story"]["value"]["characters"]["李钰"]["items"] == ["玉佩"]


# --- properties -------------------------------------------------------------------------------------

VALID_INTENTS = st.lists(st.sampled_from(["affection", "mood", "item", "secret", "day", "weather", "newcomer"]), unique=True, min_size=1)


def valid_changes(value, intents, data):
    """Changes that are valid by construction for the story rules (schema-only adds 'newcomer')."""
    liyu = value["characters"]["李钰"]
    out = []
    for intent in intents:
        if intent == "affection":
            low, high = max(-5, -liyu["好感度"]), min(5, 100 - liyu["好感度"])
            out.append({"op": "increment", "path": AFF, "by": data.draw(st.integers(low, high)), "ruleId": "liyu-affection", "reason": "r"})
        elif intent == "mood":
            out.append(
                {
                    "op": "set",
                    "path": "/characters/李钰/mood",
                    "value": data.draw(st.text(min_size=1, max_size=20)),
                    "ruleId": "liyu-mood",
                    "reason": "r",
                }
            )
        elif intent == "item" and len(liyu["items"]) < 3:
            out.append(
                {
                    "op": "append",
                    "path": "/characters/李钰/items",
                    "value": data.draw(st.text(max_size=5)),
                    "ruleId": "liyu-items",
                    "reason": "r",
                }
            )
        elif intent == "secret" and "secret" in liyu:
            out.append({"op": "remove", "path": "/characters/李钰/secret", "ruleId": "liyu-secret-clear", "reason": "r"})
        elif intent == "day":
            out.append({"op": "increment", "path": "/day", "by": 1, "ruleId": "next-day", "reason": "r"})
        elif intent == "weather":
            out.append(
                {
                    "op": "set",
                    "path": "/weather",
                    "value": data.draw(st.sampled_from(["晴", "雨", "雪"])),
                    "ruleId": "weather",
                    "reason": "r",
                }
            )
    return out


@FIXTURE_HC
@given(data=st.data())
def test_property_random_valid_updates_keep_the_value_schema_valid(make, data):
    projection = make.bootstrapped()
    schema = projection["namespaces"]["story"]["definition"]["schema"]
    value = projection["namespaces"]["story"]["value"]
    for revision in range(1, 6):
        changes = valid_changes(value, data.draw(VALID_INTENTS), data)
        if not changes:
            continue
        data.draw(st.randoms()).shuffle(changes)
        current = {**projection, "namespaces": {"story": {**projection["namespaces"]["story"], "value": value, "revision": revision}}}
        outcome = execute_updates(current, [make.effect(changes, revision=revision)])
        value = outcome.values["story"]
        assert validate_value(schema, value) == []


JSON_LEAF = st.one_of(st.none(), st.booleans(), st.integers(-200, 200), st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=6))
JSON_ANY = st.recursive(
    JSON_LEAF, lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=4), inner, max_size=4)), max_leaves=12
)
PATHS = st.sampled_from(
    [
        "",
        "/day",
        "/weather",
        AFF,
        "/characters",
        "/characters/李钰",
        "/characters/李钰/items",
        "/characters/李钰/items/0",
        "/characters/李钰/items/-",
        "/characters/李钰/secret",
        "/characters/王五",
        "/nope",
        "bad",
        "/day/x",
    ]
)
RANDOM_CHANGE = st.fixed_dictionaries(
    {"op": st.sampled_from(["set", "increment", "append", "remove", "merge"]), "path": PATHS, "reason": st.sampled_from(["r", ""])},
    optional={
        "value": JSON_ANY,
        "by": st.one_of(st.integers(-10, 10), st.floats()),
        "ruleId": st.sampled_from(["liyu-affection", "liyu-items", "liyu-mood", "liyu-secret-clear", "next-day", "weather", "nope"]),
    },
)


@FIXTURE_HC
@given(mode=st.sampled_from(["rules-required", "schema-only"]), changes=st.lists(RANDOM_CHANGE, min_size=1, max_size=6))
def test_property_accepted_updates_are_valid_and_rejected_ones_change_nothing(make, mode, changes):
    projection = make.bootstrapped(mode)
    before = canonical_json(projection)
    try:
        outcome = execute_updates(projection, [make.effect(changes)])
    except RpError as error:
        assert error.problems and all(p.pointer is not None for p in error.problems)
        assert canonical_json(projection) == before
    else:
        schema = projection["namespaces"]["story"]["definition"]["schema"]
        assert validate_value(schema, outcome.values["story"]) == []
        assert canonical_json(projection) == before


GARBAGE = st.recursive(
    st.one_of(JSON_LEAF, st.tuples(st.integers()), st.frozensets(st.integers(), max_size=2), st.just(object())),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(
            st.one_of(
                st.sampled_from(
                    ["kind", "namespace", "expectedRevision", "payload", "changes", "op", "path", "by", "value", "reason", "ruleId"]
                ),
                st.integers(),
            ),
            inner,
            max_size=6,
        ),
    ),
    max_leaves=20,
)


@FIXTURE_HC
@given(garbage=GARBAGE)
def test_property_garbage_never_raises_anything_but_rp_error(make, garbage):
    projection = make.bootstrapped()
    for effects in (garbage, [garbage], [make.effect([garbage])], [{**make.effect([]), "payload": garbage}]):
        try:
            execute_updates(projection, effects)
        except RpError as error:
            assert error.code == "state.update.rejected" and error.problems
