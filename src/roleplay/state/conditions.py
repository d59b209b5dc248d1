"""The safe condition language shared by rule ``condition`` and lorebook ``stateCondition``.

Grammar (nothing else is accepted: no aliases, property access, arithmetic or other functions)::

    expr    := or
    or      := and ( "||" and )*
    and     := unary ( "&&" unary )*
    unary   := "!" unary | compare
    compare := primary ( ( "==" | "!=" | ">" | ">=" | "<" | "<=" ) primary )?
    primary := literal | call | "(" expr ")"
    call    := ( "state" | "exists" ) "(" string "," string ")"
    literal := JSON string | JSON number | true | false | null

``state(ns, ptr)`` reads a value, ``exists(ns, ptr)`` tests for one. ``&&`` and ``||`` short-circuit
so that ``exists(…) && state(…) > 3`` is the idiomatic guard. Operands of ``!``, ``&&`` and ``||``
and the whole result must be booleans; ordering compares two numbers or two strings; ``==`` and
``!=`` compare any JSON values (values of different types are simply unequal).

Evaluation never raises: a malformed expression, a missing namespace or path and a type mismatch
all make the condition *inactive* and return a diagnostic, because a broken condition must fail
closed (a lorebook entry stays hidden, a rule stays unusable) instead of breaking the turn.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Mapping

from roleplay.errors import Problem, ValidationError
from roleplay.state import limits
from roleplay.state.pointers import MISSING, PointerError, lookup, parse_pointer

_TOKEN = re.compile(
    r"""
    (?P<ws>\s+)
  | (?P<string>"(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*")
  | (?P<number>-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?)
  | (?P<word>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<op>&&|\|\||==|!=|>=|<=|[!><(),])
    """,
    re.VERBOSE,
)
_COMPARISONS = ("==", "!=", ">", ">=", "<", "<=")
_KEYWORD_LITERALS = {"true": True, "false": False, "null": None}
_FUNCTIONS = ("state", "exists")


@dataclass(frozen=True)
class Condition:
    """A parsed expression: ``source`` is kept for diagnostics, ``tree`` is a tuple AST."""

    source: str
    tree: tuple


@dataclass(frozen=True)
class _Token:
    kind: str  # string | number | word | op | end
    text: str
    offset: int
    value: Any = None


class _Inactive(Exception):
    def __init__(self, problem: Problem) -> None:
        super().__init__(problem.message)
        self.problem = problem


def _diag(code: str, message: str, source: str, **details: Any) -> Problem:
    # Keep the expression in the diagnostic (bounded) so it can be shown where it is stored.
    return Problem(code, message, None, {"expression": source[:200], **details})


def _tokenize(source: str) -> list[_Token]:
    tokens: list[_Token] = []
    position = 0
    while position < len(source):
        match = _TOKEN.match(source, position)
        if match is None:
            raise _Inactive(_diag("state.condition.syntax", f"unexpected character {source[position]!r}", source, offset=position))
        kind = match.lastgroup or ""
        text = match.group()
        if kind != "ws":
            value: Any = None
            if kind == "string":
                value = json.loads(text)
            elif kind == "number":
                value = json.loads(text)
                if isinstance(value, float) and not math.isfinite(value):
                    raise _Inactive(_diag("state.condition.syntax", "number literal out of range", source, offset=position))
            tokens.append(_Token(kind, text, position, value))
            if len(tokens) > limits.MAX_CONDITION_TOKENS:
                raise _Inactive(
                    _diag(
                        "state.condition.too_large",
                        f"a condition may hold at most {limits.MAX_CONDITION_TOKENS} tokens",
                        source,
                        offset=position,
                    )
                )
        position = match.end()
    tokens.append(_Token("end", "", len(source)))
    return tokens


class _Parser:
    def __init__(self, source: str, tokens: list[_Token]) -> None:
        self.source = source
        self.tokens = tokens
        self.index = 0
        self.depth = 0

    def peek(self) -> _Token:
        return self.tokens[self.index]

    def take(self) -> _Token:
        token = self.tokens[self.index]
        self.index += 1
        return token

    def fail(self, message: str, token: _Token | None = None) -> _Inactive:
        at = token or self.peek()
        return _Inactive(_diag("state.condition.syntax", message, self.source, offset=at.offset))

    def expect_op(self, text: str) -> None:
        token = self.take()
        if token.kind != "op" or token.text != text:
            raise self.fail(f"expected {text!r}", token)

    def nest(self) -> None:
        self.depth += 1
        if self.depth > limits.MAX_CONDITION_DEPTH:
            raise _Inactive(
                _diag(
                    "state.condition.too_deep",
                    f"conditions nest at most {limits.MAX_CONDITION_DEPTH} levels",
                    self.source,
                    offset=self.peek().offset,
                )
            )

    def parse(self) -> tuple:
        tree = self.parse_or()
        if self.peek().kind != "end":
            raise self.fail("unexpected input after the expression")
        return tree

    def parse_or(self) -> tuple:
        left = self.parse_and()
        while self.peek().kind == "op" and self.peek().text == "||":
            self.take()
            left = ("or", left, self.parse_and())
        return left

    def parse_and(self) -> tuple:
        left = self.parse_unary()
        while self.peek().kind == "op" and self.peek().text == "&&":
            self.take()
            left = ("and", left, self.parse_unary())
        return left

    def parse_unary(self) -> tuple:
        if self.peek().kind == "op" and self.peek().text == "!":
            self.take()
            self.nest()
            operand = self.parse_unary()
            self.depth -= 1
            return ("not", operand)
        return self.parse_compare()

    def parse_compare(self) -> tuple:
        left = self.parse_primary()
        token = self.peek()
        if token.kind == "op" and token.text in _COMPARISONS:
            self.take()
            right = self.parse_primary()
            after = self.peek()
            if after.kind == "op" and after.text in _COMPARISONS:
                # a < b < c reads like a range but would compare a boolean; refuse it outright.
                raise self.fail("comparisons do not chain; use && and parentheses", after)
            return ("cmp", token.text, left, right)
        return left

    def parse_primary(self) -> tuple:
        token = self.take()
        if token.kind in ("string", "number"):
            return ("lit", token.value)
        if token.kind == "word":
            if token.text in _KEYWORD_LITERALS:
                return ("lit", _KEYWORD_LITERALS[token.text])
            if token.text in _FUNCTIONS:
                return self.parse_call(token)
            raise self.fail(f"unknown name {token.text!r}; only state(), exists() and literals are allowed", token)
        if token.kind == "op" and token.text == "(":
            self.nest()
            inner = self.parse_or()
            self.expect_op(")")
            self.depth -= 1
            return inner
        if token.kind == "end":
            raise self.fail("unexpected end of expression", token)
        raise self.fail(f"unexpected {token.text!r}", token)

    def parse_call(self, name: _Token) -> tuple:
        self.expect_op("(")
        namespace = self.take()
        if namespace.kind != "string":
            raise self.fail(f"{name.text}() takes a namespace string literal", namespace)
        self.expect_op(",")
        pointer = self.take()
        if pointer.kind != "string":
            raise self.fail(f"{name.text}() takes a JSON Pointer string literal", pointer)
        self.expect_op(")")
        try:
            parts = parse_pointer(pointer.value)
        except PointerError as exc:
            raise _Inactive(_diag("state.condition.pointer_invalid", str(exc), self.source, offset=pointer.offset)) from None
        return (name.text, namespace.value, parts, pointer.value)


def _parse(source: Any) -> Condition:
    if not isinstance(source, str):
        raise _Inactive(Problem("state.condition.not_text", "a condition must be a string", None, {}))
    if len(source) > limits.MAX_CONDITION_CHARS:
        raise _Inactive(
            _diag(
                "state.condition.too_large",
                f"a condition may be at most {limits.MAX_CONDITION_CHARS} characters",
                source,
                offset=limits.MAX_CONDITION_CHARS,
            )
        )
    return Condition(source, _Parser(source, _tokenize(source)).parse())


@lru_cache(maxsize=1024)
def _parse_cached(source: str) -> Condition | Problem:
    # Rules and lorebook entries are evaluated every turn with the same text; parsing once is
    # safe because parsing is a pure function of the text.
    try:
        return _parse(source)
    except _Inactive as inactive:
        return inactive.problem


def _compile(source: Any) -> Condition | Problem:
    if not isinstance(source, str):
        return _parse_or_problem(source)
    result = _parse_cached(source)
    if isinstance(result, Problem):
        # The cached Problem is shared; hand out a copy so callers may annotate it.
        return Problem(result.code, result.message, result.pointer, dict(result.details))
    return result


def _parse_or_problem(source: Any) -> Condition | Problem:
    try:
        return _parse(source)
    except _Inactive as inactive:
        return inactive.problem


def parse_condition(source: Any) -> Condition:
    """Parse or raise :class:`ValidationError` carrying the diagnostic's code and details."""
    result = _compile(source)
    if isinstance(result, Problem):
        raise ValidationError(result.code, result.message, details=result.details)
    return result


