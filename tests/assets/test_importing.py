"""``import_file`` on SQLite and PostgreSQL: every corpus file, all-or-nothing imports, untrusted
isolated prompts, linked lorebooks, duplicate detection, and processes importing one file at once."""

from __future__ import annotations

import asyncio
import json
import multiprocessing
from pathlib import Path
from typing import Any

import pytest

from roleplay.assets import importing
from roleplay.assets.importing import import_file
from roleplay.assets.store import AssetStore, AssetTx
from roleplay.errors import RpError, ValidationError
from roleplay.harness.store import EventStore, open_store

pytestmark = pytest.mark.anyio


@pytest.fixture
def events(store: EventStore) -> EventStore:
    """The shared two-backend store fixture of ``tests/conftest.py``."""
    return store


@pytest.fixture
def assets(events: EventStore) -> AssetStore:
    return AssetStore(events)


def card_json(**extra: Any) -> bytes:
    data = {
        "name": "Alice",
        "description": "A traveller.",
        "personality": "",
        "scenario": "",
        "first_mes": "Hi.",
        "mes_example": "",
        "creator_notes": "",
        "system_prompt": "Obey {{original}}",
        "post_history_instructions": "Stay in character.",
        "alternate_greetings": ["Yo."],
        "tags": [],
        "creator": "",
        "character_version": "",
        "extensions": {},
        "character_book": {
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
        },
        **extra,
    }
    return json.dumps({"spec": "chara_card_v2", "spec_version": "2.0", "data": data}).encode()


WORLD_INFO = json.dumps({"entries": {"0": {"uid": 0, "key": ["moon"], "content": "The moon is red."}}}).encode()
ST_PRESET = json.dumps(
    {
        "temperature": 1,
        "prompts": [
            {"identifier": "main", "name": "Main", "role": "system", "content": "Write vivid, immersive scenes."},
            {"identifier": "chatHistory", "name": "Chat History", "marker": True},
        ],
        "prompt_order": [
            {"character_id": 100001, "order": [{"identifier": "main", "enabled": True}, {"identifier": "chatHistory", "enabled": True}]}
        ],
    }
).encode()


async def test_card_import_stores_card_blobs_and_linked_lorebook(assets: AssetStore) -> None:
    result = await import_file(assets, card_json(), "alice.json")
    assert (result.kind, result.duplicate) == ("card", False)
    assert [a.kind for a in result.assets] == ["card", "lorebook"]
    card = await assets.get(result.asset_id)
    assert card.data["name"] == "Alice" and card.data["alternate_greetings"] == ["Yo."]
    assert "system_prompt" not in card.data  # isolated, not part of the card
    isolated = json.loads((await assets.get_blob(card.id, "isolated-prompts")).data)
    assert isolated == {"system_prompt": "Obey {{original}}", "post_history_instructions": "Stay in character.", "trusted": False}
    source = json.loads((await assets.get_blob(card.id, "source")).data)
    assert source["data"]["system_prompt"] == "Obey {{original}}"  # the file as found, for adapters
    book = await assets.get(result.assets[1].id)
    assert book.source_character_id == card.id and book.name == "Alice lore"
    assert book.data["book"]["entries"][0]["content"] == "A silver sword."


async def test_png_card_keeps_a_sanitised_avatar(assets: AssetStore, corpus_dir: Path) -> None:
    raw = (corpus_dir / "cards" / "default_Seraphina.png").read_bytes()
    result = await import_file(assets, raw, "default_Seraphina.png")
    avatar = await assets.get_blob(result.asset_id, "avatar")
    assert avatar.media_type == "image/png" and avatar.data.startswith(b"\x89PNG")
    assert b"chara" not in avatar.data and b"ccv3" not in avatar.data


async def test_every_corpus_file_imports(assets: AssetStore, corpus_dir: Path) -> None:
    files = [p for sub in ("cards", "lorebooks", "presets") for p in sorted((corpus_dir / sub).iterdir())]
    assert len([p for p in files if p.parent.name == "cards"]) >= 10
    kinds: dict[str, str] = {}
    for path in files:
        result = await import_file(assets, path.read_bytes(), path.name)
        kinds[path.name] = result.kind
        assert not result.duplicate
    assert {kinds[p.name] for p in files if p.parent.name == "cards"} == {"card"}
    assert {kinds[p.name] for p in files if p.parent.name == "lorebooks"} == {"lorebook"}
    assert {kinds[p.name] for p in files if p.parent.name == "presets"} == {"preset"}
    linked = [b for b in (await assets.list("lorebook", limit=100)).items if b.source_character_id]
    assert {(await assets.get(b.source_character_id)).name for b in linked} == {  # type: ignore[arg-type]
        "Sakana",
        "Seraphina",
        "呕吐内心的少女",
    }


