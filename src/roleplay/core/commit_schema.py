"""The argument schema of ``rp_commit_turn``, derived live from the capability registries, and
the mapping of schema failures to precise problems.

Shape (every object closed with ``additionalProperties: false``)::

    oneOf:
      - full commit:
          references: {writer: <call id of the run's successful rp_write_turn>}   required
          effects:    [ oneOf <each registered effect capability schema> ]     required, may be []
          summary:    short text about what this turn changed                  optional
          body:       Agent: the final reply text (else the response text is used)
                      Chat: optional; if sent it must equal the Writer text    optional
          extensions: {<registered extension key>: <its schema>}               optional, only
                      declared while at least one extension capability is registered
      - retry:
          retry: {token, patches: [≤ 64 RFC 6902 add/replace/remove ops]}

The two branches are mutually exclusive by construction: the full branch has no ``retry`` and
requires ``references``/``effects``; the retry branch allows nothing but ``retry``.

This union is what the tool validates. It is not what every provider is sent: OpenAI-style APIs
refuse a root ``oneOf`` in a function declaration (HTTP 400 ``invalid_function_parameters``), so
for routes whose capabilities say so (``Capabilities.accepts_root_combinators`` False, as for
OpenAI and DeepSeek) the provider edge (``harness.models.wire.declared_parameters``) declares one
merged, closed object naming both forms and what each requires. :func:`conditional_schema` is an
exact root-``oneOf``-free form with ``if``/``then``/``else``, for callers that want the language
itself without a root union (``commit_tool(declaration="conditional")``).

jsonschema reports a failed ``oneOf`` as one useless "not valid under any of the given schemas".
Every ``oneOf`` here is *discriminated* (top level by the presence of ``retry``, effects by
``kind``, ``state.update`` changes by ``op``), so :func:`schema_problems` follows the branch the
instance names and reports that branch's own errors, with the JSON Pointer of the offending field.
"""

from __future__ import annotations

from typing import Any

from jsonschema import Draft202012Validator

from roleplay.core.effects import EffectRegistry, ExtensionRegistry
from roleplay.errors import Problem, pointer_from_parts
from roleplay.names import COMMIT_TURN_TOOL

TOOL_NAME = COMMIT_TURN_TOOL
INVALID = "commit.invalid_arguments"

# Limits. Retry patches share the 64 bound with state.update changes (the spec's number).
MAX_RETRY_PATCHES = 64
MAX_EFFECTS = 64
MAX_SUMMARY_CHARS = 2_000
MAX_BODY_CHARS = 200_000
MAX_TOKEN_CHARS = 128
MAX_COMMIT_BYTES = 1_000_000  # UTF-8 bytes of the canonical JSON of a (rebuilt) full commit
PATCH_OPS = ("add", "replace", "remove")


def retry_schema() -> dict[str, Any]:
    patch = {
        "type": "object",
        "properties": {
            "op": {"enum": list(PATCH_OPS)},
            "path": {"type": "string", "description": "RFC 6901 JSON Pointer into the failed draft, as named by the problems"},
            "value": {"description": "new value (add, replace)"},
        },
        "required": ["op", "path"],
        "additionalProperties": False,
    }
    return {
        "type": "object",
        "description": "Repair the last failed commit draft of this run instead of resending it",
        "properties": {
            "retry": {
                "type": "object",
                "properties": {
                    "token": {"type": "string", "minLength": 1, "maxLength": MAX_TOKEN_CHARS},
                    "patches": {"type": "array", "minItems": 1, "maxItems": MAX_RETRY_PATCHES, "items": patch},
                },
                "required": ["token", "patches"],
                "additionalProperties": False,
            }
        },
        "required": ["retry"],
        "additionalProperties": False,
    }


def effect_items_schema(effects: EffectRegistry) -> dict[str, Any]:
    caps = effects.capabilities()
    if not caps:
        return {"type": "array", "maxItems": 0}  # an empty oneOf is not a valid schema
    return {"type": "array", "maxItems": MAX_EFFECTS, "items": {"oneOf": [cap.schema for cap in caps]}}


def full_schema(effects: EffectRegistry, extensions: ExtensionRegistry | None = None) -> dict[str, Any]:
    properties: dict[str, Any] = {
        "summary": {"type": "string", "maxLength": MAX_SUMMARY_CHARS},
        "body": {"type": "string", "maxLength": MAX_BODY_CHARS},
        "references": {
            "type": "object",
            "properties": {"writer": {"type": "string", "minLength": 1, "description": "call id of this run's successful rp_write_turn"}},
            "required": ["writer"],
            "additionalProperties": False,
        },
        "effects": effect_items_schema(effects),
    }
    if extensions is not None and extensions.keys():
        properties["extensions"] = {
            "type": "object",
            "properties": {cap.key: cap.schema for cap in extensions.capabilities()},
            "additionalProperties": False,
        }
    return {
        "type": "object",
        "description": "Commit this turn: link the Writer result and carry the turn's effects",
        "properties": properties,
        "required": ["references", "effects"],
        "additionalProperties": False,
    }


