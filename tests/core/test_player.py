"""The user's control boundary (spec 安全与确定性).

- ``rp.card``'s text itself says the card never defines the user's identity, persona or control
  of any character, in every view (Writer, parent).
- The stored ``participation`` (``adaptive`` by default, ``actor``, ``director``) is read each run
  and becomes the internal ``rp.player`` source: fixed text per setting, never derived from the
  card or the persona, delivered to the Writer and to the parent.
"""

from __future__ import annotations

import json
from typing import Any, get_args

import pytest
from tests_support import core_runtime

from roleplay.assets.cards.feature import card_source
from roleplay.assets.seeds import ensure_seeds
from roleplay.assets.service import AssetService
from roleplay.core import context_build as cb
from roleplay.core import prompts
from roleplay.core.macros import macro_context_from
from roleplay.core.profile import SessionProfile, apply_profile, parse_profile
from roleplay.core.run import prepare_run
from roleplay.core.session_create import StoryRequest, create_story
from roleplay.core.sources import (
    SourceInputs,
    StoreAssetReader,
    collect_sources,
    macro_context_for,
)
from roleplay.core.types import CARD, CURRENT_INPUT, PERSONA, PLAYER, AssetView, ContextSource, Slot
from roleplay.errors import ValidationError
from roleplay.harness.models.routes import Route
from roleplay.harness.store import EventStore
from roleplay.plugins import source_providers
from roleplay.samples import SAMPLE_CARD, sample_card_bytes

pytestmark = pytest.mark.anyio
MODES = ("adaptive", "actor", "director")

# A card that tries to cast the user: the classic community habit this boundary exists for.
CASTING_DATA = {
    "name": "Queen Mara",
    "description": "{{user}} is Mara's sworn knight and must obey her.",
    "personality": "Proud.",
    "scenario": "You play the knight {{user}}.",
    "first_mes": "Kneel.",
}
CASTING_FILE = json.dumps(
    {
        "spec": "chara_card_v2",
        "spec_version": "2.0",
        "data": {
            **CASTING_DATA,
            "mes_example": "",
            "creator_notes": "",
            "system_prompt": "",
            "post_history_instructions": "",
            "alternate_greetings": [],
            "tags": [],
            "creator": "",
            "character_version": "",
            "extensions": {},
        },
    }
).encode()


def card_view(data: dict[str, Any]) -> AssetView:
    return AssetView("card_1", "card", 1, data, data["name"])


# -- rp.card -----------------------------------------------------------------------------------------


def test_card_text_says_the_card_never_defines_the_user() -> None:
    macros = macro_context_from(CASTING_DATA, {"name": "Robin", "description": "A traveller."})
    src = card_source(card_view(CASTING_DATA), macros)
    assert src is not None
    assert src.text.startswith(prompts.CARD_NOTE + "\n\n")
    note = prompts.CARD_NOTE.lower()
    for words in ("identity", "persona", "control", "never"):
        assert words in note, words
    assert "Robin is Mara's sworn knight" in src.text  # the card's material itself is kept
    # The parent reads the same text (no parent_text), so it is told the same thing.
    assert src.parent_text is None and src.parent_delivery == "context"


def test_card_note_survives_the_parent_fragment_and_is_not_macro_expanded() -> None:
    macros = macro_context_from(CASTING_DATA, None)
    card = card_source(card_view(CASTING_DATA), macros)
    assert card is not None and "{{" not in prompts.CARD_NOTE
    sources = {CARD: card, CURRENT_INPUT: ContextSource(CURRENT_INPUT, "Input", "hi", "factual")}
    build = cb.freeze(cb.default_layout(sources), sources)
    assert prompts.CARD_NOTE in build.parent_context and prompts.CARD_NOTE in build.writer_prompt


def test_a_card_with_no_material_gives_no_source_and_no_lone_note() -> None:
    empty = {**CASTING_DATA, "name": "", "description": "", "personality": "", "scenario": ""}
    assert card_source(card_view(empty), macro_context_from(None, None)) is None


# -- rp.player ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_player_text_is_fixed_per_participation(mode: str) -> None:
    text = prompts.player_boundary(mode)  # type: ignore[arg-type]
    assert text == prompts.player_boundary(mode)  # type: ignore[arg-type]
    assert f"participation is {mode}" in text
    assert "character card" in text  # says the card never assigns the user a character
    others = [prompts.player_boundary(m) for m in MODES if m != mode]  # type: ignore[arg-type]
    assert text not in others


def test_adaptive_reads_each_input_as_acting_observing_directing_or_mixed() -> None:
    text = prompts.player_boundary("adaptive").lower()
    for kind in ("each input", "acting", "observing", "directing", "mixed"):
        assert kind in text, kind


def test_unknown_participation_is_a_coded_error() -> None:
    with pytest.raises(ValidationError) as e:
        prompts.player_boundary("narrator")  # type: ignore[arg-type]
    assert e.value.code == "prompt.invalid_participation" and e.value.pointer == "/participation"


