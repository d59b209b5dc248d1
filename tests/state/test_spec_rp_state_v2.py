"""rp-state-v2.md, sentence by sentence.

Each sentence of ``/work/shared/spec/rp-state-v2.md`` maps to the tests that pin it. Tests named
without a module live in this file; others are ``module::test``.

| # | Reference sentence | Tests |
|---|---|---|
| P1 | Each Session projection has `protocolVersion: 2`, a projection `revision`, and a `namespaces` map. | test_p1_projection_shape; test_projection::test_versions_and_names |
| P2 | `revision`: namespace CAS version | test_p2_namespace_revision_is_cas; test_update::test_expected_revision_is_a_compare_and_swap; test_config::test_update_and_reset_and_delete_need_the_current_revision |
| P3 | `initialValue`: immutable reset baseline until an explicit configuration update | test_p3_initial_value_is_the_reset_baseline; test_config::test_update_conditionally_replaces_complete_values |
| P4 | `value`: current plain JSON value | test_p4_value_is_plain_json; test_schema::test_plain_json_check_rejects_non_json |
| P5 | `definition`: `title`, optional `description`, `updateMode`, restricted `schema`, and semantic `rules` | test_definition::test_description_is_optional_everything_else_required; test_definition::test_field_problems |
| P6 | `diagnostics.setup`: durable initialization diagnostics | test_p6_setup_diagnostics_survive_commits; test_projection::test_a_namespace_that_fails_bootstrap_is_kept_read_only_with_diagnostics |
| P7 | `diagnostics.lastCommit`: diagnostics from only the latest successful commit | test_projection::test_last_commit_diagnostics_come_only_from_the_latest_successful_commit |
| P8 | Use Session-local paths such as `/characters/李钰/好感度`. | test_p8_session_local_paths; test_pointers::test_parse_unescapes_tokens_and_keeps_unicode |
| P9 | A namespace is only a partition ID, never a character owner or asset alias. | test_definition::test_namespace_ids_are_not_names_or_paths; test_definition::test_field_problems (owner, alias) |
| P10 | `story` is the default initialization namespace. | test_p10_story_is_the_default; test_config::test_create_requires_expected_revision_zero |
| S1 | Allowed keywords are: common `type`, `title`, `description`, `enum`, `const`; object `properties`, `required`, `additionalProperties`; array `items`, `minItems`, `maxItems`; number `minimum`, `maximum`; string `minLength`, `maxLength`. | test_schema::test_every_allowed_keyword_is_accepted; test_schema::test_keyword_values_are_checked |
| S2 | `type` is one JSON type or a finite array of JSON types. | test_schema::test_type_may_be_one_type_or_a_finite_array_of_types; test_schema::test_keyword_values_are_checked |
| S3 | Do not use `$ref`, composition or conditional schemas, patterns, scripts, custom keywords, or unknown fields. | test_schema::test_forbidden_keywords_are_rejected_with_a_pointer_to_the_keyword; test_schema::test_all_violations_are_reported_at_once |
| S4 | The definition, initial value, and current value must all validate. | test_s4_definition_initial_and_current_value_validate; test_definition::test_definition_initial_value_and_value_must_all_validate; test_update::test_property_accepted_updates_are_valid_and_rejected_ones_change_nothing |
| R1 | A rule has stable `id`, JSON-Pointer `target`, semantic `when`, optional machine `condition`, an `effect`, optional `guidance`, and `cadence` (`when-applicable` or `every-turn`). | test_rules::test_a_complete_rule_with_every_field_is_valid; test_rules::test_required_fields; test_rules::test_invalid_rules |
| R2 | Supported effects are `set`, `increment`, `append`, and `remove`; increment effects may bound `minimum` and `maximum` deltas. | test_rules::test_supported_effects_fit_their_targets; test_rules::test_invalid_rules; test_update::test_rules_required_enforces_target_operation_and_bounds |
| R3 | `rules-required`: every change needs a matching `ruleId`; target, operation, increment bounds, and condition are enforced. | test_update::test_rules_required_needs_a_matching_rule_id; test_update::test_rules_required_enforces_target_operation_and_bounds; test_update::test_conditions_are_evaluated_in_order_against_the_working_state |
| R4 | `schema-only`: a `ruleId` is optional; operations and the final schema still apply. | test_update::test_schema_only_rule_id_is_optional_but_enforced_when_given; test_update::test_final_schema_errors_map_to_the_last_change_covering_the_target |
| R5 | `disabled`: State is readable but story commits cannot change it. | test_r5_disabled_is_readable_not_writable; test_update::test_disabled_namespaces_cannot_be_changed_by_story_commits |
| R6 | `when` and `guidance` explain semantic judgment. Only `condition` is machine-evaluated. | test_r6_only_condition_is_evaluated |
| R7 | Missing applicable `every-turn` changes add a diagnostic without rejecting the commit. | test_update::test_every_turn_rules_missing_add_a_diagnostic_without_rejecting; test_rules::test_every_turn_rules_missing_from_a_commit_are_diagnosed |
| C1 | Use one effect per namespace (reference example shape). | test_c1_reference_example_applies; test_update::test_one_effect_per_namespace; test_operations::test_the_reference_example_matches_the_tool_schema |
| C2 | `set` uses `value`; `increment` uses finite `by`; `append` uses `value`; `remove` has no value field. | test_update::test_operand_fields_per_operation; test_update::test_non_finite_by_is_invalid; test_operations::test_branches_are_closed_and_exclusive |
| C3 | Every change needs `reason`. | test_update::test_every_change_needs_a_reason |
| C4 | Root removal, missing targets where the operation requires an existing value, scripts, merge operations, duplicate paths, and ancestor/descendant path conflicts are invalid. | test_update::test_root_removal_is_invalid; test_update::test_missing_targets_where_the_operation_needs_one_are_invalid; test_update::test_script_merge_and_patch_ops_are_invalid; test_update::test_script_fields_are_invalid; test_update::test_duplicate_paths_are_invalid; test_update::test_ancestor_descendant_conflicts_are_invalid |
| C5 | Changes run in order but commit atomically only after all rules and the final schema pass. | test_c5_order_and_atomicity; test_update::test_all_or_nothing_across_namespaces; test_update::test_property_accepted_updates_are_valid_and_rejected_ones_change_nothing |
| K1 | World-book `stateCondition` and rule `condition` support only `state(namespace, jsonPointer)` and `exists(namespace, jsonPointer)`; | test_conditions::test_evaluation; test_k1_one_evaluator_for_rules_and_lorebooks |
| K2 | JSON scalar literals and parentheses; | test_conditions::test_evaluation |
| K3 | `!`, `&&`, `||`, `==`, `!=`, `>`, `>=`, `<`, and `<=`. | test_conditions::test_evaluation; test_conditions::test_short_circuit_guards_missing_paths |
| K4 | Do not use aliases, property access, arithmetic, arbitrary functions, or executable code. | test_conditions::test_aliases_property_access_arithmetic_functions_and_code_are_rejected |
| K5 | Missing paths, type mismatches, and malformed expressions evaluate inactive and produce diagnostics. | test_conditions::test_missing_paths_type_mismatches_and_malformed_expressions_are_inactive_with_diagnostics; test_conditions::test_garbage_never_raises_and_inactive_always_explains |
| E1 | `rp_state` is Agent-only and supports `create`, `update`, `reset`, and `delete` after an explicit user request. | test_e1_four_operations (tool exposure and mode masking are wired later with the tools) |
| E2 | `create` requires `expectedRevision: 0`. | test_config::test_create_requires_expected_revision_zero |
| E3 | `update` replaces the complete definition and conditionally replaces complete values. | test_config::test_update_replaces_the_complete_definition_and_keeps_values_that_still_fit; test_config::test_update_conditionally_replaces_complete_values |
| E4 | `reset` copies `initialValue` to `value`. | test_config::test_reset_copies_initial_value_to_value |
| E5 | `delete` removes the namespace. | test_config::test_delete_removes_the_namespace |
| E6 | A successful configuration takes effect immediately and is owned by the model assistant message that invoked the tool. | test_projection::test_config_takes_effect_immediately_and_clears_last_commit (ownership is event-log wiring) |
| E7 | Editing only that reply's text preserves it; deleting or regenerating the reply retracts it and rebuilds the projection from the remaining bootstrap, configuration, and turn-commit entities before replay starts. | test_projection::test_retracting_a_reply_rebuilds_from_the_remaining_entities; test_projection::test_rebuilding_from_entities_equals_the_incremental_result; test_projection::test_property_replaying_any_prefix_equals_folding_it_live |
| E8 | Bootstrap initialization is not message-owned and is never retracted this way. | test_projection::test_bootstrap_is_never_retracted_by_reply_deletion |
"""

