"""The five shared asset kinds and how each one's data is validated before it is stored.

The asset store never writes data it has not run through the kind's own parser, so a bad edit or a
hostile import is rejected with the parser's JSON Pointer and nothing is written. What each kind
stores as ``data``:

* ``card`` — the normalised :class:`~roleplay.assets.cards.CharacterCard` (snake_case, as the card
  specs spell it). Isolated prompts and the embedded ``character_book`` are *not* part of it: the
  prompts live in a separate blob that only :meth:`AssetService.trust_isolated_prompts` may
  change (so a generic ``update`` can never flip the trust flag), and the book becomes its own
  ``lorebook`` asset.
* ``lorebook`` — ``{"name": …, "book": <raw SillyTavern world info or character_book>}``. The raw
  form is kept because it is what SillyTavern tools and card export exchange, and the lorebook
  package re-imports it losslessly at activation time; validation is a full
  :func:`~roleplay.assets.lorebook.import_lorebook` run, with its pointers moved under ``/book``.
* ``persona`` / ``preset`` / ``writing-style`` — the camelCase JSON of their pydantic models.

Every validator returns the normalised data (what gets stored and hashed), the display name (kept
in its own column for listing) and non-fatal warnings.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Callable

import pydantic

from roleplay.errors import Problem, RpError, ValidationError

from .cards import CharacterCard
from .cards.normalize import card_text_problems
from .lorebook import import_lorebook
from .personas import parse_persona
from .presets import parse_preset
from .styles import parse_writing_style
from .validation import invalid, problems_from_pydantic, surrogate_problems, text_violation

CARD = "card"
LOREBOOK = "lorebook"
PERSONA = "persona"
PRESET = "preset"
WRITING_STYLE = "writing-style"

KINDS: tuple[str, ...] = (CARD, LOREBOOK, PERSONA, PRESET, WRITING_STYLE)
# The spec gives persona, preset and writing style one default asset each (preselected for new
# sessions); cards and lorebooks have none.
DEFAULT_KINDS: tuple[str, ...] = (PERSONA, PRESET, WRITING_STYLE)

# The seed specs name writing styles with the model's own kind (``writing_style``); the store's
# kind vocabulary uses the hyphenated form the HTTP API and CLI show.
SEED_KIND_TO_ASSET_KIND = {"preset": PRESET, "writing_style": WRITING_STYLE, "persona": PERSONA}

LOREBOOK_NAME_MAX = 200
LOREBOOK_DESCRIPTION_MAX = 2_000


@dataclass(frozen=True)
class Validated:
    data: dict[str, Any]
    name: str
    warnings: list[Problem] = field(default_factory=list)


def check_kind(kind: Any, *, pointer: str = "/kind") -> str:
    if kind not in KINDS:
        raise ValidationError(
            "asset.unknown_kind",
            f"unknown asset kind {kind!r}; expected one of {', '.join(KINDS)}",
            pointer=pointer,
            details={"kind": str(kind)},
        )
    return kind


def _card(data: Any) -> Validated:
    if not isinstance(data, Mapping):
        raise ValidationError(
            "card.invalid",
            "card data must be a JSON object",
            pointer="",
            problems=[Problem("card.wrong_type", "expected a JSON object", "")],
        )
    try:
        card = CharacterCard.model_validate(dict(data))
    except pydantic.ValidationError as exc:
        raise invalid("card", problems_from_pydantic("card", exc)) from None
    problems = card_text_problems(card.model_dump(mode="python"))
    if problems:
        raise invalid("card", problems)
    if not card.name.strip():
        raise ValidationError(
            "card.invalid", "a card needs a non-blank name", pointer="/name", problems=[Problem("card.blank", "name is blank", "/name")]
        )
    return Validated(card.model_dump(mode="json"), card.name.strip())


def _prefixed(problem: Problem, prefix: str) -> Problem:
    pointer = prefix + problem.pointer if problem.pointer is not None else prefix
    return Problem(problem.code, problem.message, pointer, dict(problem.details))


def _lorebook_problem(code: str, message: str, pointer: str) -> ValidationError:
    return ValidationError("lorebook.invalid", message, pointer=pointer, problems=[Problem(code, message, pointer)])


def _lorebook(data: Any) -> Validated:
    if not isinstance(data, Mapping):
        raise _lorebook_problem("lorebook.wrong_type", "lorebook data must be a JSON object", "")
    unknown = sorted(set(data) - {"name", "description", "book"})
    if unknown:
        raise _lorebook_problem("lorebook.unknown_key", f"unknown key {unknown[0]!r}", f"/{unknown[0]}")
    name = data.get("name")
    if not isinstance(name, str) or not name.strip():
        raise _lorebook_problem("lorebook.blank", "a lorebook needs a non-blank name", "/name")
    name = name.strip()
    if len(name) > LOREBOOK_NAME_MAX or text_violation(name, name=True):
        raise _lorebook_problem(
            "lorebook.bad_name",
            f"name must be one line of ≤ {LOREBOOK_NAME_MAX} characters without control, invisible or direction-changing characters",
            "/name",
        )
    description = data.get("description", "")
    if not isinstance(description, str) or len(description) > LOREBOOK_DESCRIPTION_MAX:
        raise _lorebook_problem(
            "lorebook.bad_description", f"description must be text of ≤ {LOREBOOK_DESCRIPTION_MAX} characters", "/description"
        )
    book = data.get("book")
    if not isinstance(book, Mapping):
        raise _lorebook_problem("lorebook.wrong_type", "'book' must be a world-info or character_book object", "/book")
    try:
        parsed = import_lorebook(book, book_id="validate", name=name)
    except RpError as exc:
        # The lorebook package points into the book; callers see the pointer into the asset data.
        pointer = "/book" + (exc.pointer or "")
        raise ValidationError(
            exc.code, exc.message, pointer=pointer, details=exc.details, problems=[_prefixed(p, "/book") for p in exc.problems]
        ) from None
    out: dict[str, Any] = {"name": name, "book": dict(book)}
    if description:
        out["description"] = description
    return Validated(out, name, [_prefixed(w, "/book") for w in parsed.warnings])


def _model(parse: Callable[[Any], Any]) -> Callable[[Any], Validated]:
    def validate(data: Any) -> Validated:
        model = parse(data)
        return Validated(model.to_json_dict(), model.name)

    return validate


_VALIDATORS: dict[str, Callable[[Any], Validated]] = {
    CARD: _card,
    LOREBOOK: _lorebook,
    PERSONA: _model(parse_persona),
    PRESET: _model(parse_preset),
    WRITING_STYLE: _model(parse_writing_style),
}


def validate_asset_data(kind: str, data: Any) -> Validated:
    """Run ``kind``'s parser on untrusted data; raise its ``ValidationError`` (with pointer).

    Any kind's data is refused first if a string holds a lone surrogate: it could be neither
    stored (UTF-8) nor printed, and would otherwise fail deep inside the store."""
    check_kind(kind)
    problems = surrogate_problems(kind, data) if isinstance(data, (Mapping, list)) else []
    if problems:
        raise invalid(kind, problems)
    return _VALIDATORS[kind](data)


__all__ = [
    "CARD",
    "DEFAULT_KINDS",
    "KINDS",
    "LOREBOOK",
    "PERSONA",
    "PRESET",
    "SEED_KIND_TO_ASSET_KIND",
    "Validated",
    "WRITING_STYLE",
    "check_kind",
    "validate_asset_data",
]
