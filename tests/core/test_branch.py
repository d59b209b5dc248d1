"""Branch at a business anchor: the branch folds exactly the state held at that anchor, the source
is untouched, and branches list as a tree."""

from __future__ import annotations

import json
from typing import Any

import pytest

from roleplay.core.branch import branch, branch_tree, render_tree
from roleplay.core.message_actions import edit_message
from roleplay.core.run import play_turn
from roleplay.core.runtime import RoleplayRuntime
from roleplay.core.turn_surface import turn_surface_projection, turns_view
from roleplay.errors import RpError
from roleplay.harness.events import EventDraft
from roleplay.harness.models.routes import Route
from roleplay.harness.store import EventStore
from roleplay.state.events import activity_document, state_document
from roleplay.testing.story_scripts import CountingStory
from tests_support import sample_story

pytestmark = pytest.mark.anyio
SCRIPTED = Route("scripted", "scripted")


async def folds(rt: RoleplayRuntime, sid: str) -> dict[str, Any]:
    tracker = (await rt.service.projection(sid, "rp/state")).state
    nodes = (await rt.service.projection(sid, "harness/surface")).state["nodes"]
    out = {"state": state_document(tracker), "activity": activity_document(tracker), "surface": [(n["id"], n["content"]) for n in nodes]}
    for name in ("rp/reply-options", "rp/summary"):
        if name in rt.service.projections.names():
            out[name] = (await rt.service.projection(sid, name)).state
    return json.loads(json.dumps(out))


async def test_a_branch_from_every_anchor_of_a_20_turn_story_restores_its_state(store: EventStore) -> None:
    rt, sid = await sample_story(store)
    rt.models[SCRIPTED.spec] = CountingStory(discussion_every=4).model()
    at_anchor: dict[str, dict[str, Any]] = {}
    for n in range(20):
        await play_turn(rt, sid, f"第{n + 1}句：我继续往前走。", parent_route=SCRIPTED)
        last = turns_view((await rt.service.projection(sid, turn_surface_projection)).state)[-1]
        at_anchor[last["body"]["messageId"]] = await folds(rt, sid)
    source_head = await store.head(sid)
    source_folds = await folds(rt, sid)
    view = turns_view((await rt.service.projection(sid, turn_surface_projection)).state)
    assert {t["outcome"] for t in view[1:]} == {"committed", "uncommitted"}
    for turn in view[1:]:
        made = await branch(rt, sid, at_message=turn["body"]["messageId"])
        assert made.anchor_seq == turn["anchorSeq"] and made.record.forked_from == sid
        assert await folds(rt, made.record.id) == at_anchor[turn["body"]["messageId"]], turn["turnId"]
    assert await store.head(sid) == source_head and await folds(rt, sid) == source_folds  # the source is untouched
    tree = await branch_tree(rt, sid)
    assert tree["sessionId"] == sid and tree["current"] and len(tree["branches"]) == 20
    assert render_tree(tree)[0].startswith(sid)
    await rt.aclose()


async def test_branch_defaults_to_the_last_turn_keeps_later_edits_and_nests(store: EventStore) -> None:
    rt, sid = await sample_story(store)
    rt.models[SCRIPTED.spec] = CountingStory().model()
    await play_turn(rt, sid, "我推开铁门。", parent_route=SCRIPTED)
    body = turns_view((await rt.service.projection(sid, turn_surface_projection)).state)[-1]["body"]["messageId"]
    await edit_message(rt, sid, body, "改过的回复。")
    first = await branch(rt, sid)
    assert first.point.at_seq == await store.head(sid)  # the edit after the turn is kept
    assert await folds(rt, first.record.id) == await folds(rt, sid)
    await play_turn(rt, first.record.id, "在分支里继续。", parent_route=SCRIPTED)
    nested = await branch(rt, first.record.id)
    tree = await branch_tree(rt, nested.record.id)
    assert tree["sessionId"] == sid
    assert tree["branches"][0]["sessionId"] == first.record.id
    assert tree["branches"][0]["branches"][0] == {**tree["branches"][0]["branches"][0], "sessionId": nested.record.id, "current": True}
    lines = render_tree(tree)
    assert len(lines) == 3 and "← this story" in lines[2]
    await rt.aclose()


async def test_branch_refusals(store: EventStore) -> None:
    rt, sid = await sample_story(store, opening="skip")
    with pytest.raises(RpError) as exc:
        await branch(rt, sid)
    assert exc.value.code == "branch.no_anchor"
    head = await store.head(sid)
    drafts = [
        EventDraft("turn/start", {"turnId": "turn_open", "mode": "chat"}),
        EventDraft("user/message", {"messageId": "msg_open", "content": [{"type": "text", "text": "半句"}], "turnId": "turn_open"}),
    ]
    await rt.service.append(sid, drafts, expected_seq=head)
    with pytest.raises(RpError) as exc:
        await branch(rt, sid, at_message="msg_open")
    assert exc.value.code == "branch.turn_open"
    await rt.aclose()


async def test_branch_before_and_after_a_checkpoint(store: EventStore) -> None:
    rt, sid = await sample_story(store)
    rt.models[SCRIPTED.spec] = CountingStory().model()
    states = []
    for text in ("我推开铁门。", "我帮她擦铜镜。"):
        await play_turn(rt, sid, text, parent_route=SCRIPTED)
        states.append(await folds(rt, sid))
    first, second = turns_view((await rt.service.projection(sid, turn_surface_projection)).state)[1:]
    nodes = (await rt.service.projection(sid, "harness/surface")).state["nodes"]
    covered = [s for n in nodes if n["seq"] <= first["endSeq"] for s in [n["seq"], *n.get("replaces", [])]]
    head = await store.head(sid)
    checkpoint = {"checkpointId": "cp_1", "summary": "前情：你推开了铁门。", "sourceEventSeqs": covered}
    await rt.service.append(sid, [EventDraft("compaction/checkpoint", checkpoint)], expected_seq=head)
    with pytest.raises(RpError) as exc:
        await branch(rt, sid, at_message=first["body"]["messageId"])
    assert exc.value.code == "message.not_found"  # a compacted message is not a target
    before = await branch(rt, sid, at_turn=first["turnId"])
    assert await folds(rt, before.record.id) == states[0]  # the original messages, no summary
    assert not any(n.get("kind") == "compaction/summary" for n in (await rt.service.surface(before.record.id))["nodes"])
    after = await branch(rt, sid, at_message=second["body"]["messageId"])
    kept = (await rt.service.surface(after.record.id))["nodes"]
    assert kept[0]["kind"] == "compaction/summary" and (await folds(rt, after.record.id))["state"] == states[1]["state"]
    with pytest.raises(RpError) as exc:
        await branch(rt, sid, at_turn="turn_nope")
    assert exc.value.code == "turn.not_found"
    await rt.aclose()
