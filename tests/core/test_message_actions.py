"""Message actions (delete to the end, edit, undo) against running turns and moving heads.

Issue 10.1: an action that lands while a turn runs leaves that turn committing against a state it
no longer has, so every action takes the session's run lease (``run.busy`` meanwhile).
Issue 10.4: an action computes its targets from one surface and appends as a CAS on that same
head, so a write that slips in between is a conflict, never a mis-targeted replacement.
"""

from __future__ import annotations

import asyncio
import json
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
from roleplay.core.branch import branch
from roleplay.core.message_actions import visible_messages
from roleplay.core.regenerate import regenerate
from roleplay.core.swipes import swipe
from roleplay.core.turn_surface import TURN_SURFACE, turn_surface_projection, turns_view
from roleplay.errors import RpError
from roleplay.harness.projections import load
from roleplay.state.events import activity_document, state_document
from roleplay.testing.story_scripts import CountingStory
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
            regenerate(rt, sid, parent_route=DEMO),
            swipe(rt, sid, "left"),
            branch(rt, sid),
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
    """Run ``write`` (a writer that ignores the lease) right after the action has read the log."""
    projection = rt.service.projection
    armed = [True]

    async def surface_then_write(session_id: str, name: Any, **kw: Any) -> Any:
        loaded = await projection(session_id, name, **kw)
        # The last read an action makes before it computes its targets: the turn surface.
        if armed[0] and getattr(name, "name", name) == TURN_SURFACE and not kw:
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


# -- acceptance: random sequences of actions (issue 14) ------------------------------------------

ACTIONS = (
    "turn",
    "turn",
    "regenerate",
    "regenerate",
    "swipe-left",
    "swipe-right",
    "edit",
    "delete",
    "branch",
    "checkpoint",
    "turn",
    "checkpoint",
)
FOLDED = ("rp/state", "rp/state/activity", "rp/reply-options", "rp/summary", "harness/surface", "rp/replies")
REFUSALS = {
    "message.no_alternatives",
    "message.no_alternative",
    "message.not_regenerable",
    "message.not_a_target",
    "message.not_deletable",
    "branch.no_anchor",
}


async def _state_and_activity(rt: RoleplayRuntime, sid: str) -> tuple[Any, Any]:
    tracker = (await rt.service.projection(sid, "rp/state")).state
    return json.loads(json.dumps([state_document(tracker), activity_document(tracker)]))


async def _check_against_fresh_folds(rt: RoleplayRuntime, sid: str) -> None:
    """Every fold the actions touch equals a fresh fold of the log from seq 0, and what a new
    runtime (its own cache, reading stored snapshots) loads."""
    fresh = RoleplayRuntime.create(rt.store)
    projections = [rt.service.projections.get(n) for n in FOLDED if n in rt.service.projections.names()]
    for projection in [*projections, turn_surface_projection]:
        live = await rt.service.projection(sid, projection)
        rebuilt = await load(rt.store, sid, projection, use_snapshot=False, snapshot_every=None)
        assert rebuilt.state == json.loads(json.dumps(live.state)), projection.name
        other = await fresh.service.projection(sid, projection)
        assert json.loads(json.dumps(other.state)) == rebuilt.state, projection.name


async def _expected(rt: RoleplayRuntime, sid: str, after: dict[str, Any], initial: Any) -> Any:
    """The oracle: the state recorded right after the last committed reply still on the story was
    first written (a swiped-back copy: right after its original alternative)."""
    state = (await rt.service.projection(sid, turn_surface_projection)).state
    origin = {alt["current"]: alt["turnId"] for g in state["groups"].values() for alt in g["alts"]}
    for turn_id in reversed(state["order"]):
        turn = state["turns"][turn_id]
        body = state["messages"].get(turn["commit"]["messageId"]) if turn["commit"] else None
        # A compacted reply's effects stay (a checkpoint never retracts).
        if body is not None and body["status"] in ("live", "compacted"):
            return after[origin.get(turn_id, turn_id)]
    return initial


