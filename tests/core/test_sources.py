"""Context sources against a real asset store (SQLite and PostgreSQL): a card imported with an
embedded lorebook, the seeded 示例预设 / 通用叙事 / 用户 (Chinese defaults), a State view, and the session's own texts.
Also the unavailable-asset boundary (missing, corrupt, unsupported → skipped with a diagnostic,
anything else raises) and the seeded, state-gated lore activation."""

from __future__ import annotations

import json
from typing import Any

import pytest

from roleplay.assets.lorebook import ChatMessage, TimedState
from roleplay.assets.presets.feature import preset_sources
from roleplay.assets.service import AssetService
from roleplay.assets.store import AssetStore, AssetTx
from roleplay.core.macros import MacroContext
from roleplay.core.profile import SessionProfile, parse_profile
from roleplay.core.prompts import CARD_NOTE
from roleplay.core.sources import (
    SourceInputs,
    SourceSet,
    StoreAssetReader,
    collect_sources,
    macro_context_for,
)
from roleplay.core.types import AssetView
from roleplay.harness.store import EventStore
from roleplay.plugins import source_providers
from roleplay.state import render_commit_contract, render_writer_view
from roleplay.state.projection import apply_bootstrap, bootstrap_payload
from roleplay.state.shape import empty_projection

pytestmark = pytest.mark.anyio

NIGHT_RULE = 'state("story", "/night") == true'


def card_file(**extra: Any) -> bytes:
    entries = [
        {
            "id": 1,
            "keys": [],
            "constant": True,
            "content": "{{char}}'s city floats above the sea.",
            "enabled": True,
            "insertion_order": 10,
            "extensions": {"position": 0},
        },
        {
            "id": 2,
            "keys": ["sword"],
            "content": "Irene's silver sword hums near <USER>.",
            "enabled": True,
            "insertion_order": 20,
            "extensions": {"position": 1, "sticky": 2},
        },
        {
            "id": 3,
            "keys": [],
            "constant": True,
            "content": "At night nobody leaves the inn.",
            "enabled": True,
            "insertion_order": 30,
            "extensions": {"position": 2, "stateCondition": NIGHT_RULE},
        },
    ]
    data = {
        "name": "Irene",
        "nickname": "艾琳",
        "description": "{{char}} is a swordswoman who distrusts {{user}}.",
        "personality": "Guarded.",
        "scenario": "A rainy inn.",
        "first_mes": "Hm?",
        "mes_example": "<START>\n{{user}}: Hi\n{{char}}: ...Hi.",
        "creator_notes": "not for the prompt",
        "system_prompt": "Always speak as {{char}}. {{original}}",
        "post_history_instructions": "Stay terse.",
        "alternate_greetings": [],
        "tags": ["fantasy"],
        "creator": "",
        "character_version": "",
        "extensions": {},
        "character_book": {"name": "Irene lore", "entries": entries},
        **extra,
    }
    return json.dumps({"spec": "chara_card_v2", "spec_version": "2.0", "data": data}).encode()


def state_view(night: bool) -> dict[str, Any]:
    definition = {
        "title": "故事",
        "description": "主线状态",
        "updateMode": "schema-only",
        "rules": [],
        "schema": {"type": "object", "properties": {"night": {"type": "boolean"}}, "required": ["night"], "additionalProperties": False},
    }
    return apply_bootstrap(empty_projection(), bootstrap_payload(definition, {"night": night}))


class World:
    """One asset library: the seeds plus the imported card and its lorebook."""

    def __init__(self, service: AssetService) -> None:
        self.service = service
        self.store: AssetStore = service.store

    async def setup(self) -> World:
        await self.service.ensure_seeds(language="zh")
        imported = await self.service.import_file(card_file(), "irene.json")
        self.card, self.book = imported.assets[0].id, imported.assets[1].id
        self.preset = (await self.store.get_default("preset")).id  # type: ignore[union-attr]
        self.style = (await self.store.get_default("writing-style")).id  # type: ignore[union-attr]
        self.persona = (await self.store.get_default("persona")).id  # type: ignore[union-attr]
        return self

    def profile(self, **resources: Any) -> SessionProfile:
        base = {"card": self.card, "lorebooks": [self.book], "persona": self.persona, "preset": self.preset, "writingStyles": [self.style]}
        return parse_profile(
            {
                "resources": {**base, **resources},
                "customPrompts": [
                    {"id": "tone", "title": "语气", "text": "{{user}} 说话时保持克制。"},
                    {"id": "blank", "title": "空", "text": "  "},
                ],
            }
        )

    async def collect(
        self, profile: SessionProfile | None, *, state: Any = None, run_id: str = "run_1", reader: Any = None, **kw: Any
    ) -> SourceSet:
        reader = reader or StoreAssetReader(self.store)
        macros = await macro_context_for(profile, reader)
        return await collect_sources(
            SourceInputs(run_id=run_id, profile=profile, macros=macros, state=state, **kw), reader, source_providers()
        )


