"""MVU's update-command grammar, read as data: ``_.set(…);//reason`` and ``<JSONPatch>`` blocks.

The grammar is MVU's (mvu.md §2.6, §2.10):

* a command starts at ``_.set(`` / ``insert`` / ``assign`` / ``remove`` / ``unset`` / ``delete`` /
  ``add`` with no space before ``(``; its arguments end at the matching ``)``, parentheses being
  counted outside ``'`` ``"`` and backtick quotes (a quote preceded by ``\\`` does not count);
* the ``)`` must be followed *immediately* by ``;`` — otherwise MVU drops the command, and so do
  we, but with a diagnostic; an optional ``//reason`` may follow (``\\s*`` lets it sit on the next
  line, exactly as in MVU);
* arguments split on ``,`` at bracket depth 0 outside quotes and stay raw until used; arity:
  ``set`` ≥ 2 (the last argument is the new value), ``insert``/``assign`` ≥ 2, ``remove``/
  ``unset``/``delete`` ≥ 1, ``add`` exactly 2; aliases become ``insert``/``delete``;
* JSON Patch blocks (``<JSONPatch>``, ``<json_patch>``, a code fence inside is fine) use MVU's op
  dialect: ``replace`` → set, ``delta`` → add, ``insert``/``add`` → insert, ``remove`` →
  delete, ``move`` (``to`` or ``path``); ``copy``/``test`` are ignored as in MVU.

Values follow MVU Zod (no mathjs): ``true``/``false``/``null``, JSON, a relaxed JSON5 literal for
``{…}``/``[…]``, then a YAML 1.2 scalar, then the text with its outer quotes stripped. So an
unquoted ``10:45`` is the string ``"10:45"`` and ``10 + 2`` stays text (with a warning) instead of
being evaluated.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

import json5

from roleplay.errors import Problem

from .diagnostics import Loc, diag
from .parsing import ParseFailure, load_yaml, parse_data
from .scan import LineIndex, find_blocks, inside, paren_closes, strip_quotes

COMMAND_START = re.compile(r"_\.(set|insert|assign|remove|unset|delete|add)\(")
RETIRED = re.compile(r"_\.(move|alter|modify)\(")
# MVU's block regex, kept as the reference the linear scanner (:func:`.scan.find_blocks`) matches:
PATCH_BLOCK = re.compile(r"<(json_?patch)>(?:\s*```.*)?((?:(?!<json_?patch>)[\s\S])*?)(?:```\s*)?</\1>", re.IGNORECASE)
PATCH_TAG = "json_?patch"
_REASON = re.compile(r"\s*//(.*)")
ALIASES = {"remove": "delete", "unset": "delete", "assign": "insert"}
PATCH_OPS = {"replace": "set", "delta": "add", "insert": "insert", "add": "insert", "remove": "delete", "move": "move"}
_ARITHMETIC = re.compile(r"^[\d\s.]+(?:[-+*/%^][\d\s.()]+)+$")
UNDEFINED: Any = type("Undefined", (), {"__repr__": lambda self: "undefined"})()


@dataclass
class Command:
    kind: str  # set | add | insert | delete | move
    name: str  # as written: set, assign, replace, delta, …
    args: list[str] = field(default_factory=list)  # raw text (commands) or JSON text (patches)
    reason: str = ""
    start: int = 0
    end: int = 0
    line: int = 1
    origin: str = "command"  # "command" | "json_patch"
    patch: dict[str, Any] | None = None  # the op object of a JSON Patch command


def split_arguments(text: str) -> list[str]:
    """Split on top-level commas outside quotes; pieces are trimmed, a trailing empty one dropped."""
    params: list[str] = []
    current: list[str] = []
    quote: str | None = None
    depth = 0
    for i, ch in enumerate(text):
        if ch in "\"'`" and (i == 0 or text[i - 1] != "\\"):
            if quote is None:
                quote = ch
            elif ch == quote:
                quote = None
        if quote is None:
            if ch in "([{":
                depth += 1
            elif ch in ")]}":
                depth -= 1
            elif ch == "," and depth == 0:
                params.append("".join(current).strip())
                current = []
                continue
        current.append(ch)
    if "".join(current).strip():
        params.append("".join(current).strip())
    return params


def _arity_ok(name: str, count: int) -> bool:
    if name == "add":
        return count == 2
    if name in ("set", "insert", "assign"):
        return count >= 2
    return count >= 1


def extract_text_commands(text: str, loc: Loc, lines: LineIndex | None = None) -> tuple[list[Command], list[Problem]]:
    commands: list[Command] = []
    problems: list[Problem] = []
    lines = lines or LineIndex(text)
    starts = list(COMMAND_START.finditer(text))
    closes = paren_closes(text, [m.end() for m in starts])
    i = 0
    for m in starts:
        if m.start() < i:
            continue
        name = m.group(1)
        line = lines.line(m.start())
        close = closes[m.end()]
        if close == -1:
            problems.append(diag("mvu.command.unclosed", f"_.{name}( has no matching ')'; dropped", loc.at(line)))
            i = m.end()
            continue
        if close + 1 >= len(text) or text[close + 1] != ";":
            problems.append(
                diag(
                    "mvu.command.missing_semicolon",
                    f"_.{name}(…) is not followed directly by ';'; MVU drops it and so does the adapter",
                    loc.at(line),
                    "warning",
                )
            )
            i = close + 1
            continue
        end = close + 2
        reason = ""
        rm = _REASON.match(text, end)
        if rm:
            reason = rm.group(1).strip()
            end = rm.end()
        args = split_arguments(text[m.end() : close])
        if not _arity_ok(name, len(args)):
            problems.append(
                diag(
                    "mvu.command.arity",
                    f"_.{name} with {len(args)} argument(s) is not a valid MVU command; dropped",
                    loc.at(line),
                    "warning",
                )
            )
        else:
            commands.append(Command(ALIASES.get(name, name), name, args, reason, m.start(), end, line))
        i = end
    for m in RETIRED.finditer(text):
        problems.append(
            diag(
                "mvu.command.retired",
                f"_.{m.group(1)}(…) is not an MVU command (retired or never textual); ignored",
                loc.at(lines.line(m.start())),
                "info",
            )
        )
    return commands, problems


def _split_objects(body: str) -> str:
    """Several JSON objects one after another (a patch missing its ``[`` ``]``) → one array text."""
    stripped = body.strip()
    if not stripped.startswith("{"):
        return body
    return "[" + re.sub(r"\}\s*\n\s*\{", "},\n{", stripped) + "]"


def extract_patches(text: str, loc: Loc, lines: LineIndex | None = None) -> tuple[list[Command], list[Problem]]:
    commands: list[Command] = []
    problems: list[Problem] = []
    lines = lines or LineIndex(text)
    for block in find_blocks(text, PATCH_TAG, tempered=True):
        line = lines.line(block.start)
        body = text[block.body_start : block.body_end].strip()
        parsed = parse_data(_split_objects(body), loc.shifted(line - 1), want="array-or-object")
        problems += parsed.diagnostics
        if not parsed.ok:
            problems.append(
                diag("mvu.patch.parse_failed", "the JSON Patch block could not be read; its operations are dropped", loc.at(line))
            )
            continue
        ops = parsed.value if isinstance(parsed.value, list) else [parsed.value]
        for index, op in enumerate(ops):
            where = loc.at(line)
            if not isinstance(op, dict) or not isinstance(op.get("op"), str):
                problems.append(diag("mvu.patch.op_invalid", f"patch operation {index} is not an object with a string 'op'", where))
                continue
            kind = PATCH_OPS.get(op["op"])
            if kind is None:
                problems.append(diag("mvu.patch.op_unsupported", f"patch op {op['op']!r} is ignored (MVU ignores it too)", where, "info"))
                continue
            target = op.get("path", op.get("to")) if kind == "move" else op.get("path")
            if not isinstance(target, str) or (kind == "move" and not isinstance(op.get("from"), str)):
                problems.append(diag("mvu.patch.path_invalid", f"patch operation {index} ({op['op']}) needs string paths", where))
                continue
            if kind in ("set", "add", "insert") and "value" not in op:
                problems.append(diag("mvu.patch.value_missing", f"patch operation {index} ({op['op']}) has no 'value'", where))
                continue
            commands.append(Command(kind, op["op"], [target], "json_patch", block.start, block.end, line, "json_patch", op))
    return commands, problems


def extract_commands(text: str, loc: Loc) -> tuple[list[Command], list[Problem]]:
    """All commands of a message in text order (JSON Patch ops at their block's position)."""
    lines = LineIndex(text)
    patches, p1 = extract_patches(text, loc, lines)
    # Commands inside a patch block are part of its JSON, never separate commands.
    spans = sorted({(c.start, c.end) for c in patches})
    plain, p2 = extract_text_commands(text, loc, lines)
    plain = [c for c in plain if not inside(spans, c.start)]
    return sorted([*patches, *plain], key=lambda c: c.start), [*p1, *p2]


# --- values ---------------------------------------------------------------------------------------


def parse_value(raw: str) -> tuple[Any, str | None]:
    """MVU Zod's value reading of one raw argument; the second item is a warning, if any."""
    text = raw.strip()
    if text in ("true", "false"):
        return text == "true", None
    if text == "null":
        return None, None
    if text == "undefined":
        return UNDEFINED, None
    try:
        return json.loads(text), None
    except (ValueError, RecursionError):
        pass
    if (text.startswith("{") and text.endswith("}")) or (text.startswith("[") and text.endswith("]")):
        try:
            value = json5.loads(text)
            if isinstance(value, (dict, list)):
                return value, None
        except (ValueError, RecursionError, OverflowError):
            pass
    looks_like_math = _ARITHMETIC.match(text) and not re.fullmatch(r"\d{4}-\d{1,2}-\d{1,2}", text)
    note = "arithmetic is not evaluated; the value stays text" if looks_like_math else None
    try:
        value, _lines, _notes = load_yaml(text, Loc("value"))
        if value is not None or text in ("~", ""):
            return value, note
    except ParseFailure:
        pass
    return strip_quotes(raw), note
