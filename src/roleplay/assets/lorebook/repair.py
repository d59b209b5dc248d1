"""What a JSON repair lost from a lorebook file, in lorebook terms.

``json_repair`` only runs when the user asked for it (``rp import --repair``), and a repaired book
is then imported as repaired. It completes a truncated file by closing whatever was open and drops
text it cannot place, so the user must be told what did not survive, in terms of the book rather
than of JSON syntax:

* **truncation**: the file ends inside an unfinished string or structure. Everything the original
  had after that point is gone (the count of missing entries cannot be known), the value being
  written at the cut is cut short, and the entry open at the cut is incomplete: its missing fields
  take SillyTavern's defaults on import. The open containers at the cut are the leading part of the
  repaired value's *last path* (last key or index at every level), because the repair closes them
  in place; so the incomplete entry and the cut value are named by JSON Pointers.
* **dropped text**: a complete string of the source that appears nowhere in the repaired value
  (neither as a key or value nor inside one, since a repair may merge strings).

One repair artefact is undone: a file cut right after an entry's key (``"5":``) comes back with
an empty string for that entry, which no importer accepts; that stub held nothing from the file,
so it is left out (and said so) rather than failing the import the user asked for.

Pure: the text and the repaired value in, the value to import and ``Problem`` items out.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from roleplay.assets.validation import replace_lone_surrogates
from roleplay.errors import Problem, pointer_from_parts

# A complete double-quoted string, a quote that never closes (the text ends inside that string), a
# bracket or a separator. Unrolled-loop string pattern: linear, no backtracking.
_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|"|[\[\]{}:,]', re.S)
_ESCAPED = re.compile(r"\\(.)", re.S)
MAX_DROPPED_REPORTED = 20


def repair_losses(text: str, repaired: Any) -> tuple[Any, list[Problem]]:
    """(the value to import, problems describing what the repair of ``text`` into ``repaired``
    lost); no problems when nothing was lost (the repair only fixed syntax)."""
    problems: list[Problem] = []
    stack, open_value, literals = _scan(text)
    dropped = _dropped(literals, repaired)
    if stack or open_value is not None:
        repaired, problem = _truncation(text, repaired, len(stack), open_value)
        problems.append(problem)
    return repaired, problems + dropped


def _scan(text: str) -> tuple[list[str], bool | None, list[tuple[int, str]]]:
    """(brackets open at the end, whether the text ends inside a string *value* (False: inside a
    key; None: not inside a string), complete string literals)."""
    stack: list[str] = []
    literals: list[tuple[int, str]] = []
    previous = ""
    for m in _TOKEN.finditer(text):
        token = m.group()
        if token == '"':
            in_array = bool(stack) and stack[-1] == "["
            return stack, previous == ":" or (previous in "[," and in_array), literals
        if token in "[{":
            stack.append(token)
        elif token in "]}":
            if stack:
                stack.pop()
        elif token not in ":,":
            literals.append((m.start(), token))
            token = '"'
        previous = token
    return stack, None, literals


def _last_path(value: Any) -> list[Any]:
    path: list[Any] = []
    while isinstance(value, (Mapping, list)) and value:
        key = next(reversed(value)) if isinstance(value, Mapping) else len(value) - 1
        path.append(key)
        value = value[key]
    return path


def _entries(book: Any) -> tuple[list[Any], Any]:
    """(path of the entry collection, the collection) of a world-info or character_book value."""
    for path in (["entries"], ["data", "entries"], ["character_book", "entries"], ["data", "character_book", "entries"]):
        node = book
        for part in path:
            node = node.get(part) if isinstance(node, Mapping) else None
        if isinstance(node, (Mapping, list)):
            return path, node
    return [], None


def _truncation(text: str, repaired: Any, depth: int, open_value: bool | None) -> tuple[Any, Problem]:
    end = len(text.rstrip())
    last = _last_path(repaired)
    leaf = _at(repaired, last) if last else None
    entries_path, entries = _entries(repaired)
    # Containers open at the cut: the root, then the first ``depth - 1`` steps of the last path.
    open_parts = last[: max(depth - 1, 0)]
    in_entries = entries is not None and open_parts[: len(entries_path)] == entries_path
    details: dict[str, Any] = {"fileChars": len(text)}
    parts = [f"the file ends at character {end} of {len(text)}"]
    entry_pointer = None
    if in_entries and len(open_parts) > len(entries_path):
        entry_pointer = pointer_from_parts(open_parts[: len(entries_path) + 1])
        details["incompleteEntry"] = entry_pointer
        title = _title(entries[open_parts[len(entries_path)]])
        parts[0] += f", in the middle of entry {entry_pointer}" + (f" ({title!r})" if title else "")
        if title:
            details["incompleteEntryTitle"] = title
    elif in_entries:
        parts[0] += ", between two entries"
        stub = last[len(entries_path)] if len(last) > len(entries_path) else None
        if stub is not None and not isinstance(entries[stub], (Mapping, list)):
            repaired, entries = _without(repaired, entries_path, stub)
            parts.append(f"entry {pointer_from_parts([*entries_path, stub])} had only its key before the cut and was left out")
            details["droppedStub"] = pointer_from_parts([*entries_path, stub])
    if open_value and isinstance(leaf, str):
        details["cutValue"], details["cutValueKeptChars"] = pointer_from_parts(last), len(leaf)
        parts.append(f"the text of {pointer_from_parts(last)} is cut short after {len(leaf)} characters")
    elif open_value is False:
        parts.append("a field name was cut, and the field is lost")
    values = entries.values() if isinstance(entries, Mapping) else entries or []
    kept = sum(isinstance(e, Mapping) for e in values)
    details["entriesKept"] = kept
    parts.append(
        f"the repair kept {kept} entr{'y' if kept == 1 else 'ies'}"
        + (", the last one incomplete (its missing fields take the defaults)" if entry_pointer else "")
    )
    parts.append("whatever followed in the original file (further entries, the rest of the book) is lost")
    return repaired, Problem("lorebook.repair.truncated", "; ".join(parts), f"char:{end}", details)


def _title(entry: Any) -> str:
    """The entry's comment, else its first key: how the user recognises it."""
    if not isinstance(entry, Mapping):
        return ""
    comment = entry.get("comment")
    if isinstance(comment, str) and comment.strip():
        return comment.strip()[:80]
    keys = entry.get("key", entry.get("keys"))
    return keys[0][:80] if isinstance(keys, list) and keys and isinstance(keys[0], str) else ""


