"""The selected opening: its literal commands applied atomically, and its cleaned message text.

MVU runs a greeting's ``_.set``/JSON Patch commands once, on top of the initial variables
(mvu.md §2.11). The adapter does the same for the *selected* greeting only, with MVU Zod's
semantics and the spec's safety rules:

* every command is checked against the fixed base schema right after it runs (as MVU Zod's
  ``safeParse`` does after every command), and the group is all-or-nothing: one refused command
  and none of them apply (the caller then starts from the InitVar value, namespace enabled, with
  a diagnostic);
* only literal values are accepted (see :func:`.commands.parse_value`); nothing is evaluated;
* paths resolve like lodash over the *plain* value: ``x[0]`` on a split ValueWithDescription pair
  is the value itself, ``x[1]`` (its description) is refused; segments starting with ``_`` are
  read-only in MVU Zod and refused here.

:func:`clean_opening_text` removes the control text (``<UpdateVariable>`` blocks, commands, patch
and ``<initvar>`` blocks, status placeholders) from a copy; the source greeting stays unchanged.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from typing import Any

from roleplay.errors import Problem
from roleplay.state import validate_value

from .commands import UNDEFINED, Command, parse_value
from .diagnostics import Loc, diag
from .parsing import js_key
from .paths import PathError, command_tokens, patch_tokens
from .scan import inside, remove_spans, simple_spans, strip_quotes
from .schema import pointer_of


class _Refused(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass
class CommandOutcome:
    ok: bool
    value: Any
    records: list[dict[str, Any]] = field(default_factory=list)
    diagnostics: list[Problem] = field(default_factory=list)


def _resolve(tokens: list[str], root: Any, vwd: dict[str, str]) -> tuple[str, ...]:
    parts: list[str] = []
    for token in tokens:
        here = pointer_of(parts)
        if here in vwd and token in ("0", "1"):
            if token == "1":
                raise _Refused("mvu.command.vwd_description", f"{here} [1] is the description of a [value, description] pair, not data")
            continue
        parts.append(token)
    for part in parts:
        if part.startswith("_"):
            raise _Refused("mvu.command.readonly_path", f"segment {part!r} starts with '_': read-only in MVU Zod")
    return tuple(parts)


def _command_parts(raw: str, root: Any, vwd: dict[str, str]) -> tuple[str, ...]:
    try:
        tokens, _stripped = command_tokens(raw)
    except PathError as exc:
        raise _Refused("mvu.command.path_invalid", f"path {raw!r}: {exc}") from None
    stripped = strip_quotes(raw.strip())
    if "." in stripped and isinstance(root, dict) and stripped in root:
        # lodash looks up a literal key containing dots before walking the path.
        return (stripped,)
    return _resolve(tokens, root, vwd)


def _get(root: Any, parts: tuple[str, ...]) -> Any:
    node = root
    for part in parts:
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            raise _Refused("mvu.command.target_missing", f"{pointer_of(parts) or '/'} does not exist")
    return node


def _container(root: Any, parts: tuple[str, ...]) -> tuple[Any, str]:
    if not parts:
        raise _Refused("mvu.command.root", "the whole state cannot be replaced or removed by an opening command")
    parent = _get(root, parts[:-1])
    if not isinstance(parent, (dict, list)):
        raise _Refused("mvu.command.target_missing", f"{pointer_of(parts[:-1]) or '/'} is not an object or array")
    return parent, parts[-1]


def _assign(parent: Any, key: str, value: Any, create: bool = True) -> None:
    if isinstance(parent, dict):
        if not create and key not in parent:
            raise _Refused("mvu.command.target_missing", f"{key!r} does not exist")
        parent[key] = value
        return
    if not key.isdigit() or int(key) >= len(parent):
        raise _Refused("mvu.command.target_missing", f"array index {key!r} is out of range")
    parent[int(key)] = value


def _literal(raw: str, notes: list[str]) -> Any:
    value, note = parse_value(raw)
    if note:
        notes.append(note)
    if value is UNDEFINED:
        raise _Refused("mvu.command.value_invalid", "undefined is not a JSON value")
    return value


def _schema_at(schema: dict[str, Any], parts: tuple[str, ...]) -> dict[str, Any]:
    node: Any = schema
    for part in parts:
        if not isinstance(node, dict):
            return {}
        if part in node.get("properties", {}):
            node = node["properties"][part]
        elif node.get("type") == "array":
            node = node.get("items", {})
        elif isinstance(node.get("additionalProperties"), dict):
            node = node["additionalProperties"]
        else:
            return {}
    return node if isinstance(node, dict) else {}


def _numeric(value: Any) -> float | int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return value
    if isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            return None
        return int(number) if number.is_integer() and re.fullmatch(r"\s*[-+]?\d+\s*", value) else number
    return None


def _run(root: Any, command: Command, schema: dict[str, Any], vwd: dict[str, str], notes: list[str]) -> tuple[str, str]:
    """Apply one command to ``root`` in place; returns (native op name, pointer) for the record."""
    patch = command.patch
    if patch is not None:
        try:
            parts = _resolve(patch_tokens(command.args[0]), root, vwd)
        except PathError as exc:
            raise _Refused("mvu.command.path_invalid", str(exc)) from None
    else:
        parts = _command_parts(command.args[0], root, vwd)
    if command.kind == "set":
        value = patch["value"] if patch else _literal(command.args[-1], notes)
        parent, key = _container(root, parts)
        old = parent.get(key) if isinstance(parent, dict) else None
        expects_number = (
            _schema_at(schema, parts).get("type") in ("number", "integer") or isinstance(old, (int, float)) and not isinstance(old, bool)
        )
        if expects_number and isinstance(value, str) and _numeric(value) is not None:
            notes.append(f"text {value!r} converted to a number, as MVU does for numeric fields")
            value = _numeric(value)
        _assign(parent, key, value)
        return "set", pointer_of(parts)
    if command.kind == "add":
        delta = patch["value"] if patch else _literal(command.args[1], notes)
        parent, key = _container(root, parts)
        current = _get(root, parts)
        number = _numeric(delta)
        if not isinstance(current, (int, float)) or isinstance(current, bool) or number is None:
            raise _Refused("mvu.command.not_number", f"add needs a number at {pointer_of(parts)} and a numeric delta")
        total = current + number
        if isinstance(total, float):
            # MVU rounds sums to 12 significant digits so 0.1 + 0.2 stays 0.3.
            total = float(f"{total:.12g}")
        _assign(parent, key, total)
        return "increment", pointer_of(parts)
    if command.kind == "insert":
        if patch is not None:
            value = patch["value"]
            parent, key = _container(root, parts)
            return _insert_at(parent, key, value, parts)
        target_parts = parts
        value = _literal(command.args[-1], notes)
        try:
            target = _get(root, target_parts)
        except _Refused:
            parent, key = _container(root, target_parts)
            target = [] if _schema_at(schema, target_parts).get("type") == "array" else {}
            _assign(parent, key, target)
        if len(command.args) >= 3:
            key_value = _literal(command.args[1], notes)
            return _insert_at(target, str(key_value), value, (*target_parts, str(key_value)))
        if isinstance(target, list):
            target.append(value)
            return "append", pointer_of(target_parts)
        if isinstance(target, dict) and isinstance(value, dict):
            target.update(value)
            return "set", pointer_of(target_parts)
        raise _Refused("mvu.command.insert_invalid", f"cannot insert {type(value).__name__} into {pointer_of(target_parts) or '/'}")
    if command.kind == "delete":
        if patch is None and len(command.args) >= 2:
            target, _note = parse_value(command.args[1])
            if target is not UNDEFINED:
                return _remove_member(root, parts, target)
        parent, key = _container(root, parts)
        _get(root, parts)
        if isinstance(parent, dict):
            del parent[key]
        else:
            del parent[int(key)]
        return "remove", pointer_of(parts)
    if command.kind == "move" and patch is not None:  # only a JSON-patch op moves (it names "from")
        try:
            source = _resolve(patch_tokens(patch["from"]), root, vwd)
        except PathError as exc:
            raise _Refused("mvu.command.path_invalid", str(exc)) from None
        moved = _get(root, source)
        src_parent, src_key = _container(root, source)
        if isinstance(src_parent, dict):
            del src_parent[src_key]
        else:
            del src_parent[int(src_key)]
        parent, key = _container(root, parts)
        _assign(parent, key, moved)
        return "move", pointer_of(parts)
    raise _Refused("mvu.command.unknown", f"unknown command {command.name!r}")


def _same(a: Any, b: Any) -> bool:
    """lodash ``isEqual`` on JSON values: ``true`` is not ``1``, ``1`` is ``1.0``."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def _js_key_order(obj: dict[str, Any]) -> list[str]:
    """``Object.keys`` order: integer-like keys ascending first, then the rest as inserted."""
    index_like = sorted((k for k in obj if k.isdigit() and (k == "0" or not k.startswith("0")) and int(k) < 2**32 - 1), key=int)
    seen = set(index_like)
    return index_like + [k for k in obj if k not in seen]