async def _checkpoint(rt: RoleplayRuntime, sid: str) -> None:
    """What a landed summary does: everything before the last turn becomes one summary node."""
    view = turns_view((await rt.service.projection(sid, turn_surface_projection)).state)
    nodes = (await rt.service.projection(sid, "harness/surface")).state["nodes"]
    if len(view) < 2:
        return
    last_start = view[-1]["startSeq"]
    covered = [s for n in nodes if n["seq"] < last_start for s in [n["seq"], *n.get("replaces", [])]]
    if not covered:
        return
    payload = {"checkpointId": rt.ids("cp_"), "summary": "前情提要。", "sourceEventSeqs": covered}
    await rt.service.append(sid, [EventDraft("compaction/checkpoint", payload)], expected_seq=await rt.store.head(sid))


async def run_sequence(store: EventStore, model_name: str, steps: list[str], picks: list[int]) -> None:
    rt, sid = await sample_story(store, plus_features=("rp-reply-options",))
    route = DEMO
    if model_name == "scripted":
        route = Route("scripted", "scripted")
        rt.models[route.spec] = CountingStory(discussion_every=3).model()
    initial = await _state_and_activity(rt, sid)
    after: dict[str, Any] = {}
    for n, action in enumerate(steps):
        head = await store.head(sid)
        try:
            if action == "turn":
                result = await play_turn(rt, sid, f"第{n}步：我往前走。", parent_route=route)
                after[result.turn.turn_id] = await _state_and_activity(rt, sid)
            elif action == "regenerate":
                result = await regenerate(rt, sid, parent_route=route)
                after[result.turn.turn_id] = await _state_and_activity(rt, sid)
            elif action == "checkpoint":
                await _checkpoint(rt, sid)
            elif action in ("swipe-left", "swipe-right"):
                await swipe(rt, sid, "left" if action == "swipe-left" else "right")
            else:
                listed = await visible_messages(rt, sid)
                if not listed:
                    continue
                picked = listed[picks[n] % len(listed)]["messageId"]
                if action == "edit":
                    await edit_message(rt, sid, picked, f"改写{n}")
                elif action == "delete":
                    await delete_from(rt, sid, picked)
                else:
                    made = await branch(rt, sid, at_message=picked)
                    await _check_against_fresh_folds(rt, sid)
                    sid = made.record.id  # go on in the branch; the source was checked above
        except RpError as exc:
            assert exc.code in REFUSALS, (action, exc.code, exc.message)
            assert await store.head(sid) == head  # a refused action writes nothing
        assert await _state_and_activity(rt, sid) == await _expected(rt, sid, after, initial), (n, action, steps)
        await _check_against_fresh_folds(rt, sid)
    await rt.aclose()


@pytest.mark.slow
@pytest.mark.parametrize("model_name", ["scripted", "demo"])
def test_random_sequences_leave_every_fold_equal_to_the_log(make_store: Any, model_name: str) -> None:
    """Turns, edits, deletes, regenerates, swipes and branches in random order, on SQLite and
    PostgreSQL: after every step, rp/state, its activity, reply options, the summary slot and the
    turn surface equal a fresh fold of the surviving log, and the state is the one the last
    surviving committed reply left."""
    import asyncio

    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from roleplay.clock import ulid_ids

    @settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
    @given(
        steps=st.lists(st.sampled_from(ACTIONS), min_size=5, max_size=12),
        picks=st.lists(st.integers(0, 1000), min_size=12, max_size=12),
    )
    def sequences(steps: list[str], picks: list[int]) -> None:
        async def go() -> None:
            store = make_store(ids=ulid_ids)  # one database for every example: ids must not repeat
            await store.migrate()
            try:
                await run_sequence(store, model_name, steps, picks)
            finally:
                await store.close()

        asyncio.run(go())

    sequences()
