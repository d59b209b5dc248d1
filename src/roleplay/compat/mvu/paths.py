"""MVU paths → exact JSON Pointers.

Two dialects reach the adapter:

* **command paths** (``_.set('白娅.着装["上装"]', …)``): lodash property paths after MVU's
  ``pathFix`` (mvu.md §2.8). Dots separate keys; ``[…]`` holds an index or a key, quoted or not,
  spaces allowed; ``.[0]`` works like ``[0]``; quoted dot segments lose their quotes. MVU Zod also
  strips a leading ``stat_data.`` that models like to add. JSON Patch paths arrive as pointers in
  MVU's dialect: the leading ``/`` is optional.
* **semantic rule keys** (``着装.${上装|下装}``, ``${角色}.好感度``, ``物品栏.*``): the same
  separators plus alternatives (``A | B``, ``${A|B}``, ``${名称: A | B}``) and wildcards (``*``,
  ``${名称}``), parsed into :class:`Segment` patterns that :mod:`.rules` expands against the schema.

Both parsers are total: malformed input raises :class:`PathError` with a message, never guesses.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .scan import strip_quotes

MAX_PATH_CHARS = 1_000
_PREFIXES = ("stat_data.", "status_current_variables.")


class PathError(ValueError):
    pass


def _unquote(text: str) -> str:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'`":
        return text[1:-1].replace('\\"', '"').replace("\\'", "'")
    return text


def split_lodash(path: str) -> list[str]:
    """Tokens of a lodash path (``a.b[0]["c d"].e``); ``''`` is the root (no tokens)."""
    if len(path) > MAX_PATH_CHARS:
        raise PathError(f"path longer than {MAX_PATH_CHARS} characters")
    tokens: list[str] = []
    i, n = 0, len(path)
    current: list[str] = []
    after_bracket = False
    while i < n:
        ch = path[i]
        if ch == ".":
            if current:
                tokens.append(_unquote("".join(current)))
            elif not after_bracket:
                raise PathError("empty path segment (a leading or doubled '.')")
            if i == n - 1:
                raise PathError("a path may not end with '.'")
            current = []
            after_bracket = False
            i += 1
        elif ch == "[":
            if current:
                tokens.append(_unquote("".join(current)))
                current = []
            end = _close_bracket(path, i)
            inner = path[i + 1 : end].strip()
            if inner == "":
                raise PathError("empty [] in path")
            tokens.append(_unquote(inner))
            i = end + 1
            after_bracket = True
        elif ch in "\"'" and not current:
            end = path.find(ch, i + 1)
            if end == -1:
                raise PathError("unterminated quote in path")
            current = list(path[i + 1 : end])
            i = end + 1
        else:
            current.append(ch)
            after_bracket = False
            i += 1
    if current:
        tokens.append(_unquote("".join(current)))
    if any(t == "" for t in tokens):
        raise PathError("empty path segment")
    return tokens


def _close_bracket(path: str, start: int) -> int:
    i = start + 1
    quote = None
    while i < len(path):
        ch = path[i]
        if quote:
            if ch == "\\":
                i += 2
                continue
            if ch == quote:
                quote = None
        elif ch in "\"'":
            quote = ch
        elif ch == "]":
            return i
        i += 1
    raise PathError("unclosed '[' in path")


def command_tokens(raw: str) -> tuple[list[str], bool]:
    """Tokens of a command's path argument; the flag says a ``stat_data.`` prefix was stripped."""
    path = raw.strip()
    # MVU trims quotes and backslashes around the argument before pathFix.
    path = strip_quotes(path)
    stripped = False
    for prefix in _PREFIXES:
        if path.startswith(prefix):
            path = path[len(prefix) :]
            stripped = True
    if path in ("stat_data", "status_current_variables"):
        return [], True
    return split_lodash(path), stripped


def patch_tokens(pointer: str) -> list[str]:
    """Tokens of a JSON Patch path in MVU's dialect (leading ``/`` optional, ``~`` escapes kept
    as RFC 6901 since MVU's current code decodes them)."""
    if not isinstance(pointer, str):
        raise PathError("a JSON Patch path must be a string")
    if len(pointer) > MAX_PATH_CHARS:
        raise PathError(f"path longer than {MAX_PATH_CHARS} characters")
    body = pointer.removeprefix("/")
    if body == "":
        return []
    return [t.replace("~1", "/").replace("~0", "~") for t in body.split("/")]


# --- semantic rule keys ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Segment:
    """``kind``: ``key`` (one name), ``any`` (listed alternatives) or ``wild`` (every member)."""

    kind: str
    names: tuple[str, ...] = ()
    label: str = ""

    @property
    def literal(self) -> bool:
        return self.kind == "key"


def _split_rule_key(key: str) -> list[str]:
    parts: list[str] = []
    current: list[str] = []
    depth_brace = 0
    i = 0
    while i < len(key):
        ch = key[i]
        if key.startswith("${", i):
            depth_brace += 1
            current.append("${")
            i += 2
            continue
        if ch == "}" and depth_brace:
            depth_brace -= 1
        if ch == "[" and not depth_brace:
            if current:
                parts.append("".join(current))
                current = []
            end = _close_bracket(key, i)
            parts.append("[" + key[i + 1 : end] + "]")
            i = end + 1
            continue
        if ch == "." and not depth_brace:
            if current:
                parts.append("".join(current))
            current = []
            i += 1
            continue
        current.append(ch)
        i += 1
    if depth_brace:
        raise PathError("unclosed '${' in rule path")
    if current:
        parts.append("".join(current))
    return parts


def _names(text: str) -> tuple[str, ...]:
    names = tuple(_unquote(n) for n in re.split(r"[|｜]", text))
    if any(n == "" for n in names):
        raise PathError("empty alternative in rule path")
    return names


def rule_segments(key: str) -> list[Segment]:
    """Patterns of a ``变量更新规则`` key (a dotted relative path with placeholders)."""
    if not isinstance(key, str) or not key.strip():
        raise PathError("empty rule path")
    segments: list[Segment] = []
    for raw in _split_rule_key(key.strip()):
        part = raw.strip()
        if part.startswith("[") and part.endswith("]"):
            part = part[1:-1].strip()
            if part in ("*", ""):
                segments.append(Segment("wild", label="*"))
                continue
        m = re.fullmatch(r"\$\{\s*([^{}]*?)\s*\}", part)
        if m:
            inner = m.group(1)
            label, sep, alternatives = inner.partition(":")
            if not sep:
                label, sep, alternatives = inner.partition("：")
            if sep:
                segments.append(Segment("any", _names(alternatives), label.strip()))
            elif re.search(r"[|｜]", inner):
                segments.append(Segment("any", _names(inner), ""))
            elif inner.strip():
                segments.append(Segment("wild", label=inner.strip()))
            else:
                raise PathError("empty ${} in rule path")
            continue
        if "${" in part:
            raise PathError(f"placeholder mixed with text in segment {part!r}")
        if part == "*":
            segments.append(Segment("wild", label="*"))
        elif re.search(r"[|｜]", part):
            segments.append(Segment("any", _names(part), ""))
        else:
            segments.append(Segment("key", (_unquote(part),)))
    return segments
