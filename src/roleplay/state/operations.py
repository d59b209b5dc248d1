"""The one operation specification of ``state.update``.

Three consumers derive from this table and nothing else, so they cannot drift apart: the JSON
Schema registered for the ``state.update`` effect capability (:func:`state_update_tool_schema`),
the operation table inside the parent-side ``state_commit_contract`` (:func:`contract_operations`)
and the field checks of the update validator (:data:`OPERATIONS`, :data:`ENVELOPE_FIELDS`).

The tool schema states only the stable structure. Current revisions, rule ids, conditions and the
value schema of each target differ per namespace and per turn; they travel in the contract.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from roleplay.names import STATE_UPDATE_EFFECT

from roleplay.state import limits

EFFECT_KIND = STATE_UPDATE_EFFECT

ENVELOPE_FIELDS = ("kind", "namespace", "expectedRevision", "payload")
PAYLOAD_FIELDS = ("changes",)


@dataclass(frozen=True)
class OperationSpec:
    op: str
    operand: str | None  # "value" (any JSON), "by" (finite number) or None (no value field)
    summary: str

    @property
    def required(self) -> tuple[str, ...]:
        return ("op", "path", *((self.operand,) if self.operand else ()), "reason")

    @property
    def optional(self) -> tuple[str, ...]:
        return ("ruleId",)

    @property
    def fields(self) -> frozenset[str]:
        return frozenset((*self.required, *self.optional))


OPERATIONS: dict[str, OperationSpec] = {
    spec.op: spec
    for spec in (
        OperationSpec("set", "value", "replace or create the value at path"),
        OperationSpec("increment", "by", "add the finite number `by` to the number at path"),
        OperationSpec("append", "value", "append `value` to the array at path"),
        OperationSpec("remove", None, "delete the existing member at path (never the root)"),
    )
}

# Spelled out because models reach for them; the validator names them explicitly.
FORBIDDEN_OPS = ("merge", "patch", "replace", "add", "delete", "move", "copy", "test", "script", "eval", "js")


def _change_branch(spec: OperationSpec) -> dict[str, Any]:
    properties: dict[str, Any] = {
        "op": {"const": spec.op},
        "path": {"type": "string", "description": "Session-local JSON Pointer inside the namespace value"},
        "reason": {"type": "string", "minLength": 1, "maxLength": limits.MAX_REASON},
        "ruleId": {"type": "string", "minLength": 1, "maxLength": limits.MAX_RULE_ID},
    }
    if spec.operand == "value":
        properties["value"] = {"description": "any JSON value; its schema comes from the contract"}
    elif spec.operand == "by":
        properties["by"] = {"type": "number", "description": "finite delta"}
    return {
        "type": "object",
        "description": spec.summary,
        "properties": properties,
        "required": list(spec.required),
        "additionalProperties": False,
    }


def state_update_tool_schema() -> dict[str, Any]:
    """JSON Schema of one ``state.update`` effect as registered with the commit tool."""
    return {
        "type": "object",
        "properties": {
            "kind": {"const": EFFECT_KIND},
            "namespace": {"type": "string", "minLength": 1, "maxLength": limits.MAX_NAMESPACE_NAME},
            "expectedRevision": {"type": "integer", "minimum": 0},
            "payload": {
                "type": "object",
                "properties": {
                    "changes": {
                        "type": "array",
                        "minItems": 1,
                        "maxItems": limits.MAX_CHANGES,
                        "items": {"oneOf": [_change_branch(spec) for spec in OPERATIONS.values()]},
                    }
                },
                "required": list(PAYLOAD_FIELDS),
                "additionalProperties": False,
            },
        },
        "required": list(ENVELOPE_FIELDS),
        "additionalProperties": False,
    }


def contract_operations() -> dict[str, Any]:
    """The envelope and operation table as the commit contract states it (compact, no prose)."""
    return {
        "envelope": {
            "kind": EFFECT_KIND,
            "required": list(ENVELOPE_FIELDS),
            "payloadRequired": list(PAYLOAD_FIELDS),
            "closed": True,
            "onePerNamespace": True,
            "maxChanges": limits.MAX_CHANGES,
        },
        "operations": {
            spec.op: {"required": list(spec.required), "optional": list(spec.optional), "closed": True} for spec in OPERATIONS.values()
        },
    }
