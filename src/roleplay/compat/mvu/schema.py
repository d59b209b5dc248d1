"""From MVU data to a restricted ``rp.state`` schema, and from MVU Zod's JSON Schema to the same.

Two inputs describe structure:

* **InitVar data** (MVU beta). ``$meta`` on an object (``extensible``, ``required``,
  ``recursiveExtensible``), the ``$__META_EXTENSIBLE__$`` array marker and ``$arrayMeta``
  elements become ``additionalProperties`` / ``required``; ValueWithDescription pairs
  ``[value, "description"]`` are split, recursively, into the plain value and a schema
  ``description`` (the pointer of each split pair is remembered so ``x[0]`` command paths and the
  template pair view still work). MVU's own schema node types map one to one: objects, arrays
  (element type from the elements), string, number, boolean, and ``null`` → any (``{}``).
* **``schema.json``** exported from zod (JSON Schema 2020-12, ``io: input``). Keywords of the
  restricted set are kept; ``z.record(z.enum([...]), T)`` becomes closed ``properties``; literal
  unions become ``enum``; annotations and widening-only constraints are dropped with a diagnostic
  each; anything whose meaning the restricted language cannot keep (positional items, conditional
  or negated schemas, object unions, recursive ``$ref``) fails closed.

The outputs always pass :func:`roleplay.state.check_restricted_schema`; the adapter re-checks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from roleplay.canonical import json_type
from roleplay.errors import Problem
from roleplay.state import check_restricted_schema

from .diagnostics import Loc, Where, diag

EXTENSIBLE_MARKER = "$__META_EXTENSIBLE__$"
META_KEYS = ("extensible", "required", "recursiveExtensible", "template")
ROOT_SWITCHES = ("strictTemplate", "concatTemplateArray", "strictSet")


def pointer_of(parts: tuple[str, ...] | list[str]) -> str:
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


@dataclass
class Derived:
    value: Any
    schema: dict[str, Any]
    vwd: dict[str, str] = field(default_factory=dict)  # pointer of a split pair -> description
    strict_set: bool = False
    extensible_arrays: set[str] = field(default_factory=set)
    diagnostics: list[Problem] = field(default_factory=list)


# --- schema inference for plain values --------------------------------------------------------------


def merge_item_schemas(schemas: list[dict[str, Any]]) -> dict[str, Any]:
    """One ``items`` schema admitting every element: same-shape objects merge (keys present in all
    elements stay required), same scalar types stay, anything mixed becomes a type list."""
    if not schemas:
        return {}
    if any(s == {} for s in schemas):
        return {}
    types = []
    for s in schemas:
        t = s.get("type")
        for one in t if isinstance(t, list) else [t]:
            if one not in types:
                types.append(one)
    if len(types) > 1 or None in types:
        return {"type": sorted(t for t in types if t)} if None not in types else {}
    kind = types[0]
    out: dict[str, Any] = {"type": kind}
    descriptions = {s.get("description") for s in schemas}
    if len(descriptions) == 1 and None not in descriptions:
        out["description"] = descriptions.pop()
    if kind == "object":
        names: list[str] = []
        for s in schemas:
            names += [n for n in s.get("properties", {}) if n not in names]
        out["properties"] = {n: merge_item_schemas([s["properties"][n] for s in schemas if n in s.get("properties", {})]) for n in names}
        out["required"] = [n for n in names if all(n in s.get("required", []) for s in schemas)]
        out["additionalProperties"] = any(s.get("additionalProperties", True) is not False for s in schemas) or False
    elif kind == "array":
        out["items"] = merge_item_schemas([s.get("items", {}) for s in schemas])
    return out


def infer_schema(value: Any) -> dict[str, Any]:
    """Closed schema of a plain JSON value (objects: every key required, nothing extra)."""
    kind = json_type(value)
    if kind == "null":
        return {}
    if kind == "object":
        return {
            "type": "object",
            "properties": {k: infer_schema(v) for k, v in value.items()},
            "required": list(value),
            "additionalProperties": False,
        }
    if kind == "array":
        return {"type": "array", "items": merge_item_schemas([infer_schema(v) for v in value])}
    return {"type": kind}


# --- $meta, markers and ValueWithDescription -------------------------------------------------------------


def is_vwd(value: Any) -> bool:
    return isinstance(value, list) and len(value) == 2 and isinstance(value[1], str) and EXTENSIBLE_MARKER not in value


class _Walker:
    def __init__(self, lines: dict[str, tuple[Loc, int]], loc: Loc) -> None:
        self.lines = lines
        self.loc = loc
        self.out = Derived(None, {})

    def where(self, parts: tuple[str, ...]) -> Loc | Where:
        found = self.lines.get(pointer_of(parts))
        return found[0].at(found[1]) if found else self.loc

    def walk(self, node: Any, parts: tuple[str, ...], inherited: bool) -> tuple[Any, dict[str, Any]]:
        if isinstance(node, dict):
            return self.walk_object(node, parts, inherited)
        if isinstance(node, list):
            if is_vwd(node):
                value, schema = self.walk(node[0], parts, inherited)
                self.out.vwd[pointer_of(parts)] = node[1]
                if isinstance(node[1], str) and isinstance(node[0], str) and node[0] != "":
                    self.out.diagnostics.append(
                        diag(
                            "mvu.vwd.string_pair",
                            f"the two-string array at {pointer_of(parts) or '/'} is read as [value, description], as MVU does; write it as a longer list if it is data",
                            self.where(parts),
                            "info",
                        )
                    )
                schema = dict(schema)
                schema["description"] = node[1]
                return value, schema
            return self.walk_array(node, parts, inherited)
        return node, infer_schema(node)

    def walk_object(self, node: dict, parts: tuple[str, ...], inherited: bool) -> tuple[Any, dict[str, Any]]:
        meta = node.get("$meta", {})
        if not isinstance(meta, dict):
            self.out.diagnostics.append(
                diag("mvu.meta.invalid", "$meta must be a mapping; it is ignored", self.where((*parts, "$meta")), "warning")
            )
            meta = {}
        for key in meta:
            if key in ROOT_SWITCHES:
                if parts:
                    self.out.diagnostics.append(
                        diag(
                            "mvu.meta.root_only", f"$meta.{key} only has an effect on the root; ignored here", self.where(parts), "warning"
                        )
                    )
                elif key == "strictSet":
                    self.out.strict_set = meta[key] is True
                else:
                    self.out.diagnostics.append(
                        diag(
                            "mvu.meta.template_unsupported",
                            f"$meta.{key} configures templates, which the adapter does not apply",
                            self.where(parts),
                            "info",
                        )
                    )
            elif key == "template":
                self.out.diagnostics.append(
                    diag(
                        "mvu.meta.template_unsupported",
                        "$meta.template is not applied: native inserts take complete values",
                        self.where(parts),
                        "warning",
                    )
                )
            elif key not in META_KEYS:
                self.out.diagnostics.append(
                    diag("mvu.meta.unknown_key", f"unknown $meta key {key!r} ignored", self.where(parts), "warning")
                )
        recursive = meta.get("recursiveExtensible") is True
        extensible = meta["extensible"] is True if isinstance(meta.get("extensible"), bool) else (recursive or inherited)
        inherit_down = (recursive or inherited) and extensible
        forced = meta.get("required", [])
        if not (isinstance(forced, list) and all(isinstance(n, str) for n in forced)):
            self.out.diagnostics.append(
                diag("mvu.meta.invalid", "$meta.required must be a list of keys; ignored", self.where(parts), "warning")
            )
            forced = []
        value: dict[str, Any] = {}
        properties: dict[str, Any] = {}
        required: list[str] = []
        for key, child in node.items():
            if key == "$meta":
                continue
            value[key], properties[key] = self.walk(child, (*parts, key), inherit_down)
            if not extensible or key in forced:
                required.append(key)
        for missing in [n for n in forced if n not in node]:
            self.out.diagnostics.append(
                diag(
                    "mvu.meta.required_missing",
                    f"$meta.required names {missing!r}, which the data does not have; ignored",
                    self.where(parts),
                    "warning",
                )
            )
        schema = {"type": "object", "properties": properties, "required": required, "additionalProperties": extensible}
        return value, schema

    def walk_array(self, node: list, parts: tuple[str, ...], inherited: bool) -> tuple[Any, dict[str, Any]]:
        extensible = EXTENSIBLE_MARKER in node or inherited
        elements = []
        for item in node:
            if item == EXTENSIBLE_MARKER:
                continue
            if isinstance(item, dict) and item.get("$arrayMeta") is True:
                meta = item.get("$meta", {})
                if isinstance(meta, dict):
                    extensible = meta.get("extensible", extensible) is True
                    if "template" in meta:
                        self.out.diagnostics.append(
                            diag(
                                "mvu.meta.template_unsupported",
                                "$arrayMeta template is not applied: native appends take complete values",
                                self.where(parts),
                                "warning",
                            )
                        )
                continue
            elements.append(item)
        values, schemas = [], []
        for i, item in enumerate(elements):
            v, s = self.walk(item, (*parts, str(i)), inherited)
            values.append(v)
            schemas.append(s)
        if extensible:
            self.out.extensible_arrays.add(pointer_of(parts))
        return values, {"type": "array", "items": merge_item_schemas(schemas)}


def derive_from_data(data: dict[str, Any], *, lines: dict[str, tuple[Loc, int]] | None = None, loc: Loc | None = None) -> Derived:
    """Plain value + restricted schema from InitVar data with ``$meta``, markers and VWD pairs."""
    walker = _Walker(lines or {}, loc or Loc())
    value, schema = walker.walk(data, (), False)
    walker.out.value = value
    walker.out.schema = schema
    if walker.out.vwd:
        walker.out.diagnostics.append(
            diag(
                "mvu.vwd.split",
                f"{len(walker.out.vwd)} [value, description] pairs split into plain values with schema descriptions",
                walker.loc,
                "info",
            )
        )
    return walker.out


# --- JSON Schema (zod export) → restricted schema --------------------------------------------------------

KEEP = ("type", "title", "description", "enum", "const", "required", "minItems", "maxItems", "minimum", "maximum", "minLength", "maxLength")
ANNOTATIONS = (
    "$schema",
    "$id",
    "$comment",
    "default",
    "examples",
    "deprecated",
    "readOnly",
    "writeOnly",
    "$defs",
    "definitions",
    "id",
    "$anchor",
)
WIDENING = (
    "pattern",
    "format",
    "multipleOf",
    "uniqueItems",
    "minProperties",
    "maxProperties",
    "contentEncoding",
    "contentMediaType",
    "contains",
    "minContains",
    "maxContains",
)
FAIL = (
    "not",
    "if",
    "then",
    "else",
    "dependentSchemas",
    "dependentRequired",
    "dependencies",
    "prefixItems",
    "unevaluatedItems",
    "unevaluatedProperties",
    "$dynamicRef",
    "$recursiveRef",
)


class _Mapper:
    def __init__(self, root: Any, loc: Loc) -> None:
        self.root = root
        self.loc = loc
        self.diagnostics: list[Problem] = []
        self.failed = False
        self.stack: list[str] = []

    def note(self, code: str, message: str, path: tuple[str, ...], severity: str) -> None:
        self.diagnostics.append(diag(code, message, self.loc.with_pointer(pointer_of(path)), severity))
        if severity == "error":
            self.failed = True

    def resolve(self, ref: str, path: tuple[str, ...]) -> Any:
        if not ref.startswith("#/"):
            self.note("mvu.zod.ref_external", f"$ref {ref!r} points outside the document", path, "error")
            return None
        node: Any = self.root
        for token in ref[2:].split("/"):
            token = token.replace("~1", "/").replace("~0", "~")
            if not isinstance(node, dict) or token not in node:
                self.note("mvu.zod.ref_missing", f"$ref {ref!r} does not resolve", path, "error")
                return None
            node = node[token]
        return node

    def map(self, node: Any, path: tuple[str, ...]) -> dict[str, Any]:
        if node is True:
            return {}
        if not isinstance(node, dict):
            self.note("mvu.zod.undecidable", "a schema that rejects everything (or is not an object) cannot be represented", path, "error")
            return {}
        if "$ref" in node:
            ref = node["$ref"]
            if not isinstance(ref, str) or ref in self.stack:
                self.note("mvu.zod.ref_recursive", f"recursive $ref {ref!r} cannot be inlined", path, "error")
                return {}
            target = self.resolve(ref, path)
            if target is None:
                return {}
            self.stack.append(ref)
            inlined = self.map(target, path)
            self.stack.pop()
            rest = {k: v for k, v in node.items() if k != "$ref"}
            return {**inlined, **self.map(rest, path)} if rest else inlined
        out: dict[str, Any] = {}
        for key, value in node.items():
            at = (*path, key)
            if key in KEEP:
                out[key] = value
            elif key == "properties":
                out["properties"] = {name: self.map(sub, (*at, name)) for name, sub in value.items()} if isinstance(value, dict) else {}
            elif key == "additionalProperties":
                out[key] = value if isinstance(value, bool) else self.map(value, at)
            elif key == "items":
                if isinstance(value, list):
                    self.note("mvu.zod.undecidable", "positional (tuple) items cannot be represented", at, "error")
                else:
                    out[key] = self.map(value, at)
            elif key in ("exclusiveMinimum", "exclusiveMaximum") and isinstance(value, (int, float)) and not isinstance(value, bool):
                bound = "minimum" if key == "exclusiveMinimum" else "maximum"
                out.setdefault(bound, value)
                self.note("mvu.zod.keyword_dropped", f"{key} {value} kept as the inclusive {bound}", at, "warning")
            elif key == "propertyNames":
                names = value.get("enum") if isinstance(value, dict) else None
                if isinstance(names, list) and all(isinstance(n, str) for n in names):
                    out["$names"] = names
                else:
                    self.note("mvu.zod.keyword_dropped", "propertyNames dropped: key names are not constrained", at, "info")
            elif key in ("anyOf", "oneOf"):
                out.update(self.union(value, at))
            elif key == "allOf":
                out.update(self.intersection(value, at))
            elif key in ANNOTATIONS:
                self.note("mvu.zod.keyword_dropped", f"annotation {key!r} dropped", at, "info")
            elif key in WIDENING:
                self.note(
                    "mvu.zod.keyword_dropped", f"constraint {key!r} dropped: values are checked less strictly than in zod", at, "warning"
                )
            elif key == "patternProperties":
                if node.get("additionalProperties", True) is False:
                    self.note(
                        "mvu.zod.undecidable", "patternProperties with closed additionalProperties cannot be represented", at, "error"
                    )
                else:
                    self.note("mvu.zod.keyword_dropped", "patternProperties dropped (extra keys stay open)", at, "warning")
            elif key in FAIL:
                self.note("mvu.zod.undecidable", f"keyword {key!r} cannot be represented in a restricted schema", at, "error")
            else:
                self.note("mvu.zod.undecidable", f"unknown keyword {key!r}: its meaning cannot be judged", at, "error")
        names = out.pop("$names", None)
        if names is not None:
            # z.record(z.enum([...]), T): exactly these keys, each of type T.
            each = out.pop("additionalProperties", {})
            each = {} if each is True else each
            props = dict(out.get("properties", {}))
            for name in names:
                props.setdefault(name, each)
            out["properties"] = props
            out["additionalProperties"] = False
        return out

    def union(self, branches: Any, path: tuple[str, ...]) -> dict[str, Any]:
        if not isinstance(branches, list) or not branches:
            self.note("mvu.zod.undecidable", "an empty union cannot be represented", path, "error")
            return {}
        mapped = [self.map(b, (*path, str(i))) for i, b in enumerate(branches)]
        literals: list[Any] = []
        types: list[str] = []
        for m in mapped:
            if set(m) <= {"const", "description", "type"} and "const" in m:
                literals.append(m["const"])
            elif set(m) <= {"enum", "description", "type"} and "enum" in m:
                literals += m["enum"]
            elif set(m) <= {"type", "description"} and isinstance(m.get("type"), str):
                types.append(m["type"])
            elif m == {}:
                return {}
            else:
                self.note(
                    "mvu.zod.undecidable", "a union of structured schemas (objects, arrays, bounds) cannot be represented", path, "error"
                )
                return {}
        if types and literals:
            if all(json_type(v) in types or (json_type(v) == "number" and "integer" in types) for v in literals):
                return {"type": types if len(types) > 1 else types[0]}
            if types == ["null"]:
                return {"enum": [*literals, None]}
            self.note("mvu.zod.undecidable", "a union mixing literals and other types cannot be represented", path, "error")
            return {}
        if literals:
            return {"enum": literals}
        return {"type": list(dict.fromkeys(types)) if len(set(types)) > 1 else types[0]}

    def intersection(self, branches: Any, path: tuple[str, ...]) -> dict[str, Any]:
        if not isinstance(branches, list):
            self.note("mvu.zod.undecidable", "allOf must be a list", path, "error")
            return {}
        merged: dict[str, Any] = {}
        for i, branch in enumerate(branches):
            mapped = self.map(branch, (*path, str(i)))
            for key, value in mapped.items():
                if key == "properties":
                    props = merged.setdefault("properties", {})
                    for name, sub in value.items():
                        if name in props and props[name] != sub:
                            self.note("mvu.zod.undecidable", f"allOf branches disagree on property {name!r}", path, "error")
                        props[name] = sub
                elif key == "required":
                    merged["required"] = list(dict.fromkeys([*merged.get("required", []), *value]))
                elif key in merged and merged[key] != value:
                    # z.intersection(object, record): the record's value type governs extra keys.
                    if key == "additionalProperties" and merged[key] is True:
                        merged[key] = value
                    elif key == "additionalProperties" and value is True:
                        continue
                    else:
                        self.note("mvu.zod.undecidable", f"allOf branches disagree on {key!r}", path, "error")
                else:
                    merged[key] = value
        return merged


def from_json_schema(document: Any, loc: Loc) -> tuple[dict[str, Any] | None, list[Problem]]:
    """Restricted schema for a zod ``schema.json``; None (with errors) when it cannot be kept."""
    mapper = _Mapper(document, loc)
    schema = mapper.map(document, ())
    if mapper.failed:
        return None, mapper.diagnostics
    problems = check_restricted_schema(schema)
    if problems:
        return None, mapper.diagnostics + [
            diag(
                "mvu.zod.undecidable",
                f"the mapped schema is not a restricted schema: {p.message}",
                loc.with_pointer(p.pointer or ""),
                "error",
                problemCode=p.code,
            )
            for p in problems
        ]
    return schema, mapper.diagnostics
