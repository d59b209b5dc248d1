"""Shared validation vocabulary for asset text: the character rules every boundary applies, plus
the pydantic helpers of the small text assets (presets, writing styles, personas).

The text rules live here, not in one kind's package, because every asset kind applies them: the
JSON decode path (``cards/jsonio.py``, used by card, lorebook and preset imports) replaces lone
surrogates, and the store validators (``kinds.py``) reject control characters in any kind's text.

The small kinds have the same needs: bounded texts, no control characters, camelCase JSON on the
wire, and one ``ValidationError`` that lists every problem with a JSON Pointer instead of
pydantic's own exception type. Keeping that here means the personas and styles packages share one
error mapping and their codes stay aligned (``<kind>.too_long`` means the same everywhere).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated, Any, Iterator, Mapping, TypeVar

import pydantic
from annotated_types import GroupedMetadata
from pydantic import AfterValidator, BaseModel, ConfigDict, Strict, StringConstraints
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError

from roleplay.errors import Problem, ValidationError, pointer_from_parts

# Rejected in any stored text. C0 controls other than tab, newline and carriage return, DEL and
# the C1 controls never belong in prose: they mean a binary paste or a mis-decoded file, some model
# providers reject them, and ESC/CSI/OSC drive terminals. Newlines and tabs stay (descriptions are
# multi-line); bidi marks and zero-width joiners stay (Arabic, Hebrew, Persian, Indic scripts and
# emoji sequences need them).
_CONTROL_RE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
# Rejected in a one-line label (a name) as well: line and paragraph breaks and tabs, the bidi
# embedding/override/isolate controls (an unclosed U+202E in a name reverses whatever a list shows
# after it), and the invisible spaces U+200B, U+2060 and U+FEFF (they only make two different names
# look identical). ZWJ/ZWNJ (U+200C/U+200D), variation selectors and LRM/RLM stay legal.
_NAME_RE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\u200b\u2060\ufeff]")
# Half of a UTF-16 surrogate pair is no character: it cannot be encoded as UTF-8, so it can be
# neither stored nor printed. JSON ``"\ud800"`` escapes and undecodable command-line bytes make them.
_SURROGATE_RE = re.compile(r"[\ud800-\udfff]")
REPLACEMENT = "\ufffd"

# Bounds shared by every kind. Names are what lists and prompt-workbench labels show, so they stay
# short; long texts are bounded generously because community presets carry multi-page prompts.
NAME_MAX = 80
NOTE_MAX = 2_000
LONG_TEXT_MAX = 100_000


# One scan per text: the union of what each rule rejects, classified only when something matched.
_PROSE_BAD_RE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff]")
_NAME_BAD_RE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\u200b\u2060\ufeff\ud800-\udfff]")


def text_violation(value: str, *, name: bool = False) -> tuple[str, str, int] | None:
    """First character ``value`` may not hold, as (code suffix, "U+XXXX", offset), else None.

    Suffixes: ``lone_surrogate``, ``control_char`` and, for names, ``bad_name_char``."""
    match = (_NAME_BAD_RE if name else _PROSE_BAD_RE).search(value)
    if match is None:
        return None
    char = match.group()
    if "\ud800" <= char <= "\udfff":
        suffix = "lone_surrogate"
    elif _CONTROL_RE.match(char):
        suffix = "control_char"
    else:
        suffix = "bad_name_char"
    return suffix, f"U+{ord(char):04X}", match.start()


_VIOLATION_TEXT = {
    "lone_surrogate": "text contains a lone UTF-16 surrogate {char} at offset {offset} (not a character)",
    "control_char": "text contains control character {char} at offset {offset}",
    "bad_name_char": "a name must be one line without invisible or direction-changing characters; {char} at offset {offset}",
}


def text_problem(kind: str, value: str, pointer: str, *, name: bool = False) -> Problem | None:
    """``text_violation`` as a ``<kind>.<suffix>`` problem at ``pointer``."""
    found = text_violation(value, name=name)
    if found is None:
        return None
    suffix, char, offset = found
    message = _VIOLATION_TEXT[suffix].format(char=char, offset=offset)
    return Problem(f"{kind}.{suffix}", message, pointer, {"char": char, "offset": offset})


_SCALARS = frozenset({int, float, bool, type(None)})


def iter_strings(value: Any, base: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], str]]:
    """Every string in a JSON value, keys included (a key's path is its object's path plus it)."""
    stack: list[tuple[Any, tuple[Any, ...]]] = [(value, base)]
    push = stack.append
    while stack:
        node, path = stack.pop()
        kind = type(node)  # exact types first: an ABC isinstance per node dominates big books
        if kind is str:
            yield path, node
        elif kind is dict or (kind is not list and isinstance(node, Mapping)):
            for key, item in node.items():
                if type(key) is str:
                    yield (*path, key), key
                if type(item) is str:
                    yield (*path, key), item
                elif type(item) in _SCALARS:
                    continue
                else:
                    push((item, (*path, key)))
        elif kind is list or kind is tuple:
            for i, item in enumerate(node):
                if type(item) is str:
                    yield (*path, i), item
                elif type(item) not in _SCALARS:
                    push((item, (*path, i)))


def surrogate_problems(kind: str, value: Any, base: tuple[Any, ...] = ()) -> list[Problem]:
    """A ``<kind>.lone_surrogate`` problem for every string of a JSON value that holds one."""
    problems = []
    for path, text in iter_strings(value, base):
        match = None if text.isascii() else _SURROGATE_RE.search(text)
        if match:
            char = f"U+{ord(match.group()):04X}"
            problems.append(
                Problem(
                    f"{kind}.lone_surrogate",
                    f"text contains a lone UTF-16 surrogate {char} at offset {match.start()} (not a character)",
                    pointer_from_parts(path),
                    {"char": char, "offset": match.start()},
                )
            )
    return problems


def replace_lone_surrogates(text: str) -> str:
    return _SURROGATE_RE.sub(REPLACEMENT, text)


def has_lone_surrogate(text: str) -> bool:
    # ``isascii`` is O(1) in CPython (a flag on the string): most texts skip the scan.
    return not text.isascii() and _SURROGATE_RE.search(text) is not None


def clean_label(text: str) -> str:
    """A label derived by us (from a file name, say), made valid as a name: characters a name may
    not hold become spaces and surrogates U+FFFD. Never applied to a user's own text."""
    return " ".join(_NAME_RE.sub(" ", replace_lone_surrogates(text)).split())