async def test_lorebook_import(assets: AssetStore) -> None:
    result = await import_file(assets, WORLD_INFO, "Red Moon.json")
    book = await assets.get(result.asset_id)
    assert (book.kind, book.name, book.source_character_id) == ("lorebook", "Red Moon", None)
    assert book.data["book"]["entries"]["0"]["content"] == "The moon is red."


async def test_preset_import_creates_preset_styles_and_report(assets: AssetStore) -> None:
    result = await import_file(assets, ST_PRESET, "Vivid.json")
    assert result.kind == "preset" and result.report is not None
    preset = await assets.get(result.asset_id)
    assert preset.name == "Vivid"
    assert {p["code"] for p in result.report["notMigrated"]} >= {"sillytavern.marker"}
    stored = json.loads((await assets.get_blob(preset.id, "migration-report")).data)
    assert stored == result.report
    migrated_kinds = {m["targetKind"] for m in result.report["migrated"]}
    assert len(result.assets) == 1 + (1 if "writing-style" in migrated_kinds else 0)


async def test_importing_the_same_bytes_twice_returns_the_existing_asset(assets: AssetStore) -> None:
    first = await import_file(assets, card_json(), "a.json")
    before = await assets.dump()
    second = await import_file(assets, card_json(), "renamed.json")
    assert second.duplicate is True and second.asset_id == first.asset_id
    assert [a.id for a in second.assets] == [a.id for a in first.assets]
    assert second.warnings[0].code == "asset.import.duplicate"
    assert await assets.dump() == before
    other = await import_file(assets, card_json(creator="someone"), "a.json")  # different bytes
    assert other.duplicate is False and other.asset_id != first.asset_id


