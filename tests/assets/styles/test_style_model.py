"""Writing-style model (roleplay.assets.styles.model)."""

from __future__ import annotations

import pytest

from roleplay.assets.styles import WritingStyle, parse_writing_style, update_writing_style
from roleplay.errors import ValidationError


def test_fields_defaults_and_round_trip():
    style = parse_writing_style({"name": " 冷峻 ", "requirements": "短句。"})
    assert style == WritingStyle(name="冷峻", applicability="", requirements="短句。")
    assert style.to_json_dict() == {"name": "冷峻", "applicability": "", "requirements": "短句。"}
    assert parse_writing_style(style.to_json_dict()) == style


def test_blank_requirements_contribute_nothing():
    assert parse_writing_style({"name": "a", "requirements": "写短句"}).contributes()
    assert not parse_writing_style({"name": "a", "requirements": " \n"}).contributes()


def test_problems_carry_kind_codes_and_pointers():
    with pytest.raises(ValidationError) as err:
        parse_writing_style({"name": "", "applicability": "说" * 2001, "requirements": 3, "tone": "x"})
    assert err.value.code == "writing_style.invalid"
    assert {(p.code, p.pointer) for p in err.value.problems} == {
        ("writing_style.blank", "/name"),
        ("writing_style.too_long", "/applicability"),
        ("writing_style.wrong_type", "/requirements"),
        ("writing_style.unknown_key", "/tone"),
    }
    with pytest.raises(ValidationError) as long_req:
        parse_writing_style({"name": "a", "requirements": "字" * 50_001})
    assert long_req.value.problems[0].code == "writing_style.too_long"


def test_update_revalidates_and_never_mutates():
    style = parse_writing_style({"name": "a", "requirements": "r"})
    changed = update_writing_style(style, applicability="悬疑题材")
    assert changed.applicability == "悬疑题材" and style.applicability == ""
    with pytest.raises(ValidationError) as err:
        update_writing_style(style, requirements="a\x07")
    assert err.value.problems[0].code == "writing_style.control_char"
    with pytest.raises(Exception):
        style.name = "b"  # frozen
