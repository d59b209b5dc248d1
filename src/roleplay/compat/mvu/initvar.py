"""InitVar: lorebook ``[initvar]`` entries and greeting ``<initvar>`` blocks → one initial value.

MVU's rules (mvu.md §2.2, §2.11), kept exactly:

* content is unwrapped from an ``<initvar>`` line wrapper, then from a code fence, then macros are
  expanded, then the parse chain runs (:mod:`.parsing`);
* within one lorebook, entries deep-merge in entry order and arrays *replace* (lodash
  ``mergeWith``); across lorebooks the merge is shallow and the earlier book wins each top-level
  key; books load global → character → additional;
* a greeting's ``<initvar>`` blocks deep-merge together and *replace* the character's InitVar;
  other books are merged in again afterwards, still earlier-wins at the top level.

Where MVU would skip a broken lorebook with a toast and carry on with what remains, we fail the
whole result: a state that silently misses part of its InitVar is the half-built namespace the
engine must never create. The caller then produces a disabled namespace with these diagnostics.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from roleplay.errors import Problem

from .detect import INITVAR_TAG_NAME as INITVAR_TAG
from .detect import is_initvar_entry
from .diagnostics import Loc, diag, has_errors, line_of
from .parsing import parse_data
from .scan import LineIndex, find_blocks
from .sources import Book, expand_macros, leftover_macros

# MVU's unwrapping regexes; :func:`_xml_wrapper` and :func:`_fence` compute the same spans linearly.
_XML_WRAPPER = re.compile(r".*<initvar>.*\n([\s\S]*)\n.*</initvar>.*", re.IGNORECASE)
_OPEN_TAG = re.compile(r"<initvar>", re.IGNORECASE)
_CLOSE_TAG = re.compile(r"</initvar>", re.IGNORECASE)
_ONE_LINE_WRAPPER = re.compile(r"^\s*<initvar>([\s\S]*?)</initvar>\s*$", re.IGNORECASE)
_FENCE = re.compile(r"```.*\n([\s\S]*)\n```")
BOOK_ORDER = {"global": 0, "character": 1, "additional": 2}


@dataclass
class InitVarResult:
    ok: bool
    value: dict[str, Any] = field(default_factory=dict)
    diagnostics: list[Problem] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)  # entry titles / greeting keys used
    lines: dict[str, tuple[Loc, int]] = field(default_factory=dict)  # pointer -> where it was written


def _xml_wrapper(content: str) -> tuple[int, int] | None:
    r"""The body span MVU's ``.*<initvar>.*\n([\s\S]*)\n.*</initvar>.*`` (``re.I``) would take.

    The leftmost match starts at the first line holding ``<initvar>`` that has a line holding
    ``</initvar>`` at least two lines below it; the greedy body runs to the *last* such line.
    Computed per line, because the regex itself retries ``.*`` at every offset of a long line.
    """
    lines = content.split("\n")
    closing = [i for i, line in enumerate(lines) if _CLOSE_TAG.search(line)]
    if not closing:
        return None
    last = closing[-1]
    offset = 0
    for i, line in enumerate(lines):
        if i > last - 2:
            return None
        if _OPEN_TAG.search(line):
            start = offset + len(line) + 1
            end = start + sum(len(x) + 1 for x in lines[i + 1 : last]) - 1
            return start, end
        offset += len(line) + 1
    return None


def _fence(content: str) -> tuple[int, int] | None:
    r"""The body span of MVU's ``` ```.*\n([\s\S]*)\n``` ``` (first fence line to the last fence)."""
    first = content.find("```")
    if first == -1:
        return None
    line_end = content.find("\n", first + 3)
    last = content.rfind("\n```")
    if line_end == -1 or last < line_end + 1:
        return None
    return line_end + 1, last


def unwrap(content: str, loc: Loc) -> tuple[str, Loc, list[Problem]]:
    """Strip MVU's ``<initvar>`` line wrapper and one code fence; ``loc`` shifts to the inner text."""
    notes: list[Problem] = []
    span = _xml_wrapper(content)
    if span:
        loc = loc.shifted(line_of(content, span[0]) - 1)
        content = content[span[0] : span[1]]
    else:
        one = _ONE_LINE_WRAPPER.match(content)
        if one:
            # MVU's regex needs line breaks around the body and would parse the tags as YAML text
            # (a garbage object); the author's intent is unambiguous, so unwrap and say so.
            notes.append(
                diag(
                    "mvu.initvar.single_line_wrapper",
                    "a one-line <initvar>…</initvar> was unwrapped (MVU itself would misread it)",
                    loc,
                    "warning",
                )
            )
            content = one.group(1)
    span = _fence(content)
    if span:
        loc = loc.shifted(line_of(content, span[0]) - 1)
        content = content[span[0] : span[1]]
    return content, loc, notes


