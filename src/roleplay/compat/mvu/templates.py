"""Lorebook templates at activation time: the read-only MVU subset, evaluated over native state.

MVU entries read variables through ST-Prompt-Template's ``getvar`` and TavernHelper's
``{{get_message_variable::…}}`` / ``{{format_message_variable::…}}`` macros. Here ``stat_data``
and ``display_data`` are temporary aliases of the current ``story`` value (never a second state);
for cards written with ValueWithDescription pairs the alias shows ``[value, description]`` again
at the split paths, so ``getvar("stat_data").理["好感度"][0]`` keeps working.

Allowed: ``getvar('stat_data.…')`` (optionally ``{defaults: literal}``), ``_.get`` / ``_.has`` on
those values with a literal path, member access, comparisons, ``! && ||``, ``if / else if / else``,
``<%= … %>`` output, ``print(…)`` and literal ``getwi('title')`` (the entry is rendered with the
same rules). Anything else — writes (``setvar``…), other functions, lodash callbacks, unknown
names, other variable scopes — is not executed: the entry fails closed (no text) with a
diagnostic. Nothing here can call back into Python or JavaScript.
"""

from __future__ import annotations

import json
import math
import operator
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from roleplay.errors import Problem

from .diagnostics import Loc, diag, line_of
from .ejs import (
    Await,
    Binary,
    Call,
    If,
    Lit,
    Member,
    Name,
    ObjectLit,
    Output,
    TemplateSyntaxError,
    Text,
    Unary,
    parse_template,
)
from .parsing import resolve_plain_scalar
from .paths import PathError, split_lodash

ALIASES = ("stat_data", "display_data")
MAX_GETWI_DEPTH = 4
MAX_STEPS = 100_000
_MACRO = re.compile(r"\{\{(get|format)_message_variable::([^{}]*)\}\}")


class _Undefined:
    def __repr__(self) -> str:
        return "undefined"


UNDEFINED: Any = _Undefined()


class TemplateRefused(Exception):
    def __init__(self, code: str, message: str, offset: int = 0) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.offset = offset


@dataclass
class Compiled:
    ok: bool
    tree: list = field(default_factory=list)
    diagnostics: list[Problem] = field(default_factory=list)


@dataclass
class TemplateResult:
    ok: bool
    text: str | None
    diagnostics: list[Problem] = field(default_factory=list)


def compile_template(text: str, loc: Loc) -> Compiled:
    try:
        return Compiled(True, parse_template(text))
    except TemplateSyntaxError as exc:
        return Compiled(
            False, [], [diag(exc.code, f"{exc.message}; the entry is not rendered (fail closed)", loc.at(line_of(text, exc.offset)))]
        )
    except RecursionError:
        return Compiled(False, [], [diag("mvu.template.unsupported", "the template nests too deeply", loc)])


# --- the alias view -------------------------------------------------------------------------------


def pair_view(story: Any, vwd: Mapping[str, str] | None) -> Any:
    """``story`` with each split ``[value, description]`` pair rebuilt (a read-only copy)."""
    if not vwd:
        return story

    def walk(node: Any, pointer: str) -> Any:
        if isinstance(node, dict):
            out: Any = {k: walk(v, f"{pointer}/{k.replace('~', '~0').replace('/', '~1')}") for k, v in node.items()}
        elif isinstance(node, list):
            out = [walk(v, f"{pointer}/{i}") for i, v in enumerate(node)]
        else:
            out = node
        return [out, vwd[pointer]] if pointer in vwd else out

    return walk(story, "")


def lodash_get(value: Any, tokens: list[str]) -> Any:
    for token in tokens:
        if isinstance(value, dict) and token in value:
            value = value[token]
        elif isinstance(value, list) and token.isdigit() and int(token) < len(value):
            value = value[int(token)]
        elif isinstance(value, (list, str)) and token == "length":
            value = len(value)
        else:
            return UNDEFINED
    return value


def strip_hidden(value: Any) -> Any:
    """TavernHelper's display macros drop every ``$``-prefixed key, at any depth."""
    if isinstance(value, dict):
        return {k: strip_hidden(v) for k, v in value.items() if not k.startswith("$")}
    if isinstance(value, list):
        return [strip_hidden(v) for v in value]
    return value


# --- JavaScript value semantics (the small part the subset needs) -----------------------------------------


