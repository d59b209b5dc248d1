"""Story creation: materializers, openings, re-choosing the opening on a blank session, and the
Writer route (session override, global default, follow the conversation)."""

from __future__ import annotations

import pytest
from tests_support import core_runtime

from roleplay.assets.seeds import ensure_seeds
from roleplay.assets.service import AssetService
from roleplay.core.message_actions import edit_message
from roleplay.core.profile import apply_profile, profile_of
from roleplay.core.run import OPENING, play_turn, prepare_run, resolve_writer_route
from roleplay.core.runtime import RoleplayRuntime
from roleplay.core.session_create import StoryRequest, create_story, rechoose_opening
from roleplay.core.sources import StoreAssetReader
from roleplay.errors import RpError
from roleplay.harness.models.routes import Route
from roleplay.harness.store import EventStore
from roleplay.samples import SAMPLE_CARD, sample_card_bytes
from roleplay.state.events import state_document

pytestmark = pytest.mark.anyio


async def setup(store: EventStore) -> tuple[RoleplayRuntime, str]:
    rt = core_runtime(store)
    await ensure_seeds(rt.assets)
    return rt, (await AssetService(store).import_file(sample_card_bytes(), SAMPLE_CARD)).asset_id


async def story(rt: RoleplayRuntime, sid: str) -> dict:  # type: ignore[type-arg]
    return state_document((await rt.service.projection(sid, "rp/state")).state)["namespaces"]["story"]


async def test_materializers_compose_profile_bootstrap_and_opening(store: EventStore) -> None:
    rt, card = await setup(store)
    record, m = await create_story(rt, StoryRequest(card=card))
    profile = profile_of((await rt.service.projection(record.id, "rp/session")).state)
    assert profile.resources.card == card and len(profile.resources.lorebooks) == 1  # the card's own book
    assert profile.resources.persona and profile.resources.preset and len(profile.resources.writing_styles) == 1
    assert profile.scene.opening_text.startswith("铁门开了一条缝") and "{{char}}" in profile.scene.opening_text  # the source
    nodes = (await rt.service.surface(record.id))["nodes"]
    assert [n["role"] for n in nodes] == ["assistant"] and "{{char}}" not in nodes[0]["content"][0]["text"]  # expanded
    assert (await story(rt, record.id))["value"]["林汐"]["信任"] == 20
    events = await rt.service.events(record.id)
    assert [e.type for e in events[:3]] == ["turn/start", "assistant/message", "turn/end"]  # the opening is turn 1
    skipped, _ = await create_story(rt, StoryRequest(card=card, opening="skip"))
    assert (await rt.service.surface(skipped.id))["nodes"] == []


async def test_rechoosing_the_opening_replaces_the_bootstrap_only_while_blank(store: EventStore) -> None:
    rt, card = await setup(store)
    record, _ = await create_story(rt, StoryRequest(card=card))
    sid = record.id
    m = await rechoose_opening(rt, sid, "card", index=1)
    nodes = (await rt.service.surface(sid))["nodes"]
    assert len(nodes) == 1 and nodes[0]["content"][0]["text"].startswith("灯室里") and nodes[0]["source"][OPENING]["index"] == 1
    assert m.state_bootstrap is not None and (await story(rt, sid))["revision"] == 1
    profile = profile_of((await rt.service.projection(sid, "rp/session")).state)
    assert profile.scene.opening_index == 1 and profile.scene.opening_text.startswith("灯室里")
    await rechoose_opening(rt, sid, "skip")
    assert (await rt.service.surface(sid))["nodes"] == []
    await play_turn(rt, sid, "你好", parent_route=Route("demo", "demo"))
    with pytest.raises(RpError) as exc:
        await rechoose_opening(rt, sid, "card", index=0)
    assert exc.value.code == "story.not_blank"


async def test_editing_the_opening_uses_a_surface_replacement(store: EventStore) -> None:
    rt, card = await setup(store)
    record, _ = await create_story(rt, StoryRequest(card=card))
    sid = record.id
    opening = (await rt.service.surface(sid))["nodes"][0]
    await edit_message(rt, sid, opening["id"], "铁门开着。")
    nodes = (await rt.service.surface(sid))["nodes"]
    assert len(nodes) == 1 and nodes[0]["id"] == opening["id"] and nodes[0]["content"] == [{"type": "text", "text": "铁门开着。"}]
    assert nodes[0]["source"][OPENING] == opening["source"][OPENING]
    events = await rt.service.events(sid)
    assert events[1].payload["content"][0]["text"] != "铁门开着。"  # the log keeps the original
    with pytest.raises(RpError):
        await edit_message(rt, sid, opening["id"], "  ")


async def test_writer_route_override_default_and_follow(store: EventStore) -> None:
    rt, card = await setup(store)
    record, _ = await create_story(rt, StoryRequest(card=card))
    parent = Route("deepseek", "deepseek-flash", max_output_tokens=2048)
    profile = profile_of((await rt.service.projection(record.id, "rp/session")).state)
    assert resolve_writer_route(rt, profile, parent) == parent  # no override, no global default
    rt.writer_default = Route("openai", "gpt-4o")
    assert resolve_writer_route(rt, profile, parent) == Route("openai", "gpt-4o")
    reader = StoreAssetReader(rt.assets)
    fixed = {"provider": "deepseek", "model": "deepseek-v4-pro", "reasoningEffort": "max"}
    assert (await apply_profile(rt.service, record.id, {"patch": {"runtime": {"writerRoute": fixed}}}, reader)).applied
    profile = profile_of((await rt.service.projection(record.id, "rp/session")).state)
    assert resolve_writer_route(rt, profile, parent) == Route("deepseek", "deepseek-v4-pro", "max", 2048)
    # A merge patch: mixing the two route forms is refused, the fixed fields must be nulled.
    mixed = await apply_profile(rt.service, record.id, {"patch": {"runtime": {"writerRoute": {"followConversation": True}}}}, reader)
    assert not mixed.applied and mixed.outcome.error["code"].startswith("profile.")  # type: ignore[index]
    follow = {"provider": None, "model": None, "reasoningEffort": None, "followConversation": True}
    assert (await apply_profile(rt.service, record.id, {"patch": {"runtime": {"writerRoute": follow}}}, reader)).applied
    profile = profile_of((await rt.service.projection(record.id, "rp/session")).state)
    assert resolve_writer_route(rt, profile, parent) == parent


