"""A parser for the read-only EJS subset MVU lorebooks use; it builds a tree and runs nothing.

ST-Prompt-Template renders lorebook entries as EJS (mvu.md §2.14). MVU cards use a small part of
it to pick text by state: ``<%_ if (getvar('stat_data.白娅.依存度') < 20) { _%> … <%_ } else
if (…) { _%> … <%_ } _%>``, ``<%= getvar(…) %>`` and ``print(await getwi('title'))``. This module
has its own tokenizer and recursive-descent parser for exactly that subset:

* template level: text, ``<% %>`` code, ``<%= %>``/``<%- %>`` output, ``<%# %>`` comments,
  ``<%%`` literal, and EJS whitespace slurping (``<%_`` eats spaces/tabs before the tag,
  ``_%>``/``-%>`` eat spaces/tabs and one newline after it);
* statements: ``if (…) {``, ``} else if (…) {``, ``} else {``, ``}``, ``print(expr)``, ``;``;
* expressions: literals (numbers, strings without interpolation, ``true``/``false``/``null``/
  ``undefined``), identifiers, ``.name`` / ``[expr]`` access, calls, ``await``, object literals,
  ``!``, unary ``-``, comparisons, ``&&``, ``||`` and parentheses.

Which calls and identifiers are allowed is decided by the evaluator (:mod:`.templates`); anything
outside this grammar (assignment, arrow functions, loops, ``?:``, arithmetic) is a
:class:`TemplateSyntaxError`, so unknown JavaScript is never half-understood.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from .scan import ejs_matches

MAX_TEMPLATE = 200_000
MAX_NESTING = 32


class TemplateSyntaxError(Exception):
    def __init__(self, message: str, offset: int, code: str = "mvu.template.unsupported") -> None:
        super().__init__(message)
        self.message = message
        self.offset = offset
        self.code = code


WRITE_CALL = re.compile(
    r"(?:set|inc|dec|del|insert|assign|update|unset|remove)\w*$|^(?:setLocalVar|setGlobalVar|setMessageVar|setChatVar)$", re.IGNORECASE
)


# --- expression tree -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Lit:
    value: Any


@dataclass(frozen=True)
class Name:
    name: str
    offset: int


@dataclass(frozen=True)
class Member:
    target: Any
    key: Any  # an expression (computed) or Lit(name)


@dataclass(frozen=True)
class Call:
    callee: Any
    args: tuple[Any, ...]
    offset: int


@dataclass(frozen=True)
class Unary:
    op: str
    operand: Any


@dataclass(frozen=True)
class Binary:
    op: str
    left: Any
    right: Any


@dataclass(frozen=True)
class ObjectLit:
    items: tuple[tuple[str, Any], ...]


@dataclass(frozen=True)
class Await:
    operand: Any


# --- template tree ---------------------------------------------------------------------------------


@dataclass
class Text:
    text: str


@dataclass
class Output:
    expr: Any
    offset: int


@dataclass
class If:
    branches: list[tuple[Any, list]] = field(default_factory=list)
    otherwise: list | None = None


# --- tokenizer ------------------------------------------------------------------------------------------

_PUNCT = (
    "===",
    "!==",
    "==",
    "!=",
    "<=",
    ">=",
    "&&",
    "||",
    "=>",
    "<",
    ">",
    "!",
    "(",
    ")",
    "{",
    "}",
    "[",
    "]",
    ".",
    ",",
    ";",
    ":",
    "-",
    "?",
    "=",
    "+",
    "*",
    "/",
    "%",
)
_IDENT = re.compile(r"[A-Za-z_$\u00a0-\uffff][A-Za-z0-9_$\u00a0-\uffff]*")
_NUMBER = re.compile(r"(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


@dataclass(frozen=True)
class Tok:
    kind: str  # ident | num | str | punct | end
    text: str
    offset: int
    value: Any = None


def tokenize(code: str, base: int = 0) -> list[Tok]:
    toks: list[Tok] = []
    i, n = 0, len(code)
    while i < n:
        ch = code[i]
        if ch.isspace():
            i += 1
            continue
        if code.startswith("//", i):
            end = code.find("\n", i)
            i = n if end == -1 else end
            continue
        if code.startswith("/*", i):
            end = code.find("*/", i + 2)
            if end == -1:
                raise TemplateSyntaxError("unterminated comment", base + i)
            i = end + 2
            continue
        if ch in "'\"`":
            j, out = i + 1, []
            while j < n and code[j] != ch:
                if code[j] == "\\" and j + 1 < n:
                    j += 1
                    out.append({"n": "\n", "t": "\t"}.get(code[j], code[j]))
                elif ch == "`" and code.startswith("${", j):
                    raise TemplateSyntaxError("template-literal interpolation is code", base + j)
                else:
                    out.append(code[j])
                j += 1
            if j >= n:
                raise TemplateSyntaxError("unterminated string", base + i)
            toks.append(Tok("str", code[i : j + 1], base + i, "".join(out)))
            i = j + 1
            continue
        m = _NUMBER.match(code, i)
        if m and (ch.isdigit() or ch == "."):
            raw = m.group(0)
            toks.append(Tok("num", raw, base + i, float(raw) if any(c in raw for c in ".eE") else int(raw)))
            i = m.end()
            continue
        m = _IDENT.match(code, i)
        if m:
            toks.append(Tok("ident", m.group(0), base + i))
            i = m.end()
            continue
        for p in _PUNCT:
            if code.startswith(p, i):
                toks.append(Tok("punct", p, base + i))
                i += len(p)
                break
        else:
            raise TemplateSyntaxError(f"unexpected character {ch!r}", base + i)
    toks.append(Tok("end", "", base + n))
    return toks


# --- expressions -----------------------------------------------------------------------------------------

_COMPARE = ("===", "!==", "==", "!=", "<", "<=", ">", ">=")


class ExprParser:
    def __init__(self, toks: list[Tok]) -> None:
        self.toks = toks
        self.i = 0
        self.depth = 0

    @property
    def tok(self) -> Tok:
        return self.toks[self.i]

    def is_(self, text: str) -> bool:
        return self.tok.kind in ("punct", "ident") and self.tok.text == text

    def take(self, text: str) -> Tok:
        if not self.is_(text):
            raise TemplateSyntaxError(f"expected {text!r}, found {self.tok.text or 'end'!r}", self.tok.offset)
        tok = self.tok
        self.i += 1
        return tok

    def expression(self) -> Any:
        self.depth += 1
        if self.depth > MAX_NESTING:
            raise TemplateSyntaxError("expression nests too deeply", self.tok.offset)
        node = self.or_()
        self.depth -= 1
        if self.is_("?") or self.is_("=") or self.is_("=>"):
            raise TemplateSyntaxError(
                f"{self.tok.text!r} (conditional, assignment or function) is not in the read-only subset", self.tok.offset
            )
        return node

    def or_(self) -> Any:
        node = self.and_()
        while self.is_("||"):
            self.i += 1
            node = Binary("||", node, self.and_())
        return node

    def and_(self) -> Any:
        node = self.compare()
        while self.is_("&&"):
            self.i += 1
            node = Binary("&&", node, self.compare())
        return node

    def compare(self) -> Any:
        node = self.unary()
        while self.tok.kind == "punct" and self.tok.text in _COMPARE:
            op = self.tok.text
            self.i += 1
            node = Binary(op, node, self.unary())
        if self.tok.kind == "punct" and self.tok.text in ("+", "*", "/", "%", "-"):
            raise TemplateSyntaxError(f"arithmetic {self.tok.text!r} is not in the read-only subset", self.tok.offset)
        return node

    def unary(self) -> Any:
        if self.is_("!"):
            self.i += 1
            return Unary("!", self.unary())
        if self.is_("-"):
            self.i += 1
            return Unary("-", self.unary())
        if self.is_("await"):
            self.i += 1
            return Await(self.unary())
        return self.postfix()

    def postfix(self) -> Any:
        node = self.primary()
        while True:
            if self.is_("."):
                self.i += 1
                if self.tok.kind != "ident":
                    raise TemplateSyntaxError("expected a property name after '.'", self.tok.offset)
                node = Member(node, Lit(self.tok.text))
                self.i += 1
            elif self.is_("["):
                self.i += 1
                key = self.expression()
                self.take("]")
                node = Member(node, key)
            elif self.is_("("):
                offset = self.tok.offset
                self.i += 1
                args = []
                while not self.is_(")"):
                    args.append(self.expression())
                    if not self.is_(")"):
                        self.take(",")
                self.take(")")
                node = Call(node, tuple(args), offset)
            else:
                return node

    def primary(self) -> Any:
        tok = self.tok
        if tok.kind in ("num", "str"):
            self.i += 1
            return Lit(tok.value)
        if tok.kind == "ident":
            self.i += 1
            keywords = {"true": True, "false": False, "null": None}
            if tok.text in keywords:
                return Lit(keywords[tok.text])
            if tok.text == "undefined":
                return Name("undefined", tok.offset)
            if tok.text in ("function", "new", "var", "let", "const", "return", "for", "while", "delete", "typeof", "this", "eval"):
                raise TemplateSyntaxError(f"{tok.text!r} is not in the read-only subset", tok.offset)
            return Name(tok.text, tok.offset)
        if self.is_("("):
            self.i += 1
            node = self.expression()
            self.take(")")
            return node
        if self.is_("{"):
            return self.object_literal()
        raise TemplateSyntaxError(f"unexpected {tok.text or 'end of code'!r}", tok.offset)

    def object_literal(self) -> ObjectLit:
        self.take("{")
        items = []
        while not self.is_("}"):
            key = self.tok
            if key.kind not in ("ident", "str"):
                raise TemplateSyntaxError("object keys must be names or strings", key.offset)
            self.i += 1
            self.take(":")
            items.append((key.value if key.kind == "str" else key.text, self.expression()))
            if not self.is_("}"):
                self.take(",")
        self.take("}")
        return ObjectLit(tuple(items))


# --- template structure ---------------------------------------------------------------------------------

# The tag grammar; :func:`.scan.ejs_matches` finds the same tags in linear time.
_TAG = re.compile(r"<%([_=\-#%]?)([\s\S]*?)([_\-]?)%>")


def split_template(text: str) -> list[tuple[str, str, int]]:
    """(kind, content, offset) pieces: kind is ``text``, ``code``, ``out`` or ``comment``."""
    if len(text) > MAX_TEMPLATE:
        raise TemplateSyntaxError(f"template longer than {MAX_TEMPLATE} characters", 0)
    pieces: list[tuple[str, str, int]] = []
    pos = 0
    truncate = False
    for start, end, opener, body_start, body_end, closer in ejs_matches(text, "_=-#%"):
        literal = text[pos:start]
        body = text[body_start:body_end]
        if truncate:
            literal = re.sub(r"^[ \t]*\r?\n?", "", literal, count=1)
        if opener == "_":
            # ``[ \t]*$`` without its quadratic retries: ``$`` also matches before a final break.
            literal = literal[:-1].rstrip(" \t") + "\n" if literal.endswith("\n") else literal.rstrip(" \t")
        if opener == "%":
            pieces.append(("text", literal + "<%" + body + closer + "%>", pos))
            pos, truncate = end, False
            continue
        if literal:
            pieces.append(("text", literal, pos))
        kind = {"=": "out", "-": "out", "#": "comment"}.get(opener, "code")
        pieces.append((kind, body, start + 2 + len(opener)))
        truncate = closer in ("_", "-")
        pos = end
    tail = text[pos:]
    if truncate:
        tail = re.sub(r"^[ \t]*\r?\n?", "", tail, count=1)
    if "<%" in tail:
        raise TemplateSyntaxError("unterminated '<%' tag", pos + tail.index("<%"))
    if tail:
        pieces.append(("text", tail, pos))
    return pieces


def parse_template(text: str) -> list:
    """The template as a tree of :class:`Text`, :class:`Output` and :class:`If` nodes."""
    root: list = []
    stack: list[tuple[If, list]] = []  # open if-statements and the body being filled
    body = root
    for kind, content, offset in split_template(text):
        if kind == "text":
            body.append(Text(content))
        elif kind == "out":
            parser = ExprParser(tokenize(content, offset))
            expr = parser.expression()
            if parser.tok.kind == "punct" and parser.tok.text == ";":
                parser.i += 1
            if parser.tok.kind != "end":
                raise TemplateSyntaxError(f"unexpected {parser.tok.text!r} in output tag", parser.tok.offset)
            body.append(Output(expr, offset))
        elif kind == "code":
            body = _statements(tokenize(content, offset), stack, root, body)
    if stack:
        raise TemplateSyntaxError("an if-block is never closed with '}'", len(text))
    return root


def _statements(toks: list[Tok], stack: list[tuple[If, list]], root: list, body: list) -> list:
    parser = ExprParser(toks)
    while parser.tok.kind != "end":
        if parser.is_(";"):
            parser.i += 1
        elif parser.is_("if"):
            parser.i += 1
            parser.take("(")
            cond = parser.expression()
            parser.take(")")
            parser.take("{")
            node = If([(cond, [])])
            body.append(node)
            if len(stack) >= MAX_NESTING:
                raise TemplateSyntaxError("if-blocks nest too deeply", parser.tok.offset)
            stack.append((node, body))
            body = node.branches[-1][1]
        elif parser.is_("}"):
            offset = parser.tok.offset
            parser.i += 1
            if not stack:
                raise TemplateSyntaxError("'}' without an open if-block", offset)
            node, outer = stack[-1]
            if parser.is_("else"):
                parser.i += 1
                if node.otherwise is not None:
                    raise TemplateSyntaxError("'else' after 'else'", parser.tok.offset)
                if parser.is_("if"):
                    parser.i += 1
                    parser.take("(")
                    cond = parser.expression()
                    parser.take(")")
                    parser.take("{")
                    node.branches.append((cond, []))
                    body = node.branches[-1][1]
                else:
                    parser.take("{")
                    node.otherwise = []
                    body = node.otherwise
            else:
                stack.pop()
                body = outer
        elif parser.is_("print"):
            offset = parser.tok.offset
            parser.i += 1
            parser.take("(")
            expr = parser.expression()
            parser.take(")")
            body.append(Output(expr, offset))
        else:
            offset = parser.tok.offset
            start = parser.tok.text
            try:
                expr = parser.expression()
            except TemplateSyntaxError:
                expr = None
            callee = expr.callee if isinstance(expr, Call) else None
            name = (
                callee.name
                if isinstance(callee, Name)
                else callee.key.value
                if isinstance(callee, Member) and isinstance(callee.key, Lit)
                else None
            )
            if isinstance(name, str) and WRITE_CALL.search(name):
                raise TemplateSyntaxError(f"{name}(…) writes state and is never executed", offset, "mvu.template.write_forbidden")
            raise TemplateSyntaxError(f"statement starting with {start!r} is not in the read-only subset", offset)
    return body
