"""Semantic rules: their shape, their fit to the schema, and how changes are held to them.

A rule says which change is allowed (``target`` + ``effect``) and when (``when`` for the model's
judgement, optional machine ``condition``). Only ``condition`` is evaluated by the engine; ``when``
and ``guidance`` are prose for the model. ``every-turn`` rules are expectations, not gates: a commit
that misses an applicable one is accepted with a diagnostic.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence, TypeGuard

from roleplay.errors import Problem
from roleplay.state import limits
from roleplay.state.conditions import condition_problems, evaluate_condition
from roleplay.state.operations import OPERATIONS
from roleplay.state.pointers import PointerError, closed_object_problems, parse_pointer
from roleplay.state.schema import admits, item_schema, schema_at

RULE_REQUIRED = ("id", "target", "when", "effect", "cadence")
RULE_OPTIONAL = ("condition", "guidance")
CADENCES = ("when-applicable", "every-turn")
EFFECT_FIELDS = ("op", "minimum", "maximum")


def _finite(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _text_ok(value: Any, limit: int) -> bool:
    return isinstance(value, str) and value.strip() != "" and len(value) <= limit


def validate_rules(rules: Any, schema: dict | None, base: str = "/rules") -> list[Problem]:
    """Every problem of a rule list; target checks against ``schema`` are skipped when it is None
    (an invalid schema is reported on its own and would only produce follow-on noise here)."""
    if not isinstance(rules, list):
        return [Problem("state.rule.list_invalid", "'rules' must be an array", base)]
    if len(rules) > limits.MAX_RULES:
        return [Problem("state.rule.too_many", f"at most {limits.MAX_RULES} rules per namespace", base)]
    problems: list[Problem] = []
    seen: dict[str, int] = {}
    for index, rule in enumerate(rules):
        where = f"{base}/{index}"
        problems.extend(_validate_rule(rule, schema, where))
        rule_id = rule.get("id") if isinstance(rule, dict) else None
        if isinstance(rule_id, str):
            if rule_id in seen:
                problems.append(
                    Problem("state.rule.id_duplicate", f"rule id {rule_id!r} is already used by rule {seen[rule_id]}", where + "/id")
                )
            else:
                seen[rule_id] = index
    return problems


def _validate_rule(rule: Any, schema: dict | None, where: str) -> list[Problem]:
    if not isinstance(rule, dict):
        return [Problem("state.rule.not_object", "a rule must be an object", where)]
    problems = closed_object_problems(
        rule, RULE_REQUIRED, RULE_OPTIONAL, code="state.rule", unknown="rule", needs="a rule needs", base=where
    )

    if "id" in rule and not _text_ok(rule["id"], limits.MAX_RULE_ID):
        problems.append(
            Problem("state.rule.id_invalid", f"'id' must be a non-empty string of at most {limits.MAX_RULE_ID} characters", f"{where}/id")
        )
    for key in ("when", "guidance"):
        if key in rule and not _text_ok(rule[key], limits.MAX_RULE_TEXT):
            problems.append(
                Problem(
                    "state.rule.field_invalid",
                    f"{key!r} must be non-empty text of at most {limits.MAX_RULE_TEXT} characters",
                    f"{where}/{key}",
                )
            )
    if "cadence" in rule and rule["cadence"] not in CADENCES:
        problems.append(Problem("state.rule.cadence_invalid", f"'cadence' must be one of {', '.join(CADENCES)}", f"{where}/cadence"))
    if "condition" in rule:
        for problem in condition_problems(rule["condition"]):
            problem.pointer = f"{where}/condition"
            problems.append(problem)

    op = _validate_effect(rule.get("effect"), f"{where}/effect", problems) if "effect" in rule else None
    if "target" in rule:
        problems.extend(_validate_target(rule["target"], op, schema, f"{where}/target"))
    return problems


def _validate_effect(effect: Any, where: str, problems: list[Problem]) -> str | None:
    if not isinstance(effect, dict):
        problems.append(Problem("state.rule.effect_invalid", "'effect' must be an object with 'op'", where))
        return None
    for key in sorted(effect, key=str):
        if key not in EFFECT_FIELDS:
            problems.append(Problem("state.rule.field_unknown", f"unknown effect field {key!r}", f"{where}/{key}"))
    op = effect.get("op")
    if op not in OPERATIONS:
        problems.append(Problem("state.rule.op_unsupported", f"effect op must be one of {', '.join(OPERATIONS)}", f"{where}/op"))
        op = None
    bounds = [key for key in ("minimum", "maximum") if key in effect]
    if bounds and op is not None and op != "increment":
        for key in bounds:
            problems.append(Problem("state.rule.bounds_invalid", "only increment effects take delta bounds", f"{where}/{key}"))
    elif bounds:
        for key in bounds:
            if not _finite(effect[key]):
                problems.append(Problem("state.rule.bounds_invalid", f"{key!r} must be a finite number", f"{where}/{key}"))
        low, high = effect.get("minimum"), effect.get("maximum")
        if _finite(low) and _finite(high) and low > high:
            problems.append(Problem("state.rule.bounds_invalid", "'minimum' exceeds 'maximum'", f"{where}/minimum"))
    return op


def _validate_target(target: Any, op: str | None, schema: dict | None, where: str) -> list[Problem]:
    try:
        parts = parse_pointer(target)
    except PointerError as exc:
        return [Problem("state.rule.target_invalid", str(exc), where)]
    if op == "remove" and not parts:
        return [Problem("state.rule.root_remove", "a rule may not remove the namespace root", where)]
    if schema is None:
        return []
    node = schema_at(schema, parts)
    if node is None:
        return [Problem("state.rule.target_not_in_schema", f"the schema admits no value at {target!r}", where)]
    if op == "increment" and not admits(node, "number"):
        return [Problem("state.rule.op_type_mismatch", "increment needs a numeric target", where)]
    if op == "append" and item_schema(node) is None:
        return [Problem("state.rule.op_type_mismatch", "append needs an array target", where)]
    return []


def rules_by_id(definition: Mapping[str, Any]) -> dict[str, dict]:
    return {rule["id"]: rule for rule in definition.get("rules", [])}


def rule_pointer(definition: Mapping[str, Any], rule_id: str) -> str | None:
    for index, rule in enumerate(definition.get("rules", [])):
        if rule["id"] == rule_id:
            return f"/definition/rules/{index}"
    return None


def static_rule_mismatches(rule: Mapping[str, Any], change: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """``(code, message, field)`` for each way a well-formed change departs from its rule."""
    found: list[tuple[str, str, str]] = []
    if change.get("path") != rule["target"]:
        found.append(("state.update.rule_target_mismatch", f"rule {rule['id']!r} targets {rule['target']!r}", "path"))
    effect = rule["effect"]
    if change.get("op") != effect["op"]:
        found.append(("state.update.rule_op_mismatch", f"rule {rule['id']!r} allows only {effect['op']!r}", "op"))
    elif effect["op"] == "increment" and _finite(change.get("by")):
        by = change["by"]
        if "minimum" in effect and by < effect["minimum"]:
            found.append(("state.update.by_out_of_bounds", f"rule {rule['id']!r} allows a delta of at least {effect['minimum']}", "by"))
        if "maximum" in effect and by > effect["maximum"]:
            found.append(("state.update.by_out_of_bounds", f"rule {rule['id']!r} allows a delta of at most {effect['maximum']}", "by"))
    return found


def every_turn_diagnostics(
    namespace: str,
    definition: Mapping[str, Any],
    changes: Sequence[Mapping[str, Any]],
    values_before: Mapping[str, Any],
) -> list[Problem]:
    """Diagnostics for applicable ``every-turn`` rules that this commit did not exercise.

    Applicability is judged on the state before the commit (what the model saw in its contract).
    A rule counts as exercised by a change naming it, or by an unattributed change to its target
    (``schema-only`` namespaces may omit ``ruleId``). Broken conditions are reported too, since a
    rule whose condition cannot be evaluated silently stops being expected.
    """
    if definition.get("updateMode") == "disabled":
        return []
    exercised_ids = {c.get("ruleId") for c in changes if c.get("ruleId") is not None}
    exercised_paths = {c.get("path") for c in changes if c.get("ruleId") is None}
    found: list[Problem] = []
    for index, rule in enumerate(definition.get("rules", [])):
        if rule["cadence"] != "every-turn":
            continue
        where = f"/definition/rules/{index}"
        if "condition" in rule:
            active, diagnostics = evaluate_condition(rule["condition"], values_before)
            for diagnostic in diagnostics:
                diagnostic.pointer = where + "/condition"
                diagnostic.details.update({"namespace": namespace, "ruleId": rule["id"]})
                found.append(diagnostic)
            if not active:
                continue
        if rule["id"] in exercised_ids or rule["target"] in exercised_paths:
            continue
        found.append(
            Problem(
                "state.rule.every_turn_missing",
                f"every-turn rule {rule['id']!r} applied but no change updated {rule['target']!r}",
                where,
                {"namespace": namespace, "ruleId": rule["id"], "target": rule["target"]},
            )
        )
    return found