def truthy(value: Any) -> bool:
    if value is UNDEFINED or value is None or value is False:
        return False
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value != 0 and not (isinstance(value, float) and math.isnan(value))
    if isinstance(value, str):
        return value != ""
    return True


def to_number(value: Any) -> float:
    if value is None:
        return 0.0
    if value is UNDEFINED:
        return math.nan
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        text = value.strip()
        if text == "":
            return 0.0
        try:
            return float(text)
        except ValueError:
            return math.nan
    if isinstance(value, list) and len(value) <= 1:
        return to_number(js_string(value))
    return math.nan


def _strict_equal(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return float(a) == float(b)
    if isinstance(a, (dict, list)) or isinstance(b, (dict, list)):
        return a is b
    return type(a) is type(b) and a == b


def _loose_equal(a: Any, b: Any) -> bool:
    nullish = (None, UNDEFINED)
    if a in nullish or b in nullish:
        return a in nullish and b in nullish
    if isinstance(a, (dict, list)) or isinstance(b, (dict, list)):
        return a is b
    if type(a) is type(b) or (
        isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool) and not isinstance(b, bool)
    ):
        return _strict_equal(a, b)
    return to_number(a) == to_number(b)


_ORDER: dict[str, Callable[[Any, Any], bool]] = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}


def _compare(op: str, a: Any, b: Any) -> bool:
    if isinstance(a, str) and isinstance(b, str):
        return _ORDER[op](a, b)  # two strings compare as strings (JavaScript)
    x, y = to_number(a), to_number(b)
    if math.isnan(x) or math.isnan(y):
        return False
    return _ORDER[op](x, y)


def js_string(value: Any) -> str:
    if value is None or value is UNDEFINED:
        return ""
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        return str(int(value)) if value.is_integer() and abs(value) < 1e21 else repr(value)
    if isinstance(value, list):
        return ",".join(js_string(v) for v in value)
    if isinstance(value, dict):
        return "[object Object]"
    return str(value)


# --- evaluation ----------------------------------------------------------------------------------------


