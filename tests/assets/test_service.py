"""``AssetService`` on SQLite and PostgreSQL: card export round trips, trusting isolated prompts,
and deleting a card with (or without) the lorebooks imported from it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from roleplay.assets.cards import import_card_bytes
from roleplay.assets.service import AssetService
from roleplay.errors import ConflictError, NotFoundError, ValidationError
from roleplay.harness.store import EventStore

pytestmark = pytest.mark.anyio


@pytest.fixture
def events(store: EventStore) -> EventStore:
    """The shared two-backend store fixture of ``tests/conftest.py``."""
    return store


@pytest.fixture
def service(events: EventStore) -> AssetService:
    return AssetService(events)


def card_json(*, system_prompt: str = "Obey.", book: bool = True) -> bytes:
    data: dict[str, Any] = {
        "name": "Alice",
        "description": "A traveller.",
        "first_mes": "Hi.",
        "system_prompt": system_prompt,
        "post_history_instructions": "",
        "alternate_greetings": ["Yo."],
    }
    if book:
        data["character_book"] = {
            "name": "Alice lore",
            "entries": [
                {
                    "id": 1,
                    "keys": ["sword"],
                    "content": "A silver sword.",
                    "enabled": True,
                    "insertion_order": 10,
                    "extensions": {},
                    "use_regex": False,
                }
            ],
        }
    return json.dumps({"spec": "chara_card_v2", "spec_version": "2.0", "data": data}).encode()


async def test_service_seeds_through_the_store(service: AssetService) -> None:
    outcomes = await service.ensure_seeds()
    assert len(outcomes) == 3
    assert (await service.store.get_default("preset")) is not None


async def test_export_round_trip_carries_edits_and_linked_lorebooks(service: AssetService) -> None:
    imported = await service.import_file(card_json(), "alice.json")
    card = await service.store.get(imported.asset_id)
    edited = {**card.data, "alternate_greetings": ["Yo.", "Well met."], "description": "Edited."}
    await service.store.update(card.id, edited, expected_revision=card.revision)
    book = (await service.linked_lorebooks(card.id))[0]
    book_data = json.loads(json.dumps(book.data))
    book_data["book"]["entries"][0]["content"] = "A golden sword."
    await service.store.update(book.id, book_data, expected_revision=1)

    png = await service.export_card(card.id)
    back = import_card_bytes(png, "alice.png")
    assert back.card.alternate_greetings == ["Yo.", "Well met."]
    assert back.card.description == "Edited."
    assert back.lorebook is not None
    assert [e["content"] for e in back.lorebook["entries"]] == ["A golden sword."]
    assert back.isolated_prompts.is_empty  # isolated prompts are never exported
    assert back.avatar_png is not None  # a placeholder image when the card had none

    # Importing the export is a new file (different bytes), so it becomes a new card.
    again = await service.import_file(png, "alice.png")
    assert again.duplicate is False
    assert (await service.store.get(again.asset_id)).data["alternate_greetings"] == ["Yo.", "Well met."]


async def test_export_keeps_the_imported_avatar(service: AssetService, corpus_dir: Path) -> None:
    imported = await service.import_file((corpus_dir / "cards" / "Aqua.png").read_bytes(), "Aqua.png")
    avatar = await service.store.get_blob(imported.asset_id, "avatar")
    back = import_card_bytes(await service.export_card(imported.asset_id))
    assert back.card.name == "Aqua"
    assert back.avatar_png == avatar.data  # sanitising a sanitised PNG is a fixed point


async def test_export_of_missing_or_non_card_asset(service: AssetService) -> None:
    persona = await service.store.create("persona", {"name": "P"})
    for asset_id in ("ast_missing", persona.id):
        with pytest.raises(NotFoundError):
            await service.export_card(asset_id)


async def test_isolated_prompts_are_untrusted_until_the_user_trusts_them(service: AssetService) -> None:
    imported = await service.import_file(card_json(system_prompt="Be {{original}}"), "a.json")
    prompts = await service.isolated_prompts(imported.asset_id)
    assert (prompts.system_prompt, prompts.trusted) == ("Be {{original}}", False)
    trusted = await service.trust_isolated_prompts(imported.asset_id, True, expected_revision=1)
    assert trusted.trusted is True
    assert (await service.isolated_prompts(imported.asset_id)).trusted is True
    assert (await service.store.get(imported.asset_id)).revision == 2  # sessions see the change
    before = await service.store.dump()
    with pytest.raises(ConflictError):
        await service.trust_isolated_prompts(imported.asset_id, False, expected_revision=1)
    assert await service.store.dump() == before
    assert (await service.trust_isolated_prompts(imported.asset_id, False)).trusted is False


async def test_trust_needs_prompts_and_a_boolean(service: AssetService) -> None:
    imported = await service.import_file(card_json(system_prompt=""), "plain.json")
    assert (await service.isolated_prompts(imported.asset_id)).is_empty
    with pytest.raises(ValidationError) as exc:
        await service.trust_isolated_prompts(imported.asset_id, True)
    assert exc.value.code == "asset.no_isolated_prompts"
    with pytest.raises(ValidationError) as exc:
        await service.trust_isolated_prompts(imported.asset_id, "yes")  # type: ignore[arg-type]
    assert exc.value.code == "asset.invalid_trust"


async def test_deleting_a_card_cascades_to_its_lorebooks_by_default(service: AssetService) -> None:
    imported = await service.import_file(card_json(), "a.json")
    unrelated = await service.import_file(json.dumps({"entries": {"0": {"key": ["x"], "content": "y"}}}).encode(), "w.json")
    result = await service.delete(imported.asset_id)
    assert [r.kind for r in result.deleted] == ["card", "lorebook"]
    assert (await service.store.list("lorebook")).total == 1
    assert (await service.store.get(unrelated.asset_id)).kind == "lorebook"


async def test_deleting_a_card_can_keep_its_lorebooks(service: AssetService) -> None:
    imported = await service.import_file(card_json(), "a.json")
    book_id = imported.assets[1].id
    result = await service.delete(imported.asset_id, cascade_lorebooks=False)
    assert [r.id for r in result.deleted] == [imported.asset_id]
    book = await service.store.get(book_id)
    assert book.source_character_id == imported.asset_id  # a weak link to a card that is gone


async def test_deleting_a_lorebook_does_not_touch_its_card(service: AssetService) -> None:
    imported = await service.import_file(card_json(), "a.json")
    await service.delete(imported.assets[1].id)
    card = await service.store.get(imported.asset_id)
    assert card.revision == 1
    assert await service.linked_lorebooks(card.id) == []


async def test_card_delete_with_stale_revision_deletes_nothing(service: AssetService) -> None:
    imported = await service.import_file(card_json(), "a.json")
    before = await service.store.dump()
    with pytest.raises(ConflictError):
        await service.delete(imported.asset_id, expected_revision=5)
    assert await service.store.dump() == before
