from __future__ import annotations

import pydantic
import pytest

from roleplay.assets.cards.model import CardAsset, CharacterCard, IsolatedPrompts, default_assets


def test_defaults_follow_the_v3_spec():
    card = CharacterCard(name="Alice")
    assert card.alternate_greetings == [] and card.group_only_greetings == [] and card.extensions == {}
    default_icon = {"type": "icon", "uri": "ccdefault:", "name": "main", "ext": "png"}
    assert [a.model_dump() for a in card.assets] == [default_icon]
    assert card.nickname is None and card.creation_date is None


def test_default_assets_are_fresh_objects():
    first, second = default_assets(), default_assets()
    first[0].name = "changed"
    assert second[0].name == "main"


def test_display_name_prefers_nickname():
    assert CharacterCard(name="Alice Liddell", nickname="Ally").display_name() == "Ally"
    assert CharacterCard(name="Alice Liddell", nickname="").display_name() == "Alice Liddell"


def test_unknown_card_fields_are_refused_so_nothing_is_silently_lost():
    with pytest.raises(pydantic.ValidationError):
        CharacterCard(name="A", system_prompt="x")


def test_asset_keeps_unknown_keys():
    asset = CardAsset(type="emotion", uri="embeded://a.png", name="happy", ext="png", x_scale=2)
    assert asset.model_dump()["x_scale"] == 2


def test_isolated_prompts_are_untrusted_by_default():
    prompts = IsolatedPrompts(system_prompt="You are X")
    assert prompts.trusted is False and not prompts.is_empty
    assert IsolatedPrompts().is_empty