# -- atomic story operations (issue 10 item 4) ------------------------------------------------------


async def test_a_rejected_setup_creates_no_session(store: EventStore) -> None:
    from roleplay.core.profile import SESSION_APPLY
    from roleplay.harness.commands import CommandRegistry

    rt, card = await setup(store)

    def rejecting(args: dict, ctx: object) -> dict:  # type: ignore[type-arg]
        raise RpError("profile.invalid", "this profile is not acceptable here")

    registry = CommandRegistry()
    registry.register(SESSION_APPLY, rejecting)
    rt.service.commands = registry
    with pytest.raises(RpError) as exc:
        await create_story(rt, StoryRequest(card=card))
    assert exc.value.code == "story.setup_failed" and exc.value.details["error"]["code"] == "profile.invalid"
    assert await rt.service.list(archived=None) == []  # no orphan session left behind


async def test_rechoosing_the_opening_appends_profile_and_opening_in_one_batch(store: EventStore) -> None:
    from roleplay.errors import ConflictError
    from roleplay.harness.store.base import conflict

    rt, card = await setup(store)
    record, _ = await create_story(rt, StoryRequest(card=card))
    sid = record.id
    batches: list[list[str]] = []
    real_append = rt.service.append

    async def recording(session_id, drafts, *, expected_seq):  # type: ignore[no-untyped-def]
        batches.append([d.type for d in drafts])
        return await real_append(session_id, drafts, expected_seq=expected_seq)

    rt.service.append = recording  # type: ignore[method-assign]
    await rechoose_opening(rt, sid, "card", index=1)
    assert batches == [["command/run", "command/done", "assistant/message"]]

    # A writer that lands between the reads and the write costs the whole choice, not half of it.
    async def racing(session_id, drafts, *, expected_seq):  # type: ignore[no-untyped-def]
        if any(d.type == "assistant/message" for d in drafts):
            raise conflict(session_id, expected_seq, expected_seq + 1)
        return await real_append(session_id, drafts, expected_seq=expected_seq)

    rt.service.append = racing  # type: ignore[method-assign]
    before = await rt.service.events(sid)
    with pytest.raises(ConflictError):
        await rechoose_opening(rt, sid, "card", index=0)
    assert await rt.service.events(sid) == before
    assert profile_of((await rt.service.projection(sid, "rp/session")).state).scene.opening_index == 1


async def test_no_first_opening_after_a_story_was_created_without_one(store: EventStore) -> None:
    rt, card = await setup(store)
    skipped, _ = await create_story(rt, StoryRequest(card=card, opening="skip"))
    before = await rt.service.events(skipped.id)
    with pytest.raises(RpError) as exc:
        await rechoose_opening(rt, skipped.id, "card", index=0)
    assert exc.value.code == "story.opening_not_in_seed"
    assert await rt.service.events(skipped.id) == before and (await rt.service.surface(skipped.id))["nodes"] == []
    # Re-choosing "skip" again, or a scene change with nothing to show, stays possible.
    await rechoose_opening(rt, skipped.id, "skip")
    # An opening removed with "skip" cannot come back as a new first message either.
    record, _ = await create_story(rt, StoryRequest(card=card))
    await rechoose_opening(rt, record.id, "skip")
    with pytest.raises(RpError) as exc:
        await rechoose_opening(rt, record.id, "custom", text="雾散了。")
    assert exc.value.code == "story.opening_not_in_seed" and exc.value.details["reason"] == "removed"


async def test_every_kind_can_be_left_out_explicitly_unlike_the_default(store: EventStore) -> None:
    rt, card = await setup(store)
    defaulted, _ = await create_story(rt, StoryRequest(card=card, opening="skip"))
    bound = profile_of((await rt.service.projection(defaulted.id, "rp/session")).state).resources
    assert bound.persona and bound.preset and len(bound.writing_styles) == 1  # omitted: the defaults
    bare, m = await create_story(rt, StoryRequest(persona=False, preset=False, lorebooks=[], writing_styles=[], opening="skip"))
    left = profile_of((await rt.service.projection(bare.id, "rp/session")).state).resources
    assert (left.card, left.persona, left.preset, list(left.lorebooks), list(left.writing_styles)) == (None, None, None, [], [])
    assert m.persona is None and m.opening_text is None  # no card, no persona: the story still opens
    prompt_of = lambda sid: prepare_run(rt, sid, "Hello.", parent_route=Route("demo", "demo"))  # noqa: E731
    full, empty = (await prompt_of(defaulted.id)).build, (await prompt_of(bare.id)).build
    assert {"persona", "character", "preset-task"} <= {s.slot_id for s in full.sections}
    left_slots = {s.slot_id for s in empty.sections}
    assert not {"persona", "character", "world"} & left_slots and not [i for i in left_slots if i.startswith(("preset-", "style-"))]
    assert "player" in left_slots  # the conversation still goes in
    await play_turn(rt, bare.id, "Hello.", parent_route=Route("demo", "demo"))
    roles = [n["role"] for n in (await rt.service.surface(bare.id))["nodes"]]
    assert roles[0] == "user" and "assistant" in roles  # a reply was written