def _remove_member(root: Any, parts: tuple[str, ...], target: Any) -> tuple[str, str]:
    """MVU's two-argument ``_.remove(path, x)`` (also ``unset``/``delete``) on the collection at path.

    On an array a number is an index and anything else is a value, the first deep-equal element
    going; on an object a number picks the n-th key in ``Object.keys`` order and anything else is
    a key name. A target that is not there is refused, as MVU refuses it.
    """
    collection = _get(root, parts)
    where = pointer_of(parts) or "/"
    is_number = isinstance(target, (int, float)) and not isinstance(target, bool)
    if isinstance(collection, list):
        if is_number:
            if not float(target).is_integer() or not 0 <= target < len(collection):
                raise _Refused("mvu.command.target_missing", f"index {target!r} is not in the array at {where}")
            index = int(target)
        else:
            index = next((i for i, item in enumerate(collection) if _same(item, target)), -1)
            if index == -1:
                raise _Refused("mvu.command.target_missing", f"the array at {where} holds no element equal to {target!r}")
        del collection[index]
        return "remove", pointer_of((*parts, str(index)))
    if isinstance(collection, dict):
        if is_number:
            keys = _js_key_order(collection)
            if not float(target).is_integer() or not 0 <= target < len(keys):
                raise _Refused("mvu.command.target_missing", f"the object at {where} has no entry number {target!r}")
            key = keys[int(target)]
        elif isinstance(target, (dict, list)):
            raise _Refused("mvu.command.target_missing", f"an object or array is not a key of the object at {where}")
        else:
            key = js_key(target)
            if key not in collection:
                raise _Refused("mvu.command.target_missing", f"the object at {where} has no key {key!r}")
        if key.startswith("_"):
            raise _Refused("mvu.command.readonly_path", f"segment {key!r} starts with '_': read-only in MVU Zod")
        del collection[key]
        return "remove", pointer_of((*parts, key))
    raise _Refused("mvu.command.target_missing", f"{where} is not an array or object, so nothing can be removed from it")