from __future__ import annotations

import pytest

from roleplay.errors import ValidationError
from roleplay.state import (
    DEFAULT_NAMESPACE,
    apply_commit,
    bootstrap_payload,
    evaluate_condition,
    execute_updates,
    plan_config,
    prepare_commit,
    state_commit_contract,
)
from roleplay.state.config import ACTIONS
from roleplay.state.projection import apply_bootstrap, apply_config
from roleplay.state.shape import empty_projection, namespace_values

AFF = "/characters/李钰/好感度"


def test_p1_projection_shape(projection):
    assert projection["protocolVersion"] == 2
    assert isinstance(projection["revision"], int)
    assert isinstance(projection["namespaces"], dict) and "story" in projection["namespaces"]


def test_p2_namespace_revision_is_cas(projection, make):
    effect = make.effect([make.change("increment", AFF, by=1, rule="liyu-affection")], revision=1)
    after = apply_commit(projection, prepare_commit(projection, [effect]))
    assert after["namespaces"]["story"]["revision"] == 2
    with pytest.raises(ValidationError) as caught:
        prepare_commit(after, [effect])  # same expectedRevision again: stale
    assert caught.value.problems[0].code == "state.update.revision_mismatch"


def test_p3_initial_value_is_the_reset_baseline(projection, make):
    effect = make.effect([make.change("increment", AFF, by=4, rule="liyu-affection")])
    after = apply_commit(projection, prepare_commit(projection, [effect]))
    assert after["namespaces"]["story"]["initialValue"] == make.value()  # commits never touch it
    reset = apply_config(after, plan_config(after, {"action": "reset", "expectedRevision": 2}))
    assert reset["namespaces"]["story"]["value"] == make.value()


