"""Session-local JSON Pointers (RFC 6901) over plain JSON values.

State paths such as ``/characters/李钰/好感度`` are parsed here once, strictly: ``jsonpointer``
accepts ``-`` and leading-zero indices in places where State must refuse them, and it raises
several exception types, so the state domain keeps its own small, total implementation.
"""

from __future__ import annotations

import re
from typing import Any, Iterable

from roleplay.errors import Problem

_INDEX = re.compile(r"(?:0|[1-9][0-9]*)\Z")


class PointerError(ValueError):
    """A pointer string that is not RFC 6901 syntax (never a missing value)."""


MISSING: Any = object()  # sentinel: "no value here", distinct from JSON null


def parse_pointer(pointer: Any) -> tuple[str, ...]:
    """Split a pointer into unescaped reference tokens; ``""`` is the root (no tokens)."""
    if not isinstance(pointer, str):
        raise PointerError("a JSON Pointer must be a string")
    if pointer == "":
        return ()
    if not pointer.startswith("/"):
        raise PointerError("a JSON Pointer must be empty or start with '/'")
    parts = pointer[1:].split("/")
    for part in parts:
        # '~' may only introduce '~0' or '~1'; anything else is malformed per RFC 6901 §3.
        if re.search(r"~(?![01])", part):
            raise PointerError(f"invalid escape in reference token {part!r}")
    return tuple(p.replace("~1", "/").replace("~0", "~") for p in parts)


def format_pointer(parts: tuple[str, ...] | list[Any]) -> str:
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def is_array_index(token: str) -> bool:
    return bool(_INDEX.match(token))


def lookup(value: Any, parts: tuple[str, ...]) -> Any:
    """The value at ``parts``, or ``MISSING`` (a scalar on the way counts as missing)."""
    current = value
    for token in parts:
        if isinstance(current, dict):
            if token not in current:
                return MISSING
            current = current[token]
        elif isinstance(current, list):
            if not is_array_index(token):
                return MISSING
            index = int(token)
            if index >= len(current):
                return MISSING
            current = current[index]
        else:
            return MISSING
    return current


def is_prefix(ancestor: tuple[str, ...], descendant: tuple[str, ...]) -> bool:
    """True when ``ancestor`` equals ``descendant`` or is one of its ancestors."""
    return len(ancestor) <= len(descendant) and descendant[: len(ancestor)] == ancestor


def related(a: tuple[str, ...], b: tuple[str, ...]) -> bool:
    """Same path, or one is an ancestor of the other: such changes overlap and may not coexist."""
    return is_prefix(a, b) or is_prefix(b, a)


def replace_at(value: Any, parts: tuple[str, ...], new: Any) -> Any:
    """A copy of ``value`` with ``parts`` set to ``new``, copying only the containers on the path.

    Path copying keeps the input untouched (atomic commits need the old value intact until the
    whole update passed) at a cost proportional to depth, not to the size of the state.
    The caller has checked that every container on the path exists.
    """
    if not parts:
        return new
    head, rest = parts[0], parts[1:]
    if isinstance(value, dict):
        copy = dict(value)
        copy[head] = replace_at(value[head], rest, new) if rest else new
        return copy
    copy_list = list(value)
    index = int(head)
    copy_list[index] = replace_at(value[index], rest, new) if rest else new
    return copy_list


def remove_at(value: Any, parts: tuple[str, ...]) -> Any:
    """A copy of ``value`` without the member at ``parts`` (non-empty, existing)."""
    head, rest = parts[0], parts[1:]
    if rest:
        if isinstance(value, dict):
            copy = dict(value)
            copy[head] = remove_at(value[head], rest)
            return copy
        copy_list = list(value)
        copy_list[int(head)] = remove_at(value[int(head)], rest)
        return copy_list
    if isinstance(value, dict):
        copy = dict(value)
        del copy[head]
        return copy
    copy_list = list(value)
    del copy_list[int(head)]
    return copy_list


def closed_object_problems(
    obj: dict[str, Any], required: Iterable[str], optional: Iterable[str], *, code: str, unknown: str, needs: str, base: str
) -> list[Problem]:
    """Unknown keys (sorted) then missing required keys of a closed object, as
    ``<code>.field_unknown`` / ``<code>.field_missing`` problems under ``base``."""
    required = tuple(required)
    allowed = set(required) | set(optional)
    problems = [
        Problem(f"{code}.field_unknown", f"unknown {unknown} field {key!r}", f"{base}/{key}")
        for key in sorted(obj, key=str)
        if key not in allowed
    ]
    problems += [Problem(f"{code}.field_missing", f"{needs} {key!r}", f"{base}/{key}") for key in required if key not in obj]
    return problems
