"""Run-level paths of a Chat turn that the ten-turn plays do not walk: the parent answering in
plain text after the Writer, Writer failures followed by a retry in the same run, image
pass-through to the Writer, the refused Agent mode, and lore timed effects across undo and fork."""

from __future__ import annotations

import base64
import io
import json
from typing import Any

import pytest
from tests_support import core_runtime
from tests_support import sample_story as shared_sample_story

from roleplay.assets.seeds import ensure_seeds
from roleplay.assets.service import AssetService
from roleplay.core.commit import COMMIT_KIND
from roleplay.core.run import play_turn, prepare_run
from roleplay.core.runtime import RoleplayRuntime
from roleplay.core.session_create import StoryRequest, create_story
from roleplay.core.writer import WRITER_RESULT_KIND
from roleplay.errors import RpError
from roleplay.harness.models.routes import Route
from roleplay.harness.models.scripted import ScriptedModel
from roleplay.harness.models.types import ModelRequest
from roleplay.harness.store import EventStore
from roleplay.samples import SAMPLE_CARD, sample_card_bytes
from roleplay.state.events import state_document

pytestmark = pytest.mark.anyio
SCRIPTED = Route("scripted", "scripted")
WRITE = {"tool_calls": [{"name": "rp_write_turn", "arguments": {"action": "write"}}]}
DRAFT = "雾气漫过栏杆，林汐把灯罩擦得发亮。"


async def sample_story(store: EventStore, *replies: Any, **kw: Any) -> tuple[RoleplayRuntime, str, ScriptedModel]:
    rt, sid = await shared_sample_story(store, **kw)
    model = ScriptedModel(replies)
    rt.models[SCRIPTED.spec] = model
    return rt, sid, model


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


# -- a failed Writer, then a retry in the same run --------------------------------------------------


def director(writer_replies: list[Any]) -> Any:
    """The parent writes until a Writer call succeeds, then commits it; Writer requests (no tools)
    take the next of ``writer_replies`` (an exception is raised by the scripted model)."""

    def respond(request: ModelRequest) -> Any:
        if not request.tools:
            return writer_replies.pop(0)
        start = max(i for i, m in enumerate(request.messages) if m.role == "user" and "<roleplay_request" in m.text())
        tail = request.messages[start + 1 :]
        failed = {m.tool_call_id for m in tail if m.role == "tool" and m.text().startswith("Error")}
        written = [c.id for m in tail for c in m.tool_calls if c.name == "rp_write_turn" and c.id not in failed]
        if not written:
            return WRITE
        return {"tool_calls": [{"name": "rp_commit_turn", "arguments": {"references": {"writer": written[-1]}, "effects": []}}]}

    return respond


@pytest.mark.parametrize(
    "bad_writer, code",
    [
        (RpError("model.server_error", "the provider answered 500"), "writer.failed"),
        ({"text": "I can't continue this story.", "finish_reason": "content_filter"}, "writer.refused"),
        ("   \n", "writer.empty"),
    ],
    ids=["failure", "refusal", "empty"],
)
async def test_a_writer_failure_refusal_or_empty_draft_is_retried_in_the_same_run(store: EventStore, bad_writer: Any, code: str) -> None:
    rt, sid, model = await sample_story(store)
    model._responder = director([bad_writer, DRAFT])  # type: ignore[attr-defined]
    result = await play_turn(rt, sid, "我问起钟声。", parent_route=SCRIPTED)
    assert result.turn.outcome == "completed" and result.committed and result.turn.steps == 3
    writes = [r for r in result.turn.tool_results if r.name == "rp_write_turn"]
    assert [w.ok for w in writes] == [False, True] and writes[0].error["code"] == code  # type: ignore[index]
    assert result.writer is not None and result.writer.text == DRAFT and result.reply == DRAFT
    assert result.writer.call_id == result.turn.tool_results[1].call_id
    assert commit_of(result.turn.tool_results)["writer"]["callId"] == result.writer.call_id
    events = await rt.service.events(sid)
    metas = [e.payload.get("meta") or {} for e in events if e.type == "tool/result" and e.payload["name"] == "rp_write_turn"]
    assert [m.get("kind") for m in metas] == [None, WRITER_RESULT_KIND]  # only the draft forms an artifact
    children = await rt.service.children(sid)
    assert len(children) == 2 and metas[1]["childSessionId"] in {c.id for c in children}  # a fresh Writer each time


# -- image pass-through to the Writer ---------------------------------------------------------------


def png() -> dict[str, Any]:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (2, 2), (200, 30, 30)).save(buf, format="PNG")
    return {"type": "image", "mediaType": "image/png", "data": base64.b64encode(buf.getvalue()).decode("ascii")}


async def test_the_turn_images_reach_the_writer_after_its_prompt(store: EventStore) -> None:
    rt, sid, model = await sample_story(store)
    model._responder = director([DRAFT])  # type: ignore[attr-defined]
    image = png()
    result = await play_turn(rt, sid, "你看这张照片。", parent_route=SCRIPTED, images=[image])
    assert result.committed
    writer_request = next(r for r in model.requests if not r.tools)
    content = writer_request.messages[-1].content
    assert isinstance(content, list) and [b["type"] for b in content] == ["text", "image"]
    assert content[0]["text"] == result.prepared.build.writer_prompt and content[1] == image
    child_events = await rt.service.events(result.writer.child_session_id)  # type: ignore[union-attr]
    user = next(e for e in child_events if e.type == "user/message")
    assert user.payload["content"] == [{"type": "text", "text": result.prepared.build.writer_prompt}, image]
    # The parent's own input message keeps the image too (it is part of the story's history).
    turn_input = next(
        e for e in await rt.service.events(sid) if e.type == "user/message" and e.payload.get("turnId") == result.turn.turn_id
    )
    assert turn_input.payload["content"][1] == image