def test_p4_value_is_plain_json(schema_only, make):
    with pytest.raises(ValidationError) as caught:
        execute_updates(schema_only, [make.effect([make.change("set", "/characters/李钰/mood", value={1, 2})])])
    assert caught.value.problems[0].code == "state.value.not_json"


def test_p6_setup_diagnostics_survive_commits(make):
    note = {"code": "mvu.note", "message": "converted"}
    projection = apply_bootstrap(empty_projection(), bootstrap_payload(make.definition(), make.value(), setup_diagnostics=[note]))
    effect = make.effect([make.change("increment", AFF, by=1, rule="liyu-affection")])
    after = apply_commit(projection, prepare_commit(projection, [effect]))
    assert after["namespaces"]["story"]["diagnostics"]["setup"] == [note]


def test_p8_session_local_paths(projection, make):
    outcome = execute_updates(projection, [make.effect([make.change("increment", "/characters/李钰/好感度", by=1, rule="liyu-affection")])])
    assert outcome.records[0]["path"] == "/characters/李钰/好感度"


def test_p10_story_is_the_default(make):
    assert DEFAULT_NAMESPACE == "story"
    assert list(bootstrap_payload(make.definition(), make.value())["namespaces"]) == ["story"]


def test_s4_definition_initial_and_current_value_validate(make):
    bad = make.value()
    bad["characters"]["李钰"]["好感度"] = 101
    with pytest.raises(ValidationError):
        bootstrap_payload(make.definition(), bad)
    projection = make.bootstrapped()
    with pytest.raises(ValidationError) as caught:
        plan_config(projection, {"action": "update", "expectedRevision": 1, "definition": make.definition(), "value": bad})
    assert [p.pointer for p in caught.value.problems] == ["/value/characters/李钰/好感度"]


