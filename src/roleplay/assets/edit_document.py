"""The text form of a persona, preset or writing style that a person edits: YAML.

Multi-line prose (a persona's description, a preset field's content, a style's requirements) is
written as a literal block (``key: |``), so it reads and edits as the text itself instead of one
JSON line full of ``\\n``. JSON is YAML too, so a ``--file`` may also be JSON.

The document is the kind's own stored data (camelCase keys, as ``rp assets show --json`` has them)
with a comment block on top; what comes back is checked by the kind's parser when it is stored.
Two YAML habits are switched off because they would change what the user typed: a date-looking
value stays text (``name: 2024-01-01``), and duplicate keys are refused instead of the last one
silently winning. ``\\r``, tabs and other characters a block cannot carry exactly keep the quoted
form, so every stored string round-trips unchanged.
"""

from __future__ import annotations

import datetime
import io
import math
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.constructor import SafeConstructor
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.scalarstring import DoubleQuotedScalarString, LiteralScalarString

from roleplay.errors import RpError, ValidationError

from .kinds import PERSONA, PRESET, WRITING_STYLE

_COMMON = (
    "# Lines starting with # are comments. Multi-line text goes after `key: |`, every line\n"
    "# indented by the same spaces. Save and close the editor to store it; close it without\n"
    "# saving (or empty the file) to change nothing.\n"
)
KEYS_HELP: dict[str, str] = {
    PERSONA: (
        "# name         what the story calls you ({{user}} in cards)\n"
        "# description  who you are in the story: appearance, background, manner (the Writer reads it)\n"
        "# avatar       a stored image reference; leave it as it is\n"
    ),
    PRESET: (
        "# name, description  the preset's name and a note for you (the note is not sent to the model)\n"
        "# fields             the sections sent to the Writer, in order, each:\n"
        "#   id           stable id (keep it; leave it out on a new field and one is made)\n"
        "#   title        the section's name      position  top (before the story) or bottom (after it)\n"
        "#   enabled      true or false           sectionTag  wrap the content in a tag with the title\n"
        "#   description  a note for you          content   the text the Writer gets\n"
        "# sampling           optional: temperature, top_p, frequency_penalty, presence_penalty,\n"
        "#                    max_tokens, context_size\n"
    ),
    WRITING_STYLE: (
        "# name           the style's name\n"
        "# applicability  when to use it (a note for you; not sent to the model)\n"
        "# requirements   how to write: the text the Writer gets\n"
    ),
}
# What ``new`` opens: the spec's blank editor, with the keys to fill in.
BLANK: dict[str, dict[str, Any]] = {
    PERSONA: {"name": "", "description": ""},
    PRESET: {"name": "", "description": "", "fields": []},
    WRITING_STYLE: {"name": "", "applicability": "", "requirements": ""},
}
ERROR_PREFIX = "# ! "
_NOT_IN_BLOCK = frozenset("\r\t\x85\u2028\u2029\ufeff")


class _TextDates(SafeConstructor):
    """Safe loading, but a timestamp-looking scalar stays the text that was typed."""


_TextDates.add_constructor("tag:yaml.org,2002:timestamp", SafeConstructor.construct_yaml_str)


def _loader() -> YAML:
    yaml = YAML(typ="safe", pure=True)
    yaml.Constructor = _TextDates
    yaml.allow_duplicate_keys = False
    return yaml


def _dumper() -> YAML:
    yaml = YAML()
    yaml.indent(mapping=2, sequence=4, offset=2)
    yaml.width = 1_000_000  # never fold a long line: the text stays as typed
    yaml.allow_unicode = True
    return yaml


def _blocky(value: Any) -> Any:
    if isinstance(value, dict):
        return {_key(k): _blocky(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_blocky(v) for v in value]
    if isinstance(value, str):
        if all(ch.isprintable() or ch == "\n" for ch in value) and not _NOT_IN_BLOCK.intersection(value):
            return LiteralScalarString(value) if "\n" in value else value
        return DoubleQuotedScalarString(value)  # escapes what a plain or block scalar would change
    return value


def _key(key: Any) -> Any:
    if isinstance(key, str) and (not key.isprintable() or _NOT_IN_BLOCK.intersection(key)):
        return DoubleQuotedScalarString(key)
    return key


def to_document(kind: str, data: dict[str, Any], heading: str) -> str:
    """``heading``: the first comment line (what is being edited), without the ``# ``."""
    out = io.StringIO()
    _dumper().dump(_blocky(data), out)
    return f"# {heading}\n{_COMMON}{KEYS_HELP[kind]}\n{out.getvalue()}"


def strip_error_comments(text: str) -> str:
    return "".join(line for line in text.splitlines(keepends=True) if not line.startswith(ERROR_PREFIX))


def with_error_comments(text: str, exc: RpError) -> str:
    """The user's text with the problems on top, for another round in the editor."""
    lines = [f"{ERROR_PREFIX}{p.code}: {p.message}" + (f" (at {p.pointer})" if p.pointer is not None else "") for p in _problems(exc)]
    return "\n".join(lines) + "\n" + strip_error_comments(text)


def _problems(exc: RpError) -> list[Any]:
    from roleplay.errors import Problem

    return list(exc.problems) or [Problem(exc.code, exc.message, exc.pointer, {})]


def _plain(value: Any, pointer: str) -> Any:
    """YAML's values as JSON's; anything JSON has no word for is refused with its pointer."""
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise ValidationError("asset.edit.invalid_document", f"key {key!r} is not text; quote it", pointer=f"{pointer}/{key}")
            out[key] = _plain(item, f"{pointer}/{key.replace('~', '~0').replace('/', '~1')}")
        return out
    if isinstance(value, list):
        return [_plain(item, f"{pointer}/{i}") for i, item in enumerate(value)]
    if value is None or isinstance(value, (str, bool, int, float)):
        if isinstance(value, float) and not math.isfinite(value):
            raise ValidationError("asset.edit.invalid_document", "a number must be finite", pointer=pointer)
        return value
    if isinstance(value, (datetime.date, bytes)):  # never produced with _TextDates, kept as a guard
        raise ValidationError("asset.edit.invalid_document", f"unsupported value {value!r}", pointer=pointer)
    raise ValidationError("asset.edit.invalid_document", f"unsupported value of type {type(value).__name__}", pointer=pointer)


def from_document(text: str) -> dict[str, Any] | None:
    """The edited data, or None when the document is empty (nothing but comments and blanks)."""
    try:
        value = _loader().load(text)
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise ValidationError(
            "asset.edit.invalid_yaml",
            f"the document is not valid YAML{where}: {exc.problem or exc.context}",
            details={"line": mark.line + 1 if mark else None, "column": mark.column + 1 if mark else None},
        ) from None
    except YAMLError as exc:
        raise ValidationError("asset.edit.invalid_yaml", f"the document is not valid YAML: {exc}") from None
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ValidationError("asset.edit.invalid_document", "the document must be a mapping of keys (name: …)", pointer="")
    return _plain(value, "")  # type: ignore[no-any-return]


__all__ = ["BLANK", "ERROR_PREFIX", "KEYS_HELP", "from_document", "strip_error_comments", "to_document", "with_error_comments"]