def commit_schema(effects: EffectRegistry, extensions: ExtensionRegistry | None = None) -> dict[str, Any]:
    """The one argument schema of ``rp_commit_turn``: tool declaration and validation alike."""
    return {"type": "object", "oneOf": [full_schema(effects, extensions), retry_schema()]}


def conditional_schema(effects: EffectRegistry, extensions: ExtensionRegistry | None = None) -> dict[str, Any]:
    """The same language as :func:`commit_schema` without a top-level ``oneOf``.

    OpenAI-style and Anthropic tool declarations reject ``oneOf``/``anyOf``/``allOf`` at the root
    of a parameter schema. This form merges both branches' properties into one closed object and
    expresses the exclusivity with ``if``/``then``/``else``: a ``retry`` member admits nothing
    else; without it, ``references`` and ``effects`` are required. Every capability schema is
    embedded unchanged, and the tests check it accepts exactly what the ``oneOf`` form accepts.
    """
    full, retry = commit_schema(effects, extensions)["oneOf"]
    return {
        "type": "object",
        "description": "Either a full commit, or {retry: {token, patches}} alone to repair the last failed one",
        "properties": {**full["properties"], "retry": retry["properties"]["retry"]},
        "additionalProperties": False,
        "if": {"required": ["retry"]},
        "then": {"maxProperties": 1},
        "else": {"required": list(full["required"])},
    }


def branch_of(schema: dict[str, Any], args: Any) -> tuple[str, dict[str, Any]]:
    """``("retry" | "full", branch schema)``: the branch ``args`` means to be (by ``retry``)."""
    full, retry = schema["oneOf"]
    return ("retry", retry) if isinstance(args, dict) and "retry" in args else ("full", full)


# -- schema failures as precise problems --------------------------------------------------------


def schema_problems(schema: dict[str, Any], instance: Any, *, prefix: str = "") -> list[Problem]:
    """Every schema violation of ``instance`` as a :class:`Problem` with an RFC 6901 pointer."""
    validator = Draft202012Validator(schema)
    found: list[Problem] = []
    for error in sorted(validator.iter_errors(instance), key=lambda e: (list(map(str, e.absolute_path)), e.message)):
        found.extend(_problems(error, prefix))
    seen: set[tuple[str | None, str]] = set()
    unique = []
    for p in found:
        if (p.pointer, p.message) not in seen:
            seen.add((p.pointer, p.message))
            unique.append(p)
    return unique


def _problems(error: Any, prefix: str) -> list[Problem]:
    path = list(error.absolute_path)
    keyword = error.validator
    if keyword in ("oneOf", "anyOf") and isinstance(error.instance, dict):
        picked = _discriminate(error.validator_value, error.instance)
        if picked is not None:
            key, branch, allowed = picked
            where = prefix + pointer_from_parts(path + [key])
            if branch is None:
                if key not in error.instance:
                    return [Problem(INVALID, f"{key!r} is required (one of {allowed})", where, {"keyword": "required"})]
                return [Problem(INVALID, f"{key!r} must be one of {allowed}", where, {"keyword": "const"})]
            sub = [e for e in (error.context or []) if e.relative_schema_path and e.relative_schema_path[0] == branch]
            if sub:
                return [p for e in sub for p in _problems(e, prefix)]
    if keyword == "required" and isinstance(error.instance, dict):
        missing = [k for k in error.validator_value if k not in error.instance]
        named = next((k for k in missing if error.message.startswith(repr(k))), missing[0] if missing else None)
        if named is not None:
            return [Problem(INVALID, error.message, prefix + pointer_from_parts(path + [named]), {"keyword": keyword})]
    if keyword == "additionalProperties" and isinstance(error.instance, dict):
        known = set(error.schema.get("properties", {}))
        extra = sorted((k for k in error.instance if k not in known), key=str)
        if extra:
            return [
                Problem(INVALID, f"unexpected property {k!r} (remove it)", prefix + pointer_from_parts(path + [k]), {"keyword": keyword})
                for k in extra
            ]
    return [Problem(INVALID, error.message, prefix + pointer_from_parts(path), {"keyword": keyword})]


def _discriminate(branches: Any, instance: dict[str, Any]) -> tuple[str, int | None, list[Any]] | None:
    """``(key, index of the branch whose const matches, all consts)`` when every branch pins the
    same property with ``const``; ``None`` when the union is not discriminated that way."""
    if not isinstance(branches, list) or not branches or not all(isinstance(b, dict) for b in branches):
        return None
    common: set[str] | None = None
    for b in branches:
        pinned = {k for k, s in b.get("properties", {}).items() if isinstance(s, dict) and "const" in s}
        common = pinned if common is None else common & pinned
    if not common:
        return None
    key = min(common)
    consts = [b["properties"][key]["const"] for b in branches]
    if key in instance:
        for i, const in enumerate(consts):
            if instance[key] == const:
                return key, i, consts
    return key, None, consts
