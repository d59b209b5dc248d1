"""Explicit configuration: create, update, reset, delete as pure planned results."""

from __future__ import annotations

import pytest

from roleplay.canonical import canonical_json
from roleplay.errors import ValidationError
from roleplay.state import limits
from roleplay.state.config import plan_config
from roleplay.state.projection import apply_config
from roleplay.state.shape import empty_projection


def fails(projection, command):
    before = canonical_json(projection)
    with pytest.raises(ValidationError) as caught:
        plan_config(projection, command)
    assert caught.value.code == "state.config.rejected"
    assert canonical_json(projection) == before
    return [(p.code, p.pointer) for p in caught.value.problems]


def test_create_requires_expected_revision_zero(make):
    command = {"action": "create", "expectedRevision": 0, "definition": make.definition(), "initialValue": make.value()}
    result = plan_config(empty_projection(), command)
    assert result["action"] == "create" and result["namespace"] == "story"  # the default namespace
    assert result["entry"]["value"] == result["entry"]["initialValue"] == make.value()
    assert result["entry"]["revision"] == 1
    projection = apply_config(empty_projection(), result)
    assert projection["namespaces"]["story"]["revision"] == 1 and projection["revision"] == 1
    assert fails(empty_projection(), {**command, "expectedRevision": 1}) == [("state.config.create_revision", "/expectedRevision")]
    assert fails(projection, command) == [("state.config.namespace_exists", "/namespace")]


def test_create_validates_definition_and_initial_value_with_pointers(make):
    definition = make.definition()
    definition["schema"]["properties"]["day"]["pattern"] = "x"
    bad_value = make.value()
    bad_value["day"] = "one"
    command = {"action": "create", "namespace": "world", "expectedRevision": 0, "definition": definition, "initialValue": bad_value}
    # With a broken schema the value cannot be judged against it, so only the schema is reported.
    assert fails(empty_projection(), command) == [("state.schema.pattern_forbidden", "/definition/schema/properties/day/pattern")]
    definition["schema"]["properties"]["day"].pop("pattern")
    assert fails(empty_projection(), {**command, "definition": definition}) == [("state.value.schema_violation", "/initialValue/day")]


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("x", [("state.config.command_invalid", "")]),
        ({"action": "drop"}, [("state.config.action_invalid", "/action")]),
        ({"action": "reset"}, [("state.config.field_missing", "/expectedRevision")]),
        (
            {"action": "reset", "expectedRevision": 1, "value": 3},
            [("state.config.field_unknown", "/value"), ("state.config.namespace_unknown", "/namespace")],
        ),
        ({"action": "delete", "expectedRevision": True}, [("state.config.revision_invalid", "/expectedRevision")]),
        ({"action": "delete", "expectedRevision": 0, "namespace": "李钰"}, [("state.namespace.name_invalid", "/namespace")]),
    ],
)
def test_command_shape(command, expected):
    assert fails(empty_projection(), command) == expected


def test_update_replaces_the_complete_definition_and_keeps_values_that_still_fit(make):
    projection = make.bootstrapped()
    definition = make.definition("schema-only")
    definition["title"] = "新标题"
    result = plan_config(projection, {"action": "update", "expectedRevision": 1, "definition": definition})
    after = apply_config(projection, result)["namespaces"]["story"]
    assert after["definition"] == definition
    assert after["value"] == projection["namespaces"]["story"]["value"]
    assert after["initialValue"] == projection["namespaces"]["story"]["initialValue"]
    assert after["revision"] == 2


def test_update_conditionally_replaces_complete_values(make):
    projection = make.bootstrapped()
    definition = make.definition()
    definition["schema"]["properties"]["day"]["minimum"] = 5
    command = {"action": "update", "expectedRevision": 1, "definition": definition}
    assert fails(projection, command) == [
        ("state.config.kept_value_invalid", "/initialValue/day"),
        ("state.config.kept_value_invalid", "/value/day"),
    ]
    initial = {**make.value(), "day": 5}
    assert fails(projection, {**command, "initialValue": initial}) == [("state.config.kept_value_invalid", "/value/day")]
    result = plan_config(projection, {**command, "initialValue": initial, "value": {**initial, "day": 6}})
    after = apply_config(projection, result)["namespaces"]["story"]
    assert (after["initialValue"]["day"], after["value"]["day"]) == (5, 6)


def test_update_and_reset_and_delete_need_the_current_revision(make):
    projection = make.bootstrapped()
    for command in (
        {"action": "update", "expectedRevision": 0, "definition": make.definition()},
        {"action": "reset", "expectedRevision": 2},
        {"action": "delete", "expectedRevision": 3},
    ):
        assert fails(projection, command) == [("state.config.revision_mismatch", "/expectedRevision")]
    assert fails(projection, {"action": "delete", "namespace": "ghost", "expectedRevision": 1}) == [
        ("state.config.namespace_unknown", "/namespace")
    ]


def test_reset_copies_initial_value_to_value(make):
    projection = make.bootstrapped()
    projection["namespaces"]["story"]["value"] = {**make.value(), "day": 9}
    projection["namespaces"]["story"]["diagnostics"]["lastCommit"] = [{"code": "x", "message": "m"}]
    result = plan_config(projection, {"action": "reset", "expectedRevision": 1})
    after = apply_config(projection, result)["namespaces"]["story"]
    assert after["value"] == after["initialValue"] == make.value()
    assert after["diagnostics"]["lastCommit"] == []
    assert after["revision"] == 2


def test_delete_removes_the_namespace(make):
    projection = make.bootstrapped()
    result = plan_config(projection, {"action": "delete", "expectedRevision": 1})
    assert result == {"action": "delete", "namespace": "story", "expectedRevision": 1, "entry": None}
    after = apply_config(projection, result)
    assert after["namespaces"] == {} and after["revision"] == projection["revision"] + 1
    # A deleted namespace can be created again from revision 0.
    recreate = {"action": "create", "expectedRevision": 0, "definition": make.definition(), "initialValue": make.value()}
    assert plan_config(after, recreate)["entry"]["revision"] == 1


def test_setup_diagnostics_carry_definition_warnings(make):
    definition = make.definition()
    definition["rules"] = []
    result = plan_config(
        empty_projection(), {"action": "create", "expectedRevision": 0, "definition": definition, "initialValue": make.value()}
    )
    assert [d["code"] for d in result["entry"]["diagnostics"]["setup"]] == ["state.definition.no_rules"]


def test_results_are_canonical_copies(make):
    definition = make.definition()
    result = plan_config(
        empty_projection(), {"action": "create", "expectedRevision": 0, "definition": definition, "initialValue": make.value()}
    )
    definition["title"] = "changed later"
    assert result["entry"]["definition"]["title"] == "故事"
    assert canonical_json(result)  # plain JSON throughout


def test_namespace_count_is_bounded(make):
    projection = empty_projection()
    for i in range(limits.MAX_NAMESPACES):
        projection = apply_config(
            projection,
            plan_config(
                projection,
                {
                    "action": "create",
                    "namespace": f"n{i}",
                    "expectedRevision": 0,
                    "definition": make.definition("schema-only"),
                    "initialValue": make.value(),
                },
            ),
        )
    command = {
        "action": "create",
        "namespace": "extra",
        "expectedRevision": 0,
        "definition": make.definition(),
        "initialValue": make.value(),
    }
    assert fails(projection, command) == [("state.config.too_many_namespaces", "/namespace")]