async def test_a_writer_route_without_image_support_fails_the_writer_not_the_run(store: EventStore) -> None:
    from roleplay.harness.models.types import Capabilities

    rt, sid, model = await sample_story(store)
    text_only = Route("scripted", "text-only")
    rt.models[text_only.spec] = ScriptedModel(capabilities=Capabilities(supports_images=False), model="text-only")
    rt.writer_default = text_only
    model._responder = director([])  # type: ignore[attr-defined]
    model.enqueue(WRITE, "那张照片我现在看不了。")
    result = await play_turn(rt, sid, "你看这张照片。", parent_route=SCRIPTED, images=[png()])
    write = result.turn.tool_results[0]
    assert not write.ok and write.error["code"] == "writer.failed"  # type: ignore[index]
    assert write.error["details"]["cause"] == "subagent.images_unsupported"  # type: ignore[index]
    assert not result.committed and result.writer is None


# -- a story created in Agent mode plays Agent turns (issue 15 lifted run.mode_unsupported) -----------


async def test_a_story_created_in_agent_mode_plays_agent_turns_and_switches_back(store: EventStore) -> None:
    from roleplay.core.profile import apply_profile
    from roleplay.core.sources import StoreAssetReader

    rt, sid, model = await sample_story(store, mode="agent")
    base = director([DRAFT])

    def agent(request: ModelRequest) -> Any:
        reply = base(request)
        commits = isinstance(reply, dict) and any(c["name"] == "rp_commit_turn" for c in reply.get("tool_calls", []))
        return {**reply, "text": DRAFT} if commits else reply  # Agent mode: the parent writes the body

    model._responder = agent  # type: ignore[attr-defined]
    result = await play_turn(rt, sid, "我推开门。", parent_route=SCRIPTED)
    assert result.prepared.mode == "agent" and result.committed and commit_of(result.turn.tool_results)["mode"] == "agent"
    # Switching the session back to Chat plays Chat turns.
    switched = await apply_profile(rt.service, sid, {"patch": {"runtime": {"executionMode": "chat"}}}, StoreAssetReader(rt.assets))
    assert switched.applied
    model._responder = director([DRAFT])  # type: ignore[attr-defined]
    result = await play_turn(rt, sid, "我推开门。", parent_route=SCRIPTED)
    assert result.prepared.mode == "chat" and result.committed


# -- lore timed effects follow the surface: undo retracts them, a branch restores them ----------------

BELLS = {"entries": {"0": {"uid": 0, "key": ["钟声"], "content": "BELL-LORE: the bells ring from the sunken Morning Star.",
                           "sticky": 4, "scanDepth": 1, "comment": "bells"}}}  # fmt: skip
DEMO = Route("demo", "demo")


async def bells_story(store: EventStore) -> tuple[RoleplayRuntime, str]:
    rt = core_runtime(store)
    await ensure_seeds(rt.assets)
    service = AssetService(store)
    card = (await service.import_file(sample_card_bytes(), SAMPLE_CARD)).asset_id
    book = (await service.import_file(json.dumps(BELLS).encode("utf-8"), "bells.json")).asset_id
    record, _ = await create_story(rt, StoryRequest(card=card, lorebooks=[book]))
    return rt, record.id


async def bells_next(rt: RoleplayRuntime, sid: str) -> bool:
    """Whether the next turn, whose input does not name the bells, still injects their entry."""
    prepared = await prepare_run(rt, sid, "我们安静地喝茶。", parent_route=DEMO)
    return "BELL-LORE" in prepared.build.writer_prompt


async def test_lore_sticky_effects_are_retracted_by_undo_and_restored_on_a_branch(store: EventStore) -> None:
    from roleplay.core.message_actions import undo_last_turn

    rt, sid = await bells_story(store)
    assert not await bells_next(rt, sid)  # scan depth 1: only the current input can key the entry
    first = await play_turn(rt, sid, "远处传来钟声。", parent_route=DEMO)
    assert first.committed and "BELL-LORE" in first.prepared.build.writer_prompt
    after_first = await rt.store.head(sid)
    second = await play_turn(rt, sid, "我们安静地喝茶。", parent_route=DEMO)
    assert "BELL-LORE" in second.prepared.build.writer_prompt  # sticky, not keyed
    await undo_last_turn(rt, sid)
    assert await bells_next(rt, sid)  # turn 1's sticky is still on the surface
    await undo_last_turn(rt, sid)
    assert not await bells_next(rt, sid)  # undoing the turn that started it retracts it
    # A branch from the end of turn 1 has turn 1's run context, so its sticky effect is back.
    branch = await rt.service.fork(sid, after_first)
    assert branch.head_seq == after_first
    assert await bells_next(rt, branch.id)
    played = await play_turn(rt, branch.id, "我们安静地喝茶。", parent_route=DEMO)
    assert played.committed and "BELL-LORE" in played.prepared.build.writer_prompt
    assert not await bells_next(rt, sid)  # the source is unaffected
