"""``变量更新规则`` → semantic rules, schema refinements and model guidance of ``rp.state`` v2.

The rules text is YAML that mirrors the state tree (mvu.md §2.12). Each key is a relative path,
possibly dotted, with alternatives (``A | B``, ``${A|B}``, ``${名称: A | B}``) or wildcards
(``*``, ``${名称}``); a node holding ``type`` / ``range`` / ``check`` / ``format`` / ``category``
describes the variable at its path. What becomes of it:

* every pattern expands against the schema to **exact JSON Pointers**; a wildcard over a closed
  object yields one rule per member, and a specific rule overrides a wildcard one for the same
  target;
* a wildcard over an *open* object (or a ``type`` with an index signature) is a dynamic group:
  it refines the schema and adds guidance but yields no rule, and the namespace becomes
  ``schema-only`` (native State only accepts exact paths in rules);
* ``type:`` strings refine the schema when the initial value satisfies them (else the conflict
  fails closed and the inferred schema stays); ``range:`` (``0~100`` or ``[a, b]``) becomes
  ``minimum``/``maximum``; ``check``, ``format``, ``category`` and prose become ``guidance``;
* EJS in a rules entry is never rendered or guessed around: the entry is refused with one
  diagnostic per tag.

Effects follow the target's type: ``set`` always, ``increment`` for numbers, ``append`` for arrays.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any

from roleplay.errors import Problem
from roleplay.state import limits, validate_value

from .detect import is_update_rules_entry
from .diagnostics import Loc, diag
from .parsing import parse_data
from .paths import PathError, Segment, rule_segments
from .scan import LineIndex, ejs_tags
from .schema import pointer_of
from .sources import BookEntry, expand_macros
from .typeexpr import TypeFailure, parse_type

RULE_FIELDS = ("type", "range", "check", "format", "category", "description", "desc", "example", "examples", "note", "rule", "default")
ROOT_KEY = "变量更新规则"
_RANGE = re.compile(r"^\s*([-+]?\d+(?:\.\d+)?)\s*[~～\-—至到]\s*([-+]?\d+(?:\.\d+)?)\s*$")
_RANGE_RIGHT_NEG = re.compile(r"^\s*([-+]?\d+(?:\.\d+)?)\s*[~～]\s*([-+]?\d+(?:\.\d+)?)\s*$")


@dataclass
class Spec:
    fields: dict[str, Any]
    where: Any
    specificity: int  # literal segments: a specific rule beats a wildcard one


@dataclass
class RulesResult:
    rules: list[dict[str, Any]] = field(default_factory=list)
    schema: dict[str, Any] = field(default_factory=dict)
    dynamic_groups: list[str] = field(default_factory=list)  # container pointers
    guidance: list[str] = field(default_factory=list)  # namespace-level prose
    diagnostics: list[Problem] = field(default_factory=list)
    found: bool = False  # some structured rules text was read


# --- schema navigation (plain dict schemas produced by .schema) ----------------------------------------


def _node(schema: dict[str, Any], parts: tuple[str, ...]) -> dict[str, Any] | None:
    node: Any = schema
    for part in parts:
        if not isinstance(node, dict):
            return None
        if part in node.get("properties", {}):
            node = node["properties"][part]
        elif node.get("type") == "array" and part.isdigit():
            node = node.get("items", {})
        elif isinstance(node.get("additionalProperties"), dict):
            node = node["additionalProperties"]
        else:
            return None
    return node if isinstance(node, dict) else None


def _value(value: Any, parts: tuple[str, ...]) -> Any:
    for part in parts:
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return _MISSING
    return value


_MISSING = object()


def _is_open(node: dict[str, Any]) -> bool:
    return node.get("type") == "object" and node.get("additionalProperties", True) is not False


def _replace(schema: dict[str, Any], parts: tuple[str, ...], new: dict[str, Any]) -> dict[str, Any]:
    if not parts:
        return new
    out = dict(schema)
    head = parts[0]
    if head in out.get("properties", {}):
        out["properties"] = {**out["properties"], head: _replace(out["properties"][head], parts[1:], new)}
    elif out.get("type") == "array":
        out["items"] = _replace(out.get("items", {}), parts[1:], new)
    elif isinstance(out.get("additionalProperties"), dict):
        out["additionalProperties"] = _replace(out["additionalProperties"], parts[1:], new)
    return out


# --- reading the rules text ------------------------------------------------------------------------------


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, list):
        return "\n".join(f"- {_text(v)}" for v in value)
    if isinstance(value, dict):
        return "\n".join(f"{k}: {_text(v)}" for k, v in value.items())
    return json.dumps(value, ensure_ascii=False)


def _dotted(parts: tuple[str, ...]) -> str:
    return ".".join(parts) or "(root)"


# What a rule path expands to: (exact targets, open groups as (container, remaining segments),
# names the schema does not have).
_Expansion = tuple[list[tuple[str, ...]], list[tuple[tuple[str, ...], list[Segment]]], list[str]]


class _Reader:
    def __init__(self, value: Any, schema: dict[str, Any], zod: bool) -> None:
        self.value = value
        self.schema = schema
        self.zod = zod
        self.out = RulesResult(schema=schema)
        self.specs: dict[tuple[str, ...], Spec] = {}
        self.groups: dict[tuple[str, ...], list[tuple[list[Segment], dict[str, Any], Any]]] = {}

    def walk(self, tree: dict[str, Any], prefix: list[Segment], lines: dict[str, int], loc: Loc, ptr: tuple[str, ...]) -> None:
        fields = {k: v for k, v in tree.items() if k in RULE_FIELDS}
        where = loc.at(lines.get(pointer_of(ptr)))
        if fields and prefix:
            self.add_spec(prefix, fields, where)
        elif fields:
            self.out.guidance.append(_text(fields))
        for key, child in tree.items():
            if key in RULE_FIELDS:
                continue
            at = loc.at(lines.get(pointer_of((*ptr, key))))
            try:
                segments = rule_segments(key)
            except PathError as exc:
                self.out.diagnostics.append(diag("mvu.rules.path_invalid", f"rule path {key!r}: {exc}", at))
                continue
            if isinstance(child, dict):
                self.walk(child, [*prefix, *segments], lines, loc, (*ptr, key))
            elif child is None:
                continue
            else:
                # Prose under a topic key: guidance for that variable when the path exists,
                # otherwise general guidance (free-form rule books have no per-path structure).
                self.add_spec([*prefix, *segments], {"check": child}, at, prose=True)

    def add_spec(self, segments: list[Segment], fields: dict[str, Any], where: Any, prose: bool = False) -> None:
        targets, groups, missing = self.expand(segments, (), self.schema, 0)
        if not targets and not groups:
            text = _text(fields.get("check", fields))
            if prose:
                self.out.guidance.append(f"{'.'.join('|'.join(s.names) or s.label for s in segments)}: {text}")
                self.out.diagnostics.append(
                    diag("mvu.rules.prose_only", "prose not tied to a state path is kept as general guidance", where, "info")
                )
            else:
                self.out.diagnostics.append(
                    diag(
                        "mvu.rules.path_unresolved",
                        f"rule path {'.'.join(missing) or '?'} does not exist in the state; rule dropped",
                        where,
                        "warning",
                    )
                )
            return
        for name in missing:
            self.out.diagnostics.append(
                diag("mvu.rules.path_unresolved", f"alternative {name!r} does not exist in the state; skipped", where, "warning")
            )
        specificity = sum(1 for s in segments if s.literal)
        for parts in targets:
            old = self.specs.get(parts)
            if old is None or specificity > old.specificity:
                if old is not None:
                    self.out.diagnostics.append(
                        diag("mvu.rules.wildcard_overridden", f"the rule for {_dotted(parts)} overrides a wildcard rule", where, "info")
                    )
                self.specs[parts] = Spec(dict(fields), where, specificity)
            elif specificity == old.specificity:
                self.specs[parts] = Spec(self.merge(old, fields, where, parts), where, specificity)
        for container, rest in groups:
            self.groups.setdefault(container, []).append((rest, fields, where))

    def merge(self, old: Spec, fields: dict[str, Any], where: Any, parts: tuple[str, ...]) -> dict[str, Any]:
        merged = dict(old.fields)
        for key, value in fields.items():
            if key not in merged or merged[key] == value:
                merged[key] = value
            elif key in ("type", "range", "format"):
                self.out.diagnostics.append(
                    diag("mvu.rules.conflict", f"{_dotted(parts)} declares different {key!r} values; the rule is refused", where)
                )
                merged["$conflict"] = True
            else:
                merged[key] = [
                    *(merged[key] if isinstance(merged[key], list) else [merged[key]]),
                    *(value if isinstance(value, list) else [value]),
                ]
        return merged

    def expand(self, segments: list[Segment], parts: tuple[str, ...], node: dict[str, Any] | None, depth: int) -> _Expansion:
        """(exact targets, open groups as (container, remaining segments), missing names)."""
        if not segments:
            return [parts], [], []
        if node is None:
            return [], [], [".".join(parts)]
        seg, rest = segments[0], segments[1:]
        # ``x[0]`` on a split [value, description] pair addresses the value itself.
        if (
            seg.literal
            and seg.names[0] == "0"
            and node.get("type") != "array"
            and _value(self.value, parts) is not _MISSING
            and not isinstance(_value(self.value, parts), list)
        ):
            return self.expand(rest, parts, node, depth)
        if seg.kind == "wild":
            if _is_open(node) or node.get("type") == "array":
                return [], [(parts, segments)], []
            names = tuple(node.get("properties", {}))
        else:
            names = seg.names
        targets: list[tuple[str, ...]] = []
        groups: list[tuple[tuple[str, ...], list[Segment]]] = []
        missing: list[str] = []
        for name in names:
            child = _node(node, (name,)) if name in node.get("properties", {}) or node.get("type") == "array" else None
            if child is None:
                if seg.kind == "key" and _is_open(node) and isinstance(node.get("additionalProperties"), dict):
                    missing.append(".".join((*parts, name)))
                    continue
                missing.append(".".join((*parts, name)))
                continue
            t, g, m = self.expand(rest, (*parts, name), child, depth + 1)
            targets += t
            groups += g
            missing += m
        return targets, groups, missing

    # --- applying specs ---------------------------------------------------------------------------

    def apply(self) -> None:
        for container, items in self.groups.items():
            self.apply_group(container, items)
        for parts in sorted(self.specs, key=lambda p: (len(p), p)):
            self.apply_spec(parts, self.specs[parts])

    def refine_type(self, parts: tuple[str, ...], text: Any, where: Any) -> bool:
        """Replace the schema at ``parts`` by the parsed type; False when refused."""
        if self.zod:
            self.out.diagnostics.append(
                diag("mvu.rules.type_ignored", f"type of {_dotted(parts)} ignored: schema.json is authoritative", where, "info")
            )
            return True
        if not isinstance(text, str):
            self.out.diagnostics.append(diag("mvu.rules.type_unsupported", f"type of {_dotted(parts)} is not text", where))
            return False
        try:
            schema, warnings = parse_type(text)
        except TypeFailure as exc:
            self.out.diagnostics.append(
                diag("mvu.rules.type_unsupported", f"type of {_dotted(parts)} cannot be read safely: {exc.message}", where)
            )
            return False
        for warning in warnings:
            self.out.diagnostics.append(diag("mvu.rules.type_normalized", f"type of {_dotted(parts)}: {warning}", where, "warning"))
        current = _node(self.out.schema, parts) or {}
        if "description" in current and "description" not in schema:
            schema = {**schema, "description": current["description"]}
        value = _value(self.value, parts)
        if value is not _MISSING and validate_value(schema, value):
            self.out.diagnostics.append(
                diag(
                    "mvu.rules.type_conflict",
                    f"the initial value of {_dotted(parts)} does not match its declared type; the inferred schema is kept",
                    where,
                )
            )
            return False
        self.out.schema = _replace(self.out.schema, parts, schema)
        return True

    def apply_group(self, container: tuple[str, ...], items: list[tuple[list[Segment], dict[str, Any], Any]]) -> None:
        node = _node(self.out.schema, container)
        if node is None:
            return
        lines = []
        for rest, fields, where in items:
            label = ".".join(s.label or "|".join(s.names) for s in rest)
            lines.append(f"{label}: {_text(fields)}")
            if "type" in fields and len(rest) == 1 and rest[0].kind == "wild" and not self.zod:
                # ``装备栏.${部位}: {type: T}``: T is the type of every member of the open group.
                try:
                    member, _w = parse_type(fields["type"]) if isinstance(fields["type"], str) else ({}, [])
                except TypeFailure as exc:
                    self.out.diagnostics.append(
                        diag("mvu.rules.type_unsupported", f"type of {_dotted(container)}.{label}: {exc.message}", where)
                    )
                    continue
                candidate = {**node, "additionalProperties": member}
                value = _value(self.value, container)
                if value is _MISSING or not validate_value(candidate, value):
                    node = candidate
                    self.out.schema = _replace(self.out.schema, container, node)
                else:
                    self.out.diagnostics.append(
                        diag("mvu.rules.type_conflict", f"members of {_dotted(container)} do not match {label}'s type", where)
                    )
        self.mark_group(container, "\n".join(lines), items[0][2])

    def mark_group(self, container: tuple[str, ...], text: str, where: Any) -> None:
        pointer = pointer_of(container)
        if pointer not in self.out.dynamic_groups:
            self.out.dynamic_groups.append(pointer)
            self.out.diagnostics.append(
                diag(
                    "mvu.rules.dynamic_group",
                    f"{_dotted(container)} has dynamic keys: schema and guidance only, the namespace is schema-only",
                    where,
                    "info",
                )
            )
        node = _node(self.out.schema, container) or {}
        described = "\n".join(x for x in (node.get("description"), text) if x)
        self.out.schema = _replace(self.out.schema, container, {**node, "description": described[: limits.MAX_DESCRIPTION]})
        self.out.guidance.append(f"{_dotted(container)}: {text}")

    def apply_spec(self, parts: tuple[str, ...], spec: Spec) -> None:
        fields = spec.fields
        if fields.pop("$conflict", False):
            return
        ok = True
        if "type" in fields:
            ok = self.refine_type(parts, fields["type"], spec.where)
        if "range" in fields and ok:
            ok = self.apply_range(parts, fields["range"], spec.where)
        node = _node(self.out.schema, parts)
        # ``check`` becomes the rule's ``when``; the other prose fields are its guidance.
        guidance = "\n".join(f"{k}: {_text(v)}" for k, v in fields.items() if k not in ("type", "range", "check"))
        group_text = "\n".join(x for x in (_text(fields["check"]) if "check" in fields else "", guidance) if x)
        if node is None or not ok:
            return
        if _is_open(node) and (isinstance(node.get("additionalProperties"), dict) or "type" in fields):
            self.mark_group(parts, group_text or "dynamic keys", spec.where)
            return
        ops = ["set"]
        if node.get("type") in ("number", "integer"):
            ops.append("increment")
        if node.get("type") == "array":
            ops.append("append")
        checks = fields.get("check")
        when = _text(checks) if checks else f"the story changes {_dotted(parts)}"
        target = pointer_of(parts)
        for op in ops:
            rule = {
                "id": rule_id(target, op),
                "target": target,
                "when": when[: limits.MAX_RULE_TEXT],
                "effect": {"op": op},
                "cadence": "when-applicable",
            }
            if guidance:
                rule["guidance"] = guidance[: limits.MAX_RULE_TEXT]
            self.out.rules.append(rule)

    def apply_range(self, parts: tuple[str, ...], raw: Any, where: Any) -> bool:
        bounds = parse_range(raw)
        if bounds is None:
            self.out.diagnostics.append(diag("mvu.rules.range_invalid", f"range {raw!r} of {_dotted(parts)} is not 'a~b' or [a, b]", where))
            return True
        low, high = bounds
        node = _node(self.out.schema, parts)
        if node is None or node.get("type") not in ("number", "integer", ["number", "null"]):
            self.out.diagnostics.append(diag("mvu.rules.range_invalid", f"range on non-numeric {_dotted(parts)} ignored", where, "warning"))
            return True
        candidate = {**node, "minimum": low, "maximum": high}
        value = _value(self.value, parts)
        if value is not _MISSING and validate_value(candidate, value):
            self.out.diagnostics.append(
                diag(
                    "mvu.rules.range_conflict",
                    f"the initial value of {_dotted(parts)} lies outside {low}~{high}; bounds not applied",
                    where,
                )
            )
            return True
        self.out.schema = _replace(self.out.schema, parts, candidate)
        return True


def parse_range(raw: Any) -> tuple[float, float] | None:
    """``0~100``, ``-20~100``, ``[-20, 100]`` (a YAML list or its text) → (low, high)."""
    if isinstance(raw, list) and len(raw) == 2 and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in raw):
        low, high = raw
    elif isinstance(raw, str):
        text = raw.strip()
        m = (
            re.fullmatch(r"\[\s*([-+]?\d+(?:\.\d+)?)\s*[,，]\s*([-+]?\d+(?:\.\d+)?)\s*\]", text)
            or _RANGE_RIGHT_NEG.match(text)
            or _RANGE.match(text)
        )
        if not m:
            return None
        low, high = (float(g) if "." in g else int(g) for g in m.groups())
    else:
        return None
    return (low, high) if low <= high else None


def rule_id(target: str, op: str) -> str:
    text = f"mvu:{target}:{op}"
    if len(text) <= limits.MAX_RULE_ID:
        return text
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]
    return f"mvu:{target[: limits.MAX_RULE_ID - 30]}…{digest}:{op}"


def _rules_tree(entry: BookEntry, *, char: str, user: str, out: RulesResult) -> tuple[dict[str, Any], dict[str, int]] | None:
    content = expand_macros(entry.content, char=char, user=user)
    tags = list(ejs_tags(content))
    if tags:
        lines = LineIndex(content)
        for start, _end, _body_start, _body_end in tags:
            out.diagnostics.append(
                diag(
                    "mvu.rules.ejs_unsupported",
                    "EJS in update rules depends on state at render time; the entry is not used for rules",
                    entry.loc.at(lines.line(start)),
                )
            )
        return None
    parsed = parse_data(content, entry.loc, want="any")
    if not parsed.ok or not isinstance(parsed.value, dict) or ROOT_KEY not in parsed.value:
        if ROOT_KEY in content:
            out.diagnostics += parsed.diagnostics or [
                diag("mvu.rules.parse_failed", "the 变量更新规则 block is not a YAML mapping", entry.loc)
            ]
        else:
            out.diagnostics.append(
                diag(
                    "mvu.rules.protocol_dropped",
                    "this [mvu_update] entry holds output-protocol or prose text, not structured rules; the native commit contract replaces it",
                    entry.loc,
                    "info",
                )
            )
        return None
    tree = parsed.value[ROOT_KEY]
    if not isinstance(tree, dict):
        out.diagnostics.append(diag("mvu.rules.parse_failed", "变量更新规则 must be a mapping of paths", entry.loc))
        return None
    return tree, {k[len("/" + ROOT_KEY) :]: v for k, v in parsed.lines.items() if k.startswith("/" + ROOT_KEY)}


def derive_rules(entries: list[BookEntry], value: Any, schema: dict[str, Any], *, char: str, user: str, zod: bool = False) -> RulesResult:
    reader = _Reader(value, schema, zod)
    for entry in entries:
        if not is_update_rules_entry(entry):
            continue
        found = _rules_tree(entry, char=char, user=user, out=reader.out)
        if found is None:
            continue
        reader.out.found = True
        tree, lines = found
        reader.walk(tree, [], lines, entry.loc, ())
    reader.apply()
    return reader.out


def leaf_pointers(value: Any, parts: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    if isinstance(value, dict) and value:
        return [p for k, v in value.items() for p in leaf_pointers(v, (*parts, k))]
    return [parts]


def uncovered(value: Any, rules: list[dict[str, Any]]) -> list[str]:
    """Leaves of ``value`` that no rule target reaches (equal or an ancestor)."""
    targets = [tuple(t.split("/")[1:]) if t else () for t in {r["target"] for r in rules}]
    decoded = [tuple(p.replace("~1", "/").replace("~0", "~") for p in t) for t in targets]
    return [pointer_of(leaf) for leaf in leaf_pointers(value) if not any(leaf[: len(t)] == t for t in decoded)]
