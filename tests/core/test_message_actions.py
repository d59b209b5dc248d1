"""Message actions (delete to the end, edit, undo) against running turns and moving heads.

Issue 10.1: an action that lands while a turn runs leaves that turn committing against a state it
no longer has, so every action takes the session's run lease (``run.busy`` meanwhile).
Issue 10.4: an action computes its targets from one surface and appends as a CAS on that same
head, so a write that slips in between is a conflict, never a mis-targeted replacement.
"""

from __future__ import annotations

import asyncio
from typing import Any, AsyncIterator

import pytest

from roleplay.core.message_actions import delete_from, edit_message, undo_last_turn
from roleplay.core.profile import apply_profile
from roleplay.core.run import play_turn
from roleplay.core.runtime import RoleplayRuntime
from roleplay.core.sources import StoreAssetReader
from roleplay.errors import ConflictError
from roleplay.harness.events import EventDraft
from roleplay.harness.models.demo import DemoModel
from roleplay.harness.models.routes import Route
from roleplay.harness.models.types import ModelRequest, StreamEvent
from roleplay.harness.store import EventStore
from roleplay.harness.surface import SURFACE
from roleplay.state.events import state_document
from tests_support import sample_story

pytestmark = pytest.mark.anyio
DEMO = Route("demo", "demo")


class WriterGate(DemoModel):
    """The demo model, holding every Writer request until released: a turn stays running."""

    def __init__(self) -> None:
        super().__init__()
        self.entered, self.release = asyncio.Event(), asyncio.Event()

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        if not request.tools:
            self.entered.set()
            await self.release.wait()
        async for event in super().stream(request):
            yield event


async def story_value(rt: RoleplayRuntime, sid: str) -> dict[str, Any]:
    return state_document((await rt.service.projection(sid, "rp/state")).state)["namespaces"]["story"]["value"]


async def test_actions_and_profile_changes_are_busy_while_a_turn_runs(store: EventStore) -> None:
    gate = WriterGate()
    rt, sid = await sample_story(store, gate)
    gate.release.set()
    await play_turn(rt, sid, "我推开铁门。", parent_route=DEMO)
    gate.release.clear()
    gate.entered.clear()
    before = await story_value(rt, sid)
    nodes = (await rt.service.surface(sid))["nodes"]
    reply = [n for n in nodes if n["role"] == "assistant"][-1]
    running = asyncio.ensure_future(play_turn(rt, sid, "我帮她擦铜镜。", parent_route=DEMO))
    try:
        await asyncio.wait_for(gate.entered.wait(), 30)
        head = await store.head(sid)
        attempts = [
            undo_last_turn(rt, sid),
            delete_from(rt, sid, reply["id"]),
            edit_message(rt, sid, reply["id"], "改写的回复。"),
            apply_profile(rt.service, sid, {"patch": {"runtime": {"executionMode": "agent"}}}, StoreAssetReader(rt.assets)),
            apply_profile(rt.service, sid, {"patch": {"scene": {"openingText": "x"}}}, StoreAssetReader(rt.assets)),
        ]
        for attempt in attempts:
            with pytest.raises(ConflictError) as exc:
                await attempt
            assert exc.value.code == "run.busy"
        assert await store.head(sid) == head  # nothing was written by the refused actions
    finally:
        gate.release.set()
        result = await asyncio.wait_for(running, 60)
    assert result.committed
    after = await story_value(rt, sid)
    assert after["林汐"]["信任"] == before["林汐"]["信任"] + 1  # the turn's commit landed on the state it saw
    # Idle again: the same actions go through.
    assert await undo_last_turn(rt, sid)
    assert await story_value(rt, sid) == before
    await rt.aclose()


async def _interleave(rt: RoleplayRuntime, monkeypatch: pytest.MonkeyPatch, write: Any) -> None:
    """Run ``write`` (a writer that ignores the lease) right after the next surface read."""
    projection = rt.service.projection
    armed = [True]

    async def surface_then_write(session_id: str, name: Any, **kw: Any) -> Any:
        loaded = await projection(session_id, name, **kw)
        if armed[0] and (name == SURFACE or getattr(name, "name", None) == SURFACE) and not kw:
            armed[0] = False
            await write()
        return loaded

    monkeypatch.setattr(rt.service, "projection", surface_then_write)


async def test_delete_from_computes_targets_and_cas_on_one_head(store: EventStore, monkeypatch: pytest.MonkeyPatch) -> None:
    rt, sid = await sample_story(store)
    await play_turn(rt, sid, "我推开铁门。", parent_route=DEMO)
    reply = [n for n in (await rt.service.surface(sid))["nodes"] if n["role"] == "assistant"][-1]

    async def late_message() -> None:
        text = [{"type": "text", "text": "（旁白）"}]
        await rt.service.append(
            sid, [EventDraft("assistant/message", {"messageId": "msg_late", "content": text})], expected_seq=await store.head(sid)
        )

    await _interleave(rt, monkeypatch, late_message)
    with pytest.raises(ConflictError) as exc:
        await delete_from(rt, sid, reply["id"])
    assert exc.value.code == "event.seq_conflict"
    events = await rt.service.events(sid)
    # Refused as a whole: no replacement whose target list misses the message that slipped in.
    assert events[-1].payload["messageId"] == "msg_late"
    assert not any((e.payload.get("source") or {}).get("rpMessageAction") for e in events)
    await rt.aclose()


async def test_edit_message_computes_its_content_and_cas_on_one_head(store: EventStore, monkeypatch: pytest.MonkeyPatch) -> None:
    rt, sid = await sample_story(store)
    await play_turn(rt, sid, "我推开铁门。", parent_route=DEMO)
    user = [n for n in (await rt.service.surface(sid))["nodes"] if n["role"] == "user"][0]

    async def other_edit() -> None:
        replace = {"op": "replace", "range": "node", "targetMessageId": user["id"]}
        payload = {"messageId": "msg_other", "content": [{"type": "text", "text": "另一处改写"}], "surfaceOp": replace}
        await rt.service.append(sid, [EventDraft("user/message", payload)], expected_seq=await store.head(sid))

    await _interleave(rt, monkeypatch, other_edit)
    with pytest.raises(ConflictError) as exc:
        await edit_message(rt, sid, user["id"], "我是来修灯的。")
    assert exc.value.code == "event.seq_conflict"
    node = next(n for n in (await rt.service.surface(sid))["nodes"] if n["id"] == user["id"])
    assert node["content"] == [{"type": "text", "text": "另一处改写"}]  # the other edit is not silently overwritten
    await rt.aclose()
