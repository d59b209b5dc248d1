"""Shared validation vocabulary for the small text assets (presets, writing styles, personas).

The three asset kinds have the same needs: bounded texts, no control characters, camelCase JSON on
the wire, and one ``ValidationError`` that lists every problem with a JSON Pointer instead of
pydantic's own exception type. Keeping that here means the personas and styles packages share one
error mapping and their codes stay aligned (``<kind>.too_long`` means the same everywhere).

The module is kind-agnostic on purpose: it lives beside presets only because presets are its first
user; nothing in it knows about presets.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Mapping, TypeVar

import pydantic
from pydantic import AfterValidator, BaseModel, ConfigDict, Strict, StringConstraints
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError

from roleplay.errors import Problem, ValidationError, pointer_from_parts

# C0 controls other than tab, newline and carriage return (and DEL) never belong in prose; they
# usually mean a binary paste or a mis-decoded file, and some model providers reject them.
_CONTROL_RE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")

# Bounds shared by every kind. Names are what lists and prompt-workbench labels show, so they stay
# short; long texts are bounded generously because community presets carry multi-page prompts.
NAME_MAX = 80
NOTE_MAX = 2_000
LONG_TEXT_MAX = 100_000


def _no_control_chars(value: str) -> str:
    match = _CONTROL_RE.search(value)
    if match:
        raise PydanticCustomError(
            "control_char",
            "text contains control character {char} at offset {offset}",
            {"char": f"U+{ord(match.group()):04X}", "offset": match.start()},
        )
    return value


def Text(max_length: int) -> Any:
    """Free text, may be empty, kept verbatim (leading spaces can matter in prompts)."""
    return Annotated[str, Strict(), StringConstraints(max_length=max_length), AfterValidator(_no_control_chars)]


def Name(max_length: int = NAME_MAX) -> Any:
    """A required label: surrounding whitespace stripped, must not end up blank."""
    return Annotated[
        str,
        Strict(),
        StringConstraints(strip_whitespace=True, min_length=1, max_length=max_length),
        AfterValidator(_no_control_chars),
    ]


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
