"""The built-in default persona seed."""

from __future__ import annotations

from roleplay.assets.personas import DEFAULT_PERSONA_SEED, parse_persona
from roleplay.assets.seeding import SeedAction, StoredAsset, plan_seed_upgrade


def test_identity_and_content():
    seed = DEFAULT_PERSONA_SEED
    assert (seed.kind, seed.key, seed.make_default) == ("persona", "rp.seed.persona.default", True)
    persona = parse_persona(seed.content)
    assert persona.name == "主角" and persona.avatar is None
    # the persona is the user's identity: the seed tells the Writer not to invent it
    assert "用户" in persona.description and "不要替" in persona.description


def test_edited_default_persona_is_kept():
    created = plan_seed_upgrade(DEFAULT_PERSONA_SEED, None, None)
    marker = created.marker.bound_to("per_1")
    renamed = {**DEFAULT_PERSONA_SEED.content, "name": "阿遥"}
    assert plan_seed_upgrade(DEFAULT_PERSONA_SEED, StoredAsset("per_1", renamed), marker).action is SeedAction.KEEP_EDITED
    same = StoredAsset("per_1", dict(DEFAULT_PERSONA_SEED.content))
    assert plan_seed_upgrade(DEFAULT_PERSONA_SEED, same, marker).action is SeedAction.UP_TO_DATE
