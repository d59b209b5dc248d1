"""``ensure_seeds`` on SQLite and PostgreSQL: built-in defaults, idempotence, deleted seeds stay
deleted, in-place upgrades of unedited seeds, edited seeds kept, and two processes seeding at once."""

from __future__ import annotations

import asyncio
import multiprocessing
from typing import Any

import pytest

from roleplay.assets.personas import parse_persona
from roleplay.assets.seeding import SeedSpec
from roleplay.assets.seeds import BUILTIN_SEEDS, builtin_seeds, ensure_seeds, language_notice
from roleplay.errors import RpError
from roleplay.assets.store import AssetStore
from roleplay.harness.store import EventStore, open_store

pytestmark = pytest.mark.anyio


@pytest.fixture
def events(store: EventStore) -> EventStore:
    """The shared two-backend store fixture of ``tests/conftest.py``."""
    return store


@pytest.fixture
def assets(events: EventStore) -> AssetStore:
    return AssetStore(events)


def normalize_persona(data: Any) -> dict[str, Any]:
    return parse_persona(data).to_json_dict()


def persona_seed(version: int, description: str) -> SeedSpec:
    return SeedSpec(
        kind="persona",
        key="test.seed.persona",
        version=version,
        content={"name": "Hero", "description": description},
        normalize=normalize_persona,
    )


async def test_first_open_creates_the_three_builtin_defaults(assets: AssetStore) -> None:
    outcomes = await ensure_seeds(assets, language="zh")
    assert [(o.kind, o.action) for o in outcomes] == [("preset", "create"), ("writing-style", "create"), ("persona", "create")]
    preset = await assets.get_default("preset")
    style = await assets.get_default("writing-style")
    person = await assets.get_default("persona")
    assert preset is not None and preset.name == "示例预设"
    assert [f["title"] for f in preset.data["fields"]] == ["声明", "任务描述", "写作指导", "思维链指导", "格式要求"]
    assert style is not None and style.name == "通用叙事"
    assert person is not None and person.seed_key == "rp.seed.persona.default"
    assert {o.asset_id for o in outcomes} == {preset.id, style.id, person.id}


async def _set_language(events: EventStore, value: str | None) -> None:
    from roleplay.core.settings import SettingsStore

    settings = SettingsStore(events)
    await (settings.set("language", value) if value else settings.reset("language"))