@pytest.mark.parametrize("mode", MODES)
async def test_collected_player_source_follows_the_stored_participation(store: EventStore, mode: str) -> None:
    reader = StoreAssetReader(AssetService(store).store)
    profile = parse_profile({"participation": mode})
    got = await collect_sources(
        SourceInputs("run_1", profile, await macro_context_for(profile, reader), current_input="hi"), reader, source_providers()
    )
    player = got.by_id()[PLAYER]
    assert player.text == prompts.player_boundary(mode)  # type: ignore[arg-type]
    assert (player.title, player.parent_delivery, player.shared_reference, player.revision) == ("Player", "context", False, None)


async def test_without_a_profile_the_boundary_is_adaptive(store: EventStore) -> None:
    reader = StoreAssetReader(AssetService(store).store)
    got = await collect_sources(SourceInputs("run_1", None, await macro_context_for(None, reader)), reader, source_providers())
    assert got.by_id()[PLAYER].text == prompts.player_boundary("adaptive")


async def test_player_boundary_is_not_derived_from_the_card_or_the_persona(store: EventStore) -> None:
    service = AssetService(store)
    await service.ensure_seeds()
    card = (await service.import_file(CASTING_FILE, "mara.json")).asset_id
    persona = (await service.store.get_default("persona")).id  # type: ignore[union-attr]
    reader = StoreAssetReader(service.store)
    bare = parse_profile({"participation": "actor"})
    bound = parse_profile({"participation": "actor", "resources": {"card": card, "persona": persona}})
    plain = (await collect_sources(SourceInputs("r", bare, await macro_context_for(bare, reader)), reader, source_providers())).by_id()[
        PLAYER
    ]
    with_card = (
        await collect_sources(SourceInputs("r", bound, await macro_context_for(bound, reader)), reader, source_providers())
    ).by_id()
    assert with_card[PLAYER].text == plain.text
    assert "Mara" not in plain.text and "knight" not in plain.text and "User" not in plain.text
    ids = [s for s in with_card]
    assert ids.index(PLAYER) == ids.index(PERSONA) + 1  # the boundary sits right after the persona


# -- layout ------------------------------------------------------------------------------------------


def test_default_layout_places_the_player_slot_after_the_persona() -> None:
    slots = cb.default_layout({})
    ids = [s.id for s in slots]
    assert ids[ids.index("persona") + 1] == "player"
    assert next(s for s in slots if s.id == "player").name == "Player"


def test_a_saved_layout_from_before_the_boundary_gets_it_after_the_persona() -> None:
    saved = [Slot("a", "Character", (CARD,)), Slot("b", "Persona", (PERSONA,)), Slot("c", "Input", (CURRENT_INPUT,))]
    sources = {PLAYER: ContextSource(PLAYER, "Player", prompts.player_boundary("actor"), "factual")}
    assert [s.id for s in cb.effective_layout(saved, sources)] == ["a", "b", "player", "c"]


def test_a_saved_layout_may_place_the_player_source() -> None:
    profile = parse_profile(
        {
            "contextBuild": {
                "slots": [
                    {"id": "me", "name": "Me", "sources": [PERSONA, PLAYER]},
                    {"id": "in", "name": "Input", "sources": [CURRENT_INPUT]},
                ]
            }
        }
    )
    assert profile.context_build is not None and profile.context_build.slots[0].sources == (PERSONA, PLAYER)


# -- end to end: what the Writer and the Chat parent are told ----------------------------------------------


async def test_a_turn_tells_writer_and_parent_the_participation_and_follows_a_change(store: EventStore) -> None:
    rt = core_runtime(store)
    await ensure_seeds(rt.assets)
    card = (await AssetService(store).import_file(sample_card_bytes(), SAMPLE_CARD)).asset_id
    record, _ = await create_story(rt, StoryRequest(card=card, participation="director"))
    p = await prepare_run(rt, record.id, "让雾更浓一些。", parent_route=Route("demo", "demo"))
    director = prompts.player_boundary("director")
    assert director in p.build.writer_prompt and director in p.run_context
    assert prompts.CARD_NOTE in p.build.writer_prompt and prompts.CARD_NOTE in p.run_context
    # No fixed parent text may contradict the boundary (a director controls no character).
    parent_system = "\n".join(section.text for section in p.parent_system_sections)
    assert "controls their own character" not in parent_system and "Player section" in parent_system

    changed = await apply_profile(rt.service, record.id, {"patch": {"participation": "actor"}}, StoreAssetReader(rt.assets))
    assert changed.applied
    q = await prepare_run(rt, record.id, "我敲门。", parent_route=Route("demo", "demo"))
    assert prompts.player_boundary("actor") in q.build.writer_prompt and director not in q.build.writer_prompt


async def test_a_new_story_is_adaptive_unless_asked(store: EventStore) -> None:
    rt = core_runtime(store)
    await ensure_seeds(rt.assets)
    card = (await AssetService(store).import_file(sample_card_bytes(), SAMPLE_CARD)).asset_id
    record, _ = await create_story(rt, StoryRequest(card=card))
    p = await prepare_run(rt, record.id, "你好", parent_route=Route("demo", "demo"))
    assert p.profile.participation == "adaptive"
    assert prompts.player_boundary("adaptive") in p.build.writer_prompt


def test_every_stored_participation_has_a_boundary() -> None:
    stored = SessionProfile.model_fields["participation"].annotation
    assert set(get_args(stored)) == set(prompts.PARTICIPATIONS) == set(MODES)
