"""Swipes: each regenerate keeps the replaced reply as an alternative; swiping makes one live
again with exactly its own state, reply options and text, and a fresh fold agrees."""

from __future__ import annotations

import json
from typing import Any

import pytest

from roleplay.core.message_actions import edit_message, read_views
from roleplay.core.regenerate import regenerate
from roleplay.core.run import play_turn
from roleplay.core.runtime import RoleplayRuntime
from roleplay.core.swipes import swipe
from roleplay.core.turn_surface import turn_surface_projection, turns_view
from roleplay.errors import RpError
from roleplay.harness.models.routes import Route
from roleplay.harness.store import EventStore
from roleplay.state.events import activity_document, state_document
from roleplay.testing.story_scripts import CountingStory
from tests_support import sample_story

pytestmark = pytest.mark.anyio
SCRIPTED = Route("scripted", "scripted")
FOLDS = ("rp/state", "rp/state/activity", "harness/surface", "rp/replies")


async def snapshot(rt: RoleplayRuntime, sid: str) -> dict[str, Any]:
    tracker = (await rt.service.projection(sid, "rp/state")).state
    views = await read_views(rt, sid)
    last = turns_view(views.turns)[-1]
    body = next(n for n in views.nodes if n["id"] == last["body"]["messageId"])
    return {
        "state": state_document(tracker),
        "activity": activity_document(tracker),
        "text": body["content"],
        "alternatives": last["alternatives"],
    }


async def check_fresh_fold(rt: RoleplayRuntime, sid: str) -> None:
    for name in FOLDS:
        live = await rt.service.projection(sid, name)
        rebuilt = await rt.service.projection(sid, name, use_snapshot=False, snapshot_every=None)
        assert rebuilt.state == json.loads(json.dumps(live.state)), name
    live = await rt.service.projection(sid, turn_surface_projection)
    rebuilt = await rt.service.projection(sid, turn_surface_projection, use_snapshot=False, snapshot_every=None)
    assert rebuilt.state == json.loads(json.dumps(live.state))


async def test_swipe_through_three_alternatives_and_back(store: EventStore) -> None:
    rt, sid = await sample_story(store)
    rt.models[SCRIPTED.spec] = CountingStory().model()
    await play_turn(rt, sid, "我推开铁门。", parent_route=SCRIPTED)
    await play_turn(rt, sid, "我帮她擦铜镜。", parent_route=SCRIPTED)
    seen = [await snapshot(rt, sid)]
    for _ in range(2):
        await regenerate(rt, sid, parent_route=SCRIPTED)
        seen.append(await snapshot(rt, sid))
    assert len({json.dumps(s["state"], sort_keys=True) for s in seen}) == 3  # three distinct states
    assert seen[-1]["alternatives"]["count"] == 3 and seen[-1]["alternatives"]["index"] == 2
    for index in (1, 0):
        moved = await swipe(rt, sid, "left")
        assert moved["index"] == index
        now = await snapshot(rt, sid)
        assert (now["state"], now["activity"], now["text"]) == (seen[index]["state"], seen[index]["activity"], seen[index]["text"])
        assert now["alternatives"]["index"] == index and now["alternatives"]["count"] == 3
        await check_fresh_fold(rt, sid)
    with pytest.raises(RpError) as exc:
        await swipe(rt, sid, "left")
    assert exc.value.code == "message.no_alternative"
    for index in (1, 2):
        await swipe(rt, sid, "right")
        now = await snapshot(rt, sid)
        assert (now["state"], now["activity"], now["text"]) == (seen[index]["state"], seen[index]["activity"], seen[index]["text"])
    with pytest.raises(RpError) as exc:
        await swipe(rt, sid, "right")
    assert exc.value.code == "message.no_alternative" and "regenerate" in exc.value.message
    await check_fresh_fold(rt, sid)
    # The story goes on from the swiped reply; the next turn has no alternatives of its own.
    assert (await play_turn(rt, sid, "我点亮了灯。", parent_route=SCRIPTED)).committed
    assert turns_view((await rt.service.projection(sid, turn_surface_projection)).state)[-1]["alternatives"] is None
    await rt.aclose()