def test_r5_disabled_is_readable_not_writable(make):
    projection = make.bootstrapped("disabled")
    assert namespace_values(projection)["story"] == make.value()
    assert evaluate_condition('state("story", "/day") == 1', namespace_values(projection)) == (True, [])
    with pytest.raises(ValidationError):
        execute_updates(projection, [make.effect([make.change("set", "/weather", value="雨")])])


def test_r6_only_condition_is_evaluated(make):
    definition = make.definition()
    for rule in definition["rules"]:
        rule["when"] = 'state("story", "/day") == 999'  # looks like a condition, is prose
        rule["guidance"] = "false && false"
    projection = apply_bootstrap(empty_projection(), bootstrap_payload(definition, make.value()))
    outcome = execute_updates(projection, [make.effect([make.change("set", "/weather", value="雪", rule="weather")])])
    assert outcome.values["story"]["weather"] == "雪"


def test_c1_reference_example_applies(make):
    value = make.value()
    definition = make.definition()
    definition["rules"].append(
        {
            "id": "liyu-affection-normal-positive",
            "target": AFF,
            "when": "信任增加",
            "effect": {"op": "increment", "minimum": 1, "maximum": 3},
            "cadence": "when-applicable",
        }
    )
    projection = apply_bootstrap(empty_projection(), bootstrap_payload(definition, value))
    for revision in (1, 2, 3):  # bring the namespace to revision 4 as in the reference
        projection = apply_commit(
            projection,
            prepare_commit(projection, [make.effect([make.change("set", "/weather", value="晴", rule="weather")], revision=revision)]),
        )
    example = {
        "kind": "state.update",
        "namespace": "story",
        "expectedRevision": 4,
        "payload": {
            "changes": [
                {
                    "op": "increment",
                    "path": "/characters/李钰/好感度",
                    "by": 2,
                    "ruleId": "liyu-affection-normal-positive",
                    "reason": "李钰主动分享了此前隐瞒的经历，信任有所增加",
                }
            ]
        },
    }
    after = apply_commit(projection, prepare_commit(projection, [example]))
    assert after["namespaces"]["story"]["value"]["characters"]["李钰"]["好感度"] == 12


def test_c5_order_and_atomicity(make):
    projection = make.bootstrapped("schema-only")
    ordered = [make.change("set", "/characters/王五", value={"好感度": 0, "items": []}), make.change("increment", "/day", by=1)]
    assert execute_updates(projection, [make.effect(ordered)]).values["story"]["day"] == 2
    failing = [make.change("set", "/weather", value="雪"), make.change("increment", "/characters/王五/好感度", by=1)]
    with pytest.raises(ValidationError):
        execute_updates(projection, [make.effect(failing)])
    assert "weather" not in projection["namespaces"]["story"]["value"]


def test_k1_one_evaluator_for_rules_and_lorebooks(projection):
    # A lorebook stateCondition is evaluated against the same namespace values as rule conditions.
    values = namespace_values(projection)
    assert evaluate_condition('exists("story", "/characters/李钰/secret") && state("story", "/day") < 2', values) == (True, [])
    contract = state_commit_contract(projection)["namespaces"]["story"]
    assert "liyu-secret-clear" in [r["id"] for r in contract["rules"]]  # its rule condition holds too


def test_e1_four_operations():
    assert set(ACTIONS) == {"create", "update", "reset", "delete"}
