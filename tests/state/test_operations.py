"""The single operation specification and what derives from it."""

from __future__ import annotations

import pytest
from jsonschema import Draft202012Validator

from roleplay.state import limits
from roleplay.state.operations import OPERATIONS, contract_operations, state_update_tool_schema

SPEC_EXAMPLE = {
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


@pytest.fixture(scope="module")
def validator():
    schema = state_update_tool_schema()
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def test_the_reference_example_matches_the_tool_schema(validator):
    assert list(validator.iter_errors(SPEC_EXAMPLE)) == []


@pytest.mark.parametrize(
    "change",
    [
        {"op": "set", "path": "/a", "value": {"x": 1}, "reason": "r"},
        {"op": "increment", "path": "/a", "by": -1.5, "reason": "r"},
        {"op": "append", "path": "/a", "value": "x", "reason": "r", "ruleId": "x"},
        {"op": "remove", "path": "/a", "reason": "r"},
    ],
)
def test_each_operation_branch(validator, change):
    effect = {**SPEC_EXAMPLE, "payload": {"changes": [change]}}
    assert list(validator.iter_errors(effect)) == []


@pytest.mark.parametrize(
    "change",
    [
        {"op": "set", "path": "/a", "reason": "r"},  # set needs value
        {"op": "increment", "path": "/a", "value": 1, "reason": "r"},  # increment uses by
        {"op": "remove", "path": "/a", "value": 1, "reason": "r"},  # remove has no value
        {"op": "set", "path": "/a", "value": 1},  # reason required
        {"op": "merge", "path": "/a", "value": {}, "reason": "r"},
        {"op": "set", "path": "/a", "value": 1, "reason": "r", "script": "x"},
    ],
)
def test_branches_are_closed_and_exclusive(validator, change):
    effect = {**SPEC_EXAMPLE, "payload": {"changes": [change]}}
    assert list(validator.iter_errors(effect))


def test_envelope_is_closed_and_bounded(validator):
    assert list(validator.iter_errors({**SPEC_EXAMPLE, "extra": 1}))
    too_many = {**SPEC_EXAMPLE, "payload": {"changes": SPEC_EXAMPLE["payload"]["changes"] * (limits.MAX_CHANGES + 1)}}
    assert list(validator.iter_errors(too_many))


def test_contract_table_and_tool_schema_derive_from_the_same_specification():
    table = contract_operations()
    branches = state_update_tool_schema()["properties"]["payload"]["properties"]["changes"]["items"]["oneOf"]
    assert set(table["operations"]) == set(OPERATIONS) == {b["properties"]["op"]["const"] for b in branches}
    for branch in branches:
        op = branch["properties"]["op"]["const"]
        assert table["operations"][op]["required"] == branch["required"]
        assert set(branch["properties"]) == set(table["operations"][op]["required"]) | set(table["operations"][op]["optional"])
        assert branch["additionalProperties"] is False and table["operations"][op]["closed"] is True
    assert table["envelope"]["required"] == state_update_tool_schema()["required"]
    assert OPERATIONS["set"].operand == "value" and OPERATIONS["increment"].operand == "by"
    assert OPERATIONS["append"].operand == "value" and OPERATIONS["remove"].operand is None
