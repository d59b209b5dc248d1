"""The built-in 示例预设 seed content."""

from __future__ import annotations

import json

import re

from roleplay.assets.presets import EXAMPLE_PRESET_SEED, EXAMPLE_PRESET_SEEDS, contributing_fields, parse_preset
from roleplay.assets.seeding import SeedAction, SeedMarker, StoredAsset, plan_seed_upgrade
from roleplay.assets.presets.seed import SEED_KEY

EXPECTED = [
    ("declaration", "声明", "top"),
    ("task", "任务描述", "top"),
    ("writing-guidance", "写作指导", "bottom"),
    ("reasoning-guidance", "思维链指导", "bottom"),
    ("format", "格式要求", "bottom"),
]


def test_example_preset_has_the_five_spec_fields_in_order():
    preset = parse_preset(EXAMPLE_PRESET_SEED.content)
    assert preset.name == "示例预设"
    assert [(f.id, f.title, f.position) for f in preset.fields] == EXPECTED
    assert all(f.enabled and f.section_tag for f in preset.fields)
    # every field carries real text, so every field becomes an rp.preset:<id> source
    assert [f.source_id for f in contributing_fields(preset)] == [f"rp.preset:{i}" for i, _, _ in EXPECTED]


def test_seed_identity_is_stable():
    assert EXAMPLE_PRESET_SEED.key == SEED_KEY == "rp.seed.preset.example"
    assert EXAMPLE_PRESET_SEED.kind == "preset"
    assert EXAMPLE_PRESET_SEED.make_default is True
    assert EXAMPLE_PRESET_SEED.version == 2
    assert EXAMPLE_PRESET_SEED.content_hash.startswith("sha256:") and len(EXAMPLE_PRESET_SEED.content_hash) == 71


def test_division_of_labour_with_the_writing_style():
    # The spec keeps immersion, continuity, autonomy, progress and closure in the preset.
    guidance = parse_preset(EXAMPLE_PRESET_SEED.content).field("writing-guidance").content
    for duty in ("沉浸", "连续性", "角色自主", "故事推进", "收束"):
        assert duty in guidance


def test_task_keeps_the_persona_as_user_controlled_identity():
    task = parse_preset(EXAMPLE_PRESET_SEED.content).field("task").content
    assert "用户人设" in task and "不要从角色卡推断用户" in task


def test_seed_text_is_ours_not_copied_from_the_corpus(corpus_dir):
    seed_text = json.dumps([seed.content for seed in EXAMPLE_PRESET_SEEDS.values()], ensure_ascii=False)
    for path in sorted((corpus_dir / "presets").glob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        for prompt in data["prompts"]:
            content = (prompt.get("content") or "").strip()
            if len(content) >= 20:
                assert content not in seed_text, (path.name, prompt["identifier"])


def test_english_preset_keeps_the_field_ids_and_positions():
    en = parse_preset(EXAMPLE_PRESET_SEEDS["en"].content)
    assert en.name == "Example preset"
    assert [(f.id, f.position) for f in en.fields] == [(i, pos) for i, _, pos in EXPECTED]
    assert not re.search(r"[\u3000-\u9fff\uff00-\uffef]", str(EXAMPLE_PRESET_SEEDS["en"].content))


def test_format_never_forces_a_language_other_than_the_story():
    for language, seed in EXAMPLE_PRESET_SEEDS.items():
        fmt = parse_preset(seed.content).field("format").content
        assert "简体中文" not in fmt, language
    assert "所用的语言" in parse_preset(EXAMPLE_PRESET_SEEDS["zh"].content).field("format").content
    assert "language of the story" in parse_preset(EXAMPLE_PRESET_SEEDS["en"].content).field("format").content


def test_unedited_v1_upgrades_and_a_language_switch_rewrites_only_unedited_copies():
    zh, en = EXAMPLE_PRESET_SEEDS["zh"], EXAMPLE_PRESET_SEEDS["en"]
    v1 = dict(zh.content)
    v1["fields"] = [
        {**f, "content": f["content"].replace("使用故事（角色卡与对话）所用的语言书写；写中文时使用全角标点", "使用简体中文与全角标点")}
        for f in zh.content["fields"]
    ]
    marker = SeedMarker(zh.key, "preset", 1, None, "pre_1")
    assert plan_seed_upgrade(zh, StoredAsset("pre_1", v1), marker).action is SeedAction.UPGRADE
    # zh written, language now en: unedited → rewritten in English; edited → kept.
    written = SeedMarker(zh.key, "preset", 2, zh.content_hash, "pre_1")
    switched = plan_seed_upgrade(en, StoredAsset("pre_1", dict(zh.content)), written)
    assert switched.action is SeedAction.UPGRADE and switched.content["name"] == "Example preset"
    edited = {**zh.content, "name": "我的预设"}
    assert plan_seed_upgrade(en, StoredAsset("pre_1", edited), written).action is SeedAction.KEEP_EDITED
