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
    for data, pointer in (
        ({"name": "M", "book": {}, "extra": 1}, "/extra"),
        ({"book": {}}, "/name"),
        ({"name": "M", "book": [], "description": ""}, "/book"),
    ):
        with pytest.raises(ValidationError) as exc:
            validate_asset_data("lorebook", data)
        assert (exc.value.code, exc.value.pointer) == ("lorebook.invalid", pointer)


# --- card text fields follow the shared character rules (issue 18 item 11) -------------------------


@pytest.mark.parametrize(
    ("field", "value", "code"),
    [
        ("name", "Evil\x1b]0;pwned\x07", "card.control_char"),
        ("name", "Two\nlines", "card.bad_name_char"),
        ("name", "Ali\u202eecila", "card.bad_name_char"),
        ("name", "Al\u200bice", "card.bad_name_char"),
        ("nickname", "Al\nly", "card.bad_name_char"),
        ("description", "red \x1b[31mtext", "card.control_char"),
        ("first_mes", "ding\x07", "card.control_char"),
        ("personality", "nul\x00", "card.control_char"),
        ("scenario", "c1 \x9b", "card.control_char"),
        ("creator_notes", "half \ud83d", "card.lone_surrogate"),
    ],
)
def test_card_text_fields_reject_control_characters(field, value, code) -> None:
    data = {"name": "Alice", field: value}
    with pytest.raises(ValidationError) as exc:
        validate_asset_data("card", data)
    assert exc.value.code == "card.invalid"
    assert (exc.value.problems[0].code, exc.value.problems[0].pointer) == (code, f"/{field}")


def test_card_list_fields_point_at_the_item() -> None:
    with pytest.raises(ValidationError) as exc:
        validate_asset_data("card", {"name": "Alice", "alternate_greetings": ["ok", "bad\x1b[2J"]})
    assert exc.value.problems[0].pointer == "/alternate_greetings/1"


def test_card_keeps_what_real_cards_need() -> None:
    text = "Line one\r\nLine two\t<b>\u200d👩\u200d💻 שלום\u200f \u202bمرحبا\u202c </section>"
    card = validate_asset_data("card", {"name": " 👩\u200d💻 Coder ", "description": text, "first_mes": text})
    assert card.data["description"] == text and card.name == "👩\u200d💻 Coder"


@pytest.mark.parametrize("kind", ["lorebook", "preset", "persona"])
def test_lone_surrogates_are_refused_for_every_kind(kind) -> None:
    data = {"name": "x\udcff"} if kind != "lorebook" else {"name": "b", "book": {"entries": {"0": {"content": "\ud800"}}}}
    with pytest.raises(ValidationError) as exc:
        validate_asset_data(kind, data)
    assert exc.value.code == f"{kind}.invalid" and exc.value.problems[0].code == f"{kind}.lone_surrogate"
