"""Regenerate the last reply: state returns to the turn before, the replay is sent again to the
same session, save-and-regenerate, failed-turn retry, shared-asset refusal, start-up delivery."""

from __future__ import annotations

import json
from typing import Any

import pytest

from roleplay.core.message_actions import read_views
from roleplay.core.regenerate import deliver_pending_replay, pending_replay, record_regenerate, regenerate
from roleplay.core.run import play_turn
from roleplay.core.runtime import RoleplayRuntime
from roleplay.core.turn_surface import turn_surface_projection, turns_view
from roleplay.errors import RpError
from roleplay.harness.events import EventDraft
from roleplay.harness.models.routes import Route
from roleplay.harness.models.scripted import ScriptedModel
from roleplay.harness.store import EventStore
from roleplay.state.events import state_document
from roleplay.testing.story_scripts import CountingStory
from tests_support import sample_story

pytestmark = pytest.mark.anyio
SCRIPTED = Route("scripted", "scripted")


async def story(rt: RoleplayRuntime, sid: str) -> dict[str, Any]:
    return state_document((await rt.service.projection(sid, "rp/state")).state)["namespaces"]["story"]["value"]


async def turns(rt: RoleplayRuntime, sid: str) -> list[dict[str, Any]]:
    return turns_view((await rt.service.projection(sid, turn_surface_projection)).state)


async def counting(store: EventStore) -> tuple[RoleplayRuntime, str, CountingStory]:
    rt, sid = await sample_story(store)
    script = CountingStory()
    rt.models[SCRIPTED.spec] = script.model()
    return rt, sid, script


async def test_regenerate_returns_to_the_turn_before_then_applies_the_new_commit(store: EventStore) -> None:
    rt, sid, _ = await counting(store)
    await play_turn(rt, sid, "我推开铁门。", parent_route=SCRIPTED)
    after_first = await story(rt, sid)
    result = await play_turn(rt, sid, "我帮她擦铜镜。", parent_route=SCRIPTED)
    assert result.committed and (await story(rt, sid))["林汐"]["心情"] == "心情2"
    regenerated = await regenerate(rt, sid, parent_route=SCRIPTED)
    assert regenerated.committed and "第3稿" in regenerated.reply
    value = await story(rt, sid)
    assert value["林汐"]["心情"] == "心情3"
    trust_by = {2: 0, 3: 1}  # CountingStory: draft n moves trust by (n % 5) - 2
    assert value["林汐"]["信任"] == after_first["林汐"]["信任"] + trust_by[3]
    view = await turns(rt, sid)
    last = view[-1]
    inputs = [n for n in (await read_views(rt, sid)).nodes if n["id"] in last["inputs"]]
    assert [n["content"][0]["text"] for n in inputs] == ["我帮她擦铜镜。"]  # the same user text, sent again
    assert last["alternatives"]["count"] == 2 and last["alternatives"]["index"] == 1
    assert len(view) == 3  # opening, first turn, the regenerated turn
    events = await rt.service.events(sid)
    action = next(e for e in reversed(events) if (e.payload.get("source") or {}).get("rpMessageAction", {}).get("kind") == "regenerate")
    assert action.payload["source"]["rpMessageAction"]["replay"]["texts"] == ["我帮她擦铜镜。"]
    assert action.payload["content"] == [] and action.payload["surfaceOp"]["range"] == "suffix"
    rebuilt = await rt.service.projection(sid, "rp/state", use_snapshot=False, snapshot_every=None)
    assert state_document(rebuilt.state) == json.loads(json.dumps(state_document((await rt.service.projection(sid, "rp/state")).state)))
    await rt.aclose()


async def test_save_and_regenerate_edits_the_user_message_first(store: EventStore) -> None:
    rt, sid, _ = await counting(store)
    await play_turn(rt, sid, "我推开铁门。", parent_route=SCRIPTED)
    result = await regenerate(rt, sid, parent_route=SCRIPTED, save_edit="我轻轻敲门。")
    assert result.committed
    last = (await turns(rt, sid))[-1]
    node = next(n for n in (await read_views(rt, sid)).nodes if n["id"] == last["inputs"][0])
    assert node["content"] == [{"type": "text", "text": "我轻轻敲门。"}]
    assert last["alternatives"]["count"] == 2
    await rt.aclose()


