"""Persona model (roleplay.assets.personas.model)."""

from __future__ import annotations

import pytest

from roleplay.assets.personas import Persona, parse_persona, update_persona
from roleplay.errors import ValidationError


def test_minimal_and_full_round_trip():
    minimal = parse_persona({"name": "林"})
    assert minimal == Persona(name="林", description="", avatar=None)
    full = parse_persona({"name": "林", "description": "旅店老板的女儿。", "avatar": "avatars/01hx9.png"})
    assert parse_persona(full.to_json_dict()) == full
    assert full.to_json_dict()["avatar"] == "avatars/01hx9.png"


@pytest.mark.parametrize(
    "avatar, code",
    [
        ("https://example.com/a.png", "persona.avatar_not_reference"),
        ("file:x", "persona.avatar_not_reference"),
        ("data:image/png;base64,AAAA", "persona.bad_format"),
        ("avatars/../../etc/passwd", "persona.avatar_not_reference"),
        ("/abs/path.png", "persona.bad_format"),
        ("has space.png", "persona.bad_format"),
        ("", "persona.blank"),
        ("a" * 257, "persona.too_long"),
        (12, "persona.wrong_type"),
    ],
)
def test_avatar_must_be_an_opaque_stored_reference(avatar, code):
    with pytest.raises(ValidationError) as err:
        parse_persona({"name": "林", "avatar": avatar})
    assert [(p.code, p.pointer) for p in err.value.problems] == [(code, "/avatar")]


def test_blob_style_references_are_accepted():
    assert parse_persona({"name": "林", "avatar": "blob:sha256-3fa9"}).avatar == "blob:sha256-3fa9"


def test_bounds_and_codes():
    with pytest.raises(ValidationError) as err:
        parse_persona({"name": "名" * 81, "description": "d" * 20_001, "age": 3})
    assert err.value.code == "persona.invalid"
    assert {(p.code, p.pointer) for p in err.value.problems} == {
        ("persona.too_long", "/name"),
        ("persona.too_long", "/description"),
        ("persona.unknown_key", "/age"),
    }


def test_update_can_clear_the_avatar():
    persona = parse_persona({"name": "林", "avatar": "blob:1"})
    assert update_persona(persona, avatar=None).avatar is None
    with pytest.raises(ValidationError):
        update_persona(persona, name="  ")
