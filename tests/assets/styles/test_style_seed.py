"""The built-in 通用叙事 writing style seed."""

from __future__ import annotations

from roleplay.assets.presets import EXAMPLE_PRESET_SEED
from roleplay.assets.seeding import SeedAction, plan_seed_upgrade
from roleplay.assets.styles import GENERAL_NARRATIVE_SEED, parse_writing_style


def test_identity_and_default():
    seed = GENERAL_NARRATIVE_SEED
    assert (seed.kind, seed.key, seed.version, seed.make_default) == ("writing_style", "rp.seed.writing-style.general-narrative", 1, True)
    assert plan_seed_upgrade(seed, None, None).action is SeedAction.CREATE


def test_covers_exactly_the_expressive_duties_from_the_spec():
    style = parse_writing_style(GENERAL_NARRATIVE_SEED.content)
    assert style.name == "通用叙事" and style.applicability and style.contributes()
    for duty in ("第三人称限知", "句法节奏", "叙述焦点", "动作与空间", "对白穿插", "感官选择", "修辞克制"):
        assert duty in style.requirements, duty
    # narrative duties belong to the preset, so the style must not claim them
    for preset_duty in ("连续性", "角色自主", "收束"):
        assert preset_duty not in style.requirements


def test_style_and_example_preset_do_not_overlap():
    guidance = EXAMPLE_PRESET_SEED.content["fields"]
    writing = next(f for f in guidance if f["id"] == "writing-guidance")["content"]
    for style_duty in ("第三人称", "句法节奏", "修辞"):
        assert style_duty not in writing