async def test_an_edited_alternative_keeps_its_edit_when_swiped_back(store: EventStore) -> None:
    rt, sid = await sample_story(store)
    rt.models[SCRIPTED.spec] = CountingStory().model()
    await play_turn(rt, sid, "我推开铁门。", parent_route=SCRIPTED)
    first = turns_view((await rt.service.projection(sid, turn_surface_projection)).state)[-1]
    await edit_message(rt, sid, first["body"]["messageId"], "改过的第一稿。")
    before = await snapshot(rt, sid)
    await regenerate(rt, sid, parent_route=SCRIPTED)
    await swipe(rt, sid, 0)
    after = await snapshot(rt, sid)
    assert after["text"][-1] == {"type": "text", "text": "改过的第一稿。"}
    assert after["state"] == before["state"]
    await check_fresh_fold(rt, sid)
    await rt.aclose()


async def test_no_alternatives_to_swipe(store: EventStore) -> None:
    rt, sid = await sample_story(store)
    rt.models[SCRIPTED.spec] = CountingStory().model()
    await play_turn(rt, sid, "我推开铁门。", parent_route=SCRIPTED)
    with pytest.raises(RpError) as exc:
        await swipe(rt, sid, "left")
    assert exc.value.code == "message.no_alternatives"
    await rt.aclose()


async def test_reply_options_follow_the_live_alternative(store: EventStore) -> None:
    from roleplay.reply_options.projection import live_entries, options_for_turn, reply_options_projection

    rt, sid = await sample_story(store, plus_features=("rp-reply-options",))
    rt.models[SCRIPTED.spec] = CountingStory().model()

    async def options() -> tuple[list[Any], str]:
        state = (await rt.service.projection(sid, reply_options_projection)).state
        last = turns_view((await rt.service.projection(sid, turn_surface_projection)).state)[-1]
        return [e["options"] for e in live_entries(state)], options_for_turn(state, last["turnId"])

    await play_turn(rt, sid, "我推开铁门。", parent_route=SCRIPTED)
    first, first_turn = await options()
    assert first and first_turn == first[-1]
    await regenerate(rt, sid, parent_route=SCRIPTED)
    second, _ = await options()
    assert len(second) == 1  # the replaced reply's options retired with it
    await swipe(rt, sid, "left")
    back, back_turn = await options()
    assert back == first and back_turn == first[-1]  # the alternative's own options, under the live turn
    await check_fresh_fold(rt, sid)
    live = await rt.service.projection(sid, reply_options_projection)
    rebuilt = await rt.service.projection(sid, reply_options_projection, use_snapshot=False, snapshot_every=None)
    assert rebuilt.state == json.loads(json.dumps(live.state))
    await rt.aclose()


async def test_swipe_back_from_a_failed_regeneration(store: EventStore) -> None:
    from roleplay.core.message_actions import visible_messages
    from roleplay.harness.models.scripted import ScriptedModel

    rt, sid = await sample_story(store)
    script = CountingStory()
    model = ScriptedModel(responder=script)
    rt.models[SCRIPTED.spec] = model
    await play_turn(rt, sid, "我推开铁门。", parent_route=SCRIPTED)
    good = await snapshot(rt, sid)
    model.enqueue(RpError("model.unavailable", "the provider is down"))
    failed = await regenerate(rt, sid, parent_route=SCRIPTED)
    assert failed.turn.outcome == "error"
    last = (await visible_messages(rt, sid))[-1]
    assert last["failure"]["code"] == "model.unavailable" and last["alternatives"] == {"index": None, "count": 1}
    with pytest.raises(RpError):
        await swipe(rt, sid, "right")
    moved = await swipe(rt, sid, "left")
    assert moved == {"index": 0, "count": 1, "turnId": moved["turnId"]}
    back = await snapshot(rt, sid)
    assert (back["state"], back["text"]) == (good["state"], good["text"])
    await check_fresh_fold(rt, sid)
    await rt.aclose()