class _Evaluator:
    def __init__(self, alias: Any, lookup: Callable[[str], str | None] | None, depth: int) -> None:
        self.alias = alias
        self.lookup = lookup
        self.depth = depth
        self.steps = 0

    def render(self, nodes: list) -> str:
        out: list[str] = []
        for node in nodes:
            self.steps += 1
            if self.steps > MAX_STEPS:
                raise TemplateRefused("mvu.template.too_long", "the template takes too many steps")
            if isinstance(node, Text):
                out.append(node.text)
            elif isinstance(node, Output):
                out.append(js_string(self.eval(node.expr)))
            elif isinstance(node, If):
                for cond, body in node.branches:
                    if truthy(self.eval(cond)):
                        out.append(self.render(body))
                        break
                else:
                    if node.otherwise is not None:
                        out.append(self.render(node.otherwise))
        return "".join(out)

    def eval(self, node: Any) -> Any:
        if isinstance(node, Lit):
            return node.value
        if isinstance(node, Name):
            if node.name == "undefined":
                return UNDEFINED
            raise TemplateRefused("mvu.template.unknown_name", f"name {node.name!r} is not available in the read-only subset", node.offset)
        if isinstance(node, Await):
            return self.eval(node.operand)
        if isinstance(node, Unary):
            value = self.eval(node.operand)
            if node.op == "!":
                return not truthy(value)
            number = to_number(value)
            return -number
        if isinstance(node, Binary):
            if node.op == "&&":
                left = self.eval(node.left)
                return self.eval(node.right) if truthy(left) else left
            if node.op == "||":
                left = self.eval(node.left)
                return left if truthy(left) else self.eval(node.right)
            left, right = self.eval(node.left), self.eval(node.right)
            if node.op == "===":
                return _strict_equal(left, right)
            if node.op == "!==":
                return not _strict_equal(left, right)
            if node.op == "==":
                return _loose_equal(left, right)
            if node.op == "!=":
                return not _loose_equal(left, right)
            return _compare(node.op, left, right)
        if isinstance(node, Member):
            target = self.eval(node.target)
            key = self.eval(node.key)
            if target is UNDEFINED or target is None:
                raise TemplateRefused("mvu.template.undefined_access", f"reading {js_string(key)!r} of {js_string(target) or 'undefined'}")
            return lodash_get(target, [js_string(key)])
        if isinstance(node, Call):
            return self.call(node)
        if isinstance(node, ObjectLit):
            return {k: self.eval(v) for k, v in node.items}
        raise TemplateRefused("mvu.template.unsupported", "unsupported expression")

    def _literal_text(self, node: Any, what: str, offset: int) -> str:
        if not (isinstance(node, Lit) and isinstance(node.value, str)):
            raise TemplateRefused("mvu.template.not_literal", f"{what} must be a string literal", offset)
        return node.value

    def call(self, node: Call) -> Any:
        callee = node.callee
        name = callee.name if isinstance(callee, Name) else None
        if isinstance(callee, Member) and isinstance(callee.target, Name) and callee.target.name == "_" and isinstance(callee.key, Lit):
            name = f"_.{callee.key.value}"
        if name == "getvar":
            return self.getvar(node)
        if name == "getwi":
            return self.getwi(node)
        if name in ("_.get", "_.has") and len(node.args) in (2, 3):
            target = self.eval(node.args[0])
            try:
                tokens = split_lodash(self._literal_text(node.args[1], f"{name} path", node.offset))
            except PathError as exc:
                raise TemplateRefused("mvu.template.path_invalid", str(exc), node.offset) from None
            found = lodash_get(target, tokens)
            if name == "_.has":
                return found is not UNDEFINED
            return self.eval(node.args[2]) if found is UNDEFINED and len(node.args) == 3 else found
        shown = name or "a computed function"
        code = (
            "mvu.template.write_forbidden"
            if name and re.match(r"(set|inc|dec|del)\w*var|_\.(set|unset|update|merge)|setLocalVar|setGlobalVar|setMessageVar", name)
            else "mvu.template.call_forbidden"
        )
        raise TemplateRefused(code, f"{shown}(…) is not executed: only getvar, getwi, _.get and _.has are read", node.offset)

    def getvar(self, node: Call) -> Any:
        if not node.args or len(node.args) > 2:
            raise TemplateRefused("mvu.template.call_forbidden", "getvar takes a key and optional options", node.offset)
        key = self._literal_text(node.args[0], "the getvar key", node.offset)
        defaults: Any = UNDEFINED
        if len(node.args) == 2:
            options = node.args[1]
            if not isinstance(options, ObjectLit) or any(k != "defaults" for k, _v in options.items):
                raise TemplateRefused(
                    "mvu.template.scope_forbidden", "getvar options other than {defaults: …} (scopes, flags) are not supported", node.offset
                )
            defaults = self.eval(options.items[0][1]) if options.items else UNDEFINED
        try:
            tokens = split_lodash(key)
        except PathError as exc:
            raise TemplateRefused("mvu.template.path_invalid", str(exc), node.offset) from None
        if not tokens or tokens[0] not in ALIASES:
            raise TemplateRefused(
                "mvu.template.scope_forbidden", f"getvar({key!r}) reads a variable outside stat_data/display_data", node.offset
            )
        value = lodash_get(self.alias, tokens)
        return defaults if value is UNDEFINED else value

    def getwi(self, node: Call) -> Any:
        if len(node.args) not in (1, 2):
            raise TemplateRefused("mvu.template.call_forbidden", "getwi takes a title (and optionally a lorebook name)", node.offset)
        title = self._literal_text(node.args[-1], "the getwi title", node.offset)
        if len(node.args) == 2:
            self._literal_text(node.args[0], "the getwi lorebook", node.offset)
        content = self.lookup(title) if self.lookup else None
        if content is None:
            raise TemplateRefused("mvu.template.getwi_missing", f"getwi({title!r}): no such entry", node.offset)
        if self.depth >= MAX_GETWI_DEPTH:
            raise TemplateRefused("mvu.template.getwi_depth", "getwi nests too deeply", node.offset)
        inner = _Evaluator(self.alias, self.lookup, self.depth + 1)
        return inner.render(parse_template(content))


# --- display macros -------------------------------------------------------------------------------------