async def test_the_locale_decides_once_and_two_locales_in_sequence_do_not_flip(
    events: EventStore, assets: AssetStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    from roleplay.core.settings import SettingsStore

    settings = SettingsStore(events)
    await settings.get("language")  # the settings table exists, as under every runtime
    first = await ensure_seeds(assets)  # the test locale is English
    notice = "language: en (from your system locale; change with rp settings set language zh)"
    assert language_notice(first) == notice
    assert first[-1].to_dict() == {"key": "language", "kind": "setting", "action": "settled", "assetId": None, "reason": notice}
    assert (await assets.get_default("persona")).name == "User"  # type: ignore[union-attr]
    record = await settings.get("language")
    assert (record.value, record.revision) == ("en", 1)

    for lang in ("zh_CN.UTF-8", "C.UTF-8", "zh_TW.UTF-8"):
        monkeypatch.setenv("LANG", lang)
        again = await ensure_seeds(assets)
        assert {o.action for o in again} == {"up-to-date"} and language_notice(again) is None
        assert (await assets.get_default("writing-style")).name == "General narrative"  # type: ignore[union-attr]
    assert (await settings.get("language")).revision == 1

    # an explicit choice still switches the unedited defaults and keeps an edited one
    persona = await assets.get_default("persona")
    assert persona is not None
    await assets.update(persona.id, {**persona.data, "name": "Yao"}, expected_revision=persona.revision)
    await settings.set("language", "zh")
    outcomes = {o.kind: o.action for o in await ensure_seeds(assets)}
    assert outcomes == {"preset": "upgrade", "writing-style": "upgrade", "persona": "keep-edited"}
    assert (await assets.get_default("preset")).name == "示例预设"  # type: ignore[union-attr]
    assert (await assets.get(persona.id)).data["name"] == "Yao"


async def test_a_reset_derives_the_language_from_the_current_locale_once(
    events: EventStore, assets: AssetStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    from roleplay.core.settings import SettingsStore

    settings = SettingsStore(events)
    await settings.get("language")
    await ensure_seeds(assets)  # English, stored
    monkeypatch.setenv("LANG", "zh_CN.UTF-8")
    await settings.reset("language")
    outcomes = await ensure_seeds(assets)
    assert language_notice(outcomes) == "language: zh (from your system locale; change with rp settings set language en)"
    assert {o.kind: o.action for o in outcomes if o.kind != "setting"} == {
        "preset": "upgrade",
        "writing-style": "upgrade",
        "persona": "upgrade",
    }
    record = await settings.get("language")
    assert (record.value, record.revision) == ("zh", 3)
    monkeypatch.setenv("LANG", "C.UTF-8")
    assert {o.action for o in await ensure_seeds(assets)} == {"up-to-date"}
    assert (await assets.get_default("persona")).name == "用户"  # type: ignore[union-attr]


async def test_before_the_settings_table_exists_the_defaults_keep_their_language(
    events: EventStore, assets: AssetStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Only the asset commands have opened this home (or an older version seeded it): nothing can
    # be stored yet, and the language the defaults were written in holds until it can.
    assert language_notice(await ensure_seeds(assets)) is None  # English
    monkeypatch.setenv("LANG", "zh_CN.UTF-8")
    assert {o.action for o in await ensure_seeds(assets)} == {"up-to-date"}
    from roleplay.core.settings import SettingsStore

    await SettingsStore(events).get("language")
    outcomes = await ensure_seeds(assets)
    assert language_notice(outcomes) == "language: en (the language of your built-in defaults; change with rp settings set language zh)"
    assert (await SettingsStore(events).get("language")).value == "en"
    assert (await assets.get_default("persona")).name == "User"  # type: ignore[union-attr]


async def test_a_language_change_rewrites_unedited_seeds_and_keeps_edited_ones(events: EventStore, assets: AssetStore) -> None:
    await _set_language(events, "zh")
    await ensure_seeds(assets)
    preset = await assets.get_default("preset")
    persona = await assets.get_default("persona")
    assert preset is not None and persona is not None and persona.name == "用户"
    field_ids = [f["id"] for f in preset.data["fields"]]
    await assets.update(persona.id, {**persona.data, "name": "阿遥"}, expected_revision=persona.revision)

    await _set_language(events, "en")
    outcomes = {o.kind: o.action for o in await ensure_seeds(assets)}
    assert outcomes == {"preset": "upgrade", "writing-style": "upgrade", "persona": "keep-edited"}
    upgraded = await assets.get(preset.id)
    assert upgraded.name == "Example preset" and [f["id"] for f in upgraded.data["fields"]] == field_ids
    assert (await assets.get(persona.id)).data["name"] == "阿遥"  # never overwritten
    # and back again: still in place, still never touching the edited persona
    await _set_language(events, "zh")
    outcomes = {o.kind: o.action for o in await ensure_seeds(assets)}
    assert outcomes == {"preset": "upgrade", "writing-style": "upgrade", "persona": "keep-edited"}
    assert (await assets.get(preset.id)).name == "示例预设"
    assert {o.action for o in await ensure_seeds(assets)} == {"up-to-date", "keep-edited"}


async def test_ensure_seeds_is_idempotent(assets: AssetStore) -> None:
    await ensure_seeds(assets)
    before = await assets.dump()
    again = await ensure_seeds(assets)
    assert {o.action for o in again} == {"up-to-date"}
    assert await assets.dump() == before


async def test_a_deleted_default_is_never_recreated(assets: AssetStore) -> None:
    await ensure_seeds(assets)
    preset = await assets.get_default("preset")
    assert preset is not None
    await assets.delete(preset.id)
    outcomes = {o.kind: o.action for o in await ensure_seeds(assets)}
    assert outcomes["preset"] == "skip-deleted"
    assert (await assets.list("preset")).total == 0
    assert await assets.get_default("preset") is None
    markers = [r for r in await assets.dump() if r[0] == "marker" and r[1] == "rp.seed.preset.example"]
    assert markers[0][-1] is True  # the marker records the deletion


async def test_a_user_default_is_not_replaced_by_a_seed(assets: AssetStore) -> None:
    mine = await assets.create("persona", {"name": "Me"})
    await assets.set_default("persona", mine.id)
    await ensure_seeds(assets)
    assert (await assets.get_default("persona")).id == mine.id  # type: ignore[union-attr]
    assert (await assets.list("persona")).total == 2  # the seed exists, just not as default


async def test_unedited_seed_is_upgraded_in_place(assets: AssetStore) -> None:
    [first] = await ensure_seeds(assets, [persona_seed(1, "old text")])
    [upgrade] = await ensure_seeds(assets, [persona_seed(2, "new text")])
    assert upgrade.action == "upgrade" and upgrade.asset_id == first.asset_id
    rec = await assets.get(first.asset_id)  # type: ignore[arg-type]
    assert (rec.revision, rec.data["description"]) == (2, "new text")
    [again] = await ensure_seeds(assets, [persona_seed(2, "new text")])
    assert again.action == "up-to-date"


async def test_edited_seed_is_never_overwritten(assets: AssetStore) -> None:
    [first] = await ensure_seeds(assets, [persona_seed(1, "old text")])
    assert first.asset_id is not None
    await assets.update(first.asset_id, {"name": "Hero", "description": "my own words"}, expected_revision=1)
    [outcome] = await ensure_seeds(assets, [persona_seed(2, "new text")])
    assert outcome.action == "keep-edited"
    rec = await assets.get(first.asset_id)
    assert (rec.revision, rec.data["description"]) == (2, "my own words")


def _seed_process(url: str) -> list[str]:
    async def run() -> list[str]:
        events = open_store(url)
        try:
            return [o.action for o in await ensure_seeds(AssetStore(events))]
        finally:
            await events.close()

    return asyncio.run(run())


@pytest.mark.slow
async def test_concurrent_first_opens_in_processes_create_each_seed_once(assets: AssetStore, store_url: str) -> None:
    ctx = multiprocessing.get_context("spawn")
    loop = asyncio.get_running_loop()
    with ctx.Pool(3) as pool:
        results = [pool.apply_async(_seed_process, (store_url,)) for _ in range(3)]
        actions = await loop.run_in_executor(None, lambda: [r.get(timeout=240) for r in results])
    creates = [a for run in actions for a in run if a == "create"]
    assert len(creates) == len(BUILTIN_SEEDS)  # exactly one process created each seed
    for kind in ("preset", "writing-style", "persona"):
        assert (await assets.list(kind)).total == 1
        assert await assets.get_default(kind) is not None


def test_unknown_languages_have_no_builtin_seeds() -> None:
    with pytest.raises(RpError) as err:
        builtin_seeds("fr")  # type: ignore[arg-type]
    assert err.value.code == "seed.unknown_language"
