"""The task sub-agent catalog: seeds once, localised; validated items; CAS on the revision."""

from __future__ import annotations

import asyncio

import pytest

from roleplay.core.settings import SettingsStore, validate_setting
from roleplay.core.subagent_catalog import (
    CATALOG_KEY,
    SubagentItem,
    add_item,
    delete_item,
    edit_item,
    initial_subagents,
    load_catalog,
    save_catalog,
    seed_instructions,
    seed_names,
)
from roleplay.errors import ConflictError, NotFoundError, ValidationError
from roleplay.harness.store import EventStore

pytestmark = pytest.mark.anyio


def item(name: str, **kw: object) -> SubagentItem:
    return SubagentItem.model_validate({"name": name, "usageContract": "Optional.", "instructions": "Do it.", **kw})


async def test_the_seeds_are_written_once_when_the_catalog_is_first_created(store: EventStore) -> None:
    settings = SettingsStore(store)
    assert (await settings.get(CATALOG_KEY)).revision == 0
    first = await load_catalog(settings, "zh")
    assert [i.name for i in first.items] == ["规划", "润色"] and first.revision == 1
    emptied = await save_catalog(settings, [], first.revision)
    assert emptied.items == () and (await load_catalog(settings, "en")).items == ()  # never re-seeded
    await settings.reset(CATALOG_KEY)
    assert (await load_catalog(settings, "en")).items == ()  # a reset catalog still exists (revision > 0)


async def test_concurrent_first_reads_create_one_catalog(store: EventStore) -> None:
    settings = SettingsStore(store)
    a, b = await asyncio.gather(load_catalog(settings, "en"), load_catalog(settings, "zh"))
    assert a.items == b.items and a.revision == b.revision == 1


def test_the_seeds_are_localised_and_recognisable() -> None:
    zh, en = initial_subagents("zh"), initial_subagents("en")
    assert [i.name for i in zh] == ["规划", "润色"] and [i.name for i in en] == ["Planning", "Polishing"]
    assert [i.name for i in initial_subagents("fr")] == ["Planning", "Polishing"]
    assert seed_names() == {"规划": "plan", "润色": "polish", "Planning": "plan", "Polishing": "polish"}
    assert set(seed_instructions().values()) == {"plan", "polish"}
    # Before / after the Writer is stated in the contract text, the only place the spec allows.
    assert "rp_write_turn" in zh[0].usage_contract and "rp_commit_turn" in zh[1].usage_contract
    assert all(i.enabled and i.tools == () and i.route is None for i in zh + en)


async def test_changes_are_a_cas_on_the_revision(store: EventStore) -> None:
    settings = SettingsStore(store)
    catalog = await load_catalog(settings, "en")
    await save_catalog(settings, add_item(catalog, item("Critic")), catalog.revision)
    with pytest.raises(ConflictError):
        await save_catalog(settings, delete_item(catalog, "Planning"), catalog.revision)  # stale


def test_add_edit_delete_and_their_refusals() -> None:
    from roleplay.core.subagent_catalog import Catalog

    catalog = Catalog((item("A"), item("B")), 3)
    with pytest.raises(ConflictError) as dup:
        add_item(catalog, item("a"))
    assert dup.value.code == "subagents.duplicate_name"
    with pytest.raises(ConflictError):
        edit_item(catalog, "A", {"name": "b"})
    edited = edit_item(catalog, "a", {"route": "deepseek/deepseek-flash/high", "tools": ["rp_asset_read"]})
    assert edited[0].route == "deepseek/deepseek-flash/high" and edited[0].tools == ("rp_asset_read",)
    with pytest.raises(NotFoundError):
        delete_item(catalog, "C")
    assert [i.name for i in delete_item(catalog, "B")] == ["A"]
    with pytest.raises(Exception):
        edit_item(catalog, "A", {"usageContract": ""})  # a contract is never empty


def test_the_settings_value_is_validated_with_pointers() -> None:
    with pytest.raises(ValidationError) as bad:
        validate_setting(CATALOG_KEY, [{"name": "A", "usageContract": "x"}])
    assert bad.value.code == "settings.invalid_value" and bad.value.pointer == "/value/0/instructions"
    with pytest.raises(ValidationError) as dup:
        validate_setting(CATALOG_KEY, [item("A").to_json_dict(), item(" a ").to_json_dict()])
    assert dup.value.code == "subagents.duplicate_name" and dup.value.pointer == "/1/name"
    with pytest.raises(ValidationError):
        validate_setting(CATALOG_KEY, [{**item("A").to_json_dict(), "tools": ["bad name!"]}])