def _insert_at(parent: Any, key: str, value: Any, parts: tuple[str, ...]) -> tuple[str, str]:
    if isinstance(parent, list):
        if key == "-":
            parent.append(value)
            return "append", pointer_of(parts[:-1])
        if key.isdigit() and int(key) <= len(parent):
            parent.insert(int(key), value)
            return "insert", pointer_of(parts)
        raise _Refused("mvu.command.insert_invalid", f"array position {key!r} is out of range")
    if isinstance(parent, dict):
        parent[key] = value
        return "set", pointer_of(parts)
    raise _Refused("mvu.command.insert_invalid", f"{pointer_of(parts[:-1]) or '/'} is not an object or array")


def _parts_of(pointer: str) -> tuple[str, ...]:
    return tuple(p.replace("~1", "/").replace("~0", "~") for p in pointer.split("/")[1:]) if pointer else ()


def _deep_equal_any(value: Any, options: list[Any]) -> bool:
    return any(_same(value, option) for option in options)


def _node_violations(node_schema: dict[str, Any], node: Any, pointer: str, changed_key: str | None, container: bool) -> list[Problem]:
    """The keywords of one unchanged-in-place node that a change below it can break.

    ``enum``/``const`` compare the whole subtree; on the container of the change also the
    member count and the member names (``required``, a closed object's unknown key).
    """
    found: list[Problem] = []

    def add(message: str) -> None:
        found.append(Problem("state.value.schema_violation", message, pointer))

    if "const" in node_schema and not _same(node, node_schema["const"]):
        add(f"{node_schema['const']!r} was expected")
    if "enum" in node_schema and not _deep_equal_any(node, node_schema["enum"]):
        add(f"{node!r} is not one of {node_schema['enum']!r}")
    if not container:
        return found
    if isinstance(node, list):
        if len(node) > node_schema.get("maxItems", len(node)):
            add(f"expected at most {node_schema['maxItems']} items")
        if len(node) < node_schema.get("minItems", 0):
            add("should be non-empty" if node_schema["minItems"] == 1 else f"expected at least {node_schema['minItems']} items")
    elif isinstance(node, dict):
        for name in node_schema.get("required", []):
            if name not in node:
                add(f"{name!r} is a required property")
        closed = node_schema.get("additionalProperties") is False
        if closed and changed_key is not None and changed_key in node and changed_key not in node_schema.get("properties", {}):
            add(f"Additional properties are not allowed ({changed_key!r} was unexpected)")
    return found


