"""Bounded, lenient JSON loading for community files.

Community cards are hand-edited: BOMs, trailing commas, comments and unquoted keys all occur. We
try strict ``json`` first (fast, C), then ``json5`` (a superset that still means what the author
wrote), and only then ``json_repair``, which *guesses*; a repaired file is accepted with a warning
so the user knows the result may differ from what they intended.

Every path is bounded: byte size, nesting depth (deep nesting would otherwise surface as a
``RecursionError`` somewhere far from the input), and the slower lenient parsers only run on
modest inputs because they are pure Python.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import json5
import json_repair

from roleplay.errors import Problem, RpError, pointer_from_parts

MAX_JSON_BYTES = 32 * 1024 * 1024
MAX_LENIENT_BYTES = 4 * 1024 * 1024  # json5 / json_repair are pure Python: keep them cheap
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


def check_json_value(value: Any, *, max_depth: int = MAX_JSON_DEPTH, code_prefix: str = "card.json") -> None:
    """Reject values nested deeper than ``max_depth`` or holding NaN/Infinity, without recursion.

    NaN/Infinity are legal for ``json``/``json5`` but not JSON; they would break canonical hashing
    later, so they are refused here with the path to the offending number.
    """
    stack: list[tuple[Any, int, tuple[Any, ...]]] = [(value, 1, ())]
    while stack:
        node, depth, path = stack.pop()
        if isinstance(node, dict):
            if depth > max_depth:
                raise _too_deep(code_prefix, max_depth, path)
            stack.extend((v, depth + 1, (*path, k)) for k, v in node.items())
        elif isinstance(node, list):
            if depth > max_depth:
                raise _too_deep(code_prefix, max_depth, path)
            stack.extend((v, depth + 1, (*path, i)) for i, v in enumerate(node))
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


def loads_lenient(
    text: str, *, code_prefix: str = "card.json", allow_repair: bool = True
) -> tuple[Any, list[Problem]]:
    """Parse ``text`` as JSON, falling back to JSON5 and then to ``json_repair`` (with a warning)."""
    try:
        value = json.loads(text)
    except RecursionError:
        raise _too_deep(code_prefix, MAX_JSON_DEPTH) from None
    except ValueError as exc:
        strict_error = exc
    else:
        check_json_value(value, code_prefix=code_prefix)
        return value, []

    position = getattr(strict_error, "pos", None)
    invalid = RpError(
        f"{code_prefix}.invalid",
        f"not valid JSON: {strict_error}",
        pointer=None if position is None else f"char:{position}",
    )
    if len(text) > MAX_LENIENT_BYTES:
        raise invalid
    if _bracket_depth(text) > MAX_JSON_DEPTH:
        raise _too_deep(code_prefix, MAX_JSON_DEPTH)

    problems: list[Problem] = []
    try:
        value = json5.loads(text)
        problems.append(
            Problem(
                f"{code_prefix}.lenient",
                "file is not strict JSON (comments, trailing commas or similar); read it as JSON5",
            )
        )
    except RecursionError:
        raise _too_deep(code_prefix, MAX_JSON_DEPTH) from None
    except Exception:  # json5 raises ValueError and assorted internal errors on garbage
        if not allow_repair:
            raise invalid from None
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
                f"file is broken JSON ({strict_error}); it was repaired automatically, "
                "so check the imported fields",
                pointer=None if position is None else f"char:{position}",
            )
        )
    check_json_value(value, code_prefix=code_prefix)
    return value, problems


def load_json_bytes(
    data: bytes, *, code_prefix: str = "card.json", allow_repair: bool = True
) -> tuple[Any, list[Problem]]:
    text = decode_json_text(data, code_prefix=code_prefix)
    return loads_lenient(text, code_prefix=code_prefix, allow_repair=allow_repair)
