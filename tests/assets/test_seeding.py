"""Seed planning: create once, never recreate deleted, upgrade unedited in place, keep edited."""

from __future__ import annotations

import pytest

from roleplay.assets.presets import EXAMPLE_PRESET_SEED
from roleplay.assets.presets.model import parse_preset, update_field
from roleplay.assets.seeding import (
    SeedAction,
    SeedMarker,
    SeedSpec,
    StoredAsset,
    content_hash,
    plan_seed_upgrade,
)
from roleplay.errors import ValidationError


def normalize(data):
    return parse_preset(data).to_json_dict()


V1 = {
    "name": "示例",
    "fields": [
        {"id": "declaration", "title": "声明", "content": "旧声明"},
        {"id": "format", "title": "格式要求", "content": "旧格式", "position": "bottom"},
    ],
}
V2 = {
    "name": "示例",
    "fields": [
        {"id": "declaration", "title": "声明", "content": "新声明"},
        {"id": "task", "title": "任务描述", "content": "新任务"},
        {"id": "format", "title": "格式要求", "content": "新格式", "position": "bottom"},
    ],
}
SEED_V1 = SeedSpec(kind="preset", key="test.seed", version=1, content=V1, normalize=normalize)
SEED_V2 = SeedSpec(
    kind="preset",
    key="test.seed",
    version=2,
    content=V2,
    normalize=normalize,
    legacy_hashes=frozenset({SEED_V1.content_hash}),
)


def created_marker(seed: SeedSpec, asset_id: str = "ast_1") -> SeedMarker:
    plan = plan_seed_upgrade(seed, None, None)
    assert plan.marker is not None
    return plan.marker.bound_to(asset_id)


def test_first_initialisation_creates_default_and_marker():
    plan = plan_seed_upgrade(SEED_V1, None, None)
    assert plan.action is SeedAction.CREATE and plan.make_default is True
    assert plan.content == normalize(V1)
    assert plan.marker == SeedMarker("test.seed", "preset", 1, SEED_V1.content_hash, None)
    assert plan.to_dict()["marker"]["assetId"] is None


def test_deleted_seed_is_never_recreated():
    plan = plan_seed_upgrade(SEED_V2, None, created_marker(SEED_V1))
    assert plan.action is SeedAction.SKIP_DELETED
    assert plan.content is None and plan.marker is None and plan.make_default is False


def test_current_content_is_up_to_date_and_needs_no_write():
    marker = created_marker(SEED_V1)
    plan = plan_seed_upgrade(SEED_V1, StoredAsset("ast_1", V1), marker)
    assert plan.action is SeedAction.UP_TO_DATE and plan.marker is None and plan.content is None


def test_unedited_old_version_is_upgraded_in_place_keeping_field_ids():
    marker = created_marker(SEED_V1)
    stored = StoredAsset("ast_1", normalize(V1))
    plan = plan_seed_upgrade(SEED_V2, stored, marker)
    assert plan.action is SeedAction.UPGRADE and plan.make_default is False
    assert plan.content == normalize(V2)
    old_ids = [f["id"] for f in stored.content["fields"]]
    new_ids = [f["id"] for f in plan.content["fields"]]
    assert set(old_ids) <= set(new_ids)  # kept fields keep their ids
    assert plan.marker == SeedMarker("test.seed", "preset", 2, SEED_V2.content_hash, "ast_1")


def test_hash_ignores_key_order_and_name_padding():
    reordered = {"fields": [dict(reversed(list(f.items()))) for f in V1["fields"]], "name": "  示例 "}
    plan = plan_seed_upgrade(SEED_V2, StoredAsset("ast_1", reordered), created_marker(SEED_V1))
    assert plan.action is SeedAction.UPGRADE


def test_edited_asset_is_never_overwritten():
    marker = created_marker(SEED_V1)
    edited = update_field(parse_preset(V1), "format", {"content": "我自己的格式"}).to_json_dict()
    plan = plan_seed_upgrade(SEED_V2, StoredAsset("ast_1", edited), marker)
    assert plan.action is SeedAction.KEEP_EDITED
    assert plan.content is None and plan.marker is None  # the stored marker stays as it is


def test_toggling_or_reordering_counts_as_an_edit():
    marker = created_marker(SEED_V1)
    toggled = update_field(parse_preset(V1), "declaration", {"enabled": False}).to_json_dict()
    assert plan_seed_upgrade(SEED_V2, StoredAsset("ast_1", toggled), marker).action is SeedAction.KEEP_EDITED


