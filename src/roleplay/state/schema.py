"""Restricted value schemas: the keyword whitelist, value validation and structural navigation.

A namespace schema may use only the keywords listed in rp-state-v2 §Restricted schema. The
whitelist is checked first, by our own walker, so that every forbidden keyword is reported with a
JSON Pointer to it; only a schema that passed is handed to ``jsonschema`` (which would otherwise
happily follow ``$ref`` or evaluate ``pattern``). Because nothing in the restricted language
couples sibling or ancestor nodes, the sub-schema at a path is found structurally, which lets the
update validator type-check a change before running it.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

from jsonschema import Draft202012Validator

from roleplay.canonical import canonical_json
from roleplay.errors import Problem
from roleplay.state import limits
from roleplay.state.pointers import format_pointer, is_array_index

JSON_TYPES = frozenset({"null", "boolean", "object", "array", "number", "integer", "string"})

ALLOWED_KEYWORDS = {
    # common
    "type": "common",
    "title": "common",
    "description": "common",
    "enum": "common",
    "const": "common",
    # object
    "properties": "object",
    "required": "object",
    "additionalProperties": "object",
    # array
    "items": "array",
    "minItems": "array",
    "maxItems": "array",
    # number
    "minimum": "number",
    "maximum": "number",
    # string
    "minLength": "string",
    "maxLength": "string",
}

# Known JSON Schema keywords that the reference names as forbidden get their own codes so that a
# model or an asset author learns *why*; anything else is an unknown field or custom keyword.
_FORBIDDEN_FAMILIES = {
    "state.schema.ref_forbidden": ("$ref", "$dynamicRef", "$recursiveRef", "$defs", "definitions"),
    "state.schema.composition_forbidden": ("allOf", "anyOf", "oneOf", "not"),
    "state.schema.conditional_forbidden": (
        "if",
        "then",
        "else",
        "dependentSchemas",
        "dependentRequired",
        "dependencies",
    ),
    "state.schema.pattern_forbidden": ("pattern", "patternProperties", "propertyNames", "format"),
}
_FORBIDDEN = {kw: code for code, kws in _FORBIDDEN_FAMILIES.items() for kw in kws}


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_finite_number(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    return isinstance(value, float) and math.isfinite(value)


def check_restricted_schema(schema: Any, base: str = "") -> list[Problem]:
    """Every whitelist violation in ``schema``; pointers are ``base`` + the path to the keyword."""
    problems: list[Problem] = []
    budget = {"nodes": 0, "depth": 0}
    _check_node(schema, [], problems, budget, base)
    return problems


def _keyword_problem(code: str, message: str, base: str, path: list[Any]) -> Problem:
    return Problem(code, message, base + format_pointer(path))


def _check_node(node: Any, path: list[Any], problems: list[Problem], budget: dict, base: str) -> None:
    budget["nodes"] += 1
    if budget["nodes"] > limits.MAX_SCHEMA_NODES:
        if budget["nodes"] == limits.MAX_SCHEMA_NODES + 1:
            problems.append(
                _keyword_problem(
                    "state.schema.too_large",
                    f"a schema may hold at most {limits.MAX_SCHEMA_NODES} sub-schemas",
                    base,
                    path,
                )
            )
        return
    if budget["depth"] >= limits.MAX_SCHEMA_DEPTH:
        problems.append(_keyword_problem("state.schema.too_deep", f"schemas nest at most {limits.MAX_SCHEMA_DEPTH} levels", base, path))
        return
    if not isinstance(node, dict):
        problems.append(_keyword_problem("state.schema.not_object", "a schema must be a JSON object", base, path))
        return
    for key in sorted(node, key=str):
        value = node[key]
        where = [*path, key]
        if not isinstance(key, str):
            problems.append(_keyword_problem("state.schema.keyword_unknown", "schema keys must be strings", base, where))
            continue
        if key in _FORBIDDEN:
            problems.append(_keyword_problem(_FORBIDDEN[key], f"keyword {key!r} is not allowed in a state schema", base, where))
            continue
        if key not in ALLOWED_KEYWORDS:
            problems.append(
                _keyword_problem(
                    "state.schema.keyword_unknown",
                    f"unknown or custom keyword {key!r}; allowed: {', '.join(ALLOWED_KEYWORDS)}",
                    base,
                    where,
                )
            )
            continue
        budget["depth"] += 1
        _check_keyword_value(key, value, where, problems, budget, base)
        budget["depth"] -= 1


def _check_keyword_value(key: str, value: Any, where: list[Any], problems: list[Problem], budget: dict, base: str) -> None:
    def invalid(message: str) -> None:
        problems.append(_keyword_problem("state.schema.keyword_invalid", message, base, where))

    if key == "type":
        if isinstance(value, str):
            if value not in JSON_TYPES:
                invalid(f"unknown JSON type {value!r}")
        elif isinstance(value, list):
            if not value:
                invalid("a type array must list at least one type")
            elif not all(isinstance(t, str) and t in JSON_TYPES for t in value):
                invalid("a type array may only list JSON types")
            elif len(set(value)) != len(value):
                invalid("a type array must not repeat a type")
        else:
            invalid("'type' must be one JSON type or an array of JSON types")
    elif key in ("title", "description"):
        if not isinstance(value, str):
            invalid(f"{key!r} must be a string")
    elif key == "enum":
        if not isinstance(value, list) or not value:
            invalid("'enum' must be a non-empty array")
        else:
            problems.extend(check_plain_json(value, base + format_pointer(where)))
    elif key == "const":
        problems.extend(check_plain_json(value, base + format_pointer(where)))
    elif key == "properties":
        if not isinstance(value, dict):
            invalid("'properties' must be an object of schemas")
            return
        for name in sorted(value, key=str):
            _check_node(value[name], [*where, name], problems, budget, base)
    elif key == "required":
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            invalid("'required' must be an array of property names")
        elif len(set(value)) != len(value):
            invalid("'required' must not repeat a name")
    elif key == "additionalProperties":
        if not isinstance(value, bool):
            _check_node(value, where, problems, budget, base)
    elif key == "items":
        # One schema for every element: the tuple form would be positional typing, which the
        # restricted language does not offer.
        _check_node(value, where, problems, budget, base)
    elif key in ("minItems", "maxItems", "minLength", "maxLength"):
        if not _is_int(value) or value < 0:
            invalid(f"{key!r} must be a non-negative integer")
    elif key in ("minimum", "maximum"):
        if not _is_finite_number(value):
            invalid(f"{key!r} must be a finite number")


def check_plain_json(value: Any, base: str = "") -> list[Problem]:
    """Problems that make ``value`` something other than bounded plain JSON (first one per kind)."""
    problems: list[Problem] = []
    count = 0
    stack: list[tuple[Any, tuple[Any, ...]]] = [(value, ())]
    while stack:
        node, path = stack.pop()
        count += 1
        if count > limits.MAX_VALUE_NODES:
            return [Problem("state.value.too_large", f"a value may hold at most {limits.MAX_VALUE_NODES} nodes", base)]
        if len(path) > limits.MAX_VALUE_DEPTH:
            return [
                Problem(
                    "state.value.too_deep",
                    f"values nest at most {limits.MAX_VALUE_DEPTH} levels",
                    base + format_pointer(path),
                )
            ]
        if node is None or isinstance(node, (bool, str)) or _is_int(node):
            continue
        if isinstance(node, float):
            if not math.isfinite(node):
                problems.append(Problem("state.value.not_json", "numbers must be finite", base + format_pointer(path)))
            continue
        if isinstance(node, dict):
            for key, child in node.items():
                if not isinstance(key, str):
                    problems.append(Problem("state.value.not_json", "object keys must be strings", base + format_pointer(path)))
                    break
                stack.append((child, (*path, key)))
            continue
        if isinstance(node, list):
            stack.extend((child, (*path, i)) for i, child in enumerate(node))
            continue
        problems.append(Problem("state.value.not_json", f"{type(node).__name__} is not a JSON value", base + format_pointer(path)))
    return problems


# The values a prepared schema found valid, by canonical text, at most this many per schema. A
# commit's new value is validated three times over (the commit's own check, then the ``rp/state``
# and ``rp/state/activity`` folds, each running the same updates): two of them are then a lookup.
# Canonical text, not ``==``, because ``1``, ``1.0`` and ``true`` are equal in Python but not to a
# schema. Only a clean result is kept, so nothing returned is shared.
MAX_KNOWN_VALID = 256


class _Prepared:
    __slots__ = ("validator", "valid")

    def __init__(self, schema: dict) -> None:
        self.validator = Draft202012Validator(schema)
        self.valid: dict[str, None] = {}


@lru_cache(maxsize=256)
def _prepared(schema_text: str) -> _Prepared:
    import json

    return _Prepared(json.loads(schema_text))


def validate_value(schema: dict, value: Any, base: str = "") -> list[Problem]:
    """Schema problems of ``value`` (which must already be plain JSON) with instance pointers.

    Only call this with a schema that passed :func:`check_restricted_schema`.
    """
    problems = check_plain_json(value, base)
    if problems:
        return problems
    prepared = _prepared(canonical_json(schema))
    value_text = canonical_json(value)
    if value_text in prepared.valid:
        return []
    found = []
    for error in prepared.validator.iter_errors(value):
        details: dict[str, Any] = {"keyword": error.validator, "schemaPointer": format_pointer(list(error.absolute_schema_path))}
        if error.validator == "required" and isinstance(error.instance, dict):
            # Name the absent members: the update validator maps the error to the change that
            # removed one of them rather than to whichever change last touched the object.
            details["missing"] = [name for name in error.validator_value if name not in error.instance]
        found.append(Problem("state.value.schema_violation", error.message, base + format_pointer(list(error.absolute_path)), details))
    if not found:
        if len(prepared.valid) >= MAX_KNOWN_VALID:
            prepared.valid.clear()  # (not evicting one by one: folds may run in other threads)
        prepared.valid[value_text] = None
    found.sort(key=lambda p: (p.pointer or "", p.details["schemaPointer"], p.message))
    return found


def allowed_types(node: dict) -> frozenset[str] | None:
    """The JSON types a schema node admits, ``None`` meaning any."""
    declared = node.get("type")
    if declared is None:
        return None
    return frozenset([declared] if isinstance(declared, str) else declared)


def admits(node: dict, json_type: str) -> bool:
    types = allowed_types(node)
    if types is None:
        return True
    if json_type == "number":
        return "number" in types or "integer" in types
    return json_type in types


def integer_only(node: dict) -> bool:
    types = allowed_types(node)
    return types is not None and "integer" in types and "number" not in types


def child_schema(node: dict, token: str) -> dict | None:
    """Schema of member ``token`` of a value described by ``node``; ``None`` if none may exist."""
    props = node.get("properties", {})
    if admits(node, "object") and token in props:
        return props[token]
    if admits(node, "array") and is_array_index(token):
        if admits(node, "object") and node.get("items", {}) != node.get("additionalProperties", True):
            # "0" may be an array index or an object key here; which sub-schema applies depends
            # on the instance, so only the final whole-value check may judge it.
            return {}
        return node.get("items", {})
    if admits(node, "object"):
        extra = node.get("additionalProperties", True)
        if extra is False:
            return None
        return {} if extra is True else extra
    return None


def schema_at(schema: dict, parts: tuple[str, ...]) -> dict | None:
    node: dict | None = schema
    for token in parts:
        if node is None:
            return None
        node = child_schema(node, token)
    return node


def item_schema(node: dict) -> dict | None:
    """Schema of an element appended to an array described by ``node``."""
    if not admits(node, "array"):
        return None
    return node.get("items", {})
