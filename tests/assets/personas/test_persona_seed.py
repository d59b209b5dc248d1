"""The built-in default persona seed."""

from __future__ import annotations

from roleplay.assets.personas import DEFAULT_PERSONA_SEED, DEFAULT_PERSONA_SEEDS, parse_persona
from roleplay.assets.seeding import SeedAction, SeedMarker, StoredAsset, plan_seed_upgrade


def test_identity_and_content():
    seed = DEFAULT_PERSONA_SEED
    assert (seed.kind, seed.key, seed.make_default, seed.version) == ("persona", "rp.seed.persona.default", True, 2)
    persona = parse_persona(seed.content)
    # A neutral name: it replaces {{user}} in every card until the user sets their own.
    assert persona.name == "用户" and persona.avatar is None
    # the persona is the user's identity: the seed tells the Writer not to invent it
    assert "用户" in persona.description and "不要替" in persona.description


def test_english_default_persona_is_neutral_and_shares_the_key():
    en = DEFAULT_PERSONA_SEEDS["en"]
    persona = parse_persona(en.content)
    assert persona.name == "User" and "do not invent" in persona.description
    assert (en.key, en.version) == (DEFAULT_PERSONA_SEED.key, DEFAULT_PERSONA_SEED.version)


def test_the_v1_protagonist_persona_upgrades_when_unedited():
    v1 = StoredAsset("per_1", {"name": "主角", "description": DEFAULT_PERSONA_SEED.content["description"]})
    marker = SeedMarker(DEFAULT_PERSONA_SEED.key, "persona", 1, None, "per_1")
    plan = plan_seed_upgrade(DEFAULT_PERSONA_SEED, v1, marker)
    assert plan.action is SeedAction.UPGRADE and plan.content["name"] == "用户"


def test_edited_default_persona_is_kept():
    created = plan_seed_upgrade(DEFAULT_PERSONA_SEED, None, None)
    marker = created.marker.bound_to("per_1")
    renamed = {**DEFAULT_PERSONA_SEED.content, "name": "阿遥"}
    assert plan_seed_upgrade(DEFAULT_PERSONA_SEED, StoredAsset("per_1", renamed), marker).action is SeedAction.KEEP_EDITED
    same = StoredAsset("per_1", dict(DEFAULT_PERSONA_SEED.content))
    assert plan_seed_upgrade(DEFAULT_PERSONA_SEED, same, marker).action is SeedAction.UP_TO_DATE
