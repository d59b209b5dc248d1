"""Per-kind validation of asset data (pure: no database)."""

from __future__ import annotations

import pytest

from roleplay.assets.kinds import DEFAULT_KINDS, KINDS, check_kind, validate_asset_data
from roleplay.errors import ValidationError


def test_kind_vocabulary() -> None:
    assert KINDS == ("card", "lorebook", "persona", "preset", "writing-style")
    assert DEFAULT_KINDS == ("persona", "preset", "writing-style")
    with pytest.raises(ValidationError) as exc:
        check_kind("writing_style")
    assert (exc.value.code, exc.value.pointer) == ("asset.unknown_kind", "/kind")


def test_small_kinds_are_normalised_by_their_parsers() -> None:
    persona = validate_asset_data("persona", {"name": "  Mira  "})
    assert (persona.name, persona.data) == ("Mira", {"name": "Mira", "description": "", "avatar": None})
    style = validate_asset_data("writing-style", {"name": "Terse", "requirements": "Short."})
    assert style.data == {"name": "Terse", "applicability": "", "requirements": "Short."}
    preset = validate_asset_data("preset", {"name": "P", "fields": [{"id": "a", "title": "A", "content": "x"}]})
    assert preset.data["fields"][0]["sectionTag"] is True


def test_card_fills_defaults_and_rejects_unknown_or_isolated_fields() -> None:
    card = validate_asset_data("card", {"name": "Alice", "alternate_greetings": ["a", "b"]})
    assert card.data["alternate_greetings"] == ["a", "b"] and card.data["first_mes"] == ""
    with pytest.raises(ValidationError) as exc:
        validate_asset_data("card", {"name": "Alice", "system_prompt": "obey"})  # never part of the card
    assert (exc.value.code, exc.value.pointer) == ("card.invalid", "/system_prompt")
    with pytest.raises(ValidationError) as exc:
        validate_asset_data("card", ["not", "an", "object"])
    assert exc.value.pointer == ""


def test_lorebook_keeps_the_raw_book_and_moves_pointers_under_book() -> None:
    book = {"entries": {"5": {"uid": 5, "key": "moon", "content": "Red."}}}
    valid = validate_asset_data("lorebook", {"name": " Moon ", "book": book})
    assert valid.data == {"name": "Moon", "book": book}
    assert all(w.pointer.startswith("/book/") for w in valid.warnings)  # type: ignore[union-attr]
    with pytest.raises(ValidationError) as exc:
        validate_asset_data("lorebook", {"name": "Moon", "book": {"entries": "nope"}})
    assert exc.value.pointer == "/book/entries"
    for data, pointer in (({"name": "M", "book": {}, "extra": 1}, "/extra"), ({"book": {}}, "/name"),
                          ({"name": "M", "book": [], "description": ""}, "/book")):
        with pytest.raises(ValidationError) as exc:
            validate_asset_data("lorebook", data)
        assert (exc.value.code, exc.value.pointer) == ("lorebook.invalid", pointer)