def _yaml_scalar(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return js_string(value)
    text = str(value)
    plain = (
        text != ""
        and text == text.strip()
        and "\n" not in text
        and text[0] not in "-?:,[]{}#&*!|>'\"%@`"
        and ": " not in text
        and " #" not in text
        and not text.endswith(":")
        and resolve_plain_scalar(text) == text
    )
    return text if plain else json.dumps(text, ensure_ascii=False)


def to_yaml(value: Any, indent: int = 0) -> str:
    """A deterministic block-style YAML rendering (multi-line text as ``|-`` literals)."""
    pad = " " * indent
    if isinstance(value, dict):
        if not value:
            return "{}"
        lines = []
        for key, child in value.items():
            name = _yaml_scalar(key)
            if isinstance(child, (dict, list)) and child:
                lines.append(f"{pad}{name}:\n{to_yaml(child, indent + 2)}")
            elif isinstance(child, str) and "\n" in child:
                body = "\n".join(f"{pad}  {line}" for line in child.split("\n"))
                lines.append(f"{pad}{name}: |-\n{body}")
            else:
                lines.append(f"{pad}{name}: {to_yaml(child)}")
        return "\n".join(lines)
    if isinstance(value, list):
        if not value:
            return "[]"
        lines = []
        for child in value:
            if isinstance(child, (dict, list)) and child:
                inner = to_yaml(child, indent + 2)
                lines.append(f"{pad}- {inner.lstrip()}")
            else:
                lines.append(f"{pad}- {to_yaml(child)}")
        return "\n".join(lines)
    return _yaml_scalar(value)


def expand_variable_macros(text: str, alias: Any) -> str:
    def sub(match: re.Match) -> str:
        path = match.group(2).strip().replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", '"')
        try:
            value = lodash_get(alias, split_lodash(path)) if path else alias
        except PathError:
            return ""
        if value is UNDEFINED:
            return ""
        value = strip_hidden(value)
        if match.group(1) == "get":
            return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        rendered = to_yaml(value)
        column = match.start() - (text.rfind("\n", 0, match.start()) + 1)
        return rendered.replace("\n", "\n" + " " * column)

    return _MACRO.sub(sub, text)


# --- entry points ----------------------------------------------------------------------------------------


def alias_root(story: Any, vwd: Mapping[str, str] | None = None) -> dict[str, Any]:
    view = pair_view(story, vwd)
    return {"stat_data": view, "display_data": view}


def render_template(
    text: str,
    story: Any,
    *,
    loc: Loc | None = None,
    vwd: Mapping[str, str] | None = None,
    lookup: Callable[[str], str | None] | None = None,
) -> TemplateResult:
    """Render one entry's text; ``ok=False`` (text None) means the entry must not be injected."""
    loc = loc or Loc("entry")
    alias = alias_root(story, vwd)
    compiled = compile_template(text, loc)
    if not compiled.ok:
        return TemplateResult(False, None, compiled.diagnostics)
    try:
        rendered = _Evaluator(alias, lookup, 0).render(compiled.tree)
    except TemplateRefused as exc:
        return TemplateResult(
            False,
            None,
            [
                diag(
                    exc.code,
                    f"{exc.message}; the entry is not rendered (fail closed)",
                    loc.at(line_of(text, exc.offset) if exc.offset else None),
                )
            ],
        )
    except TemplateSyntaxError as exc:
        return TemplateResult(False, None, [diag("mvu.template.unsupported", f"getwi target: {exc.message}", loc)])
    except RecursionError:
        return TemplateResult(False, None, [diag("mvu.template.unsupported", "the template nests too deeply", loc)])
    return TemplateResult(True, expand_variable_macros(rendered, alias))


class TemplateHook:
    """A ``substitute`` callable for lorebook activation (``TurnInput.substitute``).

    Text without EJS or variable macros passes through unchanged. An entry that fails closed
    renders as empty text; the reasons collect in :attr:`diagnostics` for the turn's report.
    """

    def __init__(
        self, story: Any, *, vwd: Mapping[str, str] | None = None, entries: Mapping[str, str] | None = None, loc: Loc | None = None
    ) -> None:
        self.story = story
        self.vwd = vwd
        self.entries = dict(entries or {})
        self.loc = loc or Loc("lorebook")
        self.diagnostics: list[Problem] = []

    def __call__(self, text: str) -> str:
        if "<%" not in text and not _MACRO.search(text):
            return text
        result = render_template(text, self.story, loc=self.loc, vwd=self.vwd, lookup=self.entries.get)
        self.diagnostics += result.diagnostics
        return result.text if result.ok and result.text is not None else ""
