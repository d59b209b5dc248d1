"""MVU's data parse chain in Python: YAML 1.2 core schema, then JSON5, then a bounded repair.

MVU feeds InitVar entries, greeting ``<initvar>`` blocks and JSON Patch bodies to one function
that tries YAML (npm ``yaml``, YAML 1.2 core schema, merge keys on), JSON5 and ``jsonrepair`` in
turn (mvu.md §2.3). We keep the order and the data model but not the silence:

* YAML is loaded from ruamel's *node graph* with our own constructor, because the core schema is
  what cards are written against: ``10:45`` and ``2024-04-08`` stay strings (PyYAML and ruamel's
  own constructor would turn them into 645 and a ``date``), ``yes`` stays a string, ``1_000`` is a
  string. Building from nodes also gives line numbers for every value, handles ``<<`` merge keys
  and non-ASCII anchors, and lets a repeated key merge recursively instead of silently winning.
* npm ``yaml`` returns a partial document on errors; we treat a YAML error as an error.
* Repairs are bounded and each one leaves a warning: full-width ``：``/``，`` and Chinese quotes
  outside strings, NBSP indentation, and ``json-repair`` only for text that looks like JSON and
  only when it yields an object or an array (it turns arbitrary prose into ``""``).
"""

from __future__ import annotations

import json
import math
import re
import threading
from dataclasses import dataclass, field
from typing import Any

import json5
import json_repair
from ruamel.yaml import YAML
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.nodes import MappingNode, ScalarNode, SequenceNode

from roleplay.errors import Problem

from .diagnostics import Loc, diag

MAX_BUILT_NODES = 200_000  # alias expansion bound ("billion laughs")
MAX_TEXT = 2_000_000
# json-repair re-reads the rest of the text for every unclosed nesting level (``{x{x{x…``: 1 s
# at 4,000 characters), so it is not tried on deep or very long text; such a broken document is
# reported for the author to fix instead.
MAX_REPAIR = 64_000
MAX_REPAIR_DEPTH = 32
_BRACKETS = re.compile(r"[\[\]{}]")


def _bracket_depth(text: str) -> int:
    depth = deepest = 0
    for m in _BRACKETS.finditer(text):
        depth = depth + 1 if m.group() in "[{" else max(0, depth - 1)
        deepest = max(deepest, depth)
    return deepest