@pytest.fixture
async def world(store: EventStore) -> World:
    return await World(AssetService(store)).setup()


async def test_every_source_of_a_fully_bound_session(world: World) -> None:
    profile = world.profile()
    view = state_view(night=True)
    got = await world.collect(
        profile,
        state=view,
        conversation_text="旅人: 你好",
        summary_text="他们在客栈相遇。",
        current_input="拔剑",
        lore_messages=[ChatMessage("I draw my sword", "旅人")],
        lore_chat_length=3,
    )
    assert got.diagnostics == ()
    assert [s.id for s in got.sources] == [
        "rp.preset:declaration",
        "rp.preset:task",
        "rp.lore.world-description",
        "rp.card",
        "rp.lore.character-descriptions",
        "rp.persona",
        "rp.player",
        "rp.conversation-summary",
        "rp.conversation",
        "rp.state",
        "rp.lore.important-rules",
        "rp.preset:writing-guidance",
        "rp.preset:reasoning-guidance",
        "rp.preset:format",
        f"rp.writing-style:{world.style}",
        "rp.custom:tone",
        "rp.current-input",
    ]
    src = got.by_id()
    card_rev = (await world.store.get(world.card)).revision

    card = src["rp.card"]
    assert (card.title, card.source_class, card.parent_delivery, card.shared_reference) == ("Character", "factual", "context", True)
    assert card.revision == {"assetId": world.card, "revision": card_rev}
    assert card.text.startswith(CARD_NOTE + "\n\nName: 艾琳\n\nDescription: 艾琳 is a swordswoman who distrusts 用户.")
    assert "Example messages:\n<START>\n用户: Hi\n艾琳: ...Hi." in card.text
    assert "Always speak" not in card.text and "Stay terse" not in card.text  # isolated prompts untrusted
    assert "not for the prompt" not in card.text

    persona = src["rp.persona"]
    assert persona.text.startswith("Name: 用户\n\nDescription:") and persona.parent_delivery == "context"

    assert src["rp.lore.world-description"].text == "艾琳's city floats above the sea."
    assert src["rp.lore.character-descriptions"].text == "Irene's silver sword hums near 用户."
    assert src["rp.lore.important-rules"].text == "At night nobody leaves the inn."
    assert src["rp.lore.world-description"].revision == {"assets": [{"assetId": world.book, "revision": 1}]}
    assert [(e.kind, e.entry_id, e.start, e.end) for e in got.lore_timed_state.effects] == [("sticky", "2", 3, 5)]

    state = src["rp.state"]
    assert (state.text, state.parent_text) == (render_writer_view(view), render_commit_contract(view))
    assert (state.source_class, state.parent_delivery, state.shared_reference) == ("factual", "commit", False)

    preset_record = await world.store.get(world.preset)
    declaration = src["rp.preset:declaration"]
    assert declaration.text == preset_record.data["fields"][0]["content"]
    assert (declaration.title, declaration.source_class, declaration.default_section_tag) == ("声明", "instructional", True)
    assert got.preset_positions == {
        "rp.preset:declaration": "top",
        "rp.preset:task": "top",
        "rp.preset:writing-guidance": "bottom",
        "rp.preset:reasoning-guidance": "bottom",
        "rp.preset:format": "bottom",
    }

    style = src[f"rp.writing-style:{world.style}"]
    assert style.title == "通用叙事" and style.text.startswith("- 视角：") and style.source_class == "instructional"
    assert src["rp.custom:tone"].text == "用户 说话时保持克制。" and not src["rp.custom:tone"].shared_reference

    # History texts are taken as given: core.conversation already put the context notes in.
    assert (src["rp.conversation-summary"].text, src["rp.conversation"].text) == ("他们在客栈相遇。", "旅人: 你好")
    assert src["rp.conversation-summary"].idle_allowed is False and src["rp.conversation"].idle_allowed is False
    assert (src["rp.current-input"].text, src["rp.current-input"].idle_allowed) == ("拔剑", False)

    assert got.bindings == {
        "characterId": world.card,
        "lorebookIds": [world.book],
        "personaId": world.persona,
        "presetId": world.preset,
        "writingStyleIds": [world.style],
    }
    assert set(got.live_revisions) == {world.card, world.book, world.persona, world.preset, world.style}


async def test_state_condition_gate_fails_closed(world: World) -> None:
    profile = world.profile()
    off = await world.collect(profile, state=None)
    assert "rp.lore.important-rules" not in off.by_id() and "rp.state" not in off.by_id()
    day = await world.collect(profile, state=state_view(night=False))
    assert "rp.lore.important-rules" not in day.by_id()
    decision = day.lore_activation.explain(world.book, "3")  # type: ignore[union-attr]
    assert (decision.activated, decision.reason) == (False, "state_condition")
    assert off.lore_activation.explain(world.book, "3").reason == "state_unavailable"  # type: ignore[union-attr]


