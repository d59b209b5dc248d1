"""``rp/reply-options``: options survive replay (a fresh fold, a snapshot and a new process all
equal the live state) and follow message actions (delete and undo retract, an edit keeps)."""

from __future__ import annotations

from typing import Any

import pytest

from roleplay.core.message_actions import delete_from, edit_message, undo_last_turn
from roleplay.core.run import play_turn
from roleplay.features import build_runtime
from roleplay.harness.events import Event
from roleplay.harness.projections import fold, write_snapshot
from roleplay.harness.store import EventStore
from roleplay.reply_options import FEATURE
from roleplay.reply_options.projection import (
    EXTENSION_KEY,
    MAX_ENTRIES,
    live_entries,
    options_for_message,
    options_for_turn,
    reply_options_projection,
)
from roleplay.harness.models.routes import Route
from tests_support import CORE_TEST_FEATURES, sample_story

pytestmark = pytest.mark.anyio
DEMO = Route("demo", "demo")


async def story(store: EventStore) -> tuple[Any, str]:
    """The sample story with reply options on."""
    return await sample_story(store, plus_features=(FEATURE,))  # type: ignore[no-any-return]


async def live(rt: Any, sid: str) -> dict[str, Any]:
    return (await rt.service.projection(sid, reply_options_projection)).state  # type: ignore[no-any-return]


async def fresh(store: EventStore, sid: str) -> dict[str, Any]:
    return fold(reply_options_projection, await store.read(sid))  # type: ignore[no-any-return]


async def test_options_survive_replay(store: EventStore) -> None:
    rt, sid = await story(store)
    first = await play_turn(rt, sid, "我走进灯塔。", parent_route=DEMO)
    second = await play_turn(rt, sid, "我问起晨星号。", parent_route=DEMO)
    state = await live(rt, sid)
    entries = live_entries(state)
    assert [e["turnId"] for e in entries] == [first.turn.turn_id, second.turn.turn_id]
    assert options_for_turn(state, second.turn.turn_id) == entries[1]["options"] and len(entries[1]["options"]) == 3
    assert options_for_message(state, entries[0]["messageId"]) == entries[0]["options"]
    assert await fresh(store, sid) == state
    # A snapshot, and a new process's runtime on the same store, load the same state.
    await write_snapshot(store, sid, reply_options_projection)
    rt2 = build_runtime(store, enabled=(*CORE_TEST_FEATURES, FEATURE), entry_points=False)
    assert (await rt2.service.projection(sid, reply_options_projection, use_snapshot=True)).state == state
    await rt.aclose()
    await rt2.aclose()


async def test_deleting_or_undoing_the_reply_removes_its_options(store: EventStore) -> None:
    rt, sid = await story(store)
    first = await play_turn(rt, sid, "我走进灯塔。", parent_route=DEMO)
    second = await play_turn(rt, sid, "我问起晨星号。", parent_route=DEMO)
    reply = live_entries(await live(rt, sid))[1]["messageId"]

    await edit_message(rt, sid, reply, "改写后的回复。")  # an edit keeps the reply, and its options
    assert options_for_turn(await live(rt, sid), second.turn.turn_id)

    await delete_from(rt, sid, reply)
    state = await live(rt, sid)
    assert options_for_turn(state, second.turn.turn_id) == [] and options_for_turn(state, first.turn.turn_id)
    assert await fresh(store, sid) == state

    await undo_last_turn(rt, sid)  # the second input, left without its reply
    assert options_for_turn(await live(rt, sid), first.turn.turn_id)
    await undo_last_turn(rt, sid)  # the first turn, reply and all
    state = await live(rt, sid)
    assert live_entries(state) == [] and await fresh(store, sid) == state
    await rt.aclose()


def _event(seq: int, type_: str, payload: dict[str, Any]) -> Event:
    return Event(session_id="s", seq=seq, type=type_, payload=payload, created_at="2026-01-01T00:00:00Z")


def _turn(seq: int, n: int, value: Any) -> list[Event]:
    call = {"id": f"c{n}", "name": "rp_commit_turn", "arguments": "{}"}
    meta = {"kind": "rp-agent/turn-commit", "turnId": f"t{n}", "extensions": {EXTENSION_KEY: value}}
    return [
        _event(seq, "assistant/message", {"messageId": f"m{n}", "content": [{"type": "text", "text": "x"}], "toolCalls": [call]}),
        _event(seq + 1, "tool/result", {"callId": f"c{n}", "name": "rp_commit_turn", "ok": True, "content": "{}", "meta": meta}),
    ]


def test_other_versions_are_ignored_and_the_state_is_capped() -> None:
    events = _turn(1, 0, {"v": 2, "options": ["future"]}) + _turn(3, 1, {"v": 1, "options": [1]})
    for n in range(2, MAX_ENTRIES + 4):
        events += _turn(2 * n + 1, n, {"v": 1, "options": [f"option {n}"]})
    state = fold(reply_options_projection, events)
    entries = live_entries(state)
    assert state["ignored"] == 2 and len(entries) == MAX_ENTRIES
    assert entries[-1] == {"messageId": f"m{MAX_ENTRIES + 3}", "turnId": f"t{MAX_ENTRIES + 3}", "options": [f"option {MAX_ENTRIES + 3}"]}
    assert entries[0]["turnId"] == "t4"  # the oldest went first