def _no_control_chars(value: str) -> str:
    found = text_violation(value)
    if found:
        suffix, char, offset = found
        raise PydanticCustomError(suffix, _VIOLATION_TEXT[suffix], {"char": char, "offset": offset})
    return value


def _name_chars(value: str) -> str:
    found = text_violation(value, name=True)
    if found:
        suffix, char, offset = found
        raise PydanticCustomError(suffix, _VIOLATION_TEXT[suffix], {"char": char, "offset": offset})
    return value


# The rules travel as one piece of ``Annotated`` metadata (pydantic expands a GroupedMetadata), so
# a field type is written ``Annotated[str, TextRule(n)]``: a type alias a type checker reads as str.
@dataclass(frozen=True)
class TextRule(GroupedMetadata):
    """Free text, may be empty, kept verbatim (leading spaces can matter in prompts)."""

    max_length: int

    def __iter__(self) -> Iterator[object]:
        yield Strict()
        yield StringConstraints(max_length=self.max_length)
        yield AfterValidator(_no_control_chars)


@dataclass(frozen=True)
class NameRule(GroupedMetadata):
    """A required label: surrounding whitespace stripped, must not end up blank."""

    max_length: int = NAME_MAX

    def __iter__(self) -> Iterator[object]:
        yield Strict()
        yield StringConstraints(strip_whitespace=True, min_length=1, max_length=self.max_length)
        yield AfterValidator(_name_chars)