def test_unparseable_stored_content_is_treated_as_edited():
    plan = plan_seed_upgrade(SEED_V2, StoredAsset("ast_1", {"name": ""}), created_marker(SEED_V1))
    assert plan.action is SeedAction.KEEP_EDITED and "parse" in plan.reason


def test_legacy_asset_without_marker_is_adopted():
    # Installed before markers existed: the store found the asset by its seed key.
    unedited = plan_seed_upgrade(SEED_V2, StoredAsset("ast_9", V1), None)
    assert unedited.action is SeedAction.UPGRADE
    assert unedited.marker == SeedMarker("test.seed", "preset", 2, SEED_V2.content_hash, "ast_9")
    current = plan_seed_upgrade(SEED_V2, StoredAsset("ast_9", V2), None)
    assert current.action is SeedAction.UP_TO_DATE and current.marker is not None
    edited = plan_seed_upgrade(SEED_V2, StoredAsset("ast_9", {**V1, "name": "我的"}), None)
    assert edited.action is SeedAction.KEEP_EDITED
    assert edited.marker == SeedMarker("test.seed", "preset", 0, None, "ast_9")
    # once adopted, deleting it still prevents re-creation
    assert plan_seed_upgrade(SEED_V2, None, edited.marker).action is SeedAction.SKIP_DELETED


def test_upgrade_chain_v1_to_v3_without_skipping():
    v3 = {**V2, "name": "示例 v3"}
    seed_v3 = SeedSpec(
        kind="preset",
        key="test.seed",
        version=3,
        content=v3,
        normalize=normalize,
        legacy_hashes=frozenset({SEED_V1.content_hash, SEED_V2.content_hash}),
    )
    # a v1 copy whose marker predates hashes (content_hash None) is still recognised via legacy hashes
    marker = SeedMarker("test.seed", "preset", 1, None, "ast_1")
    assert plan_seed_upgrade(seed_v3, StoredAsset("ast_1", V1), marker).action is SeedAction.UPGRADE


def test_marker_mismatches_are_errors():
    other = SeedMarker("other.seed", "preset", 1, None, "ast_1")
    with pytest.raises(ValidationError) as err:
        plan_seed_upgrade(SEED_V1, StoredAsset("ast_1", V1), other)
    assert err.value.code == "seed.marker_mismatch"
    with pytest.raises(ValidationError):
        plan_seed_upgrade(SEED_V1, StoredAsset("ast_2", V1), created_marker(SEED_V1, "ast_1"))


def test_marker_round_trip_and_validation():
    marker = created_marker(SEED_V1)
    assert SeedMarker.from_dict(marker.to_dict()) == marker
    with pytest.raises(ValidationError) as err:
        SeedMarker.from_dict({"key": "k"})
    assert err.value.code == "seed.marker_invalid"
    with pytest.raises(ValidationError):
        SeedMarker.from_dict({"key": "k", "kind": "preset", "version": True})


def test_invalid_seed_content_fails_at_definition_time():
    with pytest.raises(ValidationError):
        SeedSpec(kind="preset", key="k", version=1, content={"name": ""}, normalize=normalize)
    with pytest.raises(ValueError):
        SeedSpec(kind="preset", key="k", version=0, content=V1, normalize=normalize)


def test_shipped_example_preset_seed_plans_create():
    plan = plan_seed_upgrade(EXAMPLE_PRESET_SEED, None, None)
    assert plan.action is SeedAction.CREATE and plan.make_default
    assert content_hash(plan.content) == EXAMPLE_PRESET_SEED.content_hash


def test_seed_languages_share_key_and_version_and_count_each_other_as_pristine():
    from roleplay.assets.personas import parse_persona
    from roleplay.assets.seeding import seed_languages

    specs = seed_languages(
        "persona",
        "t.persona",
        3,
        {"en": {"name": "User"}, "zh": {"name": "用户"}},
        lambda data: parse_persona(data).to_json_dict(),
        legacy_hashes=frozenset({"sha256:old"}),
    )
    en, zh = specs["en"], specs["zh"]
    assert (en.key, en.version, zh.key, zh.version) == ("t.persona", 3, "t.persona", 3)
    assert en.legacy_hashes == {"sha256:old", zh.content_hash} and zh.legacy_hashes == {"sha256:old", en.content_hash}
    written = plan_seed_upgrade(zh, None, None).marker.bound_to("per_1")  # type: ignore[union-attr]
    switched = plan_seed_upgrade(en, StoredAsset("per_1", dict(zh.content)), written)
    assert switched.action is SeedAction.UPGRADE and switched.content == dict(en.content)