def _without(value: Any, path: list[Any], key: Any) -> tuple[Any, Any]:
    """A copy of ``value`` whose collection at ``path`` lacks ``key``: (new root, new collection)."""
    if not path:
        rest: dict[Any, Any] | list[Any]
        if isinstance(value, Mapping):
            rest = {k: v for k, v in value.items() if k != key}
        else:
            rest = [v for i, v in enumerate(value) if i != key]
        return rest, rest
    inner, collection = _without(value[path[0]], path[1:], key)
    return {**value, path[0]: inner}, collection


def _at(value: Any, path: list[Any]) -> Any:
    for part in path:
        value = value[part]
    return value


def _strings(value: Any) -> set[str]:
    out: set[str] = set()
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, str):
            out.add(node)
        elif isinstance(node, Mapping):
            out.update(k for k in node if isinstance(k, str))
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return out


def _dropped(literals: list[tuple[int, str]], repaired: Any) -> list[Problem]:
    kept = _strings(repaired)
    haystack: str | None = None
    problems: list[Problem] = []
    for offset, token in literals:
        try:
            decoded = json.loads(token, strict=False)  # raw control characters are kept as such
        except ValueError:  # a bad escape such as ``\'``: read it as the escaped character
            decoded = _ESCAPED.sub(r"\1", token[1:-1])
        decoded = replace_lone_surrogates(decoded)  # as the loader did to the repaired value
        if not decoded or decoded in kept:
            continue
        if haystack is None:
            haystack = "\x00".join(kept)
        if decoded in haystack:
            continue
        if len(problems) == MAX_DROPPED_REPORTED:
            problems.append(
                Problem(
                    "lorebook.repair.dropped",
                    f"more texts of the file were dropped by the repair; only the first {MAX_DROPPED_REPORTED} are listed",
                    f"char:{offset}",
                )
            )
            break
        shown = decoded if len(decoded) <= 80 else decoded[:79] + "…"
        problems.append(
            Problem(
                "lorebook.repair.dropped",
                f"the repair dropped the text {shown!r}",
                f"char:{offset}",
                {"text": shown, "chars": len(decoded)},
            )
        )
    return problems


__all__ = ["MAX_DROPPED_REPORTED", "repair_losses"]
