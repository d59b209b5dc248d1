"""Bounded, lenient JSON loading for community files: the one decode path of card, lorebook and
preset imports.

Community cards are hand-edited: BOMs, trailing commas, comments and unquoted keys all occur. We
try strict ``json`` first (fast, C). A strict failure is then diagnosed before anything slower
runs: a file that ends early is reported as truncated, and trailing commas are removed at the
positions ``json`` reports and the text parsed strictly again, so a multi-megabyte card with one
stray comma costs two C parses instead of a pure-Python one. Comments and further trailing commas
are stripped outside strings by one regular-expression pass. Only small files go on to ``json5``
(a superset that still means what the author wrote, but pure Python: about 5 s per 256 KB). None
of these steps changes a value.

``json_repair`` *guesses* (it completes a truncated file, drops what it cannot place), so it only
runs when the caller passes ``allow_repair`` because the user asked for it; the result carries a
``repaired`` warning.

Every path is bounded: byte size, nesting depth (deep nesting would otherwise surface as a
``RecursionError`` somewhere far from the input), and the slow parsers' input size. Lone UTF-16
surrogates (``"\\ud800"`` escapes) can be neither stored nor printed; each becomes U+FFFD, which is
what any UTF-8 writer does with half a pair, and the file gets a ``lone_surrogate`` warning that
points at the first one.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import json5
import json_repair

from roleplay.errors import Problem, RpError, pointer_from_parts

from ..validation import has_lone_surrogate, iter_strings, replace_lone_surrogates

MAX_JSON_BYTES = 32 * 1024 * 1024
MAX_JSON5_CHARS = 64 * 1024  # json5 is pure Python and slow (about 1 s per 64 KB)
MAX_REPAIR_CHARS = 4 * 1024 * 1024  # json_repair, only on request
MAX_COMMA_FIXES = 16  # trailing commas fixed one strict re-parse each; more go to the regex pass
MAX_JSON_DEPTH = 100

_BOMS = (
    (b"\xef\xbb\xbf", "utf-8"),
    (b"\xff\xfe", "utf-16-le"),
    (b"\xfe\xff", "utf-16-be"),
)


def decode_json_text(data: bytes, *, code_prefix: str = "card.json") -> str:
    """Bytes to text: honour a BOM, otherwise require strict UTF-8 (never guess a legacy codepage)."""
    if len(data) > MAX_JSON_BYTES:
        raise RpError(
            f"{code_prefix}.too_large",
            f"JSON is {len(data)} bytes; the limit is {MAX_JSON_BYTES}",
            details={"size": len(data), "limit": MAX_JSON_BYTES},
        )
    encoding = "utf-8"
    for bom, enc in _BOMS:
        if data.startswith(bom):
            data, encoding = data[len(bom) :], enc
            break
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as exc:
        raise RpError(
            f"{code_prefix}.encoding",
            f"JSON text is not valid {encoding.upper()} (byte {exc.start})",
            pointer=f"byte:{exc.start}",
        ) from None


_SAFE = frozenset({str, int, bool, type(None)})  # leaves that can never fail the check


def check_json_value(value: Any, *, max_depth: int = MAX_JSON_DEPTH, code_prefix: str = "card.json") -> None:
    """Reject values nested deeper than ``max_depth`` or holding NaN/Infinity, without recursion.

    NaN/Infinity are legal for ``json``/``json5`` but not JSON; they would break canonical hashing
    later, so they are refused here with the path to the offending number.
    """
    stack: list[tuple[Any, int, tuple[Any, ...]]] = [(value, 1, ())]
    push = stack.append
    while stack:
        node, depth, path = stack.pop()
        if isinstance(node, dict):
            if depth > max_depth:
                raise _too_deep(code_prefix, max_depth, path)
            # Only containers and floats can fail: pushing every string of a big book costs more
            # than the check itself.
            for k, v in node.items():
                if type(v) not in _SAFE:
                    push((v, depth + 1, (*path, k)))
        elif isinstance(node, list):
            if depth > max_depth:
                raise _too_deep(code_prefix, max_depth, path)
            for i, v in enumerate(node):
                if type(v) not in _SAFE:
                    push((v, depth + 1, (*path, i)))
        elif isinstance(node, float) and not math.isfinite(node):
            raise RpError(
                f"{code_prefix}.non_finite_number",
                "JSON contains NaN or Infinity, which JSON does not allow",
                pointer=pointer_from_parts(list(path)),
            )


def _too_deep(code_prefix: str, max_depth: int, path: tuple[Any, ...] = ()) -> RpError:
    return RpError(
        f"{code_prefix}.too_deep",
        f"JSON is nested more than {max_depth} levels deep",
        pointer=pointer_from_parts(list(path)) if path else None,
        details={"limit": max_depth},
    )


_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"' + r"|'(?:[^'\\]|\\.)*'", re.S)


def _bracket_depth(text: str) -> int:
    """Approximate nesting depth ignoring brackets inside strings; used before pure-Python parsers."""
    depth = best = 0
    for ch in re.findall(r"[\[\]{}]", _STRINGS.sub("", text)):
        depth = depth + 1 if ch in "[{" else max(depth - 1, 0)
        best = max(best, depth)
    return best


# A double-quoted string (kept), or what a strict parser refuses outside strings: a comma before a
# closing bracket, a // or /* */ comment. Unrolled-loop string pattern: linear, no backtracking.
_LENIENT_TOKENS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|,(?=\s*[\]}])|//[^\n]*|/\*.*?\*/', re.S)
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _strip_lenient_tokens(text: str) -> str:
    return _LENIENT_TOKENS.sub(lambda m: m.group() if m.group().startswith('"') else "", text)


def _strict(text: str, code_prefix: str) -> Any:
    try:
        return json.loads(text)
    except RecursionError:
        raise _too_deep(code_prefix, MAX_JSON_DEPTH) from None
    except json.JSONDecodeError:
        raise
    except ValueError as exc:  # Python's cap on integer digits (4300): valid JSON we will not read
        raise RpError(f"{code_prefix}.number_too_long", f"JSON holds a number we cannot read: {exc}") from None


def _is_truncated(text: str, exc: json.JSONDecodeError) -> bool:
    return exc.pos >= len(text.rstrip()) or exc.msg.startswith("Unterminated string")


def _trailing_comma(text: str, exc: json.JSONDecodeError) -> int | None:
    """Offset of the comma ``json`` choked on when the error is a trailing comma, else None."""
    if exc.pos >= len(text) or text[exc.pos] not in "]}":
        return None
    before = len(text[: exc.pos].rstrip())
    return before - 1 if before and text[before - 1] == "," else None


def _without_trailing_commas(text: str, code_prefix: str) -> Any:
    """Strict parse after removing up to ``MAX_COMMA_FIXES`` trailing commas; raises ValueError."""
    for _ in range(MAX_COMMA_FIXES):
        try:
            return _strict(text, code_prefix)
        except json.JSONDecodeError as exc:
            comma = _trailing_comma(text, exc)
            if comma is None:
                raise
            text = text[:comma] + text[comma + 1 :]
    return _strict(text, code_prefix)


def _scrub_surrogates(value: Any, code_prefix: str) -> tuple[Any, list[Problem]]:
    """Replace lone surrogates in strings and keys by U+FFFD; one warning with the first pointer."""
    found = [path for path, text in iter_strings(value) if has_lone_surrogate(text)]
    if not found:
        return value, []
    # The pointer must be printable too, so its own surrogates are replaced as well.
    first = pointer_from_parts([replace_lone_surrogates(p) if isinstance(p, str) else p for p in found[0]])

    def fix(node: Any) -> Any:
        if isinstance(node, str):
            return replace_lone_surrogates(node)
        if isinstance(node, dict):
            fixed = {fix(k): fix(v) for k, v in node.items()}
            if len(fixed) != len(node):
                raise RpError(
                    f"{code_prefix}.lone_surrogate",
                    "two keys differ only in lone surrogates, so replacing those would merge them",
                    pointer=first,
                )
            return fixed
        if isinstance(node, list):
            return [fix(v) for v in node]
        return node

    # Depth was checked before, so this recursion is bounded by MAX_JSON_DEPTH.
    message = f"{len(found)} text(s) hold lone UTF-16 surrogates (half of an emoji or other character); each was replaced by U+FFFD"
    problem = Problem(f"{code_prefix}.lone_surrogate", message, first, {"count": len(found)})
    return fix(value), [problem]


def loads_lenient(text: str, *, code_prefix: str = "card.json", allow_repair: bool = False) -> tuple[Any, list[Problem]]:
    """Parse ``text`` as JSON, tolerating what still means what the author wrote; ``json_repair``
    (with a warning) only when ``allow_repair``."""
    problems: list[Problem] = []
    try:
        value = _strict(text, code_prefix)
    except json.JSONDecodeError as exc:
        value = _lenient(text, exc, code_prefix, allow_repair, problems)
    check_json_value(value, code_prefix=code_prefix)
    if _SURROGATE_ESCAPE.search(text):
        value, found = _scrub_surrogates(value, code_prefix)
        problems += found
    return value, problems


def _lenient(text: str, strict_error: json.JSONDecodeError, code_prefix: str, allow_repair: bool, problems: list[Problem]) -> Any:
    where = f"char:{strict_error.pos}"
    lenient = Problem(
        f"{code_prefix}.lenient",
        "file is not strict JSON (comments, trailing commas or similar); it was read leniently, with every value kept",
        pointer=where,
    )
    if not text.strip():
        raise RpError(f"{code_prefix}.empty", "the file holds no JSON (it is empty or blank)")
    truncated = _is_truncated(text, strict_error)
    if not truncated:
        for attempt in (lambda: _without_trailing_commas(text, code_prefix), lambda: _strict(_strip_lenient_tokens(text), code_prefix)):
            try:
                value = attempt()
            except ValueError:
                continue
            problems.append(lenient)
            return value
        if len(text) <= MAX_JSON5_CHARS and _bracket_depth(text) <= MAX_JSON_DEPTH:
            try:
                value = json5.loads(text)
            except RecursionError:
                raise _too_deep(code_prefix, MAX_JSON_DEPTH) from None
            except Exception:  # json5 raises ValueError and assorted internal errors on garbage
                pass
            else:
                problems.append(lenient)
                return value
    if allow_repair:
        return _repair(text, strict_error, code_prefix, problems)
    if truncated:
        raise RpError(
            f"{code_prefix}.truncated",
            f"the JSON ends before it is complete ({strict_error.msg} at "
            f"char {strict_error.pos} of {len(text)}): the file looks truncated; importing it with "
            "repair would complete it by guessing",
            pointer=where,
            details={"length": len(text), "position": strict_error.pos},
        )
    hint = (
        ""
        if len(text) <= MAX_JSON5_CHARS
        else (f"; at {len(text)} characters it is too large for the JSON5 reader (limit {MAX_JSON5_CHARS})")
    )
    raise RpError(
        f"{code_prefix}.invalid",
        f"not valid JSON: {strict_error}{hint}",
        pointer=where,
        details={"line": strict_error.lineno, "column": strict_error.colno},
    )


def _repair(text: str, strict_error: json.JSONDecodeError, code_prefix: str, problems: list[Problem]) -> Any:
    where = f"char:{strict_error.pos}"
    invalid = RpError(f"{code_prefix}.invalid", f"not valid JSON, and repair could not fix it: {strict_error}", pointer=where)
    if len(text) > MAX_REPAIR_CHARS:
        raise RpError(
            f"{code_prefix}.invalid",
            f"not valid JSON: {strict_error}; at {len(text)} characters it is too large to repair (limit {MAX_REPAIR_CHARS})",
            pointer=where,
        )
    if _bracket_depth(text) > MAX_JSON_DEPTH:
        raise _too_deep(code_prefix, MAX_JSON_DEPTH)
    try:
        value = json_repair.loads(text)
    except RecursionError:
        raise _too_deep(code_prefix, MAX_JSON_DEPTH) from None
    except Exception:  # json_repair has no documented exception contract
        raise invalid from None
    if not isinstance(value, (dict, list)) or not value:
        raise invalid
    problems.append(
        Problem(
            f"{code_prefix}.repaired",
            f"file is broken JSON ({strict_error}); it was repaired on request, so check the imported fields",
            pointer=where,
        )
    )
    return value


def load_json_bytes(data: bytes, *, code_prefix: str = "card.json", allow_repair: bool = False) -> tuple[Any, list[Problem]]:
    text = decode_json_text(data, code_prefix=code_prefix)
    return loads_lenient(text, code_prefix=code_prefix, allow_repair=allow_repair)
