"""``state.update``, the state domain's commit capability: problems pointed where each effect sits
in the commit, one effect per namespace, diagnostics, no writes."""

from __future__ import annotations

import copy
from typing import Any

from roleplay.core.effects import EffectItem
from roleplay.core.types import CommitContext
from roleplay.state import apply_bootstrap, bootstrap_payload, empty_projection
from roleplay.state.effect import validate_state_updates

DEFINITION = {
    "title": "t",
    "updateMode": "rules-required",
    "schema": {
        "type": "object",
        "properties": {"a": {"type": "integer", "minimum": 0, "maximum": 10}},
        "required": ["a"],
        "additionalProperties": False,
    },
    "rules": [
        {
            "id": "a-up",
            "target": "/a",
            "when": "w",
            "effect": {"op": "increment", "minimum": -2, "maximum": 2},
            "cadence": "when-applicable",
        }
    ],
}


def context(state: Any = None, definition: dict | None = None) -> CommitContext:
    if state is None:
        state = apply_bootstrap(empty_projection(), bootstrap_payload(definition or DEFINITION, {"a": 1}))
    return CommitContext("run1", "turn1", "ses1", "chat", "ep", None, state, {})


def update(by: Any = 1, *, namespace: str = "story", rule: str = "a-up", revision: int = 1) -> dict[str, Any]:
    change = {"op": "increment", "path": "/a", "by": by, "reason": "r", "ruleId": rule}
    return {"kind": "state.update", "namespace": namespace, "expectedRevision": revision, "payload": {"changes": [change]}}


def test_state_problems_point_at_each_effect_where_it_sits_in_the_commit() -> None:
    items = [EffectItem("/effects/1", update(by=5)), EffectItem("/effects/3", update(namespace="ghost"))]
    check = validate_state_updates(items, context())
    assert {(p.code, p.pointer) for p in check.problems} == {
        ("state.update.by_out_of_bounds", "/effects/1/payload/changes/0/by"),
        ("state.update.namespace_unknown", "/effects/3/namespace"),
    }


def test_one_effect_per_namespace_spans_effects() -> None:
    items = [EffectItem("/effects/0", update()), EffectItem("/effects/2", update(rule="nope"))]
    check = validate_state_updates(items, context())
    assert [(p.code, p.pointer) for p in check.problems] == [("state.update.namespace_duplicate", "/effects/2/namespace")]


def test_dynamic_failures_are_reported_after_static_checks_pass() -> None:
    # +2 is within the rule, but a=9+2 breaks the schema maximum: found only by running it.
    state = apply_bootstrap(empty_projection(), bootstrap_payload(DEFINITION, {"a": 9}))
    check = validate_state_updates([EffectItem("/effects/0", update(by=2))], context(state))
    assert [(p.code, p.pointer) for p in check.problems] == [("state.update.schema_violation", "/effects/0/payload/changes/0/by")]


def test_a_list_level_problem_is_blamed_on_the_first_state_effect() -> None:
    items = [EffectItem(f"/effects/{i + 2}", update()) for i in range(40)]
    check = validate_state_updates(items, context())
    assert [(p.code, p.pointer) for p in check.problems] == [("state.update.effects_invalid", "/effects/2")]


def test_valid_updates_come_back_as_independent_copies() -> None:
    effect = update(by=2)
    check = validate_state_updates([EffectItem("/effects/0", effect)], context())
    assert check.problems == [] and check.effects == [effect]
    check.effects[0]["payload"]["changes"][0]["by"] = 99
    assert effect["payload"]["changes"][0]["by"] == 2


def test_every_turn_rules_yield_diagnostics_even_without_state_effects() -> None:
    definition = copy.deepcopy(DEFINITION)
    definition["rules"][0]["cadence"] = "every-turn"
    check = validate_state_updates([], context(definition=definition))
    assert check.problems == [] and check.effects == []
    (diagnostic,) = check.diagnostics
    assert diagnostic.source_id == "rp.state" and diagnostic.details["namespace"] == "story"


def test_a_context_without_state_has_no_namespaces() -> None:
    check = validate_state_updates([EffectItem("/effects/0", update())], context(state={}))
    assert [(p.code, p.pointer) for p in check.problems] == [("state.update.namespace_unknown", "/effects/0/namespace")]


def test_validation_does_not_touch_the_context_state() -> None:
    ctx = context()
    before = copy.deepcopy(ctx.state)
    validate_state_updates([EffectItem("/effects/0", update(by=2))], ctx)
    assert ctx.state == before
