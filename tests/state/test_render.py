"""Writer-side view and the parent-side state_commit_contract v2."""

from __future__ import annotations

import json

from roleplay.canonical import canonical_json
from roleplay.state.config import plan_config
from roleplay.state.operations import contract_operations
from roleplay.state.projection import apply_config
from roleplay.state.render import render_commit_contract, render_writer_view, state_commit_contract
from roleplay.state.shape import empty_projection


def with_namespace(projection, name, mode, make):
    command = {
        "action": "create",
        "namespace": name,
        "expectedRevision": 0,
        "definition": make.definition(mode),
        "initialValue": make.value(),
    }
    return apply_config(projection, plan_config(projection, command))


def test_writer_view_has_only_name_description_and_value(projection, make):
    text = render_writer_view(projection)
    assert text.startswith("namespace: story\ndescription: 主线状态\nvalue:\n")
    assert json.loads(text.split("value:\n", 1)[1]) == make.value()
    for hidden in ("revision", "updateMode", "rules", "schema", "liyu-affection", "diagnostics", "故事"):
        assert hidden not in text


def test_writer_view_orders_story_first_and_omits_missing_description(projection, make):
    projection = with_namespace(projection, "aaa", "schema-only", make)
    projection["namespaces"]["aaa"]["definition"].pop("description")
    text = render_writer_view(projection)
    assert text.index("namespace: story") < text.index("namespace: aaa")
    assert text.split("namespace: aaa\n", 1)[1].startswith("value:\n")
    assert render_writer_view(empty_projection()) == ""


def test_contract_is_single_line_canonical_json(projection):
    text = render_commit_contract(projection)
    assert "\n" not in text
    assert text == canonical_json(json.loads(text))
    contract = json.loads(text)
    assert contract["contract"] == "state_commit_contract" and contract["version"] == 2
    for key, value in contract_operations().items():
        assert contract[key] == value


def test_rules_required_carries_rules_and_value_schemas_only_for_set_and_append(projection):
    story = state_commit_contract(projection)["namespaces"]["story"]
    assert story["expectedRevision"] == 1 and story["updateMode"] == "rules-required"
    assert story["currentValue"] == projection["namespaces"]["story"]["value"]
    assert "schema" not in story
    rules = {r["id"]: r for r in story["rules"]}
    assert rules["liyu-mood"]["valueSchema"] == {"type": "string", "minLength": 1, "maxLength": 20}
    assert rules["liyu-items"]["valueSchema"] == {"type": "string"}  # the element appended
    assert rules["weather"]["valueSchema"] == {"type": "string", "enum": ["晴", "雨", "雪"]}
    for op_only in ("liyu-affection", "next-day", "liyu-secret-clear"):
        assert "valueSchema" not in rules[op_only]
    assert rules["liyu-affection"]["effect"] == {"op": "increment", "minimum": -5, "maximum": 5}
    assert rules["liyu-affection"]["condition"].startswith("state(")
    assert rules["liyu-affection"]["guidance"] == "小幅变化" and rules["liyu-affection"]["cadence"] == "every-turn"


def test_only_applicable_rules_are_listed(make):
    value = make.value()
    value["characters"]["李钰"]["好感度"] = 100
    del value["characters"]["李钰"]["secret"]
    projection = make.bootstrapped(value=value)
    ids = [r["id"] for r in state_commit_contract(projection)["namespaces"]["story"]["rules"]]
    assert "liyu-affection" not in ids and "liyu-secret-clear" not in ids and "weather" in ids


def test_schema_only_carries_only_the_root_schema(schema_only):
    story = state_commit_contract(schema_only)["namespaces"]["story"]
    assert story["schema"] == schema_only["namespaces"]["story"]["definition"]["schema"]
    assert all("valueSchema" not in rule for rule in story["rules"])


def test_schema_only_without_rules_lists_none(make):
    definition = make.definition("schema-only")
    definition["rules"] = []
    projection = apply_config(
        empty_projection(),
        plan_config(
            empty_projection(), {"action": "create", "expectedRevision": 0, "definition": definition, "initialValue": make.value()}
        ),
    )
    assert set(state_commit_contract(projection)["namespaces"]["story"]) == {"expectedRevision", "updateMode", "currentValue", "schema"}


def test_disabled_namespaces_carry_no_schema_or_rules(make):
    projection = make.bootstrapped("disabled")
    assert state_commit_contract(projection)["namespaces"]["story"] == {
        "expectedRevision": 1,
        "updateMode": "disabled",
        "currentValue": make.value(),
    }


def test_every_namespace_is_in_the_contract(projection, make):
    projection = with_namespace(projection, "world", "disabled", make)
    assert list(state_commit_contract(projection)["namespaces"]) == ["story", "world"]
