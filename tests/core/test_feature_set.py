"""The feature manager's saved set: the dependency closure, cascades, CAS and clear refusals."""

from __future__ import annotations

import pytest

from roleplay.core.feature_set import FeatureManager, closure, dependents
from roleplay.core.settings import FEATURES, SettingsStore
from roleplay.errors import ConflictError, RpError, ValidationError
from roleplay.harness.store import EventStore

pytestmark = pytest.mark.anyio

MVU_NEEDS = ("rp-character-card", "rp-lore-book", "rp-state")


def test_closure_adds_what_compat_mvu_needs_and_nothing_else_needs_state() -> None:
    assert closure(["rp-compat-mvu"]) == ("rp-state", "rp-character-card", "rp-lore-book", "rp-compat-mvu")
    assert closure(["rp-lore-book"]) == ("rp-lore-book",)  # a lorebook works without State
    assert closure(["rp-asset-tools", "rp-macro"]) == ("rp-macro", "rp-asset-tools")
    assert closure(FEATURES) == FEATURES


def test_dependents_are_what_would_lose_a_requirement() -> None:
    for needed in MVU_NEEDS:
        assert dependents(needed, FEATURES) == ("rp-compat-mvu",)
    assert dependents("rp-persona", FEATURES) == ()
    assert dependents("rp-state", [f for f in FEATURES if f != "rp-compat-mvu"]) == ()


async def test_every_feature_is_on_until_the_set_is_saved(store: EventStore) -> None:
    state = await FeatureManager(store).state()
    assert state.enabled == FEATURES and state.revision == 0
    row = next(r for r in state.rows() if r["name"] == "rp-state")
    assert row == {"name": "rp-state", "enabled": True, "requires": [], "requiredBy": ["rp-compat-mvu"], "settings": []}
    settings = {r["name"]: r["settings"] for r in state.rows() if r["settings"]}
    assert settings == {
        "rp-subagent-manager": ["writer.defaultRoute", "subagents.catalog"],
        "rp-conversation-summary": ["summary.route"],
        "rp-reply-options": ["replyOptions.count", "replyOptions.maxCharacters", "replyOptions.keywords"],
        "rp-quick-replies": ["quickReplies.items", "quickReplies.cursor"],
    }


async def test_disabling_a_requirement_cascades_and_enabling_pulls_requirements_in(store: EventStore) -> None:
    manager = FeatureManager(store)
    off = await manager.disable("rp-state")
    assert (off.changed, off.also, off.state.revision) == (True, ("rp-compat-mvu",), 1)
    assert "rp-state" not in off.state.enabled and "rp-compat-mvu" not in off.state.enabled
    await manager.disable("rp-lore-book")
    on = await manager.enable("rp-compat-mvu")
    assert on.also == ("rp-state", "rp-lore-book") and set(MVU_NEEDS) <= set(on.state.enabled)
    assert on.to_dict()["enabled"] == list(FEATURES)
    again = await manager.enable("rp-compat-mvu")
    assert not again.changed and again.state.revision == on.state.revision  # nothing written


async def test_a_stale_revision_is_refused_and_writes_nothing(store: EventStore) -> None:
    manager = FeatureManager(store)
    await manager.disable("rp-quick-replies", expected_revision=0)
    with pytest.raises(ConflictError) as exc:
        await manager.disable("rp-persona", expected_revision=0)
    assert exc.value.code == "features.conflict" and exc.value.details == {"expectedRevision": 0, "currentRevision": 1}
    assert "rp-persona" in await manager.enabled()


async def test_unknown_and_always_on_names_are_refused(store: EventStore) -> None:
    manager = FeatureManager(store)
    with pytest.raises(ValidationError) as unknown:
        await manager.enable("rp-weather")
    assert unknown.value.code == "features.unknown" and unknown.value.pointer == "/name"
    with pytest.raises(RpError) as core:
        await manager.disable("rp-core")
    assert core.value.code == "features.always_on"
    assert (await manager.state()).revision == 0


async def test_a_hand_written_set_is_closed_when_read(store: EventStore) -> None:
    await SettingsStore(store).set("features.enabled", ["rp-compat-mvu"])
    assert await FeatureManager(store).enabled() == ("rp-state", "rp-character-card", "rp-lore-book", "rp-compat-mvu")