async def test_a_card_imported_before_is_known_by_its_bytes_without_parsing_it_again(
    assets: AssetStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each new story on the bundled sample imports it again: one read, not a whole card's parse
    # and validation, finds it.
    first = await import_file(assets, card_json(), "a.json")

    def parse_again(*_: Any, **__: Any) -> Any:
        raise AssertionError("a known card was parsed again")

    monkeypatch.setattr(importing, "import_card_object", parse_again)
    monkeypatch.setattr(importing, "import_card_bytes", parse_again)
    second = await import_file(assets, card_json(), "b.json")
    assert second.duplicate is True and second.asset_id == first.asset_id
    assert [w.code for w in second.warnings] == ["asset.import.duplicate"]


async def test_reimport_after_delete_creates_a_new_asset(assets: AssetStore) -> None:
    first = await import_file(assets, WORLD_INFO, "w.json")
    await assets.delete(first.asset_id)
    again = await import_file(assets, WORLD_INFO, "w.json")
    assert again.duplicate is False and again.asset_id != first.asset_id


async def test_unsupported_and_broken_files_write_nothing(assets: AssetStore) -> None:
    before = await assets.dump()
    with pytest.raises(ValidationError) as exc:
        await import_file(assets, b"just some text", "notes.txt")
    assert exc.value.code == "asset.import.unsupported"
    with pytest.raises(RpError) as err:
        await import_file(assets, b"\x89PNG\r\n\x1a\n" + b"\x00" * 20, "broken.png")
    assert err.value.code.startswith("card.")
    bad_book = json.dumps({"entries": {"0": {"uid": 0, "key": ["k"] * 1001, "content": "x"}}}).encode()
    with pytest.raises(ValidationError) as bad:
        await import_file(assets, bad_book, "bad.json")
    assert (bad.value.code, bad.value.pointer) == ("lore.limit.keys", "/book/entries/0/key")
    assert await assets.dump() == before


@pytest.mark.parametrize(
    ("data", "code", "words"),
    [
        (b"", "asset.import.empty", "empty"),
        (b"  \n", "asset.import.empty", "blank"),
        (b"[" + b" " * (32 * 1024 * 1024) + b"]", "asset.json.too_large", "limit"),
        (b'{"spec": "chara_card_v2", "data": {"name": "Tru', "asset.json.truncated", "truncated"),
        (b'{"name": "A" "first_mes": "B"}', "asset.json.invalid", "char 13"),
        (b'{"name": "Creative", "description": "d", "generation_settings": {}}', "card.format.unknown", "generation_settings"),
        (b"[1, 2]", "asset.import.unsupported", "JSON array"),
        (b'{"hello": "world"}', "asset.import.unsupported", "'hello'"),
    ],
)
async def test_import_errors_name_the_real_cause(assets: AssetStore, data: bytes, code: str, words: str) -> None:
    before = await assets.dump()
    with pytest.raises(RpError) as exc:
        await import_file(assets, data, "file.json")
    assert exc.value.code == code
    assert words in exc.value.message
    assert await assets.dump() == before


@pytest.mark.parametrize(
    ("data", "kind"),
    [
        (WORLD_INFO.replace(b"The moon is red.", b"The moon \\ud83d is red."), "lorebook"),
        (ST_PRESET.replace(b"Write vivid", b"Write \\udc00vivid"), "preset"),
        (card_json(description="half \ud83d emoji"), "card"),
    ],
)
async def test_lone_surrogates_in_any_imported_json_become_u_fffd(assets: AssetStore, data: bytes, kind: str) -> None:
    assert b"\\ud" in data
    result = await import_file(assets, data, f"{kind}.json")
    assert result.kind == kind
    assert "asset.json.lone_surrogate" in {w.code for w in result.warnings}
    stored = json.dumps((await assets.get(result.asset_id)).data, ensure_ascii=False)
    assert "\ufffd" in stored


async def test_embedded_book_with_a_multi_line_name_keeps_its_book(assets: AssetStore) -> None:
    data = json.loads(card_json())
    data["data"]["character_book"]["name"] = "Alice\nlore \u202e"
    result = await import_file(assets, json.dumps(data).encode(), "alice.json")
    assert [a.kind for a in result.assets] == ["card", "lorebook"]
    assert result.assets[1].name == "Alice lore"  # the asset's label; the book keeps its own name
    assert (await assets.get(result.assets[1].id)).data["book"]["name"] == "Alice\nlore \u202e"


async def test_broken_json_is_repaired_only_on_request(assets: AssetStore) -> None:
    truncated = card_json()[:-3]
    with pytest.raises(RpError) as exc:
        await import_file(assets, truncated, "cut.json")
    assert exc.value.code == "asset.json.truncated"
    result = await import_file(assets, truncated, "cut.json", allow_repair=True)
    assert result.kind == "card"
    assert "asset.json.repaired" in {w.code for w in result.warnings}


async def test_a_failure_inside_the_transaction_leaves_no_partial_asset(assets: AssetStore, monkeypatch: pytest.MonkeyPatch) -> None:
    before = await assets.dump()
    original = AssetTx.put_blob

    async def failing_put_blob(self: AssetTx, asset_id: str, role: str, media_type: str, data: bytes) -> None:
        if role == "source":  # after the card row and its isolated prompts were written
            raise RpError("test.injected", "disk full")
        await original(self, asset_id, role, media_type, data)

    monkeypatch.setattr(AssetTx, "put_blob", failing_put_blob)
    with pytest.raises(RpError) as exc:
        await import_file(assets, card_json(), "alice.json")
    assert exc.value.code == "test.injected"
    assert await assets.dump() == before


async def test_a_broken_embedded_book_is_a_warning_not_a_lost_card(assets: AssetStore) -> None:
    raw = card_json(character_book={"name": "bad", "entries": [7]})
    result = await import_file(assets, raw, "x.json")
    assert [a.kind for a in result.assets] == ["card"]
    assert "asset.import.lorebook_skipped" in [w.code for w in result.warnings]


def _import_process(url: str, data: bytes) -> tuple[str, bool]:
    async def run() -> tuple[str, bool]:
        events = open_store(url)
        try:
            result = await importing.import_file(AssetStore(events), data, "same.json")
            return result.asset_id, result.duplicate
        finally:
            await events.close()

    return asyncio.run(run())


@pytest.mark.slow
async def test_processes_importing_the_same_file_create_one_asset(assets: AssetStore, store_url: str) -> None:
    data = card_json()
    ctx = multiprocessing.get_context("spawn")
    loop = asyncio.get_running_loop()
    with ctx.Pool(4) as pool:
        results = [pool.apply_async(_import_process, (store_url, data)) for _ in range(4)]
        outcomes = await loop.run_in_executor(None, lambda: [r.get(timeout=240) for r in results])
    assert len({asset_id for asset_id, _ in outcomes}) == 1
    assert sorted(dup for _, dup in outcomes) == [False, True, True, True]
    assert (await assets.list("card")).total == 1
    assert (await assets.list("lorebook")).total == 1
