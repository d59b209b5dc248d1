"""Run-level paths of a Chat turn that the ten-turn plays do not walk: the parent answering in
plain text after the Writer, Writer failures followed by a retry in the same run, image
pass-through to the Writer, the refused Agent mode, and lore timed effects across undo and fork."""

from __future__ import annotations

from typing import Any

import pytest

from roleplay.assets.seeds import ensure_seeds
from roleplay.assets.service import AssetService
from roleplay.core.commit import COMMIT_KIND
from roleplay.core.run import play_turn
from roleplay.core.runtime import RoleplayRuntime
from roleplay.core.session_create import StoryRequest, create_story
from roleplay.harness.models.routes import Route
from roleplay.harness.models.scripted import ScriptedModel
from roleplay.harness.store import EventStore
from roleplay.samples import SAMPLE_CARD, sample_card_bytes
from roleplay.state.events import state_document

pytestmark = pytest.mark.anyio
SCRIPTED = Route("scripted", "scripted")
WRITE = {"tool_calls": [{"name": "rp_write_turn", "arguments": {"action": "write"}}]}
DRAFT = "雾气漫过栏杆，林汐把灯罩擦得发亮。"


async def sample_story(store: EventStore, *replies: Any, **kw: Any) -> tuple[RoleplayRuntime, str, ScriptedModel]:
    rt = RoleplayRuntime.create(store)
    await ensure_seeds(rt.assets)
    card = (await AssetService(store).import_file(sample_card_bytes(), SAMPLE_CARD)).asset_id
    record, _ = await create_story(rt, StoryRequest(card=card, **kw))
    model = ScriptedModel(replies)
    rt.models[SCRIPTED.spec] = model
    return rt, record.id, model


async def story_value(rt: RoleplayRuntime, sid: str) -> dict[str, Any]:
    return state_document((await rt.service.projection(sid, "rp/state")).state)["namespaces"]["story"]["value"]


def commit_of(turn_results: list[Any]) -> dict[str, Any]:
    ok = [r for r in turn_results if r.name == "rp_commit_turn" and r.ok]
    assert len(ok) == 1
    return ok[0].meta  # type: ignore[no-any-return]


# -- the parent answers in plain text after the Writer ---------------------------------------------


async def test_a_plain_parent_reply_after_the_writer_delivers_and_commits_the_draft(store: EventStore) -> None:
    rt, sid, _ = await sample_story(store, WRITE, DRAFT, {"text": "好的，写完了。", "reasoning": "done"})
    before = await story_value(rt, sid)
    async with store.subscribe(sid) as sub:
        result = await play_turn(rt, sid, "我走上灯室。", parent_route=SCRIPTED)
        chunks = []
        while True:
            try:
                note = await sub.next(timeout=0.2)
            except TimeoutError:
                break
            if note.kind == "chunk":
                chunks.append(note.data["text"])  # type: ignore[index]
    # Chat: the Writer's text is the only body, delivered and committed without effects.
    assert result.turn.outcome == "completed" and result.committed
    assert result.reply == DRAFT and "".join(chunks) == DRAFT
    meta = commit_of(result.turn.tool_results)
    assert meta["kind"] == COMMIT_KIND and meta["effects"] == []
    assert meta["writer"]["callId"] == result.writer.call_id  # type: ignore[union-attr]
    diagnostic = next(d for d in meta["diagnostics"] if d["code"] == "run.parent_did_not_commit")
    assert diagnostic["details"]["parentText"] == "好的，写完了。"  # the parent's words are not lost
    assert any(d["code"] == "run.parent_did_not_commit" for d in result.diagnostics)
    assert await story_value(rt, sid) == before
    # The reply message is a writing reply carrying the draft, with no parent reasoning.
    events = await rt.service.events(sid)
    reply = [e for e in events if e.type == "assistant/message" and e.payload.get("toolCalls")][-1]
    assert [b for b in reply.payload["content"] if b["type"] == "text"] == [{"type": "text", "text": DRAFT}]
    assert all(b["text"] == "" for b in reply.payload["content"] if b["type"] == "reasoning")
    assert reply.payload["messageId"] in (await rt.service.projection(sid, "rp/replies")).state["writing"]
    # The next turn sees the draft as story history.
    nxt = await play_turn(rt, sid, "我点亮了灯。", parent_route=Route("demo", "demo"))
    assert DRAFT in nxt.prepared.build.writer_prompt


async def test_a_plain_reply_without_a_writer_still_commits_nothing(store: EventStore) -> None:
    rt, sid, _ = await sample_story(store, "灯塔有一百零八级台阶。")
    result = await play_turn(rt, sid, "灯塔有多少级台阶？", parent_route=SCRIPTED)
    assert result.turn.outcome == "completed" and not result.committed and result.reply == "灯塔有一百零八级台阶。"
    assert not any(d["code"] == "run.parent_did_not_commit" for d in result.diagnostics)