async def test_trusted_isolated_prompts_join_the_card(world: World) -> None:
    await world.service.trust_isolated_prompts(world.card, True)
    for reader in (StoreAssetReader(world.store), StoreAssetReader(world.store, isolated=world.service.isolated_prompts)):
        card = (await world.collect(world.profile(), reader=reader)).by_id()["rp.card"]
        assert "Character system prompt: Always speak as 艾琳. \n\nPost-history instructions: Stay terse." in card.text
        assert card.revision == {"assetId": world.card, "revision": 2}  # trusting bumped the card


async def test_unavailable_shared_assets_are_skipped_and_diagnosed(world: World) -> None:
    async def corrupt(tx: AssetTx) -> None:
        # Rows written behind the validators: what an old or damaged database might hold.
        await tx.insert("ast_badpreset", "preset", {"name": 5, "fields": "nope"}, "bad")
        await tx.insert("ast_novelai", "lorebook", {"name": "NAI", "book": {"lorebookVersion": 5, "entries": []}}, "NAI")
        await tx.insert("ast_badcard", "card", {"description": "no name"}, "x")

    await world.store.write(corrupt)
    await world.store.delete(world.style)
    style2 = (await world.store.create("writing-style", {"name": "冷峻", "requirements": "句子要短。"})).id
    profile = world.profile(
        card="ast_badcard", preset="ast_badpreset", lorebooks=["ast_novelai", world.book, "ast_gone"], writingStyles=[world.style, style2]
    )
    got = await world.collect(profile, state=state_view(night=True))
    assert sorted((d.details["assetId"], d.details["reason"], d.source_id) for d in got.diagnostics) == sorted(
        [
            (world.style, "missing", f"rp.writing-style:{world.style}"),
            ("ast_gone", "missing", None),
            ("ast_badcard", "corrupt", "rp.card"),
            ("ast_badpreset", "corrupt", None),
            ("ast_novelai", "unsupported", None),
        ]
    )
    assert {d.code for d in got.diagnostics} == {"asset-unavailable"}
    ids = [s.id for s in got.sources]
    assert "rp.card" not in ids and not any(i.startswith("rp.preset:") for i in ids)
    assert f"rp.writing-style:{style2}" in ids and f"rp.writing-style:{world.style}" not in ids
    # The remaining book still activates; the bindings keep every id for the parent to repair.
    assert "rp.lore.world-description" in ids and "rp.persona" in ids
    assert got.bindings["lorebookIds"] == ["ast_novelai", world.book, "ast_gone"]
    assert got.bindings["characterId"] == "ast_badcard"
    # Without a readable card the macros stay unexpanded rather than guessing a name.
    assert got.by_id()["rp.lore.world-description"].text == "{{char}}'s city floats above the sea."


async def test_other_failures_raise(world: World) -> None:
    class Broken:
        async def read(self, kind: str, asset_id: str) -> AssetView | None:
            raise RuntimeError("database is down")

    with pytest.raises(RuntimeError, match="database is down"):
        await collect_sources(SourceInputs("run_1", world.profile(), MacroContext()), Broken(), source_providers())


async def test_one_run_sees_one_revision_per_asset(world: World) -> None:
    reader = StoreAssetReader(world.store)
    macros = await macro_context_for(world.profile(), reader)  # frozen at the start of the run
    record = await world.store.get(world.card)
    await world.store.update(world.card, {**record.data, "nickname": "伊琳"}, expected_revision=record.revision)
    got = await collect_sources(SourceInputs("run_1", world.profile(), macros), reader, source_providers())
    assert got.by_id()["rp.card"].text.startswith(CARD_NOTE + "\n\nName: 艾琳")
    assert got.live_revisions[world.card] == record.revision
    fresh = await world.collect(world.profile())  # the next run reads the live asset
    assert fresh.by_id()["rp.card"].text.startswith(CARD_NOTE + "\n\nName: 伊琳")
    assert fresh.live_revisions[world.card] == record.revision + 1


async def test_probability_is_seeded_by_the_run_id(world: World) -> None:
    book = {
        "entries": {
            str(i): {
                "uid": i,
                "key": [],
                "constant": True,
                "content": f"fact {i}",
                "position": 0,
                "useProbability": True,
                "probability": 50,
            }
            for i in range(8)
        }
    }
    lore = (await world.store.create("lorebook", {"name": "coin", "book": book})).id
    profile = parse_profile({"resources": {"lorebooks": [lore]}})

    async def facts(run_id: str) -> str:
        got = await world.collect(profile, run_id=run_id)
        return got.by_id().get("rp.lore.world-description").text if "rp.lore.world-description" in got.by_id() else ""  # type: ignore[union-attr]

    first = await facts("run_a")
    assert first == await facts("run_a")
    assert len({await facts(f"run_{i}") for i in range(6)}) > 1


