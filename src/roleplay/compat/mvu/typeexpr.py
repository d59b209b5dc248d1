"""The TypeScript-like ``type:`` strings of ``变量更新规则`` → restricted schema.

These strings are prompt text for a model, never read by MVU code (mvu.md §2.12), so authors
write loose TypeScript: object types with ``//`` comments, optional members, index signatures,
``Record<string, T>`` (also lowercase), literal unions (sometimes unquoted), ``T[]``,
``Array<T>`` and ``null`` placeholders. A small tokenizer and recursive-descent parser turn the
safe subset into a schema; member comments become descriptions.

Anything else fails closed with :class:`TypeFailure`: zod source (``z.coerce.number()…``), object
unions, generics other than ``Record``/``Array``, a single unknown word such as
``object（readonly/derived）``. Guessing a structure would give the model a wrong contract.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

PRIMITIVES = {
    "string": {"type": "string"},
    "number": {"type": "number"},
    "integer": {"type": "integer"},
    "boolean": {"type": "boolean"},
    "bool": {"type": "boolean"},
    "null": {"type": "null"},
    "any": {},
    "unknown": {},
    "object": {"type": "object"},
}
MAX_TYPE_CHARS = 8_000
MAX_DEPTH = 24


class TypeFailure(Exception):
    def __init__(self, message: str, offset: int = 0) -> None:
        super().__init__(message)
        self.message = message
        self.offset = offset


@dataclass(frozen=True)
class Tok:
    kind: str  # str | num | ident | punct | nl | comment | end
    text: str
    offset: int
    value: Any = None


_IDENT = re.compile(r"[^\s{}\[\]()<>|:;,?'\"`/=&*]+")
_NUMBER = re.compile(r"-?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


def tokenize(text: str) -> list[Tok]:
    toks: list[Tok] = []
    i = 0
    n = len(text)
    while i < n:
        ch = text[i]
        if ch == "\n":
            toks.append(Tok("nl", ch, i))
            i += 1
        elif ch.isspace():
            i += 1
        elif text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end == -1 else end
            toks.append(Tok("comment", text[i + 2 : end].strip(), i))
            i = end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            if end == -1:
                raise TypeFailure("unterminated /* comment", i)
            body = re.sub(r"^\s*\*+ ?", "", text[i + 2 : end], flags=re.MULTILINE).strip()
            toks.append(Tok("comment", body, i))
            i = end + 2
        elif ch in "'\"`":
            j = i + 1
            out = []
            while j < n and text[j] != ch:
                if text[j] == "\\" and j + 1 < n:
                    j += 1
                out.append(text[j])
                j += 1
            if j >= n:
                raise TypeFailure("unterminated string literal", i)
            toks.append(Tok("str", text[i : j + 1], i, "".join(out)))
            i = j + 1
        elif ch in "{}[]()<>|:;,?":
            toks.append(Tok("punct", ch, i))
            i += 1
        else:
            m = _NUMBER.match(text, i)
            if m and (m.end() == n or not _IDENT.match(text[m.end()])):
                raw = m.group(0)
                toks.append(Tok("num", raw, i, float(raw) if any(c in raw for c in ".eE") else int(raw)))
                i = m.end()
                continue
            m = _IDENT.match(text, i)
            if not m:
                raise TypeFailure(f"unexpected character {ch!r}", i)
            toks.append(Tok("ident", m.group(0), i))
            i = m.end()
    toks.append(Tok("end", "", n))
    return toks


class _Parser:
    def __init__(self, text: str) -> None:
        self.toks = tokenize(text)
        self.i = 0
        self.warnings: list[str] = []
        self.depth = 0

    def peek(self, skip_nl: bool = True) -> Tok:
        j = self.i
        while skip_nl and self.toks[j].kind in ("nl", "comment"):
            j += 1
        return self.toks[j]

    def next(self) -> Tok:
        tok = self.peek()
        self.i = self.toks.index(tok, self.i)
        self.i += 1
        return tok

    def accept(self, text: str) -> bool:
        tok = self.peek()
        if tok.kind == "punct" and tok.text == text:
            self.next()
            return True
        return False

    def expect(self, text: str) -> None:
        tok = self.peek()
        if not (tok.kind == "punct" and tok.text == text):
            raise TypeFailure(f"expected {text!r}, found {tok.text or 'end of text'!r}", tok.offset)
        self.next()

    # type := '|'? alternative ('|' alternative)*
    def type(self) -> dict[str, Any]:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise TypeFailure("the type nests too deeply")
        self.accept("|")
        alternatives = [self.postfix()]
        while self.accept("|"):
            alternatives.append(self.postfix())
        self.depth -= 1
        return alternatives[0][1] if len(alternatives) == 1 and alternatives[0][0] != "word" else self.union(alternatives)

    def union(self, alternatives: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
        kinds = {kind for kind, _s in alternatives}
        if kinds == {"word"} and len(alternatives) == 1:
            raise TypeFailure(f"unknown type {alternatives[0][1]['const']!r}")
        if "word" in kinds:
            self.warnings.append("unquoted words in a union are read as string literals")
        literals = [s["const"] for kind, s in alternatives if kind in ("literal", "word")]
        others = [s for kind, s in alternatives if kind not in ("literal", "word")]
        types: list[str] = []
        for schema in others:
            if schema == {}:
                return {}
            if set(schema) != {"type"} or not isinstance(schema["type"], str) or schema["type"] in ("object", "array"):
                raise TypeFailure("a union of structured types (objects, arrays) cannot be represented")
            types.append(schema["type"])
        if not types:
            return {"enum": list(dict.fromkeys(literals))}
        literal_types = {_json_type(v) for v in literals}
        if types == ["null"]:
            return {"enum": [*dict.fromkeys(literals), None]} if literals else {"type": "null"}
        nonnull = [t for t in types if t != "null"]
        if literal_types - set(nonnull) - ({"number"} if "integer" in nonnull else set()):
            raise TypeFailure("a union mixing literals with a different type cannot be represented")
        return {"type": list(dict.fromkeys(types)) if len(set(types)) > 1 else types[0]}

    def postfix(self) -> tuple[str, dict[str, Any]]:
        kind, schema = self.primary()
        while self.peek().kind == "punct" and self.peek().text == "[" and self._empty_brackets():
            self.next()
            self.next()
            kind, schema = "array", {"type": "array", "items": schema}
        return kind, schema

    def _empty_brackets(self) -> bool:
        j = self.toks.index(self.peek(), self.i)
        return self.toks[j + 1].kind == "punct" and self.toks[j + 1].text == "]"

    def primary(self) -> tuple[str, dict[str, Any]]:
        tok = self.next()
        if tok.kind == "str":
            return "literal", {"const": tok.value}
        if tok.kind == "num":
            return "literal", {"const": tok.value}
        if tok.kind == "punct" and tok.text == "(":
            inner = self.type()
            self.expect(")")
            return "type", inner
        if tok.kind == "punct" and tok.text == "{":
            return "object", self.object_body()
        if tok.kind != "ident":
            raise TypeFailure(f"unexpected {tok.text or 'end of text'!r}", tok.offset)
        word = tok.text
        if word in ("true", "false"):
            return "literal", {"const": word == "true"}
        if word == "undefined":
            return "type", {"type": "null"}
        if word.startswith("z.") or word == "z":
            raise TypeFailure("zod source is code, not a type the adapter can read", tok.offset)
        if self.peek().kind == "punct" and self.peek().text == "<":
            return "type", self.generic(word, tok.offset)
        if word in PRIMITIVES:
            return "type", dict(PRIMITIVES[word])
        return "word", {"const": word}

    def generic(self, word: str, offset: int) -> dict[str, Any]:
        self.expect("<")
        args = [self.type()]
        while self.accept(","):
            args.append(self.type())
        self.expect(">")
        if word in ("Record", "record") and len(args) == 2:
            if word == "record":
                self.warnings.append("lowercase 'record<…>' read as Record<…>")
            key, value = args
            if key.get("type") == "string" and set(key) <= {"type", "description"}:
                return {"type": "object", "additionalProperties": value}
            names = key.get("enum") or ([key["const"]] if "const" in key else None)
            if names and all(isinstance(n, (str, int)) for n in names):
                keys = [str(n) for n in names]
                return {"type": "object", "properties": {k: value for k in keys}, "required": keys, "additionalProperties": False}
            raise TypeFailure("Record keys must be string or a union of literals", offset)
        if word == "Array" and len(args) == 1:
            return {"type": "array", "items": args[0]}
        raise TypeFailure(f"generic type {word}<…> is not supported", offset)

    def object_body(self) -> dict[str, Any]:
        properties: dict[str, Any] = {}
        required: list[str] = []
        extra: dict[str, Any] | bool = False
        last: dict[str, Any] | None = None
        while True:
            tok = self.toks[self.i]
            if tok.kind == "comment":
                # A comment after a member (same line or the next) documents it.
                if last is not None and tok.text and "description" not in last:
                    last["description"] = tok.text
                self.i += 1
                continue
            if tok.kind == "nl" or (tok.kind == "punct" and tok.text in ";,"):
                if tok.kind == "nl":
                    last = None
                self.i += 1
                continue
            if tok.kind == "punct" and tok.text == "}":
                self.i += 1
                break
            if tok.kind == "end":
                raise TypeFailure("unterminated object type: missing '}'", tok.offset)
            if tok.kind == "punct" and tok.text == "[":
                self.next()
                name = self.next()
                if name.kind not in ("ident", "str"):
                    raise TypeFailure("index signature needs a name", name.offset)
                self.expect(":")
                key_type = self.type()
                if key_type.get("type") not in ("string", "number"):
                    raise TypeFailure("index signatures must use string keys", name.offset)
                self.expect("]")
                self.expect(":")
                extra = self.type()
                extra = dict(extra)
                last = extra
                continue
            key_tok = self.next()
            if key_tok.kind not in ("ident", "str", "num"):
                raise TypeFailure(f"expected a member name, found {key_tok.text!r}", key_tok.offset)
            key = key_tok.value if key_tok.kind == "str" else key_tok.text
            optional = self.accept("?")
            self.expect(":")
            member = dict(self.type())
            properties[str(key)] = member
            if not optional:
                required.append(str(key))
            last = member
        out: dict[str, Any] = {"type": "object", "properties": properties, "required": required, "additionalProperties": extra}
        if not properties:
            del out["properties"], out["required"]
        return out


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    return "string"


def parse_type(text: str) -> tuple[dict[str, Any], list[str]]:
    """Schema for a ``type:`` string and warnings; raises :class:`TypeFailure`."""
    if not isinstance(text, str) or not text.strip():
        raise TypeFailure("empty type")
    if len(text) > MAX_TYPE_CHARS:
        raise TypeFailure(f"type text longer than {MAX_TYPE_CHARS} characters")
    if re.match(r"\s*z\s*\.", text):
        raise TypeFailure("zod source is code, not a type the adapter can read")
    parser = _Parser(text.strip())
    schema = parser.type()
    tail = parser.peek()
    if tail.kind != "end":
        raise TypeFailure(f"unexpected {tail.text!r} after the type", tail.offset)
    return schema, parser.warnings