def deep_merge(target: Any, source: Any) -> Any:
    """lodash ``merge`` with arrays replacing: objects merge key by key, everything else replaces."""
    if isinstance(target, dict) and isinstance(source, dict):
        out = dict(target)
        for key, value in source.items():
            out[key] = deep_merge(out[key], value) if key in out else _copy(value)
        return out
    return _copy(source)


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


def parse_initvar_text(
    text: str, loc: Loc, *, char: str, user: str
) -> tuple[dict[str, Any] | None, dict[str, tuple[Loc, int]], list[Problem]]:
    body, inner, notes = unwrap(text, loc)
    expanded = expand_macros(body, char=char, user=user)
    for macro in leftover_macros(expanded):
        notes.append(diag("mvu.initvar.macro_unexpanded", f"macro {macro} is kept as literal text", inner, "warning"))
    parsed = parse_data(expanded, inner, want="object")
    notes += parsed.diagnostics
    if not parsed.ok:
        return None, {}, notes
    return parsed.value, {p: (inner, line) for p, line in parsed.lines.items()}, notes


def _merge_book(book: Book, *, char: str, user: str, result: InitVarResult) -> dict[str, Any] | None:
    merged: dict[str, Any] | None = None
    for entry in book.entries:
        if not is_initvar_entry(entry):
            continue
        value, lines, notes = parse_initvar_text(entry.content, entry.loc, char=char, user=user)
        result.diagnostics += notes
        if value is None:
            result.ok = False
            continue
        merged = deep_merge(merged or {}, value)
        for pointer, where in lines.items():
            result.lines.setdefault(pointer, where)
        result.sources.append(f"{book.name}: {entry.title}")
    return merged


def _shallow_into(result: InitVarResult, data: dict[str, Any], book: Book) -> None:
    for key, value in data.items():
        if key in result.value:
            if result.value[key] != value:
                result.diagnostics.append(
                    diag(
                        "mvu.initvar.key_shadowed",
                        f"top-level key {key!r} from lorebook {book.name!r} is ignored: an earlier source already defines it (MVU merges lorebooks shallowly, first wins)",
                        Loc(book.entries[0].loc.source if book.entries else "lorebook", None, book.name),
                        "warning",
                    )
                )
            continue
        result.value[key] = value


def ordered(books: list[Book]) -> list[Book]:
    return sorted(books, key=lambda b: BOOK_ORDER.get(b.role, 2))


def load_initvar(
    books: list[Book], *, char: str, user: str, skip_character: bool = False, base: dict[str, Any] | None = None
) -> InitVarResult:
    """InitVar of ``books`` in MVU's order, shallow-merged on top of ``base`` (earlier wins)."""
    result = InitVarResult(True, dict(base or {}))
    for book in ordered(books):
        if skip_character and book.role == "character":
            continue
        data = _merge_book(book, char=char, user=user, result=result)
        if data is not None:
            _shallow_into(result, data, book)
    if has_errors(result.diagnostics):
        result.ok = False
    if not result.ok:
        result.value = {}
    return result


def greeting_initvar(text: str, loc: Loc, *, char: str, user: str) -> InitVarResult | None:
    """The merged ``<initvar>`` blocks of a greeting, or None when it has none."""
    blocks = find_blocks(text, INITVAR_TAG, tempered=False)
    if not blocks:
        return None
    result = InitVarResult(True)
    merged: dict[str, Any] = {}
    index = LineIndex(text)
    for block in blocks:
        where = loc.shifted(index.line(block.body_start) - 1)
        body = text[block.body_start : block.body_end]
        value, lines, notes = parse_initvar_text(body, where, char=char, user=user)
        result.diagnostics += notes
        if value is None:
            result.ok = False
            continue
        merged = deep_merge(merged, value)
        for pointer, at in lines.items():
            result.lines.setdefault(pointer, at)
    if has_errors(result.diagnostics):
        result.ok = False
    result.value = merged if result.ok else {}
    result.sources.append("greeting <initvar>")
    return result