async def test_nothing_bound_gives_only_the_player_boundary_and_the_callers_texts(world: World) -> None:
    got = await world.collect(None, current_input="你好", conversation_text="  ", summary_text="")
    assert [s.id for s in got.sources] == ["rp.player", "rp.current-input"]  # the boundary needs no asset
    assert got.bindings == {"characterId": None, "lorebookIds": [], "personaId": None, "presetId": None, "writingStyleIds": []}
    assert got.lore_activation is None and got.lore_timed_state == TimedState() and got.live_revisions == {}


async def test_preset_fields_disabled_or_blank_give_no_source() -> None:
    data = {
        "name": "p",
        "fields": [
            {"id": "a", "title": "A", "content": "top text", "position": "bottom", "sectionTag": False},
            {"id": "b", "title": "B", "content": "off", "enabled": False},
            {"id": "c", "title": "C", "content": "   "},
            {"id": "d", "title": "D", "content": "hi {{user}}"},
        ],
    }
    sources, positions = preset_sources(AssetView("ast_p", "preset", 4, data), MacroContext(None, "旅人"))
    assert [(s.id, s.text, s.default_section_tag) for s in sources] == [
        ("rp.preset:d", "hi 旅人", True),
        ("rp.preset:a", "top text", False),
    ]
    assert positions == {"rp.preset:d": "top", "rp.preset:a": "bottom"}
    assert sources[0].revision == {"assetId": "ast_p", "revision": 4}


async def test_macro_context_reads_live_names_and_treats_dangling_as_unbound(world: World) -> None:
    reader = StoreAssetReader(world.store)
    assert await macro_context_for(world.profile(), reader) == MacroContext("艾琳", "用户")
    assert await macro_context_for(world.profile(card="ast_gone"), reader) == MacroContext(None, "用户")
    assert await macro_context_for(None, reader) == MacroContext(None, None)


async def test_caches_reuse_compiled_books_and_views_until_the_revision_changes(world: World) -> None:
    from roleplay.core.sources import AssetViewCache, LoreCache

    lore, views = LoreCache(), AssetViewCache()
    profile = world.profile()

    async def run() -> SourceSet:
        return await world.collect(
            profile, reader=StoreAssetReader(world.store, cache=views), lore_cache=lore, current_input="拔剑", lore_messages=["sword"]
        )

    first = await run()
    engine = next(iter(lore._engines.values()))
    view = views.get(world.book, 1)
    second = await run()
    assert next(iter(lore._engines.values())) is engine and views.get(world.book, 1) is view  # reused
    assert [s.id for s in second.sources] == [s.id for s in first.sources]
    record = await world.store.get(world.book)
    data = {**record.data, "name": "Irene lore, revised"}
    await world.store.update(world.book, data, expected_revision=record.revision)
    third = await run()
    assert views.get(world.book, 2) is not None and views.get(world.book, 2).name == "Irene lore, revised"  # type: ignore[union-attr]
    assert len(lore._engines) == 2 and third.live_revisions[world.book] == 2


async def test_prefetch_reads_exactly_what_reads_one_by_one_would(world: World) -> None:
    """``StoreAssetReader.prefetch`` (one read for every bound asset) gives the same views,
    isolated prompts and sources as lazy reads, warm cache or cold, with missing, wrong-kind and
    changed assets among them."""
    from roleplay.core.sources import AssetViewCache, bound_assets

    await world.service.trust_isolated_prompts(world.card, True)
    profile = world.profile(lorebooks=[world.book, "ast_gone", world.card], persona=world.preset)
    wanted = bound_assets(profile)
    assert ("card", world.card) in wanted and ("lorebook", "ast_gone") in wanted and ("persona", world.preset) in wanted
    views = AssetViewCache()
    for round_ in range(3):
        if round_ == 2:  # a changed asset: the cache holds the old revision only
            record = await world.store.get(world.book)
            await world.store.update(world.book, {**record.data, "name": "revised"}, expected_revision=record.revision)
        lazy, eager = StoreAssetReader(world.store, cache=AssetViewCache()), StoreAssetReader(world.store, cache=views)
        await eager.prefetch(wanted)
        for kind, asset_id in wanted:
            assert await eager.read(kind, asset_id) == await lazy.read(kind, asset_id)
        assert await eager.isolated_prompts(world.card) == await lazy.isolated_prompts(world.card)
        got, want = await world.collect(profile, reader=eager), await world.collect(profile, reader=lazy)
        assert got == want
    assert (await eager.read("lorebook", world.book)).name == "revised"  # type: ignore[union-attr]