async def test_a_failed_turn_is_retried_with_the_same_input(store: EventStore) -> None:
    rt, sid = await sample_story(store)
    script = CountingStory()
    model = ScriptedModel([RpError("model.unavailable", "the provider is down")], responder=script)
    rt.models[SCRIPTED.spec] = model
    failed = await play_turn(rt, sid, "我推开铁门。", parent_route=SCRIPTED)
    assert failed.turn.outcome == "error"
    retried = await regenerate(rt, sid, parent_route=SCRIPTED)
    assert retried.committed
    view = await turns(rt, sid)
    assert [t["outcome"] for t in view] == ["uncommitted", "committed"]  # the opening, then the retry
    assert view[-1]["alternatives"] is None  # a failure is not an alternative
    await rt.aclose()


async def test_regenerate_is_refused_for_openings_open_turns_and_shared_asset_writes(store: EventStore) -> None:
    rt, sid, _ = await counting(store)
    with pytest.raises(RpError) as exc:
        await regenerate(rt, sid, parent_route=SCRIPTED)
    assert exc.value.code == "message.not_regenerable"
    await play_turn(rt, sid, "我推开铁门。", parent_route=SCRIPTED)
    last = (await turns(rt, sid))[-1]
    head = await store.head(sid)
    # A turn whose log holds a successful shared-asset write (Agent mode's rp_asset).
    meta = {"kind": "rp-asset/write", "target": "asset", "assetId": "ast_x", "revision": 2}
    result = {"callId": "call_asset", "name": "rp_asset", "ok": True, "content": "{}", "meta": meta, "turnId": last["turnId"]}
    await rt.service.append(sid, [EventDraft("tool/result", result)], expected_seq=head)
    with pytest.raises(RpError) as exc:
        await regenerate(rt, sid, parent_route=SCRIPTED)
    assert exc.value.code == "message.regenerate_shared_assets"
    assert await store.head(sid) == head + 1  # nothing written
    await rt.aclose()


async def test_a_recorded_replay_is_delivered_on_start_up(store: EventStore) -> None:
    rt, sid, _ = await counting(store)
    await play_turn(rt, sid, "我推开铁门。", parent_route=SCRIPTED)
    replay = await record_regenerate(rt, sid)  # the process "stops" before the turn runs
    pending = await pending_replay(rt, sid)
    assert pending is not None and pending["replayId"] == replay["replayId"] and pending["text"] == "我推开铁门。"
    with pytest.raises(RpError) as exc:
        await regenerate(rt, sid, parent_route=SCRIPTED, save_edit="别的话")
    assert exc.value.code == "message.replay_pending"
    result = await deliver_pending_replay(rt, sid, parent_route=SCRIPTED)
    assert result is not None and result.committed
    assert await pending_replay(rt, sid) is None
    assert await deliver_pending_replay(rt, sid, parent_route=SCRIPTED) is None
    assert (await turns(rt, sid))[-1]["alternatives"]["count"] == 2
    await rt.aclose()


async def test_regenerate_sends_a_pending_replay_instead_of_replacing_the_turn_before(store: EventStore) -> None:
    rt, sid, _ = await counting(store)
    await play_turn(rt, sid, "我推开铁门。", parent_route=SCRIPTED)
    await play_turn(rt, sid, "我帮她擦铜镜。", parent_route=SCRIPTED)
    await record_regenerate(rt, sid)
    result = await regenerate(rt, sid, parent_route=SCRIPTED)
    view = await turns(rt, sid)
    assert result.committed and len(view) == 3 and view[-1]["alternatives"]["count"] == 2
    node = next(n for n in (await read_views(rt, sid)).nodes if n["id"] == view[-1]["inputs"][0])
    assert node["content"][0]["text"] == "我帮她擦铜镜。"
    await rt.aclose()


async def test_a_continuation_is_not_regenerated(store: EventStore) -> None:
    from roleplay.core.continue_turn import continue_turn

    rt, sid, _ = await counting(store)
    await play_turn(rt, sid, "我推开铁门。", parent_route=SCRIPTED)
    assert (await continue_turn(rt, sid, parent_route=SCRIPTED)).committed
    last = (await turns(rt, sid))[-1]
    assert not last["regenerable"]
    with pytest.raises(RpError) as exc:
        await regenerate(rt, sid, parent_route=SCRIPTED)
    assert exc.value.code == "message.not_regenerable" and "continuation" in exc.value.message
    await rt.aclose()
