"""``state.update``: static validation, ordered execution, final schema, all-or-nothing.

Three phases, each only after the previous one is clean:

1. *Static*: every problem that can be judged from the effect, the definition and the revision
   alone (fields, op, path, ruleId, rule target/op/bounds, value type against the target schema,
   duplicate and overlapping paths, CAS). All of them are collected, so a model fixes everything
   in one retry.
2. *Dynamic*: changes run in order against a working copy; rule conditions are evaluated and
   targets must exist where the op needs them. The first failure in a namespace stops that
   namespace, because every later check would run on a state that is no longer certain and would
   only produce cascading noise. Other namespaces are independent and still run.
3. *Final schema*: each error maps to the last change that covered its path, else to the payload.

Nothing is mutated: values are rebuilt by path copying, so on any failure the caller's
projection is exactly what it was. Pointers are relative to the effect list
(``{prefix}/{effectIndex}/payload/changes/{changeIndex}/{field}``) and details always carry
``namespace``, ``changeIndex`` and ``ruleId`` where they apply.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping, TypeGuard

from roleplay.errors import Problem, ValidationError
from roleplay.state import limits
from roleplay.state.conditions import evaluate_condition
from roleplay.state.operations import EFFECT_KIND, ENVELOPE_FIELDS, FORBIDDEN_OPS, OPERATIONS, PAYLOAD_FIELDS
from roleplay.state.pointers import (
    MISSING,
    PointerError,
    format_pointer,
    is_prefix,
    lookup,
    parse_pointer,
    related,
    remove_at,
    replace_at,
)
from roleplay.state.rules import every_turn_diagnostics, static_rule_mismatches
from roleplay.state.schema import admits, check_plain_json, integer_only, item_schema, schema_at, validate_value


@dataclass
class _Change:
    index: int
    raw: dict
    op: str
    parts: tuple[str, ...]
    rule: dict | None
    appended_index: int | None = None  # set while running an append: where the element landed


@dataclass
class _Effect:
    index: int
    namespace: str
    base: str  # pointer of the effect in the caller's document
    changes: list[_Change] = field(default_factory=list)


@dataclass(frozen=True)
class UpdateOutcome:
    """A successful, not yet applied commit of state effects.

    ``values``: new value per updated namespace. ``records``: one activity record per change, in
    order. ``diagnostics``: ``lastCommit`` diagnostics for *every* namespace of the projection
    (empty lists included), because the latest commit replaces all of them.
    """

    values: dict[str, Any]
    records: list[dict]
    diagnostics: dict[str, list[Problem]]


def _is_finite_number(value: Any) -> TypeGuard[int | float]:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return math.isfinite(value)


class _Collector:
    def __init__(self) -> None:
        self.problems: list[Problem] = []

    def add(self, code: str, message: str, pointer: str, **details: Any) -> None:
        self.problems.append(Problem(code, message, pointer, {k: v for k, v in details.items() if v is not None}))


def static_problems(projection: Mapping[str, Any], effects: Any, pointer_prefix: str = "") -> list[Problem]:
    """Phase 1 only: all independent static problems (empty when the effects may run)."""
    return _static(projection, effects, pointer_prefix)[0]


def _static(projection: Mapping[str, Any], effects: Any, prefix: str) -> tuple[list[Problem], list[_Effect]]:
    out = _Collector()
    prepared: list[_Effect] = []
    if not isinstance(effects, list):
        out.add("state.update.effects_invalid", "state effects must be an array", prefix)
        return out.problems, prepared
    if len(effects) > limits.MAX_NAMESPACES:
        out.add("state.update.effects_invalid", f"at most {limits.MAX_NAMESPACES} state effects per commit", prefix)
        return out.problems, prepared
    namespaces = projection["namespaces"]
    seen_namespaces: dict[str, int] = {}
    for k, effect in enumerate(effects):
        base = f"{prefix}/{k}"
        prepared_effect = _static_effect(effect, k, base, namespaces, seen_namespaces, out)
        if prepared_effect is not None:
            prepared.append(prepared_effect)
    return out.problems, prepared


def _static_effect(effect: Any, k: int, base: str, namespaces: Mapping[str, Any], seen: dict[str, int], out: _Collector) -> _Effect | None:
    if not isinstance(effect, dict):
        out.add("state.update.effect_invalid", "a state effect must be an object", base)
        return None
    for key in sorted(effect, key=str):
        if key not in ENVELOPE_FIELDS:
            out.add("state.update.field_unknown", f"unknown effect field {key!r}", f"{base}/{key}")
    for key in ENVELOPE_FIELDS:
        if key not in effect:
            out.add("state.update.field_missing", f"a state effect needs {key!r}", f"{base}/{key}")
    if "kind" in effect and effect["kind"] != EFFECT_KIND:
        out.add("state.update.kind_invalid", f"kind must be {EFFECT_KIND!r}", f"{base}/kind")

    name = effect.get("namespace")
    entry = None
    if "namespace" in effect:
        if not isinstance(name, str) or name not in namespaces:
            out.add(
                "state.update.namespace_unknown",
                "no such namespace",
                f"{base}/namespace",
                namespace=name if isinstance(name, str) else None,
            )
        elif name in seen:
            out.add(
                "state.update.namespace_duplicate",
                f"namespace {name!r} already has effect {seen[name]}; use one effect per namespace",
                f"{base}/namespace",
                namespace=name,
            )
        else:
            seen[name] = k
            entry = namespaces[name]
            if entry["definition"]["updateMode"] == "disabled":
                out.add(
                    "state.update.namespace_disabled",
                    f"namespace {name!r} is read-only for story commits",
                    f"{base}/namespace",
                    namespace=name,
                )
                entry = None
    if "expectedRevision" in effect:
        revision = effect["expectedRevision"]
        if not isinstance(revision, int) or isinstance(revision, bool) or revision < 0:
            out.add("state.update.revision_invalid", "expectedRevision must be a non-negative integer", f"{base}/expectedRevision")
        elif entry is not None and revision != entry["revision"]:
            out.add(
                "state.update.revision_mismatch",
                f"expected revision {revision} but namespace {name!r} is at {entry['revision']}",
                f"{base}/expectedRevision",
                namespace=name,
                currentRevision=entry["revision"],
            )

    payload = effect.get("payload")
    changes: Any = None
    if "payload" in effect:
        if not isinstance(payload, dict):
            out.add("state.update.payload_invalid", "payload must be an object", f"{base}/payload")
        else:
            for key in sorted(payload, key=str):
                if key not in PAYLOAD_FIELDS:
                    out.add("state.update.field_unknown", f"unknown payload field {key!r}", f"{base}/payload/{key}")
            if "changes" not in payload:
                out.add("state.update.field_missing", "payload needs 'changes'", f"{base}/payload/changes")
            else:
                changes = payload["changes"]
                if not isinstance(changes, list) or not 1 <= len(changes) <= limits.MAX_CHANGES:
                    out.add(
                        "state.update.changes_invalid",
                        f"'changes' must be an array of 1-{limits.MAX_CHANGES} changes",
                        f"{base}/payload/changes",
                    )
                    changes = None
    if changes is None:
        return None
    ns_name = name if isinstance(name, str) else None
    checked = [_static_change(c, i, f"{base}/payload/changes/{i}", ns_name, entry, out) for i, c in enumerate(changes)]
    _check_overlaps([c for c in checked if c is not None], f"{base}/payload/changes", ns_name, out)
    # Only used when no static problem was found, in which case every change is complete.
    return _Effect(k, ns_name, base, [c for c in checked if c is not None]) if entry is not None and ns_name is not None else None


def _static_change(
    change: Any, i: int, where: str, namespace: str | None, entry: Mapping[str, Any] | None, out: _Collector
) -> _Change | None:
    if not isinstance(change, dict):
        out.add("state.update.change_invalid", "a change must be an object", where, namespace=namespace, changeIndex=i)
        return None
    rule_id = change.get("ruleId") if isinstance(change.get("ruleId"), str) else None

    def add(code: str, message: str, field_name: str | None, **details: Any) -> None:
        pointer = where if field_name is None else f"{where}/{field_name}"
        out.add(code, message, pointer, namespace=namespace, changeIndex=i, ruleId=rule_id, **details)

    ok = True
    op = change.get("op")
    spec = OPERATIONS.get(op) if isinstance(op, str) else None
    if "op" not in change:
        add("state.update.field_missing", "a change needs 'op'", "op")
        ok = False
    elif spec is None:
        hint = " (scripts, merges and patches are not state operations)" if isinstance(op, str) and op.lower() in FORBIDDEN_OPS else ""
        add("state.update.op_unsupported", f"op must be one of {', '.join(OPERATIONS)}{hint}", "op")
        ok = False

    allowed = spec.fields if spec else frozenset(k for s in OPERATIONS.values() for k in s.fields)
    for key in sorted(change, key=str):
        if key not in allowed:
            add("state.update.field_unknown", f"field {key!r} is not part of a {op if spec else 'state'} change", str(key))
            ok = False
    if spec is not None and spec.operand and spec.operand not in change:
        add("state.update.field_missing", f"{op} needs {spec.operand!r}", spec.operand)
        ok = False

    if "reason" not in change:
        add("state.update.reason_missing", "every change needs a 'reason'", "reason")
        ok = False
    elif not (isinstance(change["reason"], str) and change["reason"].strip() and len(change["reason"]) <= limits.MAX_REASON):
        add("state.update.reason_invalid", f"'reason' must be non-empty text of at most {limits.MAX_REASON} characters", "reason")
        ok = False

    parts: tuple[str, ...] | None = None
    if "path" not in change:
        add("state.update.field_missing", "a change needs 'path'", "path")
        ok = False
    else:
        try:
            parts = parse_pointer(change["path"])
        except PointerError as exc:
            add("state.update.path_invalid", str(exc), "path")
            ok = False
        else:
            if op == "remove" and not parts:
                add("state.update.root_remove", "the namespace root cannot be removed", "path")
                parts, ok = None, False

    if spec is not None and spec.operand == "by" and "by" in change and not _is_finite_number(change["by"]):
        add("state.update.by_invalid", "'by' must be a finite number", "by")
        ok = False
    if "ruleId" in change and rule_id is None:
        add("state.update.rule_id_invalid", "'ruleId' must be a string", "ruleId")
        ok = False

    rule = None
    if entry is not None:
        definition = entry["definition"]
        if rule_id is not None:
            rule = next((r for r in definition["rules"] if r["id"] == rule_id), None)
            if rule is None:
                add("state.update.rule_unknown", f"namespace {namespace!r} has no rule {rule_id!r}", "ruleId")
                ok = False
        elif definition["updateMode"] == "rules-required" and "ruleId" not in change:
            add("state.update.rule_required", "this namespace is rules-required: every change needs a matching ruleId", "ruleId")
            ok = False
        if rule is not None and spec is not None and parts is not None:
            for code, message, field_name in static_rule_mismatches(rule, change):
                add(code, message, field_name)
                ok = False
        if spec is not None and parts is not None:
            ok = _static_against_schema(change, spec.op, parts, definition["schema"], add) and ok
    elif spec is not None and spec.operand == "value" and "value" in change:
        for problem in check_plain_json(change["value"], f"{where}/value"):
            add(problem.code, problem.message, problem.pointer[len(where) + 1 :] if problem.pointer else None)
            ok = False
    if not ok or spec is None or parts is None:
        # Keep the path for the overlap check even when the change has other problems: a
        # duplicate path is an independent mistake worth reporting in the same round.
        return _Change(i, change, "", parts, None) if parts is not None else None
    return _Change(i, change, spec.op, parts, rule)


def _static_against_schema(change: dict, op: str, parts: tuple[str, ...], schema: dict, add: Any) -> bool:
    node = schema_at(schema, parts)
    if node is None:
        add("state.update.path_not_in_schema", f"the schema admits no value at {change['path']!r}", "path")
        return False
    if op == "increment":
        if not admits(node, "number"):
            add("state.update.op_type_mismatch", "increment needs a numeric target", "op")
            return False
        by = change.get("by")
        if _is_finite_number(by) and integer_only(node) and not float(by).is_integer():
            add("state.update.by_not_integer", "the target is an integer; 'by' must be a whole number", "by")
            return False
        return True
    if op == "append":
        items = item_schema(node)
        if items is None:
            add("state.update.op_type_mismatch", "append needs an array target", "op")
            return False
        node = items
    if op in ("set", "append") and "value" in change:
        problems = validate_value(node, change["value"])
        for problem in problems:
            code = "state.update.value_invalid" if problem.code == "state.value.schema_violation" else problem.code
            add(code, problem.message, "value" + (problem.pointer or ""), **problem.details)
        return not problems
    return True


def _check_overlaps(changes: list[_Change], where: str, namespace: str | None, out: _Collector) -> None:
    for later_pos, later in enumerate(changes):
        for earlier in changes[:later_pos]:
            if earlier.parts == later.parts:
                code, message = "state.update.path_duplicate", f"change {earlier.index} already targets this path"
            elif related(earlier.parts, later.parts):
                code, message = "state.update.path_conflict", f"change {earlier.index} targets an ancestor or descendant of this path"
            else:
                continue
            out.add(
                code,
                message,
                f"{where}/{later.index}/path",
                namespace=namespace,
                changeIndex=later.index,
                ruleId=later.raw.get("ruleId") if isinstance(later.raw.get("ruleId"), str) else None,
                otherChangeIndex=earlier.index,
            )
            break


def execute_updates(projection: Mapping[str, Any], effects: Any, pointer_prefix: str = "") -> UpdateOutcome:
    """Validate and run ``effects`` against ``projection`` without touching it.

    Raises :class:`ValidationError` ``state.update.rejected`` with every problem found.
    """
    problems, prepared = _static(projection, effects, pointer_prefix)
    if problems:
        raise ValidationError("state.update.rejected", "the state update was rejected", problems=problems)
    namespaces = projection["namespaces"]
    before = {name: entry["value"] for name, entry in namespaces.items()}
    out = _Collector()
    values: dict[str, Any] = {}
    records: list[dict] = []
    for effect in prepared:
        result = _run_effect(effect, namespaces[effect.namespace], before, out)
        if result is not None:
            values[effect.namespace], effect_records = result
            records.extend(effect_records)
    if out.problems:
        raise ValidationError("state.update.rejected", "the state update was rejected", problems=out.problems)
    changes_by_ns = {e.namespace: [c.raw for c in e.changes] for e in prepared}
    diagnostics = {
        name: every_turn_diagnostics(name, entry["definition"], changes_by_ns.get(name, []), before) for name, entry in namespaces.items()
    }
    return UpdateOutcome(values, records, diagnostics)


def _run_effect(effect: _Effect, entry: Mapping[str, Any], before: Mapping[str, Any], out: _Collector) -> tuple[Any, list[dict]] | None:
    working = entry["value"]
    records: list[dict] = []
    for change in effect.changes:
        where = f"{effect.base}/payload/changes/{change.index}"
        rule_id = change.raw.get("ruleId")
        if change.rule is not None and "condition" in change.rule:
            view = dict(before)
            view[effect.namespace] = working  # own namespace as changed so far, others as committed
            active, diagnostics = evaluate_condition(change.rule["condition"], view)
            if not active:
                out.add(
                    "state.update.condition_inactive",
                    f"the condition of rule {rule_id!r} does not hold",
                    f"{where}/ruleId",
                    namespace=effect.namespace,
                    changeIndex=change.index,
                    ruleId=rule_id,
                    condition=change.rule["condition"],
                    diagnostics=[d.to_dict() for d in diagnostics] or None,
                )
                return None
        try:
            new_working, old, new = _apply(working, change)
        except _ChangeFailed as failed:
            out.add(
                failed.code,
                failed.message,
                f"{where}/{failed.field}",
                namespace=effect.namespace,
                changeIndex=change.index,
                ruleId=rule_id,
            )
            return None
        working = new_working
        record = {
            "namespace": effect.namespace,
            "changeIndex": change.index,
            "op": change.op,
            "path": change.raw["path"],
            "reason": change.raw["reason"],
        }
        if rule_id is not None:
            record["ruleId"] = rule_id
        if old is not MISSING:
            record["before"] = old
        if new is not MISSING:
            record["after"] = new
        records.append(record)

    schema_problems = validate_value(entry["definition"]["schema"], working)
    for problem in schema_problems:
        _map_final_schema_problem(problem, effect, out)
    if schema_problems:
        return None
    return working, records


class _ChangeFailed(Exception):
    def __init__(self, code: str, message: str, field_name: str) -> None:
        super().__init__(message)
        self.code, self.message, self.field = code, message, field_name


def _apply(value: Any, change: _Change) -> tuple[Any, Any, Any]:
    """``(new value, old member, new member)``; raises :class:`_ChangeFailed`."""
    parts, op, raw = change.parts, change.op, change.raw
    current = lookup(value, parts)
    if op == "set":
        if parts:
            parent = lookup(value, parts[:-1])
            if parent is MISSING:
                raise _ChangeFailed("state.update.parent_missing", "the parent of this path does not exist", "path")
            if isinstance(parent, list):
                if current is MISSING:
                    raise _ChangeFailed(
                        "state.update.target_missing", "set replaces an existing array element; use append to add one", "path"
                    )
            elif not isinstance(parent, dict):
                raise _ChangeFailed("state.update.target_type_mismatch", "the parent of this path is not an object or array", "path")
        new = raw["value"]
        return replace_at(value, parts, new), current, new
    if current is MISSING:
        raise _ChangeFailed("state.update.target_missing", f"{op} needs an existing value at this path", "path")
    if op == "increment":
        if isinstance(current, bool) or not isinstance(current, (int, float)):
            raise _ChangeFailed("state.update.target_type_mismatch", "increment needs a number at this path", "path")
        new = current + raw["by"]
        if not math.isfinite(new):
            raise _ChangeFailed("state.update.result_not_finite", "the result is not a finite number", "by")
        if isinstance(new, float) and new.is_integer() and isinstance(current, int) and float(raw["by"]).is_integer():
            new = int(new)  # 3 + 2.0 stays an integer, so integer schemas keep holding
        return replace_at(value, parts, new), current, new
    if op == "append":
        if not isinstance(current, list):
            raise _ChangeFailed("state.update.target_type_mismatch", "append needs an array at this path", "path")
        change.appended_index = len(current)
        new = [*current, raw["value"]]
        return replace_at(value, parts, new), current, new
    return remove_at(value, parts), current, MISSING


def _map_final_schema_problem(problem: Problem, effect: _Effect, out: _Collector) -> None:
    target = parse_pointer(problem.pointer or "")
    # A missing required member is best blamed on the change that removed exactly that member.
    candidates = [(*target, name) for name in problem.details.get("missing", [])] + [target]
    for candidate in candidates:
        for change in reversed(effect.changes):
            if related(change.parts, candidate):
                _report_final(problem, effect, change, _field_for(change, candidate), out)
                return
    out.add(
        "state.update.schema_violation",
        problem.message,
        f"{effect.base}/payload",
        namespace=effect.namespace,
        target=problem.pointer,
        keyword=problem.details.get("keyword"),
    )


def _field_for(change: _Change, target: tuple[str, ...]) -> str:
    """The field of ``change`` that produced the bad value at ``target``."""
    if not is_prefix(change.parts, target):
        return "path"  # the change sits below the failing node: its path is what broke it
    rest = target[len(change.parts) :]
    if change.op == "set":
        return "value" + format_pointer(rest)
    if change.op == "increment" and not rest:
        return "by"
    if change.op == "append" and rest and rest[0] == str(change.appended_index):
        return "value" + format_pointer(rest[1:])
    return "path"


def _report_final(problem: Problem, effect: _Effect, change: _Change, field_name: str, out: _Collector) -> None:
    out.add(
        "state.update.schema_violation",
        problem.message,
        f"{effect.base}/payload/changes/{change.index}/{field_name}",
        namespace=effect.namespace,
        changeIndex=change.index,
        ruleId=change.raw.get("ruleId"),
        target=problem.pointer,
        keyword=problem.details.get("keyword"),
    )