def _changed_violations(schema: dict[str, Any], root: Any, op: str, pointer: str) -> list[Problem]:
    """Schema problems a command of kind ``op`` at ``pointer`` can have introduced.

    The written value is validated in full; the nodes above it cannot change type or schema
    (``items`` is one schema for every index), so they are checked only for the keywords a change
    below can break (:func:`_node_violations`). The restricted schema dialect has no other
    keyword that looks below a node.
    """
    parts = _parts_of(pointer)
    if op == "append":
        parts = (*parts, str(len(_get(root, parts)) - 1))
    found: list[Problem] = []
    if op != "remove":
        found += validate_value(_schema_at(schema, parts), _get(root, parts), pointer_of(parts))
    node = root
    for depth in range(len(parts)):
        here = parts[:depth]
        node = root if depth == 0 else (node[int(parts[depth - 1])] if isinstance(node, list) else node[parts[depth - 1]])
        found += _node_violations(_schema_at(schema, here), node, pointer_of(here), parts[depth], depth == len(parts) - 1)
    return found


def apply_commands(value: Any, schema: dict[str, Any], vwd: dict[str, str], commands: list[Command], loc: Loc) -> CommandOutcome:
    """Run ``commands`` in order on a copy of ``value``; all of them or none."""
    working = copy.deepcopy(value)
    records: list[dict[str, Any]] = []
    problems: list[Problem] = []
    for index, command in enumerate(commands):
        where = loc.at(command.line)
        notes: list[str] = []
        try:
            op, pointer = _run(working, command, schema, vwd, notes)
        except _Refused as exc:
            problems.append(
                diag(
                    exc.code,
                    f"opening command {index} (_.{command.name} / {command.origin}): {exc.message}; no opening command is applied",
                    where,
                    command=index,
                )
            )
            return CommandOutcome(False, value, [], problems)
        for note in notes:
            problems.append(diag("mvu.command.value_normalized", f"opening command {index}: {note}", where, "warning", command=index))
        # The whole state after the first and the last command; in between only what a command
        # can have changed, so a greeting of n commands is not n full validations.
        full = index in (0, len(commands) - 1) or op == "move"
        violations = validate_value(schema, working) if full else _changed_violations(schema, working, op, pointer)
        if violations:
            for v in violations[:10]:
                problems.append(
                    diag(
                        "mvu.command.schema_violation",
                        f"after opening command {index} (_.{command.name}) the state breaks its schema at {v.pointer or '/'}: {v.message}; no opening command is applied",
                        where,
                        command=index,
                        statePointer=v.pointer,
                    )
                )
            return CommandOutcome(False, value, [], problems)
        record = {"op": op, "path": pointer, "source": command.origin, "line": where.line}
        if command.reason and command.reason != "json_patch":
            record["reason"] = command.reason
        records.append(record)
    return CommandOutcome(True, working, records, problems)


# --- the message text -----------------------------------------------------------------------------------

# ``<update>`` may run to the end of the text (MVU's own display regex does the same); a lazy
# body that may also end at ``$`` is linear, so this one stays a regular expression.
_UPDATE_BLOCK = re.compile(r"<update(?:variable)?>[\s\S]*?(?:</update(?:variable)?>|$)", re.IGNORECASE)
_PLACEHOLDER = re.compile(r"<StatusPlaceHolderImpl\s*/>", re.IGNORECASE)
_BLANK_LINES = re.compile(r"(\r?\n){3,}")


def _strip_status(text: str) -> str:
    """``<status_current_variable(s)>…</…>`` blocks, then status placeholders outside them."""
    blocks = simple_spans(text, "<status_current_variables?>", "</status_current_variables?>")
    placeholders = [m.span() for m in _PLACEHOLDER.finditer(text) if not inside(blocks, m.start())]
    return remove_spans(text, sorted(blocks + placeholders))


def _strip_trailing_blanks(text: str) -> str:
    """Spaces and tabs before each line break go (``[ \t]+(\r?\n)``, without its quadratic scan)."""
    lines = text.split("\n")
    for i in range(len(lines) - 1):
        line = lines[i]
        lines[i] = line[:-1].rstrip(" \t") + "\r" if line.endswith("\r") else line.rstrip(" \t")
    return "\n".join(lines)


def clean_opening_text(text: str, commands: list[Command]) -> str:
    """The greeting as the reader should see it: control blocks and commands removed.

    Every step is linear in the text: card text is cleaned at every turn and may be hostile.
    """
    out = remove_spans(text, sorted((c.start, c.end) for c in commands if c.origin == "command"))
    out = _UPDATE_BLOCK.sub("", out)
    out = _strip_status(out)
    out = remove_spans(out, simple_spans(out, "<initvar>", "</initvar>"))
    out = remove_spans(out, simple_spans(out, "", "", backref="json_?patch"))
    out = _strip_trailing_blanks(out)
    out = _BLANK_LINES.sub(lambda m: m.group(1) * 2, out)
    return out.strip()