def condition_problems(source: Any) -> list[Problem]:
    """Static problems of a condition text (empty when it parses)."""
    result = _compile(source)
    return [result] if isinstance(result, Problem) else []


def evaluate_condition(expr: str | Condition, namespaces_values: Mapping[str, Any]) -> tuple[bool, list[Problem]]:
    """``(active, diagnostics)``: active only when the expression evaluates to ``true`` cleanly.

    ``namespaces_values`` maps namespace names to their current plain JSON values.
    """
    condition = expr if isinstance(expr, Condition) else _compile(expr)
    if isinstance(condition, Problem):
        return False, [condition]
    try:
        result = _evaluate(condition.tree, namespaces_values, condition.source)
    except _Inactive as inactive:
        return False, [inactive.problem]
    if not isinstance(result, bool):
        return False, [_diag("state.condition.type_mismatch", "a condition must evaluate to a boolean", condition.source)]
    return result, []


def _require_bool(value: Any, what: str, source: str) -> bool:
    if not isinstance(value, bool):
        raise _Inactive(_diag("state.condition.type_mismatch", f"{what} needs a boolean operand", source))
    return value


def _evaluate(tree: tuple, values: Mapping[str, Any], source: str) -> Any:
    kind = tree[0]
    if kind == "lit":
        return tree[1]
    if kind in ("state", "exists"):
        _, namespace, parts, pointer = tree
        root = values.get(namespace, MISSING) if isinstance(values, Mapping) else MISSING
        found = MISSING if root is MISSING else lookup(root, parts)
        if kind == "exists":
            return found is not MISSING
        if root is MISSING:
            raise _Inactive(
                _diag("state.condition.namespace_missing", f"namespace {namespace!r} does not exist", source, namespace=namespace)
            )
        if found is MISSING:
            raise _Inactive(
                _diag(
                    "state.condition.path_missing",
                    f"{pointer!r} does not exist in namespace {namespace!r}",
                    source,
                    namespace=namespace,
                    path=pointer,
                )
            )
        return found
    if kind == "not":
        return not _require_bool(_evaluate(tree[1], values, source), "'!'", source)
    if kind == "and":
        if not _require_bool(_evaluate(tree[1], values, source), "'&&'", source):
            return False
        return _require_bool(_evaluate(tree[2], values, source), "'&&'", source)
    if kind == "or":
        if _require_bool(_evaluate(tree[1], values, source), "'||'", source):
            return True
        return _require_bool(_evaluate(tree[2], values, source), "'||'", source)
    _, op, left_tree, right_tree = tree
    left = _evaluate(left_tree, values, source)
    right = _evaluate(right_tree, values, source)
    if op == "==":
        return json_equal(left, right)
    if op == "!=":
        return not json_equal(left, right)
    both_numbers = _is_number(left) and _is_number(right)
    both_strings = isinstance(left, str) and isinstance(right, str)
    if not (both_numbers or both_strings):
        raise _Inactive(_diag("state.condition.type_mismatch", f"{op!r} compares two numbers or two strings", source, operator=op))
    if op == ">":
        return left > right
    if op == ">=":
        return left >= right
    if op == "<":
        return left < right
    return left <= right


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def json_equal(a: Any, b: Any) -> bool:
    """JSON equality: ``1 == 1.0`` but ``true != 1`` (Python would say otherwise)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if _is_number(a) and _is_number(b):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b