_TAG = "tag:yaml.org,2002:"
_NULL = re.compile(r"(?:~|null|Null|NULL|)\Z")
_TRUE = ("true", "True", "TRUE")
_FALSE = ("false", "False", "FALSE")
_INT10 = re.compile(r"[-+]?[0-9]+\Z")
_INT8 = re.compile(r"0o[0-7]+\Z")
_INT16 = re.compile(r"0x[0-9a-fA-F]+\Z")
_FLOAT = re.compile(r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?\Z")
_INF = re.compile(r"[-+]?\.(?:inf|Inf|INF)\Z")
_NAN = re.compile(r"\.(?:nan|NaN|NAN)\Z")


class ParseFailure(Exception):
    def __init__(self, message: str, line: int | None = None, column: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.line = line
        self.column = column


@dataclass
class Parsed:
    """Outcome of :func:`parse_data`. ``ok`` False means ``value`` is None and must not be used."""

    ok: bool
    value: Any = None
    method: str = ""  # "yaml" | "json" | "json5" | "json-repair"
    diagnostics: list[Problem] = field(default_factory=list)
    lines: dict[str, int] = field(default_factory=dict)  # JSON Pointer -> 1-based source line


# --- YAML 1.2 core schema ------------------------------------------------------------------------


def resolve_plain_scalar(text: str) -> Any:
    """A plain (unquoted) scalar under the YAML 1.2 core schema, as npm ``yaml`` resolves it."""
    if _NULL.match(text):
        return None
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    if _INT10.match(text):
        try:
            return int(text)
        except ValueError:
            # Past Python's digit limit; as a JavaScript number it would be Infinity.
            return float("inf")
    if _INT8.match(text):
        return int(text, 0)
    if _INT16.match(text):
        return int(text, 0)
    if _FLOAT.match(text):
        return float(text)
    if _INF.match(text) or _NAN.match(text):
        return float("nan")  # rejected by the caller: not JSON
    return text


def _pointer(parts: tuple[str, ...]) -> str:
    return "".join("/" + p.replace("~", "~0").replace("/", "~1") for p in parts)


def js_key(value: Any) -> str:
    """Object keys become strings, as they do in the JavaScript object MVU builds."""
    if isinstance(value, str):
        return value
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


class _Builder:
    def __init__(self, loc: Loc) -> None:
        self.loc = loc
        self.count = 0
        self.active: set[int] = set()
        self.lines: dict[str, int] = {}
        self.diagnostics: list[Problem] = []

    def build(self, node: Any, parts: tuple[str, ...]) -> Any:
        self.count += 1
        if self.count > MAX_BUILT_NODES:
            raise ParseFailure(f"the document expands to more than {MAX_BUILT_NODES} nodes (alias expansion)")
        line = node.start_mark.line + 1
        self.lines.setdefault(_pointer(parts), line)
        if isinstance(node, ScalarNode):
            return self._scalar(node, line)
        if id(node) in self.active:
            raise ParseFailure("an alias refers to its own ancestor (recursive structure)", line)
        self.active.add(id(node))
        try:
            if isinstance(node, SequenceNode):
                self._tag_check(node, "seq", line)
                return [self.build(child, (*parts, str(i))) for i, child in enumerate(node.value)]
            self._tag_check(node, "map", line)
            return self._mapping(node, parts)
        finally:
            self.active.discard(id(node))

    def _tag_check(self, node: Any, kind: str, line: int) -> None:
        tag = str(node.tag)
        if tag not in (_TAG + kind, _TAG + "omap", _TAG + "set"):
            self.diagnostics.append(
                diag(
                    "mvu.parse.yaml_tag_unknown",
                    f"YAML tag {tag!r} is not understood; the {kind} is read as plain data",
                    self.loc.at(line),
                    "warning",
                )
            )

    def _scalar(self, node: ScalarNode, line: int) -> Any:
        tag = str(node.tag)
        text = node.value
        if node.style is None and tag in (_TAG + t for t in ("null", "bool", "int", "float", "timestamp")):
            value = resolve_plain_scalar(text)
        elif tag == _TAG + "str" or tag == _TAG + "timestamp" or tag == _TAG + "binary":
            value = text
        elif tag in (_TAG + "int", _TAG + "float", _TAG + "bool", _TAG + "null"):
            value = resolve_plain_scalar(text.strip())
        else:
            self.diagnostics.append(
                diag(
                    "mvu.parse.yaml_tag_unknown", f"YAML tag {tag!r} is not understood; the scalar stays text", self.loc.at(line), "warning"
                )
            )
            value = text
        if isinstance(value, float) and not math.isfinite(value):
            raise ParseFailure(f"{text!r} is not a finite number; JSON state cannot hold it", line, node.start_mark.column + 1)
        return value

    def _mapping(self, node: MappingNode, parts: tuple[str, ...]) -> dict[str, Any]:
        merged: dict[str, Any] = {}
        explicit: dict[str, Any] = {}
        for key_node, value_node in node.value:
            if str(key_node.tag) == _TAG + "merge":
                sources = value_node.value if isinstance(value_node, SequenceNode) else [value_node]
                # Earlier maps in a merge list win over later ones; explicit keys win over all.
                for source in reversed(sources):
                    built = self.build(source, parts)
                    if not isinstance(built, dict):
                        raise ParseFailure("a '<<' merge key needs a mapping or a list of mappings", value_node.start_mark.line + 1)
                    merged.update(built)
                continue
            if isinstance(key_node, ScalarNode):
                key = js_key(self._scalar(key_node, key_node.start_mark.line + 1))
            else:
                raise ParseFailure("complex (non-scalar) mapping keys are not supported", key_node.start_mark.line + 1)
            value = self.build(value_node, (*parts, key))
            if key in explicit:
                explicit[key] = self._merge_duplicate(explicit[key], value, (*parts, key), key_node.start_mark.line + 1)
            else:
                explicit[key] = value
        merged.update(explicit)
        return merged

    def _merge_duplicate(self, old: Any, new: Any, parts: tuple[str, ...], line: int) -> Any:
        """A key written twice: groups (mappings) merge recursively when nothing conflicts.

        Authors split a big tree into several groups with the same heading; npm ``yaml`` would
        reject the document and other loaders keep one copy silently. Equal scalars are harmless;
        different ones are a genuine conflict and fail closed.
        """
        if isinstance(old, dict) and isinstance(new, dict):
            out = dict(old)
            for key, value in new.items():
                out[key] = self._merge_duplicate(out[key], value, (*parts, key), line) if key in out else value
            self.diagnostics.append(
                diag(
                    "mvu.parse.duplicate_key_merged",
                    f"repeated group {_pointer(parts)!r} merged with the earlier one",
                    self.loc.at(line),
                    "warning",
                )
            )
            return out
        if old == new:
            return old
        raise ParseFailure(f"key {_pointer(parts)!r} is given twice with different values", line)


_LOADERS = threading.local()


def _loader() -> YAML:
    """One loader per thread: building a ``YAML`` object scans the file system for plug-ins,
    which costs more than parsing a typical InitVar block (a card may have hundreds)."""
    yaml = getattr(_LOADERS, "yaml", None)
    if yaml is None:
        yaml = YAML(typ="safe", pure=True)
        yaml.version = (1, 2)
        _LOADERS.yaml = yaml
    return yaml


def load_yaml(text: str, loc: Loc) -> tuple[Any, dict[str, int], list[Problem]]:
    """Load one YAML 1.2 document (a leading ``---`` is fine). Raises :class:`ParseFailure`."""
    yaml = _loader()
    try:
        nodes = list(yaml.compose_all(text))
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        raise ParseFailure(
            f"YAML: {exc.problem or exc.context or 'syntax error'}",
            mark.line + 1 if mark else None,
            mark.column + 1 if mark else None,
        ) from None
    except (YAMLError, ValueError, RecursionError) as exc:
        raise ParseFailure(f"YAML: {exc}") from None
    nodes = [n for n in nodes if n is not None]
    if not nodes:
        return None, {}, []
    if len(nodes) > 1:
        raise ParseFailure("several YAML documents in one text; MVU reads exactly one", nodes[1].start_mark.line + 1)
    builder = _Builder(loc)
    try:
        value = builder.build(nodes[0], ())
    except RecursionError:
        raise ParseFailure("the YAML document nests too deeply") from None
    return value, builder.lines, builder.diagnostics


# --- bounded text repairs ---------------------------------------------------------------------------

# Indentation is ``[^\S\n]*``, not ``\s*``: the latter runs across blank lines from every line start
# (quadratic on a run of them) and finds the same keys.
_FULLWIDTH_KEY = re.compile(r"^([^\S\n]*(?:- )?[^\s#:：'\"{}\[\],][^:：\n]*?)：(?=\s|$)", re.MULTILINE)


def normalize_fullwidth_yaml(text: str) -> str:
    """``白娅：`` at a key position becomes ``白娅:`` (only the first colon of a line)."""
    return _FULLWIDTH_KEY.sub(r"\1:", text)


def normalize_nbsp_indent(text: str) -> str:
    return re.sub(r"^[ \u00a0\u3000]+", lambda m: " " * len(m.group(0)), text, flags=re.MULTILINE)


def normalize_json_punctuation(text: str) -> str:
    """Full-width ``：`` ``，`` and Chinese quotes used as JSON syntax, outside string literals.

    Inside an ASCII-quoted string every character is content and stays as is.
    """
    out: list[str] = []
    quote: str | None = None
    unclosed = False
    i = 0
    while i < len(text):
        ch = text[i]
        if quote is not None:
            out.append(ch)
            if ch == "\\" and i + 1 < len(text):
                out.append(text[i + 1])
                i += 2
                continue
            if ch == quote:
                quote = None
        elif ch in "\"'":
            quote = ch
            out.append(ch)
        elif ch in "“”":
            # A Chinese-quoted string used as a JSON string: its content up to the closing mark.
            # Once no closing mark is left, none is searched for again (one scan, not one per mark).
            end = text.find("”", i + 1) if ch == "“" and not unclosed else -1
            unclosed = unclosed or (ch == "“" and end == -1)
            if ch == "“" and end != -1:
                out.append(json.dumps(text[i + 1 : end], ensure_ascii=False))
                i = end + 1
                continue
            out.append('"')
        elif ch == "：":
            out.append(":")
        elif ch == "，":
            out.append(",")
        else:
            out.append(ch)
        i += 1
    return "".join(out)


def looks_like_json(text: str) -> bool:
    return text.lstrip().startswith(("{", "["))


# --- the chain ----------------------------------------------------------------------------------------


def _json5(text: str) -> Any:
    try:
        return json5.loads(text)
    except (ValueError, RecursionError, OverflowError) as exc:
        raise ParseFailure(f"JSON5: {exc}") from None


def _finite_json(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _finite_json(v) for k, v in value.items())
    if isinstance(value, list):
        return all(_finite_json(v) for v in value)
    return value is None or isinstance(value, (bool, int, str))


def parse_data(text: str, loc: Loc, *, want: str = "object") -> Parsed:
    """Parse MVU data text. ``want`` is ``"object"``, ``"array-or-object"`` or ``"any"``.

    Never raises for bad input: failures come back as ``ok=False`` with an error diagnostic.
    """
    if not isinstance(text, str):
        return Parsed(False, diagnostics=[diag("mvu.parse.failed", "the content is not text", loc)])
    if len(text) > MAX_TEXT:
        return Parsed(False, diagnostics=[diag("mvu.parse.too_large", f"more than {MAX_TEXT} characters", loc)])
    text = text.lstrip("\ufeff")
    notes: list[Problem] = []
    attempts: list[tuple[str, ParseFailure]] = []
    json_first = looks_like_json(text)

    def accept(value: Any, method: str, lines: dict[str, int] | None = None, extra: list[Problem] | None = None) -> Parsed | None:
        if not _finite_json(value):
            attempts.append((method, ParseFailure("the data holds a value JSON cannot represent")))
            return None
        if want == "object" and not isinstance(value, dict):
            attempts.append((method, ParseFailure(f"expected a mapping at the top level, got {type(value).__name__}")))
            return None
        if want == "array-or-object" and not isinstance(value, (dict, list)):
            attempts.append((method, ParseFailure(f"expected an array or a mapping, got {type(value).__name__}")))
            return None
        return Parsed(True, value, method, [*notes, *(extra or [])], lines or {})

    def try_yaml(candidate: str, note: Problem | None = None) -> Parsed | None:
        try:
            value, lines, found = load_yaml(candidate, loc)
        except ParseFailure as exc:
            attempts.append(("yaml", exc))
            return None
        return accept(value, "yaml", lines, [*found, *([note] if note else [])])

    if not json_first:
        result = try_yaml(text)
        if result:
            return result
        for fix, code, what in (
            (normalize_fullwidth_yaml, "mvu.parse.fullwidth_normalized", "full-width '：' after a key read as ':'"),
            (normalize_nbsp_indent, "mvu.parse.nbsp_normalized", "non-breaking spaces in indentation read as spaces"),
        ):
            fixed = fix(text)
            if fixed != text:
                result = try_yaml(fixed, diag(code, what, loc, "warning"))
                if result:
                    return result
        # MVU tries JSON5 after YAML: JSON that opens with a ``//`` or ``/* */`` comment does
        # not look like JSON, and YAML reads it as one long string.
        for candidate, note in (
            (text, None),
            (
                normalize_json_punctuation(text),
                diag(
                    "mvu.parse.fullwidth_normalized",
                    "full-width punctuation or Chinese quotes outside strings read as JSON syntax",
                    loc,
                    "warning",
                ),
            ),
        ):
            if note is not None and candidate == text:
                continue
            try:
                value = _json5(candidate)
            except ParseFailure as exc:
                attempts.append(("json5", exc))
                continue
            result = accept(value, "json5", extra=[note] if note else [])
            if result:
                return result
    else:
        try:
            return accept(json.loads(text), "json") or _fail(loc, attempts)
        except (ValueError, RecursionError):
            pass
        for candidate, note in (
            (text, None),
            (
                normalize_json_punctuation(text),
                diag(
                    "mvu.parse.fullwidth_normalized",
                    "full-width punctuation or Chinese quotes outside strings read as JSON syntax",
                    loc,
                    "warning",
                ),
            ),
        ):
            if note is not None and candidate == text:
                continue
            try:
                result = accept(_json5(candidate), "json5", extra=[note] if note else [])
            except ParseFailure as exc:
                attempts.append(("json5", exc))
                continue
            # JSON5 read it, so the text is well-formed: a refused value (NaN, wrong top level)
            # must not be "repaired" into something else.
            return result or _fail(loc, attempts)
        try:
            if len(text) > MAX_REPAIR or _bracket_depth(text) > MAX_REPAIR_DEPTH:
                raise ParseFailure(f"json-repair is not tried on more than {MAX_REPAIR} characters or {MAX_REPAIR_DEPTH} nesting levels")
            repaired = json_repair.loads(normalize_json_punctuation(text))
        except ParseFailure as exc:
            attempts.append(("json-repair", exc))
        except Exception as exc:  # noqa: BLE001 - json-repair raises assorted internals on hostile input
            attempts.append(("json-repair", ParseFailure(f"json-repair: {type(exc).__name__}")))
        else:
            if isinstance(repaired, (dict, list)) and repaired != {} and repaired != []:
                result = accept(
                    repaired,
                    "json-repair",
                    extra=[
                        diag(
                            "mvu.parse.repaired",
                            "malformed JSON was repaired (missing commas or brackets, quotes, Python literals); check the result",
                            loc,
                            "warning",
                        )
                    ],
                )
                if result:
                    return result
        result = try_yaml(text)
        if result:
            return result
    return _fail(loc, attempts)


def _fail(loc: Loc, attempts: list[tuple[str, ParseFailure]]) -> Parsed:
    # Report the most specific failure: a YAML error with a line beats the generic ones.
    best = next((exc for _m, exc in attempts if exc.line is not None), attempts[0][1] if attempts else ParseFailure("unparseable"))
    tried = ", ".join(dict.fromkeys(m for m, _e in attempts)) or "yaml"
    return Parsed(
        False,
        diagnostics=[diag("mvu.parse.failed", f"{best.message} (tried {tried})", loc.at(best.line, best.column))],
    )