def Text(max_length: int) -> Any:
    """``Annotated[str, TextRule(max_length)]``, for types built at run time."""
    return Annotated[str, TextRule(max_length)]


def Name(max_length: int = NAME_MAX) -> Any:
    """``Annotated[str, NameRule(max_length)]``, for types built at run time."""
    return Annotated[str, NameRule(max_length)]


class AssetModel(BaseModel):
    """Frozen, camelCase on the wire; unknown keys are errors (typos must not vanish). Scalars are
    strict per field (``Strict`` on texts, ``StrictBool``): ``1`` is not ``true`` and ``5`` is not
    a name. Containers stay lax so a JSON list can fill a tuple."""

    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        alias_generator=to_camel,
        populate_by_name=True,
        validate_default=True,
    )

    def to_json_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True)


M = TypeVar("M", bound=AssetModel)

# pydantic error types -> the stable suffix of our code. Anything unlisted becomes ``invalid``.
_SUFFIX = {
    "missing": "missing",
    "extra_forbidden": "unknown_key",
    "string_too_long": "too_long",
    "string_too_short": "too_short",
    "too_long": "too_many",
    "too_short": "too_few",
    "literal_error": "bad_value",
    "string_pattern_mismatch": "bad_format",
    "string_type": "wrong_type",
    "string_unicode": "lone_surrogate",  # pydantic-core refuses surrogates before our validators run
    "bool_type": "wrong_type",
    "list_type": "wrong_type",
    "model_type": "wrong_type",
    "model_attributes_type": "wrong_type",
    "dict_type": "wrong_type",
    "int_type": "wrong_type",
}


def problems_from_pydantic(kind: str, exc: pydantic.ValidationError, base: tuple[Any, ...] = ()) -> list[Problem]:
    problems: list[Problem] = []
    for err in exc.errors(include_url=False):
        ctx = err.get("ctx") or {}
        etype = err["type"]
        if etype == "string_too_short" and ctx.get("min_length") == 1:
            suffix = "blank"
        else:
            suffix = _SUFFIX.get(etype, etype if etype.isidentifier() else "invalid")
        # Custom model-level checks carry their own pointer because pydantic's loc stops at the model.
        pointer = ctx.get("pointer") or pointer_from_parts(base + tuple(err["loc"]))
        details = {k: v for k, v in ctx.items() if k != "pointer" and isinstance(v, (str, int, float, bool))}
        problems.append(Problem(code=f"{kind}.{suffix}", message=err["msg"], pointer=pointer, details=details))
    return problems


def invalid(kind: str, problems: list[Problem]) -> ValidationError:
    first = problems[0]
    message = first.message if len(problems) == 1 else f"{len(problems)} problems, first: {first.message}"
    return ValidationError(f"{kind}.invalid", message, pointer=first.pointer, problems=problems)


def parse_model(model: type[M], kind: str, data: Any, base: tuple[Any, ...] = ()) -> M:
    """Validate untrusted JSON-shaped data; every failure becomes one ``<kind>.invalid`` error."""
    if isinstance(data, model):
        return data
    if not isinstance(data, Mapping):
        raise ValidationError(
            f"{kind}.invalid",
            f"{kind} must be a JSON object, got {type(data).__name__}",
            pointer=pointer_from_parts(base),
            problems=[Problem(f"{kind}.wrong_type", "expected a JSON object", pointer_from_parts(base))],
        )
    try:
        return model.model_validate(dict(data))
    except pydantic.ValidationError as exc:
        raise invalid(kind, problems_from_pydantic(kind, exc, base)) from None


def rebuild(model_obj: M, kind: str, **changes: Any) -> M:
    """Copy with changes *and* full re-validation (``model_copy`` alone skips validators)."""
    data = {**model_obj.model_dump(by_alias=False), **changes}
    try:
        return type(model_obj).model_validate(data, by_alias=False, by_name=True)
    except pydantic.ValidationError as exc:
        raise invalid(kind, problems_from_pydantic(kind, exc)) from None
